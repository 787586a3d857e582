use pgas::prelude::*;
#[pgas_kernel(fast)]
fn k(x: &mut SymTensor<f32>) {
}

fn main() {}
