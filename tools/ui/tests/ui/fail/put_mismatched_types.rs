use pgas::prelude::*;
#[pgas_kernel]
fn k(dst: &mut SymTensor<f32>, src: &SymTensor<f64>) {
    put(dst, src, 1);
}

fn main() {}
