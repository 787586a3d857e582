//! Context-parallel attention by a ring (ring attention): each PE holds a slice of one long
//! sequence; its K/V block travels round the PEs with put + signal on a copy stream while each
//! PE computes [`crate::attention`] of its queries against the block it holds, and the partial
//! results merge by their log-sum-exps. Causal masking uses zigzag slices (PE `r` holds chunks
//! `r` and `2P - 1 - r` of `2P`), so every step after the first costs each PE the same.
//! `docs/attention.md` has the protocol and when to take this form.

mod kernels;
mod op;
mod plan;

pub use kernels::{ring_combine, ring_stage, ring_unstage};

use crate::attention::{Attention, AttentionParams};
use crate::prelude::*;
use crate::SymTensor;
use cudarc::driver::{CudaEvent, CudaStream};

/// Attention over one sequence split across every PE by a ring (see the [module docs](super)):
/// made collectively with [`RingAttention::new`], then one [`RingAttention::run`] per call on
/// every PE.
///
/// Each PE holds `tokens` tokens of the sequence (Q and O `[tokens][heads_q][head_dim]`, K and
/// V `[tokens][heads_kv][head_dim]`, bf16). Without `causal` any split works; with it, PE `r`
/// holds the zigzag slice [`RingAttention::slice_of`]: chunks `r` and `2P - 1 - r` of the `2P`
/// chunks of `tokens / 2` tokens, one after the other.
pub struct RingAttention {
    params: AttentionParams,
    tokens: usize,
    pes: usize,
    me: usize,
    /// The step plans: causal, [own block, an earlier PE's, a later PE's]; else [any block].
    plans: Vec<Attention>,
    /// Ring slots 0 and 1, each K then V of one block.
    slots: [SymTensor<bf16>; 2],
    sig: SymTensor<u64>,
    /// The credit's payload (a put carries each signal).
    token: SymTensor<u64>,
    /// K and V of the block a step computes on, the step's O and LSE, the running O and LSE.
    kv: [CudaSlice<bf16>; 2],
    step_o: CudaSlice<bf16>,
    step_lse: CudaSlice<f32>,
    acc: CudaSlice<f32>,
    lse_acc: CudaSlice<f32>,
    copy: std::sync::Arc<CudaStream>,
    events: [CudaEvent; 2],
    /// Calls made: signal values grow with them, so no word is ever reset.
    calls: u64,
}
