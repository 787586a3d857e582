use pgas::prelude::*;
#[pgas_kernel]
fn k(dst: &mut SymTensor<f32>, src: &SymTensor<f32>) {
    put(dst.peer(1), src, 1);
}

fn main() {}
