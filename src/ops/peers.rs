//! Peers' copies of symmetric tensors as addresses of this process, for the operations that
//! move data by copy engine or stream memory operations between mapped buffers.

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::DeviceRepr;

use crate::{Result, SymTensor};

/// `t`'s address on every PE (NVLink-mapped), by PE; 0 where it is not mapped here (callers
/// refuse those first, with [`crate::Pgas::first_unreachable`]).
pub(super) fn addresses<T: DeviceRepr>(t: &SymTensor<T>, n_pes: usize) -> Result<Vec<CUdeviceptr>> {
    (0..n_pes)
        .map(|pe| Ok(t.peer(pe)?.map_or(0, |v| v.as_device_ptr())))
        .collect()
}
