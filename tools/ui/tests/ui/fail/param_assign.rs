use pgas::prelude::*;
#[pgas_kernel]
fn k(n: u32) {
    n = 3;
}

fn main() {}
