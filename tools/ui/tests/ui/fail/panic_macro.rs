use pgas::prelude::*;
#[pgas_kernel]
fn k(n: u32) {
    if n == 0 {
        panic!("empty");
    }
}

fn main() {}
