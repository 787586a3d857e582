use pgas::prelude::*;
#[pgas_kernel]
fn k() {
    let me = my_pe(0);
}

fn main() {}
