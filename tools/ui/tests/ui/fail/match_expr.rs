use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut SymTensor<i32>, n: i32) {
    x[0] = match n {
        0 => 1,
        _ => 2,
    };
}

fn main() {}
