use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &SymTensor<f32>, n: u32) {
    let i = global_thread_idx();
    if i < n {
        return;
    }
}

fn main() {}
