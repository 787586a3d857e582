use pgas::prelude::*;

trait Op {}

#[pgas_kernel]
fn k(op: &dyn Op, x: &mut SymTensor<f32>) {}

fn main() {}
