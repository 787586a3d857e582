//! Ordering: `quiet`, `fence`, `barrier_all`, `sync_all`, `barrier`. Without `stream=` each
//! waits for pgas's stream on the host, as the runtime's plain forms do; with it, the `_on` form
//! is queued on that stream and the call returns, as NVSHMEM4Py's do: work queued on the stream
//! after it runs after it, and the host waits only when it synchronizes the stream.

use pyo3::prelude::*;

use super::call::{run, Call};
use crate::errors::to_py;
use crate::team::Team;

/// Runs `plain` (the runtime's form that waits for pgas's stream) or, with `stream=`, `on` of
/// that stream, which the host does not wait for.
fn ordering(
    call: &Call<'_>, plain: impl FnOnce() -> pgas_runtime::Result<()>,
    on: impl FnOnce(&cudarc::driver::CudaStream) -> pgas_runtime::Result<()>,
) -> PyResult<()> {
    match call.user {
        None => plain().map_err(to_py),
        Some(user) => on(user).map_err(to_py),
    }
}

/// Completes every put and get this PE issued (`nvshmemx_quiet_on_stream`), then waits for
/// pgas's stream. With `stream=`, the quiet is queued on that stream (its later work runs after
/// it) and the call returns without waiting.
#[pyfunction]
#[pyo3(signature = (*, stream=None))]
pub(super) fn quiet(py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    run(py, stream, |call| {
        let pgas = call.pgas;
        ordering(call, || pgas.quiet(), |s| pgas.quiet_on(s))
    })
}

/// Orders this PE's puts to each PE (`nvshmem_fence`): puts issued after it reach a PE after
/// those issued before it. (NVSHMEM has no on-stream fence, so no `stream=`.)
#[pyfunction]
pub(super) fn fence(py: Python<'_>) -> PyResult<()> {
    run(py, None, |call| call.pgas.fence().map_err(to_py))
}

/// Barrier over all PEs that also completes every put and get issued before it
/// (`nvshmemx_barrier_all_on_stream`), then waits for pgas's stream: afterwards every PE's
/// framework views show what was put there. With `stream=`, it is queued on that stream and the
/// call returns: work queued there after it sees the puts.
#[pyfunction]
#[pyo3(signature = (*, stream=None))]
pub(super) fn barrier_all(py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    run(py, stream, |call| {
        let pgas = call.pgas;
        ordering(call, || pgas.barrier_all(), |s| pgas.barrier_all_on(s))
    })
}

/// Synchronizes all PEs without completing outstanding RMA (`nvshmemx_sync_all_on_stream`).
#[pyfunction]
#[pyo3(signature = (*, stream=None))]
pub(super) fn sync_all(py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    run(py, stream, |call| {
        let pgas = call.pgas;
        ordering(call, || pgas.sync_all(), |s| pgas.sync_all_on(s))
    })
}

/// Barrier over `team` that also completes this PE's RMA (`nvshmemx_barrier_on_stream`).
#[pyfunction]
#[pyo3(signature = (team, *, stream=None))]
pub(super) fn barrier(
    py: Python<'_>, team: &Team, stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let team = team.team;
    run(py, stream, |call| {
        let pgas = call.pgas;
        ordering(call, || team.barrier(pgas), |s| team.barrier_on(pgas, s))
    })
}

/// Synchronizes the PEs of `team` without completing outstanding RMA
/// (`nvshmemx_team_sync_on_stream`).
#[pyfunction]
#[pyo3(name = "sync", signature = (team, *, stream=None))]
pub(super) fn team_sync(
    py: Python<'_>, team: &Team, stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let team = team.team;
    run(py, stream, |call| {
        let pgas = call.pgas;
        ordering(call, || team.sync(pgas), |s| team.sync_on(pgas, s))
    })
}

/// Makes the sources of this PE's earlier non-blocking puts reusable without waiting for the
/// data to arrive (`nvshmemx_flush_on_stream`, NVSHMEM 3.7 and later; with an older NVSHMEM,
/// `UnavailableError` naming its version). Without `stream=` the host waits for pgas's stream.
#[pyfunction]
#[pyo3(signature = (*, stream=None))]
pub(super) fn flush(py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    run(py, stream, |call| {
        let pgas = call.pgas;
        ordering(call, || pgas.flush(), |s| pgas.flush_on(s))
    })
}
