//! A generic kernel becomes one module: an `Instance` trait implemented by each type of its
//! bound with that instance's spec, and launchers generic over it.
use pgas::prelude::*;

#[pgas_device]
fn widened<T: Elem>(x: &SymTensor<T>, i: usize) -> T::Acc {
    x[i] as T::Acc
}

#[pgas_kernel(max_threads = 256)]
fn fold_into<T: Elem>(
    dst: &mut SymTensor<T>, x: &SymTensor<T>, scale: T, #[comptime] op: ReduceOp,
) {
    let i = global_thread_idx();
    if i < dst.len() && i < x.len() {
        let a = combine(op, widened::<T>(dst, i), widened::<T>(x, i));
        dst[i] = combine(op, a as T, scale);
    }
}

#[allow(dead_code)]
fn host(
    pgas: &Pgas, cfg: LaunchConfig, a: &mut SymTensor<f32>, b: &SymTensor<f32>,
    c: &mut SymTensor<bf16>, d: &SymTensor<bf16>,
) -> pgas::Result<()> {
    // The instance follows from the buffers, or is named.
    fold_into::launch(pgas, cfg, a, b, 2.0, ReduceOp::Max)?;
    fold_into::launch::<bf16>(pgas, cfg, c, d, bf16::ONE, ReduceOp::Sum)
}

pub fn check() {
    let f32_spec = fold_into::spec::<f32>();
    assert_eq!(f32_spec.rust_name, "fold_into::<f32>");
    assert_eq!(f32_spec.max_threads, Some(256));
    let names: Vec<&str> = f32_spec.comptime_names().collect();
    assert_eq!(names, ["op"]);
    // Each instance its own source and symbol; bf16 computed in f32.
    let bf16_spec = <bf16 as fold_into::Instance>::SPEC;
    assert_ne!(f32_spec.cuda_name, bf16_spec.cuda_name);
    assert!(bf16_spec.plain_source.contains("__nv_bfloat16 *dst"));
    assert!(bf16_spec.plain_source.contains("pgas_fn_widened__bf16"));
    assert!(bf16_spec
        .plain_source
        .contains("float pgas_fn_widened__bf16"));
    assert!(f32_spec
        .plain_source
        .contains("const int op = (int)(PGAS_CT_op);"));
    // The host passes a reduction's discriminant; the compiler's codes must be the same.
    for op in [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::And,
        ReduceOp::Or,
        ReduceOp::Xor,
    ] {
        let src = format!(
            "#[pgas_kernel] fn k(x: &mut CudaSlice<u32>) {{ x[0] = combine(ReduceOp::{op:?}, x[0], x[1]); }}"
        );
        let k = pgas_codegen::compile_file(&src, "k.rs").expect("compiles");
        let code = op as i128;
        assert!(
            k[0].plain.contains(&format!("pgas_combine({code}, ")),
            "{op:?}"
        );
    }
}
