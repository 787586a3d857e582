//! `pgas.Comm`: pgas's own collectives (`pgas::coll`: all-reduce, reduce-scatter, all-gather,
//! broadcast and all-to-all by peer loads and stores over NVLink) on symmetric tensors, in the
//! Rust API's one call form: the tensors, then `algorithm=` and `stream=`; each call returns the
//! algorithm it used.
//!
//! A communicator owns symmetric flags and scratch, so, like a tensor, it lives in the context's
//! state (`state.rs`) until `free()` (collective) or `finalize`, never until the garbage
//! collector's call: a `pgas.Comm` is a handle.

use std::sync::Arc;

use pgas::coll::{Algorithm, Comm as RtComm};
use pgas_runtime::ReduceOp;
use pyo3::prelude::*;

use crate::dtype::{with_pair, with_tensor};
use crate::errors::{misuse, to_py};
use crate::ops::call::{dtype_mismatch, run, Region};
use crate::ops::collectives::reduce_op_of;
use crate::state::{current, State};
use crate::team::Team;
use crate::tensor::Tensor;

/// The algorithms by their Python names, in `Algorithm`'s order.
const ALGORITHMS: [(&str, Algorithm); 6] = [
    ("auto", Algorithm::Auto),
    ("low_latency", Algorithm::LowLatency),
    ("one_shot", Algorithm::OneShot),
    ("two_shot", Algorithm::TwoShot),
    ("nvshmem", Algorithm::Nvshmem),
    ("hierarchical", Algorithm::Hierarchical),
];

/// The algorithm `name` stands for.
fn algorithm_of(name: &str) -> PyResult<Algorithm> {
    ALGORITHMS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, a)| a)
        .ok_or_else(|| {
            let names: Vec<&str> = ALGORITHMS.iter().map(|(n, _)| *n).collect();
            misuse(format!(
                "unknown algorithm {name:?}: use one of {}",
                names.join(", ")
            ))
        })
}

/// The Python name of `algorithm`.
pub(crate) fn name_of(algorithm: Algorithm) -> &'static str {
    ALGORITHMS
        .iter()
        .find(|(_, a)| *a == algorithm)
        .map_or("auto", |(n, _)| n)
}

/// A communicator over a team for pgas's collectives. `Comm(team)` is collective over every PE
/// (members or not), in the same order on each; `team` is `pgas.TEAM_WORLD`, a team split from
/// it, or `None` on a PE outside a split (that PE's calls then raise). Each collective runs on
/// pgas's stream, or on `stream=` (any object with `__cuda_stream__` or a handle, as the other
/// functions take), without waiting on the host; `algorithm=` picks one (`"auto"`, the default,
/// chooses by size and reach; `"low_latency"`, `"one_shot"`, `"two_shot"`, `"nvshmem"`), and
/// the call returns the name of the one used. Tensors are `pgas.Tensor`s of one dtype.
#[pyclass(module = "pgas", name = "Comm", frozen)]
pub(crate) struct Comm {
    state: Arc<State>,
    id: u64,
}

/// A collective of [`Comm`], with what it takes beside the tensors.
#[derive(Clone, Copy)]
enum Kind {
    AllReduce(ReduceOp),
    ReduceScatter(ReduceOp),
    AllGather,
    Broadcast(usize),
    AllToAll,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::AllReduce(_) => "all_reduce",
            Kind::ReduceScatter(_) => "reduce_scatter",
            Kind::AllGather => "all_gather",
            Kind::Broadcast(_) => "broadcast",
            Kind::AllToAll => "all_to_all",
        }
    }
}

impl Comm {
    /// Runs collective `kind` of `dst` and `src` by `algorithm` on `stream` (or pgas's), the
    /// GIL released; returns the name of the algorithm used.
    fn collective(
        &self, py: Python<'_>, dst: &Tensor, src: &Tensor, kind: Kind, algorithm: &str,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<&'static str> {
        let algorithm = algorithm_of(algorithm)?;
        let in_place = dst.id == src.id && Arc::ptr_eq(&dst.state, &src.state);
        let (state, id) = (self.state.clone(), self.id);
        run(py, stream, move |call| {
            state.with_comm(id, |comm| {
                let how = algorithm.on(call.stream());
                let (d, s) = (call.tensor(dst)?, call.tensor(src)?);
                let used = match kind {
                    Kind::AllReduce(op) if in_place => with_tensor!(d, d => {
                        comm.all_reduce_in_place(&mut Region::of(d), op, how)
                    }),
                    _ => with_pair!(d, s, (d, s) => {
                        let d = &mut Region::of(d);
                        match kind {
                            Kind::AllReduce(op) => comm.all_reduce(d, s, op, how),
                            Kind::ReduceScatter(op) => comm.reduce_scatter(d, s, op, how),
                            Kind::AllGather => comm.all_gather(d, s, how),
                            Kind::Broadcast(root) => comm.broadcast(d, s, root, how),
                            Kind::AllToAll => comm.all_to_all(d, s, how),
                        }
                    }, else return Err(dtype_mismatch(kind.name(), dst, src))),
                };
                used.map(name_of).map_err(to_py)
            })
        })
    }
}

#[pymethods]
impl Comm {
    #[new]
    fn new(py: Python<'_>, team: Option<&Team>) -> PyResult<Comm> {
        let state = current()?;
        let pgas = state.pgas()?;
        let team = team.map(|t| t.team);
        let comm = py.detach(|| RtComm::new(&pgas, team).map_err(to_py))?;
        let id = state.insert_comm(comm);
        Ok(Comm { state, id })
    }

    /// The number of PEs of the team.
    fn n_pes(&self) -> PyResult<usize> {
        self.state.with_comm(self.id, |c| Ok(c.n_pes()))
    }

    /// This PE's rank in the team, or `None` when it is not a member.
    fn rank(&self) -> PyResult<Option<usize>> {
        self.state.with_comm(self.id, |c| Ok(c.rank()))
    }

    /// Element-wise reduction (`op` as `pgas.reduce`'s) of every member's `src` into every
    /// member's `dst`; `dst` may be `src` (in place: low latency, two-shot or NVSHMEM's).
    #[pyo3(signature = (dst, src, op="sum", *, algorithm="auto", stream=None))]
    fn all_reduce(
        &self, py: Python<'_>, dst: PyRef<'_, Tensor>, src: PyRef<'_, Tensor>, op: &str,
        algorithm: &str, stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<&'static str> {
        let kind = Kind::AllReduce(reduce_op_of(op)?);
        self.collective(py, &dst, &src, kind, algorithm, stream)
    }

    /// Reduce-scatter: team rank `r`'s `dst` gets the reduction of chunk `r` of every member's
    /// `src` (`src` holds `n_pes()` chunks of `dst`'s length). `algorithm` must be `"auto"`.
    #[pyo3(signature = (dst, src, op="sum", *, algorithm="auto", stream=None))]
    fn reduce_scatter(
        &self, py: Python<'_>, dst: PyRef<'_, Tensor>, src: PyRef<'_, Tensor>, op: &str,
        algorithm: &str, stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<&'static str> {
        let kind = Kind::ReduceScatter(reduce_op_of(op)?);
        self.collective(py, &dst, &src, kind, algorithm, stream)
    }

    /// All-gather: every member's `dst` gets every member's `src`, in team rank order.
    #[pyo3(signature = (dst, src, *, algorithm="auto", stream=None))]
    fn all_gather(
        &self, py: Python<'_>, dst: PyRef<'_, Tensor>, src: PyRef<'_, Tensor>, algorithm: &str,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<&'static str> {
        self.collective(py, &dst, &src, Kind::AllGather, algorithm, stream)
    }

    /// Broadcast: every member's `dst` gets team rank `root`'s `src` (`dst` may be `src`).
    #[pyo3(signature = (dst, src, root, *, algorithm="auto", stream=None))]
    #[allow(clippy::too_many_arguments)]
    fn broadcast(
        &self, py: Python<'_>, dst: PyRef<'_, Tensor>, src: PyRef<'_, Tensor>, root: usize,
        algorithm: &str, stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<&'static str> {
        self.collective(py, &dst, &src, Kind::Broadcast(root), algorithm, stream)
    }

    /// All-to-all: chunk `q` of team rank `r`'s `src` lands as chunk `r` of rank `q`'s `dst`.
    #[pyo3(signature = (dst, src, *, algorithm="auto", stream=None))]
    fn all_to_all(
        &self, py: Python<'_>, dst: PyRef<'_, Tensor>, src: PyRef<'_, Tensor>, algorithm: &str,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<&'static str> {
        self.collective(py, &dst, &src, Kind::AllToAll, algorithm, stream)
    }

    /// Frees the communicator's symmetric flags and scratch (collective over every PE, after
    /// the PEs agree on which; every later call raises `pgas.FreedError`).
    fn free(&self, py: Python<'_>) -> PyResult<()> {
        let state = self.state.clone();
        let id = self.id;
        py.detach(|| state.free_comm(id))
    }
}

/// Adds `pgas.Comm` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Comm>()
}
