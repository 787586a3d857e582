use pgas::prelude::*;
#[pgas_kernel]
fn k(out: &mut CudaSlice<u8>, n: i32) {
    let b = n as bool;
}

fn main() {}
