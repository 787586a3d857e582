//! A generic kernel (`<T: Elem>`, `T::Acc`, `T::LANES`, a generic device function) with its
//! reduction a `#[comptime] op: ReduceOp`, launched for several types and reductions through
//! its generic launcher, against the host.

use crate::runner::{case, Case};
use crate::util::{self, check_eq, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[case("generic/combine_by_type_and_op", combine_case)];

/// None compiled ahead of the cases: `runner::prewarm` lists kernels without comptime values,
/// and this kernel's reduction is one (a listed instance stopped the whole prewarm, so every
/// case compiled its kernels at first launch). The case's launches compile them.
pub const KERNELS: &[&KernelSpec] = &[];

/// `dst[i]` and `x[i]` combined by `op` in `T::Acc`.
#[pgas_device]
fn combined<T: Elem>(dst: &SymTensor<T>, x: &SymTensor<T>, i: usize, op: ReduceOp) -> T {
    combine(op, dst[i] as T::Acc, x[i] as T::Acc) as T
}

/// `dst = dst op x`: a 16-byte vector a thread, the tail element by element.
#[pgas_kernel(max_threads = 128)]
fn combine_into<T: Elem>(dst: &mut SymTensor<T>, x: &SymTensor<T>, #[comptime] op: ReduceOp) {
    let i = global_thread_idx() * T::LANES;
    if i + T::LANES <= dst.len() {
        let mut a = load_vec16(&dst[i]);
        let b = load_vec16(&x[i]);
        for j in 0..T::LANES {
            let c = combine(op, vec16_get(a, j) as T::Acc, vec16_get(b, j) as T::Acc);
            a = vec16_set(a, j, c as T);
        }
        store_vec16(&mut dst[i], a);
    } else {
        let mut k = i;
        while k < dst.len() && k < i + T::LANES {
            dst[k] = combined::<T>(dst, x, k, op);
            k += 1;
        }
    }
}

/// 100 elements (not a whole number of vectors for any type, so both paths run).
const N: usize = 100;

/// `a op b` on the GPU, by the instance for `T`.
fn run<T: combine_into::Instance>(
    p: &Pgas, a: &[T], b: &[T], op: ReduceOp,
) -> Result<Vec<T>, Box<dyn std::error::Error>> {
    let mut dst = p.alloc_from(a)?;
    let x = p.alloc_from(b)?;
    combine_into::launch(p, LaunchConfig::blocks(1, 128), &mut dst, &x, op)?;
    util::settle(p)?;
    Ok(dst.to_vec()?)
}

fn combine_case(p: &Pgas) -> CaseResult {
    let ia: Vec<i32> = (0..N as i32).map(|i| i * 37 - 1500).collect();
    let ib: Vec<i32> = (0..N as i32).map(|i| 900 - i * 13).collect();
    let got = run(p, &ia, &ib, ReduceOp::Xor)?;
    let want: Vec<i32> = ia.iter().zip(&ib).map(|(a, b)| a ^ b).collect();
    check_eq("i32 xor", &got, &want)?;

    let fa: Vec<f32> = (0..N).map(|i| i as f32 * 0.5 - 20.0).collect();
    let fb: Vec<f32> = (0..N).map(|i| 10.0 - i as f32 * 0.25).collect();
    let got = run(p, &fa, &fb, ReduceOp::Max)?;
    let want: Vec<f32> = fa.iter().zip(&fb).map(|(a, b)| a.max(*b)).collect();
    check_eq("f32 max", &got, &want)?;

    let ua: Vec<u8> = (0..N).map(|i| (i * 7 % 256) as u8).collect();
    let ub: Vec<u8> = (0..N).map(|i| (250 - i * 3 % 250) as u8).collect();
    let got = run(p, &ua, &ub, ReduceOp::Min)?;
    let want: Vec<u8> = ua.iter().zip(&ub).map(|(a, b)| *a.min(b)).collect();
    check_eq("u8 min", &got, &want)?;

    // bf16 is computed in f32 and rounded once.
    let ba: Vec<bf16> = (0..N).map(|i| bf16::from_f32(i as f32 * 0.75)).collect();
    let bb: Vec<bf16> = (0..N)
        .map(|i| bf16::from_f32(3.0 - i as f32 * 0.125))
        .collect();
    let got = run(p, &ba, &bb, ReduceOp::Sum)?;
    let want: Vec<bf16> = ba
        .iter()
        .zip(&bb)
        .map(|(a, b)| bf16::from_f32(a.to_f32() + b.to_f32()))
        .collect();
    check_eq("bf16 sum", &got, &want)
}
