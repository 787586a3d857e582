//! Context-parallel attention by all-to-all (DeepSpeed-Ulysses): each PE holds a contiguous
//! slice of one long sequence, with every head. An all-to-all per tensor trades the sequence
//! split for a head split, so each PE holds the whole sequence for `1 / P` of the heads; each
//! runs [`crate::attention`] on its heads (causal masking needs no balancing: every PE sees the
//! whole sequence); a last all-to-all returns each PE its slice of O with every head.
//! `docs/attention.md` has the layouts and when to take this form.

mod kernels;
mod op;
mod plan;

pub use kernels::{ulysses_pack, ulysses_unpack};

use crate::attention::{Attention, AttentionParams};
use crate::coll::Comm;
use crate::prelude::*;
use crate::SymTensor;

/// Attention over one sequence split across every PE (see the [module docs](super)): made
/// collectively with [`UlyssesAttention::new`], then one [`UlyssesAttention::run`] per call on
/// every PE.
///
/// PE `p` holds tokens `p * tokens .. (p + 1) * tokens` of the sequence: its Q and O are
/// `[tokens][heads_q][head_dim]`, its K and V `[tokens][heads_kv][head_dim]` (bf16). `causal`
/// masks by position in the whole sequence.
pub struct UlyssesAttention {
    comm: Comm,
    params: AttentionParams,
    tokens: usize,
    pes: usize,
    attention: Attention,
    send: SymTensor<bf16>,
    recv: SymTensor<bf16>,
    full: [CudaSlice<bf16>; 4],
    lse: CudaSlice<f32>,
}
