//! Host atomics on symmetric memory (`nvshmem_<type>_atomic_<op>` called from the host).
//!
//! NVSHMEM supports host AMOs only towards PEs connected by NVLink (or the PE itself); it runs
//! each as a small kernel on its own stream. The fetching ones return the old value, so they are
//! done when they return; NVSHMEM lets the non-fetching ones (set, add, inc, and, or, xor) finish
//! later, so pgas completes them with `nvshmem_quiet` before returning: every pgas host AMO is
//! done at the target when it returns. pgas also waits for its own stream first, so an AMO is
//! ordered after the RMA issued before it.
//!
//! The fixed-width integers have every operation; `f32`/`f64` have fetch, set and swap, as in
//! NVSHMEM (its host library exports no other floating-point AMO).

use super::memory::SymRegion;
use super::pgas::Pgas;
use crate::error::{Error, Result};
use crate::ffi::NvshmemHost;
use cudarc::driver::DeviceRepr;

mod sealed {
    pub trait Sealed {}
}

/// Element types with host fetch, set and swap: `i32`, `i64`, `u32`, `u64`, `f32`, `f64`.
pub trait AmoElem: DeviceRepr + Copy + sealed::Sealed {
    #[doc(hidden)]
    unsafe fn fetch(nv: &NvshmemHost, dst: *mut Self, pe: i32) -> Self;
    #[doc(hidden)]
    unsafe fn set(nv: &NvshmemHost, dst: *mut Self, v: Self, pe: i32);
    #[doc(hidden)]
    unsafe fn swap(nv: &NvshmemHost, dst: *mut Self, v: Self, pe: i32) -> Self;
}

/// Integer element types with every host AMO: `i32`, `i64`, `u32`, `u64`.
pub trait AmoInt: AmoElem {
    #[doc(hidden)]
    unsafe fn compare_swap(nv: &NvshmemHost, dst: *mut Self, cond: Self, v: Self, pe: i32) -> Self;
    #[doc(hidden)]
    unsafe fn rmw(nv: &NvshmemHost, op: IntOp, dst: *mut Self, v: Self, pe: i32);
    #[doc(hidden)]
    unsafe fn fetch_rmw(nv: &NvshmemHost, op: IntOp, dst: *mut Self, v: Self, pe: i32) -> Self;
}

/// The read-modify-write operations of [`AmoInt`] (increment is an add of 1, as in NVSHMEM's
/// definition of `atomic_inc`).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOp {
    Add,
    And,
    Or,
    Xor,
}

macro_rules! amo_elem {
    ($t:ty, $fetch:ident, $set:ident, $swap:ident) => {
        impl sealed::Sealed for $t {}
        impl AmoElem for $t {
            unsafe fn fetch(nv: &NvshmemHost, dst: *mut $t, pe: i32) -> $t {
                nv.$fetch(dst, pe)
            }
            unsafe fn set(nv: &NvshmemHost, dst: *mut $t, v: $t, pe: i32) {
                nv.$set(dst, v, pe)
            }
            unsafe fn swap(nv: &NvshmemHost, dst: *mut $t, v: $t, pe: i32) -> $t {
                nv.$swap(dst, v, pe)
            }
        }
    };
}

macro_rules! amo_int {
    ($t:ty, $cs:ident, [$add:ident, $and:ident, $or:ident, $xor:ident],
     [$fadd:ident, $fand:ident, $for:ident, $fxor:ident]) => {
        impl AmoInt for $t {
            unsafe fn compare_swap(nv: &NvshmemHost, dst: *mut $t, cond: $t, v: $t, pe: i32) -> $t {
                nv.$cs(dst, cond, v, pe)
            }
            unsafe fn rmw(nv: &NvshmemHost, op: IntOp, dst: *mut $t, v: $t, pe: i32) {
                match op {
                    IntOp::Add => nv.$add(dst, v, pe),
                    IntOp::And => nv.$and(dst, v, pe),
                    IntOp::Or => nv.$or(dst, v, pe),
                    IntOp::Xor => nv.$xor(dst, v, pe),
                }
            }
            unsafe fn fetch_rmw(nv: &NvshmemHost, op: IntOp, dst: *mut $t, v: $t, pe: i32) -> $t {
                match op {
                    IntOp::Add => nv.$fadd(dst, v, pe),
                    IntOp::And => nv.$fand(dst, v, pe),
                    IntOp::Or => nv.$for(dst, v, pe),
                    IntOp::Xor => nv.$fxor(dst, v, pe),
                }
            }
        }
    };
}

amo_elem!(
    i32,
    nvshmem_int32_atomic_fetch,
    nvshmem_int32_atomic_set,
    nvshmem_int32_atomic_swap
);
amo_elem!(
    i64,
    nvshmem_int64_atomic_fetch,
    nvshmem_int64_atomic_set,
    nvshmem_int64_atomic_swap
);
amo_elem!(
    u32,
    nvshmem_uint32_atomic_fetch,
    nvshmem_uint32_atomic_set,
    nvshmem_uint32_atomic_swap
);
amo_elem!(
    u64,
    nvshmem_uint64_atomic_fetch,
    nvshmem_uint64_atomic_set,
    nvshmem_uint64_atomic_swap
);
amo_elem!(
    f32,
    nvshmem_float_atomic_fetch,
    nvshmem_float_atomic_set,
    nvshmem_float_atomic_swap
);
amo_elem!(
    f64,
    nvshmem_double_atomic_fetch,
    nvshmem_double_atomic_set,
    nvshmem_double_atomic_swap
);
amo_int!(
    i32,
    nvshmem_int32_atomic_compare_swap,
    [
        nvshmem_int32_atomic_add,
        nvshmem_int32_atomic_and,
        nvshmem_int32_atomic_or,
        nvshmem_int32_atomic_xor
    ],
    [
        nvshmem_int32_atomic_fetch_add,
        nvshmem_int32_atomic_fetch_and,
        nvshmem_int32_atomic_fetch_or,
        nvshmem_int32_atomic_fetch_xor
    ]
);
amo_int!(
    i64,
    nvshmem_int64_atomic_compare_swap,
    [
        nvshmem_int64_atomic_add,
        nvshmem_int64_atomic_and,
        nvshmem_int64_atomic_or,
        nvshmem_int64_atomic_xor
    ],
    [
        nvshmem_int64_atomic_fetch_add,
        nvshmem_int64_atomic_fetch_and,
        nvshmem_int64_atomic_fetch_or,
        nvshmem_int64_atomic_fetch_xor
    ]
);
amo_int!(
    u32,
    nvshmem_uint32_atomic_compare_swap,
    [
        nvshmem_uint32_atomic_add,
        nvshmem_uint32_atomic_and,
        nvshmem_uint32_atomic_or,
        nvshmem_uint32_atomic_xor
    ],
    [
        nvshmem_uint32_atomic_fetch_add,
        nvshmem_uint32_atomic_fetch_and,
        nvshmem_uint32_atomic_fetch_or,
        nvshmem_uint32_atomic_fetch_xor
    ]
);
amo_int!(
    u64,
    nvshmem_uint64_atomic_compare_swap,
    [
        nvshmem_uint64_atomic_add,
        nvshmem_uint64_atomic_and,
        nvshmem_uint64_atomic_or,
        nvshmem_uint64_atomic_xor
    ],
    [
        nvshmem_uint64_atomic_fetch_add,
        nvshmem_uint64_atomic_fetch_and,
        nvshmem_uint64_atomic_fetch_or,
        nvshmem_uint64_atomic_fetch_xor
    ]
);

/// A target element: the symmetric address of `t[index]`, checked.
fn element<T>(t: &impl SymRegion<T>, index: usize) -> Result<*mut T> {
    if index >= t.len() {
        return Err(Error::OutOfRange {
            start: index,
            end: index + 1,
            len: t.len(),
        });
    }
    Ok((t.as_device_ptr() + (index * std::mem::size_of::<T>()) as u64) as *mut T)
}

impl Pgas {
    /// Runs one fetching host AMO on element `index` of `t` on PE `pe`, after the pgas stream's
    /// work.
    fn amo<T, R>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        pe: usize,
        call: impl FnOnce(&NvshmemHost, *mut T, i32) -> R,
    ) -> Result<R> {
        let pe = self.check_pe(pe)?;
        let dst = element(t, index)?;
        self.inner.bind()?;
        self.inner.sync_stream()?;
        Ok(call(self.nvshmem().raw(), dst, pe))
    }

    /// [`Pgas::amo`] for a non-fetching AMO: completes it before returning.
    fn amo_complete<T>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        pe: usize,
        call: impl FnOnce(&NvshmemHost, *mut T, i32),
    ) -> Result<()> {
        self.amo(t, index, pe, call)?;
        // SAFETY: NVSHMEM is initialized.
        unsafe { self.nvshmem().raw().nvshmem_quiet() };
        Ok(())
    }

    /// Atomically reads `t[index]` on PE `pe` (`nvshmem_<type>_atomic_fetch`).
    pub fn atomic_fetch<T: AmoElem>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        pe: usize,
    ) -> Result<T> {
        // SAFETY (all AMOs): `dst` is a checked element of a symmetric region, `pe` a world PE.
        self.amo(t, index, pe, |nv, dst, pe| unsafe { T::fetch(nv, dst, pe) })
    }

    /// Atomically writes `value` to `t[index]` on PE `pe`.
    pub fn atomic_set<T: AmoElem>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        value: T,
        pe: usize,
    ) -> Result<()> {
        self.amo_complete(t, index, pe, |nv, dst, pe| unsafe {
            T::set(nv, dst, value, pe)
        })
    }

    /// Atomically writes `value` to `t[index]` on PE `pe` and returns the old value.
    pub fn atomic_swap<T: AmoElem>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        value: T,
        pe: usize,
    ) -> Result<T> {
        self.amo(t, index, pe, |nv, dst, pe| unsafe {
            T::swap(nv, dst, value, pe)
        })
    }

    /// Writes `value` to `t[index]` on PE `pe` if it equals `cond`; returns the old value either
    /// way.
    pub fn atomic_compare_swap<T: AmoInt>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        cond: T,
        value: T,
        pe: usize,
    ) -> Result<T> {
        self.amo(t, index, pe, |nv, dst, pe| unsafe {
            T::compare_swap(nv, dst, cond, value, pe)
        })
    }

    /// Atomically adds `value` to `t[index]` on PE `pe` (wrapping).
    pub fn atomic_add<T: AmoInt>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        value: T,
        pe: usize,
    ) -> Result<()> {
        self.int_rmw(t, index, IntOp::Add, value, pe)
    }

    /// [`Pgas::atomic_add`] that returns the old value.
    pub fn atomic_fetch_add<T: AmoInt>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        value: T,
        pe: usize,
    ) -> Result<T> {
        self.int_fetch_rmw(t, index, IntOp::Add, value, pe)
    }

    /// Atomically adds 1 to `t[index]` on PE `pe`.
    pub fn atomic_inc<T: AmoInt + From<u8>>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        pe: usize,
    ) -> Result<()> {
        self.int_rmw(t, index, IntOp::Add, T::from(1), pe)
    }

    /// [`Pgas::atomic_inc`] that returns the old value.
    pub fn atomic_fetch_inc<T: AmoInt + From<u8>>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        pe: usize,
    ) -> Result<T> {
        self.int_fetch_rmw(t, index, IntOp::Add, T::from(1), pe)
    }

    /// Atomically ands `value` into `t[index]` on PE `pe`.
    pub fn atomic_and<T: AmoInt>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        value: T,
        pe: usize,
    ) -> Result<()> {
        self.int_rmw(t, index, IntOp::And, value, pe)
    }

    /// [`Pgas::atomic_and`] that returns the old value.
    pub fn atomic_fetch_and<T: AmoInt>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        value: T,
        pe: usize,
    ) -> Result<T> {
        self.int_fetch_rmw(t, index, IntOp::And, value, pe)
    }

    /// Atomically ors `value` into `t[index]` on PE `pe`.
    pub fn atomic_or<T: AmoInt>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        value: T,
        pe: usize,
    ) -> Result<()> {
        self.int_rmw(t, index, IntOp::Or, value, pe)
    }

    /// [`Pgas::atomic_or`] that returns the old value.
    pub fn atomic_fetch_or<T: AmoInt>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        value: T,
        pe: usize,
    ) -> Result<T> {
        self.int_fetch_rmw(t, index, IntOp::Or, value, pe)
    }

    /// Atomically xors `value` into `t[index]` on PE `pe`.
    pub fn atomic_xor<T: AmoInt>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        value: T,
        pe: usize,
    ) -> Result<()> {
        self.int_rmw(t, index, IntOp::Xor, value, pe)
    }

    /// [`Pgas::atomic_xor`] that returns the old value.
    pub fn atomic_fetch_xor<T: AmoInt>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        value: T,
        pe: usize,
    ) -> Result<T> {
        self.int_fetch_rmw(t, index, IntOp::Xor, value, pe)
    }

    fn int_rmw<T: AmoInt>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        op: IntOp,
        value: T,
        pe: usize,
    ) -> Result<()> {
        self.amo_complete(t, index, pe, |nv, dst, pe| unsafe {
            T::rmw(nv, op, dst, value, pe)
        })
    }

    fn int_fetch_rmw<T: AmoInt>(
        &self,
        t: &impl SymRegion<T>,
        index: usize,
        op: IntOp,
        value: T,
        pe: usize,
    ) -> Result<T> {
        self.amo(t, index, pe, |nv, dst, pe| unsafe {
            T::fetch_rmw(nv, op, dst, value, pe)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Region(u64, usize);
    impl SymRegion<u32> for Region {
        fn as_device_ptr(&self) -> u64 {
            self.0
        }
        fn len(&self) -> usize {
            self.1
        }
    }

    #[test]
    fn elements_are_checked_and_offset_by_their_size() {
        let r = Region(0x1000, 4);
        assert_eq!(element(&r, 3).unwrap() as u64, 0x100c);
        let e = element(&r, 4).unwrap_err().to_string();
        assert!(e.contains("4..5") && e.contains("length 4"), "{e}");
    }
}
