//! Device collectives on `Team::WORLD` at block and warp scope: `reduce` with every `ReduceOp`
//! (bit ops on integers only), `reduce_scatter`, `all_gather`, `all_to_all` and `broadcast`,
//! against the same reductions done here over every PE's inputs (each PE's inputs are a
//! function of its number, so each PE can compute all of them).

use crate::runner::{case, Case};
use crate::util::{self, check_eq, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("collectives/reduce_i32_block", |p| reduce_i32(p, true)),
    case("collectives/reduce_i32_warp", |p| reduce_i32(p, false)),
    case("collectives/reduce_f32_block", |p| reduce_f32(p, true)),
    case("collectives/reduce_f32_warp", |p| reduce_f32(p, false)),
    case("collectives/movers_block", |p| movers(p, true)),
    case("collectives/movers_warp", |p| movers(p, false)),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[
    &reduce_i32_block::SPEC,
    &reduce_i32_warp::SPEC,
    &reduce_f32_block::SPEC,
    &reduce_f32_warp::SPEC,
    &movers_block::SPEC,
    &movers_warp::SPEC,
];

/// Elements per PE.
const L: usize = 256;

#[pgas_kernel]
fn reduce_i32_block(team: Team, d: &mut SymTensor<i32>, src: &SymTensor<i32>) {
    reduce_block(team, &mut d[0..256], src, ReduceOp::Sum);
    reduce_block(team, &mut d[256..512], src, ReduceOp::Prod);
    reduce_block(team, &mut d[512..768], src, ReduceOp::Min);
    reduce_block(team, &mut d[768..1024], src, ReduceOp::Max);
    reduce_block(team, &mut d[1024..1280], src, ReduceOp::And);
    reduce_block(team, &mut d[1280..1536], src, ReduceOp::Or);
    reduce_block(team, &mut d[1536..1792], src, ReduceOp::Xor);
}

#[pgas_kernel]
fn reduce_i32_warp(team: Team, d: &mut SymTensor<i32>, src: &SymTensor<i32>) {
    reduce_warp(team, &mut d[0..256], src, ReduceOp::Sum);
    reduce_warp(team, &mut d[256..512], src, ReduceOp::Prod);
    reduce_warp(team, &mut d[512..768], src, ReduceOp::Min);
    reduce_warp(team, &mut d[768..1024], src, ReduceOp::Max);
    reduce_warp(team, &mut d[1024..1280], src, ReduceOp::And);
    reduce_warp(team, &mut d[1280..1536], src, ReduceOp::Or);
    reduce_warp(team, &mut d[1536..1792], src, ReduceOp::Xor);
}

#[pgas_kernel]
fn reduce_f32_block(team: Team, d: &mut SymTensor<f32>, src: &SymTensor<f32>) {
    reduce_block(team, &mut d[0..256], src, ReduceOp::Sum);
    reduce_block(team, &mut d[256..512], src, ReduceOp::Prod);
    reduce_block(team, &mut d[512..768], src, ReduceOp::Min);
    reduce_block(team, &mut d[768..1024], src, ReduceOp::Max);
}

#[pgas_kernel]
fn reduce_f32_warp(team: Team, d: &mut SymTensor<f32>, src: &SymTensor<f32>) {
    reduce_warp(team, &mut d[0..256], src, ReduceOp::Sum);
    reduce_warp(team, &mut d[256..512], src, ReduceOp::Prod);
    reduce_warp(team, &mut d[512..768], src, ReduceOp::Min);
    reduce_warp(team, &mut d[768..1024], src, ReduceOp::Max);
}

fn ival(pe: usize, i: usize) -> i32 {
    ((pe * 7 + i * 3) % 11) as i32 - 5
}

fn fval(pe: usize, i: usize) -> f32 {
    (pe as f32 + 1.0) * 0.5 + (i % 4) as f32 - 1.0
}

fn fold_pes<T: Copy>(n: usize, i: usize, v: fn(usize, usize) -> T, op: impl Fn(T, T) -> T) -> T {
    (1..n).fold(v(0, i), |a, k| op(a, v(k, i)))
}

fn reduce_i32(p: &Pgas, block: bool) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let src = p.alloc_from(&(0..L).map(|i| ival(me, i)).collect::<Vec<_>>())?;
    let mut d = p.alloc::<i32>(7 * L)?;
    d.fill(i32::MIN)?;
    p.barrier_all()?;
    if block {
        reduce_i32_block::launch(p, LaunchConfig::blocks(1, 128), Team::WORLD, &mut d, &src)?;
    } else {
        reduce_i32_warp::launch(p, LaunchConfig::blocks(1, 32), Team::WORLD, &mut d, &src)?;
    }
    util::settle(p)?;
    let got = d.to_vec()?;
    let ops: [(&str, fn(i32, i32) -> i32); 7] = [
        ("Sum", |a, b| a.wrapping_add(b)),
        ("Prod", |a, b| a.wrapping_mul(b)),
        ("Min", |a, b| a.min(b)),
        ("Max", |a, b| a.max(b)),
        ("And", |a, b| a & b),
        ("Or", |a, b| a | b),
        ("Xor", |a, b| a ^ b),
    ];
    for (k, (name, op)) in ops.iter().enumerate() {
        let want: Vec<i32> = (0..L).map(|i| fold_pes(n, i, ival, op)).collect();
        let scope = if block { "block" } else { "warp" };
        check_eq(
            &format!("reduce_{scope} i32 {name}"),
            &got[k * L..(k + 1) * L],
            &want,
        )?;
    }
    Ok(())
}

fn reduce_f32(p: &Pgas, block: bool) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let src = p.alloc_from(&(0..L).map(|i| fval(me, i)).collect::<Vec<_>>())?;
    let mut d = p.alloc::<f32>(4 * L)?;
    d.fill(f32::NAN)?;
    p.barrier_all()?;
    if block {
        reduce_f32_block::launch(p, LaunchConfig::blocks(1, 128), Team::WORLD, &mut d, &src)?;
    } else {
        reduce_f32_warp::launch(p, LaunchConfig::blocks(1, 32), Team::WORLD, &mut d, &src)?;
    }
    util::settle(p)?;
    let got = d.to_vec()?;
    // Halves and small integers: every sum and product here is exact in any order.
    let ops: [(&str, fn(f32, f32) -> f32); 4] = [
        ("Sum", |a, b| a + b),
        ("Prod", |a, b| a * b),
        ("Min", f32::min),
        ("Max", f32::max),
    ];
    for (k, (name, op)) in ops.iter().enumerate() {
        let want: Vec<f32> = (0..L).map(|i| fold_pes(n, i, fval, op)).collect();
        let scope = if block { "block" } else { "warp" };
        check_eq(
            &format!("reduce_{scope} f32 {name}"),
            &got[k * L..(k + 1) * L],
            &want,
        )?;
    }
    Ok(())
}

#[pgas_kernel]
fn movers_block(
    team: Team,
    rs: &mut SymTensor<i64>,
    rs_src: &SymTensor<i64>,
    ag: &mut SymTensor<i64>,
    ag_src: &SymTensor<i64>,
    a2a: &mut SymTensor<i64>,
    a2a_src: &SymTensor<i64>,
    bc: &mut SymTensor<i64>,
    bc_src: &SymTensor<i64>,
    root: i32,
) {
    reduce_scatter_block(team, rs, rs_src, ReduceOp::Sum);
    all_gather_block(team, ag, ag_src);
    all_to_all_block(team, a2a, a2a_src);
    broadcast_block(team, bc, bc_src, root);
}

#[pgas_kernel]
fn movers_warp(
    team: Team,
    rs: &mut SymTensor<i64>,
    rs_src: &SymTensor<i64>,
    ag: &mut SymTensor<i64>,
    ag_src: &SymTensor<i64>,
    a2a: &mut SymTensor<i64>,
    a2a_src: &SymTensor<i64>,
    bc: &mut SymTensor<i64>,
    bc_src: &SymTensor<i64>,
    root: i32,
) {
    reduce_scatter_warp(team, rs, rs_src, ReduceOp::Sum);
    all_gather_warp(team, ag, ag_src);
    all_to_all_warp(team, a2a, a2a_src);
    broadcast_warp(team, bc, bc_src, root);
}

/// Inputs of PE `pe` for collective `c`, element `i`: distinct everywhere, so a misplaced
/// block shows.
fn mval(c: i64, pe: usize, i: usize) -> i64 {
    c * 1_000_000_000 + pe as i64 * 1_000_000 + i as i64
}

fn movers(p: &Pgas, block: bool) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let root = n - 1;
    let fill = |c: i64, len: usize| (0..len).map(|i| mval(c, me, i)).collect::<Vec<_>>();
    let rs_src = p.alloc_from(&fill(1, L * n))?;
    let ag_src = p.alloc_from(&fill(2, L))?;
    let a2a_src = p.alloc_from(&fill(3, L * n))?;
    let bc_src = p.alloc_from(&fill(4, L))?;
    let mut rs = p.alloc::<i64>(L)?;
    let mut ag = p.alloc::<i64>(L * n)?;
    let mut a2a = p.alloc::<i64>(L * n)?;
    let mut bc = p.alloc::<i64>(L)?;
    for t in [&mut rs, &mut ag, &mut a2a, &mut bc] {
        t.fill(-1)?;
    }
    p.barrier_all()?;
    let r = root as i32;
    if block {
        let cfg = LaunchConfig::blocks(1, 128);
        movers_block::launch(
            p,
            cfg,
            Team::WORLD,
            &mut rs,
            &rs_src,
            &mut ag,
            &ag_src,
            &mut a2a,
            &a2a_src,
            &mut bc,
            &bc_src,
            r,
        )?;
    } else {
        let cfg = LaunchConfig::blocks(1, 32);
        movers_warp::launch(
            p,
            cfg,
            Team::WORLD,
            &mut rs,
            &rs_src,
            &mut ag,
            &ag_src,
            &mut a2a,
            &a2a_src,
            &mut bc,
            &bc_src,
            r,
        )?;
    }
    util::settle(p)?;
    let scope = if block { "block" } else { "warp" };
    let want_rs: Vec<i64> = (0..L)
        .map(|i| (0..n).map(|k| mval(1, k, me * L + i)).sum())
        .collect();
    check_eq(
        &format!("reduce_scatter_{scope} Sum"),
        &rs.to_vec()?,
        &want_rs,
    )?;
    let want_ag: Vec<i64> = (0..n)
        .flat_map(|k| (0..L).map(move |i| mval(2, k, i)))
        .collect();
    check_eq(&format!("all_gather_{scope}"), &ag.to_vec()?, &want_ag)?;
    let want_a2a: Vec<i64> = (0..n)
        .flat_map(|k| (0..L).map(move |i| mval(3, k, me * L + i)))
        .collect();
    check_eq(&format!("all_to_all_{scope}"), &a2a.to_vec()?, &want_a2a)?;
    let want_bc: Vec<i64> = (0..L).map(|i| mval(4, root, i)).collect();
    check_eq(
        &format!("broadcast_{scope} from PE {root}"),
        &bc.to_vec()?,
        &want_bc,
    )
}
