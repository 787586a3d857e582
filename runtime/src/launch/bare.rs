//! A GPU without NVSHMEM, for the JIT's own GPU tests and benchmarks: it compiles, caches and
//! launches exactly like a `Pgas`, but skips `nvshmemx_cumodule_init`, so kernels that call
//! NVSHMEM must not run on it.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use super::args::KernelArgs;
use super::config::LaunchConfig;
use super::entry::launch_in;
use super::raw::RawKernel;
use crate::error::{Error, Result};
use crate::jit::state::{JitState, Target};
use crate::kernel::{KernelSpec, Variant};

/// One GPU's context and stream with its own [`JitState`], and no NVSHMEM.
#[doc(hidden)]
pub struct Bare {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    jit: JitState,
}

impl Bare {
    /// Opens GPU `ordinal`. Fails cleanly where there is no CUDA driver.
    pub fn new(ordinal: usize) -> Result<Bare> {
        // SAFETY: only probes dlopen; cudarc panics on a missing driver, so check first.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(Error::NoCudaDriver);
        }
        let ctx = CudaContext::new(ordinal).map_err(Error::cuda("opening the GPU"))?;
        let stream = ctx.default_stream();
        Ok(Bare {
            ctx,
            stream,
            jit: JitState::new(),
        })
    }

    /// The CUDA context.
    pub fn cuda(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The default stream launches go to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub(crate) fn target(&self) -> Target<'_> {
        Target {
            ctx: &self.ctx,
            jit: &self.jit,
            nvshmem: None,
            node_pes: 1,
        }
    }

    /// [`super::launch`] on this device.
    pub fn launch(
        &self, spec: &'static KernelSpec, variant: Variant, comptime: &[i128], cfg: LaunchConfig,
        args: &mut KernelArgs<'_>,
    ) -> Result<()> {
        launch_in(
            &self.target(),
            &self.stream,
            spec,
            variant,
            comptime,
            cfg,
            None,
            args,
        )
    }

    /// [`Bare::launch`] on `stream` (a stream of this device's context).
    pub fn launch_on(
        &self, stream: &CudaStream, spec: &'static KernelSpec, variant: Variant, comptime: &[i128],
        cfg: LaunchConfig, args: &mut KernelArgs<'_>,
    ) -> Result<()> {
        launch_in(
            &self.target(),
            &self.stream,
            spec,
            variant,
            comptime,
            cfg,
            Some(stream),
            args,
        )
    }

    /// [`RawKernel::launch`] on this device.
    ///
    /// # Safety
    /// As [`RawKernel::launch`].
    pub unsafe fn launch_raw(
        &self, k: &RawKernel, cfg: LaunchConfig, args: &mut KernelArgs<'_>,
    ) -> Result<()> {
        // SAFETY: the caller's contract, which is launch_in's; the stream is this device's.
        unsafe { k.launch_in(&self.target(), &self.stream, cfg, args) }
    }

    /// The loaded function of `k` (compiling it if needed), for comparing against bare driver
    /// launches.
    pub fn function_handle(&self, k: &RawKernel) -> Result<cudarc::driver::sys::CUfunction> {
        k.function(&self.target()).map(|f| f.raw())
    }

    /// Compiles and loads `k` now.
    pub fn prewarm_raw(&self, k: &RawKernel) -> Result<()> {
        k.function(&self.target()).map(|_| ())
    }
}
