//! Host-side collectives on a stream (`nvshmemx_<type>_<coll>_on_stream`), grouped as in the
//! NVSHMEM specification: broadcast, fcollect, alltoall, reductions and reduce-scatter.
//!
//! Every PE of the team calls them with the same arguments; they are ordered on
//! [`Pgas::stream`] and do not wait on the host (`to_vec`, which uses the same stream, sees
//! the result; so does anything after [`Pgas::barrier_all`]). Each has an `_on` form that takes
//! a stream of this context instead (`broadcast_on(&stream, ..)`), as a kernel's `launch_on`
//! does; a stream of another GPU is an `Err` naming the fix.

use cudarc::driver::sys::CUstream;
use cudarc::driver::CudaStream;

use super::memory::SymRegion;
use super::pgas::Pgas;
use super::team::Team;
use crate::error::{Error, Result};
use crate::ffi::NvshmemHost;
use crate::nvshmem::Nvshmem;

/// A reduction operator. Its discriminant is its code, what a kernel's
/// `#[comptime] op: ReduceOp` carries (`pgas_codegen`'s `EnumTy::ReduceOp` lists them in this
/// order; `tools/ui/tests/ui/pass/generic_launchers.rs` checks the two agree).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// `+`
    Sum = 0,
    /// `*`
    Prod = 1,
    /// minimum
    Min = 2,
    /// maximum
    Max = 3,
    /// bitwise and (integers only)
    And = 4,
    /// bitwise or (integers only)
    Or = 5,
    /// bitwise xor (integers only)
    Xor = 6,
}

/// Element types NVSHMEM has typed collectives for: `f32`, `f64`, `f16`, `bf16` and the 8- to
/// 64-bit integers. Sealed: the set is NVSHMEM's.
pub trait CollectiveElem: cudarc::driver::DeviceRepr + private::Sealed + Sized {
    #[doc(hidden)]
    unsafe fn broadcast(
        h: &NvshmemHost, t: i32, d: *mut Self, s: *const Self, n: usize, root: i32, st: CUstream,
    ) -> i32;
    #[doc(hidden)]
    unsafe fn fcollect(
        h: &NvshmemHost, t: i32, d: *mut Self, s: *const Self, n: usize, st: CUstream,
    ) -> i32;
    #[doc(hidden)]
    unsafe fn alltoall(
        h: &NvshmemHost, t: i32, d: *mut Self, s: *const Self, n: usize, st: CUstream,
    ) -> i32;
    /// `None` when NVSHMEM has no such reduction for the type (bitwise ops on floats).
    #[doc(hidden)]
    unsafe fn reduce(
        h: &NvshmemHost, op: ReduceOp, t: i32, d: *mut Self, s: *const Self, n: usize, st: CUstream,
    ) -> Option<i32>;
    /// As `reduce`, for the reduce-scatter (`n`: elements of `d`, the block of each PE).
    #[doc(hidden)]
    unsafe fn reduce_scatter(
        h: &NvshmemHost, op: ReduceOp, t: i32, d: *mut Self, s: *const Self, n: usize, st: CUstream,
    ) -> Option<i32>;
}

/// The shape of `CollectiveElem::{fcollect, alltoall}`.
type Exchange<T> = unsafe fn(&NvshmemHost, i32, *mut T, *const T, usize, CUstream) -> i32;

mod private {
    pub trait Sealed {}
}

// A call of 0 elements does nothing and returns 0 without calling NVSHMEM: NVSHMEM 3.4.5's
// on-stream broadcast of 0 elements launches an empty grid, fails with "invalid argument" and
// ends the process (`broadcast.cu:38`, found by the GPU suite's differential test).
macro_rules! elem {
    ($t:ty, $c:ident: $bc:ident, $fc:ident, $a2a:ident; $($op:ident => $red:ident / $rs:ident),*) => {
        impl private::Sealed for $t {}
        impl CollectiveElem for $t {
            unsafe fn broadcast(h: &NvshmemHost, t: i32, d: *mut Self, s: *const Self, n: usize, root: i32, st: CUstream) -> i32 {
                // SAFETY: the caller's contract (`Pgas::broadcast` checked both regions and the
                // team); `$bc` is this element type's entry point of the loaded library.
                if n == 0 { 0 } else { unsafe { h.$bc(t, d, s, n, root, st) } }
            }
            unsafe fn fcollect(h: &NvshmemHost, t: i32, d: *mut Self, s: *const Self, n: usize, st: CUstream) -> i32 {
                // SAFETY: the caller's contract (`Pgas::fcollect` checked both regions).
                if n == 0 { 0 } else { unsafe { h.$fc(t, d, s, n, st) } }
            }
            unsafe fn alltoall(h: &NvshmemHost, t: i32, d: *mut Self, s: *const Self, n: usize, st: CUstream) -> i32 {
                // SAFETY: the caller's contract (`Pgas::alltoall` checked both regions).
                if n == 0 { 0 } else { unsafe { h.$a2a(t, d, s, n, st) } }
            }
            unsafe fn reduce(h: &NvshmemHost, op: ReduceOp, t: i32, d: *mut Self, s: *const Self, n: usize, st: CUstream) -> Option<i32> {
                match op {
                    // SAFETY: the caller's contract (`Pgas::reduce` checked both regions).
                    $(ReduceOp::$op => Some(if n == 0 { 0 } else { unsafe { h.$red(t, d, s, n, st) } }),)*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
            unsafe fn reduce_scatter(h: &NvshmemHost, op: ReduceOp, t: i32, d: *mut Self, s: *const Self, n: usize, st: CUstream) -> Option<i32> {
                match op {
                    // SAFETY: the caller's contract (`Pgas::reduce_scatter_on` checked both
                    // regions: `s` holds `n` elements per PE of the team).
                    $(ReduceOp::$op => Some(if n == 0 { 0 } else { unsafe { h.$rs(t, d, s, n, st) } }),)*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        }
    };
}

elem!(f32, float: nvshmemx_float_broadcast_on_stream, nvshmemx_float_fcollect_on_stream, nvshmemx_float_alltoall_on_stream; Sum => nvshmemx_float_sum_reduce_on_stream / nvshmemx_float_sum_reducescatter_on_stream, Prod => nvshmemx_float_prod_reduce_on_stream / nvshmemx_float_prod_reducescatter_on_stream, Min => nvshmemx_float_min_reduce_on_stream / nvshmemx_float_min_reducescatter_on_stream, Max => nvshmemx_float_max_reduce_on_stream / nvshmemx_float_max_reducescatter_on_stream);
elem!(f64, double: nvshmemx_double_broadcast_on_stream, nvshmemx_double_fcollect_on_stream, nvshmemx_double_alltoall_on_stream; Sum => nvshmemx_double_sum_reduce_on_stream / nvshmemx_double_sum_reducescatter_on_stream, Prod => nvshmemx_double_prod_reduce_on_stream / nvshmemx_double_prod_reducescatter_on_stream, Min => nvshmemx_double_min_reduce_on_stream / nvshmemx_double_min_reducescatter_on_stream, Max => nvshmemx_double_max_reduce_on_stream / nvshmemx_double_max_reducescatter_on_stream);
elem!(half::f16, half: nvshmemx_half_broadcast_on_stream, nvshmemx_half_fcollect_on_stream, nvshmemx_half_alltoall_on_stream; Sum => nvshmemx_half_sum_reduce_on_stream / nvshmemx_half_sum_reducescatter_on_stream, Prod => nvshmemx_half_prod_reduce_on_stream / nvshmemx_half_prod_reducescatter_on_stream, Min => nvshmemx_half_min_reduce_on_stream / nvshmemx_half_min_reducescatter_on_stream, Max => nvshmemx_half_max_reduce_on_stream / nvshmemx_half_max_reducescatter_on_stream);
elem!(half::bf16, bfloat16: nvshmemx_bfloat16_broadcast_on_stream, nvshmemx_bfloat16_fcollect_on_stream, nvshmemx_bfloat16_alltoall_on_stream; Sum => nvshmemx_bfloat16_sum_reduce_on_stream / nvshmemx_bfloat16_sum_reducescatter_on_stream, Prod => nvshmemx_bfloat16_prod_reduce_on_stream / nvshmemx_bfloat16_prod_reducescatter_on_stream, Min => nvshmemx_bfloat16_min_reduce_on_stream / nvshmemx_bfloat16_min_reducescatter_on_stream, Max => nvshmemx_bfloat16_max_reduce_on_stream / nvshmemx_bfloat16_max_reducescatter_on_stream);
elem!(i8, int8: nvshmemx_int8_broadcast_on_stream, nvshmemx_int8_fcollect_on_stream, nvshmemx_int8_alltoall_on_stream; Sum => nvshmemx_int8_sum_reduce_on_stream / nvshmemx_int8_sum_reducescatter_on_stream, Prod => nvshmemx_int8_prod_reduce_on_stream / nvshmemx_int8_prod_reducescatter_on_stream, Min => nvshmemx_int8_min_reduce_on_stream / nvshmemx_int8_min_reducescatter_on_stream, Max => nvshmemx_int8_max_reduce_on_stream / nvshmemx_int8_max_reducescatter_on_stream, And => nvshmemx_int8_and_reduce_on_stream / nvshmemx_int8_and_reducescatter_on_stream, Or => nvshmemx_int8_or_reduce_on_stream / nvshmemx_int8_or_reducescatter_on_stream, Xor => nvshmemx_int8_xor_reduce_on_stream / nvshmemx_int8_xor_reducescatter_on_stream);
elem!(i16, int16: nvshmemx_int16_broadcast_on_stream, nvshmemx_int16_fcollect_on_stream, nvshmemx_int16_alltoall_on_stream; Sum => nvshmemx_int16_sum_reduce_on_stream / nvshmemx_int16_sum_reducescatter_on_stream, Prod => nvshmemx_int16_prod_reduce_on_stream / nvshmemx_int16_prod_reducescatter_on_stream, Min => nvshmemx_int16_min_reduce_on_stream / nvshmemx_int16_min_reducescatter_on_stream, Max => nvshmemx_int16_max_reduce_on_stream / nvshmemx_int16_max_reducescatter_on_stream, And => nvshmemx_int16_and_reduce_on_stream / nvshmemx_int16_and_reducescatter_on_stream, Or => nvshmemx_int16_or_reduce_on_stream / nvshmemx_int16_or_reducescatter_on_stream, Xor => nvshmemx_int16_xor_reduce_on_stream / nvshmemx_int16_xor_reducescatter_on_stream);
elem!(i32, int32: nvshmemx_int32_broadcast_on_stream, nvshmemx_int32_fcollect_on_stream, nvshmemx_int32_alltoall_on_stream; Sum => nvshmemx_int32_sum_reduce_on_stream / nvshmemx_int32_sum_reducescatter_on_stream, Prod => nvshmemx_int32_prod_reduce_on_stream / nvshmemx_int32_prod_reducescatter_on_stream, Min => nvshmemx_int32_min_reduce_on_stream / nvshmemx_int32_min_reducescatter_on_stream, Max => nvshmemx_int32_max_reduce_on_stream / nvshmemx_int32_max_reducescatter_on_stream, And => nvshmemx_int32_and_reduce_on_stream / nvshmemx_int32_and_reducescatter_on_stream, Or => nvshmemx_int32_or_reduce_on_stream / nvshmemx_int32_or_reducescatter_on_stream, Xor => nvshmemx_int32_xor_reduce_on_stream / nvshmemx_int32_xor_reducescatter_on_stream);
elem!(i64, int64: nvshmemx_int64_broadcast_on_stream, nvshmemx_int64_fcollect_on_stream, nvshmemx_int64_alltoall_on_stream; Sum => nvshmemx_int64_sum_reduce_on_stream / nvshmemx_int64_sum_reducescatter_on_stream, Prod => nvshmemx_int64_prod_reduce_on_stream / nvshmemx_int64_prod_reducescatter_on_stream, Min => nvshmemx_int64_min_reduce_on_stream / nvshmemx_int64_min_reducescatter_on_stream, Max => nvshmemx_int64_max_reduce_on_stream / nvshmemx_int64_max_reducescatter_on_stream, And => nvshmemx_int64_and_reduce_on_stream / nvshmemx_int64_and_reducescatter_on_stream, Or => nvshmemx_int64_or_reduce_on_stream / nvshmemx_int64_or_reducescatter_on_stream, Xor => nvshmemx_int64_xor_reduce_on_stream / nvshmemx_int64_xor_reducescatter_on_stream);
elem!(u8, uint8: nvshmemx_uint8_broadcast_on_stream, nvshmemx_uint8_fcollect_on_stream, nvshmemx_uint8_alltoall_on_stream; Sum => nvshmemx_uint8_sum_reduce_on_stream / nvshmemx_uint8_sum_reducescatter_on_stream, Prod => nvshmemx_uint8_prod_reduce_on_stream / nvshmemx_uint8_prod_reducescatter_on_stream, Min => nvshmemx_uint8_min_reduce_on_stream / nvshmemx_uint8_min_reducescatter_on_stream, Max => nvshmemx_uint8_max_reduce_on_stream / nvshmemx_uint8_max_reducescatter_on_stream, And => nvshmemx_uint8_and_reduce_on_stream / nvshmemx_uint8_and_reducescatter_on_stream, Or => nvshmemx_uint8_or_reduce_on_stream / nvshmemx_uint8_or_reducescatter_on_stream, Xor => nvshmemx_uint8_xor_reduce_on_stream / nvshmemx_uint8_xor_reducescatter_on_stream);
elem!(u16, uint16: nvshmemx_uint16_broadcast_on_stream, nvshmemx_uint16_fcollect_on_stream, nvshmemx_uint16_alltoall_on_stream; Sum => nvshmemx_uint16_sum_reduce_on_stream / nvshmemx_uint16_sum_reducescatter_on_stream, Prod => nvshmemx_uint16_prod_reduce_on_stream / nvshmemx_uint16_prod_reducescatter_on_stream, Min => nvshmemx_uint16_min_reduce_on_stream / nvshmemx_uint16_min_reducescatter_on_stream, Max => nvshmemx_uint16_max_reduce_on_stream / nvshmemx_uint16_max_reducescatter_on_stream, And => nvshmemx_uint16_and_reduce_on_stream / nvshmemx_uint16_and_reducescatter_on_stream, Or => nvshmemx_uint16_or_reduce_on_stream / nvshmemx_uint16_or_reducescatter_on_stream, Xor => nvshmemx_uint16_xor_reduce_on_stream / nvshmemx_uint16_xor_reducescatter_on_stream);
elem!(u32, uint32: nvshmemx_uint32_broadcast_on_stream, nvshmemx_uint32_fcollect_on_stream, nvshmemx_uint32_alltoall_on_stream; Sum => nvshmemx_uint32_sum_reduce_on_stream / nvshmemx_uint32_sum_reducescatter_on_stream, Prod => nvshmemx_uint32_prod_reduce_on_stream / nvshmemx_uint32_prod_reducescatter_on_stream, Min => nvshmemx_uint32_min_reduce_on_stream / nvshmemx_uint32_min_reducescatter_on_stream, Max => nvshmemx_uint32_max_reduce_on_stream / nvshmemx_uint32_max_reducescatter_on_stream, And => nvshmemx_uint32_and_reduce_on_stream / nvshmemx_uint32_and_reducescatter_on_stream, Or => nvshmemx_uint32_or_reduce_on_stream / nvshmemx_uint32_or_reducescatter_on_stream, Xor => nvshmemx_uint32_xor_reduce_on_stream / nvshmemx_uint32_xor_reducescatter_on_stream);
elem!(u64, uint64: nvshmemx_uint64_broadcast_on_stream, nvshmemx_uint64_fcollect_on_stream, nvshmemx_uint64_alltoall_on_stream; Sum => nvshmemx_uint64_sum_reduce_on_stream / nvshmemx_uint64_sum_reducescatter_on_stream, Prod => nvshmemx_uint64_prod_reduce_on_stream / nvshmemx_uint64_prod_reducescatter_on_stream, Min => nvshmemx_uint64_min_reduce_on_stream / nvshmemx_uint64_min_reducescatter_on_stream, Max => nvshmemx_uint64_max_reduce_on_stream / nvshmemx_uint64_max_reducescatter_on_stream, And => nvshmemx_uint64_and_reduce_on_stream / nvshmemx_uint64_and_reducescatter_on_stream, Or => nvshmemx_uint64_or_reduce_on_stream / nvshmemx_uint64_or_reducescatter_on_stream, Xor => nvshmemx_uint64_xor_reduce_on_stream / nvshmemx_uint64_xor_reducescatter_on_stream);

/// Element counts of a collective, checked before NVSHMEM sees them.
pub(crate) mod shape {
    use crate::error::{Error, Result};

    fn mismatch(what: &'static str, got: usize, expected: usize) -> Error {
        Error::LengthMismatch {
            what,
            got,
            expected,
        }
    }

    /// broadcast / reduce: same length both sides.
    pub(crate) fn same(dst: usize, src: usize) -> Result<usize> {
        if dst == src {
            Ok(src)
        } else {
            Err(mismatch("the destination", dst, src))
        }
    }

    /// fcollect: `dst` holds every PE's `src`.
    pub(crate) fn fcollect(dst: usize, src: usize, n_pes: usize) -> Result<usize> {
        if dst == src * n_pes {
            Ok(src)
        } else {
            Err(mismatch(
                "the destination (source length x team size)",
                dst,
                src * n_pes,
            ))
        }
    }

    /// reduce-scatter: `src` holds one block of `dst`'s length per PE.
    pub(crate) fn reduce_scatter(dst: usize, src: usize, n_pes: usize) -> Result<usize> {
        if src == dst * n_pes {
            Ok(dst)
        } else {
            Err(mismatch(
                "the source (destination length x team size)",
                src,
                dst * n_pes,
            ))
        }
    }

    /// alltoall: both hold one block per PE; returns the block length.
    pub(crate) fn alltoall(dst: usize, src: usize, n_pes: usize) -> Result<usize> {
        same(dst, src)?;
        if n_pes > 0 && src.is_multiple_of(n_pes) {
            Ok(src / n_pes)
        } else {
            Err(mismatch(
                "the source (a multiple of the team size)",
                src,
                (src / n_pes.max(1) + 1) * n_pes,
            ))
        }
    }
}

const HINT: &str = "every PE of the team must call the same collective with the same arguments";

impl Pgas {
    /// A collective's two regions must lie in the symmetric heap: NVSHMEM addresses them on
    /// every PE of the team.
    fn check_regions<T>(&self, dst: &impl SymRegion<T>, src: &impl SymRegion<T>) -> Result<()> {
        self.check_region("the destination", dst)?;
        self.check_region("the source", src)
    }

    /// [`Pgas::check_regions`], and `dst` and `src` apart: NVSHMEM's collectives other than
    /// broadcast read every PE's source while they write the destinations, and in place its
    /// reductions gave some values reduced twice on 4 PEs (NVSHMEM 3.4.5; `docs/runtime.md`), so
    /// an overlap is an `Err` naming the fix rather than a wrong result.
    fn check_collective_regions<T>(
        &self, call: &Call<'_>, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
    ) -> Result<()> {
        self.check_regions(dst, src)?;
        let size = std::mem::size_of::<T>() as u64;
        let span = |r: &dyn SymRegion<T>| {
            let at = r.as_device_ptr();
            at..at + r.len() as u64 * size
        };
        let (d, s) = (span(dst), span(src));
        if d.start < s.end && s.start < d.end {
            let what = if d == s { "in place" } else { "overlapping" };
            return Err(Error::InvalidConfig {
                name: "collective buffers",
                value: format!("{what}: destination {d:#x?}, source {s:#x?}"),
                reason: format!(
                    "{} reads every PE's source while it writes the destinations, so the two \
                     must not share memory (NVSHMEM 3.4.5's reductions in place gave wrong \
                     values on 4 PEs). Fix: pass a separate destination (pgas::coll::Comm's \
                     all_reduce_in_place reduces in place safely)",
                    call.what
                ),
            });
        }
        Ok(())
    }

    /// The team's size, for a live team this PE is a member of.
    fn team_check(&self, team: Team) -> Result<usize> {
        team.check_live(self, "run a collective over it")?;
        match team.n_pes(self)? {
            0 => Err(Error::InvalidConfig {
                name: "team",
                value: format!("{}", team.raw()),
                reason: "not a valid team (this PE was not in the split). Fix: use a team that \
                         split_strided returned as Some on this PE"
                    .to_string(),
            }),
            n => Ok(n),
        }
    }

    /// Copies `src` of PE `root` (numbered in `team`) into `dst` on every PE of the team.
    pub fn broadcast<T: CollectiveElem>(
        &self, team: Team, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, root: usize,
    ) -> Result<()> {
        self.broadcast_on(self.stream(), team, dst, src, root)
    }

    /// [`Pgas::broadcast`] on `stream` (`nvshmemx_<type>_broadcast_on_stream`).
    pub fn broadcast_on<T: CollectiveElem>(
        &self, stream: &CudaStream, team: Team, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
        root: usize,
    ) -> Result<()> {
        let n_pes = self.team_check(team)?;
        if root >= n_pes {
            return Err(Error::InvalidPe { pe: root, n_pes });
        }
        let n = shape::same(dst.len(), src.len())?;
        self.check_regions(dst, src)?;
        self.check_stream(stream)?;
        self.inner.bind()?;
        // SAFETY: both regions lie in the symmetric heap (check_regions) with `n` elements each,
        // `root` is a PE of the team, the stream is this context's and the context is bound to
        // this thread.
        let st = unsafe {
            T::broadcast(
                self.nvshmem().raw(),
                team.raw(),
                dst.as_device_ptr() as *mut T,
                src.as_device_ptr() as *const T,
                n,
                root as i32,
                stream.cu_stream(),
            )
        };
        Nvshmem::check(st, "nvshmemx_<type>_broadcast_on_stream", HINT)
    }

    /// Concatenates every PE's `src` into `dst` (length `src.len() * team size`), in PE order.
    pub fn fcollect<T: CollectiveElem>(
        &self, team: Team, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
    ) -> Result<()> {
        self.fcollect_on(self.stream(), team, dst, src)
    }

    /// [`Pgas::fcollect`] on `stream` (`nvshmemx_<type>_fcollect_on_stream`).
    pub fn fcollect_on<T: CollectiveElem>(
        &self, stream: &CudaStream, team: Team, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
    ) -> Result<()> {
        let n = shape::fcollect(dst.len(), src.len(), self.team_check(team)?)?;
        let call = Call {
            stream,
            team,
            what: "nvshmemx_<type>_fcollect_on_stream",
        };
        self.exchange(call, dst, src, n, T::fcollect)
    }

    /// Block `j` of `src` on PE `i` lands as block `i` of `dst` on PE `j`; both hold one equal
    /// block per PE of the team.
    pub fn alltoall<T: CollectiveElem>(
        &self, team: Team, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
    ) -> Result<()> {
        self.alltoall_on(self.stream(), team, dst, src)
    }

    /// [`Pgas::alltoall`] on `stream` (`nvshmemx_<type>_alltoall_on_stream`).
    pub fn alltoall_on<T: CollectiveElem>(
        &self, stream: &CudaStream, team: Team, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
    ) -> Result<()> {
        let n = shape::alltoall(dst.len(), src.len(), self.team_check(team)?)?;
        let call = Call {
            stream,
            team,
            what: "nvshmemx_<type>_alltoall_on_stream",
        };
        self.exchange(call, dst, src, n, T::alltoall)
    }

    /// `fcollect` and `alltoall` once their shapes are checked: issues `call` with `n` elements
    /// per PE on the call's stream.
    fn exchange<T: CollectiveElem>(
        &self, call: Call<'_>, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, n: usize,
        f: Exchange<T>,
    ) -> Result<()> {
        // The stream first: a stream of another GPU is the more basic mistake.
        self.check_stream(call.stream)?;
        self.check_collective_regions(&call, dst, src)?;
        self.inner.bind()?;
        // SAFETY: both regions are symmetric and hold the `n`-per-PE shape checked by the caller;
        // the stream is this context's.
        let st = unsafe {
            f(
                self.nvshmem().raw(),
                call.team.raw(),
                dst.as_device_ptr() as *mut T,
                src.as_device_ptr() as *const T,
                n,
                call.stream.cu_stream(),
            )
        };
        Nvshmem::check(st, call.what, HINT)
    }

    /// Element-wise reduction of every PE's `src` into `dst` on every PE of the team
    /// (all-reduce). Bitwise operators are for integer types only.
    pub fn reduce<T: CollectiveElem>(
        &self, team: Team, op: ReduceOp, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
    ) -> Result<()> {
        self.reduce_on(self.stream(), team, op, dst, src)
    }

    /// [`Pgas::reduce`] on `stream` (`nvshmemx_<type>_<op>_reduce_on_stream`).
    pub fn reduce_on<T: CollectiveElem>(
        &self, stream: &CudaStream, team: Team, op: ReduceOp, dst: &impl SymRegion<T>,
        src: &impl SymRegion<T>,
    ) -> Result<()> {
        self.team_check(team)?;
        let n = shape::same(dst.len(), src.len())?;
        let call = Call {
            stream,
            team,
            what: "nvshmemx_<type>_<op>_reduce_on_stream",
        };
        self.reduction(call, op, dst, src, n, T::reduce)
    }

    /// Reduce-scatter: `src` holds one block of `dst.len()` elements per PE of the team; block
    /// `i`, reduced element-wise over every PE, lands in `dst` on the team's PE `i`. Bitwise
    /// operators are for integer types only.
    pub fn reduce_scatter<T: CollectiveElem>(
        &self, team: Team, op: ReduceOp, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
    ) -> Result<()> {
        self.reduce_scatter_on(self.stream(), team, op, dst, src)
    }

    /// [`Pgas::reduce_scatter`] on `stream` (`nvshmemx_<type>_<op>_reducescatter_on_stream`).
    pub fn reduce_scatter_on<T: CollectiveElem>(
        &self, stream: &CudaStream, team: Team, op: ReduceOp, dst: &impl SymRegion<T>,
        src: &impl SymRegion<T>,
    ) -> Result<()> {
        let n = shape::reduce_scatter(dst.len(), src.len(), self.team_check(team)?)?;
        let call = Call {
            stream,
            team,
            what: "nvshmemx_<type>_<op>_reducescatter_on_stream",
        };
        self.reduction(call, op, dst, src, n, T::reduce_scatter)
    }

    /// `reduce` and `reduce_scatter` once their shapes are checked (`n`: elements of `dst`).
    fn reduction<T: CollectiveElem>(
        &self, call: Call<'_>, op: ReduceOp, dst: &impl SymRegion<T>, src: &impl SymRegion<T>,
        n: usize, f: Reduction<T>,
    ) -> Result<()> {
        // The stream first: a stream of another GPU is the more basic mistake.
        self.check_stream(call.stream)?;
        self.check_collective_regions(&call, dst, src)?;
        self.inner.bind()?;
        // SAFETY: both regions lie in the symmetric heap (check_regions) in the shape the caller
        // checked for `f`, the stream is this context's and the context is bound to this thread.
        let st = unsafe {
            f(
                self.nvshmem().raw(),
                op,
                call.team.raw(),
                dst.as_device_ptr() as *mut T,
                src.as_device_ptr() as *const T,
                n,
                call.stream.cu_stream(),
            )
        };
        match st {
            Some(st) => Nvshmem::check(st, call.what, HINT),
            None => Err(Error::InvalidConfig {
                name: "reduce operator",
                value: format!("{op:?}"),
                reason: format!(
                    "NVSHMEM has no {op:?} reduction for {}. Fix: use Sum, Prod, Min or Max for \
                     floating-point types; bitwise operators need an integer type",
                    std::any::type_name::<T>()
                ),
            }),
        }
    }
}

/// Where a collective runs and what it is called, for its error.
#[derive(Clone, Copy)]
struct Call<'a> {
    stream: &'a CudaStream,
    team: Team,
    what: &'static str,
}

/// The shape of `CollectiveElem::{reduce, reduce_scatter}`.
type Reduction<T> =
    unsafe fn(&NvshmemHost, ReduceOp, i32, *mut T, *const T, usize, CUstream) -> Option<i32>;

#[cfg(test)]
mod tests {
    use super::shape;

    #[test]
    fn collective_shapes_are_checked() {
        assert_eq!(shape::same(4, 4).unwrap(), 4);
        assert!(shape::same(4, 5).is_err());
        assert_eq!(shape::fcollect(8, 4, 2).unwrap(), 4);
        let e = shape::fcollect(7, 4, 2).unwrap_err().to_string();
        assert!(
            e.contains("7 elements") && e.contains("8 were expected"),
            "{e}"
        );
        assert_eq!(shape::reduce_scatter(4, 8, 2).unwrap(), 4);
        let e = shape::reduce_scatter(4, 4, 2).unwrap_err().to_string();
        assert!(
            e.contains("4 elements") && e.contains("8 were expected"),
            "{e}"
        );
        assert_eq!(shape::alltoall(8, 8, 4).unwrap(), 2);
        assert!(shape::alltoall(6, 6, 4).is_err());
        assert!(shape::alltoall(8, 6, 2).is_err());
    }
}
