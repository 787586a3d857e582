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
    AllReduceRmsNorm, LL_AUTO_MAX_BYTES, LL_AUTO_MAX_BYTES_2PE, LL_MAX_BLOCKS, LL_MAX_SHARED_BYTES,
    LL_MAX_SLICES, ONE_SHOT_MAX_BYTES,
};
pub use reference::{reference, within_tolerance};
