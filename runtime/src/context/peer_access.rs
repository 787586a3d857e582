//! Which peers pgas treats as load/store reachable, as `PGAS_PEER_ACCESS` asks (read at init):
//! the policy half of the one reachability decision, which `reach.rs` applies.

use crate::error::{Error, Result};

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
