//! The kernel language's types and their CUDA spellings.

use std::fmt;

/// A scalar type a kernel can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scalar {
    /// `bool`.
    Bool,
    /// `i8`.
    I8,
    /// `i16`.
    I16,
    /// `i32`.
    I32,
    /// `i64`.
    I64,
    /// `isize` (64-bit on every GPU).
    Isize,
    /// `u8`.
    U8,
    /// `u16`.
    U16,
    /// `u32`.
    U32,
    /// `u64`.
    U64,
    /// `usize` (64-bit on every GPU).
    Usize,
    /// `f16` (`half::f16`, CUDA's `__half`).
    F16,
    /// `bf16` (`half::bf16`, CUDA's `__nv_bfloat16`).
    Bf16,
    /// `e4m3` (`pgas::e4m3`, CUDA's `__nv_fp8_e4m3`): 8-bit float, 4 exponent and 3 mantissa
    /// bits, finite only (OCP FP8 E4M3). A storage type: convert to `f32` with `as` to compute.
    E4m3,
    /// `e5m2` (`pgas::e5m2`, CUDA's `__nv_fp8_e5m2`): 8-bit float, 5 exponent and 2 mantissa
    /// bits, with infinities (OCP FP8 E5M2). A storage type like `e4m3`.
    E5m2,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

impl Scalar {
    /// Every scalar type, in the order the docs list them.
    pub const ALL: [Scalar; 17] = [
        Scalar::Bool,
        Scalar::I8,
        Scalar::I16,
        Scalar::I32,
        Scalar::I64,
        Scalar::Isize,
        Scalar::U8,
        Scalar::U16,
        Scalar::U32,
        Scalar::U64,
        Scalar::Usize,
        Scalar::F16,
        Scalar::Bf16,
        Scalar::E4m3,
        Scalar::E5m2,
        Scalar::F32,
        Scalar::F64,
    ];

    /// The scalar a Rust type name denotes (`f16`/`bf16` are the `half` crate's, `e4m3`/`e5m2`
    /// pgas's).
    pub fn from_rust(name: &str) -> Option<Scalar> {
        Scalar::ALL.iter().copied().find(|s| s.rust_name() == name)
    }

    /// The Rust spelling.
    pub fn rust_name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I8 => "i8",
            Scalar::I16 => "i16",
            Scalar::I32 => "i32",
            Scalar::I64 => "i64",
            Scalar::Isize => "isize",
            Scalar::U8 => "u8",
            Scalar::U16 => "u16",
            Scalar::U32 => "u32",
            Scalar::U64 => "u64",
            Scalar::Usize => "usize",
            Scalar::F16 => "f16",
            Scalar::Bf16 => "bf16",
            Scalar::E4m3 => "e4m3",
            Scalar::E5m2 => "e5m2",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
        }
    }

    /// The CUDA spelling. Fixed-width `<stdint.h>` names, so that pointers match NVSHMEM's typed
    /// prototypes exactly (`uint64_t *` is not `unsigned long long *` on LP64); `usize`/`isize`
    /// are `size_t`/`ptrdiff_t`, 64-bit like the ABI's `unsigned long long` lengths.
    pub fn c_type(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I8 => "int8_t",
            Scalar::I16 => "int16_t",
            Scalar::I32 => "int32_t",
            Scalar::I64 => "int64_t",
            Scalar::Isize => "ptrdiff_t",
            Scalar::U8 => "uint8_t",
            Scalar::U16 => "uint16_t",
            Scalar::U32 => "uint32_t",
            Scalar::U64 => "uint64_t",
            Scalar::Usize => "size_t",
            Scalar::F16 => "__half",
            Scalar::Bf16 => "__nv_bfloat16",
            Scalar::E4m3 => "__nv_fp8_e4m3",
            Scalar::E5m2 => "__nv_fp8_e5m2",
            Scalar::F32 => "float",
            Scalar::F64 => "double",
        }
    }

    /// Integer types (not `bool`).
    pub fn is_int(self) -> bool {
        !matches!(
            self,
            Scalar::Bool
                | Scalar::F16
                | Scalar::Bf16
                | Scalar::E4m3
                | Scalar::E5m2
                | Scalar::F32
                | Scalar::F64
        )
    }

    /// Signed integer types.
    pub fn is_signed_int(self) -> bool {
        matches!(
            self,
            Scalar::I8 | Scalar::I16 | Scalar::I32 | Scalar::I64 | Scalar::Isize
        )
    }

    /// Floating-point types, half precision and FP8 included.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            Scalar::F16 | Scalar::Bf16 | Scalar::E4m3 | Scalar::E5m2 | Scalar::F32 | Scalar::F64
        )
    }

    /// `e4m3`/`e5m2`: storage types without arithmetic (CUDA's `__nv_fp8_*` have none); kernels
    /// convert them with `as` (exactly to `f16`, `bf16`, `f32` and `f64`; from wider types
    /// rounding to nearest even and saturating to the largest finite value).
    pub fn is_fp8(self) -> bool {
        matches!(self, Scalar::E4m3 | Scalar::E5m2)
    }

    /// `f16`/`bf16`: stored as CUDA's half types, converted through `float`.
    pub fn is_half(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::Bf16)
    }

    /// Bytes of one value.
    pub fn size(self) -> usize {
        match self {
            Scalar::Bool | Scalar::I8 | Scalar::U8 | Scalar::E4m3 | Scalar::E5m2 => 1,
            Scalar::I16 | Scalar::U16 | Scalar::F16 | Scalar::Bf16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::F64 | Scalar::Isize | Scalar::Usize => 8,
        }
    }

    /// Integers narrower than `int`, whose C arithmetic promotes and must be cast back to wrap
    /// like Rust.
    pub fn is_narrow_int(self) -> bool {
        matches!(self, Scalar::I8 | Scalar::I16 | Scalar::U8 | Scalar::U16)
    }

    /// Inclusive value range of an integer type, for literal range checks.
    pub fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            Scalar::I8 => (i8::MIN as i128, i8::MAX as i128),
            Scalar::I16 => (i16::MIN as i128, i16::MAX as i128),
            Scalar::I32 => (i32::MIN as i128, i32::MAX as i128),
            Scalar::I64 | Scalar::Isize => (i64::MIN as i128, i64::MAX as i128),
            Scalar::U8 => (0, u8::MAX as i128),
            Scalar::U16 => (0, u16::MAX as i128),
            Scalar::U32 => (0, u32::MAX as i128),
            Scalar::U64 | Scalar::Usize => (0, u64::MAX as i128),
            _ => return None,
        })
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rust_name())
    }
}

/// Where a buffer lives, which decides whether it may be a remote target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufKind {
    /// `SymTensor`: symmetric, the only kind NVSHMEM can address on another PE.
    Sym,
    /// `CudaSlice`: a local device buffer.
    Local,
    /// `shared_array::<T, N>()`: block-shared memory.
    Shared,
    /// `x.peer(pe)`: another PE's copy of a symmetric buffer, reached by loads and stores.
    Peer,
    /// `s.cluster_peer(rank)`: a shared buffer's bytes in another block of the cluster.
    ClusterPeer,
}

/// A buffer view: a pointer plus a length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufTy {
    pub kind: BufKind,
    pub elem: Scalar,
    pub mutable: bool,
}

impl fmt::Display for BufTy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = if self.mutable { "&mut " } else { "&" };
        match self.kind {
            BufKind::Sym => write!(f, "{m}SymTensor<{}>", self.elem),
            BufKind::Local => write!(f, "{m}CudaSlice<{}>", self.elem),
            BufKind::Shared => write!(f, "shared array of {}", self.elem),
            BufKind::Peer => write!(f, "peer view of SymTensor<{}>", self.elem),
            BufKind::ClusterPeer => write!(f, "cluster view of shared [{}]", self.elem),
        }
    }
}

/// Which operand of `mma.sync.m16n8k16` a fragment holds (PTX ISA, "Matrix fragments for
/// mma.m16n8k16"): each lane of the warp keeps its share of the tile in registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FragKind {
    /// A, 16 x 16 row-major `bf16`/`f16`: four 32-bit registers (eight values) per lane.
    A,
    /// B, 16 x 8 column-major `bf16`/`f16`: two 32-bit registers (four values) per lane.
    B,
    /// The `f32` accumulator C/D, 16 x 8: four `f32` per lane.
    C,
}

impl FragKind {
    /// Every kind.
    pub const ALL: [FragKind; 3] = [FragKind::A, FragKind::B, FragKind::C];

    /// How a device function's parameter names an array of them: `&mut [FragC<f32>]`.
    pub fn param_name(self) -> &'static str {
        match self {
            FragKind::A => "FragA",
            FragKind::B => "FragB",
            FragKind::C => "FragC",
        }
    }

    /// The declaring intrinsic (`frag_a` ...), also how messages name the kind.
    pub fn decl_name(self) -> &'static str {
        match self {
            FragKind::A => "frag_a",
            FragKind::B => "frag_b",
            FragKind::C => "frag_c",
        }
    }

    /// The C struct of one fragment (defined in the tensor support code).
    pub fn c_type(self) -> &'static str {
        match self {
            FragKind::A => "pgas_frag_a",
            FragKind::B => "pgas_frag_b",
            FragKind::C => "pgas_frag_c",
        }
    }

    /// Registers per lane, and what one of them holds (`acc[i][j]`).
    pub fn regs(self) -> (u32, Scalar) {
        match self {
            FragKind::A => (4, Scalar::U32),
            FragKind::B => (2, Scalar::U32),
            FragKind::C => (4, Scalar::F32),
        }
    }
}

/// A fragment array (`let mut acc = frag_c::<f32, 16>();`) or one fragment of it (`acc[i]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FragTy {
    pub kind: FragKind,
    /// The values the fragment holds: `bf16`/`f16` for A and B, `f32` for C.
    pub elem: Scalar,
    /// Declared `let mut` (and, for `&mut acc[i]`, borrowed mutably).
    pub mutable: bool,
}

impl fmt::Display for FragTy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            FragKind::A => "A",
            FragKind::B => "B",
            FragKind::C => "C",
        };
        write!(f, "{kind} fragment of {}", self.elem)
    }
}

/// The most elements a local array may have. A local array is meant to live in registers (an
/// SM gives a thread at most 255 32-bit registers, fewer under `max_threads`), and one that
/// does not fit, or is indexed with values the compiler cannot make constant, is placed in
/// local memory: per-thread DRAM behind the L1 cache, slower than shared memory. 256 elements
/// (1 KiB of `f32`) is already past what registers hold; a larger array belongs in shared
/// memory (`shared_array`) or a buffer.
pub const MAX_LOCAL_ARRAY: u64 = 256;

/// The element type of a local array: a scalar, the inference variable of an unsuffixed
/// literal (`[0.0; 8]` is `f32` or `f64` by its later uses, as in Rust), or a 16-byte vector
/// (`[load_vec16(&x[i]); 2]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArrElem {
    Scalar(Scalar),
    Var(u32),
    Vec16(Scalar),
}

impl ArrElem {
    /// The C type of an element; `None` while the type is still being inferred.
    pub fn c_type(self) -> Option<&'static str> {
        match self {
            ArrElem::Scalar(s) => Some(s.c_type()),
            ArrElem::Vec16(_) => Some("uint4"),
            ArrElem::Var(_) => None,
        }
    }
}

/// A local (register) array `let mut acc = [0f32; 8];` or `let a = [x, y, z];`, of scalars or
/// of 16-byte vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArrayTy {
    pub elem: ArrElem,
    /// The length, when the kernel's text fixes it (a literal); `None` for a `#[comptime]`
    /// length, known when the kernel is specialized.
    pub len: Option<u32>,
    /// Declared `let mut`: its elements may be assigned.
    pub mutable: bool,
}

/// The enums kernels pass to NVSHMEM calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EnumTy {
    SignalOp,
    Cmp,
    ReduceOp,
}

impl EnumTy {
    /// Rust name of the enum.
    pub fn name(self) -> &'static str {
        match self {
            EnumTy::SignalOp => "SignalOp",
            EnumTy::Cmp => "Cmp",
            EnumTy::ReduceOp => "ReduceOp",
        }
    }

    /// Variants and their CUDA spelling (the NVSHMEM constant, or the reduction's name
    /// infix for `ReduceOp`).
    pub fn variants(self) -> &'static [(&'static str, &'static str)] {
        match self {
            EnumTy::SignalOp => &[("Set", "NVSHMEM_SIGNAL_SET"), ("Add", "NVSHMEM_SIGNAL_ADD")],
            EnumTy::Cmp => &[
                ("Eq", "NVSHMEM_CMP_EQ"),
                ("Ne", "NVSHMEM_CMP_NE"),
                ("Gt", "NVSHMEM_CMP_GT"),
                ("Ge", "NVSHMEM_CMP_GE"),
                ("Lt", "NVSHMEM_CMP_LT"),
                ("Le", "NVSHMEM_CMP_LE"),
            ],
            EnumTy::ReduceOp => &[
                ("Sum", "sum"),
                ("Prod", "prod"),
                ("Min", "min"),
                ("Max", "max"),
                ("And", "and"),
                ("Or", "or"),
                ("Xor", "xor"),
            ],
        }
    }

    /// A variant's code: its place in [`EnumTy::variants`]. A reduction's code is what a
    /// `#[comptime] op: ReduceOp` carries (`ReduceOp::Sum as i128` on the host: the runtime's
    /// enum lists them in this order) and the prelude's `pgas_op_of<code>` names.
    pub fn code(self, variant: &str) -> usize {
        self.variants()
            .iter()
            .position(|(n, _)| *n == variant)
            .unwrap_or(0)
    }

    /// The enum a Rust name denotes.
    pub fn from_rust(name: &str) -> Option<EnumTy> {
        [EnumTy::SignalOp, EnumTy::Cmp, EnumTy::ReduceOp]
            .into_iter()
            .find(|e| e.name() == name)
    }
}

/// The type of an expression during and after checking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Scalar(Scalar),
    /// An inference variable for an unsuffixed literal; resolved (or defaulted to `i32`/`f64`
    /// as Rust does) before emission.
    Var(u32),
    /// A buffer or a range slice of one.
    Buf(BufTy),
    /// `&x[i]` / `&mut x[i]`: an element address, only as an intrinsic argument.
    ElemRef(BufTy),
    /// A fragment array, declared by `frag_a/frag_b/frag_c::<T, N>()`; lives in registers.
    FragArray(FragTy),
    /// One fragment `acc[i]`: indexed further (`acc[i][j]`) or passed as `&acc[i]` /
    /// `&mut acc[i]` to a tensor-core intrinsic.
    Frag(FragTy),
    /// Sixteen bytes of `T` in registers (`load_vec16`), stored back with `store_vec16`.
    Vec16(Scalar),
    /// A local array of scalars, `[T; N]`, in registers when every index is a constant after
    /// unrolling.
    Array(ArrayTy),
    Team,
    /// `&TensorMap<T>`: a TMA tensor map kernel parameter (`tma_load_2d`'s source).
    TensorMap(Scalar),
    /// `&mut TensorMap<T>`: a tensor map the kernel also writes through (`tma_store_2d`).
    TensorMapMut(Scalar),
    Enum(EnumTy),
    Unit,
    /// The type of `return`, `break`, `continue`: fits anywhere.
    Never,
    /// After an error: fits anywhere, so one mistake is reported once.
    Error,
}

impl Ty {
    /// The scalar, if this is one.
    pub fn scalar(self) -> Option<Scalar> {
        match self {
            Ty::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// The C type of a value passed and returned as is: a scalar, or a 16-byte vector (`uint4`).
    pub fn value_c_type(self) -> Option<&'static str> {
        match self {
            Ty::Scalar(s) => Some(s.c_type()),
            Ty::Vec16(_) => Some("uint4"),
            _ => None,
        }
    }
}
