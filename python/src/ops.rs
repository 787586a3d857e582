//! The module's functions, with NVSHMEM4Py's names where pgas has the operation: memory
//! (`alloc`, `from_dlpack`, `free_tensor`, `get_peer_tensor`, `get_multicast_tensor`), RMA
//! (`put`, `get`, their `_nbi` forms), signals (`put_signal`, `signal_op`, `signal_wait`,
//! `signal_fetch`), ordering (`quiet`, `fence`, `barrier_all`, `barrier`, `sync_all`), atomics
//! (`atomic_*`) and collectives over teams (`broadcast`, `fcollect`, `alltoall`, `reduce`).
//!
//! Each checks its Python arguments, releases the GIL and calls the runtime; the runtime's
//! `Err` comes back as the matching `pgas.PgasError` subclass. `stream=` (a PyTorch, CuPy or
//! cuda.core stream of this PE's GPU) orders the operation inside that stream (`stream.rs`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use pgas_runtime::dlpark::python::{from_dlpack as import_dlpack, ImportedDlpack};
use pgas_runtime::dlpark::DlpackElement;
use pgas_runtime::{Cmp, Pgas, ReduceOp, SignalOp};
use pyo3::prelude::*;

use crate::dtype::{self, with_pair, with_tensor, AnyTensor, Scalar, ScalarOf};
use crate::state::{self, current, freed, Registry, State};
use crate::stream;
use crate::team::Team;
use crate::tensor::{PeerTensor, Tensor};
use crate::{misuse, to_py};

/// A shape: an int or a sequence of ints.
#[derive(FromPyObject)]
enum Dims {
    One(usize),
    Many(Vec<usize>),
}

/// The tensor `t` stands for in `reg`, or `FreedError`.
fn entry<'r>(reg: &'r Registry, state: &Arc<State>, t: &Tensor) -> PyResult<&'r AnyTensor> {
    if !Arc::ptr_eq(&t.state, state) {
        return Err(freed(&t.describe()));
    }
    reg.entries
        .get(&t.id)
        .map(|e| &e.data)
        .ok_or_else(|| freed(&t.describe()))
}

/// Runs `f` with the runtime and the registry, the GIL released, ordered inside `stream`.
fn run<R: Send>(
    py: Python<'_>,
    stream: Option<&Bound<'_, PyAny>>,
    f: impl FnOnce(&Pgas, &Arc<State>, &Registry) -> PyResult<R> + Send,
) -> PyResult<R> {
    // Arguments first: a bad one raises the same with or without a context.
    let raw = stream::handle(stream)?;
    let state = current()?;
    py.detach(|| {
        let pgas = state.pgas()?;
        let user = stream::check(&pgas, raw)?;
        let reg = state.registry();
        stream::on(&pgas, user, || f(&pgas, &state, &reg))
    })
}

fn dtype_mismatch(op: &str, a: &Tensor, b: &Tensor) -> PyErr {
    misuse(format!(
        "{op}: dst is {} and src is {}; {op} takes tensors of one dtype",
        a.dtype, b.dtype
    ))
}

/// This PE's number, 0 to `n_pes() - 1`.
#[pyfunction]
fn my_pe() -> PyResult<usize> {
    Ok(current()?.my_pe)
}

/// The number of PEs.
#[pyfunction]
fn n_pes() -> PyResult<usize> {
    Ok(current()?.n_pes)
}

/// The context `pgas.init()` returned.
#[pyfunction]
fn context() -> PyResult<state::Context> {
    Ok(state::Context { state: current()? })
}

/// `(pgas version, (NVSHMEM major, minor, patch))`; the NVSHMEM part needs `init`.
#[pyfunction]
fn get_version() -> PyResult<(&'static str, (u32, u32, u32))> {
    Ok((
        pgas_runtime::info::VERSION,
        current()?.pgas()?.nvshmem_version(),
    ))
}

/// Allocates a zeroed symmetric tensor of `shape` (an int or a sequence of 1 to 8 ints) and
/// `dtype` (a name of `pgas.DTYPES`, a `torch.dtype` or a NumPy/CuPy dtype; `float32` when
/// omitted). Collective: every PE allocates the same shape and dtype in the same order (a size
/// mismatch raises `CollectiveMismatchError` on every PE). Free it with `free_tensor`.
#[pyfunction]
#[pyo3(signature = (shape, dtype=None))]
fn alloc(py: Python<'_>, shape: Dims, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<Tensor> {
    let name = dtype.map_or(Ok("float32"), dtype::parse)?;
    let state = current()?;
    let dims = match shape {
        Dims::One(n) => vec![n],
        Dims::Many(dims) => dims,
    };
    let data = py.detach(|| dtype::alloc(&state.pgas()?, &dims, name))?;
    Ok(Tensor::register(&state, data, false))
}

/// Takes any DLPack producer (a `torch.Tensor`, a CuPy array, a capsule, a `pgas.Tensor`)
/// whose memory lies in the symmetric heap on this PE's GPU, contiguous, as a `pgas.Tensor`
/// over the same memory: a torch view (a row, a slice) of a pgas tensor, or a tensor of
/// NVSHMEM4Py. The producer's pending work is ordered before pgas's stream. Memory outside the
/// heap (PyTorch's own allocations) is refused with the fix: other PEs could not address it.
/// Import on every PE at the same point, so that the tensors are symmetric. The import is
/// released with its handle (no collective).
#[pyfunction]
fn from_dlpack(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let state = current()?;
    let pgas = state.pgas()?;
    let consumer = PgasStream {
        stream: pgas.stream().cu_stream(),
        device: DLDevice::cuda(pgas.device_ordinal() as i32),
    };
    let imported = import_dlpack(obj.as_borrowed(), Some(&consumer), None)?;
    let dl_dtype = imported
        .validate()
        .map_err(|e| misuse(format!("the DLPack tensor's metadata is invalid: {e}")))?
        .dtype();
    let name = dtype::name_of(dl_dtype).ok_or_else(|| {
        misuse(format!(
            "the tensor's dtype (DLPack code {}, {} bits, {} lanes) is not one pgas holds ({})",
            dl_dtype.code.0,
            dl_dtype.bits,
            dl_dtype.lanes,
            dtype::NAMES.join(", ")
        ))
    })?;
    let data = match imported {
        ImportedDlpack::Legacy(t) => dtype::import(&pgas, name, t)?,
        ImportedDlpack::Versioned(t) => dtype::import(&pgas, name, t)?,
    };
    Ok(Tensor::register(&state, data, true))
}

/// Frees a tensor made by `alloc`. Collective: every PE frees the same tensors in the same
/// order. The PEs first compare what they are freeing: a different tensor on some PE, or a
/// DLPack view of it still alive on some PE (`del` the torch tensors made from it first),
/// raises `CollectiveMismatchError` on every PE and frees nothing. Afterwards every use of `t`
/// raises `FreedError`. (The garbage collector never frees symmetric memory.)
#[pyfunction]
fn free_tensor(py: Python<'_>, t: PyRef<'_, Tensor>) -> PyResult<()> {
    let state = current()?;
    if !Arc::ptr_eq(&t.state, &state) {
        return Err(freed(&t.describe()));
    }
    let (id, what) = (t.id, t.describe());
    py.detach(|| state.free(id, &what))
}

/// PE `pe`'s copy of `t` mapped into this process (NVLink or PCIe peer access), as a
/// `pgas.PeerTensor` (`torch.from_dlpack` of it loads and stores the peer's memory), or `None`
/// when PE `pe` is not reachable with loads and stores (RMA still works).
#[pyfunction]
fn get_peer_tensor(
    py: Python<'_>,
    t: PyRef<'_, Tensor>,
    pe: usize,
) -> PyResult<Option<PeerTensor>> {
    let state = current()?;
    let tr: &Tensor = &t;
    let found = py.detach(|| {
        let reg = state.registry();
        let data = entry(&reg, &state, tr)?;
        let views = reg.entries[&tr.id].views.clone();
        let found = with_tensor!(data, s => {
            let dl = dl_dtype_of(s);
            s.peer(pe).map_err(to_py)?.map(|v| (v.as_device_ptr(), dl))
        });
        Ok::<_, PyErr>(found.map(|(ptr, dl)| (ptr, dl, views)))
    })?;
    Ok(found.map(|(ptr, dl, views)| PeerTensor::new(&state, views, &t, dl, ptr, Some(pe))))
}

/// The multicast address of `t` for `team` (`nvshmemx_mc_ptr`), as a `pgas.PeerTensor` (for
/// kernels with `multimem` instructions). Only NVLink SHARP systems have one; elsewhere it
/// raises `pgas.UnavailableError` with the reason.
#[pyfunction]
fn get_multicast_tensor(py: Python<'_>, team: &Team, t: PyRef<'_, Tensor>) -> PyResult<PeerTensor> {
    let state = current()?;
    let tr: &Tensor = &t;
    let team = team.team;
    let (ptr, dl, views) = py.detach(|| {
        let reg = state.registry();
        let data = entry(&reg, &state, tr)?;
        let views = reg.entries[&tr.id].views.clone();
        let (ptr, dl) = with_tensor!(data, s => {
            let dl = dl_dtype_of(s);
            (s.multicast(team).map_err(to_py)?.as_device_ptr(), dl)
        });
        Ok::<_, PyErr>((ptr, dl, views))
    })?;
    Ok(PeerTensor::new(&state, views, &t, dl, ptr, None))
}

fn dl_dtype_of<T: DlpackElement>(_t: &pgas_runtime::SymTensor<T>) -> DLDataType {
    T::DTYPE
}

/// RMA: `put`, `get` and their `_nbi` forms.
#[derive(Clone, Copy)]
enum Rma {
    Put,
    Get,
    PutNbi,
    GetNbi,
}

fn rma(
    py: Python<'_>,
    kind: Rma,
    dst: &Tensor,
    src: &Tensor,
    pe: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let name = match kind {
        Rma::Put => "put",
        Rma::Get => "get",
        Rma::PutNbi => "put_nbi",
        Rma::GetNbi => "get_nbi",
    };
    run(py, stream, |pgas, state, reg| {
        let (d, s) = (entry(reg, state, dst)?, entry(reg, state, src)?);
        with_pair!(d, s, (d, s) => match kind {
            Rma::Put => pgas.put(d, s, pe),
            Rma::Get => pgas.get(d, s, pe),
            Rma::PutNbi => pgas.put_nbi(d, s, pe),
            Rma::GetNbi => pgas.get_nbi(d, s, pe),
        }.map_err(to_py), else Err(dtype_mismatch(name, dst, src)))
    })
}

/// Copies this PE's `src` into `dst` on PE `remote_pe` (same dtype and length). Asynchronous
/// on pgas's stream (or ordered in `stream`); complete after `quiet()` or `barrier_all()`.
/// `src` must be complete first: after writing it through PyTorch, `torch.cuda.synchronize()`
/// (or pass PyTorch's stream as `stream=`).
#[pyfunction]
#[pyo3(signature = (dst, src, remote_pe, *, stream=None))]
fn put(
    py: Python<'_>,
    dst: PyRef<'_, Tensor>,
    src: PyRef<'_, Tensor>,
    remote_pe: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    rma(py, Rma::Put, &dst, &src, remote_pe, stream)
}

/// Copies `src` on PE `remote_pe` into this PE's `dst` (same dtype and length), on pgas's
/// stream (or ordered in `stream`); `dst.to_list()` sees it, a framework's view after `quiet()`.
#[pyfunction]
#[pyo3(signature = (dst, src, remote_pe, *, stream=None))]
fn get(
    py: Python<'_>,
    dst: PyRef<'_, Tensor>,
    src: PyRef<'_, Tensor>,
    remote_pe: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    rma(py, Rma::Get, &dst, &src, remote_pe, stream)
}

/// `put` whose source may be reused only after `quiet()` (`nvshmemx_putmem_nbi_on_stream`).
#[pyfunction]
#[pyo3(signature = (dst, src, remote_pe, *, stream=None))]
fn put_nbi(
    py: Python<'_>,
    dst: PyRef<'_, Tensor>,
    src: PyRef<'_, Tensor>,
    remote_pe: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    rma(py, Rma::PutNbi, &dst, &src, remote_pe, stream)
}

/// `get` that completes at the next `quiet()` (`nvshmemx_getmem_nbi_on_stream`).
#[pyfunction]
#[pyo3(signature = (dst, src, remote_pe, *, stream=None))]
fn get_nbi(
    py: Python<'_>,
    dst: PyRef<'_, Tensor>,
    src: PyRef<'_, Tensor>,
    remote_pe: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    rma(py, Rma::GetNbi, &dst, &src, remote_pe, stream)
}

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
fn signal<'r>(
    reg: &'r Registry,
    state: &Arc<State>,
    sig: &Tensor,
) -> PyResult<&'r pgas_runtime::SymTensor<u64>> {
    match entry(reg, state, sig)? {
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
fn put_signal(
    py: Python<'_>,
    dst: PyRef<'_, Tensor>,
    src: PyRef<'_, Tensor>,
    signal_var: PyRef<'_, Tensor>,
    signal_val: u64,
    signal_op: &str,
    remote_pe: usize,
    signal_index: usize,
    nbi: bool,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = signal_op_of(signal_op)?;
    let (dst, src, sig): (&Tensor, &Tensor, &Tensor) = (&dst, &src, &signal_var);
    run(py, stream, |pgas, state, reg| {
        let (d, s) = (entry(reg, state, dst)?, entry(reg, state, src)?);
        let w = signal(reg, state, sig)?;
        with_pair!(d, s, (d, s) => if nbi {
            pgas.put_signal_nbi(d, s, w, signal_index, signal_val, op, remote_pe)
        } else {
            pgas.put_signal(d, s, w, signal_index, signal_val, op, remote_pe)
        }.map_err(to_py), else Err(dtype_mismatch("put_signal", dst, src)))
    })
}

/// Updates word `signal_index` of `signal_var` on PE `remote_pe` with `signal_op` and
/// `signal_val` (`nvshmemx_signal_op_on_stream`).
#[pyfunction]
#[pyo3(signature = (signal_var, signal_val, signal_op, remote_pe, *, signal_index=0, stream=None))]
fn signal_op(
    py: Python<'_>,
    signal_var: PyRef<'_, Tensor>,
    signal_val: u64,
    signal_op: &str,
    remote_pe: usize,
    signal_index: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = signal_op_of(signal_op)?;
    let sig: &Tensor = &signal_var;
    run(py, stream, |pgas, state, reg| {
        pgas.signal_op(
            signal(reg, state, sig)?,
            signal_index,
            signal_val,
            op,
            remote_pe,
        )
        .map_err(to_py)
    })
}

/// Waits until word `signal_index` of this PE's `signal_var` satisfies `signal <cmp>
/// signal_val` (`nvshmemx_signal_wait_until_on_stream`, then a host wait of at most
/// `timeout` seconds). Not satisfied by then: `WaitTimeoutError` naming the value; the stream
/// stays blocked behind the wait, so treat it as fatal. With `stream=`, that stream's later
/// work runs after the wait too.
#[pyfunction]
#[pyo3(signature = (signal_var, signal_val, cmp, *, signal_index=0, timeout=60.0, stream=None))]
#[allow(clippy::too_many_arguments)]
fn signal_wait(
    py: Python<'_>,
    signal_var: PyRef<'_, Tensor>,
    signal_val: u64,
    cmp: &str,
    signal_index: usize,
    timeout: f64,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let cmp = cmp_of(cmp)?;
    let timeout = Duration::try_from_secs_f64(timeout)
        .map_err(|e| misuse(format!("signal_wait: timeout {timeout} s: {e}")))?;
    let sig: &Tensor = &signal_var;
    run(py, stream, |pgas, state, reg| {
        pgas.signal_wait_until(
            signal(reg, state, sig)?,
            signal_index,
            cmp,
            signal_val,
            timeout,
        )
        .map_err(to_py)
    })
}

/// This PE's current value of word `signal_index` of `signal_var` (`nvshmem_signal_fetch`).
#[pyfunction]
#[pyo3(signature = (signal_var, signal_index=0))]
fn signal_fetch(
    py: Python<'_>,
    signal_var: PyRef<'_, Tensor>,
    signal_index: usize,
) -> PyResult<u64> {
    let sig: &Tensor = &signal_var;
    run(py, None, |pgas, state, reg| {
        pgas.signal_fetch(signal(reg, state, sig)?, signal_index)
            .map_err(to_py)
    })
}

/// Completes every put and get this PE issued (`nvshmemx_quiet_on_stream`), then waits for
/// pgas's stream. With `stream=`, that stream's later work runs after it.
#[pyfunction]
#[pyo3(signature = (*, stream=None))]
fn quiet(py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    run(py, stream, |pgas, _, _| pgas.quiet().map_err(to_py))
}

/// Orders this PE's puts to each PE (`nvshmem_fence`): puts issued after it reach a PE after
/// those issued before it.
#[pyfunction]
fn fence(py: Python<'_>) -> PyResult<()> {
    run(py, None, |pgas, _, _| pgas.fence().map_err(to_py))
}

/// Barrier over all PEs that also completes every put and get issued before it
/// (`nvshmemx_barrier_all_on_stream`), then waits for pgas's stream: afterwards every PE's
/// framework views show what was put there.
#[pyfunction]
#[pyo3(signature = (*, stream=None))]
fn barrier_all(py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    run(py, stream, |pgas, _, _| pgas.barrier_all().map_err(to_py))
}

/// Synchronizes all PEs without completing outstanding RMA (`nvshmemx_sync_all_on_stream`).
#[pyfunction]
#[pyo3(signature = (*, stream=None))]
fn sync_all(py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    run(py, stream, |pgas, _, _| pgas.sync_all().map_err(to_py))
}

/// Barrier over `team` that also completes this PE's RMA (`nvshmemx_barrier_on_stream`).
#[pyfunction]
#[pyo3(signature = (team, *, stream=None))]
fn barrier(py: Python<'_>, team: &Team, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let team = team.team;
    run(py, stream, |pgas, _, _| team.barrier(pgas).map_err(to_py))
}

/// A reduction operator: `"sum"`, `"prod"`, `"min"`, `"max"`, `"and"`, `"or"`, `"xor"`.
fn reduce_op_of(op: &str) -> PyResult<ReduceOp> {
    match op.to_ascii_lowercase().as_str() {
        "sum" => Ok(ReduceOp::Sum),
        "prod" => Ok(ReduceOp::Prod),
        "min" => Ok(ReduceOp::Min),
        "max" => Ok(ReduceOp::Max),
        "and" => Ok(ReduceOp::And),
        "or" => Ok(ReduceOp::Or),
        "xor" => Ok(ReduceOp::Xor),
        _ => Err(misuse(format!(
            "unknown reduction {op:?}: use \"sum\", \"prod\", \"min\", \"max\", or for integer \
             tensors \"and\", \"or\", \"xor\""
        ))),
    }
}

/// A collective over a team.
#[derive(Clone, Copy)]
enum Coll {
    Broadcast(usize),
    Fcollect,
    Alltoall,
    Reduce(ReduceOp),
}

fn collective(
    py: Python<'_>,
    team: &Team,
    dst: &Tensor,
    src: &Tensor,
    kind: Coll,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let team = team.team;
    let name = match kind {
        Coll::Broadcast(_) => "broadcast",
        Coll::Fcollect => "fcollect",
        Coll::Alltoall => "alltoall",
        Coll::Reduce(_) => "reduce",
    };
    run(py, stream, |pgas, state, reg| {
        let (d, s) = (entry(reg, state, dst)?, entry(reg, state, src)?);
        with_pair!(d, s, (d, s) => match kind {
            Coll::Broadcast(root) => pgas.broadcast(team, d, s, root),
            Coll::Fcollect => pgas.fcollect(team, d, s),
            Coll::Alltoall => pgas.alltoall(team, d, s),
            Coll::Reduce(op) => pgas.reduce(team, op, d, s),
        }.map_err(to_py), else Err(dtype_mismatch(name, dst, src)))
    })
}

/// Copies `src` of PE `root` (numbered in `team`) into `dst` on every PE of the team.
/// Collective over the team, asynchronous on pgas's stream (or ordered in `stream`).
#[pyfunction]
#[pyo3(signature = (team, dst, src, root, *, stream=None))]
fn broadcast(
    py: Python<'_>,
    team: &Team,
    dst: PyRef<'_, Tensor>,
    src: PyRef<'_, Tensor>,
    root: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    collective(py, team, &dst, &src, Coll::Broadcast(root), stream)
}

/// Concatenates every team PE's `src` into `dst` (`src` length x team size), in PE order.
#[pyfunction]
#[pyo3(signature = (team, dst, src, *, stream=None))]
fn fcollect(
    py: Python<'_>,
    team: &Team,
    dst: PyRef<'_, Tensor>,
    src: PyRef<'_, Tensor>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    collective(py, team, &dst, &src, Coll::Fcollect, stream)
}

/// Block `j` of `src` on team PE `i` lands as block `i` of `dst` on team PE `j`; both hold one
/// equal block per PE of the team.
#[pyfunction]
#[pyo3(signature = (team, dst, src, *, stream=None))]
fn alltoall(
    py: Python<'_>,
    team: &Team,
    dst: PyRef<'_, Tensor>,
    src: PyRef<'_, Tensor>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    collective(py, team, &dst, &src, Coll::Alltoall, stream)
}

/// Element-wise reduction (`op`: `"sum"`, `"prod"`, `"min"`, `"max"`; integers also `"and"`,
/// `"or"`, `"xor"`) of every team PE's `src` into `dst` on every PE of the team: NVSHMEM's
/// reduce, an all-reduce (also named `allreduce` here).
#[pyfunction]
#[pyo3(signature = (team, dst, src, op="sum", *, stream=None))]
fn reduce(
    py: Python<'_>,
    team: &Team,
    dst: PyRef<'_, Tensor>,
    src: PyRef<'_, Tensor>,
    op: &str,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = reduce_op_of(op)?;
    collective(py, team, &dst, &src, Coll::Reduce(op), stream)
}

/// Reduces (`op` as in `reduce`) every team PE's `src` and leaves block `i` of the result (of
/// `src.len() / team size` elements) in `dst` on team PE `i` (NVSHMEM4Py's `reducescatter`).
/// The runtime has no reduce-scatter row yet, so this is a `reduce` into a temporary symmetric
/// tensor, then a copy of this PE's block: twice the traffic of a native one, and only over a
/// team of every PE (the temporary's allocation is collective over all of them).
#[pyfunction]
#[pyo3(signature = (team, dst, src, op="sum", *, stream=None))]
fn reducescatter(
    py: Python<'_>,
    team: &Team,
    dst: PyRef<'_, Tensor>,
    src: PyRef<'_, Tensor>,
    op: &str,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = reduce_op_of(op)?;
    let team = team.team;
    let (dst, src): (&Tensor, &Tensor) = (&dst, &src);
    run(py, stream, |pgas, state, reg| {
        let n = team.n_pes(pgas).map_err(to_py)?;
        let me = team.my_pe(pgas).map_err(to_py)?.ok_or_else(|| {
            to_py(pgas_runtime::Error::NotInTeam {
                team: team.raw(),
                what: "take part in its reducescatter",
            })
        })?;
        if n != pgas.n_pes() {
            return Err(misuse(format!(
                "reducescatter over a team of {n} of the {} PEs: pgas composes it from a reduce \
                 and a temporary allocation, which is collective over every PE; until the \
                 runtime has a reduce-scatter, use TEAM_WORLD or reduce over the team and take \
                 your block",
                pgas.n_pes()
            )));
        }
        let block = src.len() / n.max(1);
        if n == 0 || block * n != src.len() || dst.len() != block {
            return Err(misuse(format!(
                "reducescatter: src holds {} elements and dst {}; src must hold one block of \
                 dst's length per PE of the team ({n} PEs): {} elements",
                src.len(),
                dst.len(),
                dst.len() * n
            )));
        }
        let (d, s) = (entry(reg, state, dst)?, entry(reg, state, src)?);
        with_pair!(d, s, (d, s) => {
            let whole = pgas.alloc_shaped(&[s.len()]).map_err(to_py)?;
            pgas.reduce(team, op, &whole, s).map_err(to_py)?;
            let mine = whole.view(me * block..(me + 1) * block).map_err(to_py)?;
            // A put to this PE is a local copy on pgas's stream.
            pgas.put(d, &mine, pgas.my_pe()).map_err(to_py)?;
            // `whole` drops here: its collective free waits for the stream first.
            Ok(())
        }, else Err(dtype_mismatch("reducescatter", dst, src)))
    })
}

/// Runs `$body` with `$t` bound to the tensor when it holds an element type with every host
/// atomic (the 32- and 64-bit integers).
macro_rules! amo_int {
    ($data:expr, $what:expr, $t:ident => $body:expr) => {
        match $data {
            AnyTensor::I32($t) => $body,
            AnyTensor::I64($t) => $body,
            AnyTensor::U32($t) => $body,
            AnyTensor::U64($t) => $body,
            other => Err(misuse(format!(
                "{}: this atomic takes int32, int64, uint32 or uint64 tensors, not {}",
                $what,
                other.dtype()
            ))),
        }
    };
}

/// `amo_int!` that also takes `float32`/`float64` (fetch, set and swap).
macro_rules! amo_elem {
    ($data:expr, $what:expr, $t:ident => $body:expr) => {
        match $data {
            AnyTensor::F32($t) => $body,
            AnyTensor::F64($t) => $body,
            other => amo_int!(other, $what, $t => $body),
        }
    };
}

/// One host atomic.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Amo {
    Fetch,
    Set,
    Swap,
    CompareSwap,
    Add,
    FetchAdd,
    Inc,
    FetchInc,
    And,
    FetchAnd,
    Or,
    FetchOr,
    Xor,
    FetchXor,
}

/// Runs atomic `op` on element `index` of `t` on PE `pe` with operands `a` (and `b`: the new
/// value of a compare-swap); returns the fetched value, or `None` for the non-fetching ones.
fn amo(
    py: Python<'_>,
    op: Amo,
    t: &Tensor,
    index: usize,
    pe: usize,
    operands: [Option<&Bound<'_, PyAny>>; 2],
) -> PyResult<Option<Py<PyAny>>> {
    let what = "atomic";
    let parse = |v: Option<&Bound<'_, PyAny>>| v.map(|v| Scalar::parse(t.dtype, v)).transpose();
    let (a, b) = (parse(operands[0])?, parse(operands[1])?);
    let need = |v: Option<Scalar>| v.ok_or_else(|| misuse("atomic: a missing operand".into()));
    let got: Option<Scalar> = run(py, None, |pgas, state, reg| {
        let data = entry(reg, state, t)?;
        match op {
            Amo::Fetch => {
                amo_elem!(data, what, s => pgas.atomic_fetch(s, index, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::Set => {
                amo_elem!(data, what, s => pgas.atomic_set(s, index, ScalarOf::of(need(a)?)?, pe).map(|()| None).map_err(to_py))
            }
            Amo::Swap => {
                amo_elem!(data, what, s => pgas.atomic_swap(s, index, ScalarOf::of(need(a)?)?, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::CompareSwap => {
                amo_int!(data, what, s => pgas.atomic_compare_swap(s, index, ScalarOf::of(need(a)?)?, ScalarOf::of(need(b)?)?, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::Add => {
                amo_int!(data, what, s => pgas.atomic_add(s, index, ScalarOf::of(need(a)?)?, pe).map(|()| None).map_err(to_py))
            }
            Amo::FetchAdd => {
                amo_int!(data, what, s => pgas.atomic_fetch_add(s, index, ScalarOf::of(need(a)?)?, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::Inc => {
                amo_int!(data, what, s => pgas.atomic_inc(s, index, pe).map(|()| None).map_err(to_py))
            }
            Amo::FetchInc => {
                amo_int!(data, what, s => pgas.atomic_fetch_inc(s, index, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::And => {
                amo_int!(data, what, s => pgas.atomic_and(s, index, ScalarOf::of(need(a)?)?, pe).map(|()| None).map_err(to_py))
            }
            Amo::FetchAnd => {
                amo_int!(data, what, s => pgas.atomic_fetch_and(s, index, ScalarOf::of(need(a)?)?, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::Or => {
                amo_int!(data, what, s => pgas.atomic_or(s, index, ScalarOf::of(need(a)?)?, pe).map(|()| None).map_err(to_py))
            }
            Amo::FetchOr => {
                amo_int!(data, what, s => pgas.atomic_fetch_or(s, index, ScalarOf::of(need(a)?)?, pe).map(|v| Some(v.into())).map_err(to_py))
            }
            Amo::Xor => {
                amo_int!(data, what, s => pgas.atomic_xor(s, index, ScalarOf::of(need(a)?)?, pe).map(|()| None).map_err(to_py))
            }
            Amo::FetchXor => {
                amo_int!(data, what, s => pgas.atomic_fetch_xor(s, index, ScalarOf::of(need(a)?)?, pe).map(|v| Some(v.into())).map_err(to_py))
            }
        }
    })?;
    got.map(|v| v.into_py(py)).transpose()
}

/// Defines the atomics: `name(t, index, [operands], pe)`, the doc, the operation.
macro_rules! atomics {
    ($($(#[doc = $doc:literal])* $name:ident($($arg:ident),*) = $op:ident;)*) => {$(
        $(#[doc = $doc])*
        #[pyfunction]
        fn $name(
            py: Python<'_>,
            t: PyRef<'_, Tensor>,
            index: usize,
            $($arg: &Bound<'_, PyAny>,)*
            pe: usize,
        ) -> PyResult<Option<Py<PyAny>>> {
            let ops: Vec<&Bound<'_, PyAny>> = vec![$($arg),*];
            amo(py, Amo::$op, &t, index, pe, [ops.first().copied(), ops.get(1).copied()])
        }
    )*
    /// The atomics' names.
    const ATOMICS: &[&str] = &[$(stringify!($name)),*];
    fn add_atomics(m: &Bound<'_, PyModule>) -> PyResult<()> {
        $(m.add_function(wrap_pyfunction!($name, m)?)?;)*
        Ok(())
    }
    };
}

atomics! {
    /// Atomically reads `t[index]` on PE `pe` (int32/64, uint32/64, float32/64).
    atomic_fetch() = Fetch;
    /// Atomically writes `value` to `t[index]` on PE `pe` (int32/64, uint32/64, float32/64).
    atomic_set(value) = Set;
    /// Atomically writes `value` to `t[index]` on PE `pe`; returns the old value.
    atomic_swap(value) = Swap;
    /// Writes `value` to `t[index]` on PE `pe` if it equals `cond`; returns the old value.
    atomic_compare_swap(cond, value) = CompareSwap;
    /// Atomically adds `value` to `t[index]` on PE `pe` (integer tensors).
    atomic_add(value) = Add;
    /// Atomically adds `value` to `t[index]` on PE `pe`; returns the old value.
    atomic_fetch_add(value) = FetchAdd;
    /// Atomically adds 1 to `t[index]` on PE `pe`.
    atomic_inc() = Inc;
    /// Atomically adds 1 to `t[index]` on PE `pe`; returns the old value.
    atomic_fetch_inc() = FetchInc;
    /// Atomically ands `value` into `t[index]` on PE `pe`.
    atomic_and(value) = And;
    /// Atomically ands `value` into `t[index]` on PE `pe`; returns the old value.
    atomic_fetch_and(value) = FetchAnd;
    /// Atomically ors `value` into `t[index]` on PE `pe`.
    atomic_or(value) = Or;
    /// Atomically ors `value` into `t[index]` on PE `pe`; returns the old value.
    atomic_fetch_or(value) = FetchOr;
    /// Atomically xors `value` into `t[index]` on PE `pe`.
    atomic_xor(value) = Xor;
    /// Atomically xors `value` into `t[index]` on PE `pe`; returns the old value.
    atomic_fetch_xor(value) = FetchXor;
}

/// Every module function a `Context` offers as a method.
pub(crate) const FUNCTIONS: &[&str] = &[
    "my_pe",
    "n_pes",
    "get_version",
    "alloc",
    "from_dlpack",
    "free_tensor",
    "get_peer_tensor",
    "get_multicast_tensor",
    "put",
    "get",
    "put_nbi",
    "get_nbi",
    "put_signal",
    "signal_op",
    "signal_wait",
    "signal_fetch",
    "quiet",
    "fence",
    "barrier_all",
    "barrier",
    "sync_all",
    "broadcast",
    "fcollect",
    "alltoall",
    "reduce",
    "allreduce",
    "reducescatter",
    "finalize",
];

/// Whether `name` is a function a `Context` forwards to.
pub(crate) fn is_function(name: &str) -> bool {
    FUNCTIONS.contains(&name) || ATOMICS.contains(&name) || crate::team::FUNCTIONS.contains(&name)
}

/// Adds the functions and the operator constants to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(state::init, m)?)?;
    m.add_function(wrap_pyfunction!(state::finalize, m)?)?;
    m.add_function(wrap_pyfunction!(context, m)?)?;
    m.add_function(wrap_pyfunction!(my_pe, m)?)?;
    m.add_function(wrap_pyfunction!(n_pes, m)?)?;
    m.add_function(wrap_pyfunction!(get_version, m)?)?;
    m.add_function(wrap_pyfunction!(alloc, m)?)?;
    m.add_function(wrap_pyfunction!(from_dlpack, m)?)?;
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

/// pgas's stream as the consumer stream of a DLPack import: the producer (PyTorch) makes its
/// pending work on the memory precede it.
struct PgasStream {
    stream: cudarc::driver::sys::CUstream,
    device: DLDevice,
}

use pgas_runtime::dlpark::ffi::{DLDataType, DLDevice};
use pgas_runtime::dlpark::python::consumer::stream::{self as dl_stream, DlpackStream, StreamArg};

// SAFETY: the stream is pgas's, alive as long as the context that the import runs in, and on
// `device`; for a tensor on another device no stream is passed (pgas refuses the import then).
unsafe impl DlpackStream for PgasStream {
    fn as_python_arg(&self, _py: Python<'_>, device: DLDevice) -> PyResult<StreamArg> {
        Ok(if device == self.device {
            dl_stream::cuda(self.stream as *mut std::ffi::c_void)
        } else {
            dl_stream::none()
        })
    }
}

/// The DLPack views of `t` alive on this PE (torch tensors made from it, peer tensors): what
/// `free_tensor` checks; for tests and debugging.
#[pyfunction]
fn _views(py: Python<'_>, t: PyRef<'_, Tensor>) -> PyResult<usize> {
    let tr: &Tensor = &t;
    py.detach(|| {
        let reg = tr.state.registry();
        reg.entries
            .get(&tr.id)
            .map(|e| e.views.load(Ordering::SeqCst))
            .ok_or_else(|| freed(&tr.describe()))
    })
}
