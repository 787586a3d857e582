//! The one error type of pgas. Every message says what went wrong and what to do about it.

use crate::launch_cause::LaunchCause;
use std::fmt;
use std::path::PathBuf;

/// `Result` with pgas's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in pgas, one variant per kind of failure.
///
/// `Debug` prints the same message as `Display`, so `fn main() -> pgas::Result<()>` shows the
/// message and its fix rather than a struct dump.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No NVSHMEM install was found; `searched` lists every place looked at, one per line.
    #[error(
        "NVSHMEM was not found. Looked in:\n{searched}\nFix: `pip install nvidia-nvshmem-cu13==3.4.5` \
         (pgas finds the wheel through python3) or set PGAS_NVSHMEM_HOME to an NVSHMEM root that holds \
         include/nvshmem.h and lib/libnvshmem_host.so.3"
    )]
    NvshmemNotFound {
        /// The places looked at and why each did not qualify.
        searched: String,
    },

    /// `libnvshmem_host.so.3` exists but could not be loaded or lacks a symbol pgas needs.
    #[error(
        "cannot load {path}: {reason}. Fix: point PGAS_NVSHMEM_HOME at a complete NVSHMEM 3.x install \
         (`pip install nvidia-nvshmem-cu13==3.4.5`)"
    )]
    NvshmemLoad {
        /// The library file.
        path: PathBuf,
        /// The loader's message.
        reason: String,
    },

    /// The headers' version could not be read.
    #[error("cannot read the NVSHMEM version from {path}: {reason}. Fix: use an NVSHMEM install with intact headers")]
    NvshmemHeader {
        /// `include/non_abi/nvshmem_version.h`.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },

    /// The library and the headers of the NVSHMEM root disagree on the version.
    #[error(
        "NVSHMEM version mismatch: {library} is {}.{}.{} but the headers in {include} are {}.{}.{}. \
         The JIT compiles device code against the headers, so both must come from one install. Fix: set \
         PGAS_NVSHMEM_HOME to one root holding both (e.g. `pip install nvidia-nvshmem-cu13==3.4.5`)",
        library_version.0, library_version.1, library_version.2,
        header_version.0, header_version.1, header_version.2
    )]
    NvshmemVersionMismatch {
        /// The library file.
        library: PathBuf,
        /// Version the library reports.
        library_version: (u32, u32, u32),
        /// The include directory.
        include: PathBuf,
        /// Version the headers declare.
        header_version: (u32, u32, u32),
    },

    /// An NVSHMEM outside the versions pgas supports.
    #[error(
        "NVSHMEM {}.{}.{} at {} is outside the versions pgas supports, 3.4 to 3.8 (its kernels \
         share the device state layout of the NVSHMEM they are compiled against, and other \
         versions are untested). Fix: install a supported one (pip install \
         nvidia-nvshmem-cu13==3.4.5 or ==3.8.0) and point PGAS_NVSHMEM_HOME at it",
        version.0, version.1, version.2, library.display()
    )]
    NvshmemUnsupported {
        /// The library file.
        library: PathBuf,
        /// Its version.
        version: (u32, u32, u32),
    },

    /// An NVSHMEM call returned a failure status.
    #[error("{call} failed (status {status}). {hint}")]
    Nvshmem {
        /// The NVSHMEM function.
        call: &'static str,
        /// Its return value.
        status: i32,
        /// What to check.
        hint: &'static str,
    },

    /// `libcuda.so.1` could not be loaded.
    #[error(
        "the NVIDIA driver (libcuda.so.1) is not available on this machine. pgas needs an NVIDIA GPU and \
         its driver; run `pgas doctor` to see what is missing"
    )]
    NoCudaDriver,

    /// A CUDA driver call failed.
    #[error("CUDA error while {context}: {source}")]
    Cuda {
        /// What pgas was doing.
        context: &'static str,
        /// cudarc's error.
        #[source]
        source: cudarc::driver::DriverError,
    },

    /// The device ordinal asked for does not exist.
    #[error(
        "GPU {requested} was asked for ({why}) but only {count} GPU(s) are visible. Fix: start at most one \
         process per GPU, or pick a device with PgasBuilder::device"
    )]
    NoSuchDevice {
        /// The ordinal asked for.
        requested: usize,
        /// Where that ordinal came from.
        why: String,
        /// How many GPUs CUDA sees.
        count: usize,
    },

    /// `init` was called while a `Pgas` handle is alive.
    #[error(
        "pgas is already initialized in this process. Clone the existing `Pgas` handle (it is cheap) \
         instead of calling init() again"
    )]
    AlreadyInitialized,

    /// `init` was called after the last handle was dropped.
    #[error(
        "pgas was already finalized in this process (the last `Pgas` handle was dropped) and NVSHMEM \
         cannot be initialized twice in one process. Keep one `Pgas` handle alive for the whole program"
    )]
    Finalized,

    /// Bootstrapping the PEs failed.
    #[error("bootstrap through {method} failed: {reason}")]
    Bootstrap {
        /// The bootstrap in use.
        method: &'static str,
        /// What went wrong and what to do.
        reason: String,
    },

    /// The `mpi` bootstrap was asked for in a build without the `mpi` feature.
    #[error(
        "the MPI bootstrap was requested but pgas was built without MPI support. Fix: build with \
         `--features mpi`, or run under `pgas-run`, or set NVSHMEM_BOOTSTRAP=MPI to use NVSHMEM's own"
    )]
    MpiNotEnabled,

    /// The allocation does not fit in the symmetric heap.
    #[error(
        "symmetric allocation of {requested} bytes does not fit: the symmetric heap is {heap} bytes{in_use}. \
         Fix: raise it with PgasBuilder::heap_size(bytes) or the NVSHMEM_SYMMETRIC_SIZE environment variable \
         (e.g. NVSHMEM_SYMMETRIC_SIZE=4G)"
    )]
    HeapExhausted {
        /// Bytes asked for.
        requested: usize,
        /// Heap size in bytes.
        heap: usize,
        /// Empty, or a note that part of the heap is in use.
        in_use: String,
    },

    /// An allocation of zero elements (NVSHMEM has no symmetric address for it).
    #[error("cannot allocate a zero-length symmetric tensor (NVSHMEM has no address for it). Fix: allocate at least one element")]
    EmptyAllocation,

    /// The PEs asked for symmetric allocations of different sizes in one collective `alloc`
    /// (detected by exchanging the sizes before allocating; no memory was allocated on any PE).
    #[error(
        "symmetric allocation sizes differ across PEs: {}. Every PE must allocate the same \
         number of bytes in the same order, or the symmetric heaps drift apart. Fix: call alloc \
         with the same length and element type on every PE (allocate the largest size everywhere \
         and use a view of it where a PE needs less)",
        sizes.iter().enumerate().map(|(pe, b)| format!("PE {pe} asked for {b} bytes")).collect::<Vec<_>>().join(", ")
    )]
    AllocMismatch {
        /// Bytes each PE asked for, by PE number.
        sizes: Vec<u64>,
    },

    /// A range reaches past the end of a tensor, or starts after it ends.
    #[error(
        "range {start}..{end} is out of bounds for a symmetric tensor of length {len}. Fix: keep \
         the range within 0..{len}, start <= end (`tensor.len()` is the length)"
    )]
    OutOfRange {
        /// First index.
        start: usize,
        /// One past the last index.
        end: usize,
        /// Length of the tensor.
        len: usize,
    },

    /// A view of zero elements.
    #[error(
        "the view {start}..{end} is empty; a view must hold at least one element. Fix: use a \
         range with start < end"
    )]
    EmptyView {
        /// First index.
        start: usize,
        /// One past the last index.
        end: usize,
    },

    /// Two buffers that must have one length do not.
    #[error(
        "length mismatch: {what} has {got} elements but {expected} were expected. Fix: pass \
         buffers of matching lengths (a view, `tensor.view(a..b)`, selects part of a tensor)"
    )]
    LengthMismatch {
        /// Which buffer.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The length required.
        expected: usize,
    },

    /// A PE number outside `0..n_pes` (of the team in question).
    #[error(
        "PE {pe} does not exist: there are {n_pes} PEs, numbered 0..{n_pes}. Fix: pass a PE \
         below `pgas.n_pes()` (of the team, for a team's PE numbers), e.g. \
         `(pgas.my_pe() + 1) % pgas.n_pes()`"
    )]
    InvalidPe {
        /// The PE asked for.
        pe: usize,
        /// Number of PEs.
        n_pes: usize,
    },

    /// An option or environment variable has a value pgas cannot use.
    #[error("invalid {name} {value:?}: {reason}")]
    InvalidConfig {
        /// The option or variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// Why it is invalid and what is accepted.
        reason: String,
    },

    /// A region handed to a host call (RMA, atomics, collectives, a kernel launch) that does not
    /// lie wholly inside NVSHMEM's symmetric heap: other PEs cannot address it, and NVSHMEM would
    /// read or write memory it does not own.
    #[error(
        "{what} ({len} elements of {elem} bytes at {ptr:#x}) is not inside NVSHMEM's symmetric \
         heap, so other PEs cannot address it. Fix: pass a SymTensor from Pgas::alloc (or a view \
         of one), or copy the data into one first"
    )]
    NotSymmetric {
        /// Which argument.
        what: &'static str,
        /// Its device address on this PE.
        ptr: u64,
        /// Its length in elements.
        len: usize,
        /// The size of one element in bytes.
        elem: usize,
    },

    /// A region handed to a host call that lies in the symmetric heap but not inside one live
    /// allocation: over a freed tensor, straddling two allocations, or past the end of one (a
    /// broken `unsafe impl SymRegion`, or a raw address kept after its tensor was dropped).
    #[error(
        "{what} ({bytes} bytes at {ptr:#x}) is not inside one live symmetric allocation: it \
         overlaps {overlaps}. Fix: pass a live SymTensor (or a view of one) that holds the whole \
         region; a SymRegion must not outlive the tensor it was made from"
    )]
    NotLive {
        /// Which argument.
        what: &'static str,
        /// Its device address on this PE.
        ptr: u64,
        /// Its size in bytes.
        bytes: u64,
        /// What it overlaps instead ("no live symmetric allocation", or the allocations it
        /// touches with their address ranges).
        overlaps: String,
    },

    /// A team call made on a PE that is not a member of the team.
    #[error(
        "this PE is not a member of team {team}, so it cannot {what}. Fix: call it only on the team's \
         members (Team::my_pe returns None on the others)"
    )]
    NotInTeam {
        /// The raw team handle.
        team: i32,
        /// What was attempted.
        what: &'static str,
    },

    /// A team used after [`crate::Team::destroy`] (any copy of its handle).
    #[error(
        "team {team} was destroyed (Team::destroy), so this PE cannot {what}. Fix: use a team \
         only until it is destroyed; split a new one (Team::split_strided) if it is still needed"
    )]
    TeamDestroyed {
        /// The raw team handle (which NVSHMEM may since have given to another team).
        team: i32,
        /// What was attempted.
        what: &'static str,
    },

    /// A view or facility NVSHMEM does not provide on this system (a multicast view without
    /// NVLink SHARP, a registration with a static heap); `reason` says why and what would enable it.
    #[error("{what} is not available: {reason}")]
    Unavailable {
        /// What was asked for.
        what: &'static str,
        /// Why not, and what would make it available.
        reason: String,
    },

    /// A bounded wait ran out: what was awaited did not happen in time.
    #[error("{what}; gave up after {waited:?}")]
    TimedOut {
        /// What did not happen, and the likely cause.
        what: String,
        /// How long pgas waited.
        waited: std::time::Duration,
    },

    /// A DLPack tensor that pgas cannot take as symmetric memory, or a tensor it cannot export.
    #[error("DLPack: {reason}")]
    Dlpack {
        /// What is wrong with it and what to do.
        reason: String,
    },

    /// An error of the `pgas-run` launcher itself (not of a rank).
    #[error("pgas-run: {0}")]
    Launcher(String),

    /// A rank started by `pgas-run` failed.
    #[error("pgas-run: rank {rank} {status}; the other ranks were stopped")]
    RankFailed {
        /// The first rank that failed.
        rank: usize,
        /// How it ended (`exited with status 3`, `was killed by signal 11 (SIGSEGV)`).
        status: String,
    },

    /// No NVRTC library was found.
    #[error(
        "NVRTC (libnvrtc.so.13) not found; searched: {searched}. Fix: install CUDA 13 (or the \
         nvidia-cuda-nvrtc wheel) and set PGAS_CUDA_HOME to its root"
    )]
    NvrtcMissing {
        /// Every place looked at.
        searched: String,
    },

    /// Headers needed to compile kernels are missing.
    #[error("{what} not found; searched: {searched}. Fix: {hint}")]
    HeadersMissing {
        /// Which headers.
        what: &'static str,
        /// Where they were looked for.
        searched: String,
        /// What to do.
        hint: &'static str,
    },

    /// An NVRTC API call failed outside compilation proper.
    #[error("NVRTC call {call} failed: {detail}")]
    Nvrtc {
        /// The NVRTC function.
        call: &'static str,
        /// NVRTC's description of the status.
        detail: String,
    },

    /// NVRTC cannot compile for the requested GPU architecture.
    #[error(
        "NVRTC cannot compile for compute capability {}.{} (-arch=sm_{}{}): {log}. Fix: use a \
         CUDA whose NVRTC supports this GPU",
        arch.0, arch.1, arch.0, arch.1
    )]
    UnsupportedArch {
        /// The requested compute capability.
        arch: (u32, u32),
        /// What NVRTC supports.
        log: String,
    },

    /// A kernel failed to compile. `location` is the Rust `file:line` of the first error (through
    /// the `#line` directives of generated code).
    #[error(
        "kernel `{kernel}` failed to compile{}:\n{log}",
        location.as_deref().map(|l| format!(" at {l}")).unwrap_or_default()
    )]
    Compile {
        /// The Rust kernel name (and its CUDA symbol).
        kernel: String,
        /// `file:line` of the first error, if the log names one.
        location: Option<String>,
        /// NVRTC's full log.
        log: String,
    },

    /// Several kernels of one prewarm failed to build; each error names its kernel (and, for a
    /// compile error, the Rust line). The kernels not listed were built and loaded.
    #[error(
        "{} kernels failed to build (the others are loaded):\n{}",
        failures.len(),
        failures.iter().map(|e| format!("- {e}")).collect::<Vec<_>>().join("\n")
    )]
    Kernels {
        /// One error per failing kernel, in the order they were asked for.
        failures: Vec<Error>,
    },

    /// The on-disk kernel cache could not be used. [`crate::jit::disk::DiskCache`]'s own methods
    /// return it; the JIT prints it as one warning line and keeps its kernels in memory instead.
    #[error(
        "kernel cache at {dir}: {action} failed: {source}. Fix: point PGAS_CACHE_DIR at a \
         writable directory with free space, or set PGAS_CACHE=off to compile without a disk cache"
    )]
    Cache {
        /// The cache directory.
        dir: PathBuf,
        /// What pgas was doing.
        action: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// `nvshmemx_cumodule_init` failed for a freshly loaded kernel module.
    #[error(
        "nvshmemx_cumodule_init failed for kernel `{kernel}` (status {status}). Fix: check that \
         the kernel was compiled against the same NVSHMEM as the host library (pgas doctor)"
    )]
    ModuleInit {
        /// The Rust kernel name.
        kernel: String,
        /// NVSHMEM's status.
        status: i32,
    },

    /// A tensor map (TMA descriptor) the copy engine cannot use, named by the rule it breaks.
    #[error("cannot build a tensor map: {reason}")]
    TensorMap {
        /// What is wrong, and the limit.
        reason: String,
    },

    /// A kernel that uses sm_90a instructions (`wgmma_*`, TMA) on a GPU that lacks them.
    #[error(
        "kernel `{kernel}` uses Hopper instructions (wgmma, TMA: compiled for sm_90a), but this GPU \
         is compute capability {}.{}. Fix: run it on an H100/H200 (9.0), or use the mma_sync path",
        arch.0, arch.1
    )]
    NeedsSm90a {
        /// The Rust kernel name (or the batch's).
        kernel: String,
        /// The GPU's compute capability.
        arch: (u32, u32),
    },

    /// A launch whose arguments or configuration do not match the kernel.
    #[error("cannot launch kernel `{kernel}`: {cause}")]
    Launch {
        /// The Rust kernel name.
        kernel: String,
        /// What is wrong, and what to do about it.
        cause: LaunchCause,
    },

    /// A kernel that needs all its blocks resident at once was launched with too many blocks
    /// (at least one block fits per SM; when none does, the error is [`Error::BlockDoesNotFit`]).
    #[error(
        "kernel `{kernel}` needs a collective (cooperative) launch, so all its blocks must be \
         resident at once: the grid of {requested} blocks exceeds the largest that fits, {max} \
         ({per_sm} blocks per SM x {sms} SMs, {bound}). Fix: launch at most {max} blocks"
    )]
    CollectiveGrid {
        /// The Rust kernel name.
        kernel: String,
        /// Blocks requested.
        requested: u64,
        /// The largest grid that fits.
        max: u64,
        /// Resident blocks per SM.
        per_sm: u32,
        /// SMs on the device (this process's share of them under CUDA MPS).
        sms: u32,
        /// What bounds the blocks per SM: the block size and shared memory, or a share of the
        /// GPU under CUDA MPS (one block an SM).
        bound: &'static str,
    },

    /// A block of this size (or shared memory) cannot run the kernel on this GPU at all: too many
    /// registers for that many threads, more threads than the kernel's `max_threads`, or too
    /// much shared memory. Reported before the driver would refuse the launch, for plain and
    /// collective launches alike.
    #[error(
        "kernel `{kernel}` cannot run blocks of {threads} threads{}: {cause}. {}. Fix: {fix}",
        if *collective {
            " (its collective launch fits 0 blocks per SM, whatever the grid)"
        } else {
            ""
        },
        largest_block(*max_threads)
    )]
    BlockDoesNotFit {
        /// The Rust kernel name.
        kernel: String,
        /// Threads per block asked for.
        threads: u32,
        /// Whether the launch was collective (cooperative).
        collective: bool,
        /// What does not fit, with its numbers.
        cause: String,
        /// The largest block (threads per block) that fits; 0 when no block size does (too much
        /// shared memory).
        max_threads: u32,
        /// What to change.
        fix: String,
    },

    /// A cuBLAS call (`pgas::ops::cublas`) returned a failure status.
    #[error(
        "{call} failed: {status}. Fix: check the GEMM's shapes and buffers (on this handle's \
         GPU), and that the cuBLAS loaded is CUDA 13's"
    )]
    Cublas {
        /// The cuBLAS function.
        call: &'static str,
        /// cuBLAS's status.
        status: String,
    },

    /// An I/O error, with what pgas was doing.
    #[error("{context}: {source}")]
    Io {
        /// What pgas was doing.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Every message already includes its source's text.
        write!(f, "{self}")
    }
}

/// Lets `?` carry cudarc's errors in user code that mixes pgas with its own CUDA calls
/// (`pgas.stream().clone_htod(..)?` in a function returning `pgas::Result`).
impl From<cudarc::driver::DriverError> for Error {
    fn from(source: cudarc::driver::DriverError) -> Self {
        Error::Cuda {
            context: "a CUDA driver call",
            source,
        }
    }
}

/// The sentence of [`Error::BlockDoesNotFit`] about the largest block.
fn largest_block(max_threads: u32) -> String {
    match max_threads {
        0 => "No block size fits with this much shared memory".to_owned(),
        n => format!("The largest block that fits is {n} threads"),
    }
}

impl Error {
    /// Wraps a cudarc driver error with what pgas was doing (`.map_err(Error::cuda("..."))`).
    pub fn cuda(context: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
        move |source| Error::Cuda { context, source }
    }

    /// Wraps an I/O error with what pgas was doing.
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }

    /// The launch of `kernel` refused for `cause`.
    pub fn launch(kernel: impl Into<String>, cause: LaunchCause) -> Error {
        Error::Launch {
            kernel: kernel.into(),
            cause,
        }
    }
}
