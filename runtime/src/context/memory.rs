//! Symmetric memory: [`SymTensor`] (one buffer at the same symmetric address on every PE) and
//! its sub-range views [`SymView`] / [`SymViewMut`].
//!
//! Allocation and free are collective: every PE must allocate the same sizes in the same order
//! and drop its tensors in the same order (NVSHMEM's `nvshmem_calloc`/`nvshmem_free` include a
//! barrier). Host copies run on the pgas stream and return when done.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use cudarc::driver::sys::{self as cu, CUdeviceptr};
use cudarc::driver::DeviceRepr;

use super::agree;
use super::pgas::{Inner, Pgas};
use crate::error::{Error, Result};
use crate::heap;

/// A contiguous run of elements in symmetric memory: a whole [`SymTensor`] or a view of one.
/// The host RMA calls ([`Pgas::put`], [`Pgas::get`]) and kernel launchers take any of them.
pub trait SymRegion<T> {
    /// Device address of the first element on this PE (the same symmetric address names the
    /// region on every other PE).
    fn as_device_ptr(&self) -> CUdeviceptr;
    /// Number of elements.
    fn len(&self) -> usize;
    /// Whether it holds no elements (never true for pgas's own types).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `len` elements of `T` in NVSHMEM's symmetric heap, zeroed at allocation.
pub struct SymTensor<T> {
    ptr: CUdeviceptr,
    len: usize,
    // Keeps NVSHMEM alive until this memory is freed.
    inner: Arc<Inner>,
    _elem: PhantomData<T>,
}

impl<T> fmt::Debug for SymTensor<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SymTensor<{}>[{}] @ {:#x}",
            std::any::type_name::<T>(),
            self.len,
            self.ptr
        )
    }
}

impl Pgas {
    /// Whether this PE reaches `region` on PE `pe` with plain loads and stores (NVLink or PCIe
    /// peer access: `nvshmem_ptr` is not null), as `x.has_peer(pe)` tells inside a kernel.
    /// Always true for this PE itself.
    pub fn peer_reachable<T>(&self, region: &impl SymRegion<T>, pe: usize) -> Result<bool> {
        let n_pes = self.n_pes();
        if pe >= n_pes {
            return Err(Error::InvalidPe { pe, n_pes });
        }
        // SAFETY: a symmetric address and a valid PE; nvshmem_ptr only computes an address.
        let p = unsafe {
            self.nvshmem()
                .raw()
                .nvshmem_ptr(region.as_device_ptr() as *const std::ffi::c_void, pe as i32)
        };
        Ok(!p.is_null())
    }

    /// Allocates `len` zeroed elements on every PE. Collective: all PEs call it with the same
    /// `len`. Zero length and sizes over the heap are errors; with several PEs, sizes that differ
    /// across PEs are [`Error::AllocMismatch`] on every PE (see `agree.rs`).
    pub fn alloc<T: DeviceRepr>(&self, len: usize) -> Result<SymTensor<T>> {
        let inner = &self.inner;
        let elem = std::mem::size_of::<T>();
        inner.bind()?;
        // Before the local checks, so that a request only some PEs would refuse is refused on all.
        let asked = (len as u64).saturating_mul(elem.max(1) as u64);
        agree::same_size(inner, asked)?;
        let bytes = heap::check_alloc(len, elem, inner.heap_size)?;
        let raw = unsafe { self.nvshmem().raw().nvshmem_calloc(len, elem.max(1)) };
        if raw.is_null() {
            return Err(Error::HeapExhausted {
                requested: bytes,
                heap: inner.heap_size,
                // Seen on H200s (docs/gpu-report.md, run 2): with CUDA VMM, NVSHMEM 3.4.5
                // refuses one 1 GiB allocation from a 4 GiB heap; its static heap does not.
                in_use: ", part of which is in use by earlier allocations and by NVSHMEM itself \
                         (with CUDA VMM, its default, NVSHMEM 3.4.5 also refuses single allocations \
                         of 1 GiB from a larger heap: set NVSHMEM_DISABLE_CUDA_VMM=1 for a static heap)",
            });
        }
        Ok(SymTensor {
            ptr: raw as CUdeviceptr,
            len,
            inner: inner.clone(),
            _elem: PhantomData,
        })
    }

    /// Allocates a symmetric tensor holding a copy of `data` on this PE (collective; each PE may
    /// pass different values of the same length).
    pub fn alloc_from<T: DeviceRepr>(&self, data: &[T]) -> Result<SymTensor<T>> {
        let t = self.alloc::<T>(data.len())?;
        copy_in(&self.inner, t.ptr, data)?;
        Ok(t)
    }
}

impl<T: DeviceRepr> SymTensor<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: symmetric tensors hold at least one element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Device address of element 0 on this PE.
    pub fn as_device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Copies `src` (same length) into this PE's copy.
    pub fn copy_from(&mut self, src: &[T]) -> Result<()> {
        check_len("the source slice", src.len(), self.len)?;
        copy_in(&self.inner, self.ptr, src)
    }

    /// Copies this PE's copy to the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        copy_out(&self.inner, self.ptr, self.len)
    }

    /// Sets every element of this PE's copy to `value`.
    pub fn fill(&mut self, value: T) -> Result<()>
    where
        T: Copy,
    {
        fill(&self.inner, self.ptr, self.len, value)
    }

    /// A read-only view of `range` (`..`, `a..b`, `a..`, `..=b`). Empty and out-of-range views are
    /// errors.
    pub fn view(&self, range: impl RangeBounds<usize>) -> Result<SymView<'_, T>> {
        let (start, end) = resolve_range(&range, self.len)?;
        Ok(SymView {
            tensor: self,
            start,
            len: end - start,
        })
    }

    /// A writable view of `range`.
    pub fn view_mut(&mut self, range: impl RangeBounds<usize>) -> Result<SymViewMut<'_, T>> {
        let (start, end) = resolve_range(&range, self.len)?;
        Ok(SymViewMut {
            tensor: self,
            start,
            len: end - start,
        })
    }
}

impl<T> Drop for SymTensor<T> {
    fn drop(&mut self) {
        // Collective free. Work still queued on the pgas stream may use this memory. Skipped
        // while a panic unwinds: the other PEs are not freeing with this one, so the free's
        // barrier would hang this PE instead of letting it die (the memory goes with the
        // process).
        if std::thread::panicking() || self.inner.context_lost() {
            return;
        }
        let _ = self.inner.sync_stream();
        unsafe {
            self.inner
                .nvshmem
                .raw()
                .nvshmem_free(self.ptr as *mut std::ffi::c_void)
        };
    }
}

impl<T: DeviceRepr> SymRegion<T> for SymTensor<T> {
    fn as_device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// A read-only sub-range of a [`SymTensor`].
#[derive(Debug, Clone, Copy)]
pub struct SymView<'a, T> {
    tensor: &'a SymTensor<T>,
    start: usize,
    len: usize,
}

/// A writable sub-range of a [`SymTensor`].
#[derive(Debug)]
pub struct SymViewMut<'a, T> {
    tensor: &'a mut SymTensor<T>,
    start: usize,
    len: usize,
}

fn offset_ptr<T>(t: &SymTensor<T>, start: usize) -> CUdeviceptr {
    t.ptr + (start * std::mem::size_of::<T>()) as CUdeviceptr
}

impl<T: DeviceRepr> SymView<'_, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Always false: views hold at least one element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Index of the first element in the tensor.
    pub fn start(&self) -> usize {
        self.start
    }
    /// Device address of the first element on this PE.
    pub fn as_device_ptr(&self) -> CUdeviceptr {
        offset_ptr(self.tensor, self.start)
    }
    /// Copies this PE's elements to the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        copy_out(&self.tensor.inner, self.as_device_ptr(), self.len)
    }
}

impl<T: DeviceRepr> SymViewMut<'_, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Always false: views hold at least one element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Index of the first element in the tensor.
    pub fn start(&self) -> usize {
        self.start
    }
    /// Device address of the first element on this PE.
    pub fn as_device_ptr(&self) -> CUdeviceptr {
        offset_ptr(self.tensor, self.start)
    }
    /// Copies this PE's elements to the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        copy_out(&self.tensor.inner, self.as_device_ptr(), self.len)
    }
    /// Copies `src` (same length as the view) in.
    pub fn copy_from(&mut self, src: &[T]) -> Result<()> {
        check_len("the source slice", src.len(), self.len)?;
        copy_in(&self.tensor.inner, self.as_device_ptr(), src)
    }
    /// Sets every element of the view to `value`.
    pub fn fill(&mut self, value: T) -> Result<()>
    where
        T: Copy,
    {
        fill(&self.tensor.inner, self.as_device_ptr(), self.len, value)
    }
}

impl<T: DeviceRepr> SymRegion<T> for SymView<'_, T> {
    fn as_device_ptr(&self) -> CUdeviceptr {
        SymView::as_device_ptr(self)
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl<T: DeviceRepr> SymRegion<T> for SymViewMut<'_, T> {
    fn as_device_ptr(&self) -> CUdeviceptr {
        SymViewMut::as_device_ptr(self)
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// Turns a range into `start..end` within `0..len`; empty or out-of-range ranges are errors.
pub(crate) fn resolve_range(range: &impl RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(s), Some(e)) if s <= e && e <= len => {
            if s == e {
                Err(Error::EmptyView { start: s, end: e })
            } else {
                Ok((s, e))
            }
        }
        (s, e) => Err(Error::OutOfRange {
            start: s.unwrap_or(usize::MAX),
            end: e.unwrap_or(usize::MAX),
            len,
        }),
    }
}

pub(crate) fn check_len(what: &'static str, got: usize, expected: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::LengthMismatch {
            what,
            got,
            expected,
        })
    }
}

fn copy_in<T>(inner: &Inner, dst: CUdeviceptr, src: &[T]) -> Result<()> {
    inner.bind()?;
    unsafe { cudarc::driver::result::memcpy_htod_async(dst, src, inner.stream.cu_stream()) }
        .map_err(Error::cuda("copying host data into symmetric memory"))?;
    // `src` is borrowed only for this call, so the copy must finish before returning.
    inner.sync_stream()
}

fn copy_out<T>(inner: &Inner, src: CUdeviceptr, len: usize) -> Result<Vec<T>> {
    inner.bind()?;
    let mut out: Vec<T> = Vec::with_capacity(len);
    let bytes = len * std::mem::size_of::<T>();
    unsafe {
        cu::cuMemcpyDtoHAsync_v2(
            out.as_mut_ptr().cast(),
            src,
            bytes,
            inner.stream.cu_stream(),
        )
    }
    .result()
    .map_err(Error::cuda("copying symmetric memory to the host"))?;
    inner.sync_stream()?;
    // The copy wrote all `len` elements, and `T: DeviceRepr` is plain data.
    unsafe { out.set_len(len) };
    Ok(out)
}

fn fill<T: Copy>(inner: &Inner, dst: CUdeviceptr, len: usize, value: T) -> Result<()> {
    inner.bind()?;
    let stream = inner.stream.cu_stream();
    let err = Error::cuda("filling symmetric memory");
    // Element sizes the driver can memset directly avoid a host staging buffer.
    let status = unsafe {
        match std::mem::size_of::<T>() {
            1 => cu::cuMemsetD8Async(dst, std::mem::transmute_copy::<T, u8>(&value), len, stream),
            2 => cu::cuMemsetD16Async(dst, std::mem::transmute_copy::<T, u16>(&value), len, stream),
            4 => cu::cuMemsetD32Async(dst, std::mem::transmute_copy::<T, u32>(&value), len, stream),
            _ => return copy_in(inner, dst, &vec![value; len]),
        }
    };
    status.result().map_err(err)?;
    inner.sync_stream()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_resolve_inside_the_tensor() {
        assert_eq!(resolve_range(&(..), 10).unwrap(), (0, 10));
        assert_eq!(resolve_range(&(2..5), 10).unwrap(), (2, 5));
        assert_eq!(resolve_range(&(7..), 10).unwrap(), (7, 10));
        assert_eq!(resolve_range(&(..=9), 10).unwrap(), (0, 10));
    }

    #[test]
    fn empty_and_out_of_range_views_are_errors() {
        assert!(matches!(
            resolve_range(&(3..3), 10),
            Err(Error::EmptyView { start: 3, end: 3 })
        ));
        assert!(matches!(
            resolve_range(&(10..), 10),
            Err(Error::EmptyView { .. })
        ));
        let e = resolve_range(&(5..11), 10).unwrap_err().to_string();
        assert!(e.contains("5..11") && e.contains("length 10"), "{e}");
        assert!(e.contains("Fix: keep the range within 0..10"), "{e}");
        let e = resolve_range(&(3..3), 10).unwrap_err().to_string();
        assert!(e.contains("Fix: use a range with start < end"), "{e}");
        #[allow(clippy::reversed_empty_ranges)]
        let backwards = resolve_range(&(6..2), 10);
        assert!(matches!(backwards, Err(Error::OutOfRange { .. })));
        assert!(matches!(
            resolve_range(&(..=usize::MAX), 10),
            Err(Error::OutOfRange { .. })
        ));
    }

    #[test]
    fn length_mismatch_names_both() {
        let e = check_len("the source slice", 3, 4).unwrap_err().to_string();
        assert!(
            e.contains("3 elements") && e.contains("4 were expected"),
            "{e}"
        );
        assert!(e.contains("Fix: pass buffers of matching lengths"), "{e}");
    }
}
