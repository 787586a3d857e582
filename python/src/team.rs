//! `pgas.Team`: NVSHMEM teams (the predefined `TEAM_WORLD`, `TEAM_SHARED`, `TEAM_NODE` and
//! those split from them), with NVSHMEM4Py's module functions (`team_my_pe`, `team_n_pes`,
//! `team_translate_pe`, `team_split_strided`, `team_split_2d`, `team_destroy`, `team_init`,
//! `get_team_unique_id`).

use pgas_runtime::{Team as RtTeam, TeamConfig};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::to_py;
use crate::state::current;

/// An NVSHMEM team. `pgas.TEAM_WORLD` (every PE), `pgas.TEAM_SHARED` (the PEs that share
/// memory with this one), `pgas.TEAM_NODE` (this node's), or one made by `split_strided` /
/// `split_2d`, which should be `destroy()`ed (collectively) when no longer needed. A destroyed
/// team raises `pgas.TeamError` on every later use.
#[pyclass(module = "pgas", name = "Team", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Team {
    pub(crate) team: RtTeam,
}

#[pymethods]
impl Team {
    /// This PE's number in the team, or `None` when it is not a member.
    fn my_pe(&self) -> PyResult<Option<usize>> {
        let state = current()?;
        self.team.my_pe(&state.pgas()?).map_err(to_py)
    }

    /// The number of PEs in the team.
    fn n_pes(&self) -> PyResult<usize> {
        let state = current()?;
        self.team.n_pes(&state.pgas()?).map_err(to_py)
    }

    /// The number in team `dest` of this team's PE `pe`, or `None` when it is not in `dest`.
    fn translate_pe(&self, pe: usize, dest: &Team) -> PyResult<Option<usize>> {
        let state = current()?;
        self.team
            .translate_pe(&state.pgas()?, pe, dest.team)
            .map_err(to_py)
    }

    /// Splits off the team of `size` PEs `start, start + stride, ...` (numbered in this team).
    /// Collective over this team; returns `None` on the PEs that are not members.
    /// `num_contexts` sets the new team's `nvshmem_team_config_t.num_contexts`.
    #[pyo3(signature = (start, stride, size, *, num_contexts=None))]
    fn split_strided(
        &self, py: Python<'_>, start: usize, stride: usize, size: usize, num_contexts: Option<u32>,
    ) -> PyResult<Option<Team>> {
        let pgas = current()?.pgas()?;
        let config = TeamConfig { num_contexts };
        let team = py.detach(|| {
            self.team
                .split_strided_with(&pgas, start, stride, size, &config)
                .map_err(to_py)
        })?;
        Ok(team.map(|team| Team { team }))
    }

    /// Splits this team into a grid with rows of `xrange` PEs: returns this PE's `(row,
    /// column)` teams (`nvshmem_team_split_2d`). Collective over this team.
    fn split_2d(&self, py: Python<'_>, xrange: usize) -> PyResult<(Team, Team)> {
        let pgas = current()?.pgas()?;
        let none = TeamConfig::default();
        let (x, y) = py.detach(|| {
            self.team
                .split_2d(&pgas, xrange, &none, &none)
                .map_err(to_py)
        })?;
        Ok((Team { team: x }, Team { team: y }))
    }

    /// The team's configuration (`nvshmem_team_get_config`) as a dict: `num_contexts`.
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let pgas = current()?.pgas()?;
        let config = self.team.config(&pgas).map_err(to_py)?;
        let d = PyDict::new(py);
        d.set_item("num_contexts", config.num_contexts)?;
        Ok(d)
    }

    /// Destroys a team made by a split (collective over its members); the predefined teams
    /// cannot be destroyed.
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        let pgas = current()?.pgas()?;
        py.detach(|| self.team.destroy(&pgas).map_err(to_py))
    }

    /// The raw `nvshmem_team_t` (what a kernel receives).
    #[getter]
    fn handle(&self) -> i32 {
        self.team.raw()
    }

    /// `pgas.Team(TEAM_WORLD)`, `pgas.Team(team 3)`.
    fn __repr__(&self) -> String {
        match self.team {
            RtTeam::WORLD => "pgas.TEAM_WORLD".into(),
            RtTeam::SHARED => "pgas.TEAM_SHARED".into(),
            RtTeam::NODE => "pgas.TEAM_NODE".into(),
            t => format!("pgas.Team({t})"),
        }
    }
}

/// `team.my_pe()`.
#[pyfunction]
fn team_my_pe(team: &Team) -> PyResult<Option<usize>> {
    team.my_pe()
}

/// `team.n_pes()`.
#[pyfunction]
fn team_n_pes(team: &Team) -> PyResult<usize> {
    team.n_pes()
}

/// `src_team.translate_pe(pe, dest_team)`.
#[pyfunction]
fn team_translate_pe(src_team: &Team, pe: usize, dest_team: &Team) -> PyResult<Option<usize>> {
    src_team.translate_pe(pe, dest_team)
}

/// `parent.split_strided(start, stride, size, num_contexts=...)`.
#[pyfunction]
#[pyo3(signature = (parent, start, stride, size, *, num_contexts=None))]
fn team_split_strided(
    py: Python<'_>, parent: &Team, start: usize, stride: usize, size: usize,
    num_contexts: Option<u32>,
) -> PyResult<Option<Team>> {
    parent.split_strided(py, start, stride, size, num_contexts)
}

/// `parent.split_2d(xrange)`.
#[pyfunction]
fn team_split_2d(py: Python<'_>, parent: &Team, xrange: usize) -> PyResult<(Team, Team)> {
    parent.split_2d(py, xrange)
}

/// `team.destroy()`.
#[pyfunction]
fn team_destroy(py: Python<'_>, team: &Team) -> PyResult<()> {
    team.destroy(py)
}

/// Adds `Team`, the predefined teams (also as `pgas.Teams.TEAM_WORLD`, NVSHMEM4Py's spelling)
/// and the team functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Team>()?;
    let teams = PyDict::new(py);
    for (name, team) in [
        ("TEAM_WORLD", RtTeam::WORLD),
        ("TEAM_SHARED", RtTeam::SHARED),
        ("TEAM_NODE", RtTeam::NODE),
        ("TEAM_SAME_MYPE_NODE", RtTeam::SAME_MYPE_NODE),
    ] {
        let t = Py::new(py, Team { team })?;
        m.add(name, t.clone_ref(py))?;
        teams.set_item(name, t)?;
    }
    let ns = py
        .import("types")?
        .getattr("SimpleNamespace")?
        .call((), Some(&teams))?;
    m.add("Teams", ns)?;
    m.add_function(wrap_pyfunction!(team_my_pe, m)?)?;
    m.add_function(wrap_pyfunction!(team_n_pes, m)?)?;
    m.add_function(wrap_pyfunction!(team_translate_pe, m)?)?;
    m.add_function(wrap_pyfunction!(team_split_strided, m)?)?;
    m.add_function(wrap_pyfunction!(team_split_2d, m)?)?;
    m.add_function(wrap_pyfunction!(team_destroy, m)?)?;
    m.add_function(wrap_pyfunction!(get_team_unique_id, m)?)?;
    m.add_function(wrap_pyfunction!(team_init, m)?)?;
    Ok(())
}

/// A fresh team id for `team_init` (`nvshmemx_team_get_uniqueid`), to hand to the team's other
/// members. Local: no other PE takes part.
#[pyfunction]
fn get_team_unique_id() -> PyResult<u64> {
    let pgas = current()?.pgas()?;
    Ok(pgas_runtime::TeamUniqueId::new(&pgas)
        .map_err(to_py)?
        .to_u64())
}

/// Makes a team from a team id its members share, with no parent team to split
/// (`nvshmemx_team_init`): each member passes `member=(team_id, index, n_pes)` (the id from
/// `get_team_unique_id` on one member, this PE's number in the team, the team's size), every
/// other PE `None`. Returns the team on its members, `None` elsewhere. Collective over all PEs:
/// pgas compares what they passed first, and a mismatch (sizes that differ, indices not 0 to
/// n_pes - 1 once each) raises `ArgumentError` on every PE before NVSHMEM is called.
#[pyfunction]
#[pyo3(signature = (member, *, num_contexts=None))]
fn team_init(
    py: Python<'_>, member: Option<(u64, usize, usize)>, num_contexts: Option<u32>,
) -> PyResult<Option<Team>> {
    let pgas = current()?.pgas()?;
    let member = member.map(|(id, index, n_pes)| pgas_runtime::TeamMember {
        id: pgas_runtime::TeamUniqueId::from_u64(id),
        index,
        n_pes,
    });
    let config = TeamConfig { num_contexts };
    let team = py.detach(|| pgas.team_init(member, &config).map_err(to_py))?;
    Ok(team.map(|team| Team { team }))
}
