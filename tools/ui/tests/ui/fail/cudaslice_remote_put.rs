use pgas::prelude::*;
#[pgas_kernel]
fn k(dst: &mut CudaSlice<f32>, src: &SymTensor<f32>, pe: i32) {
    put(dst, src, pe);
}

fn main() {}
