use pgas::prelude::*;
#[pgas_kernel]
fn k() {
    let (a, b) = (1, 2);
}

fn main() {}
