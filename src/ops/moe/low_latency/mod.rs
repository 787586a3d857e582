//! [`LowLatencyMoe`]: MoE dispatch and combine for decoding (a few tokens per PE), in one kernel
//! each way with the routing on the GPU, no count exchange before the rows and no host round
//! trip, so a decode step captures into a CUDA graph. The kernels and how they synchronize are in
//! [`kernels`].

pub mod kernels;
mod op;
mod plan;

pub use plan::{ll_prewarm_list, LowLatencyMoe, LL_MAX_TOKENS};
