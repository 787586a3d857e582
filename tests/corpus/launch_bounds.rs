//! Kernels that declare their largest block (`max_threads`), emitted as `__launch_bounds__`.
use pgas::prelude::*;

/// The all-reduce of issue 13: at 1024 threads it needs the bound to fit on an SM.
#[pgas_kernel(max_threads = 1024)]
fn bounded_all_reduce(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, nn: usize, iters: u32) {
    for _ in 0..iters {
        reduce_block(team, &mut dst[0..nn], &src[0..nn], ReduceOp::Sum);
    }
}

#[pgas_device]
fn halve(v: f32) -> f32 {
    v * 0.5
}

/// A point-to-point kernel with a bound and a device function (the bound survives the device
/// function's macro).
#[pgas_kernel(max_threads = 256)]
fn bounded_scale(x: &mut SymTensor<f32>) {
    let i = global_thread_idx();
    if i < x.len() {
        x[i] = halve(x[i]);
    }
}
