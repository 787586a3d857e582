use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &SymTensor<f32>) {
    wait_until(&x[0], Cmp::Eq, 1.0);
}

fn main() {}
