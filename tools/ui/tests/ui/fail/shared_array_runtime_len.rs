use pgas::prelude::*;
#[pgas_kernel]
fn k(n: u32) {
    let s = shared_array::<f32, n>();
}

fn main() {}
