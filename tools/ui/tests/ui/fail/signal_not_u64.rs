use pgas::prelude::*;
#[pgas_kernel]
fn k(sig: &mut SymTensor<u32>) {
    signal_op(&mut sig[0], 1, SignalOp::Set, 1);
}

fn main() {}
