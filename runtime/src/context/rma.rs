//! Host-side RMA and ordering, issued on the pgas stream (`nvshmemx_*_on_stream`).
//!
//! `put` and `get` are asynchronous on [`Pgas::stream`]; `barrier_all`, `sync_all` and `quiet`
//! wait on the host until the stream reached them, so after `barrier_all()` returns every put
//! issued before it, by any PE, has landed.

use std::ffi::c_void;

use cudarc::driver::sys::CUstream;

use super::memory::{check_len, SymRegion};
use super::pgas::Pgas;
use crate::error::Result;
use crate::ffi::NvshmemHost;

/// The shape of `nvshmemx_{put,get}mem_on_stream`.
type Transfer = unsafe fn(&NvshmemHost, *mut c_void, *const c_void, usize, i32, CUstream);

impl Pgas {
    /// Copies this PE's `src` into `dst` on PE `pe` (`nvshmemx_putmem_on_stream`). Asynchronous;
    /// complete after [`Pgas::quiet`] or [`Pgas::barrier_all`].
    pub fn put<T>(
        &self,
        dst: &impl SymRegion<T>,
        src: &impl SymRegion<T>,
        pe: usize,
    ) -> Result<()> {
        self.transfer(dst, src, pe, NvshmemHost::nvshmemx_putmem_on_stream)
    }

    /// Copies `src` on PE `pe` into this PE's `dst` (`nvshmemx_getmem_on_stream`). Asynchronous
    /// on the pgas stream; `dst.to_vec()` (which uses that stream) sees the result.
    pub fn get<T>(
        &self,
        dst: &impl SymRegion<T>,
        src: &impl SymRegion<T>,
        pe: usize,
    ) -> Result<()> {
        self.transfer(dst, src, pe, NvshmemHost::nvshmemx_getmem_on_stream)
    }

    /// `put` and `get`: checks the PE and the lengths, then issues `call` (dst, src, bytes, pe).
    fn transfer<T>(
        &self,
        dst: &impl SymRegion<T>,
        src: &impl SymRegion<T>,
        pe: usize,
        call: Transfer,
    ) -> Result<()> {
        let pe = self.check_pe(pe)?;
        check_len("the source", src.len(), dst.len())?;
        let bytes = src.len() * std::mem::size_of::<T>();
        let (d, s) = (
            dst.as_device_ptr() as *mut c_void,
            src.as_device_ptr() as *const c_void,
        );
        // SAFETY: both regions are symmetric allocations of at least `bytes` on every PE.
        self.on_stream(|nv, stream| unsafe { call(nv, d, s, bytes, pe, stream) })
    }

    /// Barrier over all PEs that also completes every RMA issued before it
    /// (`nvshmemx_barrier_all_on_stream`), then waits for the stream.
    pub fn barrier_all(&self) -> Result<()> {
        // SAFETY: the pgas stream belongs to the context NVSHMEM was initialized on.
        self.on_stream(|nv, stream| unsafe { nv.nvshmemx_barrier_all_on_stream(stream) })?;
        self.inner.sync_stream()
    }

    /// Synchronizes all PEs without completing outstanding RMA (`nvshmemx_sync_all_on_stream`),
    /// then waits for the stream.
    pub fn sync_all(&self) -> Result<()> {
        // SAFETY: as in `barrier_all`.
        self.on_stream(|nv, stream| unsafe { nv.nvshmemx_sync_all_on_stream(stream) })?;
        self.inner.sync_stream()
    }

    /// Completes every RMA this PE issued on the stream (`nvshmemx_quiet_on_stream`), then waits
    /// for the stream.
    pub fn quiet(&self) -> Result<()> {
        // SAFETY: as in `barrier_all`.
        self.on_stream(|nv, stream| unsafe { nv.nvshmemx_quiet_on_stream(stream) })?;
        self.inner.sync_stream()
    }

    /// Issues one `nvshmemx_*_on_stream` call on the pgas stream, with the pgas context current
    /// on this thread (the driver API is per thread).
    fn on_stream(&self, call: impl FnOnce(&NvshmemHost, CUstream)) -> Result<()> {
        self.inner.bind()?;
        call(self.nvshmem().raw(), self.inner.stream.cu_stream());
        Ok(())
    }
}
