//! The runtime's error type.
//!
//! Every failure the runtime can see (missing libraries, NVRTC errors, a cache that cannot be
//! written, a launch that does not fit) comes back as an [`Error`] whose message says what to do.

use std::path::PathBuf;

/// Result alias used throughout the runtime.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the runtime.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A CUDA driver call failed.
    #[error("CUDA driver call {call} failed: {source}")]
    Driver {
        call: &'static str,
        #[source]
        source: cudarc::driver::DriverError,
    },

    /// The CUDA driver library (`libcuda.so.1`) could not be loaded.
    #[error(
        "the CUDA driver (libcuda.so.1) could not be loaded: is an NVIDIA driver installed and \
         is this a machine with a GPU?"
    )]
    DriverMissing,

    /// No NVRTC library was found.
    #[error(
        "NVRTC (libnvrtc.so.13) not found; searched: {searched}. Install CUDA 13 (or the \
         nvidia-cuda-nvrtc wheel) and set PGAS_CUDA_HOME to its root"
    )]
    NvrtcMissing { searched: String },

    /// Headers needed to compile kernels are missing.
    #[error("{what} not found; searched: {searched}. {hint}")]
    HeadersMissing {
        what: &'static str,
        searched: String,
        hint: &'static str,
    },

    /// An NVRTC API call failed outside compilation proper.
    #[error("NVRTC call {call} failed: {detail}")]
    Nvrtc { call: &'static str, detail: String },

    /// NVRTC rejected the requested GPU architecture.
    #[error(
        "NVRTC cannot compile for compute capability {}.{} (option -arch=sm_{}{}): {log}",
        arch.0, arch.1, arch.0, arch.1
    )]
    UnsupportedArch { arch: (u32, u32), log: String },

    /// A kernel failed to compile. `location` is the Rust `file:line` of the first error when the
    /// generated source carried `#line` directives.
    #[error(
        "kernel `{kernel}` failed to compile{}:\n{log}",
        location.as_deref().map(|l| format!(" at {l}")).unwrap_or_default()
    )]
    Compile {
        kernel: String,
        location: Option<String>,
        log: String,
    },

    /// The on-disk kernel cache could not be used.
    #[error(
        "kernel cache at {dir}: {action} failed: {source}. Point PGAS_CACHE_DIR at a writable \
         directory with free space, or set PGAS_CACHE=off to compile without a disk cache"
    )]
    Cache {
        dir: PathBuf,
        action: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// `nvshmemx_cumodule_init` failed for a freshly loaded kernel module.
    #[error("nvshmemx_cumodule_init failed for kernel `{kernel}` with status {status}")]
    ModuleInit { kernel: String, status: i32 },

    /// A launch was asked with arguments or a configuration that do not match the kernel.
    #[error("cannot launch kernel `{kernel}`: {reason}")]
    Launch { kernel: String, reason: String },

    /// A kernel that needs all its blocks resident at once was launched with too many blocks.
    #[error(
        "kernel `{kernel}` needs a collective (cooperative) launch, so all its blocks must be \
         resident at once: the grid of {requested} blocks exceeds the largest that fits, {max} \
         ({per_sm} blocks per SM x {sms} SMs at this block size and shared memory); launch at \
         most {max} blocks"
    )]
    CollectiveGrid {
        kernel: String,
        requested: u64,
        max: u64,
        per_sm: u32,
        sms: u32,
    },
}

impl Error {
    /// Wraps a driver error with the name of the call that produced it.
    pub(crate) fn driver(call: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
        move |source| Error::Driver { call, source }
    }
}
