use pgas::prelude::*;
#[pgas_kernel]
fn k(src: &SymTensor<f32>) {
    let s = &mut src[0..2];
}

fn main() {}
