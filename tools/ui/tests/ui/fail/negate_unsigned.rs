use pgas::prelude::*;
#[pgas_kernel]
fn k(out: &mut CudaSlice<u32>, n: u32) {
    out[0] = -n;
}

fn main() {}
