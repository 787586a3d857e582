use pgas::prelude::*;
#[pgas_kernel]
fn k(x: SymTensor<f32>) {
}

fn main() {}
