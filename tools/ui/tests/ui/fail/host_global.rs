use pgas::prelude::*;
const SCALE: f32 = 2.0;

#[pgas_kernel]
fn k(x: &mut SymTensor<f32>) {
    x[0] = SCALE;
}

fn main() {}
