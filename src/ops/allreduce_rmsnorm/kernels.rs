//! The kernels of [`super::AllReduceRmsNorm`] (its module documentation has the protocol): the
//! exchanging one (one-shot, two-shot, or none), the low-latency one, and the device functions
//! they share.

// The handshakes are the collectives' (`enter`, `leave`): the same flags, from a `Comm`. With
// `n` comptime this kernel takes no `Handshake`: it passes the group's fields one by one.
use crate::coll::kernels::pieces::*;
use crate::prelude::*;

/// The block's pass over one row (`hidden` elements from `base`): the sum over the `n` PEs'
/// `x` (peer loads; this PE's own from local memory) in f32 in rank order, plus the residual,
/// rounded to bf16 once: `r_out`, stored into this PE's residual (`stores == 1`) or into every
/// PE's (`stores == n`, this PE's first, then `me + 1, me + 2, ..`). Returns this thread's sum
/// of the squares of its `r_out` values. Two 16-byte vectors a thread a step, so that every
/// PE's two loads are in flight together (with `n` comptime the PE loop unrolls).
#[pgas_device]
fn reduce_row(
    x: &SymTensor<bf16>, residual: &mut SymTensor<bf16>, pes: &SymTensor<i32>, n: u32, me: u32,
    stores: u32, base: usize, hidden: usize,
) -> f32 {
    let nn = n as usize;
    let nv = hidden / 8;
    let stride = block_dim_x() as usize;
    let mut ss = 0.0f32;
    let mut v = thread_idx_x() as usize;
    while v < nv {
        // Past the row's end the second slot repeats the first (the same value stored twice,
        // its squares not counted).
        let two = v + stride < nv;
        let i0 = base + v * 8;
        let i1 = if two { i0 + stride * 8 } else { i0 };
        let own = [load_vec16(&x[i0]), load_vec16(&x[i1])];
        let r = [load_vec16(&residual[i0]), load_vec16(&residual[i1])];
        let mut a = [0.0f32; 16];
        for k in 0..nn {
            let mut u = [own[0], own[1]];
            if k != me as usize {
                let p = x.peer(pes[k]);
                u[0] = load_vec16(&p[i0]);
                u[1] = load_vec16(&p[i1]);
            }
            add_lanes(&mut a, &u);
        }
        let mut o = [r[0], r[1]];
        ss = plus_residual(&mut o, &a, &r, two, ss);
        store_vec16(&mut residual[i0], o[0]);
        store_vec16(&mut residual[i1], o[1]);
        for k in 1..stores as usize {
            let d = residual.peer(pes[(me as usize + k) % nn]);
            store_vec16(&mut d[i0], o[0]);
            store_vec16(&mut d[i1], o[1]);
        }
        v += 2 * stride;
    }
    ss
}

/// `a[8h + j] += u[h]`'s lane `j` (bf16) in f32, for the two vectors `u[0]`, `u[1]`.
#[pgas_device]
fn add_lanes(a: &mut [f32], u: &[Vec16<bf16>]) {
    for h in 0..2 {
        for j in 0..8 {
            a[8 * h + j] += vec16_get(u[h], j as u32) as f32;
        }
    }
}

/// `o[h]`'s lane `j`: `a[8h + j]` plus the residual's (`r[h]`'s), rounded to bf16 once.
/// Returns `ss` plus the sum of the squares of `o[0]`'s lanes and, where `two` (the second
/// vector is not a repeat of the first), of `o[1]`'s.
#[pgas_device]
fn plus_residual(o: &mut [Vec16<bf16>], a: &[f32], r: &[Vec16<bf16>], two: bool, ss: f32) -> f32 {
    let mut sq = [0.0f32; 2];
    for h in 0..2 {
        for j in 0..8 {
            let q = (a[8 * h + j] + vec16_get(r[h], j as u32) as f32) as bf16;
            o[h] = vec16_set(o[h], j as u32, q);
            sq[h] += q as f32 * q as f32;
        }
    }
    let mut total = ss + sq[0];
    if two {
        total += sq[1];
    }
    total
}

/// The sum of `v` over the warp's 32 lanes, on every lane, by a butterfly of shuffles (the same
/// order on every lane, so the same bits). Every lane of the warp calls it.
#[pgas_device]
fn warp_sum(v: f32) -> f32 {
    let mut s = v;
    s += shfl_xor_sync(0xffff_ffff, s, 16);
    s += shfl_xor_sync(0xffff_ffff, s, 8);
    s += shfl_xor_sync(0xffff_ffff, s, 4);
    s += shfl_xor_sync(0xffff_ffff, s, 2);
    s += shfl_xor_sync(0xffff_ffff, s, 1);
    s
}

/// The sum of `v` over the block's threads, on every thread: each warp adds by shuffles, then
/// warp 0 adds the warps' sums in warp order (the same bits on every PE). Every thread of the
/// block calls it; a block barrier goes before the result is read.
#[pgas_device]
fn block_sum(v: f32) -> f32 {
    let red = shared_array::<f32, 33>();
    let lane = lane_id() as usize;
    let warp = warp_id() as usize;
    let warps = (block_dim_x() / 32) as usize;
    let ss = warp_sum(v);
    if lane == 0 {
        red[warp] = ss;
    }
    sync_threads();
    if warp == 0 {
        let mut s = 0.0f32;
        if lane < warps {
            s = red[lane];
        }
        s = warp_sum(s);
        if lane == 0 {
            red[32] = s;
        }
    }
    sync_threads();
    red[32]
}

/// This thread's sum of the squares of its elements of the row at `base` (two-shot's second
/// half, where the row's `r_out` arrived from its owner).
#[pgas_device]
fn row_sumsq(residual: &SymTensor<bf16>, base: usize, hidden: usize) -> f32 {
    let nv = hidden / 8;
    let stride = block_dim_x() as usize;
    let mut ss = 0.0f32;
    let mut v = thread_idx_x() as usize;
    while v < nv {
        let r = load_vec16(&residual[base + v * 8]);
        for j in 0..8u32 {
            let f = vec16_get(r, j) as f32;
            ss += f * f;
        }
        v += stride;
    }
    ss
}

/// `y = bf16(r_out * inv * w)` for the `len` elements of a row at `base`, whose weights start
/// at `w0` (the slice's place in the row), into this PE's `out`.
#[pgas_device]
fn norm_slice(
    residual: &SymTensor<bf16>, weight: &SymTensor<bf16>, out: &mut SymTensor<bf16>, base: usize,
    w0: usize, len: usize, inv: f32,
) {
    let nv = len / 8;
    let stride = block_dim_x() as usize;
    let mut v = thread_idx_x() as usize;
    while v < nv {
        let r = load_vec16(&residual[base + v * 8]);
        let w = load_vec16(&weight[w0 + v * 8]);
        let mut y = r;
        for j in 0..8u32 {
            let f = vec16_get(r, j) as f32 * inv * vec16_get(w, j) as f32;
            y = vec16_set(y, j, f as bf16);
        }
        store_vec16(&mut out[base + v * 8], y);
        v += stride;
    }
}

/// The fused all-reduce + residual add + RMSNorm over `tokens` rows of `hidden` (a multiple of
/// 8) bf16 elements; see the module doc for the protocol. `mode` (comptime): 0 one-shot, 1
/// two-shot, 2 no exchange (`n` must be 1: `x` is already the sum; no flags touched). `n`
/// (comptime, so that the PE loop unrolls): the team's PEs; `me`: this PE's team rank; `pes`:
/// team rank -> world PE; `sig`, `epochs`: the [`crate::coll::Comm`]'s flags. Every buffer 16-byte aligned.
#[pgas_kernel(max_threads = 512)]
pub fn allreduce_add_rmsnorm(
    x: &SymTensor<bf16>, residual: &mut SymTensor<bf16>, weight: &SymTensor<bf16>,
    out: &mut SymTensor<bf16>, pes: &SymTensor<i32>, sig: &mut SymTensor<u64>,
    epochs: &mut SymTensor<u64>, me: u32, tokens: u32, hidden: u32, eps: f32, #[comptime] n: u32,
    #[comptime] mode: u32,
) {
    let blk = block_idx_x() as usize;
    let grid = grid_dim_x() as usize;
    let h = hidden as usize;
    let tt = tokens as usize;
    let nn = n as usize;
    let two_shot = mode == 1;
    let exchange = mode != 2;
    let mut e = 0u64;
    if exchange {
        e = enter(pes, sig, epochs, n, me);
    }
    let chunk = (tt + nn - 1) / nn;
    if two_shot {
        // This rank's rows, into every PE's residual.
        let lo = me as usize * chunk;
        let mut j = blk;
        while j < chunk && lo + j < tt {
            reduce_row(x, residual, pes, n, me, n, (lo + j) * h, h);
            j += grid;
        }
        leave(pes, sig, epochs, n, me, e, true);
    }
    // The rows this block normalizes: one-shot (and no exchange) rows `blk, blk + grid, ..`;
    // two-shot rows `q * chunk + blk, q * chunk + blk + grid, ..` of every owner `q`, which
    // block `blk` of each owner stored before its leave signal.
    let owners = if two_shot { nn } else { 1 };
    let span = if two_shot { chunk } else { tt };
    for q in 0..owners {
        let mut j = blk;
        while j < span && q * span + j < tt {
            let base = (q * span + j) * h;
            let mut ss = 0.0f32;
            if two_shot {
                ss = row_sumsq(residual, base, h);
            } else {
                ss = reduce_row(x, residual, pes, n, me, 1, base, h);
            }
            let inv = rsqrt(block_sum(ss) / hidden as f32 + eps);
            // The whole row, its weights from element 0.
            norm_slice(residual, weight, out, base, 0, h, inv);
            j += grid;
        }
    }
    if exchange && !two_shot {
        leave(pes, sig, epochs, n, me, e, false);
    }
}

/// The low-latency form (`Algorithm::LowLatency`): no entry or leave handshake. A row is split
/// over `slices` blocks (a divisor of its 16-byte vectors): block `b` takes slice `b % slices`
/// of rows `g, g + G, ..` (`g = b / slices`, `G` groups of `slices` blocks). For each row,
/// `team_all_gather_block` (pgas's LL lines: each PE stores its slice of the row of `x` with the
/// call's flag beside every 8 bytes into every peer's `scratch`, and polls its own; one NVLink
/// crossing) gathers every PE's slice into shared memory (`n * hidden / slices` bf16, the
/// launch's dynamic shared memory), then the block sums them in f32 in rank order, adds the
/// residual, rounds once (the same arithmetic, in the same order, as the other forms) and writes
/// `r_out`. The row's sum of squares is the group's: each block stores its slice's into
/// `partial` (two sets, by the parity of the group's row count, so a block that has gone on to
/// the next row never overwrites one a slower block still reads), then the group meets at a
/// barrier of its own word in `sync` (a generation and an arrival count, which one atomic
/// advances and reads together), and each block adds
/// the `slices` partials in slice order (the same bits in every block and on every PE) and
/// normalizes its slice locally. Splitting the rows lets a call of few tokens spread its lines
/// over many blocks; the blocks of a group wait for each other, so the grid must be resident (at
/// most the fewest SMs of any PE, as every fused form's). `scratch` holds `region` words a block
/// (`pgas::coll::device_scratch_len::<bf16>(n, hidden)`, enough for a whole row), zeroed once;
/// its call counters keep consecutive calls apart, also across CUDA-graph replays; `sync` is at
/// rest (arrival counts 0) between calls, whatever the grid. Peers never read this PE's `x`,
/// `residual` or `out`.
#[pgas_kernel(max_threads = 512)]
#[allow(clippy::too_many_arguments)]
pub fn allreduce_add_rmsnorm_ll(
    team: Team, x: &SymTensor<bf16>, residual: &mut SymTensor<bf16>, weight: &SymTensor<bf16>,
    out: &mut SymTensor<bf16>, scratch: &mut SymTensor<u64>, sync: &mut SymTensor<u64>,
    partial: &mut SymTensor<f32>, region: u32, tokens: u32, hidden: u32, slices: u32, eps: f32,
    #[comptime] n: u32,
) {
    let blk = block_idx_x() as usize;
    let grid = grid_dim_x() as usize;
    let stride = block_dim_x() as usize;
    let h = hidden as usize;
    let sl = slices as usize;
    let sh = h / sl;
    let nv = sh / 8;
    let slice = blk % sl;
    let group = blk / sl;
    let groups = grid / sl;
    let tt = tokens as usize;
    let nn = n as usize;
    let at = blk * region as usize;
    let g = dyn_shared::<bf16>();
    // The group's sum of squares, from the thread that adds the partials to the block.
    let total = shared_array::<f32, 1>();
    let mut row = group;
    let mut parity = 0usize;
    while row < tt {
        let base = row * h + slice * sh;
        // Every PE's slice of the row, rank `k`'s at `g[k * sh..]` (a block barrier before and
        // after).
        team_all_gather_block(
            team,
            &mut g[0..nn * sh],
            &x[base..base + sh],
            &mut scratch[at],
        );
        let mut ss = 0.0f32;
        let mut v = thread_idx_x() as usize;
        while v < nv {
            let two = v + stride < nv;
            let j0 = v * 8;
            let j1 = if two { j0 + stride * 8 } else { j0 };
            let r = [
                load_vec16(&residual[base + j0]),
                load_vec16(&residual[base + j1]),
            ];
            let mut a = [0.0f32; 16];
            for k in 0..nn {
                let u = [load_vec16(&g[k * sh + j0]), load_vec16(&g[k * sh + j1])];
                add_lanes(&mut a, &u);
            }
            let mut o = [r[0], r[1]];
            ss = plus_residual(&mut o, &a, &r, two, ss);
            store_vec16(&mut residual[base + j0], o[0]);
            store_vec16(&mut residual[base + j1], o[1]);
            v += 2 * stride;
        }
        let mut sum = block_sum(ss);
        if sl > 1 {
            // The row's sum over the group's slices (one thread a block).
            if thread_idx_x() == 0 {
                let set = parity * grid;
                atomic_exch_local(&mut partial[set + blk], sum);
                // The partial before the arrival, as every block of the group sees them.
                threadfence();
                // The group's word: the generation in the high 32 bits, the arrivals in the
                // low. One atomic arrives and reads the generation together.
                let old = atomic_add_local(&mut sync[group], 1u64);
                if (old & 0xffff_ffffu64) == (sl - 1) as u64 {
                    // The last to arrive: the arrivals back to 0 and the next generation, in
                    // one atomic.
                    atomic_add_local(&mut sync[group], (1u64 << 32) - sl as u64);
                } else {
                    while (atomic_add_local(&mut sync[group], 0u64) >> 32) == (old >> 32) {}
                }
                threadfence();
                let mut t = 0.0f32;
                for q in 0..sl {
                    t += atomic_add_local(&mut partial[set + group * sl + q], 0.0f32);
                }
                total[0] = t;
            }
            sync_threads();
            sum = total[0];
        }
        let inv = rsqrt(sum / hidden as f32 + eps);
        norm_slice(residual, weight, out, base, slice * sh, sh, inv);
        row += groups;
        parity = 1 - parity;
    }
}
