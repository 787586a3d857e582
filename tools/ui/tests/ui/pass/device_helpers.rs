//! Device functions reach kernels through the macros, in any order in the module, nested.
use pgas::prelude::*;

#[pgas_kernel]
fn uses_helpers(x: &mut SymTensor<f32>, out: &mut CudaSlice<f32>) {
    let i = global_thread_idx();
    if i < x.len() {
        out[0] = norm(x) + twice(x[i]);
    }
}

#[pgas_device]
fn twice(v: f32) -> f32 {
    v * 2.0
}

#[pgas_device]
fn norm(x: &SymTensor<f32>) -> f32 {
    let mut s = 0.0;
    for i in 0..x.len() {
        s += twice(x[i]) * x[i];
    }
    s.sqrt()
}

pub fn check() {
    assert_eq!(uses_helpers::SPEC.rust_name, "uses_helpers");
    assert!(uses_helpers::SPEC.plain_source.contains("pgas_fn_norm"));
    assert!(uses_helpers::SPEC.checked_source.contains("pgas_fn_twice"));
    const { assert!(!uses_helpers::SPEC.collective) };
}
