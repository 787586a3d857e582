//! Math on f32 and f64, as Rust methods and as free functions, against f64 references on the
//! host. Tolerances: CUDA's single-precision functions are within a few ulp (about 1e-6
//! relative); double within 1e-14.

use crate::runner::{case, Case};
use crate::util::{self, check_close, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("math/f32", math_f32_case),
    case("math/f64", math_f64_case),
    case("math/exp2_and_exp2_approx_f32", exp2_case),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[&math_f32::SPEC, &math_f64::SPEC, &exp2_f32::SPEC];

/// `out[2 i]` = `exp2(xs[i])`, `out[2 i + 1]` = `exp2_approx(xs[i])`.
#[pgas_kernel]
fn exp2_f32(out: &mut SymTensor<f32>, xs: &SymTensor<f32>) {
    let i = thread_idx_x() as usize;
    out[2 * i] = exp2(xs[i]);
    out[2 * i + 1] = xs[i].exp2_approx();
}

/// Both within 2^-21 of 2^x relative to it over [-100, 40]; below 2^-126, `exp2` keeps the
/// subnormal result and `exp2_approx` flushes it to 0.
fn exp2_case(p: &Pgas) -> CaseResult {
    let mut xs32: Vec<f32> = (0..63).map(|i| -100.0 + i as f32 * 2.2 + 0.37).collect();
    xs32.push(-130.0);
    let n = xs32.len();
    let xs = p.alloc_from(&xs32)?;
    let mut out = p.alloc::<f32>(2 * n)?;
    out.fill(f32::NAN)?;
    exp2_f32::launch(p, LaunchConfig::blocks(1, n as u32), &mut out, &xs)?;
    util::settle(p)?;
    let got = out.to_vec()?;
    for (i, &x) in xs32[..n - 1].iter().enumerate() {
        let want = (x as f64).exp2();
        for (name, v) in [("exp2", got[2 * i]), ("exp2_approx", got[2 * i + 1])] {
            let rel = ((v as f64 - want) / want).abs();
            if rel.is_nan() || rel > 1.0 / (1u64 << 21) as f64 {
                return Err(
                    format!("{name}({x}) = {v}, expected {want} (relative error {rel:e})").into(),
                );
            }
        }
    }
    let (exact, flushed) = (got[2 * (n - 1)], got[2 * n - 1]);
    if !(exact > 0.0 && flushed == 0.0) {
        return Err(format!("2^-130: exp2 gave {exact:e} (a subnormal expected), exp2_approx {flushed:e} (0 expected)").into());
    }
    Ok(())
}

const K: usize = 35;
const N: usize = 64;

#[pgas_kernel]
fn math_f32(out: &mut SymTensor<f32>, xs: &SymTensor<f32>) {
    let i = thread_idx_x() as usize;
    let v = xs[i];
    let w = v - 2.0;
    let b = i * 35;
    out[b] = v.sqrt();
    out[b + 1] = v.exp();
    out[b + 2] = v.ln();
    out[b + 3] = v.log2();
    out[b + 4] = v.sin();
    out[b + 5] = v.cos();
    out[b + 6] = w.tanh();
    out[b + 7] = w.abs();
    out[b + 8] = v.min(1.5);
    out[b + 9] = v.max(1.5);
    out[b + 10] = v.mul_add(2.0, -1.0);
    out[b + 11] = w.floor();
    out[b + 12] = w.ceil();
    out[b + 13] = v.powf(1.5);
    out[b + 14] = w.powi(3);
    out[b + 15] = v.recip();
    out[b + 16] = sqrt(v);
    out[b + 17] = exp(v);
    out[b + 18] = ln(v);
    out[b + 19] = log2(v);
    out[b + 20] = sin(v);
    out[b + 21] = cos(v);
    out[b + 22] = tanh(w);
    out[b + 23] = abs(w);
    out[b + 24] = min(v, 1.5);
    out[b + 25] = max(v, 1.5);
    out[b + 26] = mul_add(v, 2.0, -1.0);
    out[b + 27] = floor(w);
    out[b + 28] = ceil(w);
    out[b + 29] = powf(v, 1.5);
    out[b + 30] = powi(w, 3);
    out[b + 31] = recip(v);
    out[b + 32] = rsqrt(v);
    out[b + 33] = min(i as i32 - 30, 3) as f32;
    out[b + 34] = (i as u32).max(40) as f32;
}

#[pgas_kernel]
fn math_f64(out: &mut SymTensor<f64>, xs: &SymTensor<f64>) {
    let i = thread_idx_x() as usize;
    let v = xs[i];
    let w = v - 2.0;
    let b = i * 35;
    out[b] = v.sqrt();
    out[b + 1] = v.exp();
    out[b + 2] = v.ln();
    out[b + 3] = v.log2();
    out[b + 4] = v.sin();
    out[b + 5] = v.cos();
    out[b + 6] = w.tanh();
    out[b + 7] = w.abs();
    out[b + 8] = v.min(1.5);
    out[b + 9] = v.max(1.5);
    out[b + 10] = v.mul_add(2.0, -1.0);
    out[b + 11] = w.floor();
    out[b + 12] = w.ceil();
    out[b + 13] = v.powf(1.5);
    out[b + 14] = w.powi(3);
    out[b + 15] = v.recip();
    out[b + 16] = sqrt(v);
    out[b + 17] = exp(v);
    out[b + 18] = ln(v);
    out[b + 19] = log2(v);
    out[b + 20] = sin(v);
    out[b + 21] = cos(v);
    out[b + 22] = tanh(w);
    out[b + 23] = abs(w);
    out[b + 24] = min(v, 1.5);
    out[b + 25] = max(v, 1.5);
    out[b + 26] = mul_add(v, 2.0, -1.0);
    out[b + 27] = floor(w);
    out[b + 28] = ceil(w);
    out[b + 29] = powf(v, 1.5);
    out[b + 30] = powi(w, 3);
    out[b + 31] = recip(v);
    out[b + 32] = rsqrt(v);
    out[b + 33] = min(i as i64 - 30, 3) as f64;
    out[b + 34] = (i as u64).max(40) as f64;
}

/// Inputs in (0.05, 4.05): positive for ln/sqrt, both signs for `v - 2` (abs, floor, tanh).
fn inputs() -> Vec<f64> {
    (0..N)
        .map(|i| 0.05 + (i as f64 * 0.618_034).fract() * 4.0)
        .collect()
}

fn reference(v: f64, i: usize) -> [f64; K] {
    let w = v - 2.0;
    let one = [
        v.sqrt(),
        v.exp(),
        v.ln(),
        v.log2(),
        v.sin(),
        v.cos(),
        w.tanh(),
        w.abs(),
        v.min(1.5),
        v.max(1.5),
        v.mul_add(2.0, -1.0),
        w.floor(),
        w.ceil(),
        v.powf(1.5),
        w.powi(3),
        v.recip(),
    ];
    let mut out = [0.0; K];
    out[..16].copy_from_slice(&one);
    out[16..32].copy_from_slice(&one);
    out[32] = 1.0 / v.sqrt();
    out[33] = (i as f64 - 30.0).min(3.0);
    out[34] = (i as f64).max(40.0);
    out
}

fn math_f32_case(p: &Pgas) -> CaseResult {
    let xs32: Vec<f32> = inputs().iter().map(|&v| v as f32).collect();
    let xs = p.alloc_from(&xs32)?;
    let mut out = p.alloc::<f32>(N * K)?;
    out.fill(f32::NAN)?;
    math_f32::launch(p, LaunchConfig::blocks(1, N as u32), &mut out, &xs)?;
    util::settle(p)?;
    let got: Vec<f64> = out.to_vec()?.iter().map(|&v| v as f64).collect();
    // The reference takes the f32-rounded input, so only the function's own error remains.
    let want: Vec<f64> = (0..N).flat_map(|i| reference(xs32[i] as f64, i)).collect();
    check_close("f32 math", &got, &want, 4e-6)
}

fn math_f64_case(p: &Pgas) -> CaseResult {
    let xs64 = inputs();
    let xs = p.alloc_from(&xs64)?;
    let mut out = p.alloc::<f64>(N * K)?;
    out.fill(f64::NAN)?;
    math_f64::launch(p, LaunchConfig::blocks(1, N as u32), &mut out, &xs)?;
    util::settle(p)?;
    let want: Vec<f64> = (0..N).flat_map(|i| reference(xs64[i], i)).collect();
    check_close("f64 math", &out.to_vec()?, &want, 1e-14)
}
