use pgas::prelude::*;
#[pgas_kernel]
fn k(c: &mut CudaSlice<f32>) {
    let s = shared_array::<bf16, 256>();
    let a = frag_a::<bf16, 1>();
    let b = frag_b::<bf16, 1>();
    let acc = frag_c::<f32, 1>();
    ldmatrix_x4(&mut a[0], &s[0]);
    mma_sync(&mut acc[0], &a[0], &b[0]);
    acc[0][1] = 2.0;
    c[0] = acc[0][0];
}

fn main() {}
