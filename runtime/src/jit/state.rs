//! Per-context JIT state: the in-memory function cache, the loaded modules, and the slow path
//! that fills them (toolchain, disk cache, NVRTC, module load, `nvshmemx_cumodule_init`).

use std::collections::HashMap;
use std::ffi::CString;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use cudarc::driver::{result, sys, CudaContext};

use super::disk::{CacheKey, DiskCache};
use super::source::Source;
use super::toolchain::Toolchain;
use super::{batch, helpers};
use crate::error::{Error, Result};
use crate::kernel::{Variant, MAX_COMPTIME};
use crate::launch_cause::LaunchCause;
use pgas_codegen::Prelude;

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

/// Kernels compiled together: their prelude (`None`: a raw kernel) and, for each, the index of
/// its [`Want`] and its source.
type Program = (Option<Prelude>, Vec<(usize, Source)>);

/// A build compiling at least this many kernels prints a line per batch (a first run of many
/// kernels takes seconds, and should say what it is doing).
const PROGRESS_MIN: usize = 4;

/// What a progress line says a program holds: its kernels by Rust name when there are few (a
/// slow program then names its culprit), else their number.
fn program_members(sources: &[&Source]) -> String {
    match sources {
        [one] => format!("1 kernel ({})", one.display),
        few if few.len() <= 3 => {
            let names: Vec<&str> = few.iter().map(|s| s.display.as_str()).collect();
            format!("{} kernels ({})", few.len(), names.join(", "))
        }
        many => format!("{} kernels", many.len()),
    }
}

/// Where kernels are loaded: a context, its JIT state and its NVSHMEM (if any).
pub(crate) struct Target<'a> {
    pub ctx: &'a Arc<CudaContext>,
    pub jit: &'a JitState,
    /// `None` only for [`crate::launch::Bare`], which runs kernels that do not call NVSHMEM.
    pub nvshmem: Option<&'a dyn ModuleHooks>,
    /// The PEs on this node (1 without NVSHMEM): they share the kernel cache, and each compiles
    /// its share of a first run's programs (see [`batch::chunk_size`]).
    pub node_pes: usize,
}

/// One kernel [`JitState::build`] is asked for: its key, and how to make its source (called only
/// when the kernel is not loaded yet).
pub(crate) struct Want<'a> {
    pub key: FnKey,
    pub source: &'a dyn Fn() -> Source,
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
    /// Held while building, so concurrent first launches compile a kernel once; the parallelism
    /// of a build is in its batches, not in threads racing into NVRTC.
    building: Mutex<()>,
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
            building: Mutex::new(()),
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
        self.build(target, &[Want { key, source }])?
            .pop()
            .expect("one result per want")
    }

    /// Loads every kernel of `wants` that is not loaded yet: disk-cache hits as they are, misses
    /// compiled as one NVRTC program per prelude (see [`super::batch`]), each image loaded as
    /// one module. One result per want; the outer `Err` is a failure no kernel is to blame for
    /// (no toolchain, an unusable cache).
    pub(crate) fn build(
        &self,
        target: &Target<'_>,
        wants: &[Want<'_>],
    ) -> Result<Vec<Result<Function>>> {
        let _building = lock(&self.building);
        let mut results: Vec<Option<Result<Function>>> =
            wants.iter().map(|w| self.lookup(&w.key).map(Ok)).collect();
        if results.iter().all(Option::is_some) {
            return Ok(results.into_iter().flatten().collect());
        }
        let tc = self.toolchain()?;
        let disk = self.disk();
        let arch = self.device(target.ctx)?.arch;
        let dump = std::env::var_os("PGAS_DUMP_DIR").map(std::path::PathBuf::from);

        // Each pending kernel: from the disk cache, or into its prelude's group.
        let mut found: Vec<(usize, Source, batch::Image)> = Vec::new();
        let mut by_prelude: Vec<Program> = Vec::new();
        for (i, w) in wants.iter().enumerate() {
            if results[i].is_some() {
                continue;
            }
            let src = (w.source)();
            let cached = disk
                .as_deref()
                .and_then(|d| batch::lookup(d, &batch::kernel_key(&tc, &src, arch)));
            if let Some(image) = cached {
                found.push((i, src, image));
                continue;
            }
            let prelude = batch::prelude_of(&src);
            match by_prelude
                .iter_mut()
                .find(|(p, _)| prelude.is_some() && *p == prelude)
            {
                Some((_, members)) => members.push((i, src)),
                None => by_prelude.push((prelude, vec![(i, src)])),
            }
        }
        // Helper processes take programs from the same list (see `super::helpers`), so the
        // batches are cut for every compiling process of the node: its PEs and their helpers.
        // Looked for only when more than one kernel is to be compiled (one kernel is one
        // program, which the build compiles itself), and only with a disk cache (their results
        // travel through it).
        let pending: usize = by_prelude.iter().map(|(_, members)| members.len()).sum();
        let helper = match disk.as_deref() {
            Some(disk) if pending > 1 => helpers::helper_exe()
                .map(|exe| (exe, helpers::helper_count(target.node_pes), disk))
                .filter(|(_, count, _)| *count > 0),
            _ => None,
        };
        let compilers = target.node_pes.max(1) * (1 + helper.as_ref().map_or(0, |(_, n, _)| *n));
        let groups: Vec<Program> = by_prelude
            .into_iter()
            .flat_map(|(prelude, members)| {
                batch::chunks(prelude, members, compilers)
                    .into_iter()
                    .map(move |c| (prelude, c))
            })
            .collect();

        let total: usize = groups.iter().map(|(_, m)| m.len()).sum();
        let progress = total >= PROGRESS_MIN;
        let started = std::time::Instant::now();
        // The helpers, dropped (ended) once every program is built.
        let helpers = match helper {
            Some((exe, helper_count, disk)) if groups.len() > 1 => {
                let jobs: Vec<_> = groups
                    .iter()
                    .filter_map(|(prelude, members)| {
                        let sources: Vec<&Source> = members.iter().map(|(_, s)| s).collect();
                        batch::job(&tc, *prelude, &sources, arch).ok()
                    })
                    .collect();
                let count = helper_count.min(groups.len() - 1);
                helpers::Helpers::start(&exe, disk, &jobs, arch, count)
            }
            _ => None,
        };
        if let (Some(h), true) = (&helpers, progress) {
            eprintln!(
                "pgas: JIT: {} helper process(es) compile beside this one (PGAS_JIT_HELPERS=0: none)",
                h.count()
            );
        }
        // NVRTC runs one compile at a time per process, so programs are compiled one after the
        // other. A first pass skips the programs another process holds (a PE of this node
        // compiling the same kernels); the second waits for those and then finds them cached.
        let n_programs = groups.len();
        let mut outcomes: Vec<Option<Vec<Result<batch::Image>>>> =
            groups.iter().map(|_| None).collect();
        for wait in [false, true] {
            for (g, (prelude, members)) in groups.iter().enumerate() {
                if outcomes[g].is_some() {
                    continue;
                }
                let t = std::time::Instant::now();
                let _span = tracing::info_span!(
                    "pgas.compile_batch",
                    kernels = members.len(),
                    prelude = batch::prelude_name(*prelude)
                )
                .entered();
                let sources: Vec<&Source> = members.iter().map(|(_, s)| s).collect();
                let out = batch::compile(
                    &tc,
                    disk.as_deref(),
                    dump.as_deref(),
                    *prelude,
                    &sources,
                    arch,
                    wait,
                )?;
                if let (Some(_), true) = (&out, progress) {
                    eprintln!(
                        "pgas: JIT: program {}/{n_programs}: {}, {}, {:.2} s",
                        g + 1,
                        program_members(&sources),
                        batch::prelude_name(*prelude),
                        t.elapsed().as_secs_f64()
                    );
                }
                outcomes[g] = out;
            }
        }
        // Every program is built: a helper still running has nothing left to do.
        drop(helpers);
        if progress {
            eprintln!(
                "pgas: JIT: {total} kernel(s) compiled or loaded in {:.2} s",
                started.elapsed().as_secs_f64()
            );
        }
        for ((_, members), outcome) in groups.into_iter().zip(outcomes) {
            let outcome = outcome.expect("the waiting pass builds every program");
            for ((i, src), image) in members.into_iter().zip(outcome) {
                match image {
                    Ok(image) => found.push((i, src, image)),
                    Err(e) => results[i] = Some(Err(e)),
                }
            }
        }

        let _span = tracing::info_span!("pgas.load", kernels = found.len()).entered();
        for (i, src, image) in found {
            let f = self.load(target, &src, &image);
            if let Ok(f) = f {
                self.functions
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(wants[i].key, f);
            }
            results[i] = Some(f);
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("every want has a result"))
            .collect())
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

    /// The disk cache, opened on first use: `None` under `PGAS_CACHE=off`, or when the directory
    /// is unusable (then one warning line says so, and kernels stay in memory).
    fn disk(&self) -> Option<Arc<DiskCache>> {
        let mut disk = lock(&self.disk);
        if let Some(d) = &*disk {
            return d.clone();
        }
        let d = DiskCache::dir_from_env()
            .and_then(DiskCache::open_or_warn)
            .map(Arc::new);
        *disk = Some(d.clone());
        d
    }

    /// The function `src` names in `image`, loading the image as a module (and readying it for
    /// NVSHMEM) unless an earlier kernel of the same batch already did.
    fn load(&self, target: &Target<'_>, src: &Source, image: &batch::Image) -> Result<Function> {
        target
            .ctx
            .bind_to_thread()
            .map_err(Error::cuda("making the pgas CUDA context current"))?;
        let name = CString::new(src.cuda_name.as_str())
            .map_err(|_| Error::launch(&src.display, LaunchCause::NulInKernelName))?;
        let mut modules = lock(&self.modules);
        let module = match modules.iter().find(|m| m.image == image.key) {
            Some(m) => m.raw,
            None => {
                // SAFETY: the image is a CUBIN NVRTC produced (or a verified cache entry of one).
                let module = unsafe { result::module::load_data(image.cubin.as_ptr().cast()) }
                    .map_err(Error::cuda(
                        "loading a JIT-compiled kernel module (cuModuleLoadData)",
                    ))?;
                if let Some(nv) = target.nvshmem {
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
                    ctx: target.ctx.clone(),
                    nvshmem: target.nvshmem.is_some(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn source(name: &str) -> Source {
        Source {
            display: name.to_owned(),
            cuda_name: format!("pgas_{name}"),
            text: String::new(),
            batchable: true,
        }
    }

    #[test]
    fn progress_names_the_kernels_of_small_programs() {
        let (a, b, c, d) = (source("a"), source("b"), source("c"), source("d"));
        assert_eq!(program_members(&[&a]), "1 kernel (a)");
        assert_eq!(program_members(&[&a, &b, &c]), "3 kernels (a, b, c)");
        assert_eq!(program_members(&[&a, &b, &c, &d]), "4 kernels");
    }
}
