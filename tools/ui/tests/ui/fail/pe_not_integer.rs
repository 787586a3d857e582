use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut SymTensor<i32>) {
    p(&mut x[0], 1, 1.5);
}

fn main() {}
