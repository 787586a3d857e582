use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut SymTensor<f32>) {
    x[0] = std::f32::consts::PI;
}

fn main() {}
