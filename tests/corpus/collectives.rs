//! Device collectives at block and warp scope, with every reduction operator.
use pgas::prelude::*;

#[pgas_kernel]
fn reductions(team: Team, fdst: &mut SymTensor<f32>, fsrc: &SymTensor<f32>, idst: &mut SymTensor<i32>, isrc: &SymTensor<i32>, hdst: &mut SymTensor<f16>, hsrc: &SymTensor<f16>) {
    reduce_block(team, fdst, fsrc, ReduceOp::Sum);
    reduce_block(team, &mut fdst[0..4], &fsrc[0..4], ReduceOp::Prod);
    reduce_block(team, idst, isrc, ReduceOp::Min);
    reduce_block(team, idst, isrc, ReduceOp::Max);
    reduce_block(team, idst, isrc, ReduceOp::And);
    reduce_block(team, idst, isrc, ReduceOp::Or);
    reduce_block(team, idst, isrc, ReduceOp::Xor);
    reduce_block(team, hdst, hsrc, ReduceOp::Sum);
    if warp_id() == 0 {
        reduce_warp(team, fdst, fsrc, ReduceOp::Max);
    }
}

#[pgas_kernel]
fn data_movement(team: Team, dst: &mut SymTensor<u64>, src: &SymTensor<u64>, small: &mut SymTensor<u64>) {
    reduce_scatter_block(team, small, src, ReduceOp::Sum);
    all_gather_block(team, dst, small);
    all_to_all_block(team, dst, src);
    broadcast_block(team, dst, src, 0);
    if warp_id() == 0 {
        reduce_scatter_warp(team, small, src, ReduceOp::Xor);
        all_gather_warp(team, dst, small);
        all_to_all_warp(team, dst, src);
        broadcast_warp(team, dst, src, team_n_pes(team) - 1);
    }
}
