//! Loaded modules: each image is loaded once per context (the kernels of one batch share it),
//! readied for NVSHMEM (`nvshmemx_cumodule_init`), and finalized and unloaded before NVSHMEM
//! finalizes.

use std::ffi::CString;
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{result, sys, CudaContext};

use super::batch::Image;
use super::disk::CacheKey;
use super::source::Source;
use crate::error::{Error, Result};
use crate::launch_cause::LaunchCause;
use crate::nvshmem::Nvshmem;

/// A loaded kernel function.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Function(sys::CUfunction);

// SAFETY: a CUfunction is a driver handle usable from any thread whose current context is the
// one that loaded it; the launch path binds that context first.
unsafe impl Send for Function {}
// SAFETY: as for Send: the handle is immutable, and the driver's calls on it are thread-safe.
unsafe impl Sync for Function {}

impl Function {
    pub(crate) fn raw(self) -> sys::CUfunction {
        self.0
    }
}

/// The NVSHMEM calls a module needs: `nvshmemx_cumodule_init` after loading and
/// `nvshmemx_cumodule_finalize` before unloading (statuses as NVSHMEM returns them, 0 = ok).
pub(crate) trait ModuleHooks: Sync {
    fn cumodule_init(&self, module: sys::CUmodule) -> i32;
    fn cumodule_finalize(&self, module: sys::CUmodule) -> i32;
}

impl ModuleHooks for Nvshmem {
    fn cumodule_init(&self, module: sys::CUmodule) -> i32 {
        // SAFETY: a module just loaded in the current context, NVSHMEM initialized (a Pgas
        // exists); cudarc's and bindgen's CUmodule are the same opaque pointer.
        unsafe { self.raw().nvshmemx_cumodule_init(module.cast()) }
    }

    fn cumodule_finalize(&self, module: sys::CUmodule) -> i32 {
        // SAFETY: as above, for a module about to be unloaded.
        unsafe { self.raw().nvshmemx_cumodule_finalize(module.cast()) }
    }
}

struct Module {
    /// The image it was loaded from: kernels of one batch share it.
    image: CacheKey,
    raw: sys::CUmodule,
    ctx: Arc<CudaContext>,
    nvshmem: bool,
}

// SAFETY: a module handle is used only under the modules mutex, with its context bound.
unsafe impl Send for Module {}

/// The modules a JIT state loaded.
#[derive(Default)]
pub(crate) struct Modules(Mutex<Vec<Module>>);

impl Modules {
    /// How many are loaded.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// The function `src` names in `image`, loading the image as a module in `ctx` (and
    /// readying it for `nvshmem`) unless an earlier kernel of the same batch already did.
    pub(crate) fn load(
        &self, ctx: &Arc<CudaContext>, nvshmem: Option<&dyn ModuleHooks>, src: &Source,
        image: &Image,
    ) -> Result<Function> {
        ctx.bind_to_thread()
            .map_err(Error::cuda("making the pgas CUDA context current"))?;
        let name = CString::new(src.cuda_name.as_str())
            .map_err(|_| Error::launch(&src.display, LaunchCause::NulInKernelName))?;
        let mut modules = self.lock();
        let module = match modules.iter().find(|m| m.image == image.key) {
            Some(m) => m.raw,
            None => {
                // SAFETY: the image is a CUBIN NVRTC produced (or a verified cache entry of one).
                let module = unsafe { result::module::load_data(image.cubin.as_ptr().cast()) }
                    .map_err(Error::cuda(
                        "loading a JIT-compiled kernel module (cuModuleLoadData)",
                    ))?;
                // A module without NVSHMEM's device state (a kernel that calls no NVSHMEM,
                // `nvcall::calls_nvshmem`) has nothing to ready: cumodule_init would fail with
                // "named symbol not found".
                let nvshmem = nvshmem.filter(|_| has_nvshmem_state(&image.cubin));
                if let Some(nv) = nvshmem {
                    let status = nv.cumodule_init(module);
                    if status != 0 {
                        // SAFETY: the module was just loaded and nothing else refers to it.
                        let _ = unsafe { result::module::unload(module) };
                        return Err(Error::ModuleInit {
                            kernel: src.display.clone(),
                            status,
                        });
                    }
                }
                modules.push(Module {
                    image: image.key,
                    raw: module,
                    ctx: ctx.clone(),
                    nvshmem: nvshmem.is_some(),
                });
                module
            }
        };
        // SAFETY: the module is loaded (and stays loaded until finalize).
        unsafe { result::module::get_function(module, name) }
            .map(Function)
            .map_err(Error::cuda(
                "finding the kernel in its module (cuModuleGetFunction)",
            ))
    }

    /// Finalizes (with `nv`, for modules readied for NVSHMEM) and unloads every module. The
    /// caller has made their functions unreachable.
    pub(crate) fn unload_all(&self, nv: Option<&dyn ModuleHooks>) {
        for m in self.lock().drain(..) {
            let _ = m.ctx.bind_to_thread();
            if let (true, Some(nv)) = (m.nvshmem, nv) {
                nv.cumodule_finalize(m.raw);
            }
            // SAFETY: no function of this module is reachable any more (the caller's contract).
            let _ = unsafe { result::module::unload(m.raw) };
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Module>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The symbol of NVSHMEM's per-module device state, which `nvshmemx_cumodule_init` fills in.
const NVSHMEM_STATE: &[u8] = b"nvshmemi_device_state_d";

/// Whether a CUBIN defines NVSHMEM's device state (its symbol table names it).
fn has_nvshmem_state(cubin: &[u8]) -> bool {
    cubin
        .windows(NVSHMEM_STATE.len())
        .any(|w| w == NVSHMEM_STATE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nvshmem_state_is_found_by_its_symbol_name() {
        let mut cubin = b"\x7fELF....symtab\0pgas_kernel\0".to_vec();
        assert!(!has_nvshmem_state(&cubin));
        cubin.extend_from_slice(b"nvshmemi_device_state_d\0");
        assert!(has_nvshmem_state(&cubin));
        assert!(!has_nvshmem_state(b"nvshmemi_device_state"));
    }
}
