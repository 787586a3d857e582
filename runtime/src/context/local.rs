//! [`LocalSlice`]: a cudarc `CudaSlice` over memory that someone else owns (NVSHMEM, a DLPack
//! producer, a peer's mapping), so symmetric memory can be a cudarc buffer.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaSlice, CudaStream};

/// A cudarc slice over memory someone else owns: dropping it leaks the pointer back instead of
/// freeing it (`CudaSlice::leak`), and releases only cudarc's events.
pub(crate) struct LocalSlice<T>(ManuallyDrop<CudaSlice<T>>);

impl<T> LocalSlice<T> {
    /// A slice of `len` elements at `ptr`, ordered on `stream`.
    pub(crate) fn new(stream: &Arc<CudaStream>, ptr: CUdeviceptr, len: usize) -> LocalSlice<T> {
        // SAFETY: `ptr` holds `len` elements for as long as the owner of this slice lives, and
        // the slice never frees it (see Drop).
        LocalSlice(ManuallyDrop::new(unsafe {
            stream.upgrade_device_ptr(ptr, len)
        }))
    }

    pub(crate) fn slice(&self) -> &CudaSlice<T> {
        &self.0
    }

    pub(crate) fn slice_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.0
    }
}

impl<T> Drop for LocalSlice<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `leak` gives the pointer back without freeing it.
        unsafe { ManuallyDrop::take(&mut self.0) }.leak();
    }
}
