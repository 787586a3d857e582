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
pub use plan::UlyssesAttention;
