//! Host-side RMA, signals and ordering, issued on the pgas stream (`nvshmemx_*_on_stream`).
//!
//! `put`, `get`, their `_nbi` forms, `put_signal`, `signal_op` and `signal_wait_until` are
//! asynchronous on [`Pgas::stream`]; `barrier_all`, `sync_all` and `quiet` wait on the host until
//! the stream reached them, so after `barrier_all()` returns every put issued before it, by any
//! PE, has landed.

use std::ffi::c_void;

use cudarc::driver::sys::CUstream;

use super::memory::{check_len, SymRegion};
use super::pgas::Pgas;
use crate::error::{Error, Result};
use crate::ffi::{self, NvshmemHost};

/// The shape of `nvshmemx_{put,get}mem[_nbi]_on_stream`.
type Transfer = unsafe fn(&NvshmemHost, *mut c_void, *const c_void, usize, i32, CUstream);

/// How a signal update changes the signal word (`NVSHMEM_SIGNAL_SET` / `_ADD`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalOp {
    /// The signal becomes the value.
    Set,
    /// The value is added to the signal.
    Add,
}

impl SignalOp {
    fn raw(self) -> i32 {
        (match self {
            SignalOp::Set => ffi::NVSHMEM_SIGNAL_SET,
            SignalOp::Add => ffi::NVSHMEM_SIGNAL_ADD,
        }) as i32
    }
}

/// A comparison for [`Pgas::signal_wait_until`] (`NVSHMEM_CMP_*`): `signal <op> value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Ge,
    /// Less than.
    Lt,
    /// Less than or equal.
    Le,
}

impl Cmp {
    fn raw(self) -> i32 {
        (match self {
            Cmp::Eq => ffi::NVSHMEM_CMP_EQ,
            Cmp::Ne => ffi::NVSHMEM_CMP_NE,
            Cmp::Gt => ffi::NVSHMEM_CMP_GT,
            Cmp::Ge => ffi::NVSHMEM_CMP_GE,
            Cmp::Lt => ffi::NVSHMEM_CMP_LT,
            Cmp::Le => ffi::NVSHMEM_CMP_LE,
        }) as i32
    }
}

/// Checks that `sig` lies in the symmetric heap and `index` names an element of it; returns
/// the element's device address.
fn signal_word(pgas: &Pgas, sig: &impl SymRegion<u64>, index: usize) -> Result<*mut u64> {
    pgas.check_region("the signal region", sig)?;
    if index >= sig.len() {
        return Err(Error::OutOfRange {
            start: index,
            end: index + 1,
            len: sig.len(),
        });
    }
    Ok((sig.as_device_ptr() + (index * 8) as u64) as *mut u64)
}

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

    /// [`Pgas::put`] without the guarantee that `src` may be reused when the stream passes it
    /// (`nvshmemx_putmem_nbi_on_stream`): complete after [`Pgas::quiet`] or a barrier.
    pub fn put_nbi<T>(
        &self,
        dst: &impl SymRegion<T>,
        src: &impl SymRegion<T>,
        pe: usize,
    ) -> Result<()> {
        self.transfer(dst, src, pe, NvshmemHost::nvshmemx_putmem_nbi_on_stream)
    }

    /// [`Pgas::get`] that may complete later (`nvshmemx_getmem_nbi_on_stream`): `dst` holds the
    /// data after [`Pgas::quiet`].
    pub fn get_nbi<T>(
        &self,
        dst: &impl SymRegion<T>,
        src: &impl SymRegion<T>,
        pe: usize,
    ) -> Result<()> {
        self.transfer(dst, src, pe, NvshmemHost::nvshmemx_getmem_nbi_on_stream)
    }

    /// Copies `src` into `dst` on PE `pe`, then updates word `sig_index` of `sig` there with
    /// `op`/`value` once the data is visible (`nvshmemx_putmem_signal_on_stream`). The receiver
    /// waits with [`Pgas::signal_wait_until`] or a kernel's `signal_wait_until`.
    #[allow(clippy::too_many_arguments)]
    pub fn put_signal<T>(
        &self,
        dst: &impl SymRegion<T>,
        src: &impl SymRegion<T>,
        sig: &impl SymRegion<u64>,
        sig_index: usize,
        value: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<()> {
        self.put_signal_with(dst, src, (sig, sig_index), value, op, pe, false)
    }

    /// [`Pgas::put_signal`] whose source may be reused only after [`Pgas::quiet`]
    /// (`nvshmemx_putmem_signal_nbi_on_stream`).
    #[allow(clippy::too_many_arguments)]
    pub fn put_signal_nbi<T>(
        &self,
        dst: &impl SymRegion<T>,
        src: &impl SymRegion<T>,
        sig: &impl SymRegion<u64>,
        sig_index: usize,
        value: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<()> {
        self.put_signal_with(dst, src, (sig, sig_index), value, op, pe, true)
    }

    #[allow(clippy::too_many_arguments)]
    fn put_signal_with<T>(
        &self,
        dst: &impl SymRegion<T>,
        src: &impl SymRegion<T>,
        (sig, sig_index): (&impl SymRegion<u64>, usize),
        value: u64,
        op: SignalOp,
        pe: usize,
        nbi: bool,
    ) -> Result<()> {
        let pe = self.check_pe(pe)?;
        check_len("the source", src.len(), dst.len())?;
        self.check_region("the destination", dst)?;
        self.check_region("the source", src)?;
        let word = signal_word(self, sig, sig_index)?;
        let bytes = src.len() * std::mem::size_of::<T>();
        let (d, s) = (
            dst.as_device_ptr() as *mut c_void,
            src.as_device_ptr() as *const c_void,
        );
        let call = if nbi {
            NvshmemHost::nvshmemx_putmem_signal_nbi_on_stream
        } else {
            NvshmemHost::nvshmemx_putmem_signal_on_stream
        };
        // SAFETY: all three regions are symmetric and hold what the checks above say.
        self.on_stream(|nv, stream| unsafe {
            call(nv, d, s, bytes, word, value, op.raw(), pe, stream)
        })
    }

    /// Updates word `index` of `sig` on PE `pe` with `op`/`value`
    /// (`nvshmemx_signal_op_on_stream`).
    pub fn signal_op(
        &self,
        sig: &impl SymRegion<u64>,
        index: usize,
        value: u64,
        op: SignalOp,
        pe: usize,
    ) -> Result<()> {
        let pe = self.check_pe(pe)?;
        let word = signal_word(self, sig, index)?;
        // SAFETY: `word` is a symmetric u64.
        self.on_stream(|nv, stream| unsafe {
            nv.nvshmemx_signal_op_on_stream(word, value, op.raw(), pe, stream)
        })
    }

    /// Makes the pgas stream wait until word `index` of this PE's `sig` satisfies
    /// `signal <cmp> value` (`nvshmemx_signal_wait_until_on_stream`), then waits on the host for
    /// at most `timeout`. A wait that has not been satisfied by then is an error naming the
    /// signal's value; the stream stays blocked behind it, so treat it as fatal for the run.
    pub fn signal_wait_until(
        &self,
        sig: &impl SymRegion<u64>,
        index: usize,
        cmp: Cmp,
        value: u64,
        timeout: std::time::Duration,
    ) -> Result<()> {
        let word = signal_word(self, sig, index)?;
        // SAFETY: `word` is a symmetric u64 on this PE.
        self.on_stream(|nv, stream| unsafe {
            nv.nvshmemx_signal_wait_until_on_stream(word, cmp.raw(), value, stream)
        })?;
        self.inner.sync_stream_within(timeout, || {
            format!(
                "signal_wait_until: signal word {index} did not become {cmp:?} {value}: the PE \
                 that should signal it did not (check that it ran and targeted this PE)"
            )
        })
    }

    /// This PE's current value of word `index` of `sig` (`nvshmem_signal_fetch`, a host read).
    pub fn signal_fetch(&self, sig: &impl SymRegion<u64>, index: usize) -> Result<u64> {
        let word = signal_word(self, sig, index)?;
        self.inner.bind()?;
        // SAFETY: `word` is a symmetric u64 on this PE.
        Ok(unsafe { self.nvshmem().raw().nvshmem_signal_fetch(word) })
    }

    /// Orders this PE's puts to each PE (`nvshmem_fence`): puts issued after it reach a PE after
    /// those issued before it. Waits for the pgas stream first, so it orders the on-stream puts
    /// issued before it too.
    pub fn fence(&self) -> Result<()> {
        self.inner.bind()?;
        self.inner.sync_stream()?;
        // SAFETY: NVSHMEM is initialized.
        unsafe { self.nvshmem().raw().nvshmem_fence() };
        Ok(())
    }

    /// `put` and `get`: checks the PE, the lengths and that both regions lie in the symmetric
    /// heap, then issues `call` (dst, src, bytes, pe).
    fn transfer<T>(
        &self,
        dst: &impl SymRegion<T>,
        src: &impl SymRegion<T>,
        pe: usize,
        call: Transfer,
    ) -> Result<()> {
        let pe = self.check_pe(pe)?;
        check_len("the source", src.len(), dst.len())?;
        self.check_region("the destination", dst)?;
        self.check_region("the source", src)?;
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
