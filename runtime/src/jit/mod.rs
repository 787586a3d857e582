//! The JIT: CUDA C from `#[pgas_kernel]` (or a raw kernel) -> NVRTC -> CUBIN -> module ->
//! `nvshmemx_cumodule_init`, with an in-memory and an on-disk cache. Launching is
//! [`crate::launch`]'s.
//!
//! See `docs/jit.md` for the pipeline, the cache layout, the environment variables
//! (`PGAS_CUDA_HOME`, `PGAS_NVSHMEM_HOME`, `PGAS_CACHE_DIR`, `PGAS_CACHE`, `PGAS_DUMP_DIR`) and
//! the measured costs.

mod batch;
mod compile;
pub mod disk;
mod fn_key;
pub mod foreign;
pub mod helpers;
mod key;
mod library;
pub(crate) mod module;
mod nvjitlink;
mod nvrtc;
mod plan;
pub(crate) mod source;
pub(crate) mod state;
mod tiers;
pub mod toolchain;

pub use state::JitState;
pub use toolchain::{Compiled, LinkTime, Toolchain};

/// The prelude every kernel source starts with: pgas-codegen's, so raw and generated kernels
/// compile against the same headers.
pub use pgas_codegen::PRELUDE;
