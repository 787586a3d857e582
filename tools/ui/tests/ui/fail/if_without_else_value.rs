use pgas::prelude::*;
#[pgas_kernel]
fn k(out: &mut CudaSlice<i32>, c: bool) {
    let x = if c { 1 };
}

fn main() {}
