//! The one path from a launcher to the driver: argument and geometry checks, the function from the
//! JIT (a cache hit, or compile and load), the stream check, then [`super::driver`].

use cudarc::driver::CudaStream;

use super::args::KernelArgs;
use super::config::LaunchConfig;
use crate::context::pgas::Pgas;
use crate::error::{Error, Result};
use crate::jit::module::Function;
use crate::jit::source::spec_source;
use crate::jit::state::{FnKey, KernelId, Target};
use crate::kernel::{KernelSpec, Variant, MAX_COMPTIME};
use crate::launch_cause::LaunchCause;

/// Launches a `#[pgas_kernel]`: what macro-generated launchers call.
///
/// Checks `args` and `comptime` against the spec, finds (or compiles and loads) the
/// specialization, and launches it on `stream` (default: the context's stream); collective
/// kernels go through a cooperative launch after an occupancy check.
pub fn launch(
    pgas: &Pgas, spec: &'static KernelSpec, variant: Variant, comptime: &[i128], cfg: LaunchConfig,
    stream: Option<&CudaStream>, args: &mut KernelArgs<'_>,
) -> Result<()> {
    // Here rather than in `launch_in`: a bare device has no symmetric heap and no teams.
    args.check_handles(pgas)?;
    launch_in(
        &pgas.jit_target(),
        pgas.stream(),
        spec,
        variant,
        comptime,
        cfg,
        stream,
        args,
    )
}

/// [`launch`] on any target (a `Pgas` or a [`super::Bare`] device).
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_in(
    target: &Target<'_>, default_stream: &CudaStream, spec: &'static KernelSpec, variant: Variant,
    comptime: &[i128], cfg: LaunchConfig, stream: Option<&CudaStream>, args: &mut KernelArgs<'_>,
) -> Result<()> {
    // A trace-level span: one relaxed load when nobody listens, on the launch hit path.
    let _span = tracing::trace_span!("pgas.launch", kernel = spec.rust_name).entered();
    args.check(spec, comptime)?;
    cfg.validate(spec.rust_name)?;
    cfg.check_max_threads(spec.rust_name, spec.collective, spec.max_threads)?;
    let stream = stream.unwrap_or(default_stream);
    let f = function(target, spec, variant, comptime, stream)?;
    launch_checked_stream(
        target,
        f,
        spec.rust_name,
        spec.collective,
        &cfg,
        stream,
        args,
    )
}

/// The loaded function of one specialization: a cache hit, or compiled and loaded (never while
/// `stream` is being captured).
fn function(
    target: &Target<'_>, spec: &'static KernelSpec, variant: Variant, comptime: &[i128],
    stream: &CudaStream,
) -> Result<Function> {
    let key = FnKey::new(KernelId::Spec(spec.cuda_name), variant, comptime).ok_or_else(|| {
        Error::launch(
            spec.rust_name,
            LaunchCause::TooManyComptime { max: MAX_COMPTIME },
        )
    })?;
    // A full build that finished in the background replaces its quick one (jit::tiers).
    if target.jit.has_upgrades() {
        target.jit.swap_upgrades(target, stream);
    }
    match target.jit.lookup(&key) {
        Some(f) => Ok(f),
        None => {
            refuse_build_while_capturing(stream, spec.rust_name)?;
            target
                .jit
                .get_or_build(target, key, &|| spec_source(spec, variant, comptime))
        }
    }
}

/// How many thread-block clusters of `cfg`'s shape (`cfg.cluster` blocks of `cfg.block`
/// threads and `cfg.shared_mem_bytes` each) of one specialization can be resident at once on
/// this GPU: the grid of a persistent kernel launched in clusters is this many clusters.
/// Compiles and loads the specialization if it is not yet. An `Err` where the GPU has no
/// clusters (before sm_90) or `cfg` is invalid.
pub fn max_active_clusters(
    pgas: &Pgas, spec: &'static KernelSpec, variant: Variant, comptime: &[i128], cfg: LaunchConfig,
) -> Result<u32> {
    cfg.validate(spec.rust_name)?;
    let target = pgas.jit_target();
    target
        .ctx
        .bind_to_thread()
        .map_err(Error::cuda("making the pgas CUDA context current"))?;
    let f = function(&target, spec, variant, comptime, pgas.stream())?;
    super::driver::max_active_clusters(f, &cfg, pgas.stream())
}

/// Binds the context, checks the stream belongs to it, and launches.
pub(crate) fn launch_checked_stream(
    target: &Target<'_>, f: Function, kernel: &str, collective: bool, cfg: &LaunchConfig,
    stream: &CudaStream, args: &mut KernelArgs<'_>,
) -> Result<()> {
    if stream.context().cu_ctx() != target.ctx.cu_ctx() {
        let cause = LaunchCause::ForeignStream {
            stream_gpu: stream.context().ordinal(),
            pgas_gpu: target.ctx.ordinal(),
        };
        return Err(Error::launch(kernel, cause));
    }
    target
        .ctx
        .bind_to_thread()
        .map_err(Error::cuda("making the pgas CUDA context current"))?;
    let sms = if collective {
        target.jit.device(target.ctx)?.sms
    } else {
        0
    };
    args.launch(f, kernel, collective, sms, cfg, stream)
}

/// A first launch compiles and loads its kernel: `cuModuleLoadData` and NVSHMEM's module init
/// (a synchronous copy to the module's constants) are not allowed while `stream` is being
/// captured into a CUDA graph, and would invalidate the capture. So a kernel must have run once
/// (or been prewarmed) before a launch of it is captured; say so rather than let the driver fail
/// the capture with a bare status.
fn refuse_build_while_capturing(stream: &CudaStream, kernel: &str) -> Result<()> {
    let status = stream
        .capture_status()
        .map_err(Error::cuda("querying the stream's capture status"))?;
    if status == cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
        Ok(())
    } else {
        Err(Error::launch(kernel, LaunchCause::BuildWhileCapturing))
    }
}
