use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>, f: f32) {
    let a = [1.0f32, 2.0, 3.0];
    let mut b = [0.0f32; 8];
    x[0] = a[f];
    x[1] = a[3];
    b[8] = 1.0;
    x[2] = b[2 * 4 - 9];
    a[0] = 2.0;
    a[1] += 2.0;
    b = a;
    let c = b;
    atomic_add_local(&mut b[0], 1.0);
    let s = &b[1..3];
    x[3] = c[0] + b.len() as f32;
}

fn main() {}
