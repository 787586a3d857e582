//! Barriers, syncs and team queries (these kernels need a collective launch).
use pgas::prelude::*;

#[pgas_kernel]
fn world_barriers(flag: &mut SymTensor<i32>) {
    flag[0] = my_pe();
    barrier_all();
    sync_all();
    if warp_id() == 0 {
        barrier_all_warp();
        sync_all_warp();
    }
    barrier_all_block();
    sync_all_block();
}

#[pgas_kernel]
fn team_barriers(team: Team, out: &mut CudaSlice<i32>) {
    let me = team_my_pe(team);
    let size = team_n_pes(team);
    let world = team_translate_pe(team, (me + 1) % size, team);
    barrier(team);
    team_sync(team);
    if lane_id() < 32 {
        barrier_warp(team);
        team_sync_warp(team);
    }
    barrier_block(team);
    team_sync_block(team);
    out[0] = me + size * 100 + world;
}
