//! Loading `libnvshmem_host.so.3` at run time.

use std::fmt;
use std::path::{Path, PathBuf};

use super::discover::NvshmemInstall;
use super::version::{self, Version};
use crate::error::{Error, Result};
use crate::ffi::NvshmemHost;

/// The loaded NVSHMEM host library: every allowlisted function of [`crate::ffi`], resolved.
pub struct Nvshmem {
    host: NvshmemHost,
    /// `nvshmemx_flush_on_stream`, which NVSHMEM 3.7 added: not in the 3.4.5 headers the
    /// bindings come from, so looked up by name; `None` in older libraries.
    flush_on_stream: Option<FlushOnStream>,
    path: PathBuf,
    version: Version,
    spec_version: (u32, u32),
}

/// `void nvshmemx_flush_on_stream(cudaStream_t)` (NVSHMEM 3.7 and later).
pub(crate) type FlushOnStream = unsafe extern "C" fn(cudarc::driver::sys::CUstream);

impl fmt::Debug for Nvshmem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nvshmem")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("spec_version", &self.spec_version)
            .finish()
    }
}

impl Nvshmem {
    /// Opens the install's host library, resolves every symbol and checks that the library's
    /// version equals the headers'. Needs no GPU.
    pub fn load(install: &NvshmemInstall) -> Result<Self> {
        let nv = Self::open(&install.host_library())?;
        version::check(
            &nv.path,
            nv.version,
            &install.include_dir,
            install.header_version,
        )?;
        version::check_supported(&nv.path, nv.version)?;
        Ok(nv)
    }

    /// Opens a host library without comparing it with any headers.
    pub fn open(path: &Path) -> Result<Self> {
        let load_err = |reason: String| Error::NvshmemLoad {
            path: path.to_path_buf(),
            reason,
        };
        // RTLD_GLOBAL: NVSHMEM's bootstrap and transport plugins, which it dlopens itself,
        // resolve symbols of the host library through the global namespace.
        // SAFETY: loading runs libnvshmem_host's initializers, which only set up the library's
        // own state; `path` names the NVSHMEM host library (discovery picks it by name).
        let lib = unsafe {
            libloading::os::unix::Library::open(
                Some(path),
                libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL,
            )
        }
        .map_err(|e| load_err(e.to_string()))?;
        // SAFETY: NVSHMEM 3.7's `void nvshmemx_flush_on_stream(cudaStream_t)`, whose signature
        // the type states; the pointer is kept with `host`, which keeps the library loaded.
        let flush_on_stream = unsafe { lib.get::<FlushOnStream>(b"nvshmemx_flush_on_stream\0") }
            .ok()
            .map(|f| *f);
        // SAFETY: `lib` is an NVSHMEM 3 host library, whose symbols have the signatures of the
        // headers the bindings were made from (the version is checked against them, see
        // `nvshmem::version`, before pgas calls more than the two version queries below).
        let host =
            unsafe { NvshmemHost::from_library(lib) }.map_err(|e| load_err(e.to_string()))?;
        let (mut major, mut minor, mut patch) = (0, 0, 0);
        // SAFETY: safe to call before init: both only report compile-time constants of the
        // library (OpenSHMEM allows shmem_info_get_version at any time); out-params are locals.
        unsafe { host.nvshmemx_vendor_get_version_info(&mut major, &mut minor, &mut patch) };
        let version = (major as u32, minor as u32, patch as u32);
        let (mut spec_major, mut spec_minor) = (0, 0);
        // SAFETY: as above.
        unsafe { host.nvshmem_info_get_version(&mut spec_major, &mut spec_minor) };
        Ok(Nvshmem {
            host,
            flush_on_stream,
            path: path.to_path_buf(),
            version,
            spec_version: (spec_major as u32, spec_minor as u32),
        })
    }

    /// The library's own version (`nvshmemx_vendor_get_version_info`).
    pub fn version(&self) -> Version {
        self.version
    }

    /// The OpenSHMEM specification version the library implements (`nvshmem_info_get_version`).
    pub fn spec_version(&self) -> (u32, u32) {
        self.spec_version
    }

    /// Whether the library has `nvshmemx_flush_on_stream` (NVSHMEM 3.7 and later).
    pub fn has_flush(&self) -> bool {
        self.flush_on_stream.is_some()
    }

    /// `nvshmemx_flush_on_stream`, where the library has it.
    pub(crate) fn flush_on_stream(&self) -> Option<FlushOnStream> {
        self.flush_on_stream
    }

    /// Path of the loaded library.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The raw function table, for the binding layers inside the crate (memory, RMA, teams,
    /// JIT module init).
    pub(crate) fn raw(&self) -> &NvshmemHost {
        &self.host
    }

    /// Turns an NVSHMEM status code into a `Result`.
    pub(crate) fn check(status: i32, call: &'static str, hint: &'static str) -> Result<()> {
        if status == 0 {
            Ok(())
        } else {
            Err(Error::Nvshmem { call, status, hint })
        }
    }
}

/// The process's NVSHMEM, found and loaded once and never unloaded: by `init`, or earlier by
/// [`crate::bootstrap::UniqueId::new`] (rank 0 makes the id before it initializes). NVSHMEM
/// cannot re-initialize anyway, and unloading it under its plugins or atexit handlers is asking
/// for trouble. A failure is returned and not remembered, so a fixed environment can retry.
pub(crate) fn load_once() -> Result<(&'static Nvshmem, NvshmemInstall)> {
    static LOADED: std::sync::Mutex<Option<(&'static Nvshmem, NvshmemInstall)>> =
        std::sync::Mutex::new(None);
    // A panic while holding the lock leaves either nothing or a complete entry behind.
    let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((nv, install)) = loaded.as_ref() {
        return Ok((nv, install.clone()));
    }
    let install = super::discover::find()?;
    let nv: &'static Nvshmem = Box::leak(Box::new(Nvshmem::load(&install)?));
    *loaded = Some((nv, install.clone()));
    Ok((nv, install))
}
