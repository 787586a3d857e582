//! [`LowLatencyMoe`]: MoE dispatch and combine for decoding (a few tokens per PE), in one kernel
//! each way with the routing on the GPU, no count exchange before the rows and no host round
//! trip, so a decode step captures into a CUDA graph. The kernels and how they synchronize are in
//! [`kernels`].

pub mod kernels;
mod op;
mod plan;

pub use plan::{ll_prewarm_list, LL_MAX_TOKENS};

use crate::ops::moe::MoeConfig;
use crate::{bf16, Pgas, SymTensor};
use pgas_runtime::kernel::Variant;

/// MoE dispatch and combine for decode steps, in the layout of DeepEP's low-latency mode: each
/// (token, slot) pair travels on its own to its expert's PE, where the rows of local expert `le`
/// from source PE `s` are rows `(le * n_pes + s) * max_tokens ..` of [`LowLatencyMoe::recv_x`],
/// [`LowLatencyMoe::recv_counts`]`[le * n_pes + s]` of them, and
/// [`LowLatencyMoe::recv_src`] says which pair each row is (`token * top_k + slot` on `s`).
/// The experts write their output row for row in that layout (a local buffer of
/// [`LowLatencyMoe::expert_out_len`] elements), and [`LowLatencyMoe::combine`] brings every
/// row back to its token's PE and sums them with their weights. Over NVLink (peer stores).
///
/// ```no_run
/// use pgas::ops::moe::{LowLatencyMoe, MoeConfig};
/// use pgas::prelude::*;
///
/// # fn main() -> pgas::Result<()> {
/// let pgas = pgas::init()?;
/// let cfg = MoeConfig { max_tokens: 128, hidden: 7168, top_k: 8, experts_per_pe: 8 };
/// let mut ll = LowLatencyMoe::new(&pgas, cfg)?;                       // collective
/// # let s = pgas.stream();
/// # let (x, idx, w) = (s.alloc_zeros::<bf16>(128 * 7168)?, s.alloc_zeros::<i32>(128 * 8)?, s.alloc_zeros::<f32>(128 * 8)?);
/// # let mut expert_out = s.alloc_zeros::<bf16>(ll.expert_out_len())?;
/// # let mut out = s.alloc_zeros::<bf16>(128 * 7168)?;
/// ll.dispatch(&x, &idx, &w, 128)?;         // idx, w: tokens * top_k expert ids and weights
/// // ... experts: rows of recv_x() by (local expert, source), recv_counts() of each,
/// //     output row r at row r of expert_out ...
/// ll.combine(&expert_out, &idx, 128, &mut out)?;  // out[t] = sum of w * expert row
/// # Ok(())
/// # }
/// ```
pub struct LowLatencyMoe {
    pgas: Pgas,
    cfg: MoeConfig,
    n: usize,
    me: usize,
    variant: Variant,
    /// Blocks of its grids: [`LL_BLOCKS_PER_SM`] on each of this GPU's multiprocessors.
    blocks: u32,
    counters: SymTensor<u32>,
    recv_x: SymTensor<bf16>,
    recv_src: SymTensor<i32>,
    tok_rows: SymTensor<u64>,
    tok_w: SymTensor<f32>,
    recv_count: SymTensor<u64>,
    comb_x: SymTensor<bf16>,
    comb_sig: SymTensor<u64>,
    sync: SymTensor<u64>,
    /// Rows from each source for each local expert, read on this PE only. It and the next are
    /// symmetric, so no launch waits on or records a cudarc event for them: a launch captured
    /// into a CUDA graph must not wait on an event recorded outside the capture.
    counts: SymTensor<i32>,
    /// Each source's token count, read on this PE only.
    src_tokens: SymTensor<i32>,
    /// The tokens of the last dispatch that no combine has followed yet.
    dispatched: Option<usize>,
}
