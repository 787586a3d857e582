//! The driver calls that launch a loaded function (plain, cooperative or in clusters), and the
//! attribute and occupancy reads they need. A block the function cannot run is diagnosed
//! (`fit.rs`) before the driver would refuse it.

use std::ffi::c_void;

use cudarc::driver::sys::{self, CUdevice_attribute as DevAttr, CUfunction_attribute as FnAttr};
use cudarc::driver::{result, CudaContext, CudaStream};

use super::config::LaunchConfig;
use super::fit::{diagnose_block, BlockLimits, ALWAYS_FITS_THREADS};
use crate::error::{Error, Result};
use crate::jit::module::Function;
use crate::launch_cause::LaunchCause;

/// The limits [`diagnose_block`] needs, read from `f` and the device of `ctx` (current).
fn block_limits(f: Function, ctx: &CudaContext) -> Result<BlockLimits> {
    let context = "reading a kernel's resource limits (cuFuncGetAttribute, cuDeviceGetAttribute)";
    // SAFETY: f is a live function of the current context.
    let func = |a| unsafe { result::function::get_function_attribute(f.raw(), a) };
    let dev = |a| ctx.attribute(a);
    let read = || -> std::result::Result<BlockLimits, cudarc::driver::DriverError> {
        let n = |v: i32| v.max(0) as u32;
        Ok(BlockLimits {
            fn_max_threads: n(func(FnAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?),
            regs_per_thread: n(func(FnAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)?),
            static_shared: n(func(FnAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?),
            max_dynamic_shared: n(func(
                FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            )?),
            regs_per_sm: n(dev(
                DevAttr::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
            )?)
            .min(n(dev(
                DevAttr::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
            )?)),
            shared_optin: n(dev(
                DevAttr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?),
            threads_per_sm: n(dev(
                DevAttr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
            )?),
        })
    };
    read().map_err(Error::cuda(context))
}

/// The error for a launch of `f` whose block does not fit (slow path: reads the limits).
fn block_error(
    f: Function, kernel: &str, collective: bool, cfg: &LaunchConfig, ctx: &CudaContext,
) -> Error {
    match block_limits(f, ctx) {
        Ok(limits) => diagnose_block(cfg.block_threads() as u32, cfg.shared_mem_bytes, &limits)
            .into_error(kernel, collective),
        Err(e) => e,
    }
}

/// Whether a plain launch of `f` with `cfg`'s block fits, checked as the driver will: free for
/// blocks of at most [`ALWAYS_FITS_THREADS`] with no dynamic shared memory, else one attribute
/// read per limit in question.
fn plain_block_fits(f: Function, cfg: &LaunchConfig) -> Result<bool> {
    let attr = |a| {
        // SAFETY: f is a live function of the current context.
        unsafe { result::function::get_function_attribute(f.raw(), a) }
            .map(|v| v.max(0) as u64)
            .map_err(Error::cuda(
                "reading a kernel's limits (cuFuncGetAttribute)",
            ))
    };
    if cfg.block_threads() > ALWAYS_FITS_THREADS
        && cfg.block_threads() > attr(FnAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?
    {
        return Ok(false);
    }
    Ok(cfg.shared_mem_bytes == 0
        || u64::from(cfg.shared_mem_bytes)
            <= attr(FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?)
}

/// Dynamic shared memory a function may use without opting in: 48 KiB on every GPU since sm_70
/// (less its static shared memory).
pub(crate) const DEFAULT_DYNAMIC_SHARED: u32 = 48 * 1024;

/// Lets `f` use more than [`DEFAULT_DYNAMIC_SHARED`] bytes of dynamic shared memory when a launch
/// asks for `bytes`: raises `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` to all the device
/// gives a block (`MAX_SHARED_MEMORY_PER_BLOCK_OPTIN` less the function's static shared memory),
/// once per function, so that a request over the device's limit is then diagnosed against that
/// limit, not against 48 KiB.
fn allow_dynamic_shared(f: Function, bytes: u32, ctx: &CudaContext) -> Result<()> {
    let context = "allowing more than 48 KiB of dynamic shared memory (cuFuncSetAttribute)";
    // SAFETY: f is a live function of the current context.
    let get = |a| unsafe { result::function::get_function_attribute(f.raw(), a) };
    let allowed = get(FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
        .map_err(Error::cuda(context))?;
    if i64::from(bytes) <= i64::from(allowed) {
        return Ok(());
    }
    let optin = ctx
        .attribute(DevAttr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        .map_err(Error::cuda(context))?;
    let static_bytes =
        get(FnAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES).map_err(Error::cuda(context))?;
    let max = optin.saturating_sub(static_bytes);
    if max > allowed {
        // SAFETY: f is a live function of the current context; `max` is what the device allows.
        unsafe {
            result::function::set_function_attribute(
                f.raw(),
                FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                max,
            )
        }
        .map_err(Error::cuda(context))?;
    }
    Ok(())
}

/// Whether this process shares its GPU with others under CUDA MPS, on a share of its SMs
/// (`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` below 100, which `pgas-run --share-gpus` sets and NVSHMEM
/// needs for PEs sharing a GPU). Such a process sees its share's SMs, and the occupancy query
/// answers as for a GPU of its own; but cooperative grids that filled every SM of each share
/// never finished with 4 PEs on one H200, at 25% and at 20% each, where a block an SM of the
/// share ran (`docs/runtime.md`, "Several ranks on one GPU"). So there a collective grid counts
/// one block an SM: a larger one is [`Error::CollectiveGrid`], not a hang.
fn mps_share() -> bool {
    static SHARE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SHARE.get_or_init(|| {
        partial_share(
            std::env::var("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
                .ok()
                .as_deref(),
        )
    })
}

/// Whether a `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` value gives less than the whole GPU.
fn partial_share(value: Option<&str>) -> bool {
    value
        .and_then(|v| v.trim().parse::<f64>().ok())
        .is_some_and(|share| share < 100.0)
}

/// What bounds a collective grid's blocks per SM, as [`Error::CollectiveGrid`] says it.
fn per_sm_bound(mps: bool) -> &'static str {
    if mps {
        "one block an SM where PEs share the GPU under CUDA MPS (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)"
    } else {
        "at this block size and shared memory"
    }
}

/// The largest grid that can be resident at once for `f` at this block size and shared memory
/// (one block an SM where PEs share the GPU, see [`mps_share`]), and its factors (blocks per SM,
/// SMs).
pub(crate) fn max_resident_grid(f: Function, cfg: &LaunchConfig, sms: u32) -> Result<(u64, u32)> {
    // SAFETY: f is a live function of the current context.
    let per_sm = unsafe {
        result::occupancy::max_active_block_per_multiprocessor(
            f.raw(),
            cfg.block_threads() as i32,
            cfg.shared_mem_bytes as usize,
        )
    }
    .map_err(Error::cuda("computing occupancy for a collective launch"))?;
    let per_sm = per_sm.max(0) as u32;
    let per_sm = if mps_share() { per_sm.min(1) } else { per_sm };
    Ok((per_sm as u64 * sms as u64, per_sm))
}

/// Launches `f` on `stream` with `params` (one pointer per ABI parameter); `collective` kernels go
/// through a cooperative launch after checking that the grid fits. A block that does not fit at
/// all is [`Error::BlockDoesNotFit`] on both paths, before the driver is asked to launch.
///
/// # Safety
/// `params` must match the kernel's parameter list, and every pointer in it must stay valid for
/// as long as the kernel runs.
pub(crate) unsafe fn launch_function(
    f: Function, kernel: &str, collective: bool, sms: u32, cfg: &LaunchConfig, stream: &CudaStream,
    params: &mut [*mut c_void],
) -> Result<()> {
    // Before the occupancy and fit checks: both count against the function's allowance.
    if cfg.shared_mem_bytes > DEFAULT_DYNAMIC_SHARED {
        allow_dynamic_shared(f, cfg.shared_mem_bytes, stream.context())?;
    }
    if collective {
        let (max, per_sm) = max_resident_grid(f, cfg, sms)?;
        if per_sm == 0 {
            // No grid fits: the block itself is the problem, so say why rather than "at most 0".
            return Err(block_error(f, kernel, true, cfg, stream.context()));
        }
        if cfg.grid_blocks() > max {
            return Err(Error::CollectiveGrid {
                kernel: kernel.to_owned(),
                requested: cfg.grid_blocks(),
                max,
                per_sm,
                sms,
                bound: per_sm_bound(mps_share()),
            });
        }
        if cfg.cluster_blocks() > 1 {
            // SAFETY: `params` as this function's contract requires.
            return unsafe { launch_clustered(f, kernel, true, cfg, stream, params) };
        }
        // SAFETY: `params` as this function's contract requires; the grid was just checked to be
        // resident at once, which a cooperative launch needs.
        unsafe {
            result::launch_cooperative_kernel(
                f.raw(),
                cfg.grid,
                cfg.block,
                cfg.shared_mem_bytes,
                stream.cu_stream(),
                params,
            )
        }
        .map_err(Error::cuda(
            "launching a kernel cooperatively (cuLaunchCooperativeKernel)",
        ))
    } else {
        if !plain_block_fits(f, cfg)? {
            return Err(block_error(f, kernel, false, cfg, stream.context()));
        }
        if cfg.cluster_blocks() > 1 {
            // SAFETY: `params` as this function's contract requires.
            return unsafe { launch_clustered(f, kernel, false, cfg, stream, params) };
        }
        // SAFETY: `params` as this function's contract requires.
        unsafe {
            result::launch_kernel(
                f.raw(),
                cfg.grid,
                cfg.block,
                cfg.shared_mem_bytes,
                stream.cu_stream(),
                params,
            )
        }
        .map_err(Error::cuda("launching a kernel (cuLaunchKernel)"))
    }
}

/// Launches `f` in thread-block clusters (`cuLaunchKernelEx` with the cluster attribute, and
/// the cooperative one for a collective kernel), after checking that the GPU has clusters and
/// that one cluster of these blocks can be resident at all, which the driver would otherwise
/// answer with a bare `CUDA_ERROR_CLUSTER_OUT_OF_RESOURCES` (or a hang for a cooperative grid).
///
/// # Safety
/// As [`launch_function`].
unsafe fn launch_clustered(
    f: Function, kernel: &str, collective: bool, cfg: &LaunchConfig, stream: &CudaStream,
    params: &mut [*mut c_void],
) -> Result<()> {
    let bad = |cause| Err(Error::launch(kernel, cause));
    let major = stream
        .context()
        .attribute(DevAttr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        .map_err(Error::cuda("reading the compute capability"))?;
    if major < 9 {
        return bad(LaunchCause::ClustersNeedSm90 {
            cluster: cfg.cluster,
            major,
        });
    }
    let mut attrs = cluster_attrs(cfg);
    let config = ex_config(cfg, stream, &mut attrs, collective);
    if active_clusters(f, &config)? == 0 {
        return bad(LaunchCause::ClusterDoesNotFit {
            cluster: cfg.cluster,
            threads: cfg.block_threads(),
            shared_mem_bytes: cfg.shared_mem_bytes,
        });
    }
    // SAFETY: as the caller's contract; `config` and `attrs` outlive the call.
    unsafe { sys::cuLaunchKernelEx(&config, f.raw(), params.as_mut_ptr(), std::ptr::null_mut()) }
        .result()
        .map_err(Error::cuda(
            "launching a kernel in clusters (cuLaunchKernelEx)",
        ))
}

/// The launch attributes of a clustered launch: the cluster's shape, then "cooperative" (used
/// only where [`ex_config`] is told the kernel is collective).
fn cluster_attrs(cfg: &LaunchConfig) -> [sys::CUlaunchAttribute; 2] {
    let mut attrs = [sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        pad: [0; 4],
        value: sys::CUlaunchAttributeValue {
            clusterDim: sys::CUlaunchAttributeValue_union__bindgen_ty_1 {
                x: cfg.cluster.0,
                y: cfg.cluster.1,
                z: cfg.cluster.2,
            },
        },
    }; 2];
    attrs[1].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[1].value = sys::CUlaunchAttributeValue { cooperative: 1 };
    attrs
}

/// `cuLaunchKernelEx`'s configuration for `cfg` on `stream`, pointing at `attrs`.
fn ex_config(
    cfg: &LaunchConfig, stream: &CudaStream, attrs: &mut [sys::CUlaunchAttribute; 2],
    collective: bool,
) -> sys::CUlaunchConfig {
    sys::CUlaunchConfig {
        gridDimX: cfg.grid.0,
        gridDimY: cfg.grid.1,
        gridDimZ: cfg.grid.2,
        blockDimX: cfg.block.0,
        blockDimY: cfg.block.1,
        blockDimZ: cfg.block.2,
        sharedMemBytes: cfg.shared_mem_bytes,
        hStream: stream.cu_stream(),
        attrs: attrs.as_mut_ptr(),
        numAttrs: if collective { 2 } else { 1 },
    }
}

/// How many clusters of `config`'s shape can be resident at once (0: not even one).
fn active_clusters(f: Function, config: &sys::CUlaunchConfig) -> Result<u32> {
    let mut clusters: std::ffi::c_int = 0;
    // SAFETY: f is a live function of the current context; `config` and the attributes it
    // points at outlive the call.
    unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, f.raw(), config) }
        .result()
        .map_err(Error::cuda(
            "computing how many clusters fit (cuOccupancyMaxActiveClusters)",
        ))?;
    Ok(clusters.max(0) as u32)
}

/// How many clusters of `cfg.cluster` blocks (each `cfg`'s block and shared memory) of `f` can
/// be resident at once: the grid of a persistent clustered kernel. Raises the function's
/// dynamic shared-memory allowance first, as a launch would.
pub(crate) fn max_active_clusters(
    f: Function, cfg: &LaunchConfig, stream: &CudaStream,
) -> Result<u32> {
    if cfg.shared_mem_bytes > DEFAULT_DYNAMIC_SHARED {
        allow_dynamic_shared(f, cfg.shared_mem_bytes, stream.context())?;
    }
    let mut attrs = cluster_attrs(cfg);
    active_clusters(f, &ex_config(cfg, stream, &mut attrs, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_below_the_whole_gpu_bounds_collective_grids_and_says_so() {
        assert!(partial_share(Some("25")));
        assert!(partial_share(Some(" 33.3 ")));
        assert!(!partial_share(Some("100")));
        assert!(!partial_share(Some("lots")));
        assert!(!partial_share(None));
        assert!(per_sm_bound(true).contains("CUDA MPS"));
        assert!(per_sm_bound(false).contains("block size"));
    }
}
