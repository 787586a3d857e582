use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &SymTensor<f32>, out: &mut CudaSlice<usize>) {
    out[0] = len(x);
}

fn main() {}
