use pgas::prelude::*;

#[pgas_device]
fn sum4(v: [f32; 4]) -> f32 {
    v[0]
}

#[pgas_device]
fn make() -> [f32; 4] {
    [0.0f32; 4]
}

#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>, w: &[f32; 4]) {
    let a: [f32; 4] = [0.0; 4];
    x[0] = a[0];
}

fn main() {}
