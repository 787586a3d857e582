use pgas::prelude::*;

#[pgas_device]
fn total(v: f32) -> f32 {
    v
}

#[pgas_device]
fn clear(acc: &mut [f32]) {
    acc[0] = 0.0;
}

#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>) {
    let acc = [1.0f32; 4];
    x[0] = total(acc);
    x[1] = total([1.0f32; 4]);
    clear(&mut acc);
}

fn main() {}
