//! The process's pgas state: the context made by `pgas.init()`, and the registry that owns every
//! symmetric tensor Python holds.
//!
//! Why a registry: freeing symmetric memory (`nvshmem_free`) is collective, and Python's garbage
//! collector frees objects at different points on different PEs (reference cycles, a view kept a
//! little longer, a `gc.collect()` on one PE only). A free run from the collector would enter
//! NVSHMEM's barrier on one PE while the others are elsewhere and hang the job. So a
//! `pgas.Tensor` is only a handle: the registry owns the memory until the program frees it with
//! `free_tensor` (collective, agreed across PEs first) or `finalize` frees what is left, in
//! allocation order, which is the same on every PE. A handle collected without `free_tensor`
//! leaves its memory allocated until then, and says so with a `ResourceWarning`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pgas_runtime::{Bootstrap, Pgas, SymTensor, Team};
use pyo3::prelude::*;

use crate::dtype::AnyTensor;
use crate::errors::{misuse, to_py, CollectiveMismatchError, FreedError, NotInitializedError};
use crate::locks::lock;

/// Ids of imported tensors (views of symmetric memory taken with `from_dlpack`) start here;
/// owned allocations count from 1 in allocation order, the same on every PE.
const IMPORTED: u64 = 1 << 62;

/// One symmetric tensor Python holds.
pub(crate) struct Entry {
    pub(crate) data: AnyTensor,
    /// Live DLPack views (a torch or CuPy tensor made from it, a peer tensor): `free_tensor`
    /// refuses while any PE has one, since the memory would vanish under it.
    pub(crate) views: Arc<AtomicUsize>,
}

/// Every tensor of the context, by id.
#[derive(Default)]
pub(crate) struct Registry {
    /// The last owned allocation's id.
    last_alloc: u64,
    /// The last imported tensor's id.
    last_import: u64,
    pub(crate) entries: BTreeMap<u64, Entry>,
}

/// The context and its tensors; shared by the `Context`, every `Tensor` handle and every
/// DLPack view, so NVSHMEM outlives all of them.
pub(crate) struct State {
    pgas: Mutex<Option<Pgas>>,
    registry: Mutex<Registry>,
    /// The symmetric scratch of `agree`: `n_pes` gathered pairs, then this PE's pair.
    agree: Mutex<Option<(SymTensor<u64>, SymTensor<u64>)>>,
    /// Where an in-place `reduce` copies its source first (`ops::collectives`).
    staging: Mutex<Option<SymTensor<u8>>>,
    /// The modules of Numba kernels readied for NVSHMEM (`CUlibrary` handles, `device.rs`),
    /// released before NVSHMEM finalizes.
    foreign: Mutex<Vec<usize>>,
    /// The communicators of `pgas.Comm` (`coll.rs`), by id in creation order (the same on
    /// every PE), with the last id given.
    comms: Mutex<(u64, BTreeMap<u64, pgas::coll::Comm>)>,
    /// The plans of pgas's library on foreign memory (`library.rs`: staging buffers and
    /// fused-op plans), by key. Made at first use by every PE at the same point (collective
    /// allocations) and freed at `finalize` in key order: the same order on every PE.
    plans: Mutex<BTreeMap<String, Box<dyn std::any::Any + Send>>>,
    pub(crate) my_pe: usize,
    pub(crate) n_pes: usize,
    pub(crate) device: usize,
}

/// The state of this process, from `init` until `finalize`.
static CURRENT: Mutex<Option<Arc<State>>> = Mutex::new(None);

/// The state made by `pgas.init()`, or `NotInitializedError`.
pub(crate) fn current() -> PyResult<Arc<State>> {
    lock(&CURRENT).clone().ok_or_else(|| {
        NotInitializedError::new_err(
            "pgas is not initialized in this process: call pgas.init() first (after \
             pgas.finalize(), NVSHMEM cannot be initialized again in the same process)",
        )
    })
}

impl State {
    /// The runtime handle, or `NotInitializedError` after `finalize`.
    /// Work queued on pgas's stream through it comes after the operations given `stream=`
    /// (`stream::settle`).
    pub(crate) fn pgas(&self) -> PyResult<Pgas> {
        crate::stream::settle()?;
        lock(&self.pgas).clone().ok_or_else(|| {
            NotInitializedError::new_err(
                "pgas was finalized (pgas.finalize()); NVSHMEM cannot be initialized again in \
                 the same process",
            )
        })
    }

    /// The registry. Never held while waiting for the GIL, nor while an entry drops (a drop
    /// may run a DLPack deleter, that is, Python code).
    pub(crate) fn registry(&self) -> MutexGuard<'_, Registry> {
        lock(&self.registry)
    }

    /// Registers a new allocation (`imported`: a `from_dlpack` view) and returns its id.
    pub(crate) fn insert(&self, data: AnyTensor, imported: bool) -> u64 {
        let mut reg = self.registry();
        let id = if imported {
            reg.last_import += 1;
            IMPORTED + reg.last_import
        } else {
            reg.last_alloc += 1;
            reg.last_alloc
        };
        reg.entries.insert(
            id,
            Entry {
                data,
                views: Arc::new(AtomicUsize::new(0)),
            },
        );
        id
    }

    /// Gathers a pair of numbers from every PE (`fcollect` over the world): the way the PEs
    /// check a collective call's arguments against each other before acting on them, so that a
    /// mismatch raises on every PE instead of hanging some.
    pub(crate) fn agree(&self, pgas: &Pgas, mine: [u64; 2]) -> PyResult<Vec<[u64; 2]>> {
        // One PE has no one to disagree with: no exchange (an fcollect and a copy back).
        if self.n_pes < 2 {
            return Ok(vec![mine]);
        }
        let mut scratch = lock(&self.agree);
        let (gathered, own) = scratch
            .as_mut()
            .ok_or_else(|| NotInitializedError::new_err("pgas was finalized (pgas.finalize())"))?;
        own.copy_from(&mine).map_err(to_py)?;
        pgas.fcollect(Team::WORLD, &*gathered, &*own)
            .map_err(to_py)?;
        let all = gathered.to_vec().map_err(to_py)?;
        Ok(all.chunks(2).map(|c| [c[0], c[1]]).collect())
    }

    /// The address of the staging buffer, grown to at least `bytes` (collective when it grows:
    /// every PE makes the same in-place calls).
    pub(crate) fn staging(&self, pgas: &Pgas, bytes: usize) -> PyResult<u64> {
        let mut staging = lock(&self.staging);
        if staging.as_ref().is_none_or(|t| t.len() < bytes) {
            // The old buffer first: the heap may not hold both. Enqueued work may still read it
            // (freed memory can be unmapped), so the GPU finishes that first.
            if staging.is_some() {
                finish_gpu(pgas, "the in-place staging")?;
            }
            drop(staging.take());
            *staging = Some(pgas.alloc::<u8>(bytes.max(1)).map_err(to_py)?);
        }
        Ok(staging.as_ref().map_or(0, |t| t.as_device_ptr()))
    }

    /// Runs `f` on the plan `key` names, made by `make` when there is none or when the one there
    /// does not `fit` the call (collective when it allocates: every PE reaches the same keys at
    /// the same points, with the same calls).
    pub(crate) fn with_plan<P: std::any::Any + Send, R>(
        &self, key: &str, fits: impl FnOnce(&P) -> bool, make: impl FnOnce() -> PyResult<P>,
        f: impl FnOnce(&mut P) -> PyResult<R>,
    ) -> PyResult<R> {
        let mut plans = lock(&self.plans);
        let kept = plans.get(key).and_then(|p| p.downcast_ref::<P>()).map(fits);
        if kept != Some(true) {
            if kept.is_some() {
                finish_gpu(&self.pgas()?, "a plan of pgas's library")?;
            }
            // The old plan first: the heap may not hold both.
            drop(plans.remove(key));
            plans.insert(key.to_string(), Box::new(make()?));
        }
        match plans.get_mut(key).and_then(|p| p.downcast_mut::<P>()) {
            Some(plan) => f(plan),
            None => Err(NotInitializedError::new_err(
                "pgas was finalized (pgas.finalize())",
            )),
        }
    }

    /// Frees owned tensor `id` after the PEs agreed (collective), under live DLPack views only
    /// when `with_views`. `what` names the tensor.
    pub(crate) fn free(&self, id: u64, what: &str, with_views: bool) -> PyResult<()> {
        let pgas = self.pgas()?;
        if id >= IMPORTED {
            return Err(misuse(format!(
                "free_tensor: {what} was imported with from_dlpack (a view of memory it does \
                 not own); free the tensor it was made from, or just drop the view"
            )));
        }
        let views = {
            let reg = self.registry();
            let entry = reg.entries.get(&id).ok_or_else(|| freed(what))?;
            if with_views {
                0
            } else {
                entry.views.load(Ordering::SeqCst) as u64
            }
        };
        let all = self.agree(&pgas, [id, views])?;
        if let Some(msg) = free_mismatch(&all) {
            return Err(CollectiveMismatchError::new_err(format!(
                "free_tensor: {msg}; nothing was freed on any PE"
            )));
        }
        let entry = self.registry().entries.remove(&id);
        // The collective nvshmem_free, outside the registry lock.
        drop(entry);
        Ok(())
    }

    /// Keeps a new communicator (made collectively, in the same order on every PE) and returns
    /// its id.
    pub(crate) fn insert_comm(&self, comm: pgas::coll::Comm) -> u64 {
        let mut comms = lock(&self.comms);
        comms.0 += 1;
        let id = comms.0;
        comms.1.insert(id, comm);
        id
    }

    /// Runs `f` on communicator `id`, or raises `FreedError`.
    pub(crate) fn with_comm<R>(
        &self, id: u64, f: impl FnOnce(&mut pgas::coll::Comm) -> PyResult<R>,
    ) -> PyResult<R> {
        let mut comms = lock(&self.comms);
        let comm = comms
            .1
            .get_mut(&id)
            .ok_or_else(|| freed(&format!("communicator {id}")))?;
        f(comm)
    }

    /// Frees communicator `id` after the PEs agreed on it (collective: its flags and scratch
    /// are symmetric memory).
    pub(crate) fn free_comm(&self, id: u64) -> PyResult<()> {
        let pgas = self.pgas()?;
        if !lock(&self.comms).1.contains_key(&id) {
            return Err(freed(&format!("communicator {id}")));
        }
        let all = self.agree(&pgas, [id, 0])?;
        if all.iter().any(|pair| pair[0] != id) {
            let ids: Vec<u64> = all.iter().map(|pair| pair[0]).collect();
            return Err(CollectiveMismatchError::new_err(format!(
                "Comm.free: the PEs freed different communicators (by PE: {ids:?}); free them in \
                 the same order on every PE; nothing was freed on any PE"
            )));
        }
        let comm = lock(&self.comms).1.remove(&id);
        // The collective frees, outside the lock.
        drop(comm);
        Ok(())
    }

    /// Notes a Numba module readied for NVSHMEM (`device.rs`).
    pub(crate) fn foreign_readied(&self, library: usize) {
        lock(&self.foreign).push(library);
    }

    /// Releases a readied Numba module (`nvshmemx_culibrary_finalize`) before Numba unloads it;
    /// nothing for one already released (by `finalize`).
    pub(crate) fn foreign_release(&self, library: usize) -> PyResult<()> {
        let mut readied = lock(&self.foreign);
        let Some(at) = readied.iter().position(|&l| l == library) else {
            return Ok(());
        };
        readied.swap_remove(at);
        let pgas = self.pgas()?;
        // SAFETY: readied by `_culibrary_init` and not released since; Numba calls this before
        // it unloads the library.
        unsafe { pgas.finalize_foreign_library(library as *mut _) }.map_err(to_py)
    }

    /// Frees every tensor and finalizes NVSHMEM (collective). `force` (at interpreter exit)
    /// frees under live DLPack views, which can no longer be used.
    pub(crate) fn finalize(&self, force: bool) -> PyResult<()> {
        let pgas = self.pgas()?;
        let (owned, views) = {
            let reg = self.registry();
            let owned = reg.entries.keys().filter(|&&id| id < IMPORTED).count() as u64;
            let views: usize = reg
                .entries
                .values()
                .map(|e| e.views.load(Ordering::SeqCst))
                .sum();
            (owned, views as u64)
        };
        let all = self.agree(&pgas, [owned, if force { 0 } else { views }])?;
        if let Some(msg) = finalize_mismatch(&all) {
            return Err(CollectiveMismatchError::new_err(format!(
                "finalize: {msg}; nothing was finalized on any PE"
            )));
        }
        // The communicators first, in creation order (each frees symmetric memory, collectively),
        // and with them their handles on the runtime.
        let comms = std::mem::take(&mut lock(&self.comms).1);
        drop(comms);
        let plans = std::mem::take(&mut *lock(&self.plans));
        drop(plans);
        let entries = std::mem::take(&mut self.registry().entries);
        // Imported views first (no collective), then the allocations in allocation order:
        // the same order on every PE, so each collective free meets its peers.
        let (imported, owned): (Vec<_>, Vec<_>) =
            entries.into_iter().partition(|(id, _)| *id >= IMPORTED);
        drop(imported);
        drop(owned);
        for library in std::mem::take(&mut *lock(&self.foreign)) {
            // SAFETY: readied by `_culibrary_init`; one Numba already unloaded was released
            // and removed then.
            if let Err(e) = unsafe { pgas.finalize_foreign_library(library as *mut _) } {
                eprintln!("pgas: releasing a Numba module before finalize: {e}");
            }
        }
        drop(lock(&self.agree).take());
        drop(lock(&self.staging).take());
        drop(lock(&self.pgas).take());
        drop(pgas);
        Ok(())
    }
}

/// Waits for every stream of this PE's GPU before `what` (symmetric memory that enqueued work
/// may still use) is freed to make room for a larger one: NVSHMEM can unmap freed memory.
/// Refused under CUDA graph capture, where a first call of a larger shape cannot allocate anyway.
pub(crate) fn finish_gpu(pgas: &Pgas, what: &str) -> PyResult<()> {
    pgas.cuda().synchronize().map_err(|e| {
        misuse(format!(
            "growing {what}: waiting for the GPU failed ({e}); under CUDA graph capture, run \
             each shape once before capturing"
        ))
    })
}

/// `FreedError` for a tensor no longer in the registry.
pub(crate) fn freed(what: &str) -> PyErr {
    FreedError::new_err(format!(
        "{what} was freed (free_tensor) or pgas was finalized: it can no longer be used"
    ))
}

/// Why the PEs' `(id, views)` pairs for a `free_tensor` do not allow it, or `None`.
pub(crate) fn free_mismatch(all: &[[u64; 2]]) -> Option<String> {
    if all.windows(2).any(|w| w[0][0] != w[1][0]) {
        let list: Vec<String> = all
            .iter()
            .enumerate()
            .map(|(pe, [id, _])| format!("PE {pe} frees allocation #{id}"))
            .collect();
        return Some(format!(
            "the PEs free different tensors ({}). Fix: call free_tensor on the same tensors in \
             the same order on every PE",
            list.join(", ")
        ));
    }
    let busy: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(_, [_, v])| *v > 0)
        .map(|(pe, [_, v])| format!("PE {pe} holds {v}"))
        .collect();
    (!busy.is_empty()).then(|| {
        format!(
            "DLPack views of the tensor are alive ({}): torch/CuPy/JAX tensors made from it, or \
             peer tensors. Fix: del those views (and anything that references them) before \
             free_tensor",
            busy.join(", ")
        )
    })
}

/// Why the PEs' `(tensors, views)` pairs for a `finalize` do not allow it, or `None`.
pub(crate) fn finalize_mismatch(all: &[[u64; 2]]) -> Option<String> {
    if all.windows(2).any(|w| w[0][0] != w[1][0]) {
        let list: Vec<String> = all
            .iter()
            .enumerate()
            .map(|(pe, [n, _])| format!("PE {pe} holds {n}"))
            .collect();
        return Some(format!(
            "the PEs hold different numbers of symmetric tensors ({}), so their frees would not \
             meet. Fix: call free_tensor on the same tensors on every PE",
            list.join(", ")
        ));
    }
    let busy: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|(_, [_, v])| *v > 0)
        .map(|(pe, [_, v])| format!("PE {pe} holds {v}"))
        .collect();
    (!busy.is_empty()).then(|| {
        format!(
            "DLPack views of pgas memory are alive ({}). Fix: del the torch/CuPy/JAX tensors \
             made from pgas tensors before finalize",
            busy.join(", ")
        )
    })
}

/// Initializes pgas (NVSHMEM) in this process: one PE, or one PE of the job that
/// `pgas-run -n N`, `mpirun` or `srun` started (as `pgas::init` in Rust). `heap_size` (bytes)
/// sets the symmetric heap of each PE (else `NVSHMEM_SYMMETRIC_SIZE` or NVSHMEM's default),
/// `device` the CUDA ordinal (else `PGAS_DEVICE` or the local rank). Once per process. Without
/// a GPU, NVSHMEM or driver it raises `pgas.InitError` saying what is missing (`pgas doctor`
/// checks the machine). Returns the `Context`; the module's functions use it too.
///
/// `initializer_method` (NVSHMEM4Py's name) picks the bootstrap: `"auto"` (the default: from the
/// environment), `"single"` (one PE), `"launcher"` (`pgas-run`), `"mpi"` (`mpirun`/`srun`; a
/// build with the `mpi` feature), `"nvshmem"` (NVSHMEM's own, `NVSHMEM_BOOTSTRAP`) or `"uid"`:
/// the unique id `uid` (bytes from `get_unique_id()` on rank 0, handed to every rank by the
/// program) with this process's `rank` of `nranks` (`uid` alone implies `"uid"`). The module's
/// `pgas.init` adds `mpi_comm=`, which hands the id around over an mpi4py communicator.
#[pyfunction]
#[pyo3(signature = (*, heap_size=None, device=None, initializer_method="auto", uid=None, rank=None, nranks=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn init(
    py: Python<'_>, heap_size: Option<usize>, device: Option<usize>, initializer_method: &str,
    uid: Option<Vec<u8>>, rank: Option<usize>, nranks: Option<usize>,
) -> PyResult<Context> {
    let method = initializer_method.to_ascii_lowercase();
    let by_uid = method == "uid" || (method == "auto" && uid.is_some());
    let bootstrap = match method.as_str() {
        "auto" | "uid" => Bootstrap::Auto,
        "single" => Bootstrap::Single,
        "launcher" | "pgas-run" => Bootstrap::Launcher,
        "mpi" => Bootstrap::Mpi,
        "nvshmem" => Bootstrap::Nvshmem,
        other => {
            return Err(misuse(format!(
                "init: unknown initializer_method {other:?}: use \"auto\", \"single\", \
                 \"launcher\" (pgas-run), \"mpi\", \"nvshmem\" (NVSHMEM_BOOTSTRAP) or \"uid\" \
                 (with uid=, rank= and nranks=)"
            )))
        }
    };
    let unique = if by_uid {
        Some(unique_id_args(uid, rank, nranks)?)
    } else if uid.is_some() || rank.is_some() || nranks.is_some() {
        return Err(misuse(format!(
            "init: uid=, rank= and nranks= go with initializer_method=\"uid\", not {method:?}"
        )));
    } else {
        None
    };
    if lock(&CURRENT).is_some() {
        return Err(to_py(pgas_runtime::Error::AlreadyInitialized));
    }
    let mut builder = pgas_runtime::builder().bootstrap(bootstrap);
    if let Some(args) = unique {
        builder = builder.unique_id(args.id, args.rank, args.n_pes);
    }
    if let Some(bytes) = heap_size {
        builder = builder.heap_size(bytes);
    }
    if let Some(ordinal) = device {
        builder = builder.device(ordinal);
    }
    // Other PEs may take a while to arrive (the bootstrap waits for them): let other Python
    // threads run meanwhile.
    let state = py.detach(|| -> PyResult<State> {
        let pgas = builder.init().map_err(to_py)?;
        let n = pgas.n_pes();
        // Collective like every allocation: every PE runs init at the same point.
        let gathered = pgas.alloc::<u64>(2 * n).map_err(to_py)?;
        let own = pgas.alloc::<u64>(2).map_err(to_py)?;
        Ok(State {
            my_pe: pgas.my_pe(),
            n_pes: n,
            device: pgas.device_ordinal(),
            agree: Mutex::new(Some((gathered, own))),
            staging: Mutex::new(None),
            foreign: Mutex::new(Vec::new()),
            comms: Mutex::new((0, BTreeMap::new())),
            plans: Mutex::new(BTreeMap::new()),
            registry: Mutex::new(Registry::default()),
            pgas: Mutex::new(Some(pgas)),
        })
    })?;
    let state = Arc::new(state);
    *lock(&CURRENT) = Some(state.clone());
    // Finalize at interpreter exit, unless the program finalized or is dying of an exception.
    let at_exit = wrap_pyfunction!(finalize_at_exit, py)?;
    py.import("atexit")?.call_method1("register", (at_exit,))?;
    Ok(Context { state })
}

/// The unique-id start-up's arguments, checked: all three given, the id's bytes whole, `rank`
/// in `0..nranks`.
fn unique_id_args(
    uid: Option<Vec<u8>>, rank: Option<usize>, nranks: Option<usize>,
) -> PyResult<pgas_runtime::bootstrap::UniqueIdArgs> {
    let (Some(uid), Some(rank), Some(nranks)) = (uid, rank, nranks) else {
        return Err(misuse(
            "init: the unique-id start-up needs uid= (bytes of get_unique_id() on rank 0), \
             rank= and nranks="
                .into(),
        ));
    };
    let want = pgas_runtime::bootstrap::UniqueId::LEN;
    if uid.len() != want {
        return Err(misuse(format!(
            "init: uid has {} bytes, a unique id has {want}: pass the bytes of \
             pgas.get_unique_id() from rank 0 unchanged",
            uid.len()
        )));
    }
    if rank >= nranks {
        return Err(misuse(format!(
            "init: rank {rank} is not below nranks {nranks}: ranks are 0 to nranks - 1"
        )));
    }
    let id = pgas_runtime::bootstrap::UniqueId::from_bytes(&uid).map_err(to_py)?;
    Ok(pgas_runtime::bootstrap::UniqueIdArgs {
        id,
        rank,
        n_pes: nranks,
    })
}

/// A fresh NVSHMEM unique id (128 bytes) for the unique-id start-up: rank 0 makes it, the
/// program hands the bytes to every rank (a file, a socket, MPI, a torch.distributed store),
/// and each calls `init(uid=..., rank=..., nranks=...)`. Needs NVSHMEM, not a GPU, and no
/// `init` first.
#[pyfunction]
pub(crate) fn get_unique_id<'py>(py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    let id = py
        .detach(pgas_runtime::bootstrap::UniqueId::new)
        .map_err(to_py)?;
    Ok(pyo3::types::PyBytes::new(py, id.as_bytes()))
}

/// NVSHMEM's state of this process (`nvshmemx_init_status`): 0 before `init` (and after
/// `finalize`), 2 initialized, 3 several PEs on one GPU with only some APIs (no CUDA MPS), 4
/// several PEs on one GPU with every API. NVSHMEM4Py's `InitStatus` names them.
#[pyfunction]
pub(crate) fn init_status() -> i32 {
    match lock(&CURRENT).as_ref().map(|s| s.pgas()) {
        Some(Ok(pgas)) => pgas.init_status(),
        _ => 0,
    }
}

/// Frees every symmetric tensor and finalizes NVSHMEM. Collective: every PE calls it at the
/// same point. Refused on every PE (`CollectiveMismatchError`) while a DLPack view (a torch
/// tensor made from a pgas tensor) is alive on any PE, or when the PEs hold different numbers
/// of tensors. Afterwards every pgas call raises `NotInitializedError`. pgas calls it at
/// interpreter exit when the program did not (skipped when an uncaught exception ends the
/// program: the other PEs are not finalizing with this one).
#[pyfunction]
pub(crate) fn finalize(py: Python<'_>) -> PyResult<()> {
    let state = current()?;
    py.detach(|| state.finalize(false))?;
    lock(&CURRENT).take();
    Ok(())
}

/// `finalize` at interpreter exit (registered by `init`).
#[pyfunction]
fn finalize_at_exit(py: Python<'_>) -> PyResult<()> {
    let Some(state) = lock(&CURRENT).take() else {
        return Ok(());
    };
    let sys = py.import("sys")?;
    let dying = sys.hasattr("last_exc")? || sys.hasattr("last_value")?;
    if dying {
        eprintln!(
            "pgas: PE {}: an uncaught exception ends the program, so pgas skips the collective \
             frees and NVSHMEM finalize (the other PEs are not finalizing with this one)",
            state.my_pe
        );
        // Keep the state (and NVSHMEM) as it is: the memory goes with the process.
        std::mem::forget(state);
        return Ok(());
    }
    py.detach(|| state.finalize(true))
}

/// The pgas context of this process (`pgas.init()`): `my_pe`, `n_pes`, `device`, `heap_size`
/// and `stream` as properties, and every function of the module as a method
/// (`ctx.put(dst, src, pe)` is `pgas.put(dst, src, pe)`).
#[pyclass(module = "pgas", name = "Context", frozen)]
pub(crate) struct Context {
    pub(crate) state: Arc<State>,
}

#[pymethods]
impl Context {
    /// This PE's number, 0 to `n_pes - 1`.
    #[getter]
    fn my_pe(&self) -> usize {
        self.state.my_pe
    }

    /// The number of PEs.
    #[getter]
    fn n_pes(&self) -> usize {
        self.state.n_pes
    }

    /// This PE's CUDA device ordinal (`torch.device("cuda", ctx.device)` is its GPU).
    #[getter]
    fn device(&self) -> usize {
        self.state.device
    }

    /// The symmetric heap size of each PE, in bytes.
    #[getter]
    fn heap_size(&self) -> PyResult<usize> {
        Ok(self.state.pgas()?.heap_size())
    }

    /// The address of pgas's CUDA stream (`torch.cuda.ExternalStream(ctx.stream)` orders
    /// PyTorch work with pgas's).
    #[getter]
    fn stream(&self) -> PyResult<usize> {
        Ok(self.state.pgas()?.stream().cu_stream() as usize)
    }

    /// The module's function `name` (the context's methods are the module's functions): any
    /// function of the module but `init` and `context` (which make a context) and the private
    /// ones. Looked up in the module, so the list of functions has one home: where they are
    /// registered.
    fn __getattr__(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        let forwarded = !matches!(name, "init" | "context") && !name.starts_with('_');
        let attr = py.import("pgas")?.getattr(name).ok();
        match attr {
            Some(f) if forwarded && f.is_instance_of::<pyo3::types::PyCFunction>() => {
                Ok(f.unbind())
            }
            _ => Err(pyo3::exceptions::PyAttributeError::new_err(format!(
                "pgas.Context has no attribute {name:?}"
            ))),
        }
    }

    /// `with pgas.init() as ctx:` gives the context to the block.
    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Finalizes at the end of the `with` block (collective, as `pgas.finalize()`). When the
    /// block raised, this PE skips it: the other PEs are not finalizing with it (they may be
    /// waiting in a collective for it), so a collective finalize would hang; the exception
    /// goes on, and under `pgas-run` the job ends.
    fn __exit__(
        &self, py: Python<'_>, exc_type: Option<&Bound<'_, PyAny>>,
        _exc_value: Option<&Bound<'_, PyAny>>, _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_some_and(|t| !t.is_none()) {
            return Ok(false);
        }
        if lock(&CURRENT)
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, &self.state))
        {
            finalize(py)?;
        }
        Ok(false)
    }

    /// `pgas.Context(my_pe=..., n_pes=..., device=cuda:N)`.
    fn __repr__(&self) -> String {
        format!(
            "pgas.Context(my_pe={}, n_pes={}, device=cuda:{})",
            self.state.my_pe, self.state.n_pes, self.state.device
        )
    }
}
