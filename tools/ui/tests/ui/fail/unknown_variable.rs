use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut SymTensor<f32>) {
    x[0] = y;
}

fn main() {}
