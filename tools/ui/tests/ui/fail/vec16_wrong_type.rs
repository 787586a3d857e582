use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &CudaSlice<bf16>, y: &mut CudaSlice<f32>) {
    let v = load_vec16(&x[0]);
    // 16 bytes of bf16 are not 16 bytes of f32.
    store_vec16(&mut y[0], v);
}

fn main() {}
