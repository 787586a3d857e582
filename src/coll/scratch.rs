//! A communicator's symmetric scratch for the intermediate results of its composed paths (the
//! hierarchical collectives, NVSHMEM's reduction in place), and, as a second one, the pushed
//! two-shot's stage: grown, collectively, to the largest call's need, since every member makes
//! the same calls with the same sizes (so only on a communicator whose team is every PE, the
//! group NVSHMEM's allocation is collective over).

use cudarc::driver::CudaStream;

use super::region::Region;
use crate::{Error, Pgas, Result, SymTensor};

/// The scratch: empty until a call needs it.
pub(super) struct Scratch {
    pgas: Pgas,
    buf: Option<SymTensor<u8>>,
}

impl Scratch {
    pub(super) fn new(pgas: &Pgas) -> Scratch {
        Scratch {
            pgas: pgas.clone(),
            buf: None,
        }
    }

    /// A region of `len` elements of `T` from the scratch's start ([`Scratch::regions`]), or
    /// `None` where the scratch would have to grow while `stream` is being captured into a
    /// CUDA graph (growing waits for the stream, which a capture cannot do).
    pub(super) fn region<T>(
        &mut self, stream: &CudaStream, len: usize,
    ) -> Result<Option<Region<T>>> {
        let bytes = len * std::mem::size_of::<T>();
        if self.buf.as_ref().is_none_or(|s| s.len() < bytes) && capturing(stream)? {
            return Ok(None);
        }
        self.regions::<T>(stream, len, 0).map(|(r, _)| Some(r))
    }

    /// Two regions of `a` and `b` elements of `T`, apart (the second from a 16-byte boundary,
    /// as the kernels' vector path likes), grown where needed. Growing is collective: it waits
    /// for `stream` (work on it may still read the old buffer), frees the old buffer and
    /// allocates the new one on every member alike.
    pub(super) fn regions<T>(
        &mut self, stream: &CudaStream, a: usize, b: usize,
    ) -> Result<(Region<T>, Region<T>)> {
        let size = std::mem::size_of::<T>();
        let at = (a * size).next_multiple_of(16);
        let bytes = at + b * size;
        let base = match &self.buf {
            Some(s) if s.len() >= bytes => s.as_device_ptr(),
            _ => {
                stream.synchronize().map_err(Error::cuda(
                    "waiting for the stream before growing a communicator's scratch",
                ))?;
                self.buf = None;
                let s = self
                    .pgas
                    .alloc::<u8>(bytes.max(1).next_multiple_of(1 << 20))?;
                let base = s.as_device_ptr();
                self.buf = Some(s);
                base
            }
        };
        Ok((Region::at(base, a), Region::at(base + at as u64, b)))
    }
}

/// Whether `stream` is being captured into a CUDA graph (a scratch cannot grow then; the
/// NVSHMEM paths refuse it: `comm::refuse_capture`).
pub(super) fn capturing(stream: &CudaStream) -> Result<bool> {
    let status = stream.capture_status().map_err(Error::cuda(
        "querying the stream's CUDA-graph capture status",
    ))?;
    Ok(status != cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}
