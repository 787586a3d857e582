//! The module's functions, with NVSHMEM4Py's names where pgas has the operation: memory
//! (`alloc`, `from_dlpack`, `free_tensor`, `get_peer_tensor`, `get_multicast_tensor`), RMA
//! (`put`, `get`, their `_nbi` forms), signals (`put_signal`, `signal_op`, `signal_wait`,
//! `signal_fetch`), ordering (`quiet`, `flush`, `fence`, `barrier_all`, `barrier`, `sync_all`,
//! `sync`), atomics
//! (`atomic_*`) and collectives over teams (`broadcast`, `fcollect`, `alltoall`, `reduce`).
//!
//! Each checks its Python arguments, releases the GIL and calls the runtime; the runtime's
//! `Err` comes back as the matching `pgas.PgasError` subclass. `stream=` (a PyTorch, CuPy or
//! cuda.core stream of this PE's GPU) issues the operation on that stream (`stream.rs`).
//!
//! One module a concern: `context` (the PE numbers, the version), `memory` (tensors), `rma`,
//! `signals`, `sync` (quiet, fence, barriers), `collectives`, `atomics`; `call` holds what they
//! share (the registry lookup, the GIL release, the stream). This file lists them and registers
//! the functions.

mod atomics;
pub(crate) mod call;
pub(crate) mod collectives;
mod context;
mod memory;
mod rma;
mod signals;
mod sync;

use pyo3::prelude::*;

use crate::state;
use atomics::add_atomics;
use collectives::{alltoall, broadcast, fcollect, reduce, reducescatter};
use context::{get_version, my_pe, n_pes};
use memory::{
    _views, alloc, free_tensor, from_dlpack, get_multicast_tensor, get_peer_tensor,
    register_external,
};
use rma::{get, get_nbi, put, put_nbi};
use signals::{put_signal, signal_fetch, signal_op, signal_wait};
use sync::{barrier, barrier_all, fence, flush, quiet, sync_all, team_sync};

/// Adds the functions and the operator constants to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(state::init, m)?)?;
    m.add_function(wrap_pyfunction!(state::finalize, m)?)?;
    m.add_function(wrap_pyfunction!(state::get_unique_id, m)?)?;
    m.add_function(wrap_pyfunction!(state::init_status, m)?)?;
    m.add_function(wrap_pyfunction!(context::context, m)?)?;
    m.add_function(wrap_pyfunction!(my_pe, m)?)?;
    m.add_function(wrap_pyfunction!(n_pes, m)?)?;
    m.add_function(wrap_pyfunction!(get_version, m)?)?;
    m.add_function(wrap_pyfunction!(alloc, m)?)?;
    m.add_function(wrap_pyfunction!(from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(register_external, m)?)?;
    m.add_function(wrap_pyfunction!(free_tensor, m)?)?;
    m.add_function(wrap_pyfunction!(get_peer_tensor, m)?)?;
    m.add_function(wrap_pyfunction!(get_multicast_tensor, m)?)?;
    m.add_function(wrap_pyfunction!(put, m)?)?;
    m.add_function(wrap_pyfunction!(get, m)?)?;
    m.add_function(wrap_pyfunction!(put_nbi, m)?)?;
    m.add_function(wrap_pyfunction!(get_nbi, m)?)?;
    m.add_function(wrap_pyfunction!(put_signal, m)?)?;
    m.add_function(wrap_pyfunction!(signal_op, m)?)?;
    m.add_function(wrap_pyfunction!(signal_wait, m)?)?;
    m.add_function(wrap_pyfunction!(signal_fetch, m)?)?;
    m.add_function(wrap_pyfunction!(quiet, m)?)?;
    m.add_function(wrap_pyfunction!(fence, m)?)?;
    m.add_function(wrap_pyfunction!(barrier_all, m)?)?;
    m.add_function(wrap_pyfunction!(barrier, m)?)?;
    m.add_function(wrap_pyfunction!(sync_all, m)?)?;
    m.add_function(wrap_pyfunction!(team_sync, m)?)?;
    m.add_function(wrap_pyfunction!(flush, m)?)?;
    m.add_function(wrap_pyfunction!(broadcast, m)?)?;
    m.add_function(wrap_pyfunction!(fcollect, m)?)?;
    m.add_function(wrap_pyfunction!(alltoall, m)?)?;
    m.add_function(wrap_pyfunction!(reduce, m)?)?;
    m.add("allreduce", m.getattr("reduce")?)?;
    m.add_function(wrap_pyfunction!(reducescatter, m)?)?;
    m.add_function(wrap_pyfunction!(_views, m)?)?;
    add_atomics(m)?;
    for (name, value) in [
        ("SIGNAL_SET", "set"),
        ("SIGNAL_ADD", "add"),
        ("CMP_EQ", "eq"),
        ("CMP_NE", "ne"),
        ("CMP_GT", "gt"),
        ("CMP_GE", "ge"),
        ("CMP_LT", "lt"),
        ("CMP_LE", "le"),
    ] {
        m.add(name, value)?;
    }
    Ok(())
}
