//! Mixture-of-experts token dispatch and combine across PEs, over NVLink, with the per-expert
//! counts exchanged on the GPU (no host round trip inside a call).
//!
//! Every PE holds `tokens` rows of `hidden` `bf16` activations and a top-k routing: for each
//! token, `k` expert ids out of `n_pes * experts_per_pe` (expert `g` lives on PE
//! `g / experts_per_pe`) and their weights. [`MoeDispatcher::dispatch`] sends each token *once*
//! to each PE that holds any of its experts (as DeepEP does: not once per expert) and leaves
//! there, grouped by source PE in token order, the rows, where they came from, which local
//! experts each is for with what weight, and for each local expert the list of its rows.
//! The experts run on those (a grouped GEMM over each expert's rows) and write one output row
//! per (row, local expert) *pair*, in the expert-grouped order of [`MoeDispatcher::expert_rows`].
//! [`MoeDispatcher::combine`] reduces each row's pairs with their weights on the expert's PE,
//! sends one partial row back per (token, PE) and sums the partials on the token's PE: f32
//! accumulation, `bf16` out.
//! [`MoeDispatcher::combine_rows`] is the combine when the experts reduced each row's pairs
//! themselves (one row per received row in [`MoeDispatcher::combine_input`], as a grouped GEMM's
//! epilogue produces it): each token's PE pulls its rows from the PEs it went to and sums them,
//! in one kernel. [`MoeDispatcher::set_fp8_dispatch`] sends the rows as FP8 (`e4m3`, one scale
//! per 128 values), expanded to `bf16` on arrival. Where some peer is not load/store reachable,
//! the rows move by NVSHMEM's puts and gets instead of peer stores and loads (the same calls).
//! [`LowLatencyMoe`] is the decode-time mode: routing on the GPU, one kernel each way, no count
//! exchange and no host round trip, in DeepEP's low-latency layout.
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
//! # Bad input
//! [`MoeDispatcher::new`] and [`MoeDispatcher::route`] are collective and compare what every PE
//! passed (a small `fcollect` and a host wait), so sizes that differ between PEs, expert ids out
//! of range or repeated within a token, and a heap too small for the buffers are the same `Err`
//! on every PE, before any kernel is launched. [`MoeDispatcher::dispatch`] and
//! [`MoeDispatcher::combine`] launch without a host round trip: they check their local buffers
//! against the routing (an `Err` on the calling PE only, as a length error in NCCL is the
//! caller's contract: every PE must make the same calls).
//!
//! The kernels and their synchronization are in [`kernels`]; what they compute, on the host,
//! in [`mod@reference`].

mod config;
mod dispatcher;
pub mod kernels;
pub mod ll_kernels;
mod low_latency;
pub mod reference;
mod routing;
pub mod stand_in;

pub use config::{MoeConfig, MAX_BLOCKS, MAX_EXPERTS, MAX_TOP_K};
pub use dispatcher::{prewarm_list, MoeDispatcher};
pub use low_latency::{ll_prewarm_list, LowLatencyMoe, LL_MAX_TOKENS};
pub use routing::{RecvCounts, Routing};
