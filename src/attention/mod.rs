//! `pgas::attention`: the Hopper (sm_90a) attention forward kernel written in pgas, for
//! programs and fused kernels (context-parallel attention) to build on. `docs/attention.md`
//! explains the kernel and its figures.

mod kernel;
mod plan;
pub mod reference;
mod v_fp8;

pub use kernel::{attention_fwd_sm90, WG_ROWS};
pub use plan::{Attention, AttentionConfig, AttentionParams, Fp8Scales, WIDE_KEYS};
pub use v_fp8::{attention_v_fp8, VT_KEYS, VT_SHARED};
