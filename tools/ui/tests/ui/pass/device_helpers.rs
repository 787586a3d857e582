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

/// A device function borrows its caller's registers: a local array and a fragment array.
#[pgas_device]
fn rescale(acc: &mut [f32], o: &mut [FragC<f32>], by: f32) {
    for j in 0..4 {
        acc[j] *= by;
        o[j][0] *= by;
    }
}

#[pgas_kernel]
fn borrows_registers(out: &mut CudaSlice<f32>) {
    let mut acc = [1.0f32; 4];
    let mut o = frag_c::<f32, 4>();
    rescale(&mut acc, &mut o, 0.5);
    out[0] = acc[3] + o[3][0];
}

pub fn check() {
    assert!(borrows_registers::SPEC
        .plain_source
        .contains("pgas_fn_rescale(acc, 4, o, o_len, 0.5f)"));
    assert_eq!(uses_helpers::SPEC.rust_name, "uses_helpers");
    assert!(uses_helpers::SPEC.plain_source.contains("pgas_fn_norm"));
    assert!(uses_helpers::SPEC.checked_source.contains("pgas_fn_twice"));
    const { assert!(!uses_helpers::SPEC.collective) };
}
