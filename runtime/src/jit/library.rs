//! What link-time kernels link against, built once per machine (kept in the disk cache,
//! checksummed like kernels, so a corrupt or truncated copy is rebuilt) and once per process in
//! memory: the pgas NVSHMEM library of a prelude (`pgas_codegen::nvcall::library`, every
//! NVSHMEM call wrapper, as LTO-IR) and the collective objects (`nvcall::collective_objects`,
//! one NVSHMEM collective wrapper each, as a relocatable CUBIN).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pgas_codegen::Prelude;

use super::disk::{CacheKey, DiskCache, Lookup};
use crate::error::Result;

/// The libraries and objects this process has, by cache key (which covers the source,
/// architecture, options and versions).
static LOADED: Mutex<Option<HashMap<CacheKey, Arc<[u8]>>>> = Mutex::new(None);

/// The lock of each key a thread of this process is building or looking up, so that threads
/// wanting the same library or object (programs compiled side by side) build it once: the
/// disk cache's entry lock does that across processes, and only where there is a cache.
static BUILDING: Mutex<Option<HashMap<CacheKey, Arc<Mutex<()>>>>> = Mutex::new(None);

/// The bytes of `what` (a library or a collective object) under `key` (which covers its
/// source, architecture, options and versions): from memory, the disk cache, or `build` (then
/// stored). PEs sharing the cache build it once: the others wait on its entry's lock; threads
/// of one process wait on the key's lock in `BUILDING`.
pub(crate) fn get(
    key: CacheKey, disk: Option<&DiskCache>, what: Built<'_>,
    build: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<Arc<[u8]>> {
    let loaded = || {
        LOADED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashMap::new)
            .get(&key)
            .cloned()
    };
    if let Some(ir) = loaded() {
        return Ok(ir);
    }
    let key_lock = BUILDING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_default()
        .clone();
    let _building = key_lock.lock().unwrap_or_else(|e| e.into_inner());
    // Built by the thread this one waited for.
    if let Some(ir) = loaded() {
        return Ok(ir);
    }
    // A cache that cannot be locked, read or written is skipped (one warning; see `disk.rs`).
    let _lock = disk.map(|d| d.lock_or_warn(&key, true));
    let cached = match disk.map(|d| d.load_or_miss(&key)) {
        Some(Lookup::Hit(ir)) => Some(ir),
        _ => None,
    };
    let ir: Arc<[u8]> = match cached {
        Some(ir) => ir.into(),
        None => {
            let _span = tracing::info_span!("pgas.compile_library", what = %what).entered();
            let t = std::time::Instant::now();
            let ir = build()?;
            eprintln!(
                "pgas: JIT: built {what} in {:.2} s (once per machine: kept in the kernel cache)",
                t.elapsed().as_secs_f64()
            );
            if let Some(d) = disk {
                d.store_or_warn(&key, &ir);
            }
            ir.into()
        }
    };
    LOADED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, ir.clone());
    Ok(ir)
}

/// Whether `key`'s library or object is built already: in this process, or in the disk cache
/// (its entry is there; [`get`] checks it when it reads it).
pub(crate) fn built(key: &CacheKey, disk: Option<&DiskCache>) -> bool {
    let loaded = LOADED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .is_some_and(|m| m.contains_key(key));
    loaded || disk.is_some_and(|d| d.path(key).is_file())
}

/// What [`get`] builds, for its progress line and span.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Built<'a> {
    /// The pgas NVSHMEM library of a prelude.
    Library(Prelude),
    /// The object of one NVSHMEM collective wrapper, with its register cap.
    Collective { name: &'a str, registers: u32 },
}

impl std::fmt::Display for Built<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Built::Library(p) => write!(f, "the NVSHMEM library of the {}", p.name()),
            Built::Collective { name, registers } => write!(
                f,
                "NVSHMEM's collective `{name}` for link-time kernels (at most {registers} \
                 registers a thread)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn key(tag: &str) -> CacheKey {
        CacheKey::new(
            tag,
            "pgas_nvshmem_library_test",
            &[],
            (13, 0),
            "3.4.5",
            (9, 0),
        )
    }

    #[test]
    fn the_library_is_built_once_then_found_and_a_damaged_copy_is_rebuilt() {
        let dir = std::env::temp_dir().join(format!("pgas-library-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let disk = DiskCache::open(&dir).unwrap();
        let builds = Cell::new(0);
        let build = |bytes: &'static [u8]| {
            let builds = &builds;
            move || {
                builds.set(builds.get() + 1);
                Ok(bytes.to_vec())
            }
        };

        // Not on disk: built and stored; then this process has it in memory.
        let k = key(&format!("fresh {}", std::process::id()));
        let ir = get(
            k,
            Some(&disk),
            Built::Library(Prelude::P2p),
            build(b"LTO-IR one"),
        )
        .unwrap();
        assert_eq!((&*ir, builds.get()), (&b"LTO-IR one"[..], 1));
        assert!(matches!(disk.load(&k).unwrap(), Lookup::Hit(b) if b == b"LTO-IR one"));
        let again = get(
            k,
            Some(&disk),
            Built::Library(Prelude::P2p),
            build(b"other"),
        )
        .unwrap();
        assert_eq!((&*again, builds.get()), (&b"LTO-IR one"[..], 1));

        // Another process stored it: loaded from disk, not built.
        let k = key(&format!("stored {}", std::process::id()));
        disk.store(&k, b"LTO-IR two").unwrap();
        let ir = get(
            k,
            Some(&disk),
            Built::Library(Prelude::Barrier),
            build(b"other"),
        )
        .unwrap();
        assert_eq!((&*ir, builds.get()), (&b"LTO-IR two"[..], 1));

        // A truncated copy fails its checksum: rebuilt and stored whole.
        let k = key(&format!("truncated {}", std::process::id()));
        disk.store(&k, b"LTO-IR three, long enough to cut").unwrap();
        let path = disk.path(&k);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 7]).unwrap();
        let ir = get(
            k,
            Some(&disk),
            Built::Library(Prelude::P2p),
            build(b"LTO-IR rebuilt"),
        )
        .unwrap();
        assert_eq!((&*ir, builds.get()), (&b"LTO-IR rebuilt"[..], 2));
        assert!(matches!(disk.load(&k).unwrap(), Lookup::Hit(b) if b == b"LTO-IR rebuilt"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn threads_wanting_one_library_without_a_cache_build_it_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let k = key(&format!("threads {}", std::process::id()));
        let builds = AtomicUsize::new(0);
        let got: Vec<Arc<[u8]>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        get(k, None, Built::Library(Prelude::P2p), || {
                            builds.fetch_add(1, Ordering::SeqCst);
                            // Long enough that the other threads ask while it builds.
                            std::thread::sleep(std::time::Duration::from_millis(200));
                            Ok(b"LTO-IR once".to_vec())
                        })
                        .unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        assert!(got.iter().all(|ir| &**ir == b"LTO-IR once"));
    }

    #[test]
    fn an_unusable_cache_still_gives_the_library() {
        // The directory turns into a regular file under the open cache: nothing below it can be
        // locked, read or written (see disk.rs's test of the same fault).
        let dir = std::env::temp_dir().join(format!("pgas-library-broken-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let disk = DiskCache::open(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::write(&dir, b"").unwrap();
        let k = key(&format!("broken {}", std::process::id()));
        let ir = get(k, Some(&disk), Built::Library(Prelude::P2p), || {
            Ok(b"LTO-IR".to_vec())
        })
        .unwrap();
        assert_eq!(&*ir, b"LTO-IR");
        assert!(disk.warned());
        std::fs::remove_file(dir).unwrap();
    }
}
