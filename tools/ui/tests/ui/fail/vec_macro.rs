use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut SymTensor<i32>) {
    let v = vec![1, 2, 3];
}

fn main() {}
