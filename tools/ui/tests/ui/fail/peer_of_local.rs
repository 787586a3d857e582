use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>) {
    let r = x.peer(1);
}

fn main() {}
