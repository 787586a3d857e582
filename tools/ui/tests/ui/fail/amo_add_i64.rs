use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut SymTensor<i64>) {
    atomic_add(&mut x[0], 1, 1);
}

fn main() {}
