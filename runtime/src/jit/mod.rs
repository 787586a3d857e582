//! The JIT: CUDA C from `#[pgas_kernel]` (or a raw kernel) -> NVRTC -> CUBIN -> module ->
//! `nvshmemx_cumodule_init`, with an in-memory and an on-disk cache. Launching is
//! [`crate::launch`]'s.
//!
//! See `docs/jit.md` for the pipeline, the cache layout, the environment variables
//! (`PGAS_CUDA_HOME`, `PGAS_NVSHMEM_HOME`, `PGAS_CACHE_DIR`, `PGAS_CACHE`, `PGAS_DUMP_DIR`) and
//! the measured costs.

mod batch;
pub mod disk;
pub mod helpers;
mod library;
mod nvjitlink;
mod nvrtc;
pub(crate) mod source;
pub(crate) mod state;
pub mod toolchain;

pub use state::JitState;
pub use toolchain::{Compiled, Toolchain};

use crate::nvshmem::Nvshmem;
use state::ModuleHooks;

impl ModuleHooks for Nvshmem {
    fn cumodule_init(&self, module: cudarc::driver::sys::CUmodule) -> i32 {
        // SAFETY: a module just loaded in the current context, NVSHMEM initialized (a Pgas
        // exists); cudarc's and bindgen's CUmodule are the same opaque pointer.
        unsafe { self.raw().nvshmemx_cumodule_init(module.cast()) }
    }

    fn cumodule_finalize(&self, module: cudarc::driver::sys::CUmodule) -> i32 {
        // SAFETY: as above, for a module about to be unloaded.
        unsafe { self.raw().nvshmemx_cumodule_finalize(module.cast()) }
    }
}

/// The prelude every kernel source starts with: pgas-codegen's, so raw and generated kernels
/// compile against the same headers.
pub use pgas_codegen::PRELUDE;
