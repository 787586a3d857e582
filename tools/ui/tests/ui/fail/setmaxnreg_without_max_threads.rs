use pgas::prelude::*;
// setmaxnreg moves registers between the warpgroups of a block whose size the kernel must
// declare: without `max_threads` it is refused at the call.
#[pgas_kernel]
fn k(out: &mut CudaSlice<f32>) {
    let t = thread_idx_x() as usize;
    if t < 128 {
        setmaxnreg_dec(40);
    } else {
        setmaxnreg_inc(232);
    }
    out[t] = 1.0;
}

fn main() {}
