//! #[pgas_device] helpers: values, buffers, nesting, and a helper that makes its caller
//! collective.
use pgas::prelude::*;

#[pgas_device]
fn square(x: f32) -> f32 {
    x * x
}

#[pgas_device]
fn norm2(v: &SymTensor<f32>, lo: usize, hi: usize) -> f32 {
    let mut s = 0.0;
    for i in lo..hi {
        s += square(v[i]);
    }
    s
}

#[pgas_device]
fn clamp_index(i: usize, len: usize) -> usize {
    if i < len {
        i
    } else {
        len - 1
    }
}

#[pgas_device]
fn sign(x: i32) -> i32 {
    if x > 0 {
        return 1;
    }
    if x < 0 {
        -1
    } else {
        0
    }
}

#[pgas_device]
fn publish(dst: &mut SymTensor<f32>, value: f32, pe: i32) {
    p(&mut dst[0], value, pe);
    barrier_all();
}

#[pgas_kernel]
fn normalize(v: &mut SymTensor<f32>, out: &mut SymTensor<f32>, scratch: &mut CudaSlice<i32>) {
    let i = clamp_index(global_thread_idx(), v.len());
    let n = norm2(v, 0, v.len()).sqrt();
    v[i] = v[i] / n;
    scratch[0] = sign(n as i32 - 1);
    if i == 0 {
        publish(out, n, 0);
    }
}
