//! The pgas context: [`init`], [`PgasBuilder`] and the [`Pgas`] handle.
//!
//! One NVSHMEM runtime per process. `init` brings it up; the handle is a cheap `Clone`
//! (`Arc`); NVSHMEM finalizes once, when the last handle (or the last [`crate::SymTensor`],
//! which holds one) drops, in this order: JIT modules, then NVSHMEM, then MPI if pgas started it.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaStream};

use super::peer_access::{PeerAccess, PEER_ACCESS_VAR};
use super::team_handle::TeamRegistry;
use crate::bootstrap::{self, env, Bootstrap, Bootstrapped};
use crate::error::{Error, Result};
use crate::heap;
use crate::jit::state::{JitState, Target};
use crate::nvshmem::{self, Nvshmem, NvshmemInstall};

/// Where this process is in NVSHMEM's one-shot lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Never initialized.
    Fresh,
    /// A `Pgas` is alive.
    Live,
    /// Initialized and finalized: NVSHMEM cannot be initialized again in this process.
    Finalized,
}

/// Held for the whole of `init`, so concurrent calls are serialized.
static PHASE: Mutex<Phase> = Mutex::new(Phase::Fresh);

/// Whether `init` may proceed in this phase.
pub(crate) fn admit(phase: Phase) -> Result<()> {
    match phase {
        Phase::Fresh => Ok(()),
        Phase::Live => Err(Error::AlreadyInitialized),
        Phase::Finalized => Err(Error::Finalized),
    }
}

fn lock_phase() -> std::sync::MutexGuard<'static, Phase> {
    // A panic while holding the lock leaves a valid Phase behind; keep going.
    PHASE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Initializes pgas with the defaults: [`Bootstrap::Auto`], the GPU of this process's local
/// rank (GPU 0 without a launcher), NVSHMEM's heap size (`NVSHMEM_SYMMETRIC_SIZE`, else 1 GiB).
///
/// Call it once per process and clone the handle. Calling it while a handle is alive returns
/// [`Error::AlreadyInitialized`]; after the last handle dropped, [`Error::Finalized`].
pub fn init() -> Result<Pgas> {
    builder().init()
}

/// A builder for non-default settings: `pgas::builder().heap_size(4 << 30).init()?`.
pub fn builder() -> PgasBuilder {
    PgasBuilder::default()
}

/// Settings for [`init`].
#[derive(Clone, Debug, Default)]
pub struct PgasBuilder {
    heap_size: Option<usize>,
    device: Option<usize>,
    bootstrap: Bootstrap,
    unique_id: Option<bootstrap::UniqueIdArgs>,
}

impl PgasBuilder {
    /// Symmetric heap size per PE in bytes (sets `NVSHMEM_SYMMETRIC_SIZE` for NVSHMEM). Every
    /// symmetric allocation comes out of it; the default is NVSHMEM's 1 GiB.
    pub fn heap_size(mut self, bytes: usize) -> Self {
        self.heap_size = Some(bytes);
        self
    }

    /// CUDA device ordinal of this process; by default the local rank's (see
    /// [`bootstrap::pick_device`]).
    pub fn device(mut self, ordinal: usize) -> Self {
        self.device = Some(ordinal);
        self
    }

    /// How the PEs find each other; [`Bootstrap::Auto`] by default.
    pub fn bootstrap(mut self, bootstrap: Bootstrap) -> Self {
        self.bootstrap = bootstrap;
        self
    }

    /// Starts up with a unique id that the program handed around itself
    /// ([`Bootstrap::UniqueId`]): rank 0 made `id` with [`bootstrap::UniqueId::new`] and sent
    /// its bytes to every rank over a channel of the program's (a file, a socket, MPI, a
    /// torch.distributed store); each rank passes its own `rank` in `0..n_pes` and the same
    /// `n_pes`. Every rank of the job must call `init` this way; a rank that never does leaves
    /// the others waiting inside NVSHMEM's bootstrap.
    pub fn unique_id(mut self, id: bootstrap::UniqueId, rank: usize, n_pes: usize) -> Self {
        self.bootstrap = Bootstrap::UniqueId;
        self.unique_id = Some(bootstrap::UniqueIdArgs { id, rank, n_pes });
        self
    }

    /// Brings NVSHMEM up on the chosen GPU. Collective over all PEs.
    pub fn init(self) -> Result<Pgas> {
        let mut phase = lock_phase();
        admit(*phase)?;
        if self.heap_size == Some(0) {
            return Err(Error::InvalidConfig {
                name: "PgasBuilder::heap_size",
                value: "0".to_string(),
                reason: "the symmetric heap needs at least one byte. Fix: pass its size in bytes, \
                         e.g. heap_size(1 << 30), or leave it unset for NVSHMEM's default"
                    .to_string(),
            });
        }
        let method = bootstrap::resolve(self.bootstrap, &env::process)?;
        let peer_access = PeerAccess::parse(env::process(PEER_ACCESS_VAR).as_deref())?;
        bootstrap::check_unique_id(method, self.unique_id.as_ref())?;
        let heap_size = match self.heap_size {
            Some(bytes) => {
                // NVSHMEM reads its heap size only from the environment, and may read its options
                // as soon as the library is loaded: set it before loading.
                std::env::set_var(heap::HEAP_SIZE_VAR, bytes.to_string());
                bytes
            }
            None => match env::process(heap::HEAP_SIZE_VAR) {
                Some(v) => heap::parse_size(&v)?,
                None => heap::DEFAULT_HEAP_SIZE,
            },
        };

        let (nv, install) = nvshmem::load_once()?;

        let count = crate::device::gpu_count()?;
        let device = bootstrap::pick_device(self.device, &env::process, count)?;
        // NVSHMEM binds to the current context, so the GPU is selected before init.
        let ctx = CudaContext::new(device).map_err(Error::cuda("creating the CUDA context"))?;
        let stream = ctx
            .new_stream()
            .map_err(Error::cuda("creating the pgas stream"))?;

        let bootstrapped = bootstrap::run(method, nv, self.unique_id.as_ref())?;
        let raw = nv.raw();
        // SAFETY: NVSHMEM was initialized by bootstrap::run just above.
        let (my_pe, n_pes) = unsafe { (raw.nvshmem_my_pe(), raw.nvshmem_n_pes()) };
        // SAFETY: NVSHMEM is initialized; TEAM_NODE is predefined.
        let node_pes = unsafe { raw.nvshmem_team_n_pes(crate::ffi::NVSHMEMX_TEAM_NODE) };
        let inner = Inner {
            jit: JitState::new(),
            node_pes: node_pes.max(1) as usize,
            my_pe: my_pe as usize,
            n_pes: n_pes as usize,
            device,
            heap_size,
            heap_ledger: crate::heap::Ledger::default(),
            live: crate::heap::LiveSpans::default(),
            stream,
            ctx,
            bootstrap: bootstrapped,
            install,
            nvshmem: nv,
            lost: AtomicBool::new(false),
            teams: Mutex::new(TeamRegistry::default()),
            peer_access,
        };
        *phase = Phase::Live;
        Ok(Pgas {
            inner: Arc::new(inner),
        })
    }
}

/// Everything one initialized NVSHMEM runtime owns. Dropped once, by the last handle.
pub(crate) struct Inner {
    /// JIT-compiled modules, finalized before NVSHMEM.
    pub(crate) jit: JitState,
    pub(crate) my_pe: usize,
    pub(crate) n_pes: usize,
    /// PEs on this node (NVSHMEM's node team): they share a kernel cache.
    pub(crate) node_pes: usize,
    pub(crate) device: usize,
    pub(crate) heap_size: usize,
    /// pgas's live symmetric allocations (see [`crate::heap::Ledger`]).
    pub(crate) heap_ledger: crate::heap::Ledger,
    /// The address ranges of the live symmetric memory, which host calls check regions against.
    pub(crate) live: crate::heap::LiveSpans,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) ctx: Arc<CudaContext>,
    /// Dropped after NVSHMEM finalized (MPI_Finalize must come after it).
    bootstrap: Bootstrapped,
    pub(crate) install: NvshmemInstall,
    pub(crate) nvshmem: &'static Nvshmem,
    /// Set once the CUDA context is known to be unusable (see [`Inner::context_lost`]).
    pub(crate) lost: AtomicBool,
    /// The split teams alive in this context: a destroyed team's handle is refused, not
    /// passed to NVSHMEM (see [`crate::Team`]).
    teams: Mutex<TeamRegistry>,
    /// Which peers count as load/store reachable (`PGAS_PEER_ACCESS`, see `reach.rs`).
    pub(crate) peer_access: PeerAccess,
}

impl Inner {
    /// The split teams alive in this context.
    pub(crate) fn teams(&self) -> std::sync::MutexGuard<'_, TeamRegistry> {
        // A panic while holding the lock leaves a consistent map behind (each change is one
        // insert or remove); keep going.
        self.teams.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks that `pe` is a PE of the world (what NVSHMEM calls take, as `int`).
    pub(crate) fn check_pe(&self, pe: usize) -> Result<i32> {
        if pe < self.n_pes {
            Ok(pe as i32)
        } else {
            Err(Error::InvalidPe {
                pe,
                n_pes: self.n_pes,
            })
        }
    }

    /// Makes this context current on the calling thread (the driver API is per thread).
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(Error::cuda("making the pgas CUDA context current"))
    }

    /// Whether the CUDA context has hit an unrecoverable ("sticky") error, such as a kernel trap
    /// or an illegal address. After one, every NVSHMEM call that touches the GPU (a collective
    /// free, finalize) makes NVSHMEM print an error and exit the process, so teardown must skip
    /// them: the memory goes away with the process. Checked once per teardown step; the first
    /// detection is remembered and reported on stderr.
    pub(crate) fn context_lost(&self) -> bool {
        if self.lost.load(Ordering::Relaxed) {
            return true;
        }
        let status = self.bind().and_then(|()| {
            self.ctx
                .synchronize()
                .map_err(Error::cuda("synchronizing the pgas context"))
        });
        match status {
            Ok(()) => false,
            Err(e) => {
                if !self.lost.swap(true, Ordering::Relaxed) {
                    eprintln!(
                        "pgas: PE {}: {e}; the CUDA context is unusable, so pgas skips the \
                         collective frees and NVSHMEM finalize that would abort the process",
                        self.my_pe
                    );
                }
                true
            }
        }
    }

    /// Waits for `stream` (the pgas stream or a caller's of this context) for at most
    /// `timeout` (polling with a [`Backoff`](super::backoff::Backoff), so a stream blocked on a
    /// signal that never comes cannot hang the caller, and one that passes soon is seen within
    /// a poll); `what` describes the failure.
    pub(crate) fn sync_stream_within(
        &self, stream: &CudaStream, timeout: std::time::Duration, what: impl FnOnce() -> String,
    ) -> Result<()> {
        use cudarc::driver::sys::{cuStreamQuery, CUresult};
        let backoff = super::backoff::Backoff::new();
        loop {
            // SAFETY: the caller's stream is alive while it is borrowed here (the pgas stream
            // while `self` is).
            match unsafe { cuStreamQuery(stream.cu_stream()) } {
                CUresult::CUDA_SUCCESS => return Ok(()),
                CUresult::CUDA_ERROR_NOT_READY => {}
                other => {
                    return other
                        .result()
                        .map_err(Error::cuda("waiting for the stream of a signal wait"))
                }
            }
            if backoff.elapsed() >= timeout {
                return Err(Error::TimedOut {
                    what: what(),
                    waited: timeout,
                });
            }
            backoff.pause();
        }
    }

    /// Waits for the pgas stream.
    pub(crate) fn sync_stream(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(Error::cuda("synchronizing the pgas stream"))
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Errors cannot be returned from drop, and finalization must happen regardless, unless
        // the context is lost, when NVSHMEM would abort the process instead, or a panic unwinds:
        // finalize is collective, and the other PEs are not finalizing with this one, so it
        // would hang this PE instead of letting it die and its launcher stop the job.
        if !std::thread::panicking() && !self.context_lost() {
            let _ = self.sync_stream();
            self.jit.finalize(self.nvshmem);
            // SAFETY: the last use of NVSHMEM in this process: the stream is drained, the JIT's
            // modules are released, and `self` (the only context) is being dropped.
            unsafe { self.nvshmem.raw().nvshmemx_hostlib_finalize() };
        }
        *lock_phase() = Phase::Finalized;
    }
}

/// A handle to the NVSHMEM runtime of this process. Cheap to clone; NVSHMEM finalizes when the
/// last clone (and the last symmetric tensor) is dropped.
#[derive(Clone)]
pub struct Pgas {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for Pgas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pgas")
            .field("my_pe", &self.inner.my_pe)
            .field("n_pes", &self.inner.n_pes)
            .field("device", &self.inner.device)
            .field("heap_size", &self.inner.heap_size)
            .field("bootstrap", &self.inner.bootstrap.method)
            .finish()
    }
}

impl Pgas {
    /// Where this context's kernels load: its CUDA context, JIT state and NVSHMEM.
    pub(crate) fn jit_target(&self) -> Target<'_> {
        Target {
            ctx: &self.inner.ctx,
            jit: &self.inner.jit,
            nvshmem: Some(self.inner.nvshmem),
            node_pes: self.inner.node_pes,
        }
    }

    /// This PE's number in `0..n_pes()`.
    pub fn my_pe(&self) -> usize {
        self.inner.my_pe
    }

    /// Number of PEs.
    pub fn n_pes(&self) -> usize {
        self.inner.n_pes
    }

    /// CUDA ordinal of this PE's GPU.
    pub fn device_ordinal(&self) -> usize {
        self.inner.device
    }

    /// The CUDA context of this PE's GPU (cudarc), for local buffers and other CUDA work.
    pub fn cuda(&self) -> &Arc<CudaContext> {
        &self.inner.ctx
    }

    /// The streaming multiprocessors of this PE's GPU (at least 1): how many blocks of a grid
    /// that must be resident together can count on one each.
    pub fn sm_count(&self) -> Result<usize> {
        let sms = self
            .inner
            .ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(Error::cuda("reading the GPU's SM count"))?;
        Ok(sms.max(1) as usize)
    }

    /// The compute capability of this PE's GPU, (major, minor): (9, 0) on H100 and H200, whose
    /// sm_90a kernels (`pgas::gemm`, `pgas::attention`) need it.
    pub fn compute_capability(&self) -> Result<(u32, u32)> {
        use cudarc::driver::sys::CUdevice_attribute as A;
        let read = |a| {
            self.inner
                .ctx
                .attribute(a)
                .map_err(Error::cuda("reading the GPU's compute capability"))
        };
        let major = read(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = read(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        Ok((major.max(0) as u32, minor.max(0) as u32))
    }

    /// The stream pgas issues its host-side RMA, collectives and copies on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.inner.stream
    }

    /// Symmetric heap size per PE, in bytes.
    pub fn heap_size(&self) -> usize {
        self.inner.heap_size
    }

    /// The bootstrap that brought the PEs together.
    pub fn bootstrap(&self) -> Bootstrap {
        self.inner.bootstrap.method
    }

    /// The loaded NVSHMEM host library.
    pub(crate) fn nvshmem(&self) -> &Nvshmem {
        self.inner.nvshmem
    }

    /// NVSHMEM's view of this process (`nvshmemx_init_status`): 2 initialized, 3 initialized
    /// with several PEs on a GPU but only some APIs (limited MPG: no CUDA MPS, or shares over
    /// 100%), 4 several PEs on a GPU with every API (full MPG).
    pub fn init_status(&self) -> i32 {
        // SAFETY: a query of NVSHMEM's state, callable at any time.
        unsafe { self.nvshmem().raw().nvshmemx_init_status() }
    }

    /// The running NVSHMEM library's version, `(major, minor, patch)`.
    pub fn nvshmem_version(&self) -> (u32, u32, u32) {
        self.inner.nvshmem.version()
    }

    /// The OpenSHMEM specification version that NVSHMEM implements, `(major, minor)`.
    pub fn spec_version(&self) -> (u32, u32) {
        self.inner.nvshmem.spec_version()
    }

    /// The NVSHMEM install in use (its headers are what the JIT compiles against).
    pub fn install(&self) -> &NvshmemInstall {
        &self.inner.install
    }

    /// Checks that `pe` is a PE of the world.
    pub(crate) fn check_pe(&self, pe: usize) -> Result<i32> {
        self.inner.check_pe(pe)
    }
}

// The handle is shared across threads; keep every part of `Inner` thread-safe.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Pgas>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_is_admitted_once_per_process() {
        assert!(admit(Phase::Fresh).is_ok());
        let twice = admit(Phase::Live).unwrap_err().to_string();
        assert!(
            twice.contains("already initialized") && twice.contains("Clone"),
            "{twice}"
        );
        let after = admit(Phase::Finalized).unwrap_err().to_string();
        assert!(
            after.contains("finalized") && after.contains("cannot be initialized twice"),
            "{after}"
        );
        assert!(after.contains("Keep one `Pgas` handle alive"), "{after}");
    }
}
