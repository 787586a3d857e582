//! Finding, loading and checking NVSHMEM: [`discover::find`] locates an install,
//! [`Nvshmem::load`] opens its host library and checks its version against the headers, and
//! [`transport`] says what its remote transport needs on this machine.

pub mod discover;
mod loader;
pub mod transport;
pub mod version;

pub use discover::{find, FoundVia, NvshmemInstall};
pub use loader::Nvshmem;

/// The process's NVSHMEM, found and loaded once and never unloaded: by `init`, or earlier by
/// [`crate::bootstrap::UniqueId::new`] (rank 0 makes the id before it initializes). NVSHMEM
/// cannot re-initialize anyway, and unloading it under its plugins or atexit handlers is asking
/// for trouble. A failure is returned and not remembered, so a fixed environment can retry.
pub(crate) fn load_once() -> crate::error::Result<(&'static Nvshmem, NvshmemInstall)> {
    static LOADED: std::sync::Mutex<Option<(&'static Nvshmem, NvshmemInstall)>> =
        std::sync::Mutex::new(None);
    // A panic while holding the lock leaves either nothing or a complete entry behind.
    let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((nv, install)) = loaded.as_ref() {
        return Ok((nv, install.clone()));
    }
    let install = find()?;
    let nv: &'static Nvshmem = Box::leak(Box::new(Nvshmem::load(&install)?));
    *loaded = Some((nv, install.clone()));
    Ok((nv, install))
}
