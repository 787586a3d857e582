use pgas::prelude::*;
#[pgas_kernel]
fn k<T>(x: &mut SymTensor<T>) {
}

fn main() {}
