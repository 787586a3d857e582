use pgas::prelude::*;
#[pgas_kernel]
fn k(#[comptime] scale: f32, x: &mut SymTensor<f32>) {
}

fn main() {}
