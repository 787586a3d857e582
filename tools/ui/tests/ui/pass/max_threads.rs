//! `max_threads` reaches the spec and the generated source, also through device functions.
use pgas::prelude::*;

#[pgas_kernel(max_threads = 1024)]
fn all_reduce(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, n: usize) {
    for _ in 0..4 {
        reduce_block(team, &mut dst[0..n], &src[0..n], ReduceOp::Sum);
    }
}

#[pgas_kernel(max_threads = 128)]
fn scale(x: &mut SymTensor<f32>) {
    let i = global_thread_idx();
    if i < x.len() {
        x[i] = halve(x[i]);
    }
}

#[pgas_device]
fn halve(v: f32) -> f32 {
    v * 0.5
}

/// The bound follows a comptime parameter: each specialization has its own.
#[pgas_kernel(max_threads = 128 * (1 + wgs))]
fn per_specialization(x: &mut SymTensor<f32>, #[comptime] wgs: u32) {
    x[0] = wgs as f32;
}

#[pgas_kernel]
fn unbounded(x: &mut SymTensor<f32>) {
    x[0] = 1.0;
}

pub fn check() {
    assert_eq!(all_reduce::SPEC.max_threads, Some(1024));
    const { assert!(all_reduce::SPEC.collective) };
    assert!(all_reduce::SPEC
        .plain_source
        .contains("__global__ void __launch_bounds__(1024) PGAS_KERNEL_NAME("));
    assert_eq!(scale::SPEC.max_threads, Some(128));
    assert!(scale::SPEC
        .checked_source
        .contains("__launch_bounds__(128)"));
    assert!(scale::SPEC.checked_source.contains("pgas_fn_halve"));
    assert_eq!(per_specialization::SPEC.max_threads, None);
    assert!(per_specialization::SPEC
        .plain_source
        .contains("__launch_bounds__((128 * (1 + PGAS_CT_wgs)))"));
    assert_eq!(unbounded::SPEC.max_threads, None);
    assert!(!unbounded::SPEC.plain_source.contains("__launch_bounds__"));
}
