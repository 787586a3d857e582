//! Views of a [`SymTensor`]: a range of its elements ([`SymView`], [`SymViewMut`] from
//! [`SymTensor::view`] / [`SymTensor::view_mut`]) or a sub-tensor at leading indices
//! ([`SymTensor::sub`] / [`SymTensor::sub_mut`]). Each is a [`SymRegion`], so every call that
//! takes a region takes a view.

use std::ops::{Bound, RangeBounds};

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::DeviceRepr;

use super::memory::{check_len, copy_in, copy_out, fill, SymRegion, SymTensor};
use super::shape::Shape;
use crate::error::{Error, Result};

impl<T: DeviceRepr> SymTensor<T> {
    /// A read-only view of the elements in `range` (`..`, `a..b`, `a..`, `..=b`) of the flat
    /// tensor; the view is one-dimensional. Empty and out-of-range views are errors.
    pub fn view(&self, range: impl RangeBounds<usize>) -> Result<SymView<'_, T>> {
        let (start, end) = resolve_range(&range, self.len())?;
        Ok(SymView {
            tensor: self,
            start,
            shape: Shape::flat(end - start),
        })
    }

    /// A writable view of `range`.
    pub fn view_mut(&mut self, range: impl RangeBounds<usize>) -> Result<SymViewMut<'_, T>> {
        let (start, end) = resolve_range(&range, self.len())?;
        Ok(SymViewMut {
            tensor: self,
            start,
            shape: Shape::flat(end - start),
        })
    }

    /// The sub-tensor at the leading indices `index`, with the remaining dimensions as its
    /// shape: `m.sub(&[i])` of a `[rows, cols]` matrix is row `i` (shape `[cols]`), `t.sub(&[i,
    /// j])` of a `[a, b, c]` tensor is the `[c]` vector at `(i, j)`. Sub-tensors of a row-major
    /// tensor are contiguous, so the view works with every call that takes a region.
    pub fn sub(&self, index: &[usize]) -> Result<SymView<'_, T>> {
        let (start, shape) = self.shape.sub(index)?;
        Ok(SymView {
            tensor: self,
            start,
            shape,
        })
    }

    /// A writable [`SymTensor::sub`].
    pub fn sub_mut(&mut self, index: &[usize]) -> Result<SymViewMut<'_, T>> {
        let (start, shape) = self.shape.sub(index)?;
        Ok(SymViewMut {
            tensor: self,
            start,
            shape,
        })
    }
}

/// A read-only part of a [`SymTensor`]: a range of its elements ([`SymTensor::view`], shape
/// `[len]`) or a sub-tensor ([`SymTensor::sub`], the remaining dimensions).
#[derive(Debug, Clone, Copy)]
pub struct SymView<'a, T> {
    pub(crate) tensor: &'a SymTensor<T>,
    pub(crate) start: usize,
    pub(crate) shape: Shape,
}

/// A writable part of a [`SymTensor`] ([`SymTensor::view_mut`], [`SymTensor::sub_mut`]).
#[derive(Debug)]
pub struct SymViewMut<'a, T> {
    pub(crate) tensor: &'a mut SymTensor<T>,
    pub(crate) start: usize,
    pub(crate) shape: Shape,
}

fn offset_ptr<T>(t: &SymTensor<T>, start: usize) -> CUdeviceptr {
    t.ptr + (start * std::mem::size_of::<T>()) as CUdeviceptr
}

impl<T: DeviceRepr> SymView<'_, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.len()
    }
    /// Its extents: `[len]` for a range view, the remaining dimensions for a sub-tensor.
    pub fn shape(&self) -> &[usize] {
        self.shape.dims()
    }
    /// Always false: views hold at least one element.
    pub fn is_empty(&self) -> bool {
        false
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
        copy_out(&self.tensor.inner, self.as_device_ptr(), self.shape.len())
    }
}

impl<T: DeviceRepr> SymViewMut<'_, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.len()
    }
    /// Its extents: `[len]` for a range view, the remaining dimensions for a sub-tensor.
    pub fn shape(&self) -> &[usize] {
        self.shape.dims()
    }
    /// Always false: views hold at least one element.
    pub fn is_empty(&self) -> bool {
        false
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
        copy_out(&self.tensor.inner, self.as_device_ptr(), self.shape.len())
    }
    /// Copies `src` (same length as the view) in.
    pub fn copy_from(&mut self, src: &[T]) -> Result<()> {
        check_len("the source slice", src.len(), self.shape.len())?;
        copy_in(&self.tensor.inner, self.as_device_ptr(), src)
    }
    /// Sets every element of the view to `value`.
    pub fn fill(&mut self, value: T) -> Result<()>
    where
        T: Copy,
    {
        fill(
            &self.tensor.inner,
            self.as_device_ptr(),
            self.shape.len(),
            value,
        )
    }
}

// SAFETY: the region is (part of) a live symmetric allocation, borrowed for as long as the
// value lives (see the trait's contract).
unsafe impl<T: DeviceRepr> SymRegion<T> for SymView<'_, T> {
    fn as_device_ptr(&self) -> CUdeviceptr {
        SymView::as_device_ptr(self)
    }
    fn len(&self) -> usize {
        self.shape.len()
    }
    fn extent(&self) -> usize {
        self.tensor.shape.len() - self.start
    }
}

// SAFETY: the region is (part of) a live symmetric allocation, borrowed for as long as the
// value lives (see the trait's contract).
unsafe impl<T: DeviceRepr> SymRegion<T> for SymViewMut<'_, T> {
    fn as_device_ptr(&self) -> CUdeviceptr {
        SymViewMut::as_device_ptr(self)
    }
    fn len(&self) -> usize {
        self.shape.len()
    }
    fn extent(&self) -> usize {
        self.tensor.shape.len() - self.start
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
}
