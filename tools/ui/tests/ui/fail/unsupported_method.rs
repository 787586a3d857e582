use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &SymTensor<f32>, out: &mut CudaSlice<f32>) {
    out[0] = x.iter().sum();
}

fn main() {}
