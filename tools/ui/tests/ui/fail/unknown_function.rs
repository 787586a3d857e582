use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut SymTensor<f32>) {
    x[0] = helper_that_does_not_exist(1.0);
}

fn main() {}
