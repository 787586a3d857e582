//! Symmetric memory: [`SymTensor`] (one buffer at the same symmetric address on every PE, with a
//! row-major [`Shape`]) and untyped [`SymBuffer`]s; their views
//! ([`SymView`](super::SymView) / [`SymViewMut`](super::SymViewMut)) are in `view.rs`.
//!
//! Allocation and free are collective: every PE must allocate the same sizes in the same order
//! and drop its tensors in the same order (NVSHMEM's `nvshmem_calloc`/`nvshmem_free` include a
//! barrier). Host copies run on the pgas stream and return when done.

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::sys::{self as cu, CUdeviceptr};
use cudarc::driver::DeviceRepr;

use super::agree;
use super::local::LocalSlice;
use super::pgas::{Inner, Pgas};
use super::shape::Shape;
use crate::error::{Error, Result};
use crate::heap;

/// A contiguous run of elements in symmetric memory: a whole [`SymTensor`] or a view of one.
/// The host RMA calls ([`Pgas::put`], [`Pgas::get`]), host atomics and collectives, and kernel
/// launchers take any of them.
///
/// # Safety
///
/// Those calls hand [`as_device_ptr`](SymRegion::as_device_ptr) and [`len`](SymRegion::len) to
/// NVSHMEM and to kernels, which read and write the memory on this PE and at the same symmetric
/// address on other PEs. An implementation must guarantee that, for as long as the value is
/// borrowed, the `extent()` (at least `len()`) elements of `T` from `as_device_ptr()` are one
/// live allocation of NVSHMEM's symmetric heap (or a part of one) on every PE: not freed, not a
/// plain CUDA allocation, not past the allocation's end. pgas's own [`SymTensor`], [`SymView`](super::SymView) and
/// [`SymViewMut`](super::SymViewMut) guarantee it through their lifetimes.
///
/// The trait is `unsafe` rather than sealed because sound implementations outside this crate
/// exist and are useful: the `pgas` facade names one buffer twice for in-place collectives (an
/// alias of a borrowed tensor, which the borrow checker cannot express otherwise), and a user may
/// wrap symmetric memory of their own. A seal across crates would need a public hidden trait
/// that anyone could implement, so it would promise nothing; `unsafe impl` puts the promise where
/// it is made. The host calls still check every region: [`Error::NotSymmetric`] for one outside
/// the symmetric heap (a plain `cudaMalloc` pointer), [`Error::NotLive`] for one that is not
/// inside one live allocation (a freed tensor, two allocations, past the end of one).
pub unsafe trait SymRegion<T> {
    /// Device address of the first element on this PE (the same symmetric address names the
    /// region on every other PE).
    fn as_device_ptr(&self) -> CUdeviceptr;
    /// Number of elements.
    fn len(&self) -> usize;
    /// Whether it holds no elements (never true for pgas's own types).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Elements from the region's start to the end of the symmetric tensor it is part of: its
    /// `len()` for a whole tensor, to the tensor's end for a view. The same on every PE for a
    /// region that starts at the same element of the same tensor everywhere, so a call that may
    /// touch memory past `len()` (an all-to-all-v, whose layout places what arrives) checks
    /// against it with the same verdict on every PE.
    fn extent(&self) -> usize {
        self.len()
    }
}

/// Checks that the `len` elements of `elem` bytes from `ptr` lie inside the symmetric heap, as
/// `inside` (one address -> whether it is in the heap) says of the first and the last byte; the
/// heap is one contiguous address range, so both ends inside means the whole region is. An empty
/// region addresses nothing and passes; a region whose end overflows the address space fails.
/// `what` names the argument in the error.
pub(crate) fn check_symmetric(
    what: &'static str, ptr: u64, len: usize, elem: usize, inside: impl Fn(u64) -> bool,
) -> Result<()> {
    let bytes = (len as u128) * (elem as u128);
    if bytes == 0 {
        return Ok(());
    }
    let last = u64::try_from(ptr as u128 + bytes - 1).ok();
    if last.is_some_and(|last| inside(ptr) && inside(last)) {
        return Ok(());
    }
    Err(Error::NotSymmetric {
        what,
        ptr,
        len,
        elem,
    })
}
/// Elements of `T` in NVSHMEM's symmetric heap, zeroed at allocation, with a row-major shape
/// (one-dimensional unless allocated with [`Pgas::alloc_shaped`] or [`SymTensor::reshape`]d).
///
/// It is also a cudarc buffer: it implements cudarc's `DevicePtr`/`DevicePtrMut` (so
/// `stream.memcpy_dtod(&tensor, &mut slice)` and kernel launches through cudarc take it), and
/// [`SymTensor::cuda_view`] lends this PE's part as a `CudaView`.
pub struct SymTensor<T> {
    pub(crate) ptr: CUdeviceptr,
    pub(crate) shape: Shape,
    /// This PE's part as a cudarc slice that never frees (NVSHMEM owns the memory).
    pub(crate) local: LocalSlice<T>,
    /// Who releases the memory when the tensor drops.
    owner: Owner,
    // Keeps NVSHMEM alive until this memory is freed.
    pub(crate) inner: Arc<Inner>,
}

/// Who releases a tensor's memory.
pub(crate) enum Owner {
    /// `nvshmem_calloc`: freed collectively by `nvshmem_free`; its charge in the heap ledger.
    Heap(usize),
    /// Memory pgas did not allocate (a registered VMM buffer, an imported DLPack tensor):
    /// released by dropping this value, after the pgas stream is idle.
    Other(Box<dyn Send + Sync>),
}

/// An untyped symmetric buffer: bytes, as NVSHMEM4Py's `buffer`. Make one with
/// [`Pgas::alloc_bytes`] or [`SymTensor::into_bytes`]; turn it into typed elements with
/// [`SymTensor::into_typed`].
pub type SymBuffer = SymTensor<u8>;

impl<T> fmt::Debug for SymTensor<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SymTensor<{}>{} @ {:#x}",
            std::any::type_name::<T>(),
            self.shape,
            self.ptr
        )
    }
}

impl Pgas {
    /// Whether the `bytes` bytes at `ptr` lie inside NVSHMEM's symmetric heap on this PE (both
    /// ends are looked up with `nvshmem_ptr`), so that other PEs can address them. An empty
    /// range is inside.
    pub fn in_symmetric_heap(&self, ptr: u64, bytes: usize) -> bool {
        check_symmetric("", ptr, bytes, 1, |addr| self.heap_holds(addr)).is_ok()
    }

    /// Whether the byte at `addr` is in this PE's symmetric heap.
    fn heap_holds(&self, addr: u64) -> bool {
        // SAFETY: nvshmem_ptr only looks the address up; outside the heap it returns null.
        let local = unsafe {
            self.nvshmem()
                .raw()
                .nvshmem_ptr(addr as *const std::ffi::c_void, self.inner.my_pe as i32)
        };
        !local.is_null()
    }

    /// What every host call checks before handing a region to NVSHMEM: [`Error::NotSymmetric`]
    /// unless all of `region` lies in the symmetric heap, then [`Error::NotLive`] unless it lies
    /// in one live allocation (not freed, not straddling two, not past the end of one). `what`
    /// names the argument.
    pub(crate) fn check_region<T>(
        &self, what: &'static str, region: &(impl SymRegion<T> + ?Sized),
    ) -> Result<()> {
        let elem = std::mem::size_of::<T>();
        self.check_live(what, region.as_device_ptr(), region.len(), elem)
    }

    /// [`Pgas::check_region`] of `len` elements of `elem` bytes at `ptr` (also what a checked
    /// kernel launch does for each symmetric argument).
    pub(crate) fn check_live(
        &self, what: &'static str, ptr: u64, len: usize, elem: usize,
    ) -> Result<()> {
        check_symmetric(what, ptr, len, elem, |addr| self.heap_holds(addr))?;
        let bytes = (len as u64).saturating_mul(elem as u64);
        self.inner
            .live
            .check(ptr, bytes)
            .map_err(|overlaps| Error::NotLive {
                what,
                ptr,
                bytes,
                overlaps,
            })
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
        // Refused here, the same on every PE, rather than by NVSHMEM (see `heap::Ledger`).
        let charge = inner.heap_ledger.charge(bytes, inner.heap_size)?;
        // SAFETY: NVSHMEM is initialized and the context bound; every PE agreed on this size
        // (agree::same_size), as the collective nvshmem_calloc needs.
        let raw = unsafe { self.nvshmem().raw().nvshmem_calloc(len, elem.max(1)) };
        if raw.is_null() {
            inner.heap_ledger.release(charge);
            return Err(Error::HeapExhausted {
                requested: bytes,
                heap: inner.heap_size,
                // Seen on H200s: with CUDA VMM, NVSHMEM 3.4.5 refuses one 1 GiB allocation
                // from a 4 GiB heap; its static heap does not.
                in_use: ", part of which is in use by earlier allocations and by NVSHMEM itself \
                         (with CUDA VMM, its default, NVSHMEM 3.4.5 also refuses single allocations \
                         of 1 GiB from a larger heap: set NVSHMEM_DISABLE_CUDA_VMM=1 for a static heap)"
                    .into(),
            });
        }
        inner
            .live
            .track(raw as CUdeviceptr, bytes, heap::SpanKind::Allocation);
        Ok(SymTensor::wrap(
            inner,
            raw as CUdeviceptr,
            Shape::flat(len),
            Owner::Heap(charge),
        ))
    }

    /// Allocates a zeroed tensor of shape `dims` (row-major, e.g. `&[rows, cols]`). Collective,
    /// like [`Pgas::alloc`]; 1 to 8 dimensions, none of extent 0.
    pub fn alloc_shaped<T: DeviceRepr>(&self, dims: &[usize]) -> Result<SymTensor<T>> {
        let shape = Shape::new(dims)?;
        let mut t = self.alloc::<T>(shape.len())?;
        t.shape = shape;
        Ok(t)
    }

    /// Allocates `bytes` zeroed bytes of untyped symmetric memory (collective).
    pub fn alloc_bytes(&self, bytes: usize) -> Result<SymBuffer> {
        self.alloc::<u8>(bytes)
    }

    /// Allocates a symmetric tensor holding a copy of `data` on this PE (collective; each PE may
    /// pass different values of the same length).
    pub fn alloc_from<T: DeviceRepr>(&self, data: &[T]) -> Result<SymTensor<T>> {
        let t = self.alloc::<T>(data.len())?;
        copy_in(&self.inner, t.ptr, data)?;
        Ok(t)
    }
}

impl<T> SymTensor<T> {
    /// Wraps symmetric memory at `ptr`, released by `owner` when the tensor drops.
    pub(crate) fn wrap(
        inner: &Arc<Inner>, ptr: CUdeviceptr, shape: Shape, owner: Owner,
    ) -> SymTensor<T> {
        SymTensor {
            ptr,
            shape,
            local: LocalSlice::new(&inner.stream, ptr, shape.len()),
            owner,
            inner: inner.clone(),
        }
    }

    /// Takes the memory out of `self` without freeing it, as a tensor of `U` with `shape`.
    fn retype<U>(self, shape: Shape) -> SymTensor<U> {
        let me = ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again; its `local` slice is dropped here (it
        // never frees) and its `inner` moves into the new tensor, which now owns the memory.
        let inner = unsafe { std::ptr::read(&me.inner) };
        // SAFETY: as for `inner`: `owner` is moved out once and `me` never drops it.
        let owner = unsafe { std::ptr::read(&me.owner) };
        // SAFETY: as for `inner`: read once, dropped here, never dropped by `me`.
        drop(unsafe { std::ptr::read(&me.local) });
        SymTensor {
            ptr: me.ptr,
            shape,
            local: LocalSlice::new(&inner.stream, me.ptr, shape.len()),
            owner,
            inner,
        }
    }
}

impl<T: DeviceRepr> SymTensor<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.len()
    }

    /// Always false: symmetric tensors hold at least one element.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The extents, row-major (`[len]` for a one-dimensional tensor).
    pub fn shape(&self) -> &[usize] {
        self.shape.dims()
    }

    /// Row-major strides in elements (the last dimension has stride 1).
    pub fn strides(&self) -> Vec<usize> {
        self.shape.strides()
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.ndim()
    }

    /// The same memory with shape `dims`, which must hold as many elements. Local: changes no
    /// data and involves no other PE.
    pub fn reshape(mut self, dims: &[usize]) -> Result<SymTensor<T>> {
        let shape = Shape::new(dims)?;
        check_len("the new shape", shape.len(), self.len())?;
        self.shape = shape;
        Ok(self)
    }

    /// The same memory as untyped bytes (local, no copy).
    pub fn into_bytes(self) -> SymBuffer {
        let bytes = self.len() * std::mem::size_of::<T>();
        self.retype(Shape::flat(bytes))
    }

    /// The bytes of this tensor as `len / size_of::<U>()` elements of `U` (local, no copy). The
    /// byte count must be a multiple of `U`'s size.
    pub fn into_typed<U: DeviceRepr>(self) -> Result<SymTensor<U>> {
        let bytes = self.len() * std::mem::size_of::<T>();
        let size = std::mem::size_of::<U>();
        if size == 0
            || !bytes.is_multiple_of(size)
            || !self.ptr.is_multiple_of(std::mem::align_of::<U>() as u64)
        {
            return Err(Error::InvalidConfig {
                name: "SymTensor::into_typed",
                value: format!("{bytes} bytes as {}", std::any::type_name::<U>()),
                reason: format!(
                    "the byte count must be a multiple of the element size ({size} bytes);                      allocate a multiple of it"
                ),
            });
        }
        Ok(self.retype(Shape::flat(bytes / size)))
    }

    /// Device address of element 0 on this PE.
    pub fn as_device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Copies `src` (same length) into this PE's copy.
    pub fn copy_from(&mut self, src: &[T]) -> Result<()> {
        check_len("the source slice", src.len(), self.len())?;
        copy_in(&self.inner, self.ptr, src)
    }

    /// Copies this PE's copy to the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        copy_out(&self.inner, self.ptr, self.len())
    }

    /// Sets every element of this PE's copy to `value`.
    pub fn fill(&mut self, value: T) -> Result<()>
    where
        T: Copy,
    {
        fill(&self.inner, self.ptr, self.len(), value)
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
        match std::mem::replace(&mut self.owner, Owner::Heap(0)) {
            Owner::Heap(charge) => {
                // Before the free: once freed, another thread's allocation may start here.
                self.inner.live.untrack(self.ptr);
                // SAFETY: `ptr` came from `nvshmem_calloc` and is freed once: the owner is
                // replaced, so a second drop cannot free it again.
                unsafe {
                    self.inner
                        .nvshmem
                        .raw()
                        .nvshmem_free(self.ptr as *mut std::ffi::c_void)
                };
                self.inner.heap_ledger.release(charge);
            }
            Owner::Other(owner) => drop(owner),
        }
    }
}

// SAFETY: the region is (part of) a live symmetric allocation, borrowed for as long as the
// value lives (see the trait's contract).
unsafe impl<T: DeviceRepr> SymRegion<T> for SymTensor<T> {
    fn as_device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }
    fn len(&self) -> usize {
        self.shape.len()
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

pub(crate) fn copy_in<T>(inner: &Inner, dst: CUdeviceptr, src: &[T]) -> Result<()> {
    inner.bind()?;
    // SAFETY: `dst` holds `src.len()` elements (the callers pass a region of that length), and
    // `src` outlives the copy: the stream is synchronized before returning.
    unsafe { cudarc::driver::result::memcpy_htod_async(dst, src, inner.stream.cu_stream()) }
        .map_err(Error::cuda("copying host data into symmetric memory"))?;
    // `src` is borrowed only for this call, so the copy must finish before returning.
    inner.sync_stream()
}

pub(crate) fn copy_out<T>(inner: &Inner, src: CUdeviceptr, len: usize) -> Result<Vec<T>> {
    inner.bind()?;
    let mut out: Vec<T> = Vec::with_capacity(len);
    let bytes = len * std::mem::size_of::<T>();
    // SAFETY: `out` has capacity for `len` elements (`bytes`), `src` holds as many, and `out`
    // outlives the copy: the stream is synchronized before it is read or dropped.
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
    // SAFETY: the copy wrote all `len` elements, and `T: DeviceRepr` is plain data.
    unsafe { out.set_len(len) };
    Ok(out)
}

pub(crate) fn fill<T: Copy>(inner: &Inner, dst: CUdeviceptr, len: usize, value: T) -> Result<()> {
    inner.bind()?;
    let stream = inner.stream.cu_stream();
    let err = Error::cuda("filling symmetric memory");
    // Element sizes the driver can memset directly avoid a host staging buffer.
    // SAFETY: `dst` holds `len` elements of `T` (the callers' own region); each transmute_copy
    // reads exactly size_of::<T>() bytes of `value`, the arm's own size.
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
    fn regions_must_lie_wholly_inside_the_heap() {
        // A fake heap of 0x1000 bytes at 0x10000.
        let heap = |addr: u64| (0x10000..0x11000).contains(&addr);
        let check = |ptr, len, elem| check_symmetric("dst", ptr, len, elem, heap);
        check(0x10000, 0x400, 4).unwrap();
        check(0x10ffc, 1, 4).unwrap();
        // Nothing addressed: an empty region passes wherever it points.
        check(0, 0, 4).unwrap();
        // A plain CUDA allocation, wholly outside.
        let e = check(0x20000, 16, 4).unwrap_err();
        assert!(matches!(e, Error::NotSymmetric { what: "dst", .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("dst (16 elements of 4 bytes at 0x20000)"),
            "{msg}"
        );
        assert!(msg.contains("Fix: pass a SymTensor"), "{msg}");
        // Starts inside, runs past the end by one element: the start alone would pass.
        check(0x10ffc, 2, 4).unwrap_err();
        check(0x10000, 0x401, 4).unwrap_err();
        // Ends inside, starts before it.
        check(0xfffc, 2, 4).unwrap_err();
        // The end overflows the address space: refused, not wrapped around into the heap.
        check(u64::MAX - 3, 8, 1).unwrap_err();
        check(0x10000, usize::MAX, 8).unwrap_err();
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
