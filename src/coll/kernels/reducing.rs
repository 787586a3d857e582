//! The reducing kernels (all-reduce low-latency, one-shot and two-shot, reduce-scatter and its
//! low-latency form), each one generic kernel over the collectives' element types, the
//! reduction a `#[comptime]` parameter (each its own specialization). The shared pieces are
//! `pieces.rs`'s.

use super::pieces::*;
use crate::prelude::*;

/// Low latency (LL): block `b` all-reduces elements `b * per_block ..` (at most `per_block` of
/// them) with `team_all_reduce_block` over its own `region` words of `scratch`
/// (`pgas::coll::device_scratch_len` of `per_block` elements): each PE stores its data, with the
/// call's flag in every 8-byte word, into every peer's scratch and polls its own, so a call is
/// one NVLink crossing and no handshake. Safe in place. The call counters live in `scratch`.
#[pgas_kernel(max_threads = 512)]
pub fn low_latency<T: Elem>(
    team: Team, dst: &mut SymTensor<T>, src: &SymTensor<T>, scratch: &mut SymTensor<u64>,
    region: u32, per_block: u32, #[comptime] op: ReduceOp,
) {
    let blk = block_idx_x() as usize;
    let len = dst.len();
    let lo = min(blk * per_block as usize, len);
    let hi = min(lo + per_block as usize, len);
    let at = blk * region as usize;
    team_all_reduce_block(team, &mut dst[lo..hi], &src[lo..hi], &mut scratch[at], op);
}

/// Low-latency reduce-scatter: block `b` stages elements `lo..lo + w` (`per_block` from
/// `b * per_block`) of each of `src`'s chunks (`m` = `dst.len()` elements each) in shared
/// memory (`sb`: `src`'s byte offset modulo 16), chunk `q`'s at `q * wr` (`w` rounded up to 16
/// bytes), sends chunk `q`'s to team rank `q` and reduces what every rank sent for this PE's
/// chunk with `team_reduce_scatter_block` over region `b` of `scratch` (`region` words each; it
/// shares the all-reduce's call counters), and copies the result into `dst` (`db`: `dst`'s byte
/// offset modulo 16). Each element crosses NVLink once, to the PE that reduces it. Dynamic
/// shared memory: `(n + 1) wr` elements.
#[pgas_kernel(max_threads = 512)]
pub fn low_latency_reduce_scatter<T: Elem>(
    team: Team, dst: &mut SymTensor<T>, src: &SymTensor<T>, scratch: &mut SymTensor<u64>, n: u32,
    sb: u32, db: u32, region: u32, per_block: u32, #[comptime] op: ReduceOp,
) {
    let blk = block_idx_x() as usize;
    let nn = n as usize;
    let m = dst.len();
    let lo = min(blk * per_block as usize, m);
    let w = min(lo + per_block as usize, m) - lo;
    let at = blk * region as usize;
    if w == m {
        // One block takes every chunk whole: they are contiguous already.
        team_reduce_scatter_block(team, &mut dst[0..m], &src[0..nn * m], &mut scratch[at], op);
        return;
    }
    let wr = whole_vectors::<T>(w);
    let g = dyn_shared::<T>();
    for q in 0..nn {
        block_copy::<T>(g, q * wr, 0, src, q * m + lo, sb, w);
    }
    team_reduce_scatter_block(
        team,
        &mut g[nn * wr..(nn + 1) * wr],
        &g[0..nn * wr],
        &mut scratch[at],
        op,
    );
    block_copy::<T>(dst, lo, db, g, nn * wr, 0, w);
}

/// One-shot: every PE loads every peer's `src` over NVLink and reduces into its own `dst`
/// (`reduce_run`). Latency: one flag round trip each side of one pass over the data. With
/// `chunk` set, the reduce-scatter (two-shot's first half): team rank `r` reduces only chunk `r`
/// of every PE's `src` (elements `r * dst.len()` on, `dst.len()` of them), so each PE moves
/// `(n - 1) / n` of `src` over NVLink. `sb`, `db`: the byte offsets of `src` and `dst` modulo
/// 16 (the same on every PE).
#[pgas_kernel(max_threads = 512)]
pub fn one_shot<T: Elem>(
    dst: &mut SymTensor<T>, src: &SymTensor<T>, hs: Handshake, sb: u32, db: u32, chunk: u32,
    #[comptime] op: ReduceOp,
) {
    let e = enter(hs);
    // Where the part of `src` reduced starts.
    let so = if chunk != 0 {
        hs.me as usize * dst.len()
    } else {
        0
    };
    reduce_run::<T>(dst, db, src, so, sb, 0, 1, false, hs.pes, hs.n, hs.me, op);
    leave(hs, e, false);
}

/// Two-shot: team rank `r` reduces share `r` of the data (loads from every peer), then stores
/// the result into every peer's `dst` (including its own), the vectors and the elements they
/// leave each shared by rank (`reduce_run`). Each PE moves `2 (n - 1) / n` of the data over
/// NVLink instead of one-shot's `n - 1`. Safe in place (`dst` and `src` the same buffer): only
/// rank `r` reads or writes share `r`, and each thread loads all it reduces before it stores.
#[pgas_kernel(max_threads = 512)]
pub fn two_shot<T: Elem>(
    dst: &mut SymTensor<T>, src: &SymTensor<T>, hs: Handshake, sb: u32, db: u32,
    #[comptime] op: ReduceOp,
) {
    let e = enter(hs);
    reduce_run::<T>(
        dst, db, src, 0, sb, hs.me, hs.n, true, hs.pes, hs.n, hs.me, op,
    );
    leave(hs, e, true);
}

/// Two-shot by peer stores (the pushed two-shot): rank `r` stores chunk `q` of its `src` into
/// slot `r` of rank `q`'s `stage` (`n` slots of `m` elements), fences and signals (`2e - 1`);
/// once every rank's slot has landed it reduces its own chunk from local memory (its `src`,
/// then the slots of ranks `me + 1, me + 2, ..`, the order of `two_shot`, so the results keep
/// their bits) and stores the result into every PE's `dst`; then fences, signals (`2e`) and
/// waits for every rank's. No handshake before the data moves: `stage` is this kernel's
/// alone (`docs/coll.md`, "Synchronization", says why that is safe). `m` (`dst.len() / n`
/// rounded up to whole vectors) is a multiple of `T::LANES`; `dst`, `src` and `stage` start
/// on 16-byte boundaries (the launch checks). Safe in place.
#[pgas_kernel(max_threads = 512)]
pub fn two_shot_push<T: Elem>(
    dst: &mut SymTensor<T>, src: &SymTensor<T>, stage: &mut SymTensor<T>, hs: Handshake, m: u32,
    #[comptime] op: ReduceOp,
) {
    let blk = block_idx_x() as usize;
    let nn = hs.n as usize;
    let mine = hs.me as usize;
    let e = hs.epochs[blk] + 1;
    let len = dst.len();
    let mm = m as usize;
    let nv = mm / T::LANES;
    let stride = grid_threads();
    let gt = global_thread_idx();
    // Chunk `q` of `src` into slot `me` of rank `q`'s stage (a partial last vector element by
    // element).
    for k in 1..nn {
        let q = (mine + k) % nn;
        let p = stage.peer(hs.pes[q]);
        let mut v = gt;
        while v < nv {
            let j = v * T::LANES;
            let i = q * mm + j;
            if i + T::LANES <= len {
                store_vec16(&mut p[mine * mm + j], load_vec16(&src[i]));
            } else {
                let mut s = i;
                while s < len {
                    p[mine * mm + s - q * mm] = src[s];
                    s += 1;
                }
            }
            v += stride;
        }
    }
    // Release this block's slots to every rank, then acquire theirs.
    push_signal(hs.sig, hs.pes, hs.n, mine, 2 * e - 1);
    // This rank's chunk, reduced from local memory and stored into every PE's `dst`.
    let c = mine * mm;
    let mut v = gt;
    while v < nv {
        let j = v * T::LANES;
        let i = c + j;
        if i + T::LANES <= len {
            let mut x = load_vec16(&src[i]);
            for k in 1..nn {
                let y = load_vec16(&stage[((mine + k) % nn) * mm + j]);
                for l in 0..T::LANES {
                    let r = combine(op, vec16_get(x, l) as T::Acc, vec16_get(y, l) as T::Acc);
                    x = vec16_set(x, l, r as T);
                }
            }
            for k in 0..nn {
                store_vec16(&mut dst.peer(hs.pes[(mine + k) % nn])[i], x);
            }
        } else {
            let mut s = i;
            while s < len {
                let mut a = src[s] as T::Acc;
                for k in 1..nn {
                    a = combine(op, a, stage[((mine + k) % nn) * mm + s - c] as T::Acc);
                }
                store_everywhere::<T>(dst, s, a as T, hs.pes, hs.n, hs.me, hs.n);
                s += 1;
            }
        }
        v += stride;
    }
    push_signal(hs.sig, hs.pes, hs.n, mine, 2 * e);
    if thread_idx_x() == 0 {
        hs.epochs[blk] = e;
    }
}

/// Two-shot for the middle sizes (a chunk of at most `Comm::low_latency_max_bytes`; `src` and
/// `dst` start on 16-byte boundaries): team rank `r` reduces its chunk by peer loads after the
/// entry handshake, as `two_shot`, but sends the result over the low-latency lines
/// (`team_all_gather_block`, region `b` of the scratch, whose call counters it shares with
/// `low_latency`) instead of storing it into the peers' `dst`, and has no leave handshake:
/// block `b`'s lines from a peer say that the peer's block `b` has finished its loads from this
/// PE's `src`. Chunks are `m` elements (`dst.len() / n` rounded up to 16 bytes; the last may be
/// short or empty); block `b` takes elements `lo..lo + w` (`per_block` from `b * per_block`) of
/// each, reduced into shared memory at `n * wr` (`w` rounded up to 16 bytes) and gathered below
/// it. Safe in place: a PE writes its `dst` only after every peer's lines.
#[pgas_kernel(max_threads = 512)]
pub fn two_shot_ll<T: Elem>(
    team: Team, dst: &mut SymTensor<T>, src: &SymTensor<T>, scratch: &mut SymTensor<u64>,
    hs: Handshake, m: u32, region: u32, per_block: u32, #[comptime] op: ReduceOp,
) {
    let blk = block_idx_x() as usize;
    let t = thread_idx_x() as usize;
    let nn = hs.n as usize;
    let e = enter(hs);
    let len = dst.len();
    let mm = m as usize;
    let lo = min(blk * per_block as usize, mm);
    let w = min(lo + per_block as usize, mm) - lo;
    let wr = whole_vectors::<T>(w);
    let g = dyn_shared::<T>();
    // This rank's window of its chunk, reduced over the PEs: whole vectors (a thread takes
    // vector `v` and `v + half`), then the elements past the last one.
    let c = hs.me as usize * mm + lo;
    let valid = if c < len { min(w, len - c) } else { 0 };
    let nv = valid / T::LANES;
    let half = (nv + 1) / 2;
    let mut v = t;
    while v < half {
        let i0 = c + v * T::LANES;
        let i1 = second_of_pair::<T>(i0, v, half, nv);
        let d0 = nn * wr + v * T::LANES;
        reduce_pair::<T>(
            dst,
            d0,
            nn * wr + (i1 - c),
            2,
            src,
            i0,
            i1,
            hs.pes,
            hs.n,
            hs.me,
            op,
        );
        v += block_dim_x() as usize;
    }
    let mut q = nv * T::LANES + t;
    while q < valid {
        g[nn * wr + q] = reduce_one::<T>(src, c + q, hs.pes, hs.n, hs.me, op) as T;
        q += block_dim_x() as usize;
    }
    team_all_gather_block(
        team,
        &mut g[0..nn * w],
        &g[nn * wr..nn * wr + w],
        &mut scratch[blk * region as usize],
    );
    // `dst` starts on a 16-byte boundary (the launch checks).
    for r in 0..nn {
        let ds = r * mm + lo;
        if ds < len {
            block_copy::<T>(dst, ds, 0, g, r * w, 0, min(w, len - ds));
        }
    }
    if t == 0 {
        hs.epochs[blk] = e;
    }
}
