//! Host-side RMA, signals and ordering, issued on a stream (`nvshmemx_*_on_stream`).
//!
//! `put`, `get`, their `_nbi` forms, `put_signal`, `signal_op` and `signal_wait_until` are
//! asynchronous on [`Pgas::stream`]; `barrier_all`, `sync_all` and `quiet` wait on the host until
//! the stream reached them, so after `barrier_all()` returns every put issued before it, by any
//! PE, has landed.
//!
//! Each has an `_on` form (`put_on(&stream, ..)`, `barrier_all_on`, ..., and
//! `signal_wait_until_on_stream`) that issues the same NVSHMEM call on a stream of the caller's,
//! as a kernel's `launch_on` does, and never waits on the host (but `signal_wait_until_on`, the
//! bounded wait): ordering with other streams is the caller's (events, or a wait for the
//! stream). The stream must belong to this context's GPU; one of another GPU is an `Err` naming
//! the fix.

use std::ffi::c_void;

use cudarc::driver::sys::CUstream;
use cudarc::driver::CudaStream;

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
        &self, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, pe: usize,
    ) -> Result<()> {
        self.put_on(self.stream(), dst, src, pe)
    }

    /// [`Pgas::put`] on `stream` (a stream of this context; see the module documentation).
    pub fn put_on<T>(
        &self, stream: &CudaStream, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, pe: usize,
    ) -> Result<()> {
        self.transfer(stream, dst, src, pe, NvshmemHost::nvshmemx_putmem_on_stream)
    }

    /// Copies `src` on PE `pe` into this PE's `dst` (`nvshmemx_getmem_on_stream`). Asynchronous
    /// on the pgas stream; `dst.to_vec()` (which uses that stream) sees the result.
    pub fn get<T>(
        &self, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, pe: usize,
    ) -> Result<()> {
        self.get_on(self.stream(), dst, src, pe)
    }

    /// [`Pgas::get`] on `stream`: `dst` holds the data once `stream` has passed it.
    pub fn get_on<T>(
        &self, stream: &CudaStream, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, pe: usize,
    ) -> Result<()> {
        self.transfer(stream, dst, src, pe, NvshmemHost::nvshmemx_getmem_on_stream)
    }

    /// [`Pgas::put`] without the guarantee that `src` may be reused when the stream passes it
    /// (`nvshmemx_putmem_nbi_on_stream`): complete after [`Pgas::quiet`] or a barrier.
    pub fn put_nbi<T>(
        &self, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, pe: usize,
    ) -> Result<()> {
        self.put_nbi_on(self.stream(), dst, src, pe)
    }

    /// [`Pgas::put_nbi`] on `stream`; complete after [`Pgas::quiet_on`] on the same stream.
    pub fn put_nbi_on<T>(
        &self, stream: &CudaStream, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, pe: usize,
    ) -> Result<()> {
        self.transfer(
            stream,
            dst,
            src,
            pe,
            NvshmemHost::nvshmemx_putmem_nbi_on_stream,
        )
    }

    /// [`Pgas::get`] that may complete later (`nvshmemx_getmem_nbi_on_stream`): `dst` holds the
    /// data after [`Pgas::quiet`].
    pub fn get_nbi<T>(
        &self, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, pe: usize,
    ) -> Result<()> {
        self.get_nbi_on(self.stream(), dst, src, pe)
    }

    /// [`Pgas::get_nbi`] on `stream`; `dst` holds the data after [`Pgas::quiet_on`] on it.
    pub fn get_nbi_on<T>(
        &self, stream: &CudaStream, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, pe: usize,
    ) -> Result<()> {
        self.transfer(
            stream,
            dst,
            src,
            pe,
            NvshmemHost::nvshmemx_getmem_nbi_on_stream,
        )
    }

    /// Copies `src` into `dst` on PE `pe`, then updates word `sig_index` of `sig` there with
    /// `op`/`value` once the data is visible (`nvshmemx_putmem_signal_on_stream`). The receiver
    /// waits with [`Pgas::signal_wait_until`] or a kernel's `signal_wait_until`.
    #[allow(clippy::too_many_arguments)]
    pub fn put_signal<T>(
        &self, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, sig: &impl SymRegion<u64>,
        sig_index: usize, value: u64, op: SignalOp, pe: usize,
    ) -> Result<()> {
        let signal = (sig, sig_index, value, op);
        self.put_signal_with(self.stream(), dst, src, signal, pe, false)
    }

    /// [`Pgas::put_signal`] on `stream`.
    #[allow(clippy::too_many_arguments)]
    pub fn put_signal_on<T>(
        &self, stream: &CudaStream, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
        sig: &impl SymRegion<u64>, sig_index: usize, value: u64, op: SignalOp, pe: usize,
    ) -> Result<()> {
        let signal = (sig, sig_index, value, op);
        self.put_signal_with(stream, dst, src, signal, pe, false)
    }

    /// [`Pgas::put_signal`] whose source may be reused only after [`Pgas::quiet`]
    /// (`nvshmemx_putmem_signal_nbi_on_stream`).
    #[allow(clippy::too_many_arguments)]
    pub fn put_signal_nbi<T>(
        &self, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, sig: &impl SymRegion<u64>,
        sig_index: usize, value: u64, op: SignalOp, pe: usize,
    ) -> Result<()> {
        let signal = (sig, sig_index, value, op);
        self.put_signal_with(self.stream(), dst, src, signal, pe, true)
    }

    /// [`Pgas::put_signal_nbi`] on `stream`.
    #[allow(clippy::too_many_arguments)]
    pub fn put_signal_nbi_on<T>(
        &self, stream: &CudaStream, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
        sig: &impl SymRegion<u64>, sig_index: usize, value: u64, op: SignalOp, pe: usize,
    ) -> Result<()> {
        let signal = (sig, sig_index, value, op);
        self.put_signal_with(stream, dst, src, signal, pe, true)
    }

    fn put_signal_with<T>(
        &self, stream: &CudaStream, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
        (sig, sig_index, value, op): (&impl SymRegion<u64>, usize, u64, SignalOp), pe: usize,
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
        // SAFETY: all three regions are symmetric and hold what the checks above say; the
        // stream belongs to this context (`on`).
        self.on(stream, |nv, stream| unsafe {
            call(nv, d, s, bytes, word, value, op.raw(), pe, stream)
        })
    }

    /// Updates word `index` of `sig` on PE `pe` with `op`/`value`
    /// (`nvshmemx_signal_op_on_stream`).
    pub fn signal_op(
        &self, sig: &impl SymRegion<u64>, index: usize, value: u64, op: SignalOp, pe: usize,
    ) -> Result<()> {
        self.signal_op_on(self.stream(), sig, index, value, op, pe)
    }

    /// [`Pgas::signal_op`] on `stream`.
    pub fn signal_op_on(
        &self, stream: &CudaStream, sig: &impl SymRegion<u64>, index: usize, value: u64,
        op: SignalOp, pe: usize,
    ) -> Result<()> {
        let pe = self.check_pe(pe)?;
        let word = signal_word(self, sig, index)?;
        // SAFETY: `word` is a symmetric u64; the stream belongs to this context (`on`).
        self.on(stream, |nv, stream| unsafe {
            nv.nvshmemx_signal_op_on_stream(word, value, op.raw(), pe, stream)
        })
    }

    /// Makes the pgas stream wait until word `index` of this PE's `sig` satisfies
    /// `signal <cmp> value` (`nvshmemx_signal_wait_until_on_stream`), then waits on the host for
    /// at most `timeout`. A wait that has not been satisfied by then is an error naming the
    /// signal's value; the stream stays blocked behind it, so treat it as fatal for the run.
    pub fn signal_wait_until(
        &self, sig: &impl SymRegion<u64>, index: usize, cmp: Cmp, value: u64,
        timeout: std::time::Duration,
    ) -> Result<()> {
        self.signal_wait_until_on(self.stream(), sig, index, cmp, value, timeout)
    }

    /// [`Pgas::signal_wait_until`] on `stream` (a stream of this context): the wait is queued
    /// on `stream`, then the host waits at most `timeout` for `stream` to pass it (and the work
    /// queued on it before). The one `_on` form that waits on the host: the bounded wait is its
    /// point; [`Pgas::signal_wait_until_on_stream`] is the form that does not.
    pub fn signal_wait_until_on(
        &self, stream: &CudaStream, sig: &impl SymRegion<u64>, index: usize, cmp: Cmp, value: u64,
        timeout: std::time::Duration,
    ) -> Result<()> {
        self.signal_wait_until_on_stream(stream, sig, index, cmp, value)?;
        self.inner.sync_stream_within(stream, timeout, || {
            format!(
                "signal_wait_until: signal word {index} did not become {cmp:?} {value}: the PE \
                 that should signal it did not (check that it ran and targeted this PE)"
            )
        })
    }

    /// Makes `stream` wait until word `index` of this PE's `sig` satisfies `signal <cmp> value`
    /// (`nvshmemx_signal_wait_until_on_stream`), without blocking the host: work queued on
    /// `stream` after it runs once the signal arrived. Nothing bounds the wait, so a signal
    /// that never comes blocks the stream for good; [`Pgas::signal_wait_until`] is the bounded
    /// form on the pgas stream.
    pub fn signal_wait_until_on_stream(
        &self, stream: &CudaStream, sig: &impl SymRegion<u64>, index: usize, cmp: Cmp, value: u64,
    ) -> Result<()> {
        let word = signal_word(self, sig, index)?;
        // SAFETY: `word` is a symmetric u64 on this PE; the stream belongs to this context.
        self.on(stream, |nv, stream| unsafe {
            nv.nvshmemx_signal_wait_until_on_stream(word, cmp.raw(), value, stream)
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
    /// heap, then issues `call` (dst, src, bytes, pe) on `stream`.
    fn transfer<T>(
        &self, stream: &CudaStream, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, pe: usize,
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
        // SAFETY: both regions are symmetric allocations of at least `bytes` on every PE; the
        // stream belongs to this context (`on`).
        self.on(stream, |nv, stream| unsafe {
            call(nv, d, s, bytes, pe, stream)
        })
    }

    /// Barrier over all PEs that also completes every RMA issued before it
    /// (`nvshmemx_barrier_all_on_stream`), then waits for the stream.
    pub fn barrier_all(&self) -> Result<()> {
        self.barrier_all_on(self.stream())?;
        self.inner.sync_stream()
    }

    /// [`Pgas::barrier_all`] on `stream`, without the wait on the host: work queued on `stream`
    /// after it sees every PE's RMA issued before their barriers.
    pub fn barrier_all_on(&self, stream: &CudaStream) -> Result<()> {
        // SAFETY: the stream belongs to the context NVSHMEM was initialized on (`on`).
        self.on(stream, |nv, stream| unsafe {
            nv.nvshmemx_barrier_all_on_stream(stream)
        })
    }

    /// Synchronizes all PEs without completing outstanding RMA (`nvshmemx_sync_all_on_stream`),
    /// then waits for the stream.
    pub fn sync_all(&self) -> Result<()> {
        self.sync_all_on(self.stream())?;
        self.inner.sync_stream()
    }

    /// [`Pgas::sync_all`] on `stream`, without the wait on the host.
    pub fn sync_all_on(&self, stream: &CudaStream) -> Result<()> {
        // SAFETY: as in `barrier_all_on`.
        self.on(stream, |nv, stream| unsafe {
            nv.nvshmemx_sync_all_on_stream(stream)
        })
    }

    /// Completes every RMA this PE issued on the stream (`nvshmemx_quiet_on_stream`), then waits
    /// for the stream.
    pub fn quiet(&self) -> Result<()> {
        self.quiet_on(self.stream())?;
        self.inner.sync_stream()
    }

    /// [`Pgas::quiet`] on `stream`, without the wait on the host: work queued on `stream`
    /// after it sees this PE's RMA complete.
    pub fn quiet_on(&self, stream: &CudaStream) -> Result<()> {
        // SAFETY: as in `barrier_all_on`.
        self.on(stream, |nv, stream| unsafe {
            nv.nvshmemx_quiet_on_stream(stream)
        })
    }

    /// Makes the sources of the non-blocking puts this PE issued on `stream` before it
    /// reusable (`nvshmemx_flush_on_stream`): unlike [`Pgas::quiet_on`] it does not wait for
    /// the data to arrive. NVSHMEM 3.7 added it; with an older NVSHMEM this is
    /// [`Error::Unavailable`] naming the version.
    pub fn flush_on(&self, stream: &CudaStream) -> Result<()> {
        let nv = self.nvshmem();
        let Some(flush) = nv.flush_on_stream() else {
            let (major, minor, patch) = self.nvshmem_version();
            return Err(Error::Unavailable {
                what: "flush (nvshmemx_flush_on_stream)",
                reason: format!(
                    "NVSHMEM {major}.{minor}.{patch} ({}) has no flush: NVSHMEM 3.7.0 added it. \
                     Use quiet (which also completes the puts), or run with NVSHMEM 3.7 or later \
                     (PGAS_NVSHMEM_HOME, or pip install 'nvidia-nvshmem-cu13>=3.7')",
                    nv.path().display()
                ),
            });
        };
        // SAFETY: as in `barrier_all_on`; `flush` is the library's own function.
        self.on(stream, |_, stream| unsafe { flush(stream) })
    }

    /// [`Pgas::flush_on`] on the pgas stream, then a wait for it.
    pub fn flush(&self) -> Result<()> {
        self.flush_on(self.stream())?;
        self.inner.sync_stream()
    }

    /// Issues one `nvshmemx_*_on_stream` call on `stream` once it is known to belong to this
    /// context, with the context current on this thread (the driver API is per thread).
    fn on(&self, stream: &CudaStream, call: impl FnOnce(&NvshmemHost, CUstream)) -> Result<()> {
        self.check_stream(stream)?;
        self.inner.bind()?;
        call(self.nvshmem().raw(), stream.cu_stream());
        Ok(())
    }

    /// A stream passed to an `_on` call must be one of this context's: NVSHMEM was initialized
    /// on this GPU's context, and a stream of another GPU would run the call there.
    pub(crate) fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        stream_of_context(stream.context().cu_ctx(), self.inner.ctx.cu_ctx(), || {
            (stream.context().ordinal(), self.inner.device)
        })
    }
}

/// The check of [`Pgas::check_stream`] on raw handles (so that a CPU test can run it):
/// `ordinals` gives the stream's and the context's GPU for the message.
fn stream_of_context<C: PartialEq>(
    stream_ctx: C, ctx: C, ordinals: impl FnOnce() -> (usize, usize),
) -> Result<()> {
    if stream_ctx == ctx {
        return Ok(());
    }
    let (theirs, ours) = ordinals();
    Err(Error::InvalidConfig {
        name: "stream",
        value: format!("a stream of GPU {theirs}'s context"),
        reason: format!(
            "the stream belongs to another CUDA context than this Pgas (GPU {ours}), and \
             NVSHMEM's on-stream calls run in the context it was initialized on. Fix: pass \
             `pgas.stream()` or a stream made by `pgas.cuda().new_stream()`"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_of_another_context_is_refused_with_the_fix() {
        assert!(stream_of_context(1u8, 1u8, || unreachable!()).is_ok());
        let e = stream_of_context(1u8, 2u8, || (1, 0))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("GPU 1's context")
                && e.contains("this Pgas (GPU 0)")
                && e.contains("pgas.cuda().new_stream()"),
            "{e}"
        );
    }
}
