//! The context: `my_pe`, `n_pes`, `context`, `get_version`.

use pyo3::prelude::*;

use crate::state::{self, current};

/// This PE's number, 0 to `n_pes() - 1`.
#[pyfunction]
pub(super) fn my_pe() -> PyResult<usize> {
    Ok(current()?.my_pe)
}

/// The number of PEs.
#[pyfunction]
pub(super) fn n_pes() -> PyResult<usize> {
    Ok(current()?.n_pes)
}

/// The context `pgas.init()` returned.
#[pyfunction]
pub(super) fn context() -> PyResult<state::Context> {
    Ok(state::Context { state: current()? })
}

/// `(pgas version, (NVSHMEM major, minor, patch))`; the NVSHMEM part needs `init`.
#[pyfunction]
pub(super) fn get_version() -> PyResult<(&'static str, (u32, u32, u32))> {
    Ok((
        pgas_runtime::info::VERSION,
        current()?.pgas()?.nvshmem_version(),
    ))
}
