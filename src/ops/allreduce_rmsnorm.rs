//! All-reduce fused with the residual add and RMSNorm of a tensor-parallel decoder layer
//! (vLLM's and TensorRT-LLM's `allreduce + add + rmsnorm`): every PE holds a partial sum `x`
//! (tokens x hidden, bf16) of the row-parallel GEMM before it, the residual stream `r` (the same
//! on every PE) and the norm's weight `w`; every PE gets
//!
//! ```text
//! r_out = bf16(sum over PEs of x, in f32 in rank order, + r)       written back into r
//! y     = bf16(r_out * rsqrt(mean(r_out^2) + eps) * w)             f32 inside, into out
//! ```
//!
//! in one kernel, [`AllReduceRmsNorm`]. The sum is rounded to bf16 once (with the residual), and
//! the norm reads the rounded `r_out`, so `y` is the norm of what the residual stream holds.
//!
//! # The protocol
//! The kernel synchronizes with the flags and call counters of a [`Comm`] (`docs/coll.md`,
//! "Synchronization"): block `b` of each PE sets `sig[b * n + rank]` on every PE to `2e - 1` on
//! entering its call `e` and `2e` on leaving, and waits for the other PEs' block `b`; `epochs[b]`
//! counts its calls in device memory, so a CUDA graph that replays a call counts correctly. Rows
//! are independent, so each block takes whole rows:
//!
//! - **one-shot** (few tokens): block `b` takes rows `b, b + G, ..` (`G` blocks). For each row it
//!   loads the row of `x` from every PE (peer loads over NVLink, all PEs' 16-byte vectors in
//!   flight together), sums them in f32 in rank order, adds the residual, writes `r_out` back
//!   locally, reduces the sum of squares over the block and writes `y` locally. Then it leaves:
//!   when a call completes on a PE, no peer reads that PE's `x` any more.
//! - **two-shot** (many tokens): rank `p` owns rows `p c .. (p + 1) c` (`c = ceil(T / n)`). Block
//!   `b` reduces the owned rows `p c + b, p c + b + G, ..` as above and stores `r_out` into every
//!   PE's residual (peer stores), then leaves with a system fence before its signal; after it has
//!   seen every PE's leave signal, rows `q c + b, q c + b + G, ..` of every owner `q` are in its
//!   residual (block `b` of each PE stored exactly those), and it computes their `y` locally.
//!   Each PE moves `2 (n - 1) / n` of the data over NVLink, as a two-shot all-reduce: `y` never
//!   crosses the links (each PE normalizes every row itself).
//!
//! - **low latency** ([`Algorithm::LowLatency`], a kernel of its own,
//!   [`allreduce_add_rmsnorm_ll`]): no handshake at all; each block gathers every PE's row into
//!   shared memory over `coll`'s LL lines (data and flag in one store, `team_all_gather_block`),
//!   then sums, adds and normalizes as above. One NVLink crossing a call.
//!
//! Every form computes `r_out` with the same operations in the same order (so the residual
//! stream has the same bits on every PE, whichever form ran). Blocks wait for their namesakes on
//! the other PEs, so the grid is at most the fewest SMs of any PE (and
//! [`crate::coll::MAX_BLOCKS`]), the same on every PE for the same call.
//! [`AllReduceRmsNorm::add_rms_norm_on`] is the same kernel without any exchange: the residual
//! add and RMSNorm alone, for an input that is already all-reduced (the unfused form).

use cudarc::driver::CudaStream;
use pgas_runtime::kernel::Variant;
use pgas_runtime::launch::{KernelArgs, Prewarm};

use crate::coll::{Algorithm, Comm};
use crate::prelude::*;
use crate::{Error, Pgas, Result, SymRegion, SymTensor, Team};

/// Threads per block: 16 warps; a row of 8192 bf16 is one 16-byte vector pair a thread.
const THREADS: u32 = 512;

/// The most dynamic shared memory the low-latency form's gathered rows take (`n * hidden * 2`
/// bytes; H100 and H200 give a block 227 KiB): past it, [`Algorithm::LowLatency`] is refused.
pub const LL_MAX_SHARED_BYTES: usize = 192 << 10;

/// The most blocks (rows at a time) of the low-latency form: its scratch holds
/// `coll::device_scratch_len::<bf16>(n, hidden)` words a block (about twice the bytes of the
/// `n` rows: 128 KiB for two PEs at hidden 8192).
pub const LL_MAX_BLOCKS: usize = 32;

/// The kernel's `mode` (comptime): one-shot.
const ONE_SHOT: i128 = 0;
/// Two-shot.
const TWO_SHOT: i128 = 1;
/// No exchange: the residual add and RMSNorm of an input that is already reduced.
const LOCAL: i128 = 2;

/// Block `b`'s entry into its next call: signals "entered call `e`" (`2e - 1`) to every PE's
/// `sig[b * n + me]` and waits until every PE's block `b` entered it. Returns `e`.
#[pgas_device]
fn enter_call(
    pes: &SymTensor<i32>,
    sig: &mut SymTensor<u64>,
    epochs: &mut SymTensor<u64>,
    n: u32,
    me: u32,
) -> u64 {
    let blk = block_idx_x() as usize;
    let t = thread_idx_x() as usize;
    let nn = n as usize;
    let e = epochs[blk] + 1;
    if t < nn {
        signal_op(
            &mut sig[blk * nn + me as usize],
            2 * e - 1,
            SignalOp::Set,
            pes[t],
        );
        signal_wait_until(&sig[blk * nn + t], Cmp::Ge, 2 * e - 1);
        threadfence_system();
    }
    sync_threads();
    e
}

/// Block `b`'s leave of call `e`: signals `2e` to every PE and waits for every PE's block `b`,
/// then counts the call. `after_puts`: the block stored into peers, so a system fence orders
/// those stores before the signal (release) and the waiting thread fences after the wait
/// (acquire), before the barrier that hands the peers' stores to the whole block.
#[pgas_device]
fn leave_call(
    pes: &SymTensor<i32>,
    sig: &mut SymTensor<u64>,
    epochs: &mut SymTensor<u64>,
    n: u32,
    me: u32,
    e: u64,
    after_puts: bool,
) {
    let blk = block_idx_x() as usize;
    let t = thread_idx_x() as usize;
    let nn = n as usize;
    if after_puts {
        threadfence_system();
    }
    sync_threads();
    if t < nn {
        signal_op(
            &mut sig[blk * nn + me as usize],
            2 * e,
            SignalOp::Set,
            pes[t],
        );
        signal_wait_until(&sig[blk * nn + t], Cmp::Ge, 2 * e);
        if after_puts {
            threadfence_system();
        }
    }
    sync_threads();
    if t == 0 {
        epochs[blk] = e;
    }
}

/// The block's pass over one row (`hidden` elements from `base`): the sum over the `n` PEs'
/// `x` (peer loads; this PE's own from local memory) in f32 in rank order, plus the residual,
/// rounded to bf16 once: `r_out`, stored into this PE's residual (`stores == 1`) or into every
/// PE's (`stores == n`, this PE's first, then `me + 1, me + 2, ..`). Returns this thread's sum
/// of the squares of its `r_out` values. Two 16-byte vectors a thread a step, so that every
/// PE's two loads are in flight together (with `n` comptime the PE loop unrolls).
#[pgas_device]
fn reduce_row(
    x: &SymTensor<bf16>,
    residual: &mut SymTensor<bf16>,
    pes: &SymTensor<i32>,
    n: u32,
    me: u32,
    stores: u32,
    base: usize,
    hidden: usize,
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
        let own0 = load_vec16(&x[i0]);
        let own1 = load_vec16(&x[i1]);
        let r0 = load_vec16(&residual[i0]);
        let r1 = load_vec16(&residual[i1]);
        let mut a00 = 0.0f32;
        let mut a01 = 0.0f32;
        let mut a02 = 0.0f32;
        let mut a03 = 0.0f32;
        let mut a04 = 0.0f32;
        let mut a05 = 0.0f32;
        let mut a06 = 0.0f32;
        let mut a07 = 0.0f32;
        let mut a10 = 0.0f32;
        let mut a11 = 0.0f32;
        let mut a12 = 0.0f32;
        let mut a13 = 0.0f32;
        let mut a14 = 0.0f32;
        let mut a15 = 0.0f32;
        let mut a16 = 0.0f32;
        let mut a17 = 0.0f32;
        for k in 0..nn {
            let mut u0 = own0;
            let mut u1 = own1;
            if k != me as usize {
                let p = x.peer(pes[k]);
                u0 = load_vec16(&p[i0]);
                u1 = load_vec16(&p[i1]);
            }
            a00 += vec16_get(u0, 0) as f32;
            a01 += vec16_get(u0, 1) as f32;
            a02 += vec16_get(u0, 2) as f32;
            a03 += vec16_get(u0, 3) as f32;
            a04 += vec16_get(u0, 4) as f32;
            a05 += vec16_get(u0, 5) as f32;
            a06 += vec16_get(u0, 6) as f32;
            a07 += vec16_get(u0, 7) as f32;
            a10 += vec16_get(u1, 0) as f32;
            a11 += vec16_get(u1, 1) as f32;
            a12 += vec16_get(u1, 2) as f32;
            a13 += vec16_get(u1, 3) as f32;
            a14 += vec16_get(u1, 4) as f32;
            a15 += vec16_get(u1, 5) as f32;
            a16 += vec16_get(u1, 6) as f32;
            a17 += vec16_get(u1, 7) as f32;
        }
        let mut o0 = r0;
        let mut o1 = r1;
        let mut ss0 = 0.0f32;
        let mut ss1 = 0.0f32;
        let q = (a00 + vec16_get(r0, 0) as f32) as bf16;
        o0 = vec16_set(o0, 0, q);
        ss0 += q as f32 * q as f32;
        let q = (a01 + vec16_get(r0, 1) as f32) as bf16;
        o0 = vec16_set(o0, 1, q);
        ss0 += q as f32 * q as f32;
        let q = (a02 + vec16_get(r0, 2) as f32) as bf16;
        o0 = vec16_set(o0, 2, q);
        ss0 += q as f32 * q as f32;
        let q = (a03 + vec16_get(r0, 3) as f32) as bf16;
        o0 = vec16_set(o0, 3, q);
        ss0 += q as f32 * q as f32;
        let q = (a04 + vec16_get(r0, 4) as f32) as bf16;
        o0 = vec16_set(o0, 4, q);
        ss0 += q as f32 * q as f32;
        let q = (a05 + vec16_get(r0, 5) as f32) as bf16;
        o0 = vec16_set(o0, 5, q);
        ss0 += q as f32 * q as f32;
        let q = (a06 + vec16_get(r0, 6) as f32) as bf16;
        o0 = vec16_set(o0, 6, q);
        ss0 += q as f32 * q as f32;
        let q = (a07 + vec16_get(r0, 7) as f32) as bf16;
        o0 = vec16_set(o0, 7, q);
        ss0 += q as f32 * q as f32;
        let q = (a10 + vec16_get(r1, 0) as f32) as bf16;
        o1 = vec16_set(o1, 0, q);
        ss1 += q as f32 * q as f32;
        let q = (a11 + vec16_get(r1, 1) as f32) as bf16;
        o1 = vec16_set(o1, 1, q);
        ss1 += q as f32 * q as f32;
        let q = (a12 + vec16_get(r1, 2) as f32) as bf16;
        o1 = vec16_set(o1, 2, q);
        ss1 += q as f32 * q as f32;
        let q = (a13 + vec16_get(r1, 3) as f32) as bf16;
        o1 = vec16_set(o1, 3, q);
        ss1 += q as f32 * q as f32;
        let q = (a14 + vec16_get(r1, 4) as f32) as bf16;
        o1 = vec16_set(o1, 4, q);
        ss1 += q as f32 * q as f32;
        let q = (a15 + vec16_get(r1, 5) as f32) as bf16;
        o1 = vec16_set(o1, 5, q);
        ss1 += q as f32 * q as f32;
        let q = (a16 + vec16_get(r1, 6) as f32) as bf16;
        o1 = vec16_set(o1, 6, q);
        ss1 += q as f32 * q as f32;
        let q = (a17 + vec16_get(r1, 7) as f32) as bf16;
        o1 = vec16_set(o1, 7, q);
        ss1 += q as f32 * q as f32;
        ss += ss0;
        if two {
            ss += ss1;
        }
        store_vec16(&mut residual[i0], o0);
        store_vec16(&mut residual[i1], o1);
        for k in 1..stores as usize {
            let d = residual.peer(pes[(me as usize + k) % nn]);
            store_vec16(&mut d[i0], o0);
            store_vec16(&mut d[i1], o1);
        }
        v += 2 * stride;
    }
    ss
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

/// `y = bf16(r_out * inv * w)` for the row at `base`, into this PE's `out`.
#[pgas_device]
fn norm_row(
    residual: &SymTensor<bf16>,
    weight: &SymTensor<bf16>,
    out: &mut SymTensor<bf16>,
    base: usize,
    hidden: usize,
    inv: f32,
) {
    let nv = hidden / 8;
    let stride = block_dim_x() as usize;
    let mut v = thread_idx_x() as usize;
    while v < nv {
        let r = load_vec16(&residual[base + v * 8]);
        let w = load_vec16(&weight[v * 8]);
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
/// team rank -> world PE; `sig`, `epochs`: the [`Comm`]'s flags. Every buffer 16-byte aligned.
#[pgas_kernel(max_threads = 512)]
pub fn allreduce_add_rmsnorm(
    x: &SymTensor<bf16>,
    residual: &mut SymTensor<bf16>,
    weight: &SymTensor<bf16>,
    out: &mut SymTensor<bf16>,
    pes: &SymTensor<i32>,
    sig: &mut SymTensor<u64>,
    epochs: &mut SymTensor<u64>,
    me: u32,
    tokens: u32,
    hidden: u32,
    eps: f32,
    #[comptime] n: u32,
    #[comptime] mode: u32,
) {
    let blk = block_idx_x() as usize;
    let grid = grid_dim_x() as usize;
    let lane = lane_id() as usize;
    let warp = warp_id() as usize;
    let warps = (block_dim_x() / 32) as usize;
    let h = hidden as usize;
    let tt = tokens as usize;
    let nn = n as usize;
    let two_shot = mode == 1;
    let exchange = mode != 2;
    let red = shared_array::<f32, 33>();
    let mut e = 0u64;
    if exchange {
        e = enter_call(pes, sig, epochs, n, me);
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
        leave_call(pes, sig, epochs, n, me, e, true);
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
            // The block's sum of squares: warps by shuffles, then warp 0 over the warps.
            ss += shfl_xor_sync(0xffff_ffff, ss, 16);
            ss += shfl_xor_sync(0xffff_ffff, ss, 8);
            ss += shfl_xor_sync(0xffff_ffff, ss, 4);
            ss += shfl_xor_sync(0xffff_ffff, ss, 2);
            ss += shfl_xor_sync(0xffff_ffff, ss, 1);
            if lane == 0 {
                red[warp] = ss;
            }
            sync_threads();
            if warp == 0 {
                let mut s = 0.0f32;
                if lane < warps {
                    s = red[lane];
                }
                s += shfl_xor_sync(0xffff_ffff, s, 16);
                s += shfl_xor_sync(0xffff_ffff, s, 8);
                s += shfl_xor_sync(0xffff_ffff, s, 4);
                s += shfl_xor_sync(0xffff_ffff, s, 2);
                s += shfl_xor_sync(0xffff_ffff, s, 1);
                if lane == 0 {
                    red[32] = s;
                }
            }
            sync_threads();
            let inv = rsqrt(red[32] / hidden as f32 + eps);
            norm_row(residual, weight, out, base, h, inv);
            j += grid;
        }
    }
    if exchange && !two_shot {
        leave_call(pes, sig, epochs, n, me, e, false);
    }
}

/// The low-latency form (`Algorithm::LowLatency`): no entry or leave handshake. Block `b` takes
/// rows `b, b + G, ..`; for each, `team_all_gather_block` (pgas's LL lines: each PE stores its
/// row of `x` with the call's flag beside every 8 bytes into every peer's `scratch`, and polls
/// its own; one NVLink crossing) gathers every PE's row into shared memory (`n * hidden` bf16,
/// the launch's dynamic shared memory), then the block sums them in f32 in rank order, adds the
/// residual, rounds once (the same arithmetic, in the same order, as the other forms), writes
/// `r_out` and normalizes locally. `scratch` holds `region` words a block
/// (`pgas::coll::device_scratch_len::<bf16>(n, hidden)`), zeroed once; its call counters keep
/// consecutive calls apart, also across CUDA-graph replays. Peers never read this PE's `x`,
/// `residual` or `out`.
#[pgas_kernel(max_threads = 512)]
pub fn allreduce_add_rmsnorm_ll(
    team: Team,
    x: &SymTensor<bf16>,
    residual: &mut SymTensor<bf16>,
    weight: &SymTensor<bf16>,
    out: &mut SymTensor<bf16>,
    scratch: &mut SymTensor<u64>,
    region: u32,
    tokens: u32,
    hidden: u32,
    eps: f32,
    #[comptime] n: u32,
) {
    let blk = block_idx_x() as usize;
    let grid = grid_dim_x() as usize;
    let lane = lane_id() as usize;
    let warp = warp_id() as usize;
    let warps = (block_dim_x() / 32) as usize;
    let stride = block_dim_x() as usize;
    let h = hidden as usize;
    let nv = h / 8;
    let tt = tokens as usize;
    let nn = n as usize;
    let at = blk * region as usize;
    let g = dyn_shared::<bf16>();
    let red = shared_array::<f32, 33>();
    let mut row = blk;
    while row < tt {
        let base = row * h;
        // Every PE's row, rank `k`'s at `g[k * h..]` (a block barrier before and after).
        team_all_gather_block(
            team,
            &mut g[0..nn * h],
            &x[base..base + h],
            &mut scratch[at],
        );
        let mut ss = 0.0f32;
        let mut v = thread_idx_x() as usize;
        while v < nv {
            let two = v + stride < nv;
            let j0 = v * 8;
            let j1 = if two { j0 + stride * 8 } else { j0 };
            let r0 = load_vec16(&residual[base + j0]);
            let r1 = load_vec16(&residual[base + j1]);
            let mut a00 = 0.0f32;
            let mut a01 = 0.0f32;
            let mut a02 = 0.0f32;
            let mut a03 = 0.0f32;
            let mut a04 = 0.0f32;
            let mut a05 = 0.0f32;
            let mut a06 = 0.0f32;
            let mut a07 = 0.0f32;
            let mut a10 = 0.0f32;
            let mut a11 = 0.0f32;
            let mut a12 = 0.0f32;
            let mut a13 = 0.0f32;
            let mut a14 = 0.0f32;
            let mut a15 = 0.0f32;
            let mut a16 = 0.0f32;
            let mut a17 = 0.0f32;
            for k in 0..nn {
                let u0 = load_vec16(&g[k * h + j0]);
                let u1 = load_vec16(&g[k * h + j1]);
                a00 += vec16_get(u0, 0) as f32;
                a01 += vec16_get(u0, 1) as f32;
                a02 += vec16_get(u0, 2) as f32;
                a03 += vec16_get(u0, 3) as f32;
                a04 += vec16_get(u0, 4) as f32;
                a05 += vec16_get(u0, 5) as f32;
                a06 += vec16_get(u0, 6) as f32;
                a07 += vec16_get(u0, 7) as f32;
                a10 += vec16_get(u1, 0) as f32;
                a11 += vec16_get(u1, 1) as f32;
                a12 += vec16_get(u1, 2) as f32;
                a13 += vec16_get(u1, 3) as f32;
                a14 += vec16_get(u1, 4) as f32;
                a15 += vec16_get(u1, 5) as f32;
                a16 += vec16_get(u1, 6) as f32;
                a17 += vec16_get(u1, 7) as f32;
            }
            let mut o0 = r0;
            let mut o1 = r1;
            let mut ss0 = 0.0f32;
            let mut ss1 = 0.0f32;
            let q = (a00 + vec16_get(r0, 0) as f32) as bf16;
            o0 = vec16_set(o0, 0, q);
            ss0 += q as f32 * q as f32;
            let q = (a01 + vec16_get(r0, 1) as f32) as bf16;
            o0 = vec16_set(o0, 1, q);
            ss0 += q as f32 * q as f32;
            let q = (a02 + vec16_get(r0, 2) as f32) as bf16;
            o0 = vec16_set(o0, 2, q);
            ss0 += q as f32 * q as f32;
            let q = (a03 + vec16_get(r0, 3) as f32) as bf16;
            o0 = vec16_set(o0, 3, q);
            ss0 += q as f32 * q as f32;
            let q = (a04 + vec16_get(r0, 4) as f32) as bf16;
            o0 = vec16_set(o0, 4, q);
            ss0 += q as f32 * q as f32;
            let q = (a05 + vec16_get(r0, 5) as f32) as bf16;
            o0 = vec16_set(o0, 5, q);
            ss0 += q as f32 * q as f32;
            let q = (a06 + vec16_get(r0, 6) as f32) as bf16;
            o0 = vec16_set(o0, 6, q);
            ss0 += q as f32 * q as f32;
            let q = (a07 + vec16_get(r0, 7) as f32) as bf16;
            o0 = vec16_set(o0, 7, q);
            ss0 += q as f32 * q as f32;
            let q = (a10 + vec16_get(r1, 0) as f32) as bf16;
            o1 = vec16_set(o1, 0, q);
            ss1 += q as f32 * q as f32;
            let q = (a11 + vec16_get(r1, 1) as f32) as bf16;
            o1 = vec16_set(o1, 1, q);
            ss1 += q as f32 * q as f32;
            let q = (a12 + vec16_get(r1, 2) as f32) as bf16;
            o1 = vec16_set(o1, 2, q);
            ss1 += q as f32 * q as f32;
            let q = (a13 + vec16_get(r1, 3) as f32) as bf16;
            o1 = vec16_set(o1, 3, q);
            ss1 += q as f32 * q as f32;
            let q = (a14 + vec16_get(r1, 4) as f32) as bf16;
            o1 = vec16_set(o1, 4, q);
            ss1 += q as f32 * q as f32;
            let q = (a15 + vec16_get(r1, 5) as f32) as bf16;
            o1 = vec16_set(o1, 5, q);
            ss1 += q as f32 * q as f32;
            let q = (a16 + vec16_get(r1, 6) as f32) as bf16;
            o1 = vec16_set(o1, 6, q);
            ss1 += q as f32 * q as f32;
            let q = (a17 + vec16_get(r1, 7) as f32) as bf16;
            o1 = vec16_set(o1, 7, q);
            ss1 += q as f32 * q as f32;
            ss += ss0;
            if two {
                ss += ss1;
            }
            store_vec16(&mut residual[base + j0], o0);
            store_vec16(&mut residual[base + j1], o1);
            v += 2 * stride;
        }
        // The block's sum of squares, as in `allreduce_add_rmsnorm`.
        ss += shfl_xor_sync(0xffff_ffff, ss, 16);
        ss += shfl_xor_sync(0xffff_ffff, ss, 8);
        ss += shfl_xor_sync(0xffff_ffff, ss, 4);
        ss += shfl_xor_sync(0xffff_ffff, ss, 2);
        ss += shfl_xor_sync(0xffff_ffff, ss, 1);
        if lane == 0 {
            red[warp] = ss;
        }
        sync_threads();
        if warp == 0 {
            let mut s = 0.0f32;
            if lane < warps {
                s = red[lane];
            }
            s += shfl_xor_sync(0xffff_ffff, s, 16);
            s += shfl_xor_sync(0xffff_ffff, s, 8);
            s += shfl_xor_sync(0xffff_ffff, s, 4);
            s += shfl_xor_sync(0xffff_ffff, s, 2);
            s += shfl_xor_sync(0xffff_ffff, s, 1);
            if lane == 0 {
                red[32] = s;
            }
        }
        sync_threads();
        let inv = rsqrt(red[32] / hidden as f32 + eps);
        norm_row(residual, weight, out, base, h, inv);
        row += grid;
    }
}

/// All-reduce + residual add + RMSNorm over every PE, fused into one kernel (see the
/// [module docs](self)): made collectively with [`AllReduceRmsNorm::new`], then one
/// [`AllReduceRmsNorm::run_on`] per layer step on every PE.
///
/// ```no_run
/// use pgas::ops::AllReduceRmsNorm;
/// use pgas::prelude::*;
///
/// # fn main() -> pgas::Result<()> {
/// let pgas = pgas::init()?;
/// let (hidden, tokens) = (8192, 4);
/// let mut op = AllReduceRmsNorm::new(&pgas, hidden, 4096, 1e-5)?; // collective
/// let x = pgas.alloc::<bf16>(tokens * hidden)?; // this PE's partial sums
/// let mut residual = pgas.alloc::<bf16>(tokens * hidden)?; // the same on every PE
/// let weight = pgas.alloc::<bf16>(hidden)?;
/// let mut out = pgas.alloc::<bf16>(tokens * hidden)?;
/// let stream = pgas.stream().clone();
/// op.run_on(&stream, &x, &mut residual, &weight, &mut out)?; // residual += sum(x); out = norm
/// # Ok(())
/// # }
/// ```
///
/// Every buffer is symmetric (peers load `x` and, two-shot, store into `residual`), 16-byte
/// aligned, `tokens * hidden` elements (`weight`: `hidden`), and the four are apart. Every PE
/// makes the same calls with the same token counts, in the same order (as with NCCL). Calls are
/// ordered on the host by `&mut self`; run them on one stream at a time. Capturable into a CUDA
/// graph once the kernels are compiled ([`AllReduceRmsNorm::prewarm`] or a first eager call):
/// the call counters live in device memory.
pub struct AllReduceRmsNorm {
    pgas: Pgas,
    comm: Comm,
    hidden: usize,
    max_tokens: usize,
    eps: f32,
    /// PEs of the world team.
    n: usize,
    /// Blocks a fused call may launch: the fewest SMs of any PE, at most
    /// [`crate::coll::MAX_BLOCKS`] (blocks wait for their namesakes on the other PEs).
    max_blocks: usize,
    /// The low-latency form's LL scratch (`ll_blocks` regions of `ll_region` words), where
    /// `n * hidden * 2 <= LL_MAX_SHARED_BYTES`.
    ll_scratch: Option<SymTensor<u64>>,
    ll_region: usize,
    ll_blocks: usize,
}

impl std::fmt::Debug for AllReduceRmsNorm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllReduceRmsNorm")
            .field("hidden", &self.hidden)
            .field("max_tokens", &self.max_tokens)
            .field("eps", &self.eps)
            .field("n_pes", &self.n)
            .finish()
    }
}

/// Why `(hidden, max_tokens, eps)` cannot make an [`AllReduceRmsNorm`], with the fix, or `None`.
fn config_error(hidden: usize, max_tokens: usize, eps: f32) -> Option<String> {
    if hidden == 0 || !hidden.is_multiple_of(8) {
        return Some(format!(
            "hidden is {hidden}, but rows move as 16-byte vectors of 8 bf16. Fix: pass a \
             positive multiple of 8"
        ));
    }
    if hidden > u32::MAX as usize || max_tokens > u32::MAX as usize {
        return Some(format!(
            "hidden {hidden} or max_tokens {max_tokens} is over 2^32 - 1. Fix: pass smaller sizes"
        ));
    }
    if max_tokens == 0 {
        return Some("max_tokens is 0. Fix: pass the most tokens a call will take".into());
    }
    if !eps.is_finite() || eps < 0.0 {
        return Some(format!(
            "eps is {eps}. Fix: pass a finite eps >= 0 (1e-5 or 1e-6 in most models)"
        ));
    }
    None
}

impl AllReduceRmsNorm {
    /// An operation over every PE (the world team) for rows of `hidden` bf16 elements (a
    /// multiple of 8), at most `max_tokens` rows a call, normalized with `eps`. Collective over
    /// all PEs: it makes a [`Comm`] (its flags and call counters are the kernel's), then the PEs
    /// compare their arguments and whether each reaches every peer by loads and stores
    /// ([`super::agree`]), so a mismatch, a bad size or an unreachable peer is the same `Err` on
    /// every PE and nothing is launched.
    pub fn new(pgas: &Pgas, hidden: usize, max_tokens: usize, eps: f32) -> Result<Self> {
        let comm = Comm::new(pgas, Team::WORLD)?;
        super::agree::agree(
            pgas,
            "AllReduceRmsNorm::new",
            &[
                ("hidden", hidden as u64),
                ("max_tokens", max_tokens as u64),
                ("eps (f32 bits)", u64::from(eps.to_bits())),
                (
                    "every peer load/store reachable",
                    comm.peers_reachable() as u64,
                ),
            ],
        )?;
        if let Some(why) = config_error(hidden, max_tokens, eps) {
            return Err(Error::InvalidConfig {
                name: "AllReduceRmsNorm::new",
                value: format!("hidden {hidden}, max_tokens {max_tokens}, eps {eps}"),
                reason: why,
            });
        }
        if !comm.peers_reachable() {
            return Err(Error::Unavailable {
                what: "AllReduceRmsNorm",
                reason: "some PE's symmetric memory is not load/store reachable from this GPU \
                         (no NVLink or P2P path), and the fused kernel reads and writes peers' \
                         rows directly. Fix: run the PEs on GPUs of one NVLink domain, or use \
                         pgas::coll's Algorithm::Nvshmem all-reduce followed by \
                         add_rms_norm_on"
                    .into(),
            });
        }
        let n = pgas.n_pes();
        let sms = pgas.sm_count()?;
        let fewest = if n > 1 {
            super::agree::gather_words(pgas, &[sms as u64])?
                .into_iter()
                .min()
                .unwrap_or(1) as usize
        } else {
            sms
        };
        let max_blocks = fewest.clamp(1, crate::coll::MAX_BLOCKS);
        // The same on every PE (n, hidden, max_tokens and the fewest SMs are), so every PE
        // allocates alike.
        let ll_region = crate::coll::device_scratch_len::<bf16>(n, hidden);
        let ll_blocks = max_tokens.min(max_blocks).min(LL_MAX_BLOCKS);
        let ll_scratch = if n * hidden * 2 <= LL_MAX_SHARED_BYTES {
            Some(pgas.alloc::<u64>(ll_blocks * ll_region)?)
        } else {
            None
        };
        Ok(AllReduceRmsNorm {
            pgas: pgas.clone(),
            comm,
            hidden,
            max_tokens,
            eps,
            n,
            max_blocks,
            ll_scratch,
            ll_region,
            ll_blocks,
        })
    }

    /// Elements per row.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// The most rows a call takes.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The norm's epsilon.
    pub fn eps(&self) -> f32 {
        self.eps
    }

    /// The PEs that take part (every PE).
    pub fn n_pes(&self) -> usize {
        self.n
    }

    /// The algorithm [`Algorithm::Auto`] takes for `tokens` rows: one-shot while the bytes of
    /// `x` are at most the all-reduce's one-shot limit for the team's size
    /// ([`crate::coll::ONE_SHOT_MAX_BYTES`], [`crate::coll::ONE_SHOT_MAX_BYTES_2PE`] for two
    /// PEs, where one-shot and two-shot move the same bytes; not measured for this kernel yet),
    /// two-shot above. One PE: one-shot.
    pub fn algorithm_for(&self, tokens: usize) -> Algorithm {
        let bytes = tokens * self.hidden * 2;
        let one_shot_max = if self.n == 2 {
            crate::coll::ONE_SHOT_MAX_BYTES_2PE
        } else {
            crate::coll::ONE_SHOT_MAX_BYTES
        };
        if self.n == 1 || bytes <= one_shot_max {
            Algorithm::OneShot
        } else {
            Algorithm::TwoShot
        }
    }

    /// Whether [`Algorithm::LowLatency`] is available: the PEs' rows fit the shared memory
    /// of a block (`n * hidden * 2 <= LL_MAX_SHARED_BYTES`).
    pub fn low_latency_available(&self) -> bool {
        self.ll_scratch.is_some()
    }

    /// Compiles (or loads from the disk cache) the kernels this operation launches (one-shot,
    /// two-shot, low-latency where available, and the unfused norm), so that no call compiles
    /// and every call can be captured into a CUDA graph.
    pub fn prewarm(&self) -> Result<()> {
        let n = self.n as i128;
        let specs = [[n, ONE_SHOT], [n, TWO_SHOT], [1, LOCAL]];
        let mut list: Vec<Prewarm<'_>> = specs
            .iter()
            .map(|c| Prewarm {
                spec: &allreduce_add_rmsnorm::SPEC,
                variant: Variant::Plain,
                comptime: c,
            })
            .collect();
        let ll = [n];
        if self.low_latency_available() {
            list.push(Prewarm {
                spec: &allreduce_add_rmsnorm_ll::SPEC,
                variant: Variant::Plain,
                comptime: &ll,
            });
        }
        pgas_runtime::launch::prewarm(&self.pgas, &list)
    }

    /// [`AllReduceRmsNorm::run_on`] on the context's stream ([`Pgas::stream`]).
    pub fn run(
        &mut self,
        x: &impl SymRegion<bf16>,
        residual: &mut impl SymRegion<bf16>,
        weight: &impl SymRegion<bf16>,
        out: &mut impl SymRegion<bf16>,
    ) -> Result<Algorithm> {
        let stream = self.pgas.stream().clone();
        self.run_with(&stream, x, residual, weight, out, Algorithm::Auto)
    }

    /// Enqueues on `stream` one call, by [`AllReduceRmsNorm::algorithm_for`]'s algorithm:
    /// `residual = bf16(sum over PEs of x + residual)` and `out = RMSNorm(residual) * weight`,
    /// on every PE, for `x.len() / hidden` tokens. Not waited for on the host. When it completes
    /// on a PE, that PE's `residual` and `out` hold the results and no peer reads its `x` or
    /// writes its buffers any more. Returns the algorithm used.
    ///
    /// Errors, on the calling PE before anything is enqueued: `x` not a whole number of rows or
    /// more than `max_tokens` of them; `residual` or `out` of another length than `x`, `weight`
    /// not `hidden` long; a buffer not 16-byte aligned or not in the symmetric heap; buffers
    /// that overlap. Token counts that differ between PEs cannot be seen here: they are the
    /// caller's contract, as in NCCL.
    pub fn run_on(
        &mut self,
        stream: &CudaStream,
        x: &impl SymRegion<bf16>,
        residual: &mut impl SymRegion<bf16>,
        weight: &impl SymRegion<bf16>,
        out: &mut impl SymRegion<bf16>,
    ) -> Result<Algorithm> {
        self.run_with(stream, x, residual, weight, out, Algorithm::Auto)
    }

    /// [`AllReduceRmsNorm::run_on`] by a given algorithm: `Auto`, `OneShot`, `TwoShot` or
    /// `LowLatency` (where [`AllReduceRmsNorm::low_latency_available`]: no entry or leave
    /// handshake, each PE's rows sent as LL lines into every peer's scratch; see
    /// [`allreduce_add_rmsnorm_ll`]). `Nvshmem` is an `Err`. Every PE must pass the same.
    pub fn run_with(
        &mut self,
        stream: &CudaStream,
        x: &impl SymRegion<bf16>,
        residual: &mut impl SymRegion<bf16>,
        weight: &impl SymRegion<bf16>,
        out: &mut impl SymRegion<bf16>,
        algorithm: Algorithm,
    ) -> Result<Algorithm> {
        let tokens = self.check_call("x", x, &*residual, weight, &*out)?;
        let algorithm = match algorithm {
            Algorithm::Auto => self.algorithm_for(tokens),
            a @ (Algorithm::OneShot | Algorithm::TwoShot) => a,
            Algorithm::LowLatency if self.ll_scratch.is_some() => Algorithm::LowLatency,
            Algorithm::LowLatency => {
                return Err(Error::InvalidConfig {
                    name: "AllReduceRmsNorm algorithm",
                    value: format!(
                        "LowLatency with {} PEs x hidden {} x 2 bytes of rows",
                        self.n, self.hidden
                    ),
                    reason: format!(
                        "the low-latency form gathers every PE's row into a block's shared \
                         memory, at most LL_MAX_SHARED_BYTES ({LL_MAX_SHARED_BYTES}). Fix: pass \
                         Algorithm::Auto, OneShot or TwoShot"
                    ),
                });
            }
            other => {
                return Err(Error::InvalidConfig {
                    name: "AllReduceRmsNorm algorithm",
                    value: format!("{other:?}"),
                    reason: "the fused kernel has one-shot, two-shot and low-latency forms only. \
                             Fix: pass Algorithm::Auto, OneShot, TwoShot or LowLatency"
                        .into(),
                });
            }
        };
        for (what, ptr, len) in [
            ("x (peers load it)", x.as_device_ptr(), x.len()),
            (
                "residual (peers store into it, two-shot)",
                residual.as_device_ptr(),
                residual.len(),
            ),
            ("out", out.as_device_ptr(), out.len()),
            ("weight", weight.as_device_ptr(), weight.len()),
        ] {
            if !self.pgas.in_symmetric_heap(ptr, len * 2) {
                return Err(Error::InvalidConfig {
                    name: "AllReduceRmsNorm buffer",
                    value: format!("{what} at {ptr:#x} ({} bytes)", len * 2),
                    reason: "it is not inside NVSHMEM's symmetric heap, so peers cannot reach \
                             it. Fix: allocate it with Pgas::alloc (or take a view of such a \
                             tensor)"
                        .into(),
                });
            }
        }
        if tokens == 0 {
            return Ok(algorithm);
        }
        let n = self.n;
        if let (Algorithm::LowLatency, Some(scratch)) = (algorithm, self.ll_scratch.as_mut()) {
            let mut args = KernelArgs::new();
            args.push_team(Team::WORLD)
                .push_sym(x)
                .push_sym_mut(residual)
                .push_sym(weight)
                .push_sym_mut(out)
                .push_sym_mut(scratch)
                .push_scalar(self.ll_region as u32)
                .push_scalar(tokens as u32)
                .push_scalar(self.hidden as u32)
                .push_scalar(self.eps);
            let blocks = tokens.clamp(1, self.ll_blocks) as u32;
            let shared = (n * self.hidden * 2) as u32;
            pgas_runtime::launch::launch(
                &self.pgas,
                &allreduce_add_rmsnorm_ll::SPEC,
                Variant::Plain,
                &[n as i128],
                LaunchConfig::blocks(blocks, THREADS).with_shared_mem(shared),
                Some(stream),
                &mut args,
            )?;
            return Ok(algorithm);
        }
        let (mode, rows) = if algorithm == Algorithm::TwoShot {
            (TWO_SHOT, tokens.div_ceil(n))
        } else {
            (ONE_SHOT, tokens)
        };
        let blocks = rows.clamp(1, self.max_blocks) as u32;
        let (me, flags) = self.comm.kernel_flags("AllReduceRmsNorm")?;
        let mut args = KernelArgs::new();
        args.push_sym(x)
            .push_sym_mut(residual)
            .push_sym(weight)
            .push_sym_mut(out)
            .push_sym(flags.pes)
            .push_sym_mut(flags.sig)
            .push_sym_mut(flags.epochs)
            .push_scalar(me as u32)
            .push_scalar(tokens as u32)
            .push_scalar(self.hidden as u32)
            .push_scalar(self.eps);
        pgas_runtime::launch::launch(
            &self.pgas,
            &allreduce_add_rmsnorm::SPEC,
            Variant::Plain,
            &[n as i128, mode],
            LaunchConfig::blocks(blocks, THREADS),
            Some(stream),
            &mut args,
        )?;
        Ok(algorithm)
    }

    /// The unfused second half, for an input that is already all-reduced (by NCCL, or
    /// [`Comm::all_reduce_on`]): `residual = bf16(reduced + residual)` and
    /// `out = RMSNorm(residual) * weight`, on this PE only (no exchange, no flags: any PE may
    /// call it alone), with the same arithmetic as the fused kernel (the same kernel, without
    /// its exchange). Same buffer rules as [`AllReduceRmsNorm::run_on`], but none needs to be
    /// reachable by peers.
    pub fn add_rms_norm_on(
        &mut self,
        stream: &CudaStream,
        reduced: &impl SymRegion<bf16>,
        residual: &mut impl SymRegion<bf16>,
        weight: &impl SymRegion<bf16>,
        out: &mut impl SymRegion<bf16>,
    ) -> Result<()> {
        let tokens = self.check_call("reduced", reduced, &*residual, weight, &*out)?;
        if tokens == 0 {
            return Ok(());
        }
        // No residency needed (no block waits for another): one block a row.
        let blocks = tokens.min(65535) as u32;
        let (_, flags) = self.comm.kernel_flags("AllReduceRmsNorm")?;
        let mut args = KernelArgs::new();
        args.push_sym(reduced)
            .push_sym_mut(residual)
            .push_sym(weight)
            .push_sym_mut(out)
            .push_sym(flags.pes)
            .push_sym_mut(flags.sig)
            .push_sym_mut(flags.epochs)
            .push_scalar(0u32)
            .push_scalar(tokens as u32)
            .push_scalar(self.hidden as u32)
            .push_scalar(self.eps);
        pgas_runtime::launch::launch(
            &self.pgas,
            &allreduce_add_rmsnorm::SPEC,
            Variant::Plain,
            &[1, LOCAL],
            LaunchConfig::blocks(blocks, THREADS),
            Some(stream),
            &mut args,
        )
    }

    /// The per-call checks of the buffers' lengths, alignment and overlap; returns the tokens.
    fn check_call(
        &self,
        input: &'static str,
        x: &impl SymRegion<bf16>,
        residual: &impl SymRegion<bf16>,
        weight: &impl SymRegion<bf16>,
        out: &impl SymRegion<bf16>,
    ) -> Result<usize> {
        let h = self.hidden;
        if !x.len().is_multiple_of(h) {
            return Err(Error::InvalidConfig {
                name: "AllReduceRmsNorm input",
                value: format!("{input}: {} elements", x.len()),
                reason: format!(
                    "the input holds whole rows of hidden = {h} elements. Fix: pass tokens x \
                     {h} elements"
                ),
            });
        }
        let tokens = x.len() / h;
        if tokens > self.max_tokens {
            return Err(Error::InvalidConfig {
                name: "AllReduceRmsNorm tokens",
                value: format!("{tokens} tokens"),
                reason: format!(
                    "the operation was made for at most {} tokens a call. Fix: make it with a \
                     larger max_tokens, or split the call",
                    self.max_tokens
                ),
            });
        }
        let lengths: [(&'static str, usize, usize); 3] = [
            ("the residual (the input's length)", residual.len(), x.len()),
            ("out (the input's length)", out.len(), x.len()),
            ("weight (hidden)", weight.len(), h),
        ];
        for (what, got, expected) in lengths {
            if got != expected {
                return Err(Error::LengthMismatch {
                    what,
                    got,
                    expected,
                });
            }
        }
        let bufs = [
            (input, x.as_device_ptr(), x.len() * 2),
            ("residual", residual.as_device_ptr(), residual.len() * 2),
            ("weight", weight.as_device_ptr(), weight.len() * 2),
            ("out", out.as_device_ptr(), out.len() * 2),
        ];
        for &(what, ptr, _) in &bufs {
            if ptr % 16 != 0 {
                return Err(Error::InvalidConfig {
                    name: "AllReduceRmsNorm buffer",
                    value: format!("{what} at {ptr:#x}"),
                    reason: "rows move as 16-byte vectors, so every buffer must start at a \
                             16-byte boundary. Fix: pass whole tensors or views that start at a \
                             multiple of 8 elements"
                        .into(),
                });
            }
        }
        for (i, &(a, pa, la)) in bufs.iter().enumerate() {
            for &(b, pb, lb) in &bufs[i + 1..] {
                if la > 0 && lb > 0 && pa < pb + lb as u64 && pb < pa + la as u64 {
                    return Err(Error::InvalidConfig {
                        name: "AllReduceRmsNorm buffers",
                        value: format!("{a} at {pa:#x} ({la} bytes), {b} at {pb:#x} ({lb} bytes)"),
                        reason: format!(
                            "{a} and {b} overlap; the kernel reads some while it writes others. \
                             Fix: pass four separate buffers"
                        ),
                    });
                }
            }
        }
        Ok(tokens)
    }
}

/// The operation on the host, for tests and checks: `parts[p]` is PE `p`'s `x` (tokens x
/// `hidden`), `residual` the residual stream before the call, `weight` the norm's weight.
/// Returns `(residual after, out)`. The residual is what the kernels compute bit for bit (f32
/// sums in rank order, one rounding); the norm's sum of squares runs in f64 here and in f32
/// over a block's threads on the GPU, and the GPU's `rsqrt` is approximate, so `out` agrees
/// within [`within_tolerance`].
pub fn reference(
    parts: &[&[bf16]],
    residual: &[bf16],
    weight: &[bf16],
    hidden: usize,
    eps: f32,
) -> (Vec<bf16>, Vec<bf16>) {
    let r: Vec<bf16> = (0..residual.len())
        .map(|i| {
            let mut s = 0.0f32;
            for x in parts {
                s += x[i].to_f32();
            }
            bf16::from_f32(s + residual[i].to_f32())
        })
        .collect();
    let mut y = vec![bf16::ZERO; r.len()];
    for (row, out) in r.chunks(hidden.max(1)).zip(y.chunks_mut(hidden.max(1))) {
        let ss: f64 = row.iter().map(|v| v.to_f64() * v.to_f64()).sum();
        let inv = (1.0 / (ss / hidden as f64 + f64::from(eps)).sqrt()) as f32;
        for ((o, v), w) in out.iter_mut().zip(row).zip(weight) {
            *o = bf16::from_f32(v.to_f32() * inv * w.to_f32());
        }
    }
    (r, y)
}

/// Whether a GPU result `got` of the norm agrees with [`reference()`]'s `want`: within 2^-7 of
/// `want`'s magnitude (two bf16 rounding steps), or both tiny.
pub fn within_tolerance(got: bf16, want: bf16) -> bool {
    let (g, w) = (got.to_f32(), want.to_f32());
    (g - w).abs() <= w.abs() / 128.0 + 1e-6
}

#[cfg(test)]
mod tests {
    use super::{config_error, reference, within_tolerance};
    use crate::bf16;

    #[test]
    fn the_reference_adds_in_rank_order_and_normalizes() {
        let b = |v: f32| bf16::from_f32(v);
        let (x0, x1) = ([b(1.0), b(2.0)], [b(3.0), b(-6.0)]);
        let (r, y) = reference(&[&x0, &x1], &[b(0.0), b(0.0)], &[b(1.0), b(0.5)], 2, 0.0);
        assert_eq!(r, vec![b(4.0), b(-4.0)]);
        // rms = 4: y = r / 4 * w.
        assert_eq!(y, vec![b(1.0), b(-0.5)]);
        assert!(within_tolerance(b(1.0), b(1.0)) && !within_tolerance(b(1.03), b(1.0)));
    }

    #[test]
    fn bad_sizes_say_what_to_pass() {
        assert!(config_error(8192, 4096, 1e-5).is_none());
        assert!(config_error(12, 4, 1e-5).unwrap().contains("multiple of 8"));
        assert!(config_error(0, 4, 1e-5).unwrap().contains("multiple of 8"));
        assert!(config_error(8, 0, 1e-5)
            .unwrap()
            .contains("max_tokens is 0"));
        assert!(config_error(8, 4, f32::NAN).unwrap().contains("eps"));
        assert!(config_error(8, 4, -1.0).unwrap().contains("eps"));
    }
}
