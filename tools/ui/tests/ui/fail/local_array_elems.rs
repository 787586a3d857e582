use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>, y: &CudaSlice<f32>, i: i32) {
    let a = [1.0f32, 2.0, i];
    let b = [y; 2];
    let c = [];
    let v = [x[0]; 4];
    let w: f32 = [0.0; 4];
    x[0] = a[0] + b[0] + c[0] + v[0] + w;
}

fn main() {}
