use pgas::prelude::*;

#[pgas_kernel]
fn k(x: &mut SymTensor<f32>) {
    let b = Box::new(1.0);
}

fn main() {}
