//! Every scalar type as a parameter and as a buffer element, half precision included.
use pgas::prelude::*;

#[pgas_kernel]
fn integers(
    a: &mut CudaSlice<i8>,
    b: &mut CudaSlice<i16>,
    c: &mut CudaSlice<i32>,
    d: &mut CudaSlice<i64>,
    e: &mut CudaSlice<isize>,
    f: &mut CudaSlice<u8>,
    g: &mut CudaSlice<u16>,
    h: &mut CudaSlice<u32>,
    i: &mut CudaSlice<u64>,
    j: &mut CudaSlice<usize>,
    x8: i8,
    x16: i16,
    x32: i32,
    x64: i64,
    xs: isize,
    y8: u8,
    y16: u16,
    y32: u32,
    y64: u64,
    ys: usize,
    flag: bool,
) {
    if !flag {
        return;
    }
    a[0] = x8 + 1;
    b[0] = x16 * -2;
    c[0] = x32 - 3;
    d[0] = x64 / 4;
    e[0] = xs % 5;
    f[0] = y8 & 0x0f;
    g[0] = y16 | 1;
    h[0] = y32 ^ 0xffff_ffff;
    i[0] = y64 << 3u32;
    j[0] = ys >> 1;
    let narrow = (x8 as i32 + y8 as i32) as u8;
    f[1] = !narrow;
    a[1] = -x8;
    i[1] = 18_446_744_073_709_551_615u64;
    d[1] = -9_223_372_036_854_775_807i64;
    c[1] = flag as i32;
}

#[pgas_kernel]
fn floats(
    h: &mut SymTensor<f16>,
    b: &mut SymTensor<bf16>,
    s: &mut SymTensor<f32>,
    d: &mut CudaSlice<f64>,
    hs: f16,
    bs: bf16,
    fs: f32,
    ds: f64,
) {
    let i = global_thread_idx();
    if i >= h.len() || i >= b.len() || i >= s.len() || i >= d.len() {
        return;
    }
    h[i] = h[i] * hs + 1.5;
    b[i] = b[i] - bs * 0.25;
    s[i] = h[i] as f32 + b[i] as f32 + fs % 2.0;
    d[i] = ds * 1e-3 + s[i] as f64 + 2.5f64;
    let back: f16 = (d[i] * 0.5) as f16;
    let cross = back as bf16;
    if h[i] > back && cross < bs {
        h[i] = -back;
    }
    let mut acc = 0.0f32;
    acc += 1.0;
    acc %= 3.0;
    s[i] = acc + (i as f32);
}
