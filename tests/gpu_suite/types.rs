//! Every scalar type of the spec as a by-value parameter, in arithmetic, in casts and stored in a
//! `SymTensor` of its type (`bool` as `u8`: NVSHMEM has no bool buffers); literals with and
//! without suffixes; FP8 conversions on the GPU against `pgas::e4m3`/`e5m2`'s on the host.

use crate::runner::{case, Case};
use crate::util::{self, check_eq, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("types/integers", integers),
    case("types/floats_and_literals", floats),
    case("types/f16_bf16", halves),
    case("types/bool", bools),
    case("types/fp8_casts_match_host", fp8_casts),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[
    &ints::SPEC,
    &float_kernel::SPEC,
    &half_kernel::SPEC,
    &bool_kernel::SPEC,
    &fp8_kernel::SPEC,
];

const N: usize = 16;

#[pgas_kernel]
fn ints(
    o8: &mut SymTensor<i8>, o16: &mut SymTensor<i16>, o32: &mut SymTensor<i32>,
    o64: &mut SymTensor<i64>, osz: &mut SymTensor<isize>, u8o: &mut SymTensor<u8>,
    u16o: &mut SymTensor<u16>, u32o: &mut SymTensor<u32>, u64o: &mut SymTensor<u64>,
    usz: &mut SymTensor<usize>, a: i8, b: i16, c: i32, d: i64, e: isize, f: u8, g: u16, h: u32,
    k: u64, m: usize,
) {
    let i = thread_idx_x() as usize;
    o8[i] = a + i as i8 * 3i8;
    o16[i] = b - i as i16 * 1000;
    o32[i] = c * (i as i32 + 1) + 0x10;
    o64[i] = d + (i as i64) * 1_000_000_007i64;
    osz[i] = e - i as isize;
    u8o[i] = f / 2 + i as u8 * 7u8;
    u16o[i] = g % 1000 + i as u16;
    u32o[i] = min(h ^ i as u32, 0xFFFF_0000u32).max(5);
    u64o[i] = k >> (i as u64) | 1;
    usz[i] = m + i * 8;
}

fn integers(p: &Pgas) -> CaseResult {
    let (a, b, c, d, e) = (-100i8, 20000i16, -77i32, -(1i64 << 40), -5isize);
    let (f, g, h, k, m) = (250u8, 65000u16, 0xDEAD_BEEFu32, 1u64 << 63, 1usize << 35);
    macro_rules! alloc {
        ($t:ty) => {{
            let mut t = p.alloc::<$t>(N)?;
            t.fill(<$t>::MAX)?;
            t
        }};
    }
    let (mut o8, mut o16, mut o32, mut o64) = (alloc!(i8), alloc!(i16), alloc!(i32), alloc!(i64));
    let (mut osz, mut u8o, mut u16o) = (alloc!(isize), alloc!(u8), alloc!(u16));
    let (mut u32o, mut u64o, mut usz) = (alloc!(u32), alloc!(u64), alloc!(usize));
    ints::launch(
        p,
        LaunchConfig::blocks(1, N as u32),
        &mut o8,
        &mut o16,
        &mut o32,
        &mut o64,
        &mut osz,
        &mut u8o,
        &mut u16o,
        &mut u32o,
        &mut u64o,
        &mut usz,
        a,
        b,
        c,
        d,
        e,
        f,
        g,
        h,
        k,
        m,
    )?;
    util::settle(p)?;
    let r = 0..N;
    check_eq(
        "i8",
        &o8.to_vec()?,
        &r.clone().map(|i| a + i as i8 * 3).collect::<Vec<_>>(),
    )?;
    check_eq(
        "i16",
        &o16.to_vec()?,
        &r.clone().map(|i| b - i as i16 * 1000).collect::<Vec<_>>(),
    )?;
    check_eq(
        "i32",
        &o32.to_vec()?,
        &r.clone()
            .map(|i| c * (i as i32 + 1) + 16)
            .collect::<Vec<_>>(),
    )?;
    let w64: Vec<i64> = r.clone().map(|i| d + i as i64 * 1_000_000_007).collect();
    check_eq("i64", &o64.to_vec()?, &w64)?;
    check_eq(
        "isize",
        &osz.to_vec()?,
        &r.clone().map(|i| e - i as isize).collect::<Vec<_>>(),
    )?;
    check_eq(
        "u8",
        &u8o.to_vec()?,
        &r.clone().map(|i| f / 2 + i as u8 * 7).collect::<Vec<_>>(),
    )?;
    check_eq(
        "u16",
        &u16o.to_vec()?,
        &r.clone().map(|i| g % 1000 + i as u16).collect::<Vec<_>>(),
    )?;
    let w32: Vec<u32> = r
        .clone()
        .map(|i| (h ^ i as u32).clamp(5, 0xFFFF_0000))
        .collect();
    check_eq("u32 with min/max", &u32o.to_vec()?, &w32)?;
    check_eq(
        "u64",
        &u64o.to_vec()?,
        &r.clone().map(|i| k >> i | 1).collect::<Vec<_>>(),
    )?;
    check_eq(
        "usize",
        &usz.to_vec()?,
        &r.map(|i| m + i * 8).collect::<Vec<_>>(),
    )
}

#[pgas_kernel]
fn float_kernel(o32: &mut SymTensor<f32>, o64: &mut SymTensor<f64>, x: f32, y: f64) {
    let i = thread_idx_x() as usize;
    let fi = i as f32;
    // `2.0` next to an f32 must stay single precision: computed in double and rounded once, the
    // sums below differ in the last bits. Sums only, so no multiply-add contraction blurs that.
    o32[i] = x + fi + 2.0 - 0.1 + 3f32 + 1e-3;
    o64[i] = y + i as f64 + 0.1 - 2.5e2 + (fi as f64) / 3.0f64;
}

fn floats(p: &Pgas) -> CaseResult {
    let (x, y) = (1.25f32, -3.5f64);
    let mut o32 = p.alloc::<f32>(N)?;
    let mut o64 = p.alloc::<f64>(N)?;
    o32.fill(f32::NAN)?;
    o64.fill(f64::NAN)?;
    float_kernel::launch(
        p,
        LaunchConfig::blocks(1, N as u32),
        &mut o32,
        &mut o64,
        x,
        y,
    )?;
    util::settle(p)?;
    // Bit-exact: single-precision literals computed in single precision, in Rust's order.
    let w32: Vec<f32> = (0..N)
        .map(|i| x + i as f32 + 2.0 - 0.1 + 3f32 + 1e-3)
        .collect();
    let w64: Vec<f64> = (0..N)
        .map(|i| y + i as f64 + 0.1 - 2.5e2 + (i as f32 as f64) / 3.0)
        .collect();
    check_eq("f32 arithmetic and literals", &o32.to_vec()?, &w32)?;
    check_eq("f64 arithmetic and literals", &o64.to_vec()?, &w64)
}

#[pgas_kernel]
fn half_kernel(
    h: &mut SymTensor<f16>, b: &mut SymTensor<bf16>, hf: &mut SymTensor<f32>, x: f16, y: bf16,
) {
    let i = thread_idx_x() as usize;
    let fi = i as f32;
    h[i] = x * (fi as f16) + x;
    b[i] = y * (fi as bf16) - y;
    hf[i] = x as f32 + y as f32 * fi;
}

fn halves(p: &Pgas) -> CaseResult {
    let (x, y) = (f16::from_f32(1.5), bf16::from_f32(-0.75));
    let mut h = p.alloc::<f16>(N)?;
    let mut b = p.alloc::<bf16>(N)?;
    let mut hf = p.alloc::<f32>(N)?;
    h.fill(f16::NAN)?;
    b.fill(bf16::NAN)?;
    hf.fill(f32::NAN)?;
    half_kernel::launch(
        p,
        LaunchConfig::blocks(1, N as u32),
        &mut h,
        &mut b,
        &mut hf,
        x,
        y,
    )?;
    util::settle(p)?;
    // Small exact values: one rounding per operation gives the same bits on both sides.
    let wh: Vec<f16> = (0..N).map(|i| x * f16::from_f32(i as f32) + x).collect();
    let wb: Vec<bf16> = (0..N).map(|i| y * bf16::from_f32(i as f32) - y).collect();
    let wf: Vec<f32> = (0..N).map(|i| x.to_f32() + y.to_f32() * i as f32).collect();
    check_eq("f16", &h.to_vec()?, &wh)?;
    check_eq("bf16", &b.to_vec()?, &wb)?;
    check_eq("f16/bf16 as f32", &hf.to_vec()?, &wf)
}

#[pgas_kernel]
fn bool_kernel(out: &mut SymTensor<u8>, flags: &mut SymTensor<u8>, on: bool) {
    let i = thread_idx_x() as usize;
    let odd = i % 2 == 1;
    out[i] = if on && !odd {
        1
    } else if on || odd {
        2
    } else {
        3
    };
    flags[i] = (odd != on) as u8;
}

fn bools(p: &Pgas) -> CaseResult {
    let mut out = p.alloc::<u8>(N)?;
    let mut flags = p.alloc::<u8>(N)?;
    for on in [true, false] {
        out.fill(0)?;
        flags.fill(9)?;
        bool_kernel::launch(
            p,
            LaunchConfig::blocks(1, N as u32),
            &mut out,
            &mut flags,
            on,
        )?;
        util::settle(p)?;
        let want: Vec<u8> = (0..N)
            .map(|i| {
                let odd = i % 2 == 1;
                if on && !odd {
                    1
                } else if on || odd {
                    2
                } else {
                    3
                }
            })
            .collect();
        check_eq(&format!("bool param on={on}"), &out.to_vec()?, &want)?;
        let wf: Vec<u8> = (0..N).map(|i| ((i % 2 == 1) != on) as u8).collect();
        check_eq("bool comparison as u8", &flags.to_vec()?, &wf)?;
    }
    Ok(())
}

/// Threads of the FP8 case: one value each.
const FP8_N: usize = 256;

#[pgas_kernel]
fn fp8_kernel(
    q4: &mut SymTensor<e4m3>, q5: &mut SymTensor<e5m2>, back: &mut SymTensor<f32>,
    wide: &mut SymTensor<f32>, x: &SymTensor<f32>, fill: e4m3,
) {
    let i = thread_idx_x() as usize;
    q4[i] = x[i] as e4m3;
    q5[i] = x[i] as e5m2;
    back[i] = q4[i] as f32 + q5[i] as f32;
    // Through f64, f16, bf16 and an integer, and the parameter by value.
    let d = (x[i] as f64) as e4m3;
    let h = ((x[i] as f16) as e5m2) as bf16;
    wide[i] = d as f32 + h as f32 + ((i as i32) as e4m3) as f32 + fill as f32;
}

/// The inputs: exact values, ties of both formats, subnormals, overflows, infinities and NaN.
fn fp8_inputs() -> Vec<f32> {
    let mut x = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        1.0625,
        1.0626,
        1.1875,
        1.9375,
        1.125,
        1.375,
        -1.3,
        448.0,
        449.0,
        464.0,
        465.0,
        -500.0,
        57344.0,
        61440.0,
        1e9,
        -1e9,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        2f32.powi(-9),
        2f32.powi(-10),
        1.01 * 2f32.powi(-10),
        7.5 * 2f32.powi(-9),
        2f32.powi(-16),
        2f32.powi(-17),
        3.0 * 2f32.powi(-18),
    ];
    // Then a spread of magnitudes and signs.
    let mut v = 0.001f32;
    while x.len() < FP8_N {
        let sign = if x.len() % 3 == 0 { -1.0 } else { 1.0 };
        x.push(sign * v);
        v *= 1.071;
    }
    x
}

fn fp8_casts(p: &Pgas) -> CaseResult {
    let x = fp8_inputs();
    let fill = e4m3::from_f32(0.375);
    let xs = p.alloc_from(&x)?;
    let mut q4 = p.alloc::<e4m3>(FP8_N)?;
    let mut q5 = p.alloc::<e5m2>(FP8_N)?;
    let mut back = p.alloc::<f32>(FP8_N)?;
    let mut wide = p.alloc::<f32>(FP8_N)?;
    fp8_kernel::launch(
        p,
        LaunchConfig::blocks(1, FP8_N as u32),
        &mut q4,
        &mut q5,
        &mut back,
        &mut wide,
        &xs,
        fill,
    )?;
    util::settle(p)?;
    // Bits, NaN payloads aside (the host's NaN is 0x7f / 0x7e, the device's may differ).
    let bits4 = |v: &[e4m3]| -> Vec<i32> {
        v.iter()
            .map(|q| {
                if q.is_nan() {
                    -1
                } else {
                    i32::from(q.to_bits())
                }
            })
            .collect()
    };
    let bits5 = |v: &[e5m2]| -> Vec<i32> {
        v.iter()
            .map(|q| {
                if q.is_nan() {
                    -1
                } else {
                    i32::from(q.to_bits())
                }
            })
            .collect()
    };
    let f32_bits = |v: &[f32]| -> Vec<i64> {
        v.iter()
            .map(|f| {
                if f.is_nan() {
                    -1
                } else {
                    i64::from(f.to_bits())
                }
            })
            .collect()
    };
    let w4: Vec<e4m3> = x.iter().map(|&v| e4m3::from_f32(v)).collect();
    let w5: Vec<e5m2> = x.iter().map(|&v| e5m2::from_f32(v)).collect();
    check_eq("x as e4m3", &bits4(&q4.to_vec()?), &bits4(&w4))?;
    check_eq("x as e5m2", &bits5(&q5.to_vec()?), &bits5(&w5))?;
    let wb: Vec<f32> = (0..FP8_N)
        .map(|i| w4[i].to_f32() + w5[i].to_f32())
        .collect();
    check_eq("fp8 as f32", &f32_bits(&back.to_vec()?), &f32_bits(&wb))?;
    let ww: Vec<f32> = (0..FP8_N)
        .map(|i| {
            let d = e4m3::from_f64(f64::from(x[i]));
            let h = bf16::from_f32(e5m2::from_f32(f16::from_f32(x[i]).to_f32()).to_f32());
            d.to_f32() + h.to_f32() + e4m3::from_f32(i as f32).to_f32() + fill.to_f32()
        })
        .collect();
    check_eq(
        "fp8 through f64, f16, bf16, i32",
        &f32_bits(&wide.to_vec()?),
        &f32_bits(&ww),
    )
}
