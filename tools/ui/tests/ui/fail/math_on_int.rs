use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut CudaSlice<i32>) {
    x[0] = x[1].sqrt();
}

fn main() {}
