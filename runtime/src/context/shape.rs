//! [`Shape`]: the dimensions of a symmetric tensor, row-major (C order) and contiguous, as
//! NVSHMEM4Py's arrays and PyTorch's default tensors lay them out.

use std::fmt;

use crate::error::{Error, Result};

/// The most dimensions a symmetric tensor may have (enough for every layout in practice, and
/// small enough that a shape is a `Copy` value views can carry).
pub const MAX_DIMS: usize = 8;

/// The dimensions of a symmetric tensor or view: row-major, contiguous, every extent at least 1.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    dims: [usize; MAX_DIMS],
    ndim: usize,
}

impl Shape {
    /// A checked shape: 1 to [`MAX_DIMS`] extents, none zero, whose product fits in `usize`.
    pub fn new(dims: &[usize]) -> Result<Shape> {
        let invalid = |reason: String| Error::InvalidConfig {
            name: "tensor shape",
            value: format!("{dims:?}"),
            reason,
        };
        if dims.is_empty() || dims.len() > MAX_DIMS {
            return Err(invalid(format!(
                "a symmetric tensor has 1 to {MAX_DIMS} dimensions; give at least one extent"
            )));
        }
        if dims.contains(&0) {
            return Err(invalid(
                "every extent must be at least 1 (symmetric tensors are never empty)".into(),
            ));
        }
        if dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .is_none()
        {
            return Err(invalid("the number of elements overflows usize".into()));
        }
        let mut s = Shape {
            dims: [0; MAX_DIMS],
            ndim: dims.len(),
        };
        s.dims[..dims.len()].copy_from_slice(dims);
        Ok(s)
    }

    /// The one-dimensional shape `[len]` (`len` at least 1).
    pub(crate) fn flat(len: usize) -> Shape {
        let mut s = Shape {
            dims: [0; MAX_DIMS],
            ndim: 1,
        };
        s.dims[0] = len;
        s
    }

    /// The extents.
    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.ndim]
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.ndim
    }

    /// Number of elements (the product of the extents).
    pub fn len(&self) -> usize {
        self.dims().iter().product()
    }

    /// Always false: every extent is at least 1.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Row-major strides in elements: the last dimension has stride 1.
    pub fn strides(&self) -> Vec<usize> {
        let mut strides = vec![1; self.ndim];
        for d in (0..self.ndim.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * self.dims[d + 1];
        }
        strides
    }

    /// The contiguous block at the leading indices `index` (fewer indices than dimensions):
    /// its offset in elements and its shape (the remaining dimensions). `t.sub(&[i])` of a
    /// matrix is row `i`.
    pub(crate) fn sub(&self, index: &[usize]) -> Result<(usize, Shape)> {
        if index.is_empty() || index.len() >= self.ndim {
            return Err(Error::InvalidConfig {
                name: "sub-tensor index",
                value: format!("{index:?}"),
                reason: format!(
                    "give 1 to {} leading indices of a tensor of shape {self} (for a range of \
                     elements use view(a..b))",
                    self.ndim.saturating_sub(1)
                ),
            });
        }
        let strides = self.strides();
        let mut offset = 0;
        for (d, &i) in index.iter().enumerate() {
            if i >= self.dims[d] {
                return Err(Error::OutOfRange {
                    start: i,
                    end: i + 1,
                    len: self.dims[d],
                });
            }
            offset += i * strides[d];
        }
        let rest = Shape::new(&self.dims[index.len()..self.ndim])?;
        Ok((offset, rest))
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.dims())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.dims())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_are_row_major() {
        let s = Shape::new(&[2, 3, 4]).unwrap();
        assert_eq!(s.len(), 24);
        assert_eq!(s.strides(), vec![12, 4, 1]);
        assert_eq!(Shape::flat(7).strides(), vec![1]);
        assert_eq!(Shape::flat(7).dims(), &[7]);
    }

    #[test]
    fn sub_blocks_are_contiguous_slabs() {
        let s = Shape::new(&[2, 3, 4]).unwrap();
        let (off, rest) = s.sub(&[1]).unwrap();
        assert_eq!((off, rest.dims()), (12, &[3, 4][..]));
        let (off, rest) = s.sub(&[1, 2]).unwrap();
        assert_eq!((off, rest.dims()), (20, &[4][..]));
        assert!(matches!(
            s.sub(&[2]),
            Err(Error::OutOfRange {
                start: 2,
                end: 3,
                len: 2
            })
        ));
        let e = s.sub(&[0, 0, 0]).unwrap_err().to_string();
        assert!(
            e.contains("1 to 2 leading indices") && e.contains("view(a..b)"),
            "{e}"
        );
        assert!(s.sub(&[]).is_err());
    }

    #[test]
    fn bad_shapes_say_what_is_accepted() {
        for bad in [&[][..], &[3, 0], &[1; 9], &[usize::MAX, 2]] {
            let e = Shape::new(bad).unwrap_err().to_string();
            assert!(e.contains("tensor shape"), "{bad:?}: {e}");
        }
    }
}
