use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &SymTensor<f32>) {
    println!("{}", x[0]);
}

fn main() {}
