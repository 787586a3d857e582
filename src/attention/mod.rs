//! `pgas::attention`: the Hopper (sm_90a) attention forward kernel written in pgas, for
//! programs and fused kernels (context-parallel attention) to build on. `docs/attention.md`
//! explains the kernel and its figures.

mod kernel;
mod plan;
pub mod reference;

pub use kernel::{attention_fwd_sm90, BM, THREADS};
pub use plan::{Attention, AttentionConfig, AttentionParams, WIDE_KEYS};
