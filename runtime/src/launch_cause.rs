//! Why a launch was refused: the cause inside [`Error::Launch`](crate::Error::Launch), one
//! variant per check, each message ending in what to do about it.
//!
//! It sits with the error type at the bottom of the runtime, so its fields are plain numbers
//! and names (not the launch layer's types): the limits a message quotes travel with it.

use std::path::PathBuf;

/// A grid, block or cluster shape: `(x, y, z)`.
pub type Dim3 = (u32, u32, u32);

/// The fix for an argument list that does not match the kernel's parameters (only a hand-built
/// `KernelArgs` can get it wrong).
const FIX_ORDER: &str = "Fix: call the kernel's generated `launch` (or `launch_on`), which passes \
                         every argument in order with its declared type";

/// Why a launch was refused, before anything reached the GPU.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchCause {
    // `LaunchConfig::validate`: the limits every CUDA device shares.
    /// A grid or block dimension is zero.
    #[error(
        "grid {grid:?} and block {block:?} must have no zero dimension. Fix: make every \
         dimension at least 1 (LaunchConfig::blocks(n, threads) with n, threads >= 1)"
    )]
    ZeroDimension {
        /// The grid asked for.
        grid: Dim3,
        /// The block asked for.
        block: Dim3,
    },

    /// A block of more than 1024 threads (or more than 64 in z).
    #[error(
        "block {block:?} has {threads} threads; CUDA allows at most 1024 (and z at most 64). Fix: \
         use at most 1024 threads per block and more blocks"
    )]
    BlockTooLarge {
        /// The block asked for.
        block: Dim3,
        /// Its threads.
        threads: u64,
    },

    /// A grid beyond CUDA's (2^31-1, 65535, 65535).
    #[error(
        "grid {grid:?} exceeds CUDA's (2^31-1, 65535, 65535). Fix: loop inside the kernel \
         (a grid-stride loop) over fewer blocks"
    )]
    GridTooLarge {
        /// The grid asked for.
        grid: Dim3,
    },

    /// A cluster dimension is zero.
    #[error(
        "cluster {cluster:?} has a zero dimension. Fix: `with_cluster((x, y, z))` with every \
         dimension at least 1 ((1, 1, 1) for no clusters)"
    )]
    ZeroClusterDimension {
        /// The cluster asked for.
        cluster: Dim3,
    },

    /// A cluster of more blocks than CUDA allows.
    #[error(
        "cluster {cluster:?} has {blocks} blocks; a cluster has at most {max}. Fix: use a \
         smaller cluster"
    )]
    ClusterTooLarge {
        /// The cluster asked for.
        cluster: Dim3,
        /// Its blocks.
        blocks: u64,
        /// The most a cluster may have.
        max: u64,
    },

    /// A grid that is not a whole number of clusters.
    #[error(
        "cluster {cluster:?} does not divide grid {grid:?}: every grid dimension must be a whole \
         number of clusters. Fix: round the grid up to a multiple of the cluster (and skip the \
         extra blocks' work in the kernel), or use a cluster that divides it"
    )]
    ClusterDoesNotDivideGrid {
        /// The cluster asked for.
        cluster: Dim3,
        /// The grid asked for.
        grid: Dim3,
    },

    // The clustered launch: what this GPU can do.
    /// Clusters on a GPU older than compute capability 9.0.
    #[error(
        "a launch in clusters of {cluster:?} blocks needs thread-block clusters (compute \
         capability 9.0 or later), and this GPU is {major}.x. Fix: launch without `with_cluster` \
         here"
    )]
    ClustersNeedSm90 {
        /// The cluster asked for.
        cluster: Dim3,
        /// The GPU's compute capability major version.
        major: i32,
    },

    /// Not even one cluster fits on the GPU at once.
    #[error(
        "a cluster of {cluster:?} blocks of {threads} threads with {shared_mem_bytes} bytes of \
         dynamic shared memory each cannot be resident on this GPU (its blocks must fit on one \
         GPU processing cluster at once). Fix: use a smaller cluster, fewer threads or less \
         shared memory per block"
    )]
    ClusterDoesNotFit {
        /// The cluster asked for.
        cluster: Dim3,
        /// Threads per block.
        threads: u64,
        /// Dynamic shared memory per block.
        shared_mem_bytes: u32,
    },

    // `KernelArgs::check`: the arguments against the kernel's parameter list.
    /// More arguments than `KernelArgs` holds.
    #[error(
        "too many parameters: at most {max_params} ABI parameters (a buffer takes two) and \
         {max_local_buffers} CudaSlice buffers per kernel. Fix: pass fewer parameters, e.g. \
         several buffers as views of one tensor"
    )]
    TooManyParams {
        /// ABI parameters `KernelArgs` holds.
        max_params: usize,
        /// `CudaSlice` buffers `KernelArgs` holds.
        max_local_buffers: usize,
    },

    /// More arguments than `KernelArgs` holds, for a raw kernel (no parameter list).
    #[error(
        "too many parameters: at most {max_params} ABI parameters. Fix: pass fewer parameters, \
         e.g. several buffers as views of one tensor"
    )]
    TooManyRawParams {
        /// ABI parameters `KernelArgs` holds.
        max_params: usize,
    },

    /// Not as many comptime values as the kernel has comptime parameters.
    #[error("expected {expected} comptime values (at most {max}), got {got}. {FIX_ORDER}")]
    ComptimeCount {
        /// The kernel's comptime parameters.
        expected: usize,
        /// The values passed.
        got: usize,
        /// The most a kernel may have.
        max: usize,
    },

    /// Not as many runtime arguments as the kernel has runtime parameters.
    #[error("expected {expected} arguments, got {got}. {FIX_ORDER}")]
    ArgumentCount {
        /// The kernel's runtime parameters.
        expected: usize,
        /// The arguments passed.
        got: usize,
    },

    /// An argument of another kind or type than its parameter.
    #[error("argument {index} (`{name}`) should be {expected}, got {got}. {FIX_ORDER}")]
    ArgumentKind {
        /// Its position among the runtime arguments.
        index: usize,
        /// The parameter's name.
        name: String,
        /// The parameter's kind, as `ParamKind`'s `Debug` writes it.
        expected: String,
        /// What was passed, as the argument list records it.
        got: String,
    },

    /// A tensor map the kernel writes through, built from a read-only tensor.
    #[error(
        "argument {index} (`{name}`) is a tensor map the kernel writes through (tma_store_2d), \
         but it was built from a read-only tensor. Fix: build it with TensorMap::tiled_2d_mut \
         (or tiled_2d_sym_mut, tiled_2d_peer_mut) from a `&mut` tensor"
    )]
    ReadOnlyTensorMap {
        /// Its position among the runtime arguments.
        index: usize,
        /// The parameter's name.
        name: String,
    },

    // The launch path: comptime values, the stream, the local buffers.
    /// More comptime values than a specialization's key holds.
    #[error("more than {max} comptime values. Fix: make some of them runtime parameters")]
    TooManyComptime {
        /// The most a kernel may have.
        max: usize,
    },

    /// A prewarm entry with the wrong number of comptime values.
    #[error("expected {expected} comptime values, got {got}")]
    PrewarmComptimeCount {
        /// The kernel's comptime parameters.
        expected: usize,
        /// The values the entry holds.
        got: usize,
    },

    /// A stream of another CUDA context than the `Pgas`.
    #[error(
        "the stream belongs to another CUDA context (GPU {stream_gpu}) than this Pgas (GPU \
         {pgas_gpu}). Fix: launch on `pgas.stream()` or a stream of this context, \
         `pgas.cuda().new_stream()`"
    )]
    ForeignStream {
        /// The stream's GPU.
        stream_gpu: usize,
        /// The `Pgas`'s GPU.
        pgas_gpu: usize,
    },

    /// A `CudaSlice` of another GPU than the one the kernel runs on.
    #[error(
        "the CudaSlice passed as ABI parameter {slot} belongs to GPU {owner_gpu}'s CUDA context, \
         but the kernel runs on GPU {gpu}. Fix: allocate it on this GPU \
         (`pgas.stream().alloc_zeros(n)`) or copy it there first"
    )]
    ForeignSlice {
        /// Its ABI parameter.
        slot: usize,
        /// The GPU it was allocated on.
        owner_gpu: usize,
        /// The GPU the kernel runs on.
        gpu: usize,
    },

    /// A specialization that is not built yet, launched on a stream being captured.
    #[error(
        "its stream is being captured into a CUDA graph, and this specialization is not \
         compiled and loaded yet (loading a module is not allowed during capture). Fix: launch \
         it once, or `pgas::launch::prewarm` it, before capturing"
    )]
    BuildWhileCapturing,

    // The JIT's own invariants: a failure here is a bug in pgas, not in the launch.
    /// A member of a batch whose source lost its prelude.
    #[error("a batched source does not start with its prelude")]
    BatchWithoutPrelude,

    /// A generated source without the markers of its link-time form.
    #[error("a generated source has no link-time form")]
    NoLinkTimeForm,

    /// A link-time compile without nvJitLink loaded.
    #[error("no nvJitLink for a link-time compile")]
    NoNvJitLink,

    /// A CUDA kernel name that cannot be passed to the driver.
    #[error("the CUDA kernel name contains a NUL byte")]
    NulInKernelName,

    /// The JIT helper process could not read the job list its parent wrote.
    #[error("reading the job list in {}: {error}", dir.display())]
    HelperJobs {
        /// The job directory.
        dir: PathBuf,
        /// What went wrong.
        error: String,
    },

    // Checks outside the runtime (`pgas::gemm`, examples): arguments a kernel does not support.
    /// Arguments outside what a library kernel supports (shapes, tiles, lengths).
    #[error("{0}")]
    Unsupported(String),
}
