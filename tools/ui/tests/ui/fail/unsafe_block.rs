use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut SymTensor<f32>) {
    unsafe {
        x[0] = 1.0;
    }
}

fn main() {}
