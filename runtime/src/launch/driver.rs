//! Launch geometry, its checks, and the driver calls that launch a loaded function (plain or
//! cooperative). A block the function cannot run (too many registers for its size, too much
//! shared memory, more threads than its bound) is diagnosed here, before the driver would refuse
//! it, by [`diagnose_block`].

use std::ffi::c_void;

use cudarc::driver::sys::{self, CUdevice_attribute as DevAttr, CUfunction_attribute as FnAttr};
use cudarc::driver::{result, CudaContext, CudaStream};

use crate::error::{Error, Result};
use crate::jit::module::Function;
use crate::launch_cause::LaunchCause;

/// Grid and block dimensions of a launch, its dynamic shared memory and its thread-block
/// clusters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    /// Blocks per thread-block cluster in x, y, z (sm_90 and later); `(1, 1, 1)`: no clusters.
    pub cluster: (u32, u32, u32),
}

/// The most blocks a cluster may have on every GPU that has clusters (CUDA's portable size).
pub const MAX_CLUSTER_BLOCKS: u64 = 8;

impl LaunchConfig {
    /// A 1-D launch of `grid_x` blocks of `block_x` threads.
    pub const fn blocks(grid_x: u32, block_x: u32) -> LaunchConfig {
        LaunchConfig::dims((grid_x, 1, 1), (block_x, 1, 1))
    }

    /// A 2-D or 3-D launch (unused dimensions are 1).
    pub const fn dims(grid: (u32, u32, u32), block: (u32, u32, u32)) -> LaunchConfig {
        LaunchConfig {
            grid,
            block,
            shared_mem_bytes: 0,
            cluster: (1, 1, 1),
        }
    }

    /// The same launch in thread-block clusters of `cluster` blocks (x, y, z): the blocks of a
    /// cluster run at once on one GPU processing cluster and may read and write each other's
    /// shared memory (`cluster_peer`), arrive on each other's mbarriers and receive multicast
    /// copies (`tma_load_2d_multicast`). Each dimension must divide the grid's, and a cluster
    /// has at most [`MAX_CLUSTER_BLOCKS`] blocks; needs sm_90 or later.
    pub const fn with_cluster(self, cluster: (u32, u32, u32)) -> LaunchConfig {
        LaunchConfig { cluster, ..self }
    }

    /// Blocks per cluster.
    pub fn cluster_blocks(&self) -> u64 {
        self.cluster.0 as u64 * self.cluster.1 as u64 * self.cluster.2 as u64
    }

    /// The same launch with `bytes` of dynamic shared memory per block.
    pub const fn with_shared_mem(self, bytes: u32) -> LaunchConfig {
        LaunchConfig {
            shared_mem_bytes: bytes,
            ..self
        }
    }

    /// Threads per block.
    pub fn block_threads(&self) -> u64 {
        self.block.0 as u64 * self.block.1 as u64 * self.block.2 as u64
    }

    /// Blocks in the grid.
    pub fn grid_blocks(&self) -> u64 {
        self.grid.0 as u64 * self.grid.1 as u64 * self.grid.2 as u64
    }

    /// Checks the limits every CUDA device shares, so a bad configuration is a clear error
    /// rather than the driver's `CUDA_ERROR_INVALID_VALUE`.
    pub fn validate(&self, kernel: &str) -> Result<()> {
        let bad = |cause| Err(Error::launch(kernel, cause));
        let (grid, block, cluster) = (self.grid, self.block, self.cluster);
        let (g, b, c) = (grid, block, cluster);
        if g.0 == 0 || g.1 == 0 || g.2 == 0 || b.0 == 0 || b.1 == 0 || b.2 == 0 {
            return bad(LaunchCause::ZeroDimension { grid, block });
        }
        if self.block_threads() > 1024 || b.2 > 64 {
            let threads = self.block_threads();
            return bad(LaunchCause::BlockTooLarge { block, threads });
        }
        if g.0 > i32::MAX as u32 || g.1 > 65535 || g.2 > 65535 {
            return bad(LaunchCause::GridTooLarge { grid });
        }
        if c.0 == 0 || c.1 == 0 || c.2 == 0 {
            return bad(LaunchCause::ZeroClusterDimension { cluster });
        }
        if self.cluster_blocks() > MAX_CLUSTER_BLOCKS {
            return bad(LaunchCause::ClusterTooLarge {
                cluster,
                blocks: self.cluster_blocks(),
                max: MAX_CLUSTER_BLOCKS,
            });
        }
        if g.0 % c.0 != 0 || g.1 % c.1 != 0 || g.2 % c.2 != 0 {
            return bad(LaunchCause::ClusterDoesNotDivideGrid { cluster, grid });
        }
        Ok(())
    }

    /// Checks the block against the kernel's declared `max_threads` (after [`Self::validate`]),
    /// before anything is compiled: the driver would refuse the launch, and NVRTC may have
    /// given the kernel more registers than a larger block can have.
    pub(crate) fn check_max_threads(
        &self,
        kernel: &str,
        collective: bool,
        max_threads: Option<u32>,
    ) -> Result<()> {
        match max_threads {
            Some(bound) if self.block_threads() > u64::from(bound) => Err(BlockDiagnosis {
                threads: self.block_threads() as u32,
                cause: BlockCause::Bound { bound },
                max_threads: bound,
            }
            .into_error(kernel, collective)),
            _ => Ok(()),
        }
    }
}

/// Blocks of at most this many threads never run out of registers on the GPUs NVSHMEM supports
/// (sm_70 and later: 65536 registers per SM and per block): a thread uses at most 255 registers,
/// allocated as 256, so a warp takes 8192 and 8 warps fit. A plain launch this small with no
/// dynamic shared memory therefore needs no attribute read (the common, cheap case).
const ALWAYS_FITS_THREADS: u64 = 256;

/// Registers are allocated to a warp in units of 256, so to a thread in units of 8.
const REGS_PER_THREAD_UNIT: u32 = 256 / 32;

/// What the driver reports about a function and its GPU, for [`diagnose_block`]. Read only when
/// a block does not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockLimits {
    /// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`: the largest block the function can launch,
    /// given its registers and its `__launch_bounds__`.
    pub fn_max_threads: u32,
    /// `CU_FUNC_ATTRIBUTE_NUM_REGS`: registers per thread.
    pub regs_per_thread: u32,
    /// `CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`: static shared memory per block.
    pub static_shared: u32,
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`: the most dynamic shared memory a launch
    /// of the function may ask for.
    pub max_dynamic_shared: u32,
    /// The registers one block may use: the smaller of `MAX_REGISTERS_PER_MULTIPROCESSOR` and
    /// `MAX_REGISTERS_PER_BLOCK`.
    pub regs_per_sm: u32,
    /// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`: shared memory per block for a
    /// function that opts in (pgas opts in when a launch asks for more than
    /// [`DEFAULT_DYNAMIC_SHARED`]).
    pub shared_optin: u32,
    /// `CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR`.
    pub threads_per_sm: u32,
}

/// Why a block does not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockCause {
    /// More threads than the kernel is compiled for (`max_threads`, `__launch_bounds__`).
    Bound { bound: u32 },
    /// More threads than an SM runs at once.
    ThreadsPerSm { per_sm: u32 },
    /// More registers than an SM has: `per_thread` as the kernel uses them, `allocated` as the
    /// SM hands them out (whole warps, whole allocation units).
    Registers {
        per_thread: u32,
        allocated: u32,
        per_sm: u32,
    },
    /// More dynamic shared memory than the function may use per block.
    SharedMemory {
        static_bytes: u32,
        dynamic_bytes: u32,
        max_dynamic: u32,
        optin: u32,
    },
    /// The driver fits no block, and none of the above explains why.
    Unexplained {
        regs_per_thread: u32,
        static_bytes: u32,
    },
}

/// A block that does not fit: why, and the largest one that does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockDiagnosis {
    /// Threads per block asked for.
    pub threads: u32,
    pub cause: BlockCause,
    /// The largest block (threads) that fits; 0 when no block size does (shared memory).
    pub max_threads: u32,
}

/// Why blocks of `threads` threads with `dynamic_shared` bytes of dynamic shared memory do not
/// fit, from the function's and device's `limits`. Pure: both launch paths read the limits and
/// call this once they know (occupancy 0, or a failed attribute check) that the block does not
/// fit.
pub(crate) fn diagnose_block(
    threads: u32,
    dynamic_shared: u32,
    limits: &BlockLimits,
) -> BlockDiagnosis {
    let l = limits;
    let fits = l.fn_max_threads.min(l.threads_per_sm);
    let diagnosis = |cause, max_threads| BlockDiagnosis {
        threads,
        cause,
        max_threads,
    };
    if threads > l.threads_per_sm {
        return diagnosis(
            BlockCause::ThreadsPerSm {
                per_sm: l.threads_per_sm,
            },
            fits,
        );
    }
    if threads > l.fn_max_threads {
        let allocated = l.regs_per_thread.div_ceil(REGS_PER_THREAD_UNIT) * REGS_PER_THREAD_UNIT;
        // The driver's own limit is the truth; registers explain it when they overflow the SM,
        // else the function carries a smaller `__launch_bounds__`.
        let cause =
            if u64::from(allocated) * u64::from(whole_warps(threads)) > u64::from(l.regs_per_sm) {
                BlockCause::Registers {
                    per_thread: l.regs_per_thread,
                    allocated,
                    per_sm: l.regs_per_sm,
                }
            } else {
                BlockCause::Bound {
                    bound: l.fn_max_threads,
                }
            };
        return diagnosis(cause, fits);
    }
    if dynamic_shared > l.max_dynamic_shared {
        let cause = BlockCause::SharedMemory {
            static_bytes: l.static_shared,
            dynamic_bytes: dynamic_shared,
            max_dynamic: l.max_dynamic_shared,
            optin: l.shared_optin,
        };
        return diagnosis(cause, 0);
    }
    diagnosis(
        BlockCause::Unexplained {
            regs_per_thread: l.regs_per_thread,
            static_bytes: l.static_shared,
        },
        fits,
    )
}

/// `threads` rounded up to whole warps: what registers are allocated for.
fn whole_warps(threads: u32) -> u32 {
    threads.div_ceil(32) * 32
}

/// The most registers per thread with which blocks of `threads` fit in `per_sm` registers.
fn register_budget(threads: u32, per_sm: u32) -> u32 {
    let per_warp = per_sm / whole_warps(threads).div_ceil(32).max(1);
    per_warp / (REGS_PER_THREAD_UNIT * 32) * REGS_PER_THREAD_UNIT
}

impl BlockDiagnosis {
    /// The error, in words: the cause with its numbers, the largest block that fits, the fix.
    pub(crate) fn into_error(self, kernel: &str, collective: bool) -> Error {
        let t = self.threads;
        let max = self.max_threads;
        let (cause, fix) = match self.cause {
            BlockCause::Bound { bound } => (
                format!(
                    "it is compiled for blocks of at most {bound} threads (`max_threads = {bound}`, \
                     emitted as `__launch_bounds__({bound})`)"
                ),
                format!("launch at most {bound} threads per block, or raise the bound to {t}"),
            ),
            BlockCause::ThreadsPerSm { per_sm } => (
                format!("an SM of this GPU runs at most {per_sm} threads at once"),
                format!("launch at most {max} threads per block"),
            ),
            BlockCause::Registers {
                per_thread,
                allocated,
                per_sm,
            } => {
                let counted = whole_warps(t);
                let as_allocated = if allocated != per_thread {
                    format!(" (allocated as {allocated})")
                } else {
                    String::new()
                };
                let warps = if counted != t { " (whole warps)" } else { "" };
                (
                    format!(
                        "it uses {per_thread} registers per thread{as_allocated}, and {allocated} x \
                         {counted} threads{warps} = {} registers, more than the {per_sm} of an SM",
                        u64::from(allocated) * u64::from(counted)
                    ),
                    format!(
                        "launch at most {max} threads per block, or declare \
                         `#[pgas_kernel(max_threads = {t})]` (`__launch_bounds__({t})` in CUDA C) \
                         so the compiler keeps the kernel within {} registers per thread",
                        register_budget(t, per_sm)
                    ),
                )
            }
            BlockCause::SharedMemory {
                static_bytes,
                dynamic_bytes,
                max_dynamic,
                optin,
            } => {
                let optin = if u64::from(optin) > u64::from(static_bytes) + u64::from(max_dynamic) {
                    format!(" (this GPU's limit is {optin} bytes per block, static and dynamic together, but this kernel was not allowed more)")
                } else {
                    format!(" (this GPU's limit is {optin} bytes per block, static and dynamic together)")
                };
                (
                    format!(
                        "it asks for {dynamic_bytes} bytes of dynamic shared memory per block \
                         (besides {static_bytes} bytes of static), more than the {max_dynamic} \
                         this kernel may use{optin}"
                    ),
                    format!(
                        "ask for at most {max_dynamic} bytes of dynamic shared memory \
                         (`LaunchConfig::with_shared_mem`)"
                    ),
                )
            }
            BlockCause::Unexplained {
                regs_per_thread,
                static_bytes,
            } => (
                format!(
                    "the driver fits no block of this size on an SM, although its \
                     {regs_per_thread} registers per thread and {static_bytes} bytes of static \
                     shared memory are within the SM's limits"
                ),
                format!("launch at most {max} threads per block"),
            ),
        };
        Error::BlockDoesNotFit {
            kernel: kernel.to_owned(),
            threads: t,
            collective,
            cause,
            max_threads: max,
            fix,
        }
    }
}

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
    f: Function,
    kernel: &str,
    collective: bool,
    cfg: &LaunchConfig,
    ctx: &CudaContext,
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

/// The largest grid that can be resident at once for `f` at this block size and shared memory,
/// and its factors (blocks per SM, SMs).
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
    f: Function,
    kernel: &str,
    collective: bool,
    sms: u32,
    cfg: &LaunchConfig,
    stream: &CudaStream,
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
    f: Function,
    kernel: &str,
    collective: bool,
    cfg: &LaunchConfig,
    stream: &CudaStream,
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
    cfg: &LaunchConfig,
    stream: &CudaStream,
    attrs: &mut [sys::CUlaunchAttribute; 2],
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
    f: Function,
    cfg: &LaunchConfig,
    stream: &CudaStream,
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
    fn geometry_checks() {
        assert!(LaunchConfig::blocks(1, 1024).validate("k").is_ok());
        assert!(LaunchConfig::dims((4, 4, 1), (16, 16, 1))
            .validate("k")
            .is_ok());
        for bad in [
            LaunchConfig::blocks(0, 32),
            LaunchConfig::blocks(1, 0),
            LaunchConfig::blocks(1, 1025),
            LaunchConfig::dims((1, 1, 1), (32, 32, 2)),
            LaunchConfig::dims((1, 70000, 1), (32, 1, 1)),
        ] {
            let err = bad.validate("my_kernel").unwrap_err();
            assert!(err.to_string().contains("my_kernel"), "{err}");
        }
        assert_eq!(
            LaunchConfig::blocks(3, 128)
                .with_shared_mem(64)
                .shared_mem_bytes,
            64
        );
    }

    #[test]
    fn cluster_checks() {
        let ok = LaunchConfig::blocks(132, 384).with_cluster((2, 1, 1));
        assert!(ok.validate("k").is_ok());
        assert_eq!(ok.cluster_blocks(), 2);
        assert_eq!(LaunchConfig::blocks(3, 32).cluster, (1, 1, 1));
        for (bad, says) in [
            (
                LaunchConfig::blocks(131, 384).with_cluster((2, 1, 1)),
                "does not divide grid",
            ),
            (
                LaunchConfig::dims((4, 6, 1), (128, 1, 1)).with_cluster((2, 4, 1)),
                "does not divide grid",
            ),
            (
                LaunchConfig::blocks(32, 128).with_cluster((16, 1, 1)),
                "at most 8",
            ),
            (
                LaunchConfig::blocks(32, 128).with_cluster((0, 1, 1)),
                "zero dimension",
            ),
        ] {
            let err = bad.validate("gemm").unwrap_err().to_string();
            assert!(err.contains(says) && err.contains("gemm"), "{err}");
        }
    }

    /// An H100/H200 (65536 registers, 2048 threads, 227 KiB of opt-in shared memory per SM)
    /// running a function that uses `regs` registers and 1 KiB of static shared memory, which
    /// the driver says launches at most `fn_max` threads per block.
    fn hopper(regs: u32, fn_max: u32) -> BlockLimits {
        BlockLimits {
            fn_max_threads: fn_max,
            regs_per_thread: regs,
            static_shared: 1024,
            max_dynamic_shared: 48 * 1024 - 1024,
            regs_per_sm: 65536,
            shared_optin: 227 * 1024,
            threads_per_sm: 2048,
        }
    }

    #[test]
    fn register_case_names_the_registers_and_the_bound() {
        // Issue 13's kernel (a loop around `reduce_block`) as NVRTC builds it for sm_90: 131
        // registers per thread, so at most 15 warps of 136 allocated registers.
        let d = diagnose_block(1024, 0, &hopper(131, 480));
        assert_eq!(
            d,
            BlockDiagnosis {
                threads: 1024,
                cause: BlockCause::Registers {
                    per_thread: 131,
                    allocated: 136,
                    per_sm: 65536
                },
                max_threads: 480,
            }
        );
        let msg = d.into_error("nvshmem_ar", true).to_string();
        assert_eq!(
            msg,
            "kernel `nvshmem_ar` cannot run blocks of 1024 threads (its collective launch fits 0 \
             blocks per SM, whatever the grid): it uses 131 registers per thread (allocated as \
             136), and 136 x 1024 threads = 139264 registers, more than the 65536 of an SM. The \
             largest block that fits is 480 threads. Fix: launch at most 480 threads per block, \
             or declare `#[pgas_kernel(max_threads = 1024)]` (`__launch_bounds__(1024)` in CUDA \
             C) so the compiler keeps the kernel within 64 registers per thread"
        );
        let Error::BlockDoesNotFit {
            max_threads,
            collective,
            ..
        } = d.into_error("k", false)
        else {
            panic!("not BlockDoesNotFit")
        };
        assert_eq!((max_threads, collective), (480, false));
        // Without the rounding: 128 registers are allocated as they are.
        let msg = diagnose_block(1024, 0, &hopper(128, 512))
            .into_error("k", false)
            .to_string();
        assert!(
            msg.contains("128 registers per thread, and 128 x 1024 threads = 131072 registers"),
            "{msg}"
        );
        assert!(!msg.contains("collective"), "{msg}");
    }

    #[test]
    fn register_case_counts_as_the_sm_allocates() {
        // 85 registers are allocated as 88: 88 x 768 = 67584 > 65536, although 85 x 768 fits.
        let d = diagnose_block(768, 0, &hopper(85, 736));
        let msg = d.into_error("k", false).to_string();
        assert!(
            msg.contains("85 registers per thread (allocated as 88), and 88 x 768 threads = 67584"),
            "{msg}"
        );
        assert!(msg.contains("within 80 registers per thread"), "{msg}");
        // A block that is not whole warps is allocated as whole warps.
        let msg = diagnose_block(1000, 0, &hopper(72, 896))
            .into_error("k", false)
            .to_string();
        assert!(
            msg.contains("72 x 1024 threads (whole warps) = 73728"),
            "{msg}"
        );
    }

    #[test]
    fn shared_memory_case_names_the_bytes() {
        let d = diagnose_block(256, 64 * 1024, &hopper(32, 1024));
        assert_eq!(
            d.cause,
            BlockCause::SharedMemory {
                static_bytes: 1024,
                dynamic_bytes: 65536,
                max_dynamic: 48128,
                optin: 232448
            }
        );
        assert_eq!(d.max_threads, 0);
        let msg = d.into_error("k", true).to_string();
        for part in [
            "65536 bytes of dynamic shared memory per block (besides 1024 bytes of static), more than the 48128",
            "this GPU's limit is 232448 bytes per block, static and dynamic together, but this kernel was not allowed more",
            "No block size fits with this much shared memory",
            "Fix: ask for at most 48128 bytes of dynamic shared memory",
        ] {
            assert!(msg.contains(part), "{part:?} missing from: {msg}");
        }
    }

    #[test]
    fn shared_memory_over_the_device_limit_names_it() {
        // After the opt-in a kernel may use all the device gives a block, less its static
        // shared memory; asking for more names the device's limit.
        let limits = BlockLimits {
            max_dynamic_shared: 232448 - 1024,
            ..hopper(32, 1024)
        };
        let msg = diagnose_block(256, 300 * 1024, &limits)
            .into_error("k", false)
            .to_string();
        for part in [
            "307200 bytes of dynamic shared memory per block (besides 1024 bytes of static), more than the 231424",
            "this GPU's limit is 232448 bytes per block, static and dynamic together)",
            "Fix: ask for at most 231424 bytes of dynamic shared memory",
        ] {
            assert!(msg.contains(part), "{part:?} missing from: {msg}");
        }
    }

    #[test]
    fn threads_case_names_the_bound() {
        // Few registers, yet the function launches at most 256 threads: a compiled bound.
        let d = diagnose_block(512, 0, &hopper(32, 256));
        assert_eq!(d.cause, BlockCause::Bound { bound: 256 });
        assert_eq!(d.max_threads, 256);
        let msg = d.into_error("k", false).to_string();
        assert!(
            msg.contains("compiled for blocks of at most 256 threads (`max_threads = 256`"),
            "{msg}"
        );
        assert!(
            msg.contains("Fix: launch at most 256 threads per block, or raise the bound to 512")
        );

        // The declared bound is checked before anything is compiled.
        let cfg = LaunchConfig::blocks(1, 1024);
        cfg.check_max_threads("k", true, None).unwrap();
        cfg.check_max_threads("k", true, Some(1024)).unwrap();
        let err = cfg.check_max_threads("k", true, Some(256)).unwrap_err();
        let Error::BlockDoesNotFit {
            threads,
            max_threads,
            ..
        } = &err
        else {
            panic!("{err}")
        };
        assert_eq!((*threads, *max_threads), (1024, 256));
        assert!(err
            .to_string()
            .contains("The largest block that fits is 256 threads"));

        // More threads than an SM holds (no current GPU: all hold at least 1024).
        let small_sm = BlockLimits {
            threads_per_sm: 512,
            ..hopper(32, 1024)
        };
        let d = diagnose_block(1024, 0, &small_sm);
        assert_eq!(d.cause, BlockCause::ThreadsPerSm { per_sm: 512 });
        assert_eq!(d.max_threads, 512);
    }

    #[test]
    fn unexplained_still_names_the_numbers() {
        let d = diagnose_block(256, 0, &hopper(40, 1024));
        assert_eq!(
            d.cause,
            BlockCause::Unexplained {
                regs_per_thread: 40,
                static_bytes: 1024
            }
        );
        let msg = d.into_error("k", true).to_string();
        assert!(
            msg.contains("40 registers per thread and 1024 bytes"),
            "{msg}"
        );
        assert!(
            msg.contains("launch at most 1024 threads per block"),
            "{msg}"
        );
    }

    #[test]
    fn small_blocks_always_fit_the_registers() {
        // The reasoning behind skipping the attribute read for small plain launches.
        let most = 255u32.div_ceil(REGS_PER_THREAD_UNIT) * REGS_PER_THREAD_UNIT;
        assert!(u64::from(most) * ALWAYS_FITS_THREADS <= 65536);
        assert_eq!(register_budget(1024, 65536), 64);
        assert_eq!(register_budget(512, 65536), 128);
    }
}
