//! All-reduce fused with the residual add and RMSNorm of a tensor-parallel decoder layer
//! (vLLM's and TensorRT-LLM's `allreduce + add + rmsnorm`): every PE holds a partial sum `x`
//! (tokens x hidden, bf16) of the row-parallel GEMM before it, the residual stream `r` (the same
//! on every PE) and the norm's weight `w`; every PE gets
//!
//! ```text
//! r_out = bf16(sum over PEs of x, in f32 in rank order, + r)       written back into r
//! y     = bf16(r_out * rsqrt(mean(r_out^2) + eps) * w)             f32 inside, into out
//! ```
//!
//! in one kernel, [`AllReduceRmsNorm`]. The sum is rounded to bf16 once (with the residual), and
//! the norm reads the rounded `r_out`, so `y` is the norm of what the residual stream holds.
//!
//! # The protocol
//! The kernel synchronizes with the flags and call counters of a [`crate::coll::Comm`] (`docs/coll.md`,
//! "Synchronization"): block `b` of each PE sets `sig[b * n + rank]` on every PE to `2e - 1` on
//! entering its call `e` and `2e` on leaving, and waits for the other PEs' block `b`; `epochs[b]`
//! counts its calls in device memory, so a CUDA graph that replays a call counts correctly. Rows
//! are independent, so each block takes whole rows:
//!
//! - **one-shot** (few tokens): block `b` takes rows `b, b + G, ..` (`G` blocks). For each row it
//!   loads the row of `x` from every PE (peer loads over NVLink, all PEs' 16-byte vectors in
//!   flight together), sums them in f32 in rank order, adds the residual, writes `r_out` back
//!   locally, reduces the sum of squares over the block and writes `y` locally. Then it leaves:
//!   when a call completes on a PE, no peer reads that PE's `x` any more.
//! - **two-shot** (many tokens): rank `p` owns rows `p c .. (p + 1) c` (`c = ceil(T / n)`). Block
//!   `b` reduces the owned rows `p c + b, p c + b + G, ..` as above and stores `r_out` into every
//!   PE's residual (peer stores), then leaves with a system fence before its signal; after it has
//!   seen every PE's leave signal, rows `q c + b, q c + b + G, ..` of every owner `q` are in its
//!   residual (block `b` of each PE stored exactly those), and it computes their `y` locally.
//!   Each PE moves `2 (n - 1) / n` of the data over NVLink, as a two-shot all-reduce: `y` never
//!   crosses the links (each PE normalizes every row itself).
//!
//! - **low latency** ([`crate::coll::Algorithm::LowLatency`], a kernel of its own,
//!   [`kernels::allreduce_add_rmsnorm_ll`]; `Auto`'s choice up to 128 KiB of `x`,
//!   [`LL_AUTO_MAX_BYTES`], 256 KiB on two PEs): no handshake at all; a row is split over up to
//!   8 blocks for few tokens ([`AllReduceRmsNorm::ll_slices`]); each block gathers every PE's
//!   slice of the row into shared memory over `coll`'s LL lines (data and flag in one store,
//!   `team_all_gather_block`), then sums and adds as above; the row's blocks add their sums of
//!   squares at a barrier of their own (device words, no NVLink) and normalize their slices.
//!   One NVLink crossing a call.
//!
//! Every form computes `r_out` with the same operations in the same order (so the residual
//! stream has the same bits on every PE, whichever form ran). Blocks wait for their namesakes on
//! the other PEs, so the grid is at most the fewest SMs of any PE (and
//! [`crate::coll::MAX_BLOCKS`]), the same on every PE for the same call.
//! [`AllReduceRmsNorm::add_rms_norm_on`] is the same kernel without any exchange: the residual
//! add and RMSNorm alone, for an input that is already all-reduced (the unfused form).
//!
//! The kernels are in [`kernels`], the operation in `op.rs`, the host reference in
//! `reference.rs`.

pub mod kernels;
mod op;
mod reference;

pub use op::{
    AllReduceRmsNorm, LL_AUTO_MAX_BYTES, LL_AUTO_MAX_BYTES_2PE, LL_MAX_BLOCKS, LL_MAX_SHARED_BYTES,
    LL_MAX_SLICES, ONE_SHOT_MAX_BYTES,
};
pub use reference::{reference, within_tolerance};
