//! `pgas` for Python: NVSHMEM's host API over pgas's runtime (init, symmetric tensors, RMA,
//! signals, atomics, barriers, collectives, teams), with the names NVSHMEM4Py users know, and
//! symmetric tensors handed to PyTorch, CuPy or JAX through DLPack without a copy.
//!
//! ```python
//! import pgas, torch
//! pgas.init()                             # one per process; pgas-run / mpirun / one PE
//! t = pgas.alloc((4, 1024), "float32")    # symmetric: collective, zeroed
//! x = torch.from_dlpack(t)                # the same memory: x.data_ptr() == t.data_ptr
//! x[1] += 1.0; torch.cuda.synchronize()   # torch writes it ...
//! pgas.put(t, t, (pgas.my_pe() + 1) % pgas.n_pes())   # ... pgas sends it to the next PE
//! pgas.barrier_all()                      # the peer's torch view now holds our row
//! del x; pgas.free_tensor(t)              # explicit, collective free
//! pgas.finalize()
//! ```
//!
//! The module is a thin layer: each call checks its Python arguments and forwards to
//! `pgas-runtime`, whose `Err` comes back as an exception of the `pgas.PgasError` hierarchy
//! carrying pgas's message (what went wrong and what to do); no Rust panic crosses into Python.
//! Memory is freed by `free_tensor` (collective, checked across PEs) or at `finalize`, never by
//! the garbage collector: PEs collect in different orders, and a collective free run by one PE's
//! collector while another PE is elsewhere would hang both (`state.rs`).

// Every public item is documented (docs are part of the feature).
#![deny(missing_docs)]

mod coll;
mod device;
mod dtype;
mod errors;
mod kernel;
mod library;
mod locks;
mod ops;
mod state;
mod stream;
mod team;
mod tensor;
mod torch_tensor;

use pyo3::prelude::*;

/// The native module `pgas._pgas` (the file is `pgas/_pgas.abi3.so`); the package `pgas`
/// (`python/pgas/__init__.py`) re-exports it.
#[pymodule]
#[pyo3(name = "_pgas")]
fn pgas(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add("__version__", pgas_runtime::info::VERSION)?;
    m.add("DTYPES", dtype::NAMES.to_vec())?;
    m.add_class::<state::Context>()?;
    m.add_class::<tensor::Tensor>()?;
    m.add_class::<tensor::PeerTensor>()?;
    team::register(m)?;
    m.add_class::<kernel::Kernel>()?;
    m.add_function(wrap_pyfunction!(kernel::kernel, m)?)?;
    m.add_function(wrap_pyfunction!(kernel::finish_compiles, m)?)?;
    ops::register(m)?;
    coll::register(m)?;
    library::register(m)?;
    device::register(m)?;
    Ok(())
}
