//! Host atomics on symmetric memory: `pgas.atomic_fetch_add(&t, i, v, pe)` and the rest.
//!
//! NVSHMEM 3.4.5's host library exports `nvshmem_<type>_atomic_<op>`, but none of them is
//! implemented: each prints "not implemented" and returns 0 (docs/runtime.md). So pgas runs every host
//! AMO as a one-thread kernel of NVSHMEM's *device* API on the context's stream, then waits for
//! it: the AMO is ordered after the stream's earlier work, and done at the target when the call
//! returns (the non-fetching ones end with `nvshmem_quiet`). Each (operation, type) is one small
//! point-to-point kernel, compiled at its first use and kept in the kernel cache.
//!
//! The fixed-width integers have every operation; `f32`/`f64` have fetch, set and swap, as
//! NVSHMEM's device API. `i64` adds go through NVSHMEM's `uint64` ones (NVSHMEM 3.4.5 has no
//! `int64` add; two's-complement addition is the same).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

use super::args::{KernelArgs, KernelScalar};
use super::config::LaunchConfig;
use super::raw::RawKernel;
use crate::context::memory::SymRegion;
use crate::context::pgas::Pgas;
use crate::error::{Error, Result};

mod sealed {
    pub trait Sealed {}
}

/// Element types with host fetch, set and swap: `i32`, `i64`, `u32`, `u64`, `f32`, `f64`.
pub trait AmoElem:
    DeviceRepr + ValidAsZeroBits + KernelScalar + Copy + Default + Unpin + sealed::Sealed
{
    #[doc(hidden)]
    /// NVSHMEM's name of the type (`int32`, `double`, ...).
    const NVSHMEM: &'static str;
    #[doc(hidden)]
    /// Its C type.
    const C: &'static str;
}

/// Integer element types with every host AMO: `i32`, `i64`, `u32`, `u64`.
pub trait AmoInt: AmoElem {
    #[doc(hidden)]
    /// The NVSHMEM type (and its C type) whose add this type's add uses.
    const ADD_AS: (&'static str, &'static str);
}

macro_rules! amo_types {
    ($($t:ty => $name:literal, $c:literal $(, add as $an:literal $ac:literal)?);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl AmoElem for $t {
            const NVSHMEM: &'static str = $name;
            const C: &'static str = $c;
        }
        $(impl AmoInt for $t {
            const ADD_AS: (&'static str, &'static str) = ($an, $ac);
        })?
    )*};
}

amo_types! {
    i32 => "int32", "int32_t", add as "int32" "int32_t";
    i64 => "int64", "int64_t", add as "uint64" "uint64_t";
    u32 => "uint32", "uint32_t", add as "uint32" "uint32_t";
    u64 => "uint64", "uint64_t", add as "uint64" "uint64_t";
    f32 => "float", "float";
    f64 => "double", "double";
}

/// One host AMO.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    Fetch,
    Set,
    Swap,
    CompareSwap,
    /// A read-modify-write, fetching the old value or not.
    Rmw(Rmw, bool),
}

/// The read-modify-write AMOs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Rmw {
    Add,
    And,
    Or,
    Xor,
}

impl Rmw {
    /// NVSHMEM's name of the operation (`nvshmem_<type>_atomic_<name>`).
    fn name(self) -> &'static str {
        match self {
            Rmw::Add => "add",
            Rmw::And => "and",
            Rmw::Or => "or",
            Rmw::Xor => "xor",
        }
    }
}

impl Op {
    fn name(self) -> String {
        match self {
            Op::Fetch => "fetch".into(),
            Op::Set => "set".into(),
            Op::Swap => "swap".into(),
            Op::CompareSwap => "compare_swap".into(),
            Op::Rmw(op, true) => format!("fetch_{}", op.name()),
            Op::Rmw(op, false) => op.name().into(),
        }
    }

    /// The kernel body for element type (`t`, `c`); `add_as` is the type an add goes through.
    fn body(self, t: &str, c: &str, add_as: (&str, &str)) -> String {
        let (at, ac) = match self {
            Op::Rmw(Rmw::Add, _) => add_as,
            _ => (t, c),
        };
        let call = |f: &str, args: &str| format!("nvshmem_{at}_atomic_{f}(({ac} *)dst, {args}pe)");
        match self {
            Op::Fetch => format!("out[0] = {};", call("fetch", "")),
            Op::Set => format!("{}; nvshmem_quiet();", call("set", "a, ")),
            // NVSHMEM 3.4.5's double swap returns the old bits converted as an integer; the
            // prelude's `pgas_double_atomic_swap` swaps them as a uint64 (codegen's prelude.rs).
            Op::Swap if t == "double" => {
                "out[0] = pgas_double_atomic_swap((double *)dst, a, pe);".into()
            }
            Op::Swap => format!("out[0] = {};", call("swap", "a, ")),
            Op::CompareSwap => format!("out[0] = {};", call("compare_swap", "a, b, ")),
            Op::Rmw(op, true) => format!(
                "out[0] = ({c}){};",
                call(&format!("fetch_{}", op.name()), &format!("({ac})a, "))
            ),
            Op::Rmw(op, false) => format!(
                "{}; nvshmem_quiet();",
                call(op.name(), &format!("({ac})a, "))
            ),
        }
    }
}

/// The kernel of `op` on `T`: `(dst address, a, b, pe, out)`.
fn kernel<T: AmoElem>(op: Op, add_as: (&'static str, &'static str)) -> Arc<RawKernel> {
    type Kernels = HashMap<(Op, &'static str), Arc<RawKernel>>;
    static KERNELS: Mutex<Option<Kernels>> = Mutex::new(None);
    let mut map = KERNELS.lock().unwrap_or_else(|e| e.into_inner());
    map.get_or_insert_with(HashMap::new)
        .entry((op, T::NVSHMEM))
        .or_insert_with(|| {
            let name = format!("pgas_host_amo_{}_{}", op.name(), T::NVSHMEM);
            let c = T::C;
            let source = format!(
                "extern \"C\" __global__ void {name}(unsigned long long dst, {c} a, {c} b, int pe, \
                 {c} *out, unsigned long long out_len) {{\n    {}\n}}\n",
                op.body(T::NVSHMEM, c, add_as)
            );
            Arc::new(RawKernel::point_to_point(&source, &name))
        })
        .clone()
}

/// A target element: the symmetric address of `t[index]`, checked.
fn element<T>(t: &impl SymRegion<T>, index: usize) -> Result<u64> {
    if index >= t.len() {
        return Err(Error::OutOfRange {
            start: index,
            end: index + 1,
            len: t.len(),
        });
    }
    Ok(t.as_device_ptr() + (index * std::mem::size_of::<T>()) as u64)
}

impl Pgas {
    /// Runs `op` on element `index` of `t` on PE `pe` with operands `a`, `b`; returns what the
    /// kernel wrote (the old value for the fetching ones).
    fn amo<T: AmoElem>(
        &self, op: Op, add_as: (&'static str, &'static str), t: &impl SymRegion<T>, index: usize,
        pe: usize, (a, b): (T, T),
    ) -> Result<T> {
        let pe = self.check_pe(pe)?;
        self.check_region("the atomic's target", t)?;
        let dst = element(t, index)?;
        let k = kernel::<T>(op, add_as);
        let stream = self.stream();
        let mut out = stream.alloc_zeros::<T>(1)?;
        {
            let mut args = KernelArgs::new();
            args.push_scalar(dst)
                .push_scalar(a)
                .push_scalar(b)
                .push_scalar(pe)
                .push_local_mut(&mut out);
            // SAFETY: the arguments are the kernel's parameters, in order; `dst` is a checked
            // element of a symmetric region and `pe` a PE of the job.
            unsafe { k.launch(self, LaunchConfig::blocks(1, 1), &mut args)? };
        }
        // The copy waits for the kernel: the AMO is complete (and fetched) when it returns.
        let got = stream.clone_dtoh(&out)?;
        Ok(got[0])
    }

    /// Atomically reads `t[index]` on PE `pe` (`nvshmem_<type>_atomic_fetch`).
    pub fn atomic_fetch<T: AmoElem>(
        &self, t: &impl SymRegion<T>, index: usize, pe: usize,
    ) -> Result<T> {
        let z = T::default();
        self.amo(Op::Fetch, ("", ""), t, index, pe, (z, z))
    }

    /// Atomically writes `value` to `t[index]` on PE `pe`.
    pub fn atomic_set<T: AmoElem>(
        &self, t: &impl SymRegion<T>, index: usize, value: T, pe: usize,
    ) -> Result<()> {
        self.amo(Op::Set, ("", ""), t, index, pe, (value, value))
            .map(|_| ())
    }

    /// Atomically writes `value` to `t[index]` on PE `pe` and returns the old value.
    pub fn atomic_swap<T: AmoElem>(
        &self, t: &impl SymRegion<T>, index: usize, value: T, pe: usize,
    ) -> Result<T> {
        self.amo(Op::Swap, ("", ""), t, index, pe, (value, value))
    }

    /// Writes `value` to `t[index]` on PE `pe` if it equals `cond`; returns the old value either
    /// way.
    pub fn atomic_compare_swap<T: AmoInt>(
        &self, t: &impl SymRegion<T>, index: usize, cond: T, value: T, pe: usize,
    ) -> Result<T> {
        self.amo(Op::CompareSwap, T::ADD_AS, t, index, pe, (cond, value))
    }

    /// Atomically adds `value` to `t[index]` on PE `pe` (wrapping).
    pub fn atomic_add<T: AmoInt>(
        &self, t: &impl SymRegion<T>, index: usize, value: T, pe: usize,
    ) -> Result<()> {
        self.rmw(t, index, Rmw::Add, false, value, pe).map(|_| ())
    }

    /// [`Pgas::atomic_add`] that returns the old value.
    pub fn atomic_fetch_add<T: AmoInt>(
        &self, t: &impl SymRegion<T>, index: usize, value: T, pe: usize,
    ) -> Result<T> {
        self.rmw(t, index, Rmw::Add, true, value, pe)
    }

    /// Atomically adds 1 to `t[index]` on PE `pe`.
    pub fn atomic_inc<T: AmoInt + From<u8>>(
        &self, t: &impl SymRegion<T>, index: usize, pe: usize,
    ) -> Result<()> {
        self.atomic_add(t, index, T::from(1), pe)
    }

    /// [`Pgas::atomic_inc`] that returns the old value.
    pub fn atomic_fetch_inc<T: AmoInt + From<u8>>(
        &self, t: &impl SymRegion<T>, index: usize, pe: usize,
    ) -> Result<T> {
        self.atomic_fetch_add(t, index, T::from(1), pe)
    }

    /// Atomically ands `value` into `t[index]` on PE `pe`.
    pub fn atomic_and<T: AmoInt>(
        &self, t: &impl SymRegion<T>, index: usize, value: T, pe: usize,
    ) -> Result<()> {
        self.rmw(t, index, Rmw::And, false, value, pe).map(|_| ())
    }

    /// [`Pgas::atomic_and`] that returns the old value.
    pub fn atomic_fetch_and<T: AmoInt>(
        &self, t: &impl SymRegion<T>, index: usize, value: T, pe: usize,
    ) -> Result<T> {
        self.rmw(t, index, Rmw::And, true, value, pe)
    }

    /// Atomically ors `value` into `t[index]` on PE `pe`.
    pub fn atomic_or<T: AmoInt>(
        &self, t: &impl SymRegion<T>, index: usize, value: T, pe: usize,
    ) -> Result<()> {
        self.rmw(t, index, Rmw::Or, false, value, pe).map(|_| ())
    }

    /// [`Pgas::atomic_or`] that returns the old value.
    pub fn atomic_fetch_or<T: AmoInt>(
        &self, t: &impl SymRegion<T>, index: usize, value: T, pe: usize,
    ) -> Result<T> {
        self.rmw(t, index, Rmw::Or, true, value, pe)
    }

    /// Atomically xors `value` into `t[index]` on PE `pe`.
    pub fn atomic_xor<T: AmoInt>(
        &self, t: &impl SymRegion<T>, index: usize, value: T, pe: usize,
    ) -> Result<()> {
        self.rmw(t, index, Rmw::Xor, false, value, pe).map(|_| ())
    }

    /// [`Pgas::atomic_xor`] that returns the old value.
    pub fn atomic_fetch_xor<T: AmoInt>(
        &self, t: &impl SymRegion<T>, index: usize, value: T, pe: usize,
    ) -> Result<T> {
        self.rmw(t, index, Rmw::Xor, true, value, pe)
    }

    fn rmw<T: AmoInt>(
        &self, t: &impl SymRegion<T>, index: usize, op: Rmw, fetch: bool, value: T, pe: usize,
    ) -> Result<T> {
        self.amo(Op::Rmw(op, fetch), T::ADD_AS, t, index, pe, (value, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Region(u64, usize);
    // SAFETY: only `element`'s address arithmetic sees it; nothing dereferences it.
    unsafe impl SymRegion<u32> for Region {
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
        assert_eq!(element(&r, 3).unwrap(), 0x100c);
        let e = element(&r, 4).unwrap_err().to_string();
        assert!(e.contains("4..5") && e.contains("length 4"), "{e}");
    }

    #[test]
    fn each_operation_calls_nvshmems_device_amo() {
        let ia = <i64 as AmoInt>::ADD_AS;
        assert_eq!(
            Op::Rmw(Rmw::Add, true).body("int64", "int64_t", ia),
            "out[0] = (int64_t)nvshmem_uint64_atomic_fetch_add((uint64_t *)dst, (uint64_t)a, pe);"
        );
        assert_eq!(
            Op::Rmw(Rmw::Xor, false).body("int64", "int64_t", ia),
            "nvshmem_int64_atomic_xor((int64_t *)dst, (int64_t)a, pe); nvshmem_quiet();"
        );
        assert_eq!(
            Op::CompareSwap.body("uint32", "uint32_t", ("uint32", "uint32_t")),
            "out[0] = nvshmem_uint32_atomic_compare_swap((uint32_t *)dst, a, b, pe);"
        );
        assert_eq!(
            Op::Set.body("double", "double", ("", "")),
            "nvshmem_double_atomic_set((double *)dst, a, pe); nvshmem_quiet();"
        );
        // Not NVSHMEM's double swap, which converts the old bits to a number (issue 23).
        assert_eq!(
            Op::Swap.body("double", "double", ("", "")),
            "out[0] = pgas_double_atomic_swap((double *)dst, a, pe);"
        );
        assert_eq!(
            Op::Swap.body("float", "float", ("", "")),
            "out[0] = nvshmem_float_atomic_swap((float *)dst, a, pe);"
        );
    }
}

#[cfg(test)]
mod nvrtc_tests {
    use super::*;

    /// Every host AMO kernel (operation x type), compiled by NVRTC as the JIT would (one program
    /// here, so CI pays the headers once): the device API pgas calls exists for each.
    #[test]
    fn every_host_amo_kernel_compiles() {
        let tc = crate::jit::Toolchain::discover()
            .unwrap_or_else(|e| panic!("set PGAS_CUDA_HOME / PGAS_NVSHMEM_HOME: {e}"));
        fn all<T: AmoElem>(ops: &[Op], add_as: (&'static str, &'static str), out: &mut String) {
            for &op in ops {
                let k = kernel::<T>(op, add_as);
                let body = k.source().strip_prefix(pgas_codegen::PRELUDE_P2P).unwrap();
                out.push_str(body);
            }
        }
        let basic = [Op::Fetch, Op::Set, Op::Swap];
        let mut ints = basic.to_vec();
        ints.push(Op::CompareSwap);
        for op in [Rmw::Add, Rmw::And, Rmw::Or, Rmw::Xor] {
            ints.extend([Op::Rmw(op, false), Op::Rmw(op, true)]);
        }
        let mut src = String::from(pgas_codegen::PRELUDE_P2P);
        all::<i32>(&ints, i32::ADD_AS, &mut src);
        all::<i64>(&ints, i64::ADD_AS, &mut src);
        all::<u32>(&ints, u32::ADD_AS, &mut src);
        all::<u64>(&ints, u64::ADD_AS, &mut src);
        all::<f32>(&basic, ("", ""), &mut src);
        all::<f64>(&basic, ("", ""), &mut src);
        let out = tc
            .compile_cubin(&src, "pgas_host_amos", (9, 0))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.warnings().count(), 0, "{}", out.log);
    }
}
