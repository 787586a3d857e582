use pgas::prelude::*;

#[pgas_kernel]
fn store_tile(out: &TensorMap<f32>) {
    let smem = dyn_shared::<f32>();
    tma_store_2d(out, &smem[0], 0, 0);
}

fn main() {}
