use pgas::prelude::*;

#[pgas_device]
fn total(v: f32) -> f32 {
    v
}

#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>) {
    let acc = [1.0f32; 4];
    x[0] = total(acc);
    x[1] = total([1.0f32; 4]);
}

fn main() {}
