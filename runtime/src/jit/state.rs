//! Per-context JIT state: the in-memory function cache, the loaded modules, and the slow path
//! that fills them, [`JitState::build`]: plan (`plan.rs`: keys, disk cache, programs), compile
//! (`compile.rs`, `batch.rs`: NVRTC), load (`module.rs`: module load, `nvshmemx_cumodule_init`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use cudarc::driver::{sys, CudaContext};

use super::compile::{compile, Stage};
use super::disk::DiskCache;
pub(crate) use super::fn_key::{FnKey, KernelId};
use super::module::{Function, ModuleHooks, Modules};
use super::plan::{Plan, Program};
use super::source::Source;
use super::tiers::{Tiers, Upgrade, Workshop};
use super::toolchain::Toolchain;
use crate::error::{Error, Result};
use pgas_codegen::Prelude;

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
    modules: Modules,
    disk: Mutex<Option<Option<Arc<DiskCache>>>>,
    device: OnceLock<DeviceInfo>,
    /// The full builds of kernels loaded from their quick builds (`super::tiers`).
    tiers: Tiers,
}

impl std::fmt::Debug for JitState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JitState")
            .field(
                "functions",
                &self.functions.read().map(|m| m.len()).unwrap_or(0),
            )
            .field("modules", &self.modules.len())
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
            modules: Modules::default(),
            disk: Mutex::new(None),
            device: OnceLock::new(),
            tiers: Tiers::default(),
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
        &self, target: &Target<'_>, key: FnKey, source: &dyn Fn() -> Source,
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
        &self, target: &Target<'_>, wants: &[Want<'_>],
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
        let pending = wants
            .iter()
            .enumerate()
            .filter(|(i, _)| results[*i].is_none())
            .map(|(i, w)| (i, (w.source)()));
        let plan = Plan::new(&tc, disk.as_deref(), arch, pending, target.node_pes);
        // Kernels calling NVSHMEM's device collectives whose full build is not cached start on
        // their quick build (`super::tiers`); the full one is compiled in the background.
        let quick = tc.quick_tier();
        let (programs, deferred): (Vec<Program>, Vec<Program>) =
            plan.programs.into_iter().partition(|(_, members)| {
                let tiered = |k: &super::key::Keyed| {
                    quick.as_ref().and_then(|q| q.links(&k.src.text)) == Some(Prelude::Full)
                };
                !members.iter().all(tiered)
            });
        // The quick builds first: like every collective program they are the slowest (the
        // first kernel calling a collective builds its object), so they start while the
        // helpers are fresh, and the other programs' helpers start beside them.
        let mut found = plan.cached;
        let mut stages = Vec::new();
        let mut upgrades: Vec<Upgrade> = Vec::new();
        if let (Some(quick), false) = (&quick, deferred.is_empty()) {
            let full: Vec<super::key::Keyed> = deferred
                .into_iter()
                .flat_map(|(_, members)| members)
                .collect();
            let sources = full.iter().map(|k| (k.index, k.src.clone()));
            let qplan = Plan::new(quick, disk.as_deref(), arch, sources, target.node_pes);
            found.extend(qplan.cached);
            stages.push(Stage {
                tc: quick,
                programs: qplan.programs,
                helpers: qplan.helpers,
            });
            upgrades = full
                .into_iter()
                .map(|kernel| Upgrade {
                    key: wants[kernel.index].key,
                    kernel,
                })
                .collect();
        }
        stages.push(Stage {
            tc: &tc,
            programs,
            helpers: plan.helpers,
        });
        let compiled = compile(disk.as_deref(), arch, stages)?;
        for (kernel, image) in compiled {
            match image {
                Ok(image) => found.push((kernel, image)),
                Err(e) => results[kernel.index] = Some(Err(e)),
            }
        }
        let _span = tracing::info_span!("pgas.load", kernels = found.len()).entered();
        for (kernel, image) in found {
            let f = self
                .modules
                .load(target.ctx, target.nvshmem, &kernel.src, &image);
            if let Ok(f) = f {
                self.insert(wants[kernel.index].key, f);
            }
            results[kernel.index] = Some(f);
        }
        // Only what loaded from its quick build waits for a full one.
        upgrades.retain(|u| matches!(results[u.kernel.index], Some(Ok(_))));
        if !upgrades.is_empty() {
            if wants.len() >= super::compile::PROGRESS_MIN {
                eprintln!(
                    "pgas: JIT: {} kernel(s) calling NVSHMEM's device collectives run their quick \
                     builds until the full ones, compiling in the background, are in \
                     (docs/jit.md, \"Tiers\")",
                    upgrades.len()
                );
            }
            let shop = Workshop {
                toolchain: tc,
                disk,
                arch,
                node_pes: target.node_pes,
                helper: super::helpers::helper_exe(),
            };
            self.tiers.start(upgrades, shop);
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("every want has a result"))
            .collect())
    }

    fn insert(&self, key: FnKey, f: Function) {
        self.functions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, f);
    }

    /// Whether a full build is ready to replace a quick one (`super::tiers`): one atomic load,
    /// on every launch.
    #[inline]
    pub(crate) fn has_upgrades(&self) -> bool {
        self.tiers.any_ready()
    }

    /// Loads the full builds that are ready and puts them in place of the quick ones, unless
    /// `stream` is being captured (loading a module is not allowed then: the next launch outside
    /// capture does it). A full build that fails to load leaves the quick one in place. Returns
    /// how many were put in place.
    pub(crate) fn swap_upgrades(
        &self, target: &Target<'_>, stream: &cudarc::driver::CudaStream,
    ) -> usize {
        let idle = stream.capture_status().ok()
            == Some(sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE);
        if !idle {
            return 0;
        }
        let mut swapped = 0;
        for r in self.tiers.take_ready() {
            let f = self
                .modules
                .load(target.ctx, target.nvshmem, &r.kernel.src, &r.image);
            match f {
                Ok(f) => {
                    self.insert(r.key, f);
                    swapped += 1;
                }
                Err(e) => eprintln!(
                    "pgas: warning: JIT: the full build of {} did not load ({e}); it keeps \
                     running its quick build",
                    r.kernel.src.display
                ),
            }
        }
        swapped
    }

    /// Waits for every full build started so far and swaps it in (see
    /// [`JitState::swap_upgrades`]); how many were swapped in.
    pub(crate) fn finish_compiles(
        &self, target: &Target<'_>, stream: &cudarc::driver::CudaStream,
    ) -> usize {
        self.tiers.wait();
        self.swap_upgrades(target, stream)
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

    /// Finalizes (`nvshmemx_cumodule_finalize`) and unloads every module, and empties the
    /// caches. The context calls this before NVSHMEM finalizes.
    pub(crate) fn finalize(&self, nv: &crate::nvshmem::Nvshmem) {
        self.finalize_with(Some(nv));
    }

    fn finalize_with(&self, nv: Option<&dyn ModuleHooks>) {
        self.tiers.stop();
        self.functions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        // No function of a module is reachable any more: the cache is cleared.
        self.modules.unload_all(nv);
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
