//! Signals: `put_signal`, `signal_op`, `signal_wait`, `signal_fetch`, with the signal
//! operators and comparisons by name.

use std::time::Duration;

use pgas_runtime::{Cmp, SignalOp, SymTensor};
use pyo3::prelude::*;

use super::call::{dtype_mismatch, run, Call};
use crate::dtype::{with_pair, AnyTensor};
use crate::errors::{misuse, to_py};
use crate::tensor::Tensor;

/// A signal operator: `"set"` / `"add"` (also `pgas.SIGNAL_SET`, `pgas.SIGNAL_ADD`).
fn signal_op_of(op: &str) -> PyResult<SignalOp> {
    match op.to_ascii_lowercase().trim_start_matches("signal_") {
        "set" => Ok(SignalOp::Set),
        "add" => Ok(SignalOp::Add),
        _ => Err(misuse(format!(
            "unknown signal operator {op:?}: use \"set\" or \"add\" (pgas.SIGNAL_SET, \
             pgas.SIGNAL_ADD)"
        ))),
    }
}

/// A comparison: `"eq"`, `"ne"`, `"gt"`, `"ge"`, `"lt"`, `"le"` (also `pgas.CMP_EQ`, ...).
fn cmp_of(cmp: &str) -> PyResult<Cmp> {
    match cmp.to_ascii_lowercase().trim_start_matches("cmp_") {
        "eq" => Ok(Cmp::Eq),
        "ne" => Ok(Cmp::Ne),
        "gt" => Ok(Cmp::Gt),
        "ge" => Ok(Cmp::Ge),
        "lt" => Ok(Cmp::Lt),
        "le" => Ok(Cmp::Le),
        _ => Err(misuse(format!(
            "unknown comparison {cmp:?}: use \"eq\", \"ne\", \"gt\", \"ge\", \"lt\" or \"le\" \
             (pgas.CMP_EQ, ...)"
        ))),
    }
}

/// The `uint64` signal tensor of a signal call.
fn signal<'r>(call: &Call<'r>, sig: &Tensor) -> PyResult<&'r SymTensor<u64>> {
    match call.tensor(sig)? {
        AnyTensor::U64(s) => Ok(s),
        other => Err(misuse(format!(
            "the signal tensor is {}; signals are uint64 words (pgas.alloc(n, \"uint64\"))",
            other.dtype()
        ))),
    }
}

/// Copies `src` into `dst` on PE `remote_pe`, then updates word `signal_index` of
/// `signal_var` (a `uint64` tensor) there with `signal_op` (`"set"` or `"add"`) and
/// `signal_val` once the data is visible (`nvshmemx_putmem_signal_on_stream`; `nbi=True`: the
/// `_nbi` form). The receiver waits with `signal_wait`.
#[pyfunction]
#[pyo3(signature = (dst, src, signal_var, signal_val, signal_op, remote_pe, *, signal_index=0, nbi=false, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(super) fn put_signal(
    py: Python<'_>, dst: PyRef<'_, Tensor>, src: PyRef<'_, Tensor>, signal_var: PyRef<'_, Tensor>,
    signal_val: u64, signal_op: &str, remote_pe: usize, signal_index: usize, nbi: bool,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = signal_op_of(signal_op)?;
    let (dst, src, sig): (&Tensor, &Tensor, &Tensor) = (&dst, &src, &signal_var);
    run(py, stream, |call| {
        let (pgas, on) = (call.pgas, call.stream());
        let (d, s) = (call.tensor(dst)?, call.tensor(src)?);
        let w = signal(call, sig)?;
        with_pair!(d, s, (d, s) => if nbi {
            pgas.put_signal_nbi_on(on, d, s, w, signal_index, signal_val, op, remote_pe)
        } else {
            pgas.put_signal_on(on, d, s, w, signal_index, signal_val, op, remote_pe)
        }.map_err(to_py), else Err(dtype_mismatch("put_signal", dst, src)))
    })
}

/// Updates word `signal_index` of `signal_var` on PE `remote_pe` with `signal_op` and
/// `signal_val` (`nvshmemx_signal_op_on_stream`).
#[pyfunction]
#[pyo3(signature = (signal_var, signal_val, signal_op, remote_pe, *, signal_index=0, stream=None))]
pub(super) fn signal_op(
    py: Python<'_>, signal_var: PyRef<'_, Tensor>, signal_val: u64, signal_op: &str,
    remote_pe: usize, signal_index: usize, stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = signal_op_of(signal_op)?;
    let sig: &Tensor = &signal_var;
    run(py, stream, |call| {
        let w = signal(call, sig)?;
        call.pgas
            .signal_op_on(call.stream(), w, signal_index, signal_val, op, remote_pe)
            .map_err(to_py)
    })
}

/// Waits until word `signal_index` of this PE's `signal_var` satisfies `signal <cmp>
/// signal_val` (`nvshmemx_signal_wait_until_on_stream`).
///
/// With `stream=` and no `timeout`, as NVSHMEM4Py's: the wait is queued on that stream and the
/// call returns; work queued there after it runs once the signal has arrived. Otherwise
/// (pgas's stream, or a `timeout` given) the host waits too, for at most `timeout` seconds
/// (60 by default), polling without a sleep floor; not satisfied by then: `WaitTimeoutError`
/// naming the value, and the stream stays blocked behind the wait, so treat it as fatal.
#[pyfunction]
#[pyo3(signature = (signal_var, signal_val, cmp, *, signal_index=0, timeout=None, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(super) fn signal_wait(
    py: Python<'_>, signal_var: PyRef<'_, Tensor>, signal_val: u64, cmp: &str, signal_index: usize,
    timeout: Option<f64>, stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let cmp = cmp_of(cmp)?;
    let bound = match timeout {
        Some(t) => Some(
            Duration::try_from_secs_f64(t)
                .map_err(|e| misuse(format!("signal_wait: timeout {t} s: {e}")))?,
        ),
        None if stream.is_some_and(|s| !s.is_none()) => None,
        None => Some(DEFAULT_WAIT),
    };
    let sig: &Tensor = &signal_var;
    run(py, stream, |call| {
        let w = signal(call, sig)?;
        let pgas = call.pgas;
        match bound {
            Some(timeout) => {
                pgas.signal_wait_until_on(call.stream(), w, signal_index, cmp, signal_val, timeout)
            }
            None => {
                pgas.signal_wait_until_on_stream(call.stream(), w, signal_index, cmp, signal_val)
            }
        }
        .map_err(to_py)
    })
}

/// How long `signal_wait` waits on the host when not told.
const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// This PE's current value of word `signal_index` of `signal_var` (`nvshmem_signal_fetch`).
#[pyfunction]
#[pyo3(signature = (signal_var, signal_index=0))]
pub(super) fn signal_fetch(
    py: Python<'_>, signal_var: PyRef<'_, Tensor>, signal_index: usize,
) -> PyResult<u64> {
    let sig: &Tensor = &signal_var;
    run(py, None, |call| {
        call.pgas
            .signal_fetch(signal(call, sig)?, signal_index)
            .map_err(to_py)
    })
}
