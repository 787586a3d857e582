//! The packed arguments of one launch ([`KernelArgs`]), checked against a [`KernelSpec`].
//!
//! The macro-generated launchers are the only intended users of [`KernelArgs`]; the types are
//! public because macro output lives in the user's crate.

use std::ffi::c_void;

use cudarc::driver::{
    sys, CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop,
};

use crate::context::memory::SymRegion;
use crate::context::pgas::Pgas;
use crate::context::team::Team;
use crate::context::tensor_map::{TensorMap, TmaElem};
use crate::error::{Error, Result};
use crate::fp8::{e4m3, e5m2};
use crate::jit::module::Function;
use crate::kernel::{KernelSpec, ParamKind, MAX_COMPTIME};
use crate::launch_cause::LaunchCause;

use super::config::LaunchConfig;
use super::driver::launch_function;

/// Most ABI parameters one launch may pass (a buffer counts two: pointer and length, a tensor
/// map two: descriptor and tile shape).
pub const MAX_PARAMS: usize = 48;
/// 8-byte words of parameter storage: one per ABI parameter, a tensor map's descriptor 16 (at a
/// 64-byte boundary, its alignment).
const MAX_SLOTS: usize = 160;
/// Slots of a tensor map's descriptor (128 bytes).
const MAP_SLOTS: usize = 16;
/// Most local (`CudaSlice`) buffers one launch may pass.
pub const MAX_LOCAL_BUFFERS: usize = 16;

/// A scalar kernel parameter, passed by value as the C type of the same size.
pub trait KernelScalar: Copy {
    /// The Rust type name, as [`ParamKind::Scalar`] spells it.
    const RUST_NAME: &'static str;
    /// The value's bytes, little-endian in the low bytes of a `u64` (how the kernel reads them).
    fn to_slot(self) -> u64;
}

macro_rules! scalar {
    ($($t:ty => |$v:ident| $bits:expr),* $(,)?) => {$(
        impl KernelScalar for $t {
            const RUST_NAME: &'static str = stringify!($t);
            #[inline]
            fn to_slot(self) -> u64 {
                let $v = self;
                $bits
            }
        }
    )*};
}

scalar! {
    bool => |v| v as u64, i8 => |v| v as u8 as u64, i16 => |v| v as u16 as u64,
    i32 => |v| v as u32 as u64, i64 => |v| v as u64, isize => |v| v as u64,
    u8 => |v| v as u64, u16 => |v| v as u64, u32 => |v| v as u64, u64 => |v| v,
    usize => |v| v as u64, f32 => |v| v.to_bits() as u64, f64 => |v| v.to_bits(),
    half::f16 => |v| v.to_bits() as u64, half::bf16 => |v| v.to_bits() as u64,
    e4m3 => |v| v.to_bits() as u64, e5m2 => |v| v.to_bits() as u64,
}

// `stringify!` spells the half types with their path; specs name them as Rust code does.
const fn scalar_name(name: &'static str) -> &'static str {
    match name.as_bytes() {
        b"half::f16" => "f16",
        b"half::bf16" => "bf16",
        _ => name,
    }
}

/// What was pushed for one Rust parameter, to check against the spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pushed {
    Sym,
    Local,
    Scalar(&'static str),
    Team,
    TensorMap(&'static str),
    /// A `&mut TensorMap<T>`, and whether its map was built from a writable tensor.
    TensorMapMut(&'static str, bool),
}

/// A local buffer whose device pointer is taken on the launch stream, so cudarc can order it
/// after earlier work on other streams and record this launch as its last use.
trait LocalRead {
    fn ptr<'s>(&'s self, stream: &'s CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'s>);
    fn owner(&self) -> &CudaContext;
}
trait LocalWrite {
    fn ptr_mut<'s>(&'s mut self, stream: &'s CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'s>);
    fn owner(&self) -> &CudaContext;
}
impl<T> LocalRead for CudaSlice<T> {
    fn ptr<'s>(&'s self, stream: &'s CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'s>) {
        self.device_ptr(stream)
    }
    fn owner(&self) -> &CudaContext {
        self.context()
    }
}
impl<T> LocalWrite for CudaSlice<T> {
    fn ptr_mut<'s>(&'s mut self, stream: &'s CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'s>) {
        self.device_ptr_mut(stream)
    }
    fn owner(&self) -> &CudaContext {
        self.context()
    }
}

enum Local<'a> {
    Read(usize, &'a dyn LocalRead),
    Write(usize, &'a mut dyn LocalWrite),
}

/// The packed arguments of one launch, in the parameter ABI of `docs/internals.md`.
///
/// Fixed inline storage: building and launching allocates nothing. Pushing more than
/// [`MAX_PARAMS`] parameters (or [`MAX_LOCAL_BUFFERS`] local buffers) makes the launch an error.
pub struct KernelArgs<'a> {
    /// The parameters' values, 8-byte words; the kernel reads each ABI parameter from the
    /// address of its first word.
    slots: Slots,
    n_slots: usize,
    /// The first word of each ABI parameter.
    starts: [u8; MAX_PARAMS],
    n_params: usize,
    pushed: [Pushed; MAX_PARAMS],
    n_pushed: usize,
    /// Each pushed symmetric region as (address, elements, element size): a checked launch
    /// refuses one outside the symmetric heap, which a kernel would dereference on every PE.
    syms: [(u64, usize, usize); MAX_PARAMS],
    n_syms: usize,
    /// Each pushed team: a checked launch refuses a destroyed one, whose number the kernel
    /// would hand to NVSHMEM.
    teams: [Team; MAX_PARAMS],
    n_teams: usize,
    locals: [Option<Local<'a>>; MAX_LOCAL_BUFFERS],
    n_locals: usize,
    overflow: bool,
}

/// Word storage aligned like a `CUtensorMap`.
#[repr(C, align(64))]
struct Slots([u64; MAX_SLOTS]);

impl Default for KernelArgs<'_> {
    fn default() -> Self {
        KernelArgs::new()
    }
}

impl<'a> KernelArgs<'a> {
    /// No arguments yet.
    pub fn new() -> KernelArgs<'a> {
        KernelArgs {
            slots: Slots([0; MAX_SLOTS]),
            n_slots: 0,
            starts: [0; MAX_PARAMS],
            n_params: 0,
            pushed: [Pushed::Team; MAX_PARAMS],
            n_pushed: 0,
            syms: [(0, 0, 0); MAX_PARAMS],
            n_syms: 0,
            teams: [Team::WORLD; MAX_PARAMS],
            n_teams: 0,
            locals: [const { None }; MAX_LOCAL_BUFFERS],
            n_locals: 0,
            overflow: false,
        }
    }

    /// One Rust parameter of one-word ABI parameters; returns the first one's slot.
    fn push_param(&mut self, kind: Pushed, words: &[u64]) -> Option<usize> {
        if self.overflow || self.n_params + words.len() > MAX_PARAMS {
            self.overflow = true;
            return None;
        }
        let first = self.n_slots;
        for w in words {
            self.push_abi(&[*w], 1)?;
        }
        self.pushed[self.n_pushed] = kind;
        self.n_pushed += 1;
        Some(first)
    }

    /// One ABI parameter of `words`, starting at a multiple of `align` words.
    fn push_abi(&mut self, words: &[u64], align: usize) -> Option<usize> {
        let first = self.n_slots.next_multiple_of(align);
        if self.overflow || first + words.len() > MAX_SLOTS || self.n_params == MAX_PARAMS {
            self.overflow = true;
            return None;
        }
        self.slots.0[first..first + words.len()].copy_from_slice(words);
        self.n_slots = first + words.len();
        self.starts[self.n_params] = first as u8;
        self.n_params += 1;
        Some(first)
    }

    fn push_local_buf(&mut self, len: usize, local: impl FnOnce(usize) -> Local<'a>) -> &mut Self {
        if self.n_locals == MAX_LOCAL_BUFFERS {
            self.overflow = true;
            return self;
        }
        if let Some(slot) = self.push_param(Pushed::Local, &[0, len as u64]) {
            self.locals[self.n_locals] = Some(local(slot));
            self.n_locals += 1;
        }
        self
    }

    /// A `&SymTensor<T>` (or a view of one): pointer and length.
    pub fn push_sym<T, S: SymRegion<T> + ?Sized>(&mut self, t: &S) -> &mut Self {
        let (ptr, len) = (t.as_device_ptr(), t.len());
        if self.push_param(Pushed::Sym, &[ptr, len as u64]).is_some() {
            // Room: push_param admits at most MAX_PARAMS parameters.
            self.syms[self.n_syms] = (ptr, len, std::mem::size_of::<T>());
            self.n_syms += 1;
        }
        self
    }

    /// `len` elements of `T` of this PE's own device memory at `ptr`, passed for a parameter the
    /// kernel declares symmetric (`&SymTensor<T>`), as pointer and length, and left out of the
    /// symmetric-heap check of a checked launch. For a table the kernel reads only on this PE
    /// whose address must go in as is (a `&CudaSlice` argument makes the launch wait on
    /// cudarc's events, which a CUDA graph capture on another stream refuses).
    ///
    /// # Safety
    /// `ptr` must name `len` elements of `T` on this PE's GPU that stay allocated until the
    /// kernel has finished, and the kernel must access them only on this PE: no RMA, no
    /// `nvshmem_ptr` or peer access through the parameter, since no other PE has the memory.
    pub unsafe fn push_local_as_sym<T>(&mut self, ptr: u64, len: usize) -> &mut Self {
        self.push_param(Pushed::Sym, &[ptr, len as u64]);
        self
    }

    /// A `&mut SymTensor<T>` (or a mutable view of one): pointer and length.
    pub fn push_sym_mut<T, S: SymRegion<T> + ?Sized>(&mut self, t: &mut S) -> &mut Self {
        self.push_sym(&*t)
    }

    /// A `&CudaSlice<T>`: pointer (taken on the launch stream) and length.
    pub fn push_local<T>(&mut self, s: &'a CudaSlice<T>) -> &mut Self {
        self.push_local_buf(s.len(), |slot| Local::Read(slot, s))
    }

    /// A `&mut CudaSlice<T>`: pointer (taken on the launch stream) and length.
    pub fn push_local_mut<T>(&mut self, s: &'a mut CudaSlice<T>) -> &mut Self {
        let len = s.len();
        self.push_local_buf(len, |slot| Local::Write(slot, s))
    }

    /// A scalar by value.
    pub fn push_scalar<T: KernelScalar>(&mut self, v: T) -> &mut Self {
        self.push_param(Pushed::Scalar(scalar_name(T::RUST_NAME)), &[v.to_slot()]);
        self
    }

    /// A team handle, as `int`.
    pub fn push_team(&mut self, team: Team) -> &mut Self {
        if self
            .push_param(Pushed::Team, &[team.raw() as u32 as u64])
            .is_some()
        {
            // Room: push_param admits at most MAX_PARAMS parameters.
            self.teams[self.n_teams] = team;
            self.n_teams += 1;
        }
        self
    }

    /// A `&TensorMap<T>`: its 128-byte descriptor (64-byte aligned), then its tile shape.
    pub fn push_tensor_map<T: TmaElem>(&mut self, map: &TensorMap<'_, T>) -> &mut Self {
        self.push_map(map, Pushed::TensorMap(T::RUST_NAME))
    }

    /// A `&mut TensorMap<T>`, which the kernel writes through (`tma_store_2d`): as
    /// [`Self::push_tensor_map`]; the launch is refused unless the map was built from a
    /// writable tensor.
    pub fn push_tensor_map_mut<T: TmaElem>(&mut self, map: &mut TensorMap<'_, T>) -> &mut Self {
        let writable = map.writable();
        self.push_map(map, Pushed::TensorMapMut(T::RUST_NAME, writable))
    }

    fn push_map<T: TmaElem>(&mut self, map: &TensorMap<'_, T>, pushed: Pushed) -> &mut Self {
        let (desc, boxes) = map.words();
        if self.overflow || self.n_params + 2 > MAX_PARAMS {
            self.overflow = true;
            return self;
        }
        let ok =
            self.push_abi(&desc, MAP_SLOTS / 2).is_some() && self.push_abi(&[boxes], 1).is_some();
        if ok {
            self.pushed[self.n_pushed] = pushed;
            self.n_pushed += 1;
        }
        self
    }

    /// The packed ABI slots so far (for tests and debugging).
    pub fn slots(&self) -> &[u64] {
        &self.slots.0[..self.n_slots]
    }

    /// Checks the arguments and comptime values against the kernel's parameter list: counts,
    /// kinds and scalar types. Cheap; runs on every launch.
    pub fn check(&self, spec: &KernelSpec, comptime: &[i128]) -> Result<()> {
        let bad = |cause| Err(Error::launch(spec.rust_name, cause));
        if self.overflow {
            return bad(LaunchCause::TooManyParams {
                max_params: MAX_PARAMS,
                max_local_buffers: MAX_LOCAL_BUFFERS,
            });
        }
        let n_comptime = spec.comptime_names().count();
        if comptime.len() != n_comptime || n_comptime > MAX_COMPTIME {
            return bad(LaunchCause::ComptimeCount {
                expected: n_comptime,
                got: comptime.len(),
                max: MAX_COMPTIME,
            });
        }
        let mut runtime = spec
            .params
            .iter()
            .filter(|p| !matches!(p.kind, ParamKind::Comptime(_)));
        let expected = runtime.clone().count();
        if self.n_pushed != expected {
            return bad(LaunchCause::ArgumentCount {
                expected,
                got: self.n_pushed,
            });
        }
        for (i, got) in self.pushed[..self.n_pushed].iter().enumerate() {
            let p = runtime.next().expect("counted above");
            let ok = match (p.kind, *got) {
                (ParamKind::Sym { .. }, Pushed::Sym) | (ParamKind::Local { .. }, Pushed::Local) => {
                    true
                }
                (ParamKind::Scalar(want), Pushed::Scalar(have)) => want == have,
                (ParamKind::Team, Pushed::Team) => true,
                (ParamKind::TensorMap(want), Pushed::TensorMap(have)) => want == have,
                (ParamKind::TensorMapMut(want), Pushed::TensorMapMut(have, writable)) => {
                    if want == have && !writable {
                        return bad(LaunchCause::ReadOnlyTensorMap {
                            index: i,
                            name: p.name.to_owned(),
                        });
                    }
                    want == have
                }
                _ => false,
            };
            if !ok {
                return bad(LaunchCause::ArgumentKind {
                    index: i,
                    name: p.name.to_owned(),
                    expected: format!("{:?}", p.kind),
                    got: format!("{got:?}"),
                });
            }
        }
        Ok(())
    }

    /// Checks what the arguments name against `pgas`: every pushed symmetric region lies in one
    /// live allocation of its symmetric heap ([`Error::NotSymmetric`] or [`Error::NotLive`]
    /// otherwise; the kernel addresses it on this PE and on others), and every pushed team is
    /// live ([`Error::TeamDestroyed`] otherwise). Runs on every checked launch: two host-side
    /// address look-ups and one ledger look-up per region, one registry look-up per split team.
    pub(crate) fn check_handles(&self, pgas: &Pgas) -> Result<()> {
        for &(ptr, len, elem) in &self.syms[..self.n_syms] {
            pgas.check_live("a symmetric kernel argument", ptr, len, elem)?;
        }
        for team in &self.teams[..self.n_teams] {
            team.check_live(pgas, "pass it to a kernel")?;
        }
        Ok(())
    }

    /// The checks a raw kernel allows (it has no parameter list): only the storage limits.
    pub(crate) fn check_raw(&self, kernel: &str) -> Result<()> {
        if self.overflow {
            let cause = LaunchCause::TooManyRawParams {
                max_params: MAX_PARAMS,
            };
            return Err(Error::launch(kernel, cause));
        }
        Ok(())
    }

    /// Takes the local buffers' pointers on `stream` and launches `f`; cudarc records the launch
    /// as the buffers' last use when the guards drop, after the launch call.
    pub(super) fn launch(
        &mut self, f: Function, kernel: &str, collective: bool, sms: u32, cfg: &LaunchConfig,
        stream: &CudaStream,
    ) -> Result<()> {
        let KernelArgs {
            slots,
            starts,
            n_params,
            locals,
            n_locals,
            ..
        } = self;
        // A buffer of another context (another GPU's) would be an illegal address here, or a
        // silent peer access: refused before anything is queued.
        for (slot, owner) in locals[..*n_locals].iter().filter_map(|l| match l {
            Some(Local::Read(slot, buf)) => Some((*slot, buf.owner())),
            Some(Local::Write(slot, buf)) => Some((*slot, buf.owner())),
            None => None,
        }) {
            if owner.cu_ctx() != stream.context().cu_ctx() {
                let cause = LaunchCause::ForeignSlice {
                    slot,
                    owner_gpu: owner.ordinal(),
                    gpu: stream.context().ordinal(),
                };
                return Err(Error::launch(kernel, cause));
            }
        }
        let mut guards: [Option<SyncOnDrop<'_>>; MAX_LOCAL_BUFFERS] =
            [const { None }; MAX_LOCAL_BUFFERS];
        for (local, guard) in locals[..*n_locals].iter_mut().zip(guards.iter_mut()) {
            let (slot, (ptr, g)) = match local {
                Some(Local::Read(slot, buf)) => (*slot, buf.ptr(stream)),
                Some(Local::Write(slot, buf)) => (*slot, buf.ptr_mut(stream)),
                None => continue,
            };
            slots.0[slot] = ptr;
            *guard = Some(g);
        }
        let mut params = [std::ptr::null_mut::<c_void>(); MAX_PARAMS];
        let base = slots.0.as_mut_ptr();
        for (p, &start) in params.iter_mut().zip(&starts[..*n_params]) {
            // SAFETY: every start is below MAX_SLOTS (push_abi checked).
            *p = unsafe { base.add(start as usize) }.cast();
        }
        // SAFETY: `check` matched the pushed parameters against the kernel's parameter list, and
        // the slots outlive the call (the driver copies parameter values at launch).
        unsafe {
            launch_function(
                f,
                kernel,
                collective,
                sms,
                cfg,
                stream,
                &mut params[..*n_params],
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ParamSpec;

    struct Sym(u64, usize);
    // SAFETY: these tests only pack and check arguments; nothing launches or dereferences them.
    unsafe impl SymRegion<f32> for Sym {
        fn as_device_ptr(&self) -> u64 {
            self.0
        }
        fn len(&self) -> usize {
            self.1
        }
    }

    const PARAMS: &[ParamSpec] = &[
        ParamSpec {
            name: "dst",
            kind: ParamKind::Sym {
                elem: "f32",
                mutable: true,
            },
        },
        ParamSpec {
            name: "n",
            kind: ParamKind::Comptime("u32"),
        },
        ParamSpec {
            name: "scale",
            kind: ParamKind::Scalar("f32"),
        },
        ParamSpec {
            name: "flag",
            kind: ParamKind::Scalar("bool"),
        },
        ParamSpec {
            name: "h",
            kind: ParamKind::Scalar("f16"),
        },
        ParamSpec {
            name: "team",
            kind: ParamKind::Team,
        },
    ];
    static SPEC: KernelSpec = KernelSpec {
        rust_name: "scale",
        cuda_name: "pgas_scale_0",
        file: "src/x.rs",
        line: 1,
        plain_source: "",
        checked_source: "",
        params: PARAMS,
        collective: false,
        max_threads: None,
    };

    #[test]
    fn packs_the_abi() {
        let mut s = Sym(0xdead_0000, 7);
        let mut a = KernelArgs::new();
        a.push_sym_mut(&mut s)
            .push_scalar(2.5f32)
            .push_scalar(true)
            .push_scalar(half::f16::from_f32(1.0))
            .push_team(Team::WORLD);
        assert_eq!(
            a.slots(),
            &[
                0xdead_0000,
                7,
                2.5f32.to_bits() as u64,
                1,
                0x3c00,
                Team::WORLD.raw() as u32 as u64
            ]
        );
        a.check(&SPEC, &[128]).unwrap();
        assert_eq!((-2i8).to_slot(), 0xfe);
    }

    #[test]
    fn wrong_arguments_are_errors() {
        let s = Sym(0, 1);
        let err = |a: &KernelArgs, ct: &[i128]| a.check(&SPEC, ct).unwrap_err().to_string();

        let mut a = KernelArgs::new();
        a.push_sym(&s)
            .push_scalar(1.0f32)
            .push_scalar(true)
            .push_scalar(half::f16::ZERO)
            .push_team(Team::WORLD);
        assert!(err(&a, &[]).contains("expected 1 comptime values"));
        assert!(err(&a, &[1, 2]).contains("got 2"));

        let mut a = KernelArgs::new();
        a.push_sym(&s).push_scalar(1.0f32);
        assert!(err(&a, &[1]).contains("expected 5 arguments, got 2"));

        let mut a = KernelArgs::new();
        a.push_sym(&s)
            .push_scalar(1.0f64)
            .push_scalar(true)
            .push_scalar(half::f16::ZERO)
            .push_team(Team::WORLD);
        let e = err(&a, &[1]);
        assert!(e.contains("`scale`") && e.contains("f64"), "{e}");

        let mut a = KernelArgs::new();
        for _ in 0..MAX_PARAMS {
            a.push_sym(&s);
        }
        assert!(err(&a, &[1]).contains("too many parameters"));
    }

    #[test]
    fn a_tensor_map_is_one_aligned_parameter_then_its_tile() {
        use crate::context::tensor_map::{Swizzle, Tile2d};
        let tile = Tile2d {
            rows: 256,
            cols: 64,
            box_rows: 128,
            box_cols: 64,
            swizzle: Swizzle::B128,
        };
        let desc: [u64; 16] = std::array::from_fn(|i| 100 + i as u64);
        let map = TensorMap::<half::bf16>::from_raw(desc, tile);
        let mut a = KernelArgs::new();
        a.push_scalar(7u32).push_tensor_map(&map).push_scalar(9u64);
        // The scalar, padding to word 8 (64 bytes), the descriptor, the tile, the scalar.
        assert_eq!(&a.starts[..a.n_params], &[0, 8, 24, 25]);
        assert_eq!(&a.slots()[8..24], &desc);
        assert_eq!(a.slots()[24], (128 << 32) | 64);
        assert_eq!(a.slots()[25], 9);
        assert_eq!(a.pushed[1], Pushed::TensorMap("bf16"));
        const PARAMS: &[ParamSpec] = &[ParamSpec {
            name: "m",
            kind: ParamKind::TensorMap("f16"),
        }];
        let spec = KernelSpec {
            params: PARAMS,
            ..SPEC
        };
        let mut b = KernelArgs::new();
        b.push_tensor_map(&map);
        let err = b.check(&spec, &[]).unwrap_err().to_string();
        assert!(err.contains("should be TensorMap(\"f16\")"), "{err}");
    }
}
