//! Device collectives on `Team::WORLD` at block and warp scope: `reduce` with every `ReduceOp`
//! (bit ops on integers only), `reduce_scatter`, `all_gather`, `all_to_all` and `broadcast`,
//! against the same reductions done here over every PE's inputs (each PE's inputs are a
//! function of its number, so each PE can compute all of them).

use crate::runner::{case, Case};
use crate::util::{self, check_eq, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("collectives/reduce_i32", |p| {
        reduce_cases(p, "i32", I32_OPS, ival, i32::MIN)
    }),
    case("collectives/reduce_f32", |p| {
        reduce_cases(p, "f32", F32_OPS, fval, f32::NAN)
    }),
    case("collectives/movers_block", |p| movers(p, true)),
    case("collectives/movers_warp", |p| movers(p, false)),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[
    &reduce_i32_block_sum::SPEC,
    &reduce_i32_block_prod::SPEC,
    &reduce_i32_block_min::SPEC,
    &reduce_i32_block_max::SPEC,
    &reduce_i32_block_and::SPEC,
    &reduce_i32_block_or::SPEC,
    &reduce_i32_block_xor::SPEC,
    &reduce_i32_warp_sum::SPEC,
    &reduce_f32_block_sum::SPEC,
    &reduce_f32_block_prod::SPEC,
    &reduce_f32_block_min::SPEC,
    &reduce_f32_block_max::SPEC,
    &reduce_f32_warp_max::SPEC,
    &movers_block::SPEC,
    &movers_warp::SPEC,
];

/// Elements per PE.
const L: usize = 256;

/// One kernel per type, scope and operator: NVSHMEM's reduce templates cost NVVM and ptxas more
/// than linearly in the kernel's size (a kernel of seven reductions took 206 s to compile on an
/// H200 host, one reduction about 12 s), and separate kernels spread over a node's PEs.
/// Every operator at block scope; the warp scope runs the same template with another group, so
/// two operators cover it.
macro_rules! reduce_kernel {
    ($name:ident, $t:ident, $scope:ident, $op:ident) => {
        #[pgas_kernel]
        fn $name(team: Team, d: &mut SymTensor<$t>, src: &SymTensor<$t>) {
            $scope(team, d, src, ReduceOp::$op);
        }
    };
}
reduce_kernel!(reduce_i32_block_sum, i32, reduce_block, Sum);
reduce_kernel!(reduce_i32_block_prod, i32, reduce_block, Prod);
reduce_kernel!(reduce_i32_block_min, i32, reduce_block, Min);
reduce_kernel!(reduce_i32_block_max, i32, reduce_block, Max);
reduce_kernel!(reduce_i32_block_and, i32, reduce_block, And);
reduce_kernel!(reduce_i32_block_or, i32, reduce_block, Or);
reduce_kernel!(reduce_i32_block_xor, i32, reduce_block, Xor);
reduce_kernel!(reduce_i32_warp_sum, i32, reduce_warp, Sum);
reduce_kernel!(reduce_f32_block_sum, f32, reduce_block, Sum);
reduce_kernel!(reduce_f32_block_prod, f32, reduce_block, Prod);
reduce_kernel!(reduce_f32_block_min, f32, reduce_block, Min);
reduce_kernel!(reduce_f32_block_max, f32, reduce_block, Max);
reduce_kernel!(reduce_f32_warp_max, f32, reduce_warp, Max);

/// A reduce kernel's checked launch.
type Launch<T> =
    fn(&Pgas, LaunchConfig, Team, &mut SymTensor<T>, &SymTensor<T>) -> pgas::Result<()>;

/// One reduction: its name, its kernel's launch, the host operator it must match.
type ReduceCase<T> = (&'static str, Launch<T>, fn(T, T) -> T);

/// The i32 reductions.
const I32_OPS: &[ReduceCase<i32>] = &[
    ("block Sum", reduce_i32_block_sum::launch, |a, b| {
        a.wrapping_add(b)
    }),
    ("block Prod", reduce_i32_block_prod::launch, |a, b| {
        a.wrapping_mul(b)
    }),
    ("block Min", reduce_i32_block_min::launch, |a, b| a.min(b)),
    ("block Max", reduce_i32_block_max::launch, |a, b| a.max(b)),
    ("block And", reduce_i32_block_and::launch, |a, b| a & b),
    ("block Or", reduce_i32_block_or::launch, |a, b| a | b),
    ("block Xor", reduce_i32_block_xor::launch, |a, b| a ^ b),
    ("warp Sum", reduce_i32_warp_sum::launch, |a, b| {
        a.wrapping_add(b)
    }),
];

/// The f32 reductions (halves and small integers: every sum and product here is exact in any
/// order).
const F32_OPS: &[ReduceCase<f32>] = &[
    ("block Sum", reduce_f32_block_sum::launch, |a, b| a + b),
    ("block Prod", reduce_f32_block_prod::launch, |a, b| a * b),
    ("block Min", reduce_f32_block_min::launch, f32::min),
    ("block Max", reduce_f32_block_max::launch, f32::max),
    ("warp Max", reduce_f32_warp_max::launch, f32::max),
];

fn ival(pe: usize, i: usize) -> i32 {
    ((pe * 7 + i * 3) % 11) as i32 - 5
}

fn fval(pe: usize, i: usize) -> f32 {
    (pe as f32 + 1.0) * 0.5 + (i % 4) as f32 - 1.0
}

fn fold_pes<T: Copy>(n: usize, i: usize, v: fn(usize, usize) -> T, op: impl Fn(T, T) -> T) -> T {
    (1..n).fold(v(0, i), |a, k| op(a, v(k, i)))
}

/// Each reduction of `ops` into a fresh buffer, against the host's fold over every PE's input.
fn reduce_cases<T>(
    p: &Pgas, ty: &str, ops: &[ReduceCase<T>], val: fn(usize, usize) -> T, fill: T,
) -> CaseResult
where
    T: pgas::cudarc::driver::DeviceRepr
        + pgas::cudarc::driver::ValidAsZeroBits
        + Copy
        + PartialEq
        + std::fmt::Debug
        + Default
        + Unpin
        + 'static,
{
    let (me, n) = (util::me(p), util::npes(p));
    let src = p.alloc_from(&(0..L).map(|i| val(me, i)).collect::<Vec<_>>())?;
    for (name, launch, op) in ops {
        let mut d = p.alloc::<T>(L)?;
        d.fill(fill)?;
        p.barrier_all()?;
        let threads = if name.starts_with("warp") { 32 } else { 128 };
        launch(
            p,
            LaunchConfig::blocks(1, threads),
            Team::WORLD,
            &mut d,
            &src,
        )?;
        util::settle(p)?;
        let want: Vec<T> = (0..L).map(|i| fold_pes(n, i, val, op)).collect();
        check_eq(&format!("reduce {ty} {name}"), &d.to_vec()?, &want)?;
    }
    Ok(())
}

#[pgas_kernel]
fn movers_block(
    team: Team, rs: &mut SymTensor<i64>, rs_src: &SymTensor<i64>, ag: &mut SymTensor<i64>,
    ag_src: &SymTensor<i64>, a2a: &mut SymTensor<i64>, a2a_src: &SymTensor<i64>,
    bc: &mut SymTensor<i64>, bc_src: &SymTensor<i64>, root: i32,
) {
    reduce_scatter_block(team, rs, rs_src, ReduceOp::Sum);
    all_gather_block(team, ag, ag_src);
    all_to_all_block(team, a2a, a2a_src);
    broadcast_block(team, bc, bc_src, root);
}

#[pgas_kernel]
fn movers_warp(
    team: Team, rs: &mut SymTensor<i64>, rs_src: &SymTensor<i64>, ag: &mut SymTensor<i64>,
    ag_src: &SymTensor<i64>, a2a: &mut SymTensor<i64>, a2a_src: &SymTensor<i64>,
    bc: &mut SymTensor<i64>, bc_src: &SymTensor<i64>, root: i32,
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
