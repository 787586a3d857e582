//! Collectives over peer memory inside a kernel (pgas's LL protocol, no collective launch):
//! a fused epilogue that all-reduces each block's partial results, and an all-gather from
//! shared memory; broadcasts.
use pgas::prelude::*;

/// Each block computes 256 partial sums, then all-reduces them with the same block of every
/// team PE into `out` (its own scratch region of `words` words per block).
#[pgas_kernel(max_threads = 256)]
fn fused_epilogue_all_reduce(
    team: Team,
    out: &mut SymTensor<f32>,
    x: &CudaSlice<f32>,
    partial: &mut CudaSlice<f32>,
    scratch: &mut SymTensor<u64>,
    words: usize,
) {
    let blk = block_idx_x() as usize;
    let t = thread_idx_x() as usize;
    let lo = blk * 256;
    if lo + t < x.len() && lo + t < partial.len() {
        partial[lo + t] = x[lo + t] * x[lo + t];
    }
    sync_threads();
    let hi = min(lo + 256, partial.len());
    team_all_reduce_block(
        team,
        &mut out[lo..hi],
        &partial[lo..hi],
        &mut scratch[blk * words],
        ReduceOp::Max,
    );
}

/// Block 0 gathers 64 values it staged in shared memory from every team PE into `dst`
/// (team size x 64, in team order).
#[pgas_kernel(max_threads = 64)]
fn gather_from_shared(team: Team, dst: &mut SymTensor<bf16>, scratch: &mut SymTensor<u64>) {
    let s = shared_array::<bf16, 64>();
    let t = thread_idx_x() as usize;
    s[t] = (team_my_pe(team) * 64 + t as i32) as f32 as bf16;
    sync_threads();
    team_all_gather_block(team, dst, &s[0..64], &mut scratch[0]);
}

/// Each block reduce-scatters its 4 x 32 partial values (chunk `q` for team PE `q`) and
/// exchanges chunks of its row with every PE, over the LL lines of its own scratch region.
#[pgas_kernel(max_threads = 128)]
fn personal_collectives(
    team: Team,
    part: &mut SymTensor<f32>,
    x: &SymTensor<i64>,
    y: &mut SymTensor<i64>,
    scratch: &mut SymTensor<u64>,
    words: usize,
) {
    let blk = block_idx_x() as usize;
    let n = team_n_pes(team) as usize;
    let s = shared_array::<f32, 128>();
    let t = thread_idx_x() as usize;
    s[t] = t as f32;
    team_reduce_scatter_block(
        team,
        &mut part[blk * 32..blk * 32 + 32],
        &s[0..n * 32],
        &mut scratch[blk * words],
        ReduceOp::Sum,
    );
    let w = n * 16;
    team_all_to_all_block(
        team,
        &mut y[blk * w..blk * w + w],
        &x[blk * w..blk * w + w],
        &mut scratch[blk * words],
    );
}

/// Each block broadcasts its 200 values from team rank `root` twice: by the root's lines to
/// every PE, then by the relay (chunks passed on by the other ranks), in place.
#[pgas_kernel(max_threads = 256)]
fn broadcasts(
    team: Team,
    y: &mut SymTensor<u16>,
    x: &SymTensor<u16>,
    scratch: &mut SymTensor<u64>,
    words: usize,
    root: i32,
) {
    let blk = block_idx_x() as usize;
    let o = blk * 200;
    team_broadcast_block(team, &mut y[o..o + 200], &x[o..o + 200], &mut scratch[blk * words], root);
    team_broadcast_relay_block(team, &mut y[o..o + 200], &y[o..o + 200], &mut scratch[blk * words], root);
}
