use pgas::prelude::*;
#[pgas_kernel]
fn k(src: &SymTensor<f32>) {
    src[0] = 1.0;
}

fn main() {}
