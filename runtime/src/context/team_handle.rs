//! The [`Team`] handle and the registry of live split teams, apart from `team.rs` (the calls
//! that take a `Pgas`) so that the context can hold the registry without importing those calls.

use std::fmt;

use crate::error::{Error, Result};
use crate::ffi;

/// An NVSHMEM team handle (`nvshmem_team_t`); kernels receive it as an `int`.
///
/// The predefined teams need no cleanup; a team made by [`Team::split_strided`] or
/// [`Team::split_2d`] should be [`destroy`](Team::destroy)ed (collectively) when no longer
/// needed, and in any case before the last `Pgas` handle drops.
///
/// The handle is `Copy`, so copies can outlive the team. Each split team carries a generation
/// that the context records while the team lives; every use of a destroyed team (its queries,
/// splits, barrier, a second destroy, host collectives, a kernel launch) is
/// [`Error::TeamDestroyed`] instead of a call into NVSHMEM on a freed team (which crashed the
/// process). NVSHMEM may hand the same number to a later split: the new team gets a new
/// generation, so a stale copy never names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Team {
    pub(super) raw: i32,
    /// 0 for the predefined teams; for a split team, its number in the context's
    /// [`TeamRegistry`] (never 0).
    pub(super) generation: u32,
}

/// The split teams alive in one context, by NVSHMEM handle, with the generation each was given.
/// A [`Team`] is usable while its handle maps to its own generation here.
#[derive(Debug, Default)]
pub(crate) struct TeamRegistry {
    live: std::collections::HashMap<i32, u32>,
    /// The last generation handed out.
    last: u32,
}

impl TeamRegistry {
    /// Records a team NVSHMEM just made with handle `raw` and returns its handle.
    pub(crate) fn register(&mut self, raw: i32) -> Team {
        // u32 generations: 4 billion splits per process before one could repeat.
        self.last = self.last.wrapping_add(1).max(1);
        self.live.insert(raw, self.last);
        Team {
            raw,
            generation: self.last,
        }
    }

    /// Ok while `team` may be used: a predefined team, or a split team not yet destroyed.
    /// `what` says what was attempted, for the error.
    pub(crate) fn check(&self, team: Team, what: &'static str) -> Result<()> {
        if team.generation == 0 || self.live.get(&team.raw) == Some(&team.generation) {
            Ok(())
        } else {
            Err(Error::TeamDestroyed {
                team: team.raw,
                what,
            })
        }
    }

    /// Forgets `team` once destroyed; an error (and no change) if it already was.
    pub(crate) fn retire(&mut self, team: Team) -> Result<()> {
        self.check(team, "destroy it again")?;
        self.live.remove(&team.raw);
        Ok(())
    }
}

impl Team {
    /// All PEs.
    pub const WORLD: Team = Team::predefined(ffi::NVSHMEM_TEAM_WORLD);
    /// The PEs that share memory with this one (same node, peer access).
    pub const SHARED: Team = Team::predefined(ffi::NVSHMEM_TEAM_SHARED);
    /// The PEs on this node.
    pub const NODE: Team = Team::predefined(ffi::NVSHMEMX_TEAM_NODE);
    /// The PEs with this PE's index on their node, one per node
    /// (`NVSHMEMX_TEAM_SAME_MYPE_NODE`): the team of PE 2 of every node, say. On one node it
    /// holds this PE alone.
    pub const SAME_MYPE_NODE: Team = Team::predefined(ffi::NVSHMEMX_TEAM_SAME_MYPE_NODE);

    const fn predefined(raw: i32) -> Team {
        Team { raw, generation: 0 }
    }

    /// The raw `nvshmem_team_t` (what a kernel receives). For a destroyed team it is a stale
    /// number that NVSHMEM may have given to another team.
    pub fn raw(self) -> i32 {
        self.raw
    }
}

impl fmt::Display for Team {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Team::WORLD => f.write_str("Team::WORLD"),
            Team::SHARED => f.write_str("Team::SHARED"),
            Team::NODE => f.write_str("Team::NODE"),
            Team::SAME_MYPE_NODE => f.write_str("Team::SAME_MYPE_NODE"),
            Team { raw, .. } => write!(f, "team {raw}"),
        }
    }
}
