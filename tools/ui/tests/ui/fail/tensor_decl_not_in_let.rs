use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut CudaSlice<bf16>) {
    let n = dyn_shared::<bf16>().len();
    let acc = frag_c::<f32, 2>();
    let one = acc[0];
    x[0] = x[n];
}

fn main() {}
