use pgas::prelude::*;
#[pgas_kernel]
fn k(out: &mut CudaSlice<i32>) {
    let x = 1;
    x = 2;
    out[0] = x;
}

fn main() {}
