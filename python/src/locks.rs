//! `lock`: a mutex of the module's process-wide state, locked whether or not a thread panicked
//! holding it.

use std::sync::{Mutex, MutexGuard};

/// `m`, locked. A panic while it was held leaves it poisoned, not inconsistent: every critical
/// section of the module leaves consistent data behind (one insert, remove, take or record).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
