use pgas::prelude::*;
#[pgas_kernel]
fn k(out: &mut CudaSlice<f32>) {
    let y: f32 = 2;
    out[0] = y;
}

fn main() {}
