//! What `pgas info` prints: the versions of pgas and of what it finds on this machine, without
//! initializing anything (so it works on a machine without a GPU, and before `init`). For what is
//! missing and how to fix it, `pgas doctor`.

use std::fmt;
use std::path::PathBuf;

use crate::jit::disk::DiskCache;
use crate::jit::Toolchain;
use crate::nvshmem::{self, Nvshmem};

/// The pgas version (the runtime crate's, which the facade shares).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where the NVSHMEM host library was found, its version (major, minor, patch) and the
/// OpenSHMEM spec version it implements (major, minor).
pub type NvshmemFound = (PathBuf, (u32, u32, u32), (u32, u32));

/// Versions and places, each `Err` with the reason when it cannot be found.
#[derive(Debug)]
pub struct Info {
    /// [`VERSION`].
    pub pgas: &'static str,
    /// The NVSHMEM host library: path, library version, OpenSHMEM spec version.
    pub nvshmem: Result<NvshmemFound, String>,
    /// NVRTC's version and the CUDA root it was found in.
    pub nvrtc: Result<((i32, i32), PathBuf), String>,
    /// The CUDA driver's version (`cuDriverGetVersion`, e.g. 13000).
    pub driver: Result<i32, String>,
    /// The kernel cache directory, or `None` under `PGAS_CACHE=off`.
    pub cache_dir: Option<PathBuf>,
}

/// Gathers [`Info`] (loads NVSHMEM's host library and NVRTC, initializes neither).
pub fn info() -> Info {
    let nvshmem = nvshmem::find()
        .and_then(|install| Nvshmem::open(&install.host_library()))
        .map(|nv| (nv.path().to_path_buf(), nv.version(), nv.spec_version()))
        .map_err(|e| e.to_string());
    let nvrtc = Toolchain::discover()
        .map(|tc| (tc.nvrtc_version(), tc.cuda().root.clone()))
        .map_err(|e| e.to_string());
    Info {
        pgas: VERSION,
        nvshmem,
        nvrtc,
        driver: driver_version(),
        cache_dir: DiskCache::dir_from_env(),
    }
}

fn driver_version() -> Result<i32, String> {
    // SAFETY: only probes dlopen; cudarc panics on a missing driver, so check first.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("no CUDA driver (libcuda.so.1) on this machine".to_owned());
    }
    let mut v = 0;
    // SAFETY: the driver is present; cuDriverGetVersion needs no cuInit.
    let status = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    if status == cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        Ok(v)
    } else {
        Err(format!("cuDriverGetVersion failed: {status:?}"))
    }
}

impl fmt::Display for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "pgas {}", self.pgas)?;
        match &self.nvshmem {
            Ok((path, (a, b, c), (sa, sb))) => writeln!(
                f,
                "NVSHMEM {a}.{b}.{c} (OpenSHMEM {sa}.{sb}) at {}",
                path.display()
            )?,
            Err(e) => writeln!(f, "NVSHMEM: not found: {e}")?,
        }
        match &self.nvrtc {
            Ok(((a, b), root)) => writeln!(f, "NVRTC {a}.{b} in {}", root.display())?,
            Err(e) => writeln!(f, "NVRTC: not found: {e}")?,
        }
        match &self.driver {
            Ok(v) => writeln!(f, "CUDA driver {}.{}", v / 1000, (v % 1000) / 10)?,
            Err(e) => writeln!(f, "CUDA driver: {e}")?,
        }
        match &self.cache_dir {
            Some(d) => writeln!(f, "kernel cache {}", d.display()),
            None => writeln!(f, "kernel cache off (PGAS_CACHE=off)"),
        }
    }
}
