use pgas::prelude::*;
#[pgas_kernel]
fn k(c: &mut CudaSlice<f32>) {
    // mma.sync m16n8k16 multiplies bf16 or f16, and accumulates in f32.
    let mut a = frag_a::<f32, 1>();
    let mut acc = frag_c::<bf16, 1>();
    c[0] = 0.0;
}

fn main() {}
