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
    assert_eq!(unbounded::SPEC.max_threads, None);
    assert!(!unbounded::SPEC.plain_source.contains("__launch_bounds__"));
}
