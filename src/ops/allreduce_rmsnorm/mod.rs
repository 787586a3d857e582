//! All-reduce fused with the residual add and RMSNorm of a tensor-parallel decoder layer
//! (vLLM's and TensorRT-LLM's `allreduce + add + rmsnorm`), in one kernel: [`AllReduceRmsNorm`].
//! Every PE holds a partial sum `x` (tokens x hidden, bf16), the residual `r` (the same on every
//! PE) and the norm's weight `w`; every PE gets
//!
//! ```text
//! r_out = bf16(sum over PEs of x, in f32 in rank order, + r)       written back into r
//! y     = bf16(r_out * rsqrt(mean(r_out^2) + eps) * w)             f32 inside, into out
//! ```
//!
//! One-shot, two-shot and low-latency forms, synchronized by a [`crate::coll::Comm`]'s flags:
//! `docs/ops.md`, "All-reduce + residual add + RMSNorm", explains each protocol. The kernels are
//! in [`kernels`], the plan in `plan.rs`, the calls in `op.rs`, the host reference in
//! `reference.rs`.

pub mod kernels;
mod op;
mod plan;
mod reference;

pub use plan::{
    LL_AUTO_MAX_BYTES, LL_AUTO_MAX_BYTES_2PE, LL_MAX_BLOCKS, LL_MAX_SHARED_BYTES, LL_MAX_SLICES,
    ONE_SHOT_MAX_BYTES,
};
pub use reference::{reference, within_tolerance};

use self::plan::LlScratch;
use crate::coll::Comm;
use crate::prelude::*;
use crate::{Pgas, SymTensor};

/// All-reduce + residual add + RMSNorm over every PE, fused into one kernel (see the
/// [module docs](super)): made collectively with [`AllReduceRmsNorm::new`], then one
/// [`AllReduceRmsNorm::run`] per layer step on every PE.
///
/// ```no_run
/// use pgas::coll::Algorithm;
/// use pgas::ops::AllReduceRmsNorm;
/// use pgas::prelude::*;
///
/// # fn main() -> pgas::Result<()> {
/// let pgas = pgas::init()?;
/// let (hidden, tokens) = (8192, 4);
/// let mut op = AllReduceRmsNorm::new(&pgas, hidden, 4096, 1e-5)?; // collective
/// let x = pgas.alloc::<bf16>(tokens * hidden)?; // this PE's partial sums
/// let mut residual = pgas.alloc::<bf16>(tokens * hidden)?; // the same on every PE
/// let weight = pgas.alloc::<bf16>(hidden)?;
/// let mut out = pgas.alloc::<bf16>(tokens * hidden)?;
/// op.run(&x, &mut residual, &weight, &mut out, Algorithm::Auto)?; // residual += sum(x); out = norm
/// # Ok(())
/// # }
/// ```
///
/// Every buffer is symmetric (peers load `x` and, two-shot, store into `residual`), 16-byte
/// aligned, `tokens * hidden` elements (`weight`: `hidden`), and the four are apart. Every PE
/// makes the same calls with the same token counts, in the same order (as with NCCL). Calls are
/// ordered on the host by `&mut self`; run them on one stream at a time. Capturable into a CUDA
/// graph once the kernels are compiled ([`AllReduceRmsNorm::prewarm`] or a first eager call):
/// the call counters live in device memory.
pub struct AllReduceRmsNorm {
    pgas: Pgas,
    comm: Comm,
    hidden: usize,
    max_tokens: usize,
    eps: f32,
    /// PEs of the world team.
    n: usize,
    /// Blocks a fused call may launch: the fewest SMs of any PE, at most
    /// [`crate::coll::MAX_BLOCKS`] (blocks wait for their namesakes on the other PEs).
    max_blocks: usize,
    /// The low-latency form's LL scratch (`ll_blocks` regions of `ll_region` words), where
    /// `n * hidden * 2 <= LL_MAX_SHARED_BYTES`, and its groups' barrier words (`ll_blocks`)
    /// and partial sums of squares (`2 * ll_blocks`; see [`allreduce_add_rmsnorm_ll`]).
    ll_scratch: Option<LlScratch>,
    ll_region: usize,
    ll_blocks: usize,
    /// Where some peer is not load/store reachable (off NVLink, another node, or
    /// `PGAS_PEER_ACCESS`): the all-reduced rows, which `pgas::coll`'s all-reduce (NVSHMEM's or
    /// the hierarchical one) writes before the norm kernel reads them. `None` on NVLink.
    off_node: Option<SymTensor<bf16>>,
}

crate::debug::debug_fields!(|s: AllReduceRmsNorm| hidden: s.hidden, max_tokens: s.max_tokens,
    eps: s.eps, n_pes: s.n);
