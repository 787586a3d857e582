use pgas::prelude::*;
#[pgas_kernel]
fn k(dst: &SymTensor<f32>, src: &SymTensor<f32>) {
    put(dst, src, 1);
}

fn main() {}
