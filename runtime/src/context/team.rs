//! NVSHMEM teams: subsets of PEs that collectives and device code can address.

use cudarc::driver::CudaStream;

use super::pgas::Pgas;
pub use super::team_handle::Team;
#[cfg(test)]
use super::team_handle::TeamRegistry;
use crate::error::{Error, Result};
use crate::ffi;
use crate::nvshmem::Nvshmem;

impl Team {
    /// `Ok` while the team may be used (a predefined team, or a split team not yet
    /// destroyed), else [`Error::TeamDestroyed`]. For wrappers that keep a team and use it
    /// later, such as `pgas::coll::Comm`, to refuse a call over a team destroyed since.
    pub fn ensure_live(self, pgas: &Pgas) -> Result<()> {
        self.check_live(pgas, "use it")
    }

    /// [`Error::TeamDestroyed`] if the team was destroyed; `what` names the attempt.
    pub(crate) fn check_live(self, pgas: &Pgas, what: &'static str) -> Result<()> {
        // The predefined teams live as long as NVSHMEM: no lock on the launch path for them.
        if self.generation == 0 {
            return Ok(());
        }
        pgas.inner.teams().check(self, what)
    }

    /// This PE's number in the team, `Ok(None)` if it is not a member, and
    /// [`Error::TeamDestroyed`] for a destroyed team.
    pub fn my_pe(self, pgas: &Pgas) -> Result<Option<usize>> {
        self.check_live(pgas, "ask for this PE's number in it")?;
        // SAFETY: the team is live (checked above), so NVSHMEM still holds it.
        let pe = unsafe { pgas.nvshmem().raw().nvshmem_team_my_pe(self.raw) };
        Ok(usize::try_from(pe).ok())
    }

    /// Number of PEs in the team; [`Error::TeamDestroyed`] for a destroyed team.
    pub fn n_pes(self, pgas: &Pgas) -> Result<usize> {
        self.check_live(pgas, "count its PEs")?;
        // SAFETY: as in `my_pe`.
        let n = unsafe { pgas.nvshmem().raw().nvshmem_team_n_pes(self.raw) };
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// The number in `dest` of this team's PE `pe`, or `None` if it is not in `dest`. A `pe`
    /// outside this team is an error, and so is either team destroyed.
    pub fn translate_pe(self, pgas: &Pgas, pe: usize, dest: Team) -> Result<Option<usize>> {
        dest.check_live(pgas, "translate PE numbers into it")?;
        let n = self.n_pes(pgas)?;
        if pe >= n {
            return Err(Error::InvalidPe { pe, n_pes: n });
        }
        // SAFETY: both teams are live (checked above).
        let r = unsafe {
            pgas.nvshmem()
                .raw()
                .nvshmem_team_translate_pe(self.raw, pe as i32, dest.raw)
        };
        Ok(usize::try_from(r).ok())
    }

    /// This PE's number in the team, or [`Error::NotInTeam`] naming `what` was attempted.
    /// [`Error::TeamDestroyed`] for a destroyed team.
    fn member(self, pgas: &Pgas, what: &'static str) -> Result<usize> {
        self.check_live(pgas, what)?;
        self.my_pe(pgas)?.ok_or(Error::NotInTeam {
            team: self.raw,
            what,
        })
    }

    /// The team's configuration (`nvshmem_team_get_config`). Only members may ask.
    pub fn config(self, pgas: &Pgas) -> Result<TeamConfig> {
        self.member(pgas, "read its configuration")?;
        let mut raw = TeamConfig::default().to_raw();
        // SAFETY: `raw` is a versioned config NVSHMEM fills in.
        unsafe {
            pgas.nvshmem()
                .raw()
                .nvshmem_team_get_config(self.raw, &mut raw)
        };
        Ok(TeamConfig::from_raw(&raw))
    }

    /// Splits off the team of `size` PEs `start, start + stride, ...` (numbered in this team).
    /// Collective over this team. Returns `None` on PEs that are not members.
    pub fn split_strided(
        self, pgas: &Pgas, start: usize, stride: usize, size: usize,
    ) -> Result<Option<Team>> {
        self.split_strided_with(pgas, start, stride, size, &TeamConfig::default())
    }

    /// [`Team::split_strided`] with a configuration for the new team (the same on every PE).
    pub fn split_strided_with(
        self, pgas: &Pgas, start: usize, stride: usize, size: usize, config: &TeamConfig,
    ) -> Result<Option<Team>> {
        self.member(pgas, "split it")?;
        let n = self.n_pes(pgas)?;
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
        // SAFETY: `self.raw` is a live team this PE belongs to, the stride and size were
        // checked against it above, and `raw_config`/`new` are live locals.
        let status = unsafe {
            pgas.nvshmem().raw().nvshmem_team_split_strided(
                self.raw,
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
        Ok((new != ffi::NVSHMEM_TEAM_INVALID).then(|| pgas.inner.teams().register(new)))
    }

    /// Splits this team into a 2-D grid with rows of `xrange` PEs (`nvshmem_team_split_2d`):
    /// returns this PE's row team (its x axis: PEs with the same `my_pe / xrange`) and column
    /// team (its y axis: the same `my_pe % xrange`). Collective over this team; `xrange` is 1 to
    /// the team's size. With a size that `xrange` does not divide, the last row is short.
    pub fn split_2d(
        self, pgas: &Pgas, xrange: usize, x_config: &TeamConfig, y_config: &TeamConfig,
    ) -> Result<(Team, Team)> {
        self.member(pgas, "split it")?;
        let n = self.n_pes(pgas)?;
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
                self.raw,
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
        let mut teams = pgas.inner.teams();
        Ok((teams.register(x), teams.register(y)))
    }

    /// Host barrier over the team that also completes this PE's outstanding RMA
    /// (`nvshmemx_barrier_on_stream`, then a wait for the pgas stream).
    pub fn barrier(self, pgas: &Pgas) -> Result<()> {
        self.barrier_on(pgas, pgas.stream())?;
        pgas.inner.sync_stream()
    }

    /// [`Team::barrier`] on `stream` (a stream of this context), without the wait on the host.
    pub fn barrier_on(self, pgas: &Pgas, stream: &CudaStream) -> Result<()> {
        self.member(pgas, "take part in its barrier")?;
        pgas.check_stream(stream)?;
        pgas.inner.bind()?;
        // SAFETY: this PE is a member of the live team `self.raw` (checked above), and the
        // stream belongs to the bound context.
        let status = unsafe {
            pgas.nvshmem()
                .raw()
                .nvshmemx_barrier_on_stream(self.raw, stream.cu_stream())
        };
        Nvshmem::check(
            status,
            "nvshmemx_barrier_on_stream",
            "every PE of the team must call it",
        )
    }

    /// Synchronizes the team's PEs without completing outstanding RMA
    /// (`nvshmemx_team_sync_on_stream` on the pgas stream, then a wait for it).
    pub fn sync(self, pgas: &Pgas) -> Result<()> {
        self.sync_on(pgas, pgas.stream())?;
        pgas.inner.sync_stream()
    }

    /// [`Team::sync`] on `stream` (a stream of this context), without the wait on the host.
    pub fn sync_on(self, pgas: &Pgas, stream: &CudaStream) -> Result<()> {
        self.member(pgas, "take part in its sync")?;
        pgas.check_stream(stream)?;
        pgas.inner.bind()?;
        // SAFETY: as in `barrier_on`.
        let status = unsafe {
            pgas.nvshmem()
                .raw()
                .nvshmemx_team_sync_on_stream(self.raw, stream.cu_stream())
        };
        Nvshmem::check(
            status,
            "nvshmemx_team_sync_on_stream",
            "every PE of the team must call it",
        )
    }

    /// Destroys a team made by a split (collective over its members). The predefined teams
    /// cannot be destroyed, and a team only once: every later use of any copy of the handle is
    /// [`Error::TeamDestroyed`].
    pub fn destroy(self, pgas: &Pgas) -> Result<()> {
        if self.generation == 0 {
            return Err(Error::InvalidConfig {
                name: "Team::destroy",
                value: format!("{self}"),
                reason: "the predefined teams (WORLD, SHARED, NODE, SAME_MYPE_NODE) live as long \
                         as NVSHMEM; \
                         destroy only teams made by a split"
                    .into(),
            });
        }
        self.check_live(pgas, "destroy it again")?;
        self.member(pgas, "destroy it")?;
        // Any stream of the context may still run work over the team: the pgas stream's
        // collectives, and kernels launched with it on other streams (`launch_on`), which a
        // wait for the pgas stream alone would leave running while NVSHMEM frees the team.
        pgas.inner.bind()?;
        pgas.inner.ctx.synchronize().map_err(Error::cuda(
            "waiting for the GPU's work before destroying a team",
        ))?;
        // Held across the destroy, so that no other thread checks the team live in between.
        let mut teams = pgas.inner.teams();
        teams.retire(self)?;
        // SAFETY: the team was live (retire checked it), and is forgotten before NVSHMEM frees it.
        unsafe { pgas.nvshmem().raw().nvshmem_team_destroy(self.raw) };
        Ok(())
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

/// A team's unique id (`nvshmemx_team_uniqueid_t`): one PE makes it with
/// [`TeamUniqueId::new`], hands it to the PEs that will form the team (a host
/// [`Pgas::broadcast`] of [`TeamUniqueId::to_u64`], say), and they make the team with
/// [`Pgas::team_init`], without a parent team to split.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TeamUniqueId(u64);

impl TeamUniqueId {
    /// A fresh id (`nvshmemx_team_get_uniqueid`). Local: no other PE takes part.
    pub fn new(pgas: &Pgas) -> Result<TeamUniqueId> {
        pgas.inner.bind()?;
        let mut id: ffi::nvshmemx_team_uniqueid_t = 0;
        // SAFETY: NVSHMEM is initialized (a Pgas exists); `id` is a live local it writes.
        let status = unsafe { pgas.nvshmem().raw().nvshmemx_team_get_uniqueid(&mut id) };
        Nvshmem::check(
            status,
            "nvshmemx_team_get_uniqueid",
            "NVSHMEM refused to make a team id; NVSHMEM_DEBUG=WARN says why",
        )?;
        Ok(TeamUniqueId(id))
    }

    /// The id as a number, to send to the other members.
    pub fn to_u64(self) -> u64 {
        self.0
    }

    /// An id from the number another PE sent.
    pub fn from_u64(id: u64) -> TeamUniqueId {
        TeamUniqueId(id)
    }
}

/// This PE's place in a team made by [`Pgas::team_init`]: the team's id, this PE's number in
/// it (`0..n_pes`) and the team's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TeamMember {
    /// The id every member passes.
    pub id: TeamUniqueId,
    /// This PE's number in the team; each member has its own.
    pub index: usize,
    /// The team's size; the same on every member.
    pub n_pes: usize,
}

/// "Not a member" in the gathered words of [`Pgas::team_init`] (also NVSHMEM's invalid id).
const NO_TEAM: u64 = u64::MAX;

/// Checks what every PE of the world passed to [`Pgas::team_init`] (`None`: not a member):
/// the members of each id must agree on the size, be exactly that many, and hold the numbers
/// `0..size` once each. The message names the PEs and the fix.
fn check_members(offers: &[Option<(u64, u64, u64)>]) -> std::result::Result<(), String> {
    let outside: Vec<usize> = (0..offers.len())
        .filter(|&pe| offers[pe].is_none())
        .collect();
    if !outside.is_empty() && outside.len() < offers.len() {
        // On 2 x H100 (NVSHMEM 3.4.5; docs/runtime.md) a member's nvshmemx_team_init did not
        // return while the other PE stayed out.
        return Err(format!(
            "PE(s) {outside:?} join no team while others do, and NVSHMEM's team_init does not \
             return on the members then. Fix: make a team of some PEs with \
             Team::split_strided or split_2d of a parent team, or have every PE join a team \
             in the same team_init call"
        ));
    }
    let mut ids: Vec<u64> = offers.iter().flatten().map(|m| m.0).collect();
    ids.sort_unstable();
    ids.dedup();
    for id in ids {
        if id == NO_TEAM {
            let pes: Vec<usize> = pes_where(offers, |m| m.0 == NO_TEAM);
            return Err(format!(
                "PE(s) {pes:?} passed the invalid team id {NO_TEAM:#x}. Fix: pass an id made by \
                 TeamUniqueId::new"
            ));
        }
        let pes = pes_where(offers, |m| m.0 == id);
        let sizes: Vec<u64> = pes
            .iter()
            .map(|&pe| offers[pe].map_or(0, |m| m.2))
            .collect();
        if sizes.windows(2).any(|w| w[0] != w[1]) {
            return Err(format!(
                "the members of team id {id:#x}, PEs {pes:?}, passed different sizes {sizes:?}. \
                 Fix: pass the same n_pes on every member"
            ));
        }
        let size = sizes[0];
        if size != pes.len() as u64 {
            return Err(format!(
                "team id {id:#x} has size {size}, but {} PE(s) {pes:?} joined it. Fix: every one \
                 of the n_pes members calls team_init with the id (and the others with None); \
                 members that hold different ids form different teams",
                pes.len()
            ));
        }
        let mut index: Vec<u64> = pes
            .iter()
            .map(|&pe| offers[pe].map_or(0, |m| m.1))
            .collect();
        index.sort_unstable();
        if index.iter().enumerate().any(|(i, &x)| x != i as u64) {
            return Err(format!(
                "the members of team id {id:#x}, PEs {pes:?}, passed the indices {index:?} \
                 (sorted), not 0..{size} once each. Fix: give each member its own index below \
                 n_pes"
            ));
        }
    }
    Ok(())
}

fn pes_where(
    offers: &[Option<(u64, u64, u64)>], f: impl Fn(&(u64, u64, u64)) -> bool,
) -> Vec<usize> {
    (0..offers.len())
        .filter(|&pe| offers[pe].as_ref().is_some_and(&f))
        .collect()
}

impl Pgas {
    /// Makes a team from a unique id that its members share (`nvshmemx_team_init` with
    /// `NVSHMEM_TEAM_CONFIG_MASK_UNIQUEID`), with no parent team to split: each member passes
    /// `Some(TeamMember { id, index, n_pes })`, every other PE `None`; `config` applies to the
    /// new team (`num_contexts`). Returns the team on its members, `None` on the others.
    ///
    /// Collective over all PEs, so that pgas can compare what they passed first (three 8-byte
    /// gathers): members of one id that disagree on the size, a size that is not the number of
    /// members, indices that are not `0..n_pes` once each, or some PEs joining no team while
    /// others do (NVSHMEM's `team_init` did not return on the members then: make such teams
    /// with [`Team::split_strided`]), are an `Err` on every PE naming the PEs and the fix,
    /// before NVSHMEM (which would wait for members that never come) is called.
    pub fn team_init(
        &self, member: Option<TeamMember>, config: &TeamConfig,
    ) -> Result<Option<Team>> {
        self.inner.bind()?;
        let word = |f: fn(&TeamMember) -> u64| member.as_ref().map_or(NO_TEAM, f);
        let ids = super::agree::gather(&self.inner, word(|m| m.id.0))?;
        let indices = super::agree::gather(&self.inner, word(|m| m.index as u64))?;
        let sizes = super::agree::gather(&self.inner, word(|m| m.n_pes as u64))?;
        let offers: Vec<Option<(u64, u64, u64)>> = (0..ids.len())
            .map(|pe| (sizes[pe] != NO_TEAM).then_some((ids[pe], indices[pe], sizes[pe])))
            .collect();
        check_members(&offers).map_err(|reason| Error::InvalidConfig {
            name: "Pgas::team_init",
            value: format!("{member:?} on PE {}", self.my_pe()),
            reason,
        })?;
        let Some(m) = member else {
            return Ok(None);
        };
        let mut raw_config = config.to_raw();
        raw_config.uniqueid = m.id.0;
        let mask = config.mask() | ffi::NVSHMEM_TEAM_CONFIG_MASK_UNIQUEID as std::os::raw::c_long;
        let mut new = ffi::NVSHMEM_TEAM_INVALID;
        // SAFETY: the members agreed on id, size and indices (checked above, the same on every
        // PE), `raw_config` is a versioned config with the id, and `new` is a live local.
        let status = unsafe {
            self.nvshmem().raw().nvshmemx_team_init(
                &mut new,
                &mut raw_config,
                mask,
                m.n_pes as i32,
                m.index as i32,
            )
        };
        Nvshmem::check(
            status,
            "nvshmemx_team_init",
            "the members agreed on the id, size and indices; NVSHMEM_DEBUG=WARN says why NVSHMEM \
             refused (its team pool may be full: destroy teams no longer needed, or raise \
             NVSHMEM_MAX_TEAMS)",
        )?;
        if new == ffi::NVSHMEM_TEAM_INVALID {
            return Err(Error::Nvshmem {
                call: "nvshmemx_team_init",
                status: -1,
                hint: "NVSHMEM made no team (its team pool may be full: destroy teams no longer \
                       needed, or raise NVSHMEM_MAX_TEAMS)",
            });
        }
        Ok(Some(self.inner.teams().register(new)))
    }

    /// [`Team::split_strided`] of [`Team::WORLD`].
    pub fn team_split_strided(
        &self, start: usize, stride: usize, size: usize,
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
    fn team_init_offers_must_agree() {
        let m = |id, index, size| Some((id, index, size));
        check_members(&[m(7, 1, 2), m(7, 0, 2)]).unwrap();
        check_members(&[m(7, 0, 1), m(8, 0, 1)]).unwrap();
        check_members(&[None, None]).unwrap();
        let e = check_members(&[m(7, 1, 2), None, m(7, 0, 2)]).unwrap_err();
        assert!(
            e.contains("PE(s) [1] join no team") && e.contains("split_strided"),
            "{e}"
        );
        let e = check_members(&[m(7, 0, 2), m(7, 1, 3)]).unwrap_err();
        assert!(
            e.contains("different sizes [2, 3]") && e.contains("Fix:"),
            "{e}"
        );
        let e = check_members(&[m(7, 0, 2), m(8, 1, 2)]).unwrap_err();
        assert!(e.contains("but 1 PE(s) [0] joined"), "{e}");
        let e = check_members(&[m(7, 0, 2), m(7, 0, 2)]).unwrap_err();
        assert!(
            e.contains("indices [0, 0]") && e.contains("its own index"),
            "{e}"
        );
        let e = check_members(&[m(NO_TEAM, 0, 1)]).unwrap_err();
        assert!(
            e.contains("invalid team id") && e.contains("TeamUniqueId::new"),
            "{e}"
        );
    }

    #[test]
    fn teams_print_their_names() {
        assert_eq!(Team::WORLD.to_string(), "Team::WORLD");
        assert_eq!(Team::SAME_MYPE_NODE.to_string(), "Team::SAME_MYPE_NODE");
        assert_eq!(TeamRegistry::default().register(7).to_string(), "team 7");
    }

    #[test]
    fn a_destroyed_team_is_refused_and_never_aliases_a_later_one() {
        let mut reg = TeamRegistry::default();
        for t in [Team::WORLD, Team::SHARED, Team::NODE] {
            reg.check(t, "use it").unwrap();
        }
        let a = reg.register(5);
        let b = reg.register(6);
        reg.check(a, "use it").unwrap();
        reg.retire(a).unwrap();
        let e = reg.check(a, "take part in its barrier").unwrap_err();
        assert!(
            matches!(e, Error::TeamDestroyed { team: 5, what } if what.contains("barrier")),
            "{e}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains("team 5 was destroyed") && msg.contains("Fix:"),
            "{msg}"
        );
        // Destroying twice is an error, and leaves the registry as it was.
        assert!(matches!(reg.retire(a), Err(Error::TeamDestroyed { .. })));
        reg.check(b, "use it").unwrap();
        // NVSHMEM reuses handle 5 for a later split: the new team works, the old copy does not.
        let c = reg.register(5);
        assert_eq!(c.raw(), a.raw());
        assert_ne!(c, a);
        reg.check(c, "use it").unwrap();
        assert!(reg.check(a, "use it").is_err());
        // A stale copy cannot retire the new team either.
        assert!(reg.retire(a).is_err());
        reg.check(c, "use it").unwrap();
    }
}
