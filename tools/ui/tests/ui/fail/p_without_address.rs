use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut SymTensor<i32>) {
    p(x[0], 1, 1);
}

fn main() {}
