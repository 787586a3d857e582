//! The exchange kernel of [`Halo2d`](super::Halo2d): the halo rows and their signals.

use crate::prelude::*;

/// Sends this PE's first row to the bottom halo of the PE above and its last row to the top
/// halo of the PE below (block 0 and block 1), each with `value` in the receiver's signal, then
/// waits until both of this PE's own halos arrived with `value`.
#[pgas_kernel]
pub fn halo_rows(
    field: &mut SymTensor<f32>, sig: &mut SymTensor<u64>, nx: usize, first: usize, last: usize,
    up_dst: usize, down_dst: usize, value: u64, up: i32, down: i32,
) {
    // Block 0 sends up, block 1 down; each then waits for the halo coming the other way
    // (the receiver's `sig[1]` is for a row from below, `sig[0]` for one from above).
    let up_block = block_idx_x() == 0;
    let dst = if up_block { up_dst } else { down_dst };
    let src = if up_block { first } else { last };
    let pe = if up_block { up } else { down };
    let sent = if up_block { 1 } else { 0 };
    put_signal_nbi_block(
        &mut field[dst..dst + nx],
        &field[src..src + nx],
        &mut sig[sent],
        value,
        SignalOp::Set,
        pe,
    );
    if thread_idx_x() == 0 {
        signal_wait_until(&sig[1 - sent], Cmp::Ge, value);
    }
}
