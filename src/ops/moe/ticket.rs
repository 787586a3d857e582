//! The synchronization the MoE kernels share: the grid ticket they end with (every block counts
//! itself in, and the last to arrive, which then sees what every block fenced before its
//! ticket, runs the kernel's tail), a block's count on every PE and the wait for every PE's
//! signal.

use crate::prelude::*;

/// Takes this block's ticket at `sync[word]` and says, to every thread of the block, whether
/// the block was the grid's last to take one. A block barrier goes before the ticket (so the
/// block's fenced stores precede it) and after it (so every thread reads the verdict); the
/// caller fences before calling and resets the counter in the last block.
#[pgas_device]
pub fn last_block(sync: &mut SymTensor<u64>, word: usize) -> bool {
    let last = shared_array::<u32, 1>();
    sync_threads();
    if thread_idx_x() == 0 {
        let old = atomic_add_local(&mut sync[word], 1u64);
        last[0] = if old + 1 == grid_dim_x() as u64 { 1 } else { 0 };
    }
    sync_threads();
    last[0] != 0
}

/// The grid's last block closes call `e` of the ticket at `sync[word]`: thread 0 records the
/// epoch at `sync[word + 1]` and puts the ticket back to 0 for the next call.
#[pgas_device]
pub fn close_epoch(sync: &mut SymTensor<u64>, word: usize, e: u64) {
    if thread_idx_x() == 0 {
        sync[word + 1] = e;
        sync[word] = 0;
    }
}

/// The end of a call whose epoch is `sync[word + 1]`: takes the block's ticket at `sync[word]`,
/// and the grid's last block closes the call ([`close_epoch`]).
#[pgas_device]
pub fn end_epoch(sync: &mut SymTensor<u64>, word: usize, e: u64) {
    if last_block(sync, word) {
        close_epoch(sync, word, e);
    }
}

/// Counts this block in on every PE once its work is out: completes its NVSHMEM puts and
/// releases its peer stores (fences, then a block barrier), then threads `t < n` add 1 to word
/// `sigs[at + me]` of PE `t`.
#[pgas_device]
pub fn count_block_in(sigs: &mut SymTensor<u64>, at: usize, n: usize, me: usize) {
    quiet();
    threadfence_system();
    sync_threads();
    let t = thread_idx_x() as usize;
    if t < n {
        signal_op(&mut sigs[at + me], 1, SignalOp::Add, t as i32);
    }
}

/// Threads `0..n` wait until PE `t`'s word `sigs[at + t]` is at least `want` and fence
/// (acquire), then a block barrier: past it the whole block sees what every PE released before
/// its signal.
#[pgas_device]
pub fn wait_pes(sigs: &SymTensor<u64>, at: usize, n: usize, want: u64) {
    let t = thread_idx_x() as usize;
    if t < n {
        signal_wait_until(&sigs[at + t], Cmp::Ge, want);
        threadfence_system();
    }
    sync_threads();
}
