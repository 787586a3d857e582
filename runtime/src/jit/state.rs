//! Per-context JIT state: the in-memory function cache, the loaded modules, and the slow path
//! that fills them (toolchain, disk cache, NVRTC, module load, `nvshmemx_cumodule_init`).

use std::collections::HashMap;
use std::ffi::CString;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use cudarc::driver::{result, sys, CudaContext};

use crate::error::{Error, Result};
use crate::jit::disk::DiskCache;
use crate::jit::toolchain::Toolchain;
use crate::kernel::{Variant, MAX_COMPTIME};

/// Which kernel a cached function belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum KernelId {
    /// A `#[pgas_kernel]`, by its unique CUDA base name.
    Spec(&'static str),
    /// A [`crate::jit::RawKernel`], by its process-unique id.
    Raw(u64),
}

/// In-memory cache key: a kernel, a variant and its comptime values.
#[derive(Clone, Copy, Debug, Eq)]
pub(crate) struct FnKey {
    id: KernelId,
    variant: Variant,
    comptime: [i128; MAX_COMPTIME],
    n: u8,
}

impl FnKey {
    /// `None` when there are more comptime values than [`MAX_COMPTIME`].
    pub(crate) fn new(id: KernelId, variant: Variant, comptime: &[i128]) -> Option<FnKey> {
        let mut values = [0; MAX_COMPTIME];
        values.get_mut(..comptime.len())?.copy_from_slice(comptime);
        Some(FnKey {
            id,
            variant,
            comptime: values,
            n: comptime.len() as u8,
        })
    }
}

impl PartialEq for FnKey {
    fn eq(&self, o: &FnKey) -> bool {
        self.id == o.id
            && self.variant == o.variant
            && self.comptime[..self.n as usize] == o.comptime[..o.n as usize]
    }
}

impl Hash for FnKey {
    // Only the used comptime slots: this runs on every launch.
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.id.hash(h);
        self.variant.hash(h);
        self.comptime[..self.n as usize].hash(h);
    }
}

/// A loaded kernel function.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Function(sys::CUfunction);

// SAFETY: a CUfunction is a driver handle usable from any thread whose current context is the
// one that loaded it; the launch path binds that context first.
unsafe impl Send for Function {}
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

/// Where kernels are loaded: a context, its JIT state and its NVSHMEM (if any).
pub(crate) struct Target<'a> {
    pub ctx: &'a Arc<CudaContext>,
    pub jit: &'a JitState,
    /// `None` only for [`crate::jit::Bare`], which runs kernels that do not call NVSHMEM.
    pub nvshmem: Option<&'a dyn ModuleHooks>,
}

/// What the slow path compiles; built only on a cache miss.
pub(crate) struct Source {
    /// How errors name the kernel (the Rust name).
    pub display: String,
    /// The `extern "C"` symbol.
    pub cuda_name: String,
    /// The full CUDA source.
    pub text: String,
}

struct Module {
    raw: sys::CUmodule,
    ctx: Arc<CudaContext>,
    nvshmem: bool,
}

// SAFETY: a module handle is used only under the modules mutex, with its context bound.
unsafe impl Send for Module {}

/// Architecture and SM count of the context's device, read once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceInfo {
    pub arch: (u32, u32),
    pub sms: u32,
}

/// Per-context JIT state: loaded modules and the in-memory function cache.
///
/// The hit path takes only a read lock, which other launches share; the write lock is held just
/// to insert a freshly loaded function (compilation happens outside it).
pub struct JitState {
    functions: RwLock<HashMap<FnKey, Function>>,
    /// One gate per kernel being built, so concurrent first launches compile it once.
    building: Mutex<HashMap<FnKey, Arc<Mutex<()>>>>,
    modules: Mutex<Vec<Module>>,
    disk: Mutex<Option<Option<Arc<DiskCache>>>>,
    device: OnceLock<DeviceInfo>,
}

impl std::fmt::Debug for JitState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JitState")
            .field(
                "functions",
                &self.functions.read().map(|m| m.len()).unwrap_or(0),
            )
            .field("modules", &lock(&self.modules).len())
            .finish()
    }
}

impl Default for JitState {
    fn default() -> Self {
        JitState::new()
    }
}

impl JitState {
    /// Empty state; nothing is discovered or compiled until the first launch.
    pub fn new() -> JitState {
        JitState {
            functions: RwLock::new(HashMap::new()),
            building: Mutex::new(HashMap::new()),
            modules: Mutex::new(Vec::new()),
            disk: Mutex::new(None),
            device: OnceLock::new(),
        }
    }

    /// The cached function for `key`: the launch hit path.
    #[inline]
    pub(crate) fn lookup(&self, key: &FnKey) -> Option<Function> {
        self.functions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .copied()
    }

    /// Architecture and SM count of `ctx`'s device.
    pub(crate) fn device(&self, ctx: &CudaContext) -> Result<DeviceInfo> {
        if let Some(d) = self.device.get() {
            return Ok(*d);
        }
        let (major, minor) = ctx
            .compute_capability()
            .map_err(Error::cuda("reading the GPU architecture and SM count"))?;
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(Error::cuda("reading the GPU architecture and SM count"))?;
        Ok(*self.device.get_or_init(|| DeviceInfo {
            arch: (major as u32, minor as u32),
            sms: sms as u32,
        }))
    }

    /// The function for `key`, compiling and loading it on a miss.
    pub(crate) fn get_or_build(
        &self,
        target: &Target<'_>,
        key: FnKey,
        source: &dyn Fn() -> Source,
    ) -> Result<Function> {
        if let Some(f) = self.lookup(&key) {
            return Ok(f);
        }
        let gate = lock(&self.building).entry(key).or_default().clone();
        let _building = lock(&gate);
        if let Some(f) = self.lookup(&key) {
            return Ok(f);
        }
        let src = source();
        let arch = self.device(target.ctx)?.arch;
        let cubin = self.cubin(&src, arch)?;
        let f = self.load(target, &src, &cubin)?;
        self.functions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, f);
        lock(&self.building).remove(&key);
        Ok(f)
    }

    /// The toolchain, discovered on first use and shared by every context of the process
    /// (discovery may start python3). A failed discovery is retried next time.
    pub(crate) fn toolchain(&self) -> Result<Arc<Toolchain>> {
        static TOOLCHAIN: Mutex<Option<Arc<Toolchain>>> = Mutex::new(None);
        let mut tc = lock(&TOOLCHAIN);
        if let Some(t) = &*tc {
            return Ok(t.clone());
        }
        let t = Arc::new(Toolchain::discover()?);
        *tc = Some(t.clone());
        Ok(t)
    }

    /// The disk cache (or `None` under `PGAS_CACHE=off`), opened on first use.
    fn disk(&self) -> Result<Option<Arc<DiskCache>>> {
        let mut disk = lock(&self.disk);
        if let Some(d) = &*disk {
            return Ok(d.clone());
        }
        let d = match DiskCache::dir_from_env() {
            Some(dir) => Some(Arc::new(DiskCache::open(dir)?)),
            None => None,
        };
        *disk = Some(d.clone());
        Ok(d)
    }

    /// The CUBIN of `src` for `arch`: from the disk cache, else from NVRTC (then stored).
    fn cubin(&self, src: &Source, arch: (u32, u32)) -> Result<Vec<u8>> {
        let tc = self.toolchain()?;
        let disk = self.disk()?;
        let dump = std::env::var_os("PGAS_DUMP_DIR").map(std::path::PathBuf::from);
        let (compiled, _) = tc
            .compile_cached(
                disk.as_deref(),
                dump.as_deref(),
                &src.text,
                &src.cuda_name,
                arch,
            )
            .map_err(|e| match e {
                Error::Compile { location, log, .. } => Error::Compile {
                    kernel: format!("{} ({})", src.display, src.cuda_name),
                    location,
                    log,
                },
                other => other,
            })?;
        Ok(compiled.cubin)
    }

    /// Loads a CUBIN into the target's context and readies it for NVSHMEM.
    fn load(&self, target: &Target<'_>, src: &Source, cubin: &[u8]) -> Result<Function> {
        target
            .ctx
            .bind_to_thread()
            .map_err(Error::cuda("making the pgas CUDA context current"))?;
        // SAFETY: the image is a CUBIN NVRTC produced (or a verified cache entry of one).
        let module = unsafe { result::module::load_data(cubin.as_ptr().cast()) }.map_err(
            Error::cuda("loading a JIT-compiled kernel module (cuModuleLoadData)"),
        )?;
        let unload = |e: Error| {
            // SAFETY: the module was just loaded and nothing else refers to it.
            let _ = unsafe { result::module::unload(module) };
            e
        };
        if let Some(nv) = target.nvshmem {
            let status = nv.cumodule_init(module);
            if status != 0 {
                return Err(unload(Error::ModuleInit {
                    kernel: src.display.clone(),
                    status,
                }));
            }
        }
        let name = CString::new(src.cuda_name.as_str()).map_err(|_| Error::Launch {
            kernel: src.display.clone(),
            reason: "the CUDA kernel name contains a NUL byte".to_owned(),
        });
        // SAFETY: the module is loaded.
        let f = name.and_then(|n| {
            unsafe { result::module::get_function(module, n) }.map_err(Error::cuda(
                "finding the kernel in its module (cuModuleGetFunction)",
            ))
        });
        let f = match f {
            Ok(f) => f,
            Err(e) => {
                if let Some(nv) = target.nvshmem {
                    nv.cumodule_finalize(module);
                }
                return Err(unload(e));
            }
        };
        lock(&self.modules).push(Module {
            raw: module,
            ctx: target.ctx.clone(),
            nvshmem: target.nvshmem.is_some(),
        });
        Ok(Function(f))
    }

    /// Finalizes (`nvshmemx_cumodule_finalize`) and unloads every module, and empties the
    /// caches. The context calls this before NVSHMEM finalizes.
    pub(crate) fn finalize(&self, nv: &crate::nvshmem::Nvshmem) {
        self.finalize_with(Some(nv));
    }

    fn finalize_with(&self, nv: Option<&dyn ModuleHooks>) {
        self.functions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        for m in lock(&self.modules).drain(..) {
            let _ = m.ctx.bind_to_thread();
            if let (true, Some(nv)) = (m.nvshmem, nv) {
                nv.cumodule_finalize(m.raw);
            }
            // SAFETY: no function of this module is reachable any more (caches cleared).
            let _ = unsafe { result::module::unload(m.raw) };
        }
    }
}

impl Drop for JitState {
    fn drop(&mut self) {
        // Modules that were never NVSHMEM-initialized (or whose owner skipped `finalize`) are
        // still unloaded.
        self.finalize_with(None);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
