//! NVSHMEM teams: subsets of PEs that collectives and device code can address.

use std::fmt;

use super::pgas::Pgas;
use crate::error::{Error, Result};
use crate::ffi;
use crate::nvshmem::Nvshmem;

/// An NVSHMEM team handle (`nvshmem_team_t`); kernels receive it as an `int`.
///
/// The predefined teams need no cleanup; a team made by [`Team::split_strided`] or
/// [`Team::split_2d`] should be [`destroy`](Team::destroy)ed (collectively) when no longer
/// needed, and in any case before the last `Pgas` handle drops. A destroyed team's handle must
/// not be used again (NVSHMEM may hand the same number to a later split).
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

    /// The number in `dest` of this team's PE `pe`, or `None` if it is not in `dest`. A `pe`
    /// outside this team is an error.
    pub fn translate_pe(self, pgas: &Pgas, pe: usize, dest: Team) -> Result<Option<usize>> {
        let n = self.n_pes(pgas);
        if pe >= n {
            return Err(Error::InvalidPe { pe, n_pes: n });
        }
        let r = unsafe {
            pgas.nvshmem()
                .raw()
                .nvshmem_team_translate_pe(self.0, pe as i32, dest.0)
        };
        Ok(usize::try_from(r).ok())
    }

    /// This PE's number in the team, or [`Error::NotInTeam`] naming `what` was attempted.
    fn member(self, pgas: &Pgas, what: &'static str) -> Result<usize> {
        self.my_pe(pgas)
            .ok_or(Error::NotInTeam { team: self.0, what })
    }

    /// The team's configuration (`nvshmem_team_get_config`). Only members may ask.
    pub fn config(self, pgas: &Pgas) -> Result<TeamConfig> {
        self.member(pgas, "read its configuration")?;
        let mut raw = TeamConfig::default().to_raw();
        // SAFETY: `raw` is a versioned config NVSHMEM fills in.
        unsafe {
            pgas.nvshmem()
                .raw()
                .nvshmem_team_get_config(self.0, &mut raw)
        };
        Ok(TeamConfig::from_raw(&raw))
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
        self.split_strided_with(pgas, start, stride, size, &TeamConfig::default())
    }

    /// [`Team::split_strided`] with a configuration for the new team (the same on every PE).
    pub fn split_strided_with(
        self,
        pgas: &Pgas,
        start: usize,
        stride: usize,
        size: usize,
        config: &TeamConfig,
    ) -> Result<Option<Team>> {
        self.member(pgas, "split it")?;
        let n = self.n_pes(pgas);
        let last = start.checked_add(stride.saturating_mul(size.saturating_sub(1)));
        if size == 0 || stride == 0 || last.is_none_or(|l| l >= n) {
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
        let raw_config = config.to_raw();
        let status = unsafe {
            pgas.nvshmem().raw().nvshmem_team_split_strided(
                self.0,
                start as i32,
                stride as i32,
                size as i32,
                config.as_arg(&raw_config),
                config.mask(),
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

    /// Splits this team into a 2-D grid with rows of `xrange` PEs (`nvshmem_team_split_2d`):
    /// returns this PE's row team (its x axis: PEs with the same `my_pe / xrange`) and column
    /// team (its y axis: the same `my_pe % xrange`). Collective over this team; `xrange` is 1 to
    /// the team's size. With a size that `xrange` does not divide, the last row is short.
    pub fn split_2d(
        self,
        pgas: &Pgas,
        xrange: usize,
        x_config: &TeamConfig,
        y_config: &TeamConfig,
    ) -> Result<(Team, Team)> {
        self.member(pgas, "split it")?;
        let n = self.n_pes(pgas);
        if xrange == 0 || xrange > n {
            return Err(Error::InvalidConfig {
                name: "Team::split_2d",
                value: format!("xrange {xrange}"),
                reason: format!("a row holds 1 to the parent team's {n} PEs"),
            });
        }
        let (mut x, mut y) = (ffi::NVSHMEM_TEAM_INVALID, ffi::NVSHMEM_TEAM_INVALID);
        let (xc, yc) = (x_config.to_raw(), y_config.to_raw());
        // SAFETY: both configs are versioned; the outputs are team handles.
        let status = unsafe {
            pgas.nvshmem().raw().nvshmem_team_split_2d(
                self.0,
                xrange as i32,
                x_config.as_arg(&xc),
                x_config.mask(),
                &mut x,
                y_config.as_arg(&yc),
                y_config.mask(),
                &mut y,
            )
        };
        Nvshmem::check(
            status,
            "nvshmem_team_split_2d",
            "every PE of the parent team must call it with the same xrange",
        )?;
        // Every member of the parent is in exactly one row and one column.
        if x == ffi::NVSHMEM_TEAM_INVALID || y == ffi::NVSHMEM_TEAM_INVALID {
            return Err(Error::Nvshmem {
                call: "nvshmem_team_split_2d",
                status: -1,
                hint: "NVSHMEM made no row or column team for this PE (its team pool may be full: \
                       destroy teams no longer needed, or raise NVSHMEM_MAX_TEAMS)",
            });
        }
        Ok((Team(x), Team(y)))
    }

    /// Host barrier over the team that also completes this PE's outstanding RMA
    /// (`nvshmemx_barrier_on_stream`, then a wait for the pgas stream).
    pub fn barrier(self, pgas: &Pgas) -> Result<()> {
        self.member(pgas, "take part in its barrier")?;
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

    /// Destroys a team made by a split (collective over its members). The predefined teams
    /// cannot be destroyed.
    pub fn destroy(self, pgas: &Pgas) -> Result<()> {
        if [Team::WORLD, Team::SHARED, Team::NODE].contains(&self) {
            return Err(Error::InvalidConfig {
                name: "Team::destroy",
                value: format!("{self}"),
                reason: "the predefined teams (WORLD, SHARED, NODE) live as long as NVSHMEM; \
                         destroy only teams made by a split"
                    .into(),
            });
        }
        self.member(pgas, "destroy it")?;
        // The stream may still run collectives over the team.
        pgas.inner.sync_stream()?;
        unsafe { pgas.nvshmem().raw().nvshmem_team_destroy(self.0) };
        Ok(())
    }
}

impl fmt::Display for Team {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Team::WORLD => f.write_str("Team::WORLD"),
            Team::SHARED => f.write_str("Team::SHARED"),
            Team::NODE => f.write_str("Team::NODE"),
            Team(t) => write!(f, "team {t}"),
        }
    }
}

/// Options for a team made by a split (`nvshmem_team_config_t`); the default sets none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TeamConfig {
    /// How many communication contexts the team should be able to hold
    /// (`NVSHMEM_TEAM_CONFIG_MASK_NUM_CONTEXTS`); `None` leaves NVSHMEM's default.
    pub num_contexts: Option<u32>,
}

impl TeamConfig {
    /// `NVSHMEM_TEAM_CONFIG_INITIALIZER` with this config's fields.
    fn to_raw(self) -> ffi::nvshmem_team_config_t {
        ffi::nvshmem_team_config_t {
            // NVSHMEMI_TEAM_CONFIG_VERSION_2_IDENTIFIER: (2 << 16) + the struct's size.
            version: (2 << 16) + std::mem::size_of::<ffi::nvshmem_team_config_t>() as i32,
            num_contexts: self.num_contexts.map_or(-1, |n| n as i32),
            // TEAM_ULSCALAR_INVALID: no unique id.
            uniqueid: u64::MAX,
            ..Default::default()
        }
    }

    fn from_raw(raw: &ffi::nvshmem_team_config_t) -> TeamConfig {
        TeamConfig {
            num_contexts: u32::try_from(raw.num_contexts).ok(),
        }
    }

    /// The config argument of a split: null when no field is set, as pgas passed before
    /// configs existed (NVSHMEM then reads nothing).
    fn as_arg(self, raw: &ffi::nvshmem_team_config_t) -> *const ffi::nvshmem_team_config_t {
        if self.mask() == 0 {
            std::ptr::null()
        } else {
            raw
        }
    }

    /// Which fields NVSHMEM should read.
    fn mask(self) -> std::os::raw::c_long {
        if self.num_contexts.is_some() {
            ffi::NVSHMEM_TEAM_CONFIG_MASK_NUM_CONTEXTS as std::os::raw::c_long
        } else {
            0
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_carries_its_version_and_mask() {
        let none = TeamConfig::default();
        let raw = none.to_raw();
        assert_eq!(raw.version, (2 << 16) + 64);
        assert_eq!((raw.num_contexts, raw.uniqueid), (-1, u64::MAX));
        assert_eq!(none.mask(), 0);
        assert!(none.as_arg(&raw).is_null());
        let two = TeamConfig {
            num_contexts: Some(2),
        };
        let raw = two.to_raw();
        assert_eq!((raw.num_contexts, two.mask()), (2, 1));
        assert!(!two.as_arg(&raw).is_null());
        assert_eq!(TeamConfig::from_raw(&raw), two);
    }

    #[test]
    fn teams_print_their_names() {
        assert_eq!(Team::WORLD.to_string(), "Team::WORLD");
        assert_eq!(Team(7).to_string(), "team 7");
    }
}
