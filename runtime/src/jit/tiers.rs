//! Two tiers for kernels that call NVSHMEM's device collectives (`reduce_block`, ...).
//!
//! Such a kernel takes a quarter minute to compile at full optimization: NVVM and ptxas on
//! NVSHMEM's algorithm (docs/jit.md, "Tiers"). So the build loads it first from a *quick* build
//! ([`Toolchain::quick_tier`]: the collective linked as an object compiled at
//! `--Ofast-compile=max`, seconds cold, a fraction of a second for each next kernel calling the
//! same collective) and hands the *full* build to a worker thread here. The worker has helper
//! processes compile it into the disk cache (so this process's NVRTC stays free), or compiles it
//! itself without them; the launch path swaps it in at the next launch outside stream capture
//! (`JitState::swap_upgrades`), and `Pgas::finish_compiles` waits for all of them. Both builds
//! run NVSHMEM's same algorithm on the same device state, so PEs that swap at different launches
//! still meet in it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::batch::{self, Image};
use super::disk::DiskCache;
use super::fn_key::FnKey;
use super::helpers::{self, Helpers};
use super::key::Keyed;
use super::toolchain::Toolchain;
use pgas_codegen::Prelude;

/// How often a worker looks at its helpers and at entries another process holds.
const POLL: Duration = Duration::from_millis(50);

/// A kernel loaded from its quick build: its in-memory key and its full build's source and key.
pub(crate) struct Upgrade {
    pub key: FnKey,
    pub kernel: Keyed,
}

/// A full build ready to be loaded in place of the quick one.
pub(crate) struct Ready {
    pub key: FnKey,
    pub kernel: Keyed,
    pub image: Image,
}

/// The full builds of one JIT state: the workers compiling them and those ready to swap in.
#[derive(Default)]
pub(crate) struct Tiers {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Default)]
struct Shared {
    /// Set when `ready` has entries: the one thing a launch reads.
    any_ready: AtomicBool,
    ready: Mutex<Vec<Ready>>,
    /// Set when the context finalizes: workers stop at their next look and end their helpers.
    stop: AtomicBool,
}

/// Where a worker's full builds go and who compiles them.
pub(crate) struct Workshop {
    pub toolchain: Arc<Toolchain>,
    pub disk: Option<Arc<DiskCache>>,
    pub arch: (u32, u32),
    pub node_pes: usize,
    /// The helper executable ([`helpers::helper_exe`]); `None`: the worker compiles alone.
    pub helper: Option<std::path::PathBuf>,
}

impl Tiers {
    /// Whether a full build is ready to swap in.
    #[inline]
    pub(crate) fn any_ready(&self) -> bool {
        self.shared.any_ready.load(Ordering::Acquire)
    }

    /// The full builds ready to swap in, taken.
    pub(crate) fn take_ready(&self) -> Vec<Ready> {
        let mut ready = lock(&self.shared.ready);
        self.shared.any_ready.store(false, Ordering::Release);
        std::mem::take(&mut *ready)
    }

    /// Starts a worker compiling the full builds of `upgrades`.
    pub(crate) fn start(&self, upgrades: Vec<Upgrade>, shop: Workshop) {
        if upgrades.is_empty() {
            return;
        }
        let shared = self.shared.clone();
        let spawned = std::thread::Builder::new()
            .name("pgas-jit-tiers".to_owned())
            .spawn(move || work(&shared, upgrades, &shop));
        match spawned {
            Ok(handle) => lock(&self.workers).push(handle),
            // The kernels keep their quick builds; say so once.
            Err(e) => eprintln!(
                "pgas: warning: JIT: could not start the thread that compiles full builds ({e}); \
                 kernels calling NVSHMEM's device collectives keep their quick builds \
                 (PGAS_JIT_TIERS=off compiles the full build at once)"
            ),
        }
    }

    /// Waits until every worker started so far has finished.
    pub(crate) fn wait(&self) {
        let workers = std::mem::take(&mut *lock(&self.workers));
        for w in workers {
            let _ = w.join();
        }
    }

    /// Stops the workers (each ends its helpers at its next look) without waiting for them: a
    /// compile in this process cannot be interrupted, and what they still do touches only the
    /// disk cache. Ready builds are dropped.
    pub(crate) fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        lock(&self.workers).clear();
        self.take_ready();
    }
}

/// A worker: helper processes compile the full builds into the disk cache, then each is taken
/// from there (waiting for any another process of the node holds) or, where none did, compiled
/// here.
fn work(shared: &Shared, upgrades: Vec<Upgrade>, shop: &Workshop) {
    // Nothing waits on a full build yet: where this thread compiles one itself (no helper
    // executable, as in a Python process), the builds launches wait on go first.
    helpers::lower_priority(0);
    let tc = &*shop.toolchain;
    let disk = shop.disk.as_deref();
    let stopped = || shared.stop.load(Ordering::Acquire);
    if let (Some(disk), Some(exe)) = (disk, &shop.helper) {
        let jobs: Vec<_> = upgrades
            .iter()
            .filter_map(|u| batch::job(tc, Some(Prelude::Full), &[&u.kernel], shop.arch).ok())
            .collect();
        // At least one helper even where the node's CPUs are all taken by PEs: the point is to
        // keep this process's NVRTC free for the kernels its launches wait for.
        let count = helpers::helper_count(shop.node_pes).clamp(1, jobs.len().max(1));
        let env = tc.helper_env();
        let started = Helpers::start(exe, disk, &jobs, shop.arch, count, &env);
        if let Some(mut h) = started.map(Helpers::in_background) {
            while !h.finished() {
                if stopped() {
                    return;
                }
                std::thread::sleep(POLL);
            }
        }
    }
    for u in upgrades {
        let image = loop {
            if stopped() {
                return;
            }
            let members = [&u.kernel];
            match batch::compile(
                tc,
                disk,
                None,
                Some(Prelude::Full),
                &members,
                shop.arch,
                false,
            ) {
                Ok(Some(mut out)) => break out.pop().and_then(|r| r.ok()),
                // Another process of the node holds it: look again.
                Ok(None) => std::thread::sleep(POLL),
                Err(_) => break None,
            }
        };
        match image {
            Some(image) => {
                lock(&shared.ready).push(Ready {
                    key: u.key,
                    kernel: u.kernel,
                    image,
                });
                shared.any_ready.store(true, Ordering::Release);
            }
            None => eprintln!(
                "pgas: warning: JIT: the full build of {} failed; it keeps running its quick \
                 build (PGAS_JIT_TIERS=off reports the full build's error at launch)",
                u.kernel.src.display
            ),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// These compile a point-to-point kernel with NVRTC (no GPU) as a worker's "full build": the
/// worker does not look at what it compiles. CI points `PGAS_CUDA_HOME` and `PGAS_NVSHMEM_HOME`
/// at the pinned wheels.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::jit::fn_key::KernelId;
    use crate::jit::source::Source;
    use crate::kernel::Variant;

    const ARCH: (u32, u32) = (9, 0);

    fn toolchain() -> Arc<Toolchain> {
        Arc::new(
            Toolchain::discover()
                .unwrap_or_else(|e| panic!("set PGAS_CUDA_HOME / PGAS_NVSHMEM_HOME: {e}")),
        )
    }

    fn cache(tag: &str) -> (Arc<DiskCache>, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("pgas-tiers-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        (Arc::new(DiskCache::open(&dir).unwrap()), dir)
    }

    fn upgrade(tc: &Toolchain, name: &str) -> Upgrade {
        let text = format!(
            "#define PGAS_KERNEL_NAME {name}\n{}#line 10 \"src/{name}.rs\"\nextern \"C\" __global__ void PGAS_KERNEL_NAME(float* x, unsigned long long n) {{\nif (n) nvshmem_float_p(x, 1.0f, 0);\n}}\n",
            pgas_codegen::PRELUDE_P2P
        );
        let src = Source {
            display: format!("{name}_rust"),
            cuda_name: name.to_owned(),
            text,
            batchable: true,
        };
        Upgrade {
            key: FnKey::new(KernelId::Raw(7), Variant::Plain, &[]).unwrap(),
            kernel: tc.keyed(0, src, ARCH),
        }
    }

    fn shop(tc: Arc<Toolchain>, disk: &Arc<DiskCache>) -> Workshop {
        Workshop {
            toolchain: tc,
            disk: Some(disk.clone()),
            arch: ARCH,
            node_pes: 1,
            helper: None,
        }
    }

    #[test]
    fn a_worker_compiles_the_full_build_into_the_cache_and_marks_it_ready() {
        let tc = toolchain();
        let (disk, dir) = cache("ready");
        let up = upgrade(&tc, "tiers_full");
        let want = up.kernel.key;
        let tiers = Tiers::default();
        assert!(!tiers.any_ready());
        tiers.start(vec![up], shop(tc, &disk));
        tiers.wait();
        assert!(tiers.any_ready(), "a finished worker's build is ready");
        let ready = tiers.take_ready();
        assert!(!tiers.any_ready() && tiers.take_ready().is_empty());
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].image.key, want);
        assert!(ready[0].image.cubin.windows(10).any(|w| w == b"tiers_full"));
        let stored = batch::lookup(&disk, &want).expect("the next process finds it cached");
        assert_eq!(stored.cubin, ready[0].image.cubin);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_worker_waits_for_a_build_another_process_holds_and_takes_it_from_the_cache() {
        let tc = toolchain();
        let (disk, dir) = cache("held");
        let up = upgrade(&tc, "tiers_held");
        let want = up.kernel.key;
        // Another PE compiling the same full build holds its entry.
        let held = disk.try_lock(&want).unwrap().expect("nobody holds it yet");
        let tiers = Tiers::default();
        tiers.start(vec![up], shop(tc, &disk));
        std::thread::sleep(POLL * 6);
        assert!(
            !tiers.any_ready(),
            "nothing is ready while the entry is held"
        );
        // What that PE stores is what the worker takes (not a compile of its own).
        disk.store(&want, b"\x7fELF the other PE's build").unwrap();
        drop(held);
        tiers.wait();
        let ready = tiers.take_ready();
        assert_eq!(&ready[0].image.cubin[..], b"\x7fELF the other PE's build");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_stopped_state_makes_nothing_ready() {
        let tc = toolchain();
        let (disk, dir) = cache("stop");
        let tiers = Tiers::default();
        tiers.stop();
        tiers.start(vec![upgrade(&tc, "tiers_stopped")], shop(tc, &disk));
        std::thread::sleep(POLL * 4);
        assert!(!tiers.any_ready() && tiers.take_ready().is_empty());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
