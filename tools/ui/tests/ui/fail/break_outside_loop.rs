use pgas::prelude::*;
#[pgas_kernel]
fn k() {
    break;
}

fn main() {}
