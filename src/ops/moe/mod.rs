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
mod rows;
mod ticket;

pub use config::{MoeConfig, MAX_BLOCKS, MAX_EXPERTS, MAX_TOP_K};
pub use low_latency::{ll_prewarm_list, LowLatencyMoe, LL_MAX_TOKENS};
pub use plan::prewarm_list;
pub use routing::{RecvCounts, Routing};

use crate::{bf16, e4m3, Pgas, SymTensor};
use pgas_runtime::kernel::Variant;

/// MoE dispatch and combine over all PEs, with the symmetric buffers for the sizes of a
/// [`MoeConfig`]. Create it once (collectively), route each batch with
/// [`MoeDispatcher::route`], then [`MoeDispatcher::dispatch`] and [`MoeDispatcher::combine`].
/// Calls are ordered on the host (`&mut self`) and every PE makes the same calls in the same
/// order; the buffers are per call, so the results of a dispatch are valid until the next.
///
/// Rows move by peer stores where every peer is load/store reachable (NVLink or PCIe peer
/// access); where some peer is not (another node, or `PGAS_PEER_ACCESS`), by NVSHMEM's puts and
/// gets through a symmetric stage (`n_pes * max_tokens * hidden` more `bf16` of heap), which
/// NVSHMEM carries by its proxy where nothing maps the peer.
pub struct MoeDispatcher {
    pgas: Pgas,
    cfg: MoeConfig,
    n: usize,
    me: usize,
    blocks: u32,
    variant: Variant,
    /// The kernels' comptime values, `[top_k, n_pes, rma, fp8]` ([`prewarm_list`] says which
    /// kernel takes which).
    comptime: [i128; 4],
    recv_x: SymTensor<bf16>,
    /// FP8 dispatch's rows (`e4m3`) and scales (one a 128 values); a token's worth until
    /// [`MoeDispatcher::set_fp8_dispatch`] first turns it on.
    recv_q: SymTensor<e4m3>,
    recv_scale: SymTensor<f32>,
    /// Where some peer is not load/store reachable, the symmetric rows NVSHMEM's puts and gets
    /// go from and to (`n_pes * max_tokens` rows); 16 elements otherwise.
    stage: SymTensor<bf16>,
    recv_src: SymTensor<i32>,
    recv_idx: SymTensor<i32>,
    recv_w: SymTensor<f32>,
    row_pairs: SymTensor<i32>,
    expert_rows: SymTensor<i32>,
    /// Combine's rows: the partials peers send here (`combine`), or this PE's experts' rows
    /// that peers pull (`combine_rows`, [`MoeDispatcher::combine_input`]).
    comb: SymTensor<bf16>,
    counts: SymTensor<i32>,
    info: SymTensor<i32>,
    sync: SymTensor<u64>,
    sigs: SymTensor<u64>,
    agree_mine: SymTensor<u64>,
    agree_all: SymTensor<u64>,
    tok_rank: SymTensor<i32>,
    tok_erank: SymTensor<i32>,
    routes: u64,
    /// The routing of the last dispatch (its id and tokens).
    dispatched: Option<(u64, usize)>,
    /// The last dispatch's counts, once read on the host.
    known: Option<RecvCounts>,
    /// Whether the last dispatch was combined already (a second combine could overwrite the
    /// combine rows a peer still reads: only the next dispatch orders them).
    combined: bool,
}

crate::debug::debug_fields!(|d: MoeDispatcher| cfg: d.cfg, n: d.n, blocks: d.blocks);
