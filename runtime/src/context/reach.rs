//! Which peers this PE reaches with loads and stores: the one place that decides it. NVSHMEM
//! answers (`nvshmem_ptr` is not null where NVLink or PCIe peer access maps a peer's heap), and
//! `PGAS_PEER_ACCESS` can narrow the answer, so that the paths for peers off NVLink (NVSHMEM's RMA
//! and collectives, which its proxy carries where nothing maps) run and are tested on one
//! machine. Every host-side choice between a peer-memory algorithm and an off-node one goes
//! through [`Pgas::peer_reachable`] or [`crate::SymTensor::peer`], which both ask here.

use crate::{Error, Pgas, Result, SymRegion};

/// The environment variable read at init: see [`PeerAccess`].
pub const PEER_ACCESS_VAR: &str = "PGAS_PEER_ACCESS";

/// Which peers pgas treats as load/store reachable, from [`PEER_ACCESS_VAR`] at init.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PeerAccess {
    /// Unset, or `nvshmem`: the peers NVSHMEM maps.
    #[default]
    Nvshmem,
    /// `none`: no other PE, as if every PE ran on a node of its own.
    None,
    /// `nodes:N`: only the PEs of this PE's group of `N` consecutive PEs (`my_pe / N`), as if
    /// the job ran on nodes of `N` GPUs each; and of those, only the ones NVSHMEM maps.
    Nodes(usize),
}

impl PeerAccess {
    /// Reads [`PEER_ACCESS_VAR`]'s value (`None` when unset).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for any other value than `nvshmem`, `none` or `nodes:N` with
    /// `N >= 1`, naming the three.
    pub fn parse(value: Option<&str>) -> Result<PeerAccess> {
        let Some(v) = value.map(str::trim) else {
            return Ok(PeerAccess::Nvshmem);
        };
        let nodes = v
            .strip_prefix("nodes:")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n >= 1);
        match (v, nodes) {
            ("" | "nvshmem", _) => Ok(PeerAccess::Nvshmem),
            ("none", _) => Ok(PeerAccess::None),
            (_, Some(n)) => Ok(PeerAccess::Nodes(n)),
            _ => Err(Error::InvalidConfig {
                name: PEER_ACCESS_VAR,
                value: v.to_owned(),
                reason: "it takes `nvshmem` (the peers NVSHMEM maps, the default), `none` (treat \
                         every other PE as off-node) or `nodes:N` (treat PEs as nodes of N \
                         consecutive PEs: only those of this PE's node are reachable). Fix: set \
                         one of these, or unset it"
                    .to_owned(),
            }),
        }
    }

    /// Whether this policy lets PE `me` reach PE `pe` with loads and stores (NVSHMEM may still
    /// say no). A PE always reaches itself.
    pub fn allows(self, me: usize, pe: usize) -> bool {
        match self {
            _ if pe == me => true,
            PeerAccess::Nvshmem => true,
            PeerAccess::None => false,
            PeerAccess::Nodes(n) => me / n == pe / n,
        }
    }
}

impl std::fmt::Display for PeerAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerAccess::Nvshmem => f.write_str("nvshmem"),
            PeerAccess::None => f.write_str("none"),
            PeerAccess::Nodes(n) => write!(f, "nodes:{n}"),
        }
    }
}

impl Pgas {
    /// Whether this PE reaches `region` on PE `pe` with plain loads and stores (NVLink or PCIe
    /// peer access: `nvshmem_ptr` is not null) and [`PeerAccess`] allows it. Always true for
    /// this PE itself. Inside a kernel, `x.has_peer(pe)` asks NVSHMEM alone: the host decides
    /// which algorithm runs.
    pub fn peer_reachable<T>(&self, region: &impl SymRegion<T>, pe: usize) -> Result<bool> {
        self.check_pe(pe)?;
        self.check_region("the region", region)?;
        Ok(self
            .inner
            .peer_address(region.as_device_ptr(), pe)
            .is_some())
    }

    /// The first PE of `pes` that this PE does not reach in `region` ([`Pgas::peer_reachable`]),
    /// if any: the check a peer-memory algorithm makes before it chooses itself.
    pub fn first_unreachable<T>(
        &self,
        region: &impl SymRegion<T>,
        pes: impl IntoIterator<Item = usize>,
    ) -> Result<Option<usize>> {
        for pe in pes {
            if !self.peer_reachable(region, pe)? {
                return Ok(Some(pe));
            }
        }
        Ok(None)
    }

    /// The [`PeerAccess`] this context runs with.
    pub fn peer_access(&self) -> PeerAccess {
        self.inner.peer_access
    }
}

impl super::pgas::Inner {
    /// `ptr` (a symmetric address) on PE `pe` as an address of this process, where this PE may
    /// load and store there ([`PeerAccess`] and `nvshmem_ptr` both agree); `pe` is checked by
    /// the caller.
    pub(crate) fn peer_address(&self, ptr: u64, pe: usize) -> Option<u64> {
        if !self.peer_access.allows(self.my_pe, pe) {
            return None;
        }
        // SAFETY: `ptr` is a symmetric address and `pe` a valid PE (the callers check both);
        // nvshmem_ptr only translates the address.
        let raw = unsafe {
            self.nvshmem
                .raw()
                .nvshmem_ptr(ptr as *const std::ffi::c_void, pe as i32)
        };
        (!raw.is_null()).then_some(raw as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_parsed_and_refused_with_the_choices() {
        assert_eq!(PeerAccess::parse(None).unwrap(), PeerAccess::Nvshmem);
        assert_eq!(
            PeerAccess::parse(Some("nvshmem")).unwrap(),
            PeerAccess::Nvshmem
        );
        assert_eq!(PeerAccess::parse(Some(" none ")).unwrap(), PeerAccess::None);
        assert_eq!(
            PeerAccess::parse(Some("nodes:2")).unwrap(),
            PeerAccess::Nodes(2)
        );
        for bad in ["nodes:0", "nodes:", "nodes:x", "off", "all"] {
            let e = PeerAccess::parse(Some(bad)).unwrap_err().to_string();
            assert!(
                e.contains(PEER_ACCESS_VAR) && e.contains("nodes:N") && e.contains(bad),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn nodes_group_consecutive_pes_and_a_pe_reaches_itself() {
        let two = PeerAccess::Nodes(2);
        assert!(two.allows(0, 1) && two.allows(3, 2));
        assert!(!two.allows(1, 2) && !two.allows(0, 3));
        assert!(PeerAccess::None.allows(5, 5) && !PeerAccess::None.allows(5, 4));
        assert!(PeerAccess::Nvshmem.allows(0, 7));
        assert_eq!(PeerAccess::Nodes(4).to_string(), "nodes:4");
    }
}
