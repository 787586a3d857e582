use pgas::prelude::*;
#[pgas_kernel]
fn k(x: Vec<f32>) {
}

fn main() {}
