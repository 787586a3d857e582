//! Direct views of symmetric memory from the host: another PE's copy of a tensor mapped into this
//! process ([`PeerView`], `nvshmem_ptr`) and a team's multicast address ([`MulticastView`],
//! `nvshmemx_mc_ptr`).

use std::ffi::c_void;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::DeviceRepr;

use super::local::LocalSlice;
use super::memory::{check_len, copy_in, copy_out, SymTensor};
use super::pgas::Pgas;
use super::shape::Shape;
use super::team::Team;
use crate::error::{Error, Result};

/// PE `pe`'s copy of a symmetric tensor, mapped into this process's address space (NVLink or
/// PCIe peer access): plain loads and stores reach the other GPU's memory. A cudarc buffer
/// (`DevicePtr`/`DevicePtrMut`), so cudarc copies and kernels can use it directly.
///
/// It borrows the tensor, which keeps the memory alive. Writing to it races with the owning PE
/// like any remote store: order it with barriers.
pub struct PeerView<'a, T> {
    tensor: &'a SymTensor<T>,
    pe: usize,
    ptr: CUdeviceptr,
    pub(crate) local: LocalSlice<T>,
}

impl<T> std::fmt::Debug for PeerView<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PeerView(PE {}, {} elements @ {:#x})",
            self.pe,
            self.tensor.shape.len(),
            self.ptr
        )
    }
}

impl<T: DeviceRepr> SymTensor<T> {
    /// PE `pe`'s copy of this tensor as memory this process can address (`nvshmem_ptr`), or
    /// `None` when `pe` is not reachable by loads and stores from here (another node, no peer
    /// access, or `PGAS_PEER_ACCESS` says so: RMA through NVSHMEM still works then). `pe ==
    /// my_pe` gives this PE's own copy. A PE outside the world is an error.
    pub fn peer(&self, pe: usize) -> Result<Option<PeerView<'_, T>>> {
        self.inner.check_pe(pe)?;
        self.inner.bind()?;
        let Some(ptr) = self.inner.peer_address(self.ptr, pe) else {
            return Ok(None);
        };
        Ok(Some(PeerView {
            tensor: self,
            pe,
            ptr,
            local: LocalSlice::new(&self.inner.stream, ptr, self.shape.len()),
        }))
    }

    /// The multicast address of this tensor for `team` (`nvshmemx_mc_ptr`): one address whose
    /// stores reach every team member's copy, and whose `multimem` loads reduce over them.
    /// Only NVLink SHARP (NVLS) systems have one; elsewhere this is [`Error::Unavailable`] with
    /// the reason (on the test machines `NVSHMEM_DISABLE_NVLS=1` turns it off).
    pub fn multicast(&self, team: Team) -> Result<MulticastView<'_, T>> {
        self.inner.bind()?;
        // SAFETY: as in `peer`.
        let raw = unsafe {
            self.inner
                .nvshmem
                .raw()
                .nvshmemx_mc_ptr(team.raw(), self.ptr as *const c_void)
        };
        if raw.is_null() {
            return Err(Error::Unavailable {
                what: "a multicast view",
                reason: multicast_off_reason(
                    team,
                    std::env::var("NVSHMEM_DISABLE_NVLS").ok().as_deref(),
                ),
            });
        }
        Ok(MulticastView {
            tensor: self,
            ptr: raw as CUdeviceptr,
            shape: self.shape,
        })
    }
}

/// Why `nvshmemx_mc_ptr` gave no address, given `NVSHMEM_DISABLE_NVLS`.
fn multicast_off_reason(team: Team, disable_nvls: Option<&str>) -> String {
    match disable_nvls {
        Some(v) if !matches!(v.trim(), "" | "0" | "n" | "N" | "false" | "FALSE") => format!(
            "NVLink multicast is turned off (NVSHMEM_DISABLE_NVLS={v}), so NVSHMEM mapped no \
             multicast object for team {}. Use per-PE views (SymTensor::peer) or RMA instead",
            team.raw()
        ),
        _ => format!(
            "NVSHMEM has no multicast object for team {}: it needs NVLink SHARP (an NVSwitch \
             system with NVLS, CUDA 12.1+ driver) with every team member on it. Use per-PE views \
             (SymTensor::peer) or RMA instead",
            team.raw()
        ),
    }
}

impl<T: DeviceRepr> PeerView<'_, T> {
    /// The PE whose copy this is.
    pub fn pe(&self) -> usize {
        self.pe
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.tensor.shape.len()
    }
    /// Always false: symmetric tensors hold at least one element.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// The tensor's shape.
    pub fn shape(&self) -> &[usize] {
        self.tensor.shape.dims()
    }
    /// The address of the peer's element 0 in this process (not a symmetric address: pass it
    /// to plain loads and stores, not to NVSHMEM calls).
    pub fn as_device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }
    /// Reads the peer's copy into host memory (a direct load over NVLink/PCIe).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        copy_out(&self.tensor.inner, self.ptr, self.len())
    }
    /// Writes `src` (same length) into the peer's copy (a direct store), and waits for it.
    pub fn copy_from(&mut self, src: &[T]) -> Result<()> {
        check_len("the source slice", src.len(), self.len())?;
        copy_in(&self.tensor.inner, self.ptr, src)
    }
}

/// A team's multicast address for a symmetric tensor ([`SymTensor::multicast`]): pass
/// [`MulticastView::as_device_ptr`] to kernels that use `multimem` instructions, or write every
/// member's copy from the host with [`MulticastView::copy_from`]. It borrows the tensor, which
/// keeps the mapping alive.
#[derive(Debug, Clone, Copy)]
pub struct MulticastView<'a, T> {
    tensor: &'a SymTensor<T>,
    ptr: CUdeviceptr,
    shape: Shape,
}

impl<T> MulticastView<'_, T> {
    /// The context of the tensor, for the write that runs as a kernel (`launch/multicast.rs`).
    pub(crate) fn pgas(&self) -> Pgas {
        Pgas {
            inner: self.tensor.inner.clone(),
        }
    }

    /// The multicast address of element 0.
    pub fn as_device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.len()
    }
    /// Always false.
    pub fn is_empty(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multicast_reason_names_the_switch_or_the_hardware() {
        let off = multicast_off_reason(Team::WORLD, Some("1"));
        assert!(
            off.contains("NVSHMEM_DISABLE_NVLS=1") && off.contains("SymTensor::peer"),
            "{off}"
        );
        for unset in [None, Some("0"), Some("")] {
            let hw = multicast_off_reason(Team::WORLD, unset);
            assert!(hw.contains("NVLink SHARP") && hw.contains("RMA"), "{hw}");
        }
    }
}
