//! What `pgas.device.numba` needs from the native side to give Numba-CUDA kernels NVSHMEM's
//! device API: the table of the pgas NVSHMEM library's wrappers (the functions its intrinsics
//! call, one per NVSHMEM row and element type of the kernel language), that library as PTX for
//! Numba's linker (only the wrappers a process's kernels call), and the readying of each module
//! Numba loads (`nvshmemx_culibrary_init`), released again before NVSHMEM finalizes.

use std::sync::{Mutex, OnceLock};

use pgas_runtime::jit::disk::DiskCache;
use pgas_runtime::jit::foreign::device_wrappers;
use pgas_runtime::jit::Toolchain;
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::state::current;

/// The toolchain and disk cache, found once per process (discovery may start python3).
fn toolchain() -> PyResult<&'static (Toolchain, Option<DiskCache>)> {
    static FOUND: OnceLock<(Toolchain, Option<DiskCache>)> = OnceLock::new();
    static FINDING: Mutex<()> = Mutex::new(());
    if let Some(found) = FOUND.get() {
        return Ok(found);
    }
    let _one = FINDING.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(found) = FOUND.get() {
        return Ok(found);
    }
    let tc = Toolchain::discover().map_err(to_py)?;
    let disk = DiskCache::dir_from_env().and_then(DiskCache::open_or_warn);
    Ok(FOUND.get_or_init(|| (tc, disk)))
}

/// Every wrapper of the library: `(name, C return type, [C parameter types], [what each
/// parameter is])`, the name being `pgas_nv_<row>_<T>` (rows and element types of docs/dsl.md's
/// point-to-point and barrier intrinsics) and each parameter the row's argument `"0"`, `"1"`, ..
/// or the element count `"n"`.
#[pyfunction]
pub(crate) fn _device_wrappers() -> Vec<(String, String, Vec<String>, Vec<String>)> {
    device_wrappers()
        .into_iter()
        .map(|w| {
            let params = w
                .params
                .iter()
                .map(|p| {
                    p.rsplit_once(' ')
                        .map_or(p.as_str(), |(ty, _)| ty)
                        .trim()
                        .to_owned()
                })
                .collect();
            (w.name, w.ret, params, w.keys)
        })
        .collect()
}

/// The library of the wrappers named in `wrappers` and NVSHMEM's device state, as relocatable
/// PTX for compute capability `arch` (`(major, minor)`), compiled by NVRTC against NVSHMEM's
/// headers and kept in pgas's kernel cache. Needs no GPU and no `init`.
#[pyfunction]
pub(crate) fn _device_library_ptx(
    py: Python<'_>, wrappers: Vec<String>, arch: (u32, u32),
) -> PyResult<String> {
    let (tc, disk) = toolchain()?;
    let names: Vec<&str> = wrappers.iter().map(String::as_str).collect();
    py.detach(|| tc.device_library_ptx(disk.as_ref(), arch, &names))
        .map_err(to_py)
}

/// Readies a `CUlibrary` Numba loaded (its image links the library) for NVSHMEM. Needs `init`.
#[pyfunction]
pub(crate) fn _culibrary_init(library: usize) -> PyResult<()> {
    let state = current()?;
    let pgas = state.pgas()?;
    // SAFETY: Numba's setup callback passes the handle of the library it just loaded, whose
    // image links the pgas library (pgas.device.numba adds it to every kernel that calls it).
    unsafe { pgas.init_foreign_library(library as *mut _) }.map_err(to_py)?;
    state.foreign_readied(library);
    Ok(())
}

/// Releases a library `_culibrary_init` readied, before Numba unloads it; nothing after
/// `finalize` (which released it).
#[pyfunction]
pub(crate) fn _culibrary_finalize(library: usize) -> PyResult<()> {
    let Ok(state) = current() else {
        return Ok(());
    };
    state.foreign_release(library)
}

/// Adds the functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_device_wrappers, m)?)?;
    m.add_function(wrap_pyfunction!(_device_library_ptx, m)?)?;
    m.add_function(wrap_pyfunction!(_culibrary_init, m)?)?;
    m.add_function(wrap_pyfunction!(_culibrary_finalize, m)?)?;
    Ok(())
}
