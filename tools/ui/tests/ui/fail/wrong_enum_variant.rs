use pgas::prelude::*;
#[pgas_kernel]
fn k(sig: &mut SymTensor<u64>) {
    signal_op(&mut sig[0], 1, SignalOp::Mul, 1);
}

fn main() {}
