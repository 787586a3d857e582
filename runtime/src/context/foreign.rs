//! Kernels another compiler loads (Numba-CUDA's, linked with the pgas NVSHMEM library that
//! [`crate::jit::Toolchain::device_library_ptx`] makes): each loaded library is readied for
//! NVSHMEM before its first launch and released before it is unloaded or NVSHMEM finalizes.

use std::ffi::c_void;

use super::pgas::Pgas;
use crate::error::Result;
use crate::nvshmem::Nvshmem;

/// What a failed readying means for the caller.
const HINT: &str = "the library must link the pgas NVSHMEM library (pgas.device.numba does this) \
                    and be loaded in this process's CUDA context";

impl Pgas {
    /// Readies a CUDA library (`CUlibrary`) that another compiler loaded for NVSHMEM
    /// (`nvshmemx_culibrary_init`): fills in the NVSHMEM device state its image carries.
    ///
    /// # Safety
    /// `library` is a live `CUlibrary` of this process whose image links the pgas NVSHMEM
    /// library (so it defines NVSHMEM's device state).
    pub unsafe fn init_foreign_library(&self, library: *mut c_void) -> Result<()> {
        self.inner.bind()?;
        // SAFETY: the caller's contract; NVSHMEM is initialized while a Pgas exists.
        let st = unsafe { self.nvshmem().raw().nvshmemx_culibrary_init(library.cast()) };
        Nvshmem::check(st, "nvshmemx_culibrary_init", HINT)
    }

    /// Releases a library readied by [`Pgas::init_foreign_library`]
    /// (`nvshmemx_culibrary_finalize`), before it is unloaded.
    ///
    /// # Safety
    /// `library` was readied by [`Pgas::init_foreign_library`] and is still loaded.
    pub unsafe fn finalize_foreign_library(&self, library: *mut c_void) -> Result<()> {
        self.inner.bind()?;
        // SAFETY: the caller's contract.
        let st = unsafe {
            self.nvshmem()
                .raw()
                .nvshmemx_culibrary_finalize(library.cast())
        };
        Nvshmem::check(st, "nvshmemx_culibrary_finalize", HINT)
    }
}
