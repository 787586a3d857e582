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
pub use plan::RingAttention;
