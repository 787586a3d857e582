//! Buffers as the collectives see them: a symmetric region by address (so one buffer can be
//! both operands), a local table, and the checks of where two buffers lie.

use crate::{Error, Result, SymRegion};

/// Which buffer of a data movement the peers load from or store into.
#[derive(Clone, Copy)]
pub(super) enum Reached {
    Source,
    Destination,
}

/// An `Err` unless `dst`, the destination `what` of a call, holds as many elements as `src`.
pub(super) fn check_same_len<T>(
    what: &'static str, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
) -> Result<()> {
    if dst.len() != src.len() {
        return Err(Error::LengthMismatch {
            what,
            got: dst.len(),
            expected: src.len(),
        });
    }
    Ok(())
}

/// An `Err` when `dst` and `src` share a byte (reduce-scatter and all-gather have no in-place
/// form yet).
pub(super) fn check_apart(what: &str, d: u64, dbytes: usize, s: u64, sbytes: usize) -> Result<()> {
    if dbytes > 0 && sbytes > 0 && d < s + sbytes as u64 && s < d + dbytes as u64 {
        return Err(Error::InvalidConfig {
            name: "buffers",
            value: format!("dst {d:#x} ({dbytes} bytes), src {s:#x} ({sbytes} bytes)"),
            reason: format!(
                "the {what} destination and source overlap; pass two buffers apart (there is no \
                 in-place {what} yet)"
            ),
        });
    }
    Ok(())
}

/// A buffer of this PE's device memory by address and length, which a kernel reads on this PE
/// only (the all-to-all-v layout's table): not symmetric, so not a [`SymRegion`].
pub(super) struct LocalTable {
    pub(super) ptr: u64,
    pub(super) len: usize,
}

/// A symmetric region by address and length: lets one buffer be both operands of an in-place
/// call (the borrow checker forbids `&mut x` and `&x` at once).
pub(super) struct Region<T> {
    ptr: u64,
    len: usize,
    /// [`SymRegion::extent`] of the region it was made from.
    extent: usize,
    _elem: std::marker::PhantomData<T>,
}

impl<T> Region<T> {
    /// The whole of `r`.
    pub(super) fn of(r: &impl SymRegion<T>) -> Region<T> {
        Region {
            ptr: r.as_device_ptr(),
            len: r.len(),
            extent: r.extent(),
            _elem: std::marker::PhantomData,
        }
    }

    /// `len` elements at address `ptr` of the symmetric heap (the hierarchical collectives'
    /// scratch, which owns them for the call they are used in).
    pub(super) fn at(ptr: u64, len: usize) -> Region<T> {
        Region {
            ptr,
            len,
            extent: len,
            _elem: std::marker::PhantomData,
        }
    }

    /// `len` elements of `r` from element `at` (within `r`: the caller's layout checks keep
    /// `at + len <= r.len()`).
    pub(super) fn within(r: &Region<T>, at: usize, len: usize) -> Region<T> {
        debug_assert!(at + len <= r.len);
        Region {
            ptr: r.ptr + (at * std::mem::size_of::<T>()) as u64,
            len,
            extent: r.extent - at,
            _elem: std::marker::PhantomData,
        }
    }

    /// The first `len` elements of `r`'s extent (past `r.len()` where `len` is larger), or
    /// `None` where the extent is shorter.
    pub(super) fn reaching(r: &impl SymRegion<T>, len: usize) -> Option<Region<T>> {
        (len <= r.extent()).then(|| Region {
            ptr: r.as_device_ptr(),
            len,
            extent: r.extent(),
            _elem: std::marker::PhantomData,
        })
    }
}

// SAFETY: a `Region` is made only by `Region::of` or `Region::reaching` from a live region the
// caller borrows for the whole call it is used in, within that region's extent, by
// `Region::within` inside such a region, or by `Region::at` inside the hierarchical scratch
// (`hier.rs`), which lives as long as the communicator, so it names symmetric memory while it
// is used.
unsafe impl<T> SymRegion<T> for Region<T> {
    fn as_device_ptr(&self) -> u64 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn extent(&self) -> usize {
        self.extent
    }
}

/// The byte offsets modulo 16 of a collective's `src` and `dst` addresses, which the kernels'
/// 16-byte data path takes to find where its vectors start (`docs/coll.md`, "Data path").
pub(super) fn offsets16(src: u64, dst: u64) -> [u32; 2] {
    [(src % 16) as u32, (dst % 16) as u32]
}
