//! Calls of `#[pgas_device]` functions: which buffers a buffer parameter takes.

mod common;

use common::{compile, errors};

/// A `CudaSlice` parameter takes every buffer a thread loads and stores: a `CudaSlice`, this
/// PE's copy of a `SymTensor`, shared memory, a peer view, whole or sliced.
#[test]
fn a_cuda_slice_parameter_takes_any_buffer() {
    let src = r#"
use pgas::prelude::*;
#[pgas_device]
fn copy_one(dst: &mut CudaSlice<f32>, src: &CudaSlice<f32>, i: usize) {
    dst[i] = src[i];
}
#[pgas_kernel]
fn k(x: &mut SymTensor<f32>, y: &SymTensor<f32>, z: &mut CudaSlice<f32>) {
    let i = thread_idx_x() as usize;
    let s = dyn_shared::<f32>();
    copy_one(s, y, i);
    copy_one(x, s, i);
    let p = x.peer(1);
    copy_one(p, z, i);
    copy_one(z, &y[1..], i);
}
"#;
    let plain = &compile(src)[0].plain;
    assert!(plain.contains("copy_one(s, s_len, y, y_len, i)"), "{plain}");
    assert!(plain.contains("copy_one(x, x_len, s, s_len, i)"), "{plain}");
}

/// A `SymTensor` parameter may be a remote target: it takes a `SymTensor` only.
#[test]
fn a_sym_tensor_parameter_takes_only_a_sym_tensor() {
    let src = r#"
use pgas::prelude::*;
#[pgas_device]
fn put_one(dst: &mut SymTensor<f32>, v: f32, pe: i32) {
    p(&mut dst[0], v, pe);
}
#[pgas_kernel]
fn k(x: &mut SymTensor<f32>, z: &mut CudaSlice<f32>) {
    put_one(z, 1.0, 1);
    let q = x.peer(1);
    put_one(q, 1.0, 1);
}
"#;
    let e = errors(src);
    assert_eq!(
        e.matches("mismatched types: `put_one` expects `&mut SymTensor<f32>`")
            .count(),
        2,
        "{e}"
    );
}

/// A device function takes and returns a 16-byte vector by value (`uint4` in C); the vector's
/// element type is part of its type, and a kernel cannot take one (its parameters come from the
/// host).
#[test]
fn a_device_function_takes_and_returns_vectors() {
    let src = r#"
use pgas::prelude::*;
#[pgas_device]
fn doubled(v: Vec16<f32>) -> Vec16<f32> {
    let mut o = v;
    for j in 0..4 {
        o = vec16_set(o, j as u32, vec16_get(v, j as u32) * 2.0);
    }
    o
}
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>) {
    let v = load_vec16(&x[0]);
    store_vec16(&mut x[4], doubled(v));
}
"#;
    let plain = &compile(src)[0].plain;
    assert!(
        plain.contains("static __device__ uint4 pgas_fn_doubled(uint4 v)"),
        "{plain}"
    );
    let wrong = src
        .replace("load_vec16(&x[0])", "load_vec16(&y[0])")
        .replace(
            "fn k(x: &mut CudaSlice<f32>)",
            "fn k(x: &mut CudaSlice<f32>, y: &CudaSlice<u32>)",
        );
    let e = errors(&wrong);
    assert!(
        e.contains("expected `Vec16<f32>`, found `Vec16<u32>`"),
        "{e}"
    );
    let kernel = "#[pgas_kernel]\nfn k(v: Vec16<f32>) {}\n";
    assert!(
        errors(kernel).contains("a kernel's parameters come from the host"),
        "{}",
        errors(kernel)
    );
}
