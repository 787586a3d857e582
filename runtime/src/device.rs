//! The CUDA driver and the GPUs it sees.

use cudarc::driver::CudaContext;

use crate::error::{Error, Result};

/// How many GPUs the CUDA driver sees on this machine (after `CUDA_VISIBLE_DEVICES`).
///
/// `Err(Error::NoCudaDriver)` when there is no driver: cudarc's dynamic loader panics when
/// `libcuda.so.1` is absent, so its presence is probed before any cudarc call.
pub fn gpu_count() -> Result<usize> {
    // SAFETY: only tries to open the driver library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(Error::NoCudaDriver);
    }
    let n = CudaContext::device_count().map_err(Error::cuda("counting GPUs"))?;
    Ok(n.max(0) as usize)
}
