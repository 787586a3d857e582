//! Remote memory access: element `p`/`g` on every scalar type, and `put`/`get` (blocking and
//! `nbi`) at thread, warp and block scope, on slices of symmetric tensors and into a local
//! `CudaSlice`. Every PE puts to the next PE and gets from it, so after a run PE k holds PE k-1's
//! data in the put targets and PE k+1's in the get targets (itself on both sides with one PE).

use crate::runner::{case, Case};
use crate::util::{self, check_eq, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("rma/p_g_small_ints", pg_small),
    case("rma/p_g_wide_ints", pg_wide),
    case("rma/p_g_floats", pg_floats),
    case("rma/p_g_f16_bf16", pg_halves),
    case("rma/put_get_thread", thread_scope),
    case("rma/put_get_warp", warp_scope),
    case("rma/put_get_block", block_scope),
    case("rma/put_get_unchecked", unchecked),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[
    &pg_small_kernel::SPEC,
    &pg_wide_kernel::SPEC,
    &pg_float_kernel::SPEC,
    &pg_half_kernel::SPEC,
    &rma_thread::SPEC,
    &rma_warp::SPEC,
    &rma_block::SPEC,
];

const E: usize = 64;

/// Source values of PE `pe`: distinct per PE and element, small enough for every type.
fn val(pe: usize, i: usize) -> i64 {
    (pe as i64 + 1) * 100 + i as i64
}

#[pgas_kernel]
fn pg_small_kernel(
    d8: &mut SymTensor<i8>, s8: &SymTensor<i8>, g8: &mut SymTensor<i8>, du8: &mut SymTensor<u8>,
    su8: &SymTensor<u8>, gu8: &mut SymTensor<u8>, d16: &mut SymTensor<i16>, s16: &SymTensor<i16>,
    g16: &mut SymTensor<i16>, du16: &mut SymTensor<u16>, su16: &SymTensor<u16>,
    gu16: &mut SymTensor<u16>, pe: i32,
) {
    let i = thread_idx_x() as usize;
    p(&mut d8[i], s8[i], pe);
    g8[i] = g(&s8[i], pe);
    p(&mut du8[i], su8[i], pe);
    gu8[i] = g(&su8[i], pe);
    p(&mut d16[i], s16[i], pe);
    g16[i] = g(&s16[i], pe);
    p(&mut du16[i], su16[i], pe);
    gu16[i] = g(&su16[i], pe);
}

#[pgas_kernel]
fn pg_wide_kernel(
    d32: &mut SymTensor<i32>, s32: &SymTensor<i32>, g32: &mut SymTensor<i32>,
    du32: &mut SymTensor<u32>, su32: &SymTensor<u32>, gu32: &mut SymTensor<u32>,
    d64: &mut SymTensor<i64>, s64: &SymTensor<i64>, g64: &mut SymTensor<i64>,
    du64: &mut SymTensor<u64>, su64: &SymTensor<u64>, gu64: &mut SymTensor<u64>,
    dsz: &mut SymTensor<isize>, ssz: &SymTensor<isize>, gsz: &mut SymTensor<isize>,
    dus: &mut SymTensor<usize>, sus: &SymTensor<usize>, gus: &mut SymTensor<usize>, pe: i32,
) {
    let i = thread_idx_x() as usize;
    p(&mut d32[i], s32[i], pe);
    g32[i] = g(&s32[i], pe);
    p(&mut du32[i], su32[i], pe);
    gu32[i] = g(&su32[i], pe);
    p(&mut d64[i], s64[i], pe);
    g64[i] = g(&s64[i], pe);
    p(&mut du64[i], su64[i], pe);
    gu64[i] = g(&su64[i], pe);
    p(&mut dsz[i], ssz[i], pe);
    gsz[i] = g(&ssz[i], pe);
    p(&mut dus[i], sus[i], pe);
    gus[i] = g(&sus[i], pe);
}

#[pgas_kernel]
fn pg_float_kernel(
    d32: &mut SymTensor<f32>, s32: &SymTensor<f32>, g32: &mut SymTensor<f32>,
    d64: &mut SymTensor<f64>, s64: &SymTensor<f64>, g64: &mut SymTensor<f64>, pe: i32,
) {
    let i = thread_idx_x() as usize;
    p(&mut d32[i], s32[i] * 0.5, pe);
    g32[i] = g(&s32[i], pe);
    p(&mut d64[i], s64[i] * 0.25, pe);
    g64[i] = g(&s64[i], pe);
}

#[pgas_kernel]
fn pg_half_kernel(
    dh: &mut SymTensor<f16>, sh: &SymTensor<f16>, gh: &mut SymTensor<f16>,
    db: &mut SymTensor<bf16>, sb: &SymTensor<bf16>, gb: &mut SymTensor<bf16>, pe: i32,
) {
    let i = thread_idx_x() as usize;
    p(&mut dh[i], sh[i], pe);
    gh[i] = g(&sh[i], pe);
    p(&mut db[i], sb[i], pe);
    gb[i] = g(&sb[i], pe);
}

/// For one element type: a source filled with `val(me, i)` converted by `$conv`, a put target
/// and a get target poisoned with `$poison`. After the kernel, `check!` compares both.
macro_rules! triple {
    ($p:expr, $t:ty, $conv:expr, $poison:expr) => {{
        let me = util::me($p);
        let src: Vec<$t> = (0..E).map(|i| $conv(val(me, i))).collect();
        let s = $p.alloc_from(&src)?;
        let mut d = $p.alloc::<$t>(E)?;
        let mut g = $p.alloc::<$t>(E)?;
        d.fill($poison)?;
        g.fill($poison)?;
        (d, s, g)
    }};
}

/// Put targets hold the previous PE's values (through `$put_conv`), get targets the next's.
macro_rules! check {
    ($p:expr, $name:expr, $d:expr, $g:expr, $conv:expr, $put_conv:expr) => {{
        let (prev, next) = (util::prev($p), util::next($p));
        let wp: Vec<_> = (0..E).map(|i| $put_conv($conv(val(prev, i)))).collect();
        let wg: Vec<_> = (0..E).map(|i| $conv(val(next, i))).collect();
        check_eq(concat!($name, " via p"), &$d.to_vec()?, &wp)?;
        check_eq(concat!($name, " via g"), &$g.to_vec()?, &wg)?;
    }};
}

fn pe_next(p: &Pgas) -> i32 {
    util::next(p) as i32
}

fn pg_small(p: &Pgas) -> CaseResult {
    let (mut d8, s8, mut g8) = triple!(p, i8, |v: i64| (v % 100) as i8, i8::MIN);
    let (mut du8, su8, mut gu8) = triple!(p, u8, |v: i64| (v % 250) as u8, u8::MAX);
    let (mut d16, s16, mut g16) = triple!(p, i16, |v: i64| -(v as i16), i16::MIN);
    let (mut du16, su16, mut gu16) = triple!(p, u16, |v: i64| v as u16 * 3, u16::MAX);
    p.barrier_all()?;
    pg_small_kernel::launch(
        p,
        LaunchConfig::blocks(1, E as u32),
        &mut d8,
        &s8,
        &mut g8,
        &mut du8,
        &su8,
        &mut gu8,
        &mut d16,
        &s16,
        &mut g16,
        &mut du16,
        &su16,
        &mut gu16,
        pe_next(p),
    )?;
    util::settle(p)?;
    check!(p, "i8", d8, g8, |v: i64| (v % 100) as i8, |x| x);
    check!(p, "u8", du8, gu8, |v: i64| (v % 250) as u8, |x| x);
    check!(p, "i16", d16, g16, |v: i64| -(v as i16), |x| x);
    check!(p, "u16", du16, gu16, |v: i64| v as u16 * 3, |x| x);
    Ok(())
}

fn pg_wide(p: &Pgas) -> CaseResult {
    let (mut d32, s32, mut g32) = triple!(p, i32, |v: i64| -(v as i32) * 1000, i32::MIN);
    let (mut du32, su32, mut gu32) = triple!(p, u32, |v: i64| v as u32 + (1 << 31), 0);
    let (mut d64, s64, mut g64) = triple!(p, i64, |v: i64| v - (1 << 50), i64::MIN);
    let (mut du64, su64, mut gu64) = triple!(p, u64, |v: i64| v as u64 | (1 << 63), 0);
    let (mut dsz, ssz, mut gsz) = triple!(p, isize, |v: i64| -(v as isize) << 33, 0);
    let (mut dus, sus, mut gus) = triple!(p, usize, |v: i64| (v as usize) << 34, 0);
    p.barrier_all()?;
    pg_wide_kernel::launch(
        p,
        LaunchConfig::blocks(1, E as u32),
        &mut d32,
        &s32,
        &mut g32,
        &mut du32,
        &su32,
        &mut gu32,
        &mut d64,
        &s64,
        &mut g64,
        &mut du64,
        &su64,
        &mut gu64,
        &mut dsz,
        &ssz,
        &mut gsz,
        &mut dus,
        &sus,
        &mut gus,
        pe_next(p),
    )?;
    util::settle(p)?;
    check!(p, "i32", d32, g32, |v: i64| -(v as i32) * 1000, |x| x);
    check!(p, "u32", du32, gu32, |v: i64| v as u32 + (1 << 31), |x| x);
    check!(p, "i64", d64, g64, |v: i64| v - (1 << 50), |x| x);
    check!(p, "u64", du64, gu64, |v: i64| v as u64 | (1 << 63), |x| x);
    check!(p, "isize", dsz, gsz, |v: i64| -(v as isize) << 33, |x| x);
    check!(p, "usize", dus, gus, |v: i64| (v as usize) << 34, |x| x);
    Ok(())
}

fn pg_floats(p: &Pgas) -> CaseResult {
    let (mut d32, s32, mut g32) = triple!(p, f32, |v: i64| v as f32 + 0.125, f32::NAN);
    let (mut d64, s64, mut g64) = triple!(p, f64, |v: i64| -(v as f64) / 3.0, f64::NAN);
    p.barrier_all()?;
    pg_float_kernel::launch(
        p,
        LaunchConfig::blocks(1, E as u32),
        &mut d32,
        &s32,
        &mut g32,
        &mut d64,
        &s64,
        &mut g64,
        pe_next(p),
    )?;
    util::settle(p)?;
    check!(p, "f32", d32, g32, |v: i64| v as f32 + 0.125, |x: f32| x
        * 0.5);
    check!(p, "f64", d64, g64, |v: i64| -(v as f64) / 3.0, |x: f64| x
        * 0.25);
    Ok(())
}

fn pg_halves(p: &Pgas) -> CaseResult {
    let (mut dh, sh, mut gh) = triple!(p, f16, |v: i64| f16::from_f32(v as f32 / 4.0), f16::NAN);
    let (mut db, sb, mut gb) = triple!(p, bf16, |v: i64| bf16::from_f32(-(v as f32)), bf16::NAN);
    p.barrier_all()?;
    pg_half_kernel::launch(
        p,
        LaunchConfig::blocks(1, E as u32),
        &mut dh,
        &sh,
        &mut gh,
        &mut db,
        &sb,
        &mut gb,
        pe_next(p),
    )?;
    util::settle(p)?;
    check!(
        p,
        "f16",
        dh,
        gh,
        |v: i64| f16::from_f32(v as f32 / 4.0),
        |x| x
    );
    check!(
        p,
        "bf16",
        db,
        gb,
        |v: i64| bf16::from_f32(-(v as f32)),
        |x| x
    );
    Ok(())
}

/// Elements moved by each of the bulk RMA cases.
const L: usize = 8192;

/// Thread scope: each of 4 x 64 threads moves its own 32-element piece with each of the four
/// calls; `get_nbi` lands in a local `CudaSlice`.
#[pgas_kernel]
fn rma_thread(
    dput: &mut SymTensor<i32>, dget: &mut SymTensor<i32>, dput_nbi: &mut SymTensor<i32>,
    dget_nbi: &mut CudaSlice<i32>, src: &SymTensor<i32>, pe: i32,
) {
    let a = global_thread_idx() * 32;
    let b = a + 32;
    put(&mut dput[a..b], &src[a..b], pe);
    get(&mut dget[a..b], &src[a..b], pe);
    put_nbi(&mut dput_nbi[a..b], &src[a..b], pe);
    get_nbi(&mut dget_nbi[a..b], &src[a..b], pe);
    quiet();
}

/// Warp scope: 2 blocks x 4 warps, a 1024-element piece per warp.
#[pgas_kernel]
fn rma_warp(
    dput: &mut SymTensor<i32>, dget: &mut SymTensor<i32>, dput_nbi: &mut SymTensor<i32>,
    dget_nbi: &mut SymTensor<i32>, src: &SymTensor<i32>, pe: i32,
) {
    let w = (block_idx_x() * (block_dim_x() / 32)) as usize + warp_id() as usize;
    let a = w * 1024;
    let b = a + 1024;
    put_warp(&mut dput[a..b], &src[a..b], pe);
    get_warp(&mut dget[a..b], &src[a..b], pe);
    put_nbi_warp(&mut dput_nbi[a..b], &src[a..b], pe);
    get_nbi_warp(&mut dget_nbi[a..b], &src[a..b], pe);
    quiet();
}

/// Block scope: 4 blocks of 256 threads, a 2048-element piece per block.
#[pgas_kernel]
fn rma_block(
    dput: &mut SymTensor<i32>, dget: &mut SymTensor<i32>, dput_nbi: &mut SymTensor<i32>,
    dget_nbi: &mut SymTensor<i32>, src: &SymTensor<i32>, pe: i32,
) {
    let a = block_idx_x() as usize * 2048;
    let b = a + 2048;
    put_block(&mut dput[a..b], &src[a..b], pe);
    get_block(&mut dget[a..b], &src[a..b], pe);
    put_nbi_block(&mut dput_nbi[a..b], &src[a..b], pe);
    get_nbi_block(&mut dget_nbi[a..b], &src[a..b], pe);
    quiet();
}

fn bulk_src(pe: usize) -> Vec<i32> {
    (0..L)
        .map(|i| (pe as i32 + 1) * 1_000_000 + i as i32)
        .collect()
}

struct Bulk {
    src: SymTensor<i32>,
    d: [SymTensor<i32>; 4],
}

fn bulk(p: &Pgas) -> Result<Bulk, Box<dyn std::error::Error>> {
    let src = p.alloc_from(&bulk_src(util::me(p)))?;
    let mk = || -> Result<SymTensor<i32>, Box<dyn std::error::Error>> {
        let mut t = p.alloc::<i32>(L)?;
        t.fill(-1)?;
        Ok(t)
    };
    let d = [mk()?, mk()?, mk()?, mk()?];
    p.barrier_all()?;
    Ok(Bulk { src, d })
}

/// The four targets: put, get, put_nbi, get_nbi (the last may come from a local buffer).
fn check_bulk(p: &Pgas, scope: &str, got: [Vec<i32>; 4]) -> CaseResult {
    let from_prev = bulk_src(util::prev(p));
    let from_next = bulk_src(util::next(p));
    let names = ["put", "get", "put_nbi", "get_nbi"];
    for (k, g) in got.iter().enumerate() {
        let want = if k % 2 == 0 { &from_prev } else { &from_next };
        check_eq(&format!("{}{scope}", names[k]), g, want)?;
    }
    Ok(())
}

fn thread_scope(p: &Pgas) -> CaseResult {
    let Bulk {
        src,
        d: [mut a, mut b, mut c, _],
    } = bulk(p)?;
    let mut local = p.stream().clone_htod(&vec![-1i32; L])?;
    let cfg = LaunchConfig::blocks(4, 64);
    rma_thread::launch(p, cfg, &mut a, &mut b, &mut c, &mut local, &src, pe_next(p))?;
    util::settle(p)?;
    let l = p.stream().clone_dtoh(&local)?;
    check_bulk(p, " (thread)", [a.to_vec()?, b.to_vec()?, c.to_vec()?, l])
}

fn warp_scope(p: &Pgas) -> CaseResult {
    let Bulk {
        src,
        d: [mut a, mut b, mut c, mut d],
    } = bulk(p)?;
    let cfg = LaunchConfig::blocks(2, 128);
    rma_warp::launch(p, cfg, &mut a, &mut b, &mut c, &mut d, &src, pe_next(p))?;
    util::settle(p)?;
    check_bulk(
        p,
        "_warp",
        [a.to_vec()?, b.to_vec()?, c.to_vec()?, d.to_vec()?],
    )
}

fn block_scope(p: &Pgas) -> CaseResult {
    let Bulk {
        src,
        d: [mut a, mut b, mut c, mut d],
    } = bulk(p)?;
    let cfg = LaunchConfig::blocks(4, 256);
    rma_block::launch(p, cfg, &mut a, &mut b, &mut c, &mut d, &src, pe_next(p))?;
    util::settle(p)?;
    check_bulk(
        p,
        "_block",
        [a.to_vec()?, b.to_vec()?, c.to_vec()?, d.to_vec()?],
    )
}

/// The plain variant (`launch_unchecked`) of the block-scope kernel gives the same data.
fn unchecked(p: &Pgas) -> CaseResult {
    let Bulk {
        src,
        d: [mut a, mut b, mut c, mut d],
    } = bulk(p)?;
    let cfg = LaunchConfig::blocks(4, 256);
    // SAFETY: every index stays inside the 8192-element buffers (4 blocks x 2048) and the
    // target PE is the next one in the ring, which exists.
    unsafe {
        rma_block::launch_unchecked(p, cfg, &mut a, &mut b, &mut c, &mut d, &src, pe_next(p))?
    };
    util::settle(p)?;
    check_bulk(
        p,
        "_block unchecked",
        [a.to_vec()?, b.to_vec()?, c.to_vec()?, d.to_vec()?],
    )
}
