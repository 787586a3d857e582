use pgas::prelude::*;
#[pgas_kernel]
fn k(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>) {
    reduce_block(team, dst, src, ReduceOp::Xor);
}

fn main() {}
