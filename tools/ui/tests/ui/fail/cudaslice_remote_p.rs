use pgas::prelude::*;
#[pgas_kernel]
fn k(local: &mut CudaSlice<i32>) {
    p(&mut local[0], 1, 0);
}

fn main() {}
