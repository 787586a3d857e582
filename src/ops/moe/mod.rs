//! Mixture-of-experts token dispatch and combine across PEs, with the per-expert counts
//! exchanged on the GPU. [`MoeDispatcher::dispatch`] sends each token once to each PE holding
//! any of its top-k experts (as DeepEP does) and lists each local expert's rows;
//! [`MoeDispatcher::combine`] (or [`MoeDispatcher::combine_rows`]) brings the weighted expert
//! outputs back, f32 accumulation, `bf16` out. FP8 dispatch, NVSHMEM RMA where a peer is off
//! NVLink, and [`LowLatencyMoe`] for decode. `docs/ops.md`, "MoE dispatch and combine", has the
//! layout, the protocol and the checks; [`mod@reference`] computes the same on the host.
//!
//! ```no_run
//! use pgas::ops::moe::{MoeConfig, MoeDispatcher};
//! use pgas::prelude::*;
//!
//! # fn main() -> pgas::Result<()> {
//! let pgas = pgas::init()?;
//! let cfg = MoeConfig { max_tokens: 4096, hidden: 7168, top_k: 8, experts_per_pe: 8 };
//! let mut moe = MoeDispatcher::new(&pgas, cfg)?;                     // collective
//! # let (topk_idx, topk_weights) = (vec![0i32; 8], vec![1.0f32; 8]);
//! let routing = moe.route(&topk_idx, &topk_weights)?;                 // collective, checked
//! # let x = pgas.stream().alloc_zeros::<bf16>(7168)?;
//! moe.dispatch(&x, &routing)?;                                        // on pgas.stream()
//! let counts = moe.recv_counts()?;                                    // host: waits for it
//! # let expert_out = pgas.stream().alloc_zeros::<bf16>(counts.pairs.max(1) * 7168)?;
//! // ... experts: expert e reads rows expert_rows()[expert_offsets[e]..expert_offsets[e + 1]]
//! //     of recv_x() and writes pair j's output at row j of expert_out ...
//! # let mut out = pgas.stream().alloc_zeros::<bf16>(7168)?;
//! moe.combine(&expert_out, &routing, &mut out)?;                      // out[t] = sum w * y
//! # Ok(())
//! # }
//! ```
//!
//! `new` and `route` are collective and refuse, on every PE, what any PE got wrong.

mod config;
pub mod kernels;
pub mod low_latency;
mod op;
mod plan;
pub mod reference;
mod routing;
mod ticket;

pub use config::{MoeConfig, MAX_BLOCKS, MAX_EXPERTS, MAX_TOP_K};
pub use low_latency::{ll_prewarm_list, LowLatencyMoe, LL_MAX_TOKENS};
pub use plan::{prewarm_list, MoeDispatcher};
pub use routing::{RecvCounts, Routing};
