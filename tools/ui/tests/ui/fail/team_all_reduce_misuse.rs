use pgas::prelude::*;
#[pgas_kernel]
fn bitwise_float(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, s: &mut SymTensor<u64>) {
    team_all_reduce_block(team, dst, src, &mut s[0], ReduceOp::Xor);
}
#[pgas_kernel]
fn scratch_not_u64(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, flags: &mut SymTensor<u32>) {
    team_all_reduce_block(team, dst, src, &mut flags[0], ReduceOp::Sum);
}
#[pgas_kernel]
fn scratch_not_symmetric(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, local: &mut CudaSlice<u64>) {
    team_all_gather_block(team, dst, src, &mut local[0]);
}
#[pgas_kernel]
fn read_only_dst(team: Team, dst: &SymTensor<f32>, src: &SymTensor<f32>, s: &mut SymTensor<u64>) {
    team_all_reduce_block(team, dst, src, &mut s[0], ReduceOp::Sum);
}
#[pgas_kernel]
fn no_team(dst: &mut SymTensor<f32>, src: &SymTensor<f32>, s: &mut SymTensor<u64>) {
    team_all_gather_block(dst, src, &mut s[0]);
}
#[pgas_kernel]
fn personal_bitwise_float(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, s: &mut SymTensor<u64>) {
    team_reduce_scatter_block(team, dst, src, &mut s[0], ReduceOp::Or);
}
#[pgas_kernel]
fn personal_read_only_dst(team: Team, dst: &SymTensor<u8>, src: &SymTensor<u8>, s: &mut SymTensor<u64>) {
    team_all_to_all_block(team, dst, src, &mut s[0]);
}
#[pgas_kernel]
fn broadcast_root_not_integer(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, s: &mut SymTensor<u64>) {
    team_broadcast_block(team, dst, src, &mut s[0], 1.5f32);
}
#[pgas_kernel]
fn relay_read_only_dst(team: Team, dst: &SymTensor<f32>, src: &SymTensor<f32>, s: &mut SymTensor<u64>) {
    team_broadcast_relay_block(team, dst, src, &mut s[0], 0);
}

fn main() {}
