use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &SymTensor<f32>) -> f32 {
    x[0]
}

fn main() {}
