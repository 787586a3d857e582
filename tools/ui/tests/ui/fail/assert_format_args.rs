use pgas::prelude::*;

#[pgas_kernel]
fn k(x: &SymTensor<f32>, n: usize) {
    assert!(n < x.len(), "n = {}", n);
}

fn main() {}
