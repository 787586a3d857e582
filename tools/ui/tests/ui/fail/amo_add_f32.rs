use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut SymTensor<f32>) {
    atomic_add(&mut x[0], 1.0, 1);
}

fn main() {}
