use pgas::prelude::*;
#[pgas_kernel]
fn k(src: &SymTensor<f32>) {
    let s = shared_array::<f32, 64>();
    put_block(s, src, 1);
}

fn main() {}
