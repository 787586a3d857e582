//! Stream memory operations with which the copy-engine operations ([`super::AllGatherMatmul`],
//! [`super::matmul_reduce_scatter`]) signal and wait for their peers, and the checks that they
//! can run: the GPU supports them, and the stream is not being captured into a graph.

use crate::{Error, Pgas, Result};

/// An `Err` on every PE when some PE's GPU cannot run 64-bit stream memory operations
/// (`cuStreamWriteValue64` / `cuStreamWaitValue64`), with which the copy-engine operations
/// ([`super::AllGatherMatmul`], [`super::matmul_reduce_scatter`]) signal their peers: without them a call
/// would fail half-way, after its peers moved on. Collective (one agreement); a failed query
/// counts as "cannot", so no PE leaves early.
pub(crate) fn require_stream_mem_ops(pgas: &Pgas, what: &'static str) -> Result<()> {
    use cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS;
    let can = pgas
        .cuda()
        .attribute(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS)
        .is_ok_and(|v| v != 0);
    super::agree::agree(
        pgas,
        what,
        &[("64-bit stream memory operations", can as u64)],
    )?;
    if can {
        return Ok(());
    }
    Err(Error::Unavailable {
        what,
        reason: "this GPU or driver does not run 64-bit stream memory operations \
                 (cuStreamWriteValue64, cuStreamWaitValue64), with which the copy stream signals \
                 the peers. Fix: a GPU of compute capability 7.0 or newer with a CUDA 12+ driver"
            .into(),
    })
}

/// What [`stream_word`] enqueues on a 64-bit word.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Word {
    /// A wait until the word is at least the value (`cuStreamWaitValue64`, `GEQ`): how the
    /// copy-engine operations wait for a peer's signal.
    AtLeast(u64),
    /// A write of the value (`cuStreamWriteValue64`): how the copy-engine operations signal a
    /// peer.
    Write(u64),
}

/// Enqueues `op` on `stream` on the 64-bit word at `addr`. `what` says what is waited for or
/// signalled, in the error.
///
/// # Safety
/// `addr` is a device address of a `u64` this context may read (and, for [`Word::Write`],
/// write) while `stream` runs.
pub(crate) unsafe fn stream_word(
    stream: cudarc::driver::sys::CUstream, addr: cudarc::driver::sys::CUdeviceptr, op: Word,
    what: &'static str,
) -> Result<()> {
    use cudarc::driver::sys as cu;
    // SAFETY: `addr` is a device `u64` this context may read, and write for a write, while
    // `stream` runs (the caller's contract).
    unsafe {
        match op {
            Word::AtLeast(value) => cu::cuStreamWaitValue64_v2(
                stream,
                addr,
                value,
                cu::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
            ),
            Word::Write(value) => cu::cuStreamWriteValue64_v2(
                stream,
                addr,
                value,
                cu::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32,
            ),
        }
    }
    .result()
    .map_err(Error::cuda(what))
}

/// An `Err` (before anything is enqueued) when `stream` is being captured into a CUDA graph, for
/// the operations that keep their call number on the host and pass it to stream memory
/// operations as an immediate ([`super::AllGatherMatmul`], [`super::matmul_reduce_scatter`]): a graph would
/// replay the captured number, so from the second replay on every wait (`>=` that number) would
/// pass at once and the copies would read and overwrite peers' buffers unsynchronized, silently.
pub(crate) fn refuse_capture(
    stream: &cudarc::driver::CudaStream, what: &'static str,
) -> Result<()> {
    let status = stream.capture_status().map_err(Error::cuda(
        "querying the stream's CUDA-graph capture status",
    ))?;
    if status == cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
        return Ok(());
    }
    Err(Error::InvalidConfig {
        name: what,
        value: "a call on a stream being captured into a CUDA graph".into(),
        reason: "the call's number is baked into its stream memory operations, so a replayed \
                 graph would not wait for the peers (their buffers would be read and overwritten \
                 while in use). Fix: run it eagerly, outside graph capture"
            .into(),
    })
}
