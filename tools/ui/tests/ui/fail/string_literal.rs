use pgas::prelude::*;
#[pgas_kernel]
fn k() {
    let s = "hello";
}

fn main() {}
