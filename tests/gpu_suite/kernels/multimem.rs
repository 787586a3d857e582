//! Multicast (NVLink SHARP): loads, stores and reductions through a team's multicast address of
//! a symmetric tensor (`multimem_*`), and the query that guards them (`has_multicast`). The GPU
//! suite runs them where every PE has a multicast address (`multicast/multimem_and_host_write`);
//! the test machines run with NVLink multicast off, so there the snapshot and the NVRTC compile
//! are what checks them.
use pgas::prelude::*;

/// `x[i] = base + i` on every PE of `team`, stored once through the multicast address; reports
/// in `ok[0]` whether the team had one (and stores nothing where not).
#[pgas_kernel]
pub fn multimem_store(x: &mut SymTensor<f32>, ok: &mut CudaSlice<u32>, team: Team, base: f32) {
    let i = global_thread_idx() as usize;
    let here = x.has_multicast(team);
    if i == 0 {
        ok[0] = here as u32;
    }
    if here && i < x.len() {
        multimem_st(&mut x[i], team, base + i as f32);
    }
}

/// Adds `v` into `x[i]` on every PE of `team` (one reduction through the multicast address).
#[pgas_kernel]
pub fn multimem_add(x: &mut SymTensor<f32>, team: Team, v: f32) {
    let i = global_thread_idx() as usize;
    if i < x.len() {
        multimem_red_add(&mut x[i], team, v);
    }
}

/// `sum[i]`: `x[i]` added over the team's copies, in one load through the multicast address.
#[pgas_kernel]
pub fn multimem_sum(x: &SymTensor<f32>, sum: &mut CudaSlice<f32>, team: Team) {
    let i = global_thread_idx() as usize;
    if i < x.len() {
        sum[i] = multimem_ld_add(&x[i], team);
    }
}

/// The integer forms: the minimum, maximum and sum of `x[i]` over the team's copies, and a
/// 64-bit store and add through the multicast address into `y`.
#[pgas_kernel]
pub fn multimem_int(
    x: &SymTensor<i32>,
    y: &mut SymTensor<u64>,
    out: &mut CudaSlice<i32>,
    team: Team,
    v: u64,
) {
    let i = global_thread_idx() as usize;
    if i < x.len() {
        out[3 * i] = multimem_ld_min(&x[i], team);
        out[3 * i + 1] = multimem_ld_max(&x[i], team);
        out[3 * i + 2] = multimem_ld_add(&x[i], team);
    }
    if i < y.len() && team_my_pe(team) == 0 {
        multimem_st(&mut y[i], team, v);
        multimem_red_add(&mut y[i], team, v);
    }
}
