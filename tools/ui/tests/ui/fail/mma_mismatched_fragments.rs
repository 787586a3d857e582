use pgas::prelude::*;
#[pgas_kernel]
fn k(c: &mut CudaSlice<f32>) {
    let a = frag_a::<bf16, 1>();
    let b = frag_b::<f16, 1>();
    let mut acc = frag_c::<f32, 1>();
    // A holds bf16 but B f16.
    mma_sync(&mut acc[0], &a[0], &b[0]);
    // Operands swapped: B where A goes.
    mma_sync(&mut acc[0], &b[0], &a[0]);
    c[0] = acc[0][0];
}

fn main() {}
