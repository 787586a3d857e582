//! DLPack export and import of symmetric tensors (through the `dlpark` crate), so a tensor can
//! be handed to PyTorch, JAX, CuPy or another framework without a copy, and taken back.
//!
//! Export moves the tensor into the DLPack capsule: the consumer's deleter drops it, which frees
//! the memory collectively, so every PE must release its exported tensors in the same order (as
//! with NVSHMEM4Py's `free_tensor`). Import accepts only memory inside NVSHMEM's symmetric heap
//! (what pgas or NVSHMEM4Py allocated, or a registered buffer): anything else cannot be the target
//! of a put.

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::DeviceRepr;
use dlpark::ffi::{DLDevice, DLDeviceType};
use dlpark::metadata::Dynamic;
use dlpark::versioned::Dlpack;
use dlpark::{DlpackElement, Managed, ManagedTensorBase, OpaqueContext};

use super::memory::{Owner, SymTensor};
use super::pgas::{Inner, Pgas};
use super::shape::{Shape, MAX_DIMS};
use crate::error::{Error, Result};
use crate::heap::SpanKind;
use std::sync::Arc;

impl<T: DeviceRepr + DlpackElement> SymTensor<T> {
    /// Moves this tensor into a DLPack tensor (versioned ABI) with its shape, row-major strides,
    /// dtype and CUDA device, without copying. Data written by earlier pgas calls is complete
    /// (pgas waits for its stream first). The DLPack deleter drops the tensor, freeing it
    /// collectively: release exported tensors in the same order on every PE.
    pub fn into_dlpack(self) -> Result<Dlpack> {
        self.inner.sync_stream()?;
        let (ptr, shape, device) = (self.ptr, self.shape, self.inner.device);
        export::<T, _, _>(ptr, &shape, device, Box::new(self))
    }

    /// Describes this tensor to DLPack without moving it, in either ABI (`M` is
    /// `DLManagedTensorVersioned` for `dlpark::versioned::Dlpack`, `DLManagedTensor` for the
    /// legacy `dlpark::legacy::Dlpack` that older consumers ask for). For a producer that keeps
    /// the tensor and hands out a fresh DLPack tensor per request, as Python's `__dlpack__`
    /// protocol wants (`pgas-python` does). Waits for the pgas stream first, like
    /// [`SymTensor::into_dlpack`]. The DLPack deleter drops `keep_alive`.
    ///
    /// # Safety
    ///
    /// `keep_alive` must keep this tensor (and so its memory) alive until it is dropped: own
    /// it, or hold a reference count on whatever owns it. The consumer reads and writes the
    /// memory through the DLPack tensor without any borrow of `self`.
    pub unsafe fn dlpack_sharing<M: ManagedTensorBase, C: OpaqueContext>(
        &self, keep_alive: C,
    ) -> Result<Managed<M>> {
        self.inner.sync_stream()?;
        export::<T, _, M>(self.ptr, &self.shape, self.inner.device, keep_alive)
    }
}

impl Pgas {
    /// Takes a DLPack tensor whose data lies in NVSHMEM's symmetric heap on this PE's GPU (for
    /// example one made by [`SymTensor::into_dlpack`] or by NVSHMEM4Py) as a symmetric tensor of
    /// its shape, without copying. It must be contiguous row-major with `T`'s dtype. Dropping the
    /// result calls the DLPack deleter. Import on every PE at the same point, so that the tensors
    /// are symmetric. Either DLPack ABI is taken (`dlpark::versioned::Dlpack` or the legacy
    /// `dlpark::legacy::Dlpack`).
    pub fn from_dlpack<T: DeviceRepr + DlpackElement>(
        &self, tensor: Managed<impl ManagedTensorBase + 'static>,
    ) -> Result<SymTensor<T>> {
        let (ptr, shape) = check_import::<T, _>(&tensor, self.inner.device)?;
        self.inner.bind()?;
        let bytes = shape.len() * std::mem::size_of::<T>();
        if !self.in_symmetric_heap(ptr, bytes) {
            return Err(Error::Dlpack {
                reason: format!(
                    "the tensor's data ({ptr:#x}, {bytes} bytes) is not inside NVSHMEM's symmetric \
                     heap, so other PEs cannot address it; allocate it with pgas (Pgas::alloc, \
                     then into_dlpack) or NVSHMEM4Py, or copy it into a SymTensor with \
                     copy_from_device"
                ),
            });
        }
        // Memory pgas allocated is tracked already; other heap memory (NVSHMEM4Py's) is live
        // for as long as this import holds it.
        let tracked = self
            .inner
            .live
            .track_unless_covered(ptr, bytes, SpanKind::Imported)
            .then(|| Untrack {
                inner: self.inner.clone(),
                start: ptr,
            });
        Ok(SymTensor::wrap(
            &self.inner,
            ptr,
            shape,
            Owner::Other(Box::new((tensor, tracked))),
        ))
    }
}

/// Forgets an imported tensor's live span when the import is dropped.
struct Untrack {
    inner: Arc<Inner>,
    start: CUdeviceptr,
}

impl Drop for Untrack {
    fn drop(&mut self) {
        self.inner.live.untrack(self.start);
    }
}

/// A DLPack tensor (ABI `M`) over `len(shape)` elements of `T` at `ptr` on CUDA device
/// `device`, owning `owner` (dropped by the deleter).
fn export<T: DlpackElement, C: OpaqueContext, M: ManagedTensorBase>(
    ptr: CUdeviceptr, shape: &Shape, device: usize, owner: C,
) -> Result<Managed<M>> {
    let dims: Vec<i64> = shape.dims().iter().map(|&d| d as i64).collect();
    let strides: Vec<i64> = shape.strides().iter().map(|&s| s as i64).collect();
    let mut t = Dynamic::new(dims, strides)
        .initialize_as::<M>(owner)
        .map_err(|e| Error::Dlpack {
            reason: format!("cannot describe shape {shape}: {e}"),
        })?;
    t.set_device(DLDevice::cuda(device as i32))
        .set_dtype(T::DTYPE)
        .set_data(ptr as *mut std::ffi::c_void);
    // SAFETY: data, shape, strides, dtype and device describe memory the owner keeps alive.
    Ok(unsafe { t.finish() })
}

/// Checks what `from_dlpack` needs of a tensor's metadata; returns its data address (with the
/// byte offset) and shape.
fn check_import<T: DlpackElement, M: ManagedTensorBase>(
    tensor: &Managed<M>, device: usize,
) -> Result<(CUdeviceptr, Shape)> {
    let bad = |reason: String| Error::Dlpack { reason };
    let t = tensor
        .validate()
        .map_err(|e| bad(format!("the tensor's metadata is invalid: {e}")))?;
    let dev = t.device();
    if dev.device_type != DLDeviceType::CUDA || dev.device_id != device as i32 {
        return Err(bad(format!(
            "the tensor is on device type {} id {}, not on this PE's GPU (CUDA device {device}); \
             move it there first (in PyTorch: .to(f\"cuda:{device}\"))",
            dev.device_type.0, dev.device_id
        )));
    }
    if t.dtype() != T::DTYPE {
        let d = t.dtype();
        return Err(bad(format!(
            "the tensor's dtype (code {}, {} bits, {} lanes) is not {} (code {}, {} bits); import \
             it with the matching element type",
            d.code.0,
            d.bits,
            d.lanes,
            std::any::type_name::<T>(),
            T::DTYPE.code.0,
            T::DTYPE.bits
        )));
    }
    if !t.is_compact().unwrap_or(false) {
        return Err(bad(format!(
            "the tensor is not contiguous row-major (shape {:?}, strides {:?}); import a \
             contiguous view (a row or a range of rows of a pgas tensor), or copy the data into \
             a pgas tensor (PyTorch's .contiguous() would copy it outside the symmetric heap, \
             where it cannot be imported)",
            t.shape(),
            t.strides()
        )));
    }
    let dims: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
    let shape = match dims.len() {
        // A scalar is one element.
        0 => Shape::flat(1),
        n if n > MAX_DIMS => {
            return Err(bad(format!(
                "the tensor has {n} dimensions; pgas takes at most {MAX_DIMS} (reshape it)"
            )))
        }
        _ => Shape::new(&dims).map_err(|e| bad(e.to_string()))?,
    };
    // SAFETY: only the address is read, not the memory.
    let data = unsafe { tensor.tensor() }.data as CUdeviceptr;
    if data == 0 {
        return Err(bad("the tensor's data pointer is null".into()));
    }
    Ok((data + t.byte_offset(), shape))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlpark::ffi::{DLDataType, DLDataTypeCode};

    fn exported<T: DlpackElement>(dims: &[usize]) -> Dlpack {
        export::<T, _, _>(0xdead_0000, &Shape::new(dims).unwrap(), 1, Box::new(())).unwrap()
    }

    #[test]
    fn export_describes_shape_strides_dtype_and_device() {
        let dl = exported::<f32>(&[2, 3, 4]);
        let t = dl.validate().unwrap();
        assert_eq!(t.shape(), &[2, 3, 4]);
        assert_eq!(t.strides(), Some(&[12, 4, 1][..]));
        assert_eq!(t.dtype(), DLDataType::F32);
        assert_eq!(
            (t.dtype().code, t.dtype().bits, t.dtype().lanes),
            (DLDataTypeCode::FLOAT, 32, 1)
        );
        assert_eq!(t.device().device_type, DLDeviceType::CUDA);
        assert_eq!(t.device().device_id, 1);
        // SAFETY: `dl` owns its descriptor, which nothing mutates while it is read here.
        assert_eq!(unsafe { dl.tensor() }.data as u64, 0xdead_0000);
        assert_eq!(t.byte_offset(), 0);
        assert_eq!(
            exported::<half::bf16>(&[5]).validate().unwrap().dtype(),
            DLDataType::BF16
        );
        assert_eq!(
            exported::<u64>(&[5]).validate().unwrap().dtype(),
            DLDataType::U64
        );
    }

    #[test]
    fn import_takes_back_what_export_made() {
        let dl = exported::<i32>(&[4, 8]);
        let (ptr, shape) = check_import::<i32, _>(&dl, 1).unwrap();
        assert_eq!((ptr, shape.dims()), (0xdead_0000, &[4, 8][..]));
    }

    #[test]
    fn the_legacy_abi_describes_the_same_tensor() {
        let dl: dlpark::legacy::Dlpack =
            export::<u8, _, _>(0xbeef_0000, &Shape::new(&[3, 5]).unwrap(), 0, Box::new(()))
                .unwrap();
        let t = dl.validate().unwrap();
        assert_eq!(t.shape(), &[3, 5]);
        assert_eq!(t.strides(), Some(&[5, 1][..]));
        assert_eq!(t.dtype(), DLDataType::U8);
        let (ptr, shape) = check_import::<u8, _>(&dl, 0).unwrap();
        assert_eq!((ptr, shape.dims()), (0xbeef_0000, &[3, 5][..]));
    }

    #[test]
    fn import_refuses_another_dtype_or_device_with_the_fix() {
        let dl = exported::<f32>(&[16]);
        let e = check_import::<i32, _>(&dl, 1).unwrap_err().to_string();
        assert!(
            e.contains("dtype") && e.contains("matching element type"),
            "{e}"
        );
        let e = check_import::<f32, _>(&dl, 0).unwrap_err().to_string();
        assert!(e.contains("CUDA device 0") && e.contains("cuda:0"), "{e}");
    }

    #[test]
    fn import_refuses_strided_tensors() {
        let mut t = Dynamic::new(vec![4i64, 4], vec![1i64, 4])
            .initialize(Box::new(()))
            .unwrap();
        t.set_device(DLDevice::cuda(0))
            .set_dtype(DLDataType::F32)
            .set_data(0x1000 as *mut std::ffi::c_void);
        // SAFETY: nothing reads the fake data pointer (the import refuses the tensor first);
        // shape and strides are the builder's own, alive with the tensor.
        let dl = unsafe { t.finish() };
        let e = check_import::<f32, _>(&dl, 0).unwrap_err().to_string();
        assert!(
            e.contains("not contiguous") && e.contains("contiguous view"),
            "{e}"
        );
    }
}
