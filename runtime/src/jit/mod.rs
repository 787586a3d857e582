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

/// The prelude every kernel source starts with (see `docs/jit.md`).
// TODO(main): use pgas_codegen::PRELUDE once pgas-codegen exports it, so raw and generated
// kernels share one copy.
pub const PRELUDE: &str = r#"#include <non_abi/nvshmem_build_options.h>
#undef NVSHMEM_IBGDA_SUPPORT
#include <cuda/std/type_traits>
namespace std { using namespace cuda::std; }
#include <nvshmem.h>
#include <nvshmemx.h>
"#;

/// Prepends the kernel-name and comptime `#define`s to a generated source and returns it with the
/// specialization's symbol (`<base>_<variant>[_<param><value>]...`), as `docs/internals.md`
/// specifies.
// TODO(main): call pgas_codegen::specialize once it lands (the CI corpus test uses that one).
pub(crate) fn specialize(
    source: &str,
    base_name: &str,
    variant: Variant,
    comptime: &[(&str, i128)],
) -> (String, String) {
    let mut name = format!("{base_name}_{}", variant.as_str());
    for (param, value) in comptime {
        name.push_str(&format!("_{param}{}", value.to_string().replace('-', "m")));
    }
    let mut text = format!("#define PGAS_KERNEL_NAME {name}\n");
    for (param, value) in comptime {
        text.push_str(&format!("#define PGAS_CT_{param} ({value})\n"));
    }
    text.push_str(source);
    (text, name)
}
