use pgas::prelude::*;

#[pgas_device]
fn bad(x: f32) -> f32 {
    x + 1
}

#[pgas_kernel]
fn k(out: &mut CudaSlice<f32>) {
    out[0] = bad(1.0);
}

fn main() {}
