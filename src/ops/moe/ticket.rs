//! The grid ticket the MoE kernels end with: every block counts itself in, and the last to
//! arrive (which then sees what every block fenced before its ticket) runs the kernel's tail.

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
