use pgas::prelude::*;
#[pgas_kernel]
fn k(out: &mut CudaSlice<f32>) {
    out[0] = shared_array::<f32, 4>()[0];
}

fn main() {}
