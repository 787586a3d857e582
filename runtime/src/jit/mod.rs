//! The JIT: CUDA C from `#[pgas_kernel]` (or [`RawKernel`]) -> NVRTC -> CUBIN -> module ->
//! `nvshmemx_cumodule_init` -> launch, with an in-memory and an on-disk cache.
//!
//! See `docs/jit.md` for the pipeline, the cache layout, the environment variables
//! (`PGAS_CUDA_HOME`, `PGAS_NVSHMEM_HOME`, `PGAS_CACHE_DIR`, `PGAS_CACHE`, `PGAS_DUMP_DIR`) and
//! the measured costs.

mod bare;
pub mod disk;
pub(crate) mod launch;
mod nvrtc;
mod prewarm;
mod raw;
pub(crate) mod state;
pub mod toolchain;

pub use bare::Bare;
pub use launch::LaunchConfig;
pub use prewarm::{prewarm, Prewarm};
pub use raw::RawKernel;
pub use state::{JitState, MAX_COMPTIME};
pub use toolchain::{Compiled, Toolchain};

use crate::context::Pgas;
use crate::kernel::Variant;
use crate::nvshmem::Nvshmem;
use state::{ModuleHooks, Target};

impl Pgas {
    /// Where this context's kernels load: its CUDA context, JIT state and NVSHMEM.
    pub(crate) fn jit_target(&self) -> Target<'_> {
        Target {
            ctx: &self.inner.ctx,
            jit: &self.inner.jit,
            nvshmem: Some(self.inner.nvshmem),
        }
    }
}

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

/// [`pgas_codegen::specialize`] for a runtime [`Variant`].
pub(crate) fn specialize(
    source: &str,
    base_name: &str,
    variant: Variant,
    comptime: &[(&str, i128)],
) -> (String, String) {
    pgas_codegen::specialize(source, base_name, variant.as_str(), comptime)
}
