use pgas::prelude::*;
#[pgas_kernel(max_threads = 256)]
fn k(out: &mut CudaSlice<f32>) {
    let t = thread_idx_x() as usize;
    if t < 128 {
        // Below the instruction's 24.
        setmaxnreg_dec(20);
    } else {
        // Not a multiple of 8.
        setmaxnreg_inc(100);
    }
    out[t] = 1.0;
}

#[pgas_kernel(max_threads = 256)]
fn runtime_count(out: &mut CudaSlice<f32>, x: u32) {
    // The count is an immediate of the instruction.
    setmaxnreg_inc(x);
    out[0] = 1.0;
}

fn main() {}
