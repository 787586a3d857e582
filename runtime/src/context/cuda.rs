//! cudarc interop: symmetric memory as cudarc buffers.
//!
//! A [`SymTensor`] (and a [`PeerView`]) holds a cudarc `CudaSlice` over its memory that never
//! frees it (`LocalSlice`), so it can implement cudarc's `DevicePtr`/`DevicePtrMut` and lend
//! `CudaView`s with cudarc's own stream-ordering events. Copies between symmetric memory and
//! cudarc buffers run on the pgas stream.

use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceRepr, DeviceSlice,
    SyncOnDrop,
};

use super::memory::{check_len, SymTensor};
use super::peer::PeerView;
use super::pgas::Pgas;
use super::view::{SymView, SymViewMut};
use crate::error::{Error, Result};

/// cudarc's buffer traits for a type with a `LocalSlice` in field `local`.
macro_rules! cudarc_buffer {
    ($ty:ident) => {
        impl<T> DeviceSlice<T> for $ty<'_, T> {
            fn len(&self) -> usize {
                self.local.slice().len()
            }
            fn stream(&self) -> &Arc<CudaStream> {
                self.local.slice().stream()
            }
        }
        impl<T> DevicePtr<T> for $ty<'_, T> {
            fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
                self.local.slice().device_ptr(stream)
            }
        }
        impl<T> DevicePtrMut<T> for $ty<'_, T> {
            fn device_ptr_mut<'a>(
                &'a mut self, stream: &'a CudaStream,
            ) -> (CUdeviceptr, SyncOnDrop<'a>) {
                self.local.slice_mut().device_ptr_mut(stream)
            }
        }
    };
}

/// `SymTensor` has no lifetime parameter; this alias gives it one for the macro.
type SymTensorL<'a, T> = SymTensor<T>;
cudarc_buffer!(SymTensorL);
cudarc_buffer!(PeerView);

impl<T: DeviceRepr> SymTensor<T> {
    /// This PE's part as a cudarc `CudaView` (for cudarc copies, cuBLAS, kernel launches).
    pub fn cuda_view(&self) -> CudaView<'_, T> {
        self.local.slice().as_view()
    }

    /// This PE's part as a writable cudarc `CudaViewMut`.
    pub fn cuda_view_mut(&mut self) -> CudaViewMut<'_, T> {
        self.local.slice_mut().as_view_mut()
    }

    /// Copies a cudarc buffer of the same length (a `CudaSlice`, `CudaView`, another tensor)
    /// into this PE's part, on the pgas stream, and waits for it.
    pub fn copy_from_device(&mut self, src: &impl DevicePtr<T>) -> Result<()> {
        check_len("the source buffer", src.len(), self.len())?;
        let stream = self.inner.stream.clone();
        self.inner.bind()?;
        stream
            .memcpy_dtod(src, self.local.slice_mut())
            .map_err(Error::cuda("copying a CUDA buffer into symmetric memory"))?;
        self.inner.sync_stream()
    }

    /// A new cudarc `CudaSlice` (ordinary device memory) holding a copy of this PE's part.
    pub fn to_cuda_slice(&self) -> Result<CudaSlice<T>> {
        self.inner.bind()?;
        let copy = self
            .inner
            .stream
            .clone_dtod(self.local.slice())
            .map_err(Error::cuda("copying symmetric memory into a CUDA buffer"))?;
        self.inner.sync_stream()?;
        Ok(copy)
    }
}

impl<T: DeviceRepr> SymView<'_, T> {
    /// The view's elements on this PE as a cudarc `CudaView`.
    pub fn cuda_view(&self) -> CudaView<'_, T> {
        let start = self.start;
        self.tensor
            .local
            .slice()
            .slice(start..start + self.shape.len())
    }
}

impl<T: DeviceRepr> SymViewMut<'_, T> {
    /// The view's elements on this PE as a writable cudarc `CudaViewMut`.
    pub fn cuda_view_mut(&mut self) -> CudaViewMut<'_, T> {
        let (start, len) = (self.start, self.shape.len());
        self.tensor.local.slice_mut().slice_mut(start..start + len)
    }
}

impl Pgas {
    /// Allocates a symmetric tensor holding a copy of a cudarc buffer on this PE (collective;
    /// every PE passes a buffer of the same length).
    pub fn alloc_from_device<T: DeviceRepr>(
        &self, src: &impl DevicePtr<T>,
    ) -> Result<SymTensor<T>> {
        let mut t = self.alloc::<T>(src.len())?;
        t.copy_from_device(src)?;
        Ok(t)
    }
}
