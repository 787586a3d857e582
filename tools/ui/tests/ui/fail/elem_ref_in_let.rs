use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut SymTensor<f32>) {
    let r = &mut x[0];
}

fn main() {}
