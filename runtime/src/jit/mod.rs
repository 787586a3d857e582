//! Placeholder for the JIT, which lives on branch `rt-jit`; that branch replaces this file.
//!
//! The context calls `JitState::finalize` before NVSHMEM finalizes, so JIT-loaded modules
//! can be handed back (`nvshmemx_cumodule_finalize`) while NVSHMEM is still alive.

use crate::nvshmem::Nvshmem;

/// Per-context JIT state (none yet).
#[derive(Debug, Default)]
pub(crate) struct JitState;

impl JitState {
    /// Empty state.
    pub(crate) fn new() -> Self {
        JitState
    }

    /// Releases JIT-loaded modules; nothing to do yet.
    pub(crate) fn finalize(&self, _nvshmem: &Nvshmem) {}
}
