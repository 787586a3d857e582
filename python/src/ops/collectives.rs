//! Collectives over teams: `broadcast`, `fcollect`, `alltoall`, `reduce` (`allreduce`) and
//! `reducescatter`, one body (`collective`) for all of them.

use pgas_runtime::{ReduceOp, Team as RtTeam};
use pyo3::prelude::*;

use super::call::{dtype_mismatch, run, Call, Region};
use crate::dtype::{with_pair, with_tensor};
use crate::errors::{misuse, to_py};
use crate::team::Team;
use crate::tensor::Tensor;

/// A reduction operator: `"sum"`, `"prod"`, `"min"`, `"max"`, `"and"`, `"or"`, `"xor"`.
pub(crate) fn reduce_op_of(op: &str) -> PyResult<ReduceOp> {
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
    ReduceScatter(ReduceOp),
}

fn collective(
    py: Python<'_>, team: &Team, dst: &Tensor, src: &Tensor, kind: Coll,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let team = team.team;
    run(py, stream, |call| issue(call, team, dst, src, kind))
}

/// Issues collective `kind` on the call's stream (`_on` forms; on pgas's stream they are the
/// plain ones).
fn issue(call: &Call<'_>, team: RtTeam, dst: &Tensor, src: &Tensor, kind: Coll) -> PyResult<()> {
    let name = match kind {
        Coll::Broadcast(_) => "broadcast",
        Coll::Fcollect => "fcollect",
        Coll::Alltoall => "alltoall",
        Coll::Reduce(_) => "reduce",
        Coll::ReduceScatter(_) => "reducescatter",
    };
    let (pgas, on) = (call.pgas, call.stream());
    let (d, s) = (call.tensor(dst)?, call.tensor(src)?);
    if let Coll::Reduce(op) = kind {
        if overlap(dst, src) {
            return reduce_staged(call, team, op, dst, src);
        }
    }
    with_pair!(d, s, (d, s) => match kind {
        Coll::Broadcast(root) => pgas.broadcast_on(on, team, d, s, root),
        Coll::Fcollect => pgas.fcollect_on(on, team, d, s),
        Coll::Alltoall => pgas.alltoall_on(on, team, d, s),
        Coll::Reduce(op) => pgas.reduce_on(on, team, op, d, s),
        Coll::ReduceScatter(op) => pgas.reduce_scatter_on(on, team, op, d, s),
    }.map_err(to_py), else Err(dtype_mismatch(name, dst, src)))
}

/// Whether two tensors share memory.
fn overlap(a: &Tensor, b: &Tensor) -> bool {
    let end = |t: &Tensor| t.ptr + (t.len() * t.elem_size) as u64;
    a.ptr < end(b) && b.ptr < end(a)
}

/// An in-place `reduce` (`dst` and `src` share memory): NVSHMEM's reduction reads every PE's
/// source while it writes the destinations, and in place it gave some elements reduced twice
/// (NVSHMEM 3.4.5 on 4 PEs), so `src` is first copied, on the call's stream, to a symmetric
/// staging buffer that the reduction reads. Every PE must pass it in place (the staging
/// buffer grows collectively the first time a size is needed). The call ends with a sync of
/// the team on its stream: a PE whose reduction is done may otherwise copy its next source into
/// the staging buffer while a peer still reads this call's from it.
fn reduce_staged(
    call: &Call<'_>, team: RtTeam, op: ReduceOp, dst: &Tensor, src: &Tensor,
) -> PyResult<()> {
    let (pgas, on) = (call.pgas, call.stream());
    if dst.dtype != src.dtype {
        return Err(dtype_mismatch("reduce", dst, src));
    }
    let bytes = src.len() * src.elem_size;
    let staging = call.staging(bytes)?;
    pgas.cuda()
        .bind_to_thread()
        .map_err(|e| misuse(format!("reduce: making pgas's CUDA context current: {e}")))?;
    // SAFETY: both ranges are live device memory of this context of `bytes` bytes (the source
    // tensor, and the staging buffer just sized), on a stream of this context.
    unsafe { cudarc::driver::result::memcpy_dtod_async(staging, src.ptr, bytes, on.cu_stream()) }
        .map_err(|e| {
        to_py(pgas_runtime::Error::Cuda {
            context: "copying an in-place reduce's source to the staging buffer",
            source: e,
        })
    })?;
    let d = call.tensor(dst)?;
    with_tensor!(d, d => {
        // SAFETY: the staging buffer, at least `bytes` long on every PE and kept while the
        // call lasts.
        let staged = unsafe { Region::new(staging, src.len()) };
        pgas.reduce_on(on, team, op, d, &staged).map_err(to_py)
    })?;
    team.sync_on(pgas, on).map_err(to_py)
}

/// Copies `src` of PE `root` (numbered in `team`) into `dst` on every PE of the team.
/// Collective over the team, asynchronous on pgas's stream (or on `stream`).
#[pyfunction]
#[pyo3(signature = (team, dst, src, root, *, stream=None))]
pub(super) fn broadcast(
    py: Python<'_>, team: &Team, dst: PyRef<'_, Tensor>, src: PyRef<'_, Tensor>, root: usize,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    collective(py, team, &dst, &src, Coll::Broadcast(root), stream)
}

/// Concatenates every team PE's `src` into `dst` (`src` length x team size), in PE order.
#[pyfunction]
#[pyo3(signature = (team, dst, src, *, stream=None))]
pub(super) fn fcollect(
    py: Python<'_>, team: &Team, dst: PyRef<'_, Tensor>, src: PyRef<'_, Tensor>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    collective(py, team, &dst, &src, Coll::Fcollect, stream)
}

/// Block `j` of `src` on team PE `i` lands as block `i` of `dst` on team PE `j`; both hold one
/// equal block per PE of the team.
#[pyfunction]
#[pyo3(signature = (team, dst, src, *, stream=None))]
pub(super) fn alltoall(
    py: Python<'_>, team: &Team, dst: PyRef<'_, Tensor>, src: PyRef<'_, Tensor>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    collective(py, team, &dst, &src, Coll::Alltoall, stream)
}

/// Element-wise reduction (`op`: `"sum"`, `"prod"`, `"min"`, `"max"`; integers also `"and"`,
/// `"or"`, `"xor"`) of every team PE's `src` into `dst` on every PE of the team: NVSHMEM's
/// reduce, an all-reduce (also named `allreduce` here). `dst` may be `src` (in place; pgas
/// stages the source, since NVSHMEM's own in-place form is wrong): then on every PE.
#[pyfunction]
#[pyo3(signature = (team, dst, src, op="sum", *, stream=None))]
pub(super) fn reduce(
    py: Python<'_>, team: &Team, dst: PyRef<'_, Tensor>, src: PyRef<'_, Tensor>, op: &str,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = reduce_op_of(op)?;
    collective(py, team, &dst, &src, Coll::Reduce(op), stream)
}

/// Reduces (`op` as in `reduce`) every team PE's `src` and leaves block `i` of the result (of
/// `src.len() / team size` elements) in `dst` on team PE `i` (NVSHMEM4Py's `reducescatter`,
/// `nvshmemx_<type>_<op>_reducescatter_on_stream`), over any team.
#[pyfunction]
#[pyo3(signature = (team, dst, src, op="sum", *, stream=None))]
pub(super) fn reducescatter(
    py: Python<'_>, team: &Team, dst: PyRef<'_, Tensor>, src: PyRef<'_, Tensor>, op: &str,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = reduce_op_of(op)?;
    let team = team.team;
    let (dst, src): (&Tensor, &Tensor) = (&dst, &src);
    run(py, stream, |call| {
        let pgas = call.pgas;
        let n = team.n_pes(pgas).map_err(to_py)?;
        if team.my_pe(pgas).map_err(to_py)?.is_none() {
            return Err(to_py(pgas_runtime::Error::NotInTeam {
                team: team.raw(),
                what: "take part in its reducescatter",
            }));
        }
        // The lengths in the module's words first (the runtime checks them too).
        if n == 0 || dst.len() * n != src.len() {
            return Err(misuse(format!(
                "reducescatter: src holds {} elements and dst {}; src must hold one block of \
                 dst's length per PE of the team ({n} PEs): {} elements",
                src.len(),
                dst.len(),
                dst.len() * n
            )));
        }
        issue(call, team, dst, src, Coll::ReduceScatter(op))
    })
}
