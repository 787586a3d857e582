//! Math functions as methods and as free functions, on f32, f64 and integers.
use pgas::prelude::*;

#[pgas_kernel]
fn math_f32(x: &mut SymTensor<f32>) {
    let i = global_thread_idx();
    if i >= x.len() {
        return;
    }
    let v = x[i];
    let a = v.sqrt() + sqrt(v) + v.rsqrt() + rsqrt(v);
    let b = v.exp() + exp(v) + v.ln() + ln(v) + v.log2() + log2(v);
    let c = v.sin() + sin(v) + v.cos() + cos(v) + v.tanh() + tanh(v);
    let d = v.abs() + abs(v) + v.min(1.0) + min(v, 2.0) + v.max(0.5) + max(v, -1.0);
    let e = v.floor() + floor(v) + v.ceil() + ceil(v) + v.recip() + recip(v);
    let f = v.powf(2.5) + powf(v, 0.5) + v.powi(3) + powi(v, -2) + v.mul_add(2.0, 1.0) + mul_add(v, v, v);
    let g = v.exp2() + exp2(v) + v.exp2_approx() + exp2_approx(v);
    x[i] = a + b + c + d + e + f + g;
}

#[pgas_kernel]
fn math_f64(x: &mut CudaSlice<f64>) {
    let i = global_thread_idx();
    if i >= x.len() {
        return;
    }
    let v = x[i];
    let a = v.sqrt() + rsqrt(v) + v.exp() + ln(v) + v.log2() + sin(v);
    let b = v.cos() + tanh(v) + v.abs() + min(v, 3.0) + v.max(1.0) + floor(v);
    let c = v.ceil() + recip(v) + v.powf(1.5) + powi(v, 2) + v.mul_add(0.5, 0.25) + exp2(v);
    x[i] = a + b + c;
}

#[pgas_kernel]
fn math_int(a: &mut CudaSlice<i32>, b: &mut CudaSlice<u64>, c: &mut CudaSlice<i8>) {
    a[0] = a[0].min(a[1]) + max(a[2], a[3]) + a[4].abs() + abs(-7);
    b[0] = b[0].max(b[1]) + min(b[2], 9);
    c[0] = c[0].abs().min(c[1]);
}
