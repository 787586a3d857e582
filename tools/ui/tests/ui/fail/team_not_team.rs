use pgas::prelude::*;
#[pgas_kernel]
fn k() {
    barrier(0);
}

fn main() {}
