//! The data-movement kernels (all-gather and all-to-all by peer stores, by peer loads and by
//! the low-latency protocol, broadcast, all-to-all-v), each one generic kernel over
//! `T: Unsigned`: they only copy, so every element type of a size shares the instance of that
//! size (the host passes its buffers as unsigned integers of the same width). The shared
//! pieces are `pieces.rs`'s.

use super::pieces::*;
use crate::prelude::*;

/// Low-latency all-gather: block `b` takes elements `lo..hi` (`per_block` from `b * per_block`)
/// of every team PE's `src` into shared memory (the launch's dynamic shared memory, `n` times
/// `per_block` elements) with `team_all_gather_block` over region `b` of the communicator's
/// low-latency scratch (`region` words each; the protocol of `low_latency`, which shares the
/// regions' call counters), then stores rank `r`'s into chunk `r` of `dst` (`db`: `dst`'s byte
/// offset modulo 16). One NVLink crossing and no handshake. Safe in place (`src` being this
/// rank's chunk of `dst`: what lands there is what it held).
#[pgas_kernel(max_threads = 512)]
pub fn low_latency_gather<T: Unsigned>(
    team: Team, dst: &mut SymTensor<T>, src: &SymTensor<T>, scratch: &mut SymTensor<u64>, n: u32,
    db: u32, region: u32, per_block: u32,
) {
    let blk = block_idx_x() as usize;
    let len = src.len();
    let lo = min(blk * per_block as usize, len);
    let w = min(lo + per_block as usize, len) - lo;
    let g = dyn_shared::<T>();
    team_all_gather_block(
        team,
        &mut g[0..n as usize * w],
        &src[lo..lo + w],
        &mut scratch[blk * region as usize],
    );
    for r in 0..n as usize {
        block_copy::<T>(dst, r * len + lo, db, g, r * w, 0, w);
    }
}

/// Low-latency all-to-all: block `b` stages elements `lo..lo + w` (`per_block` from
/// `b * per_block`) of each of `src`'s `n` chunks (`m` = `len / n` elements each) in shared
/// memory (`sb`: `src`'s byte offset modulo 16), chunk `q`'s at `q * wr` (`w` rounded up to 16
/// bytes), sends chunk `q`'s to team rank `q` with `team_all_to_all_block` over region `b` of
/// the low-latency scratch (`region` words each), and stores what rank `r` sent into chunk `r`
/// of `dst` (`db`: `dst`'s byte offset modulo 16). Each element crosses NVLink once, to the PE
/// it is for; no handshake. Dynamic shared memory: `2 n wr` elements.
#[pgas_kernel(max_threads = 512)]
pub fn low_latency_all_to_all<T: Unsigned>(
    team: Team, dst: &mut SymTensor<T>, src: &SymTensor<T>, scratch: &mut SymTensor<u64>, n: u32,
    sb: u32, db: u32, region: u32, per_block: u32,
) {
    let blk = block_idx_x() as usize;
    let nn = n as usize;
    let m = src.len() / nn;
    let lo = min(blk * per_block as usize, m);
    let w = min(lo + per_block as usize, m) - lo;
    if w == m {
        // One block takes every chunk whole: they are contiguous already, and the staging
        // would only add a pass before the send (measurably slower at 8 B).
        team_all_to_all_block(
            team,
            &mut dst[0..nn * m],
            &src[0..nn * m],
            &mut scratch[blk * region as usize],
        );
        return;
    }
    let wr = whole_vectors::<T>(w);
    let g = dyn_shared::<T>();
    for q in 0..nn {
        block_copy::<T>(g, q * wr, 0, src, q * m + lo, sb, w);
    }
    team_all_to_all_block(
        team,
        &mut g[nn * wr..2 * nn * wr],
        &g[0..nn * wr],
        &mut scratch[blk * region as usize],
    );
    for r in 0..nn {
        block_copy::<T>(dst, r * m + lo, db, g, (nn + r) * wr, 0, w);
    }
}

/// Low-latency broadcast: block `b` takes elements `lo..hi` (`per_block` from `b * per_block`)
/// of team rank `root`'s `src` into every PE's `dst` over region `b` of the low-latency scratch
/// (`region` words each; the protocol of `low_latency`): with `team_broadcast_block`
/// (`relay == 0`: the root's lines to every peer, one crossing) or `team_broadcast_relay_block`
/// (a chunk to each other rank, which passes it on: two crossings, one copy over the root's
/// links). No handshake, no staging in shared memory. Safe in place.
#[pgas_kernel(max_threads = 512)]
pub fn low_latency_broadcast<T: Unsigned>(
    team: Team, dst: &mut SymTensor<T>, src: &SymTensor<T>, scratch: &mut SymTensor<u64>,
    root: u32, relay: u32, region: u32, per_block: u32,
) {
    let blk = block_idx_x() as usize;
    let len = src.len();
    let lo = min(blk * per_block as usize, len);
    let hi = min(lo + per_block as usize, len);
    let at = blk * region as usize;
    if relay != 0 {
        team_broadcast_relay_block(
            team,
            &mut dst[lo..hi],
            &src[lo..hi],
            &mut scratch[at],
            root as i32,
        );
    } else {
        team_broadcast_block(
            team,
            &mut dst[lo..hi],
            &src[lo..hi],
            &mut scratch[at],
            root as i32,
        );
    }
}

/// All-gather (two-shot's second half): team rank `r` stores its `src` into chunk `r` of every
/// PE's `dst` (elements `r * src.len()` on), its own included (`spread`). `sb`, `db`: the byte
/// offsets of `src` and `dst` modulo 16 (`dst`'s the same on every PE). Each PE moves `n - 1`
/// copies of its `src` over NVLink.
#[pgas_kernel(max_threads = 512)]
pub fn all_gather<T: Unsigned>(
    dst: &mut SymTensor<T>, src: &SymTensor<T>, hs: Handshake, sb: u32, db: u32,
) {
    let e = enter(hs);
    spread::<T>(
        dst,
        hs.me as usize * src.len(),
        db,
        src,
        sb,
        0,
        1,
        hs.pes,
        hs.n,
        hs.me,
        hs.n,
    );
    leave(hs, e, true);
}

/// Broadcast, two-shot (scatter, then all-gather): the chunk owners (every rank on 2 PEs; on
/// more, every rank but the root) each load their share of the root's `src` and store it into
/// every PE's `dst` but the root's (`spread`), whose `dst` the root copies itself (`copy`: `dst`
/// is not `src`). So the root's links carry one copy of the data in all and the owners' SMs
/// share the stores. On 2 PEs both ranks own a half, the root storing its own into the peer.
/// `sb`, `db`: the byte offsets of `src` and `dst` modulo 16 (the same on every PE). Safe in
/// place (only the owner of a share reads it from the root's `src`, and no one stores into the
/// root's `dst` but the root or, on 2 PEs, the owner of the share, with what it read).
#[pgas_kernel(max_threads = 512)]
pub fn broadcast_two_shot<T: Unsigned>(
    dst: &mut SymTensor<T>, src: &SymTensor<T>, hs: Handshake, root: u32, copy: u32, sb: u32,
    db: u32,
) {
    let e = enter(hs);
    // The root owns no share where more than one other rank can.
    let apart = hs.n > 2;
    if apart && hs.me == root {
        if copy != 0 {
            copy_run::<T>(dst, 0, db, src, 0, sb, dst.len());
        }
    } else {
        let owner = if apart && hs.me > root {
            hs.me - 1
        } else {
            hs.me
        };
        let owners = if apart { hs.n - 1 } else { hs.n };
        let skip = if apart { root } else { hs.n };
        let rs = src.peer(hs.pes[root as usize]);
        spread::<T>(dst, 0, db, rs, sb, owner, owners, hs.pes, hs.n, hs.me, skip);
    }
    leave(hs, e, true);
}

/// The pulling forms (`Algorithm::OneShot`) of the all-gather, the all-to-all and the
/// broadcast: this PE loads a chunk of `src` from each of the `count` team ranks `r` from
/// `first` on into chunk `r - first` of its own `dst` (its own `src` included): the whole
/// `src` (`personal == 0`) or chunk `me` (`m = src.len() / n` elements from `me * m`). The
/// all-gather and the all-to-all take every rank (`first` 0, `count` `n`), the broadcast the
/// root's whole `src` (`count` 1, or 0 on the root in place: nothing to copy), whose outgoing
/// links then carry `n - 1` copies. No peer stores, so the leave needs no release fence; the
/// entry says each peer's `src` is ready, the leave that no PE reads it any more. Each warp
/// starts at another rank (`gt / 32`), so that this PE loads from every peer, and copies its
/// own chunk, at once. `sb`, `db`: the byte offsets of `src` and `dst` modulo 16 (the same on
/// every PE).
#[pgas_kernel(max_threads = 512)]
pub fn pull_chunks<T: Unsigned>(
    dst: &mut SymTensor<T>, src: &SymTensor<T>, hs: Handshake, sb: u32, db: u32, personal: u32,
    first: u32, count: u32,
) {
    let e = enter(hs);
    // The all-to-all's chunk `me` of each rank's `src`, or the whole `src`.
    let len = src.len();
    let m = if personal != 0 {
        len / hs.n as usize
    } else {
        len
    };
    let so = if personal != 0 { hs.me as usize * m } else { 0 };
    let gt = global_thread_idx();
    for k in 0..count as usize {
        let j = (gt / 32 + k) % count as usize;
        let p = src.peer(hs.pes[first as usize + j]);
        copy_run::<T>(dst, j * m, db, p, so, sb, m);
    }
    leave(hs, e, false);
}

/// All-to-all: chunk `q` of team rank `r`'s `src` (`m = src.len() / n` elements from `q * m`)
/// lands as chunk `r` of rank `q`'s `dst`, by peer stores. Each warp takes the ranks in its own
/// order (from `me + 1 + gt / 32`), so that the copy of this rank's own chunk (local memory)
/// runs beside the stores to the peers instead of after them, and the PEs spread over the
/// links. `sb`, `db`: the byte offsets of `src` and `dst` modulo 16 (`dst`'s is the same on
/// every PE).
#[pgas_kernel(max_threads = 512)]
pub fn all_to_all<T: Unsigned>(
    dst: &mut SymTensor<T>, src: &SymTensor<T>, hs: Handshake, sb: u32, db: u32,
) {
    let nn = hs.n as usize;
    let e = enter(hs);
    let m = src.len() / nn;
    let gt = global_thread_idx();
    for k in 1..nn + 1 {
        let qr = (hs.me as usize + gt / 32 + k) % nn;
        let p = dst.peer(hs.pes[qr]);
        copy_run::<T>(p, hs.me as usize * m, db, src, qr * m, sb, m);
    }
    leave(hs, e, true);
}

/// All-to-all with per-peer counts and displacements: for team rank `q`, `table[3 q]` is the
/// element offset in `src` of what this rank sends `q`, `table[3 q + 1]` its length and
/// `table[3 q + 2]` the offset in `q`'s `dst` where it lands (rank `q`'s receive displacement
/// for this rank), all agreed across the PEs by `Comm::all_to_all_layout` before any launch.
/// Otherwise as [`all_to_all`].
///
/// `table` is local device memory read on this PE only; it is declared as a symmetric
/// parameter so that the host passes its address as is (a `CudaSlice` argument would make the
/// launch wait on cudarc's events, which a CUDA graph capture on another stream refuses).
#[pgas_kernel(max_threads = 512)]
pub fn all_to_all_v<T: Unsigned>(
    dst: &mut SymTensor<T>, src: &SymTensor<T>, table: &SymTensor<u64>, hs: Handshake, sb: u32,
    db: u32,
) {
    let nn = hs.n as usize;
    let e = enter(hs);
    for k in 1..nn + 1 {
        let qr = (hs.me as usize + k) % nn;
        let so = table[3 * qr] as usize;
        let cnt = table[3 * qr + 1] as usize;
        let ro = table[3 * qr + 2] as usize;
        let p = dst.peer(hs.pes[qr]);
        copy_run::<T>(p, ro, db, src, so, sb, cnt);
    }
    leave(hs, e, true);
}
