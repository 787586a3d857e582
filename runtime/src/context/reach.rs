//! Which peers this PE reaches with loads and stores: the one place that decides it. NVSHMEM
//! answers (`nvshmem_ptr` is not null where NVLink or PCIe peer access maps a peer's heap), and
//! [`PeerAccess`] (`PGAS_PEER_ACCESS`) can narrow the answer, so that the paths for peers off
//! NVLink (NVSHMEM's RMA and collectives, which its proxy carries where nothing maps) run and
//! are tested on one machine. Every host-side choice between a peer-memory algorithm and an
//! off-node one goes through [`Pgas::peer_reachable`] or [`crate::SymTensor::peer`], which both
//! ask here.

use super::memory::SymRegion;
use super::peer_access::PeerAccess;
use super::pgas::{Inner, Pgas};
use crate::error::Result;

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
        &self, region: &impl SymRegion<T>, pes: impl IntoIterator<Item = usize>,
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

impl Inner {
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
