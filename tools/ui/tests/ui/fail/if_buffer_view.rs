use pgas::prelude::*;

#[pgas_kernel]
fn k(x: &mut SymTensor<f32>, c: bool) {
    let v = if c { &x[0..2] } else { &x[2..4] };
}

fn main() {}
