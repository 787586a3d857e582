use pgas::prelude::*;

#[pgas_kernel(max_threads = "256")]
fn not_an_integer(x: &mut SymTensor<f32>) {
    x[0] = 1.0;
}

#[pgas_kernel(max_threads = 0)]
fn zero(x: &mut SymTensor<f32>) {
    x[0] = 1.0;
}

#[pgas_kernel(max_threads = 2048)]
fn too_large(x: &mut SymTensor<f32>) {
    x[0] = 1.0;
}

#[pgas_kernel(max_threads)]
fn no_value(x: &mut SymTensor<f32>) {
    x[0] = 1.0;
}

#[pgas_kernel(max_threads = 256, max_threads = 512)]
fn twice(x: &mut SymTensor<f32>) {
    x[0] = 1.0;
}

#[pgas_kernel(max_thread = 256)]
fn misspelled(x: &mut SymTensor<f32>) {
    x[0] = 1.0;
}

#[pgas_kernel(max_threads = 128 * n)]
fn not_comptime(x: &mut SymTensor<f32>, n: u32) {
    x[0] = 1.0;
}

#[pgas_kernel(max_threads = 128 * max(1, wgs))]
fn a_call(x: &mut SymTensor<f32>, #[comptime] wgs: u32) {
    x[0] = 1.0;
}

fn main() {}
