use pgas::prelude::*;
#[pgas_kernel]
fn k(x: &mut CudaSlice<f32>, n: usize, #[comptime] m: u32) {
    let a = [0.0f32; n];
    let b = [0.0f32; 0];
    let c = [0.0f32; 257];
    let d = [0.0f32; m];
    let e = [0.0f32; 4 - 5];
    x[0] = a[0] + b[0] + c[0] + d[0] + e[0];
}

fn main() {}
