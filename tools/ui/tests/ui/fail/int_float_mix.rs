use pgas::prelude::*;
#[pgas_kernel]
fn k(out: &mut CudaSlice<f32>, a: i32, b: f32) {
    out[0] = a + b;
}

fn main() {}
