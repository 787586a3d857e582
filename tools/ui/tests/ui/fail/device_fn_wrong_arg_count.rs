use pgas::prelude::*;
#[pgas_device]
fn twice(x: f32) -> f32 {
    x * 2.0
}

#[pgas_kernel]
fn k(out: &mut CudaSlice<f32>) {
    out[0] = twice(1.0, 2.0);
}

fn main() {}
