//! Remote atomics: every AMO of the spec on u64, the arithmetic ones and the bit ones on i32,
//! and fetch/set/swap on f32 and f64, under contention (2 blocks x 64 threads on every PE).
//! Each PE targets the next one; `atomic_add` and the bit operations target every PE, so the
//! final values depend on the PE count and are computed here for it.

use crate::runner::{case, Case};
use crate::util::{self, check_eq, ensure, sorted, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("amo/u64_all", u64_case),
    case("amo/i32", i32_case),
    case("amo/f32_fetch_set_swap", f32_case),
    case("amo/f64_fetch_set_swap", f64_case),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[
    &amo_u64::SPEC,
    &amo_fetch_u64::SPEC,
    &amo_i32::SPEC,
    &amo_f32::SPEC,
    &amo_f64::SPEC,
];

const T: usize = 128;
/// Where the one-thread fetches (one per target PE, up to 8 PEs) start in the fetch buffer.
const F1: usize = 4 * T;

#[pgas_kernel]
fn amo_u64(x: &mut SymTensor<u64>, f: &mut SymTensor<u64>, pe: i32) {
    let t = global_thread_idx();
    let nt = (grid_dim_x() * block_dim_x()) as usize;
    let me = my_pe();
    for k in 0..n_pes() {
        atomic_add(&mut x[0], 1, k);
    }
    f[t] = atomic_fetch_add(&mut x[1], 2, pe);
    atomic_inc(&mut x[2], pe);
    f[nt + t] = atomic_fetch_inc(&mut x[3], pe);
    f[2 * nt + t] = atomic_compare_swap(&mut x[4], 0, t as u64 + 1, pe);
    f[3 * nt + t] = atomic_swap(&mut x[5], t as u64 + 1, pe);
    if t == 0 {
        for k in 0..n_pes() {
            let kk = k as usize;
            atomic_or(&mut x[6], 1u64 << me, k);
            atomic_and(&mut x[7], !(1u64 << me), k);
            atomic_xor(&mut x[8], 0xF0F0u64 << me, k);
            f[4 * nt + kk] = atomic_fetch_or(&mut x[9], 1u64 << me, k);
            f[4 * nt + 8 + kk] = atomic_fetch_and(&mut x[10], !(1u64 << me), k);
            f[4 * nt + 16 + kk] = atomic_fetch_xor(&mut x[11], 0xF0F0u64 << me, k);
        }
        atomic_set(&mut x[12], 42 + me as u64, pe);
    }
}

#[pgas_kernel]
fn amo_fetch_u64(x: &SymTensor<u64>, out: &mut SymTensor<u64>, pe: i32) {
    out[0] = atomic_fetch(&x[12], pe);
}

fn xor_pattern(pes: impl Iterator<Item = usize>) -> u64 {
    pes.fold(0, |a, k| a ^ (0xF0F0u64 << k))
}

fn u64_case(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let mut init = vec![0u64; 13];
    init[7] = u64::MAX;
    init[10] = u64::MAX;
    let mut x = p.alloc_from(&init)?;
    let mut f = p.alloc::<u64>(F1 + 24)?;
    let mut out = p.alloc::<u64>(1)?;
    f.fill(u64::MAX)?;
    out.fill(0)?;
    p.barrier_all()?;
    let pe = util::next(p) as i32;
    amo_u64::launch(p, LaunchConfig::blocks(2, 64), &mut x, &mut f, pe)?;
    util::settle(p)?;
    amo_fetch_u64::launch(p, LaunchConfig::blocks(1, 1), &x, &mut out, pe)?;
    util::settle(p)?;
    let (xv, fv) = (x.to_vec()?, f.to_vec()?);
    let mask = (1u64 << n) - 1;
    let all_xor = xor_pattern(0..n);
    let t = T as u64;
    check_eq(
        "atomic_add from every thread of every PE",
        &xv[..4],
        &[t * n as u64, 2 * t, t, t],
    )?;
    check_eq("atomic_or / and / xor", &xv[6..9], &[mask, !mask, all_xor])?;
    check_eq(
        "atomic_fetch_or / and / xor finals",
        &xv[9..12],
        &[mask, !mask, all_xor],
    )?;
    check_eq(
        "atomic_set then atomic_fetch",
        &[xv[12], out.to_vec()?[0]],
        &[42 + util::prev(p) as u64, 42 + me as u64],
    )?;
    let want_fa: Vec<u64> = (0..t).map(|v| 2 * v).collect();
    check_eq("atomic_fetch_add old values", &sorted(&fv[..T]), &want_fa)?;
    check_eq(
        "atomic_fetch_inc old values",
        &sorted(&fv[T..2 * T]),
        &(0..t).collect::<Vec<_>>(),
    )?;
    let cas = &fv[2 * T..3 * T];
    let zeros = cas.iter().filter(|&&v| v == 0).count();
    let won = cas.iter().copied().find(|&v| v != 0).unwrap_or(0);
    ensure(
        zeros == 1 && (1..=t).contains(&won) && cas.iter().all(|&v| v == 0 || v == won),
        || format!("atomic_compare_swap: {zeros} threads saw 0 (want 1), others saw {cas:?}"),
    )?;
    ensure((1..=t).contains(&xv[4]) && (1..=t).contains(&xv[5]), || {
        format!(
            "compare_swap/swap finals {} {} out of 1..={t}",
            xv[4], xv[5]
        )
    })?;
    let swaps = sorted(&fv[3 * T..4 * T]);
    let distinct = swaps.windows(2).all(|w| w[0] != w[1]);
    ensure(swaps[0] == 0 && distinct && swaps[T - 1] <= t, || {
        format!("atomic_swap old values are not a chain from 0: {swaps:?}")
    })?;
    let others = || (0..n).filter(move |&k| k != me);
    for k in 0..n {
        let (o, a, x_) = (fv[F1 + k], fv[F1 + 8 + k], fv[F1 + 16 + k]);
        let subsets = 0..1u32 << (n - 1);
        let xor_ok = subsets.clone().any(|s| {
            x_ == xor_pattern(
                others()
                    .enumerate()
                    .filter(|(j, _)| s >> j & 1 == 1)
                    .map(|(_, k)| k),
            )
        });
        ensure(
            o >> me & 1 == 0 && o & !mask == 0 && a >> me & 1 == 1 && xor_ok,
            || format!("fetch_or/and/xor on PE {k} returned {o:#x} {a:#x} {x_:#x}"),
        )?;
    }
    Ok(())
}

#[pgas_kernel]
fn amo_i32(x: &mut SymTensor<i32>, f: &mut SymTensor<i32>, pe: i32) {
    let t = global_thread_idx();
    let nt = (grid_dim_x() * block_dim_x()) as usize;
    for k in 0..n_pes() {
        atomic_add(&mut x[0], -3, k);
    }
    f[t] = atomic_fetch_add(&mut x[1], -1, pe);
    atomic_inc(&mut x[2], pe);
    f[nt + t] = atomic_fetch_inc(&mut x[3], pe);
    f[2 * nt + t] = atomic_compare_swap(&mut x[4], -1, t as i32, pe);
    f[3 * nt + t] = atomic_swap(&mut x[5], t as i32 + 1, pe);
    if t == 0 {
        let bit = 1i32 << my_pe();
        atomic_or(&mut x[6], bit, pe);
        atomic_and(&mut x[7], !bit, pe);
        atomic_xor(&mut x[8], bit, pe);
        f[4 * nt] = atomic_fetch_or(&mut x[9], bit, pe);
        f[4 * nt + 1] = atomic_fetch_and(&mut x[10], !bit, pe);
        f[4 * nt + 2] = atomic_fetch_xor(&mut x[11], bit, pe);
        atomic_set(&mut x[12], -42, pe);
        f[4 * nt + 3] = atomic_fetch(&x[13], pe);
    }
}

fn i32_case(p: &Pgas) -> CaseResult {
    let (prev, n) = (util::prev(p), util::npes(p));
    let init = [0i32, 0, 0, 0, -1, 0, 0, -1, 5, 0, -1, 5, 0, 1234];
    let mut x = p.alloc_from(&init)?;
    let mut f = p.alloc::<i32>(4 * T + 4)?;
    f.fill(i32::MIN)?;
    p.barrier_all()?;
    amo_i32::launch(
        p,
        LaunchConfig::blocks(2, 64),
        &mut x,
        &mut f,
        util::next(p) as i32,
    )?;
    util::settle(p)?;
    let (xv, fv) = (x.to_vec()?, f.to_vec()?);
    let t = T as i32;
    let bit = 1i32 << prev;
    #[rustfmt::skip]
    let want = [-3 * t * n as i32, -t, t, t, xv[4], xv[5], bit, !bit, 5 ^ bit, bit, !bit, 5 ^ bit, -42, 1234];
    check_eq("i32 finals", &xv, &want)?;
    check_eq(
        "atomic_fetch_add",
        &sorted(&fv[..T]),
        &(-t + 1..=0).collect::<Vec<_>>(),
    )?;
    check_eq(
        "atomic_fetch_inc",
        &sorted(&fv[T..2 * T]),
        &(0..t).collect::<Vec<_>>(),
    )?;
    let cas = &fv[2 * T..3 * T];
    let winners = cas.iter().filter(|&&v| v == -1).count();
    ensure(winners == 1 && (0..t).contains(&xv[4]), || {
        format!("atomic_compare_swap: {winners} winners, final {}", xv[4])
    })?;
    // This PE saw the next PE's initial 0 and all of its own swaps but the one that stayed there
    // last, each once; its own final value is one of the previous PE's swaps.
    let swaps = sorted(&fv[3 * T..4 * T]);
    let distinct = swaps.windows(2).all(|w| w[0] != w[1]);
    ensure(
        swaps[0] == 0 && distinct && swaps[T - 1] <= t && (1..=t).contains(&xv[5]),
        || format!("atomic_swap: old values {swaps:?}, final {}", xv[5]),
    )?;
    let want_f = [0, -1, 5, 1234];
    check_eq("fetch_or/and/xor, fetch", &fv[4 * T..], &want_f)?;
    Ok(())
}

/// One block of `T_F32` threads; the fetch lands right after the swaps.
#[pgas_kernel]
fn amo_f32(x: &mut SymTensor<f32>, f: &mut SymTensor<f32>, pe: i32) {
    let t = global_thread_idx();
    f[t] = atomic_swap(&mut x[0], t as f32 + 0.5, pe);
    if t == 0 {
        atomic_set(&mut x[1], -2.25, pe);
        f[block_dim_x() as usize] = atomic_fetch(&x[2], pe);
    }
}

/// `amo_f32` on `f64`: NVSHMEM 3.4.5's own double swap returns the old bits converted as an
/// integer (-1.0 came back as 13830554455654793216.0), so pgas swaps doubles as `uint64`.
#[pgas_kernel]
fn amo_f64(x: &mut SymTensor<f64>, f: &mut SymTensor<f64>, pe: i32) {
    let t = global_thread_idx();
    f[t] = atomic_swap(&mut x[0], t as f64 + 0.5, pe);
    if t == 0 {
        atomic_set(&mut x[1], -2.25, pe);
        f[block_dim_x() as usize] = atomic_fetch(&x[2], pe);
    }
}

const T_F32: usize = 64;

fn f32_case(p: &Pgas) -> CaseResult {
    float_case::<f32>(p, |p, x, f, pe| {
        amo_f32::launch(p, LaunchConfig::blocks(1, T_F32 as u32), x, f, pe)
    })
}

fn f64_case(p: &Pgas) -> CaseResult {
    float_case::<f64>(p, |p, x, f, pe| {
        amo_f64::launch(p, LaunchConfig::blocks(1, T_F32 as u32), x, f, pe)
    })
}

/// A float element type these cases run on.
trait Float: Copy + PartialEq + std::fmt::Debug + Into<f64> + pgas::cudarc::driver::DeviceRepr {
    fn of(v: f64) -> Self;
}
impl Float for f32 {
    fn of(v: f64) -> f32 {
        v as f32
    }
}
impl Float for f64 {
    fn of(v: f64) -> f64 {
        v
    }
}

type FloatLaunch<T> = fn(&Pgas, &mut SymTensor<T>, &mut SymTensor<T>, i32) -> pgas::Result<()>;

/// Swaps from every thread into the next PE's word, a set and a fetch, checked on the host.
fn float_case<T: Float>(p: &Pgas, launch: FloatLaunch<T>) -> CaseResult {
    let me = util::me(p);
    let mut x = p.alloc_from(&[T::of(-1.0), T::of(0.0), T::of(me as f64 + 0.75)])?;
    let mut f = p.alloc::<T>(T_F32 + 1)?;
    f.fill(T::of(f64::NAN))?;
    p.barrier_all()?;
    launch(p, &mut x, &mut f, util::next(p) as i32)?;
    util::settle(p)?;
    let (xv, fv) = (x.to_vec()?, f.to_vec()?);
    let twice = |v: T| (v.into() * 2.0) as i64;
    // Doubled, the values are integers: the initial -1.0 is -2, the swaps t + 0.5 are 2t + 1.
    // As for i32: the next PE's initial value and distinct swaps; this PE's final is a swap.
    let seen: Vec<i64> = sorted(&fv[..T_F32].iter().map(|&v| twice(v)).collect::<Vec<_>>());
    let is_swap = |v: i64| v % 2 == 1 && (1..2 * T_F32 as i64).contains(&v);
    let distinct = seen.windows(2).all(|w| w[0] != w[1]);
    let ty = std::any::type_name::<T>();
    ensure(
        seen[0] == -2 && distinct && seen[1..].iter().all(|&v| is_swap(v)) && is_swap(twice(xv[0])),
        || {
            format!(
                "{ty} atomic_swap: old values (doubled) {seen:?}, final {:?}",
                xv[0]
            )
        },
    )?;
    check_eq(&format!("{ty} atomic_set"), &xv[1..2], &[T::of(-2.25)])?;
    check_eq(
        &format!("{ty} atomic_fetch"),
        &fv[T_F32..],
        &[T::of(util::next(p) as f64 + 0.75)],
    )
}
