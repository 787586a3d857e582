use pgas::prelude::*;
#[pgas_kernel]
fn k(sig: &mut SymTensor<u64>, v: u32) {
    signal_op(&mut sig[0], v, SignalOp::Add, 1);
}

fn main() {}
