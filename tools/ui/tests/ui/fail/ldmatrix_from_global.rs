use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &CudaSlice<bf16>, y: &mut CudaSlice<bf16>) {
    let mut a = frag_a::<bf16, 1>();
    // ldmatrix reads shared memory only.
    ldmatrix_x4(&mut a[0], &x[0]);
    // cp.async copies global to shared, not the other way.
    let s = shared_array::<bf16, 64>();
    cp_async_16(&mut y[0], &s[0]);
}

fn main() {}
