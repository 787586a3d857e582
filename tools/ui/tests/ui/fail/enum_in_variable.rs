use pgas::prelude::*;
#[pgas_kernel]
fn k(sig: &SymTensor<u64>) {
    let c = Cmp::Eq;
}

fn main() {}
