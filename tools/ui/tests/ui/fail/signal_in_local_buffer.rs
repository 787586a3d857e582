use pgas::prelude::*;
#[pgas_kernel]
fn k(dst: &mut SymTensor<f32>, src: &SymTensor<f32>, sig: &mut CudaSlice<u64>) {
    put_signal(dst, src, &mut sig[0], 1, SignalOp::Add, 1);
}

fn main() {}
