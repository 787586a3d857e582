//! The pgas NVSHMEM library: every NVSHMEM call wrapper of a prelude
//! (`pgas_codegen::nvcall::library`) compiled by NVRTC to LTO-IR, which link-time kernels link
//! against. Built once per machine (kept in the disk cache, checksummed like kernels, so a
//! corrupt or truncated copy is rebuilt) and once per process in memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pgas_codegen::Prelude;

use super::disk::{CacheKey, DiskCache, Lookup};
use crate::error::Result;

/// The libraries this process has, by cache key (which covers prelude, architecture, options
/// and versions).
static LOADED: Mutex<Option<HashMap<CacheKey, Arc<[u8]>>>> = Mutex::new(None);

/// The LTO-IR of `prelude`'s library under `key` (which covers the prelude, architecture,
/// options and versions): from memory, the disk cache, or `build` (then stored). PEs sharing
/// the cache build it once: the others wait on its entry's lock.
pub(crate) fn get(
    key: CacheKey,
    disk: Option<&DiskCache>,
    prelude: Prelude,
    build: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<Arc<[u8]>> {
    if let Some(ir) = LOADED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .get(&key)
    {
        return Ok(ir.clone());
    }
    let _lock = disk.map(|d| d.lock(&key)).transpose()?;
    let cached = match disk.map(|d| d.load(&key)).transpose()? {
        Some(Lookup::Hit(ir)) => Some(ir),
        _ => None,
    };
    let ir: Arc<[u8]> = match cached {
        Some(ir) => ir.into(),
        None => {
            let _span =
                tracing::info_span!("pgas.compile_library", prelude = prelude.name()).entered();
            let t = std::time::Instant::now();
            let ir = build()?;
            eprintln!(
                "pgas: JIT: built the NVSHMEM library of the {} in {:.2} s (once per machine: \
                 kept in the kernel cache)",
                prelude.name(),
                t.elapsed().as_secs_f64()
            );
            if let Some(d) = disk {
                d.store(&key, &ir)?;
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
