use pgas::prelude::*;
#[pgas_kernel]
fn k(dst: &mut CudaSlice<f32>, src: &SymTensor<f32>, a: i32) {
    put(dst, src, 1);
    let y = a + 1.0;
    src[0] = 2.0;
}

fn main() {}
