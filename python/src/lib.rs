//! `pgas` for Python: a pgas context and its symmetric tensors, handed to PyTorch (or any
//! framework that speaks DLPack) and taken back without a copy.
//!
//! ```python
//! import pgas, torch
//! ctx = pgas.init()                       # one per process; pgas-run / mpirun / one PE
//! t = ctx.alloc((4, 1024), "float32")     # symmetric: collective, zeroed
//! x = torch.from_dlpack(t)                # the same memory: x.data_ptr() == t.data_ptr
//! x[1] += 1.0                             # torch writes it ...
//! torch.cuda.synchronize()
//! ctx.put(t, t, (ctx.my_pe + 1) % ctx.n_pes)   # ... pgas sends it to the next PE
//! ctx.barrier_all()                       # the peer's torch view now holds our row
//! y = ctx.from_dlpack(x[2])               # a torch view of symmetric memory, back as a pgas Tensor
//! ```
//!
//! The module is a thin layer: each call checks its Python arguments and forwards to
//! `pgas-runtime`, whose `Err` comes back as a `pgas.PgasError` carrying pgas's message (what
//! went wrong and what to do); no Rust panic crosses into Python (pyo3 turns one into
//! `pyo3_runtime.PanicException`, and these functions do not panic on bad input). The
//! collective rules of the Rust API hold: allocate, and let tensors be freed, in the same order
//! on every PE (`docs/runtime.md`, "Handing tensors to PyTorch").

// Every public item is documented (docs are part of the feature).
#![deny(missing_docs)]

mod context;
mod dtype;
mod tensor;

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

create_exception!(
    pgas,
    PgasError,
    PyRuntimeError,
    "An error of the pgas runtime; its message says what went wrong and what to do."
);

/// A pgas error as the Python exception `pgas.PgasError`, with pgas's message.
pub(crate) fn to_py(e: pgas_runtime::Error) -> PyErr {
    PgasError::new_err(e.to_string())
}

/// A misuse found by this module itself (not by the runtime), as `pgas.PgasError`.
pub(crate) fn misuse(message: String) -> PyErr {
    PgasError::new_err(message)
}

/// The Python module `pgas` (the file is `pgas.abi3.so`).
#[pymodule]
#[pyo3(name = "pgas")]
fn pgas(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("PgasError", m.py().get_type::<PgasError>())?;
    m.add("__version__", pgas_runtime::info::VERSION)?;
    m.add("DTYPES", dtype::NAMES.to_vec())?;
    m.add_function(wrap_pyfunction!(context::init, m)?)?;
    m.add_class::<context::Context>()?;
    m.add_class::<tensor::Tensor>()?;
    Ok(())
}
