//! NVSHMEM teams: subsets of PEs that collectives and device code can address.

use super::pgas::Pgas;
use crate::error::{Error, Result};
use crate::ffi;
use crate::nvshmem::Nvshmem;

/// An NVSHMEM team handle (`nvshmem_team_t`); kernels receive it as an `int`.
///
/// The predefined teams need no cleanup; a team made by [`Team::split_strided`] should be
/// [`destroy`](Team::destroy)ed (collectively) when no longer needed, and in any case before the
/// last `Pgas` handle drops.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Team(i32);

impl Team {
    /// All PEs.
    pub const WORLD: Team = Team(ffi::NVSHMEM_TEAM_WORLD);
    /// The PEs that share memory with this one (same node, peer access).
    pub const SHARED: Team = Team(ffi::NVSHMEM_TEAM_SHARED);
    /// The PEs on this node.
    pub const NODE: Team = Team(ffi::NVSHMEMX_TEAM_NODE);

    /// The raw `nvshmem_team_t`.
    pub fn raw(self) -> i32 {
        self.0
    }

    /// This PE's number in the team, or `None` if it is not a member.
    pub fn my_pe(self, pgas: &Pgas) -> Option<usize> {
        let pe = unsafe { pgas.nvshmem().raw().nvshmem_team_my_pe(self.0) };
        usize::try_from(pe).ok()
    }

    /// Number of PEs in the team (0 for an invalid team).
    pub fn n_pes(self, pgas: &Pgas) -> usize {
        let n = unsafe { pgas.nvshmem().raw().nvshmem_team_n_pes(self.0) };
        usize::try_from(n).unwrap_or(0)
    }

    /// The number in `dest` of this team's PE `pe`, or `None` if it is not in `dest`.
    pub fn translate_pe(self, pgas: &Pgas, pe: usize, dest: Team) -> Option<usize> {
        let r = unsafe {
            pgas.nvshmem()
                .raw()
                .nvshmem_team_translate_pe(self.0, pe as i32, dest.0)
        };
        usize::try_from(r).ok()
    }

    /// Splits off the team of `size` PEs `start, start + stride, ...` (numbered in this team).
    /// Collective over this team. Returns `None` on PEs that are not members.
    pub fn split_strided(
        self,
        pgas: &Pgas,
        start: usize,
        stride: usize,
        size: usize,
    ) -> Result<Option<Team>> {
        let n = self.n_pes(pgas);
        let last = start.checked_add(stride.saturating_mul(size.saturating_sub(1)));
        if size == 0 || stride == 0 || last.map_or(true, |l| l >= n) {
            return Err(Error::InvalidConfig {
                name: "Team::split_strided",
                value: format!("start {start}, stride {stride}, size {size}"),
                reason: format!(
                    "the PEs must lie within the parent team's {n} PEs, with stride and size at \
                     least 1. Fix: pick start + stride * (size - 1) < {n}"
                ),
            });
        }
        let mut new = ffi::NVSHMEM_TEAM_INVALID;
        let status = unsafe {
            pgas.nvshmem().raw().nvshmem_team_split_strided(
                self.0,
                start as i32,
                stride as i32,
                size as i32,
                std::ptr::null(),
                0,
                &mut new,
            )
        };
        Nvshmem::check(
            status,
            "nvshmem_team_split_strided",
            "every PE of the parent team must call it with the same arguments",
        )?;
        Ok((new != ffi::NVSHMEM_TEAM_INVALID).then_some(Team(new)))
    }

    /// Host barrier over the team that also completes this PE's outstanding RMA
    /// (`nvshmemx_barrier_on_stream`, then a wait for the pgas stream).
    pub fn barrier(self, pgas: &Pgas) -> Result<()> {
        pgas.inner.bind()?;
        let status = unsafe {
            pgas.nvshmem()
                .raw()
                .nvshmemx_barrier_on_stream(self.0, pgas.stream().cu_stream())
        };
        Nvshmem::check(
            status,
            "nvshmemx_barrier_on_stream",
            "every PE of the team must call it",
        )?;
        pgas.inner.sync_stream()
    }

    /// Destroys a team made by a split (collective over its members). Predefined teams are left
    /// alone.
    pub fn destroy(self, pgas: &Pgas) {
        if ![Team::WORLD, Team::SHARED, Team::NODE].contains(&self) {
            unsafe { pgas.nvshmem().raw().nvshmem_team_destroy(self.0) };
        }
    }
}

impl Pgas {
    /// [`Team::split_strided`] of [`Team::WORLD`].
    pub fn team_split_strided(
        &self,
        start: usize,
        stride: usize,
        size: usize,
    ) -> Result<Option<Team>> {
        Team::WORLD.split_strided(self, start, stride, size)
    }
}
