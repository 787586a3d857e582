//! Hand-written CUDA kernels, for experiments: the same prelude, caches and launch as
//! `#[pgas_kernel]`, without the parameter checks.

use std::sync::atomic::{AtomicU64, Ordering};

use cudarc::driver::CudaStream;

use super::args::KernelArgs;
use super::config::LaunchConfig;
use super::entry::launch_checked_stream;
use crate::context::pgas::Pgas;
use crate::error::Result;
use crate::jit::module::Function;
use crate::jit::source::Source;
use crate::jit::state::{FnKey, KernelId, Target};
use crate::kernel::Variant;
use pgas_codegen::PRELUDE;

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A kernel written directly in CUDA C.
///
/// ```no_run
/// # fn f(pgas: &pgas_runtime::Pgas, buf: &mut cudarc::driver::CudaSlice<f32>) -> pgas_runtime::Result<()> {
/// use pgas_runtime::launch::{KernelArgs, LaunchConfig, RawKernel};
/// let k = RawKernel::from_source(
///     r#"extern "C" __global__ void twice(float* x, unsigned long long n) {
///         unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x;
///         if (i < n) x[i] *= 2.0f;
///     }"#,
///     "twice",
/// );
/// // SAFETY: the arguments match `twice`'s parameters.
/// unsafe { k.launch(pgas, LaunchConfig::blocks(4, 256), KernelArgs::new().push_local_mut(buf))? };
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RawKernel {
    id: u64,
    name: String,
    source: String,
    collective: bool,
}

impl RawKernel {
    /// `cuda_src` must define `extern "C" __global__ void <name>(...)`; [`PRELUDE`] (NVSHMEM's
    /// headers) is prepended. Compilation happens at the first launch or [`RawKernel::prewarm`].
    pub fn from_source(cuda_src: &str, name: &str) -> RawKernel {
        RawKernel::with_prelude(PRELUDE, cuda_src, name)
    }

    fn with_prelude(prelude: &str, cuda_src: &str, name: &str) -> RawKernel {
        RawKernel {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: name.to_owned(),
            source: format!("{prelude}{cuda_src}"),
            collective: false,
        }
    }

    /// A kernel that uses only NVSHMEM's point-to-point API: [`pgas_codegen::PRELUDE_P2P`]
    /// instead of the whole device API (a third of the compile, docs/jit.md).
    pub(crate) fn point_to_point(cuda_src: &str, name: &str) -> RawKernel {
        RawKernel::with_prelude(pgas_codegen::PRELUDE_P2P, cuda_src, name)
    }

    /// Marks the kernel as needing all blocks resident at once (grid-wide sync, NVSHMEM
    /// collectives): it is then launched cooperatively, after an occupancy check.
    pub fn collective(mut self, yes: bool) -> RawKernel {
        self.collective = yes;
        self
    }

    /// The full source NVRTC compiles.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Compiles and loads the kernel now rather than at its first launch.
    pub fn prewarm(&self, pgas: &Pgas) -> Result<()> {
        self.function(&pgas.jit_target()).map(|_| ())
    }

    /// Launches on the context's stream.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters (nothing checks them), and the kernel must not
    /// access memory it does not own.
    pub unsafe fn launch(
        &self, pgas: &Pgas, cfg: LaunchConfig, args: &mut KernelArgs<'_>,
    ) -> Result<()> {
        // SAFETY: the caller's contract, which is launch_in's.
        unsafe { self.launch_in(&pgas.jit_target(), pgas.stream(), cfg, args) }
    }

    /// Launches on `stream`.
    ///
    /// # Safety
    /// As [`RawKernel::launch`].
    pub unsafe fn launch_on(
        &self, pgas: &Pgas, stream: &CudaStream, cfg: LaunchConfig, args: &mut KernelArgs<'_>,
    ) -> Result<()> {
        // SAFETY: the caller's contract, which is launch_in's; `stream` is of pgas's context.
        unsafe { self.launch_in(&pgas.jit_target(), stream, cfg, args) }
    }

    pub(crate) fn function(&self, target: &Target<'_>) -> Result<Function> {
        let key =
            FnKey::new(KernelId::Raw(self.id), Variant::Plain, &[]).expect("no comptime values");
        match target.jit.lookup(&key) {
            Some(f) => Ok(f),
            None => target.jit.get_or_build(target, key, &|| Source {
                display: self.name.clone(),
                cuda_name: self.name.clone(),
                text: self.source.clone(),
                batchable: false,
            }),
        }
    }

    pub(crate) unsafe fn launch_in(
        &self, target: &Target<'_>, stream: &CudaStream, cfg: LaunchConfig,
        args: &mut KernelArgs<'_>,
    ) -> Result<()> {
        cfg.validate(&self.name)?;
        args.check_raw(&self.name)?;
        let f = self.function(target)?;
        launch_checked_stream(target, f, &self.name, self.collective, &cfg, stream, args)
    }
}
