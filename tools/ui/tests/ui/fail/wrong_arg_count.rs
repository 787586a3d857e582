use pgas::prelude::*;
#[pgas_kernel]
fn k(dst: &mut SymTensor<f32>, src: &SymTensor<f32>) {
    put_block(dst, src);
}

fn main() {}
