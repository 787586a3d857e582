use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut SymTensor<f32>, i: i32) {
    x[i] = 1.0;
}

fn main() {}
