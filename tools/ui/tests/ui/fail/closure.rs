use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut SymTensor<f32>) {
    let f = |v: f32| v * 2.0;
}

fn main() {}
