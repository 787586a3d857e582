//! The one table of kernel intrinsics.
//!
//! Every function a kernel may call (thread queries, math, local atomics, the NVSHMEM device
//! API) is a row of [`INTRINSICS`]. The type checker reads a row's argument kinds, return
//! kind and type set; the emitter expands its CUDA template; `docs/dsl.md`'s reference table is
//! generated from the same rows ([`crate::intrinsics_markdown`]). Adding a function means adding
//! a row, nothing else.

use crate::prelude::Prelude;
use crate::types::{FragKind, Scalar};

/// How a row may be called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `name(args)`.
    Free,
    /// `recv.name(args)`: the receiver is argument 0.
    Method,
    /// Either, like `x.sqrt()` and `sqrt(x)`.
    Both,
}

/// Who executes a call together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Each thread on its own.
    Thread,
    /// The threads of a warp that reach the call together (NVSHMEM's `_warp` forms).
    Warp,
    /// All 32 lanes of a warp, converged: the warp-wide tensor-core instructions
    /// (`mma.sync.aligned`, `ldmatrix.sync.aligned`). A kernel that uses one traps unless its
    /// block is whole warps; the checked variant also traps where a call is reached by part of
    /// a warp.
    FullWarp,
    /// A warpgroup: 4 consecutive warps starting at a warp index divisible by 4, all 128 threads
    /// converged (`wgmma.*.sync.aligned`). A kernel that uses one traps unless its block is
    /// whole warpgroups; the checked variant also traps where a call is reached by part of a
    /// warp.
    Warpgroup,
    /// Every thread of the block (NVSHMEM's `_block` forms, `__syncthreads`).
    Block,
}

impl Scope {
    /// The lowercase name used in docs.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Thread => "thread",
            Scope::Warp => "warp",
            Scope::FullWarp => "full warp",
            Scope::Warpgroup => "warpgroup",
            Scope::Block => "block",
        }
    }
}

/// The doc section a row belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// Thread and warp indices, shuffles, votes, block syncs.
    Thread,
    /// Math on f32/f64 (min/max/abs also on integers).
    Math,
    /// Atomics on this GPU's memory.
    LocalAtomic,
    /// `my_pe`, `n_pes`, team queries.
    Query,
    /// One element to or from a PE (`p`, `g`).
    ElementRma,
    /// Bulk puts and gets, blocking and not.
    BlockRma,
    /// Puts that update a signal on arrival.
    SignalledPut,
    /// Signal updates and reads.
    Signal,
    /// `wait_until` and `signal_wait_until`.
    PointToPoint,
    /// `fence` and `quiet`.
    Ordering,
    /// Remote atomics.
    Amo,
    /// Barriers and syncs over teams.
    Barrier,
    /// NVSHMEM's device collectives (need a collective launch).
    Collective,
    /// pgas's own collectives over peer memory (the LL protocol).
    PeerCollective,
    /// Peer views (`x.peer(pe)`) and loads and stores through them.
    PeerMemory,
    /// Buffer lengths and views.
    Buffer,
    /// Dynamic shared memory, async copies, 16-byte vectors, 2-D indices.
    Tiles,
    /// Tensor-core fragments, `ldmatrix`, `mma.sync`.
    Tensor,
    /// sm_90a: mbarriers, TMA bulk tensor copies, `wgmma`.
    Hopper,
    /// sm_90a: thread-block clusters, multicast copies, register reallocation, `stmatrix`.
    Cluster,
    /// NVLink SHARP: loads, stores and reductions through a team's multicast address.
    Multicast,
}

impl Group {
    /// Every group, in doc order.
    pub const ALL: [Group; 21] = [
        Group::Thread,
        Group::Math,
        Group::LocalAtomic,
        Group::Query,
        Group::ElementRma,
        Group::BlockRma,
        Group::SignalledPut,
        Group::Signal,
        Group::PointToPoint,
        Group::Ordering,
        Group::Amo,
        Group::Barrier,
        Group::Collective,
        Group::PeerCollective,
        Group::PeerMemory,
        Group::Buffer,
        Group::Tiles,
        Group::Tensor,
        Group::Hopper,
        Group::Cluster,
        Group::Multicast,
    ];

    /// Heading used in docs.
    pub fn title(self) -> &'static str {
        match self {
            Group::Thread => "Thread and warp",
            Group::Math => "Math (f32/f64; min/max/abs also on integers)",
            Group::LocalAtomic => "Local atomics",
            Group::Query => "NVSHMEM queries",
            Group::ElementRma => "Element RMA",
            Group::BlockRma => "Bulk RMA",
            Group::SignalledPut => "Signalled put",
            Group::Signal => "Signals",
            Group::PointToPoint => "Point-to-point synchronization",
            Group::Ordering => "Ordering",
            Group::Amo => "Remote atomics (AMO)",
            Group::Barrier => "Barriers and syncs",
            Group::Collective => "Device collectives",
            Group::PeerCollective => "Collectives over peer memory (pgas's own protocol)",
            Group::PeerMemory => "Peer memory",
            Group::Buffer => "Buffers",
            Group::Tiles => {
                "Tiles: dynamic shared memory, async copies, 16-byte vectors, 2-D indices"
            }
            Group::Tensor => "Tensor cores: fragments, ldmatrix, mma.sync m16n8k16",
            Group::Hopper => "Hopper (sm_90a): mbarriers, TMA bulk tensor copies, wgmma",
            Group::Cluster => {
                "Hopper (sm_90a): thread-block clusters, multicast copies, register reallocation, stmatrix"
            }
            Group::Multicast => "Multicast (NVLink SHARP, sm_90): multimem loads, stores and reductions",
        }
    }
}

/// The kind of one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A PE number: any integer expression, passed as `int`; checked against `n_pes()`.
    Pe,
    /// A PE number relative to the team in argument `.0`; checked against that team's size.
    TeamPe(usize),
    /// A block's rank in the cluster, a `u32`; the checked variant traps unless it is below
    /// `cluster_nctarank()`.
    ClusterRank,
    /// A `u16` mask of ranks in the cluster; the checked variant traps unless it is non-zero
    /// and within `cluster_nctarank()`.
    ClusterMask,
    /// An NVSHMEM `Team`.
    Team,
    /// A scalar of exactly this type.
    Exact(Scalar),
    /// A scalar of the row's element type `T`.
    Value,
    /// `SignalOp::Set` / `SignalOp::Add`.
    SignalOp,
    /// `Cmp::Eq` ... `Cmp::Le`.
    Cmp,
    /// `ReduceOp::Sum` ... `ReduceOp::Xor` (bit operations on integer types only), or for
    /// pgas's own collectives (`pgas_op_{op}` in the template) the kernel's
    /// `#[comptime] op: ReduceOp`.
    ReduceOp,
    /// Any value of type `ReduceOp`: a variant, a `#[comptime]` parameter, a device function's
    /// parameter (emitted as its code).
    ReduceOpValue,
    /// A mutable symmetric buffer or slice of `T`: a remote destination.
    RemoteDst,
    /// A symmetric buffer or slice of `T`: a remote source, or a collective's source.
    SymSrc,
    /// Any buffer or slice of `T` (local or symmetric): a local source.
    AnySrc,
    /// Any mutable buffer or slice of `T`: a local destination.
    AnyDst,
    /// `&x[i]` / `&mut x[i]` of a symmetric buffer of `T`.
    SymElem {
        /// Whether it is `&mut`.
        mutable: bool,
    },
    /// `&sig[k]` / `&mut sig[k]` of a symmetric `u64` buffer.
    Signal {
        /// Whether it is `&mut`.
        mutable: bool,
    },
    /// `&mut x[i]` of any mutable buffer of `T`.
    AnyElemMut,
    /// Any buffer (a method receiver).
    AnyBuf,
    /// A shared-memory buffer of `T` (a method receiver): `shared_array` or `dyn_shared`.
    SharedBuf,
    /// `&x[i]` / `&mut x[i]` of `T` where 16 bytes start (16-byte aligned), in memory `space`.
    Bytes16 {
        /// The memory it must point into.
        space: Space,
        /// Whether it is `&mut`.
        mutable: bool,
    },
    /// `&x[i]` / `&mut x[i]` of a fragment array of this kind; A and B fragments fix `T`.
    Frag {
        /// Which fragment array (A, B or C).
        kind: FragKind,
        /// Whether it is `&mut`.
        mutable: bool,
    },
    /// A `Vec16<T>` value (`load_vec16`).
    Vec16,
    /// An integer of this type known when the kernel is compiled: a literal, a `#[comptime]`
    /// parameter, or arithmetic on them (an immediate operand of the instruction).
    Const(Scalar),
    /// A `usize` column index, less than argument `.0` (a leading dimension); the checked
    /// variant traps otherwise.
    Col(usize),
    /// `&x[i]` / `&mut x[i]` of a shared `u64` buffer: an mbarrier.
    Mbar {
        /// Whether it is `&mut`.
        mutable: bool,
    },
    /// A `&TensorMap<T>` (or `&mut`) kernel parameter.
    Map,
    /// A `&mut TensorMap<T>` kernel parameter: the tensor the call writes.
    MapMut,
    /// `&mut x[i]` of a shared buffer of `T`: where a TMA tile of the tensor map in argument
    /// `.0` lands (128-byte aligned; the checked variant traps unless the tile fits).
    TmaDst(usize),
    /// `&x[i]` of a shared buffer of `T`: the tile a TMA store of the tensor map in argument `.0`
    /// reads (128-byte aligned; the checked variant traps unless the tile fits).
    TmaSrc(usize),
    /// `&x[i]` of a shared buffer of `T` laid out as a 128-byte-swizzled TMA tile (rows of 128
    /// bytes, 8-row atoms of 1024 bytes), at row 0 of a `rows`-row operand and a 32-byte K
    /// offset (16 elements of 16-bit `T`, 32 of FP8): a wgmma operand, passed as a matrix
    /// descriptor.
    WgTile {
        /// Rows of the operand (64 for A, N for B).
        rows: u32,
    },
    /// `&x[i]` of a shared buffer of 16-bit `T` holding an MN-major wgmma B operand (K rows of
    /// N elements, N contiguous) as the copy engine leaves it in `n / 64` tiles of 64 columns
    /// with a 128-byte swizzle, the tiles argument `chunk`'s elements apart: at a 16-row K step
    /// (a 1024-byte-aligned row) of the first tile. Passed as a matrix descriptor.
    WgTileMn {
        /// Columns of the operand (N).
        n: u32,
        /// The argument holding the elements between two 64-column tiles.
        chunk: usize,
    },
    /// `&mut acc[i]` of a `frag_c` array: `n` accumulators from `i` on, the registers of a
    /// wgmma `m64nNk16` or `m64nNk32` result (`N = 8 n`).
    WgAcc {
        /// Accumulator fragments (`N / 8` of `m64nNkK`).
        n: u32,
    },
    /// `&acc[i]` of a `frag_c` array: `n` accumulators from `i` on, read.
    AccIn {
        /// Fragments read.
        n: u32,
    },
}

/// The memory an element address of [`Arg::Bytes16`] must point into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// Shared memory: a `shared_array` or `dyn_shared` buffer.
    Shared,
    /// Global memory: a `SymTensor`, a `CudaSlice` or a peer view.
    Global,
    /// Either.
    Any,
}

impl Arg {
    /// How the docs spell this argument.
    pub fn doc(self, name: &str) -> String {
        match self {
            Arg::Pe | Arg::TeamPe(_) => format!("{name}: i32"),
            Arg::ClusterRank => format!("{name}: u32"),
            Arg::ClusterMask => format!("{name}: u16"),
            Arg::Team => format!("{name}: Team"),
            Arg::Exact(s) => format!("{name}: {s}"),
            Arg::Value => format!("{name}: T"),
            Arg::SignalOp => format!("{name}: SignalOp"),
            Arg::Cmp => format!("{name}: Cmp"),
            Arg::ReduceOp | Arg::ReduceOpValue => format!("{name}: ReduceOp"),
            Arg::RemoteDst => format!("{name}: &mut SymTensor<T>"),
            Arg::SymSrc => format!("{name}: &SymTensor<T>"),
            Arg::AnySrc => format!("{name}: &[T]"),
            Arg::AnyDst => format!("{name}: &mut [T]"),
            Arg::SymElem { mutable: true } => format!("&mut {name}[i]"),
            Arg::SymElem { mutable: false } => format!("&{name}[i]"),
            Arg::Signal { mutable: true } => format!("&mut {name}[k]"),
            Arg::Signal { mutable: false } => format!("&{name}[k]"),
            Arg::AnyElemMut => format!("&mut {name}[i]"),
            Arg::AnyBuf | Arg::SharedBuf => name.to_string(),
            Arg::Bytes16 { mutable: true, .. } | Arg::Frag { mutable: true, .. } => {
                format!("&mut {name}[i]")
            }
            Arg::Bytes16 { mutable: false, .. } | Arg::Frag { mutable: false, .. } => {
                format!("&{name}[i]")
            }
            Arg::Vec16 => format!("{name}: Vec16<T>"),
            Arg::Const(s) => format!("{name}: {s} (constant)"),
            Arg::Col(_) => format!("{name}: usize"),
            Arg::Mbar { mutable: true } | Arg::TmaDst(_) | Arg::WgAcc { .. } => {
                format!("&mut {name}[i]")
            }
            Arg::Mbar { mutable: false }
            | Arg::WgTile { .. }
            | Arg::WgTileMn { .. }
            | Arg::AccIn { .. } => {
                format!("&{name}[i]")
            }
            Arg::Map => format!("{name}: &TensorMap<T>"),
            Arg::MapMut => format!("{name}: &mut TensorMap<T>"),
            Arg::TmaSrc(_) => format!("&{name}[i]"),
        }
    }
}

/// What a call returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ret {
    /// Nothing (`()`).
    Unit,
    /// The element type `T`.
    Elem,
    /// This scalar type, whatever `T` is.
    Exact(Scalar),
    /// `x.peer(pe)`: a peer view of the receiver.
    PeerView,
    /// `s.cluster_peer(rank)`: the receiver's bytes in another block of the cluster.
    ClusterView,
    /// `shared_array::<T, N>()`: a block-shared buffer.
    SharedArray,
    /// `dyn_shared::<T>()`: the block's dynamic shared memory as a buffer of `T`.
    DynShared,
    /// `frag_a/frag_b/frag_c::<T, N>()`: N fragments in registers.
    FragArray(FragKind),
    /// `Vec16<T>`: 16 bytes of `T` in registers.
    Vec16,
}

impl Ret {
    /// Rows that declare something (`let s = shared_array::<f32, 256>();`): they take generic
    /// arguments and are only `let` initializers.
    pub fn is_declaration(self) -> bool {
        matches!(self, Ret::SharedArray | Ret::DynShared | Ret::FragArray(_))
    }
}

/// How many elements a bulk call moves (`{n}` in the template).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// Not a bulk call.
    None,
    /// `min(len(a), len(b))` of the arguments at these positions.
    Min(usize, usize),
    /// Reduce-scatter (team, dst, src): `min(dst.len(), src.len() / team_n_pes)`.
    ReduceScatter,
    /// All-gather (team, dst, src): `min(src.len(), dst.len() / team_n_pes)`.
    AllGather,
    /// All-to-all (team, dst, src): `min(dst.len(), src.len()) / team_n_pes` per PE.
    AllToAll,
}

/// One intrinsic.
#[derive(Debug)]
pub struct Intrinsic {
    /// Rust name.
    pub name: &'static str,
    /// The doc section it is listed in.
    pub group: Group,
    /// Free function, method, or both.
    pub form: Form,
    /// Argument kinds with their doc names; for methods, argument 0 is the receiver.
    pub args: &'static [(&'static str, Arg)],
    /// What a call returns.
    pub ret: Ret,
    /// Who executes a call together.
    pub scope: Scope,
    /// The element types `T` may be, each with the text `{T}` expands to. Empty: not generic.
    pub types: &'static [(Scalar, &'static str)],
    /// CUDA template: `{0}`.. are arguments (a buffer's pointer), `{0.len}` a buffer's length,
    /// `{n}` the element count, `{T}` the type set's text, `{C}` the C type of `T`, `{op}` the
    /// reduction's name.
    pub cuda: &'static str,
    /// How many elements a bulk call moves.
    pub count: Count,
    /// The NVSHMEM headers a call needs; any but the point-to-point ones also means the kernel
    /// needs a collective (cooperative) launch.
    pub prelude: Prelude,
    /// What it does, for docs/dsl.md.
    pub doc: &'static str,
}

/// Every NVSHMEM type name for the RMA family (`nvshmem_{T}_put` ...).
const RMA: &[(Scalar, &str)] = &[
    (Scalar::I8, "int8"),
    (Scalar::I16, "int16"),
    (Scalar::I32, "int32"),
    (Scalar::I64, "int64"),
    (Scalar::Isize, "ptrdiff"),
    (Scalar::U8, "uint8"),
    (Scalar::U16, "uint16"),
    (Scalar::U32, "uint32"),
    (Scalar::U64, "uint64"),
    (Scalar::Usize, "size"),
    (Scalar::F16, "half"),
    (Scalar::Bf16, "bfloat16"),
    (Scalar::F32, "float"),
    (Scalar::F64, "double"),
];
/// Standard AMOs (compare-swap).
const AMO_STD: &[(Scalar, &str)] = &[
    (Scalar::I32, "int32"),
    (Scalar::I64, "int64"),
    (Scalar::Isize, "ptrdiff"),
    (Scalar::U32, "uint32"),
    (Scalar::U64, "uint64"),
    (Scalar::Usize, "size"),
];
/// Arithmetic AMOs (inc, add): standard less `int64` and `ptrdiff`, which NVSHMEM 3.4.5
/// leaves out ("lack of CUDA support", `nvshmem_defines.h`); the NVSHMEM library's compile
/// (`nvcall::library`) checks every row against the headers.
const AMO_ARITH: &[(Scalar, &str)] = &[
    (Scalar::I32, "int32"),
    (Scalar::U32, "uint32"),
    (Scalar::U64, "uint64"),
    (Scalar::Usize, "size"),
];
/// Extended AMOs (fetch, set, swap): standard plus floats.
const AMO_EXT: &[(Scalar, &str)] = &[
    (Scalar::I32, "int32"),
    (Scalar::I64, "int64"),
    (Scalar::Isize, "ptrdiff"),
    (Scalar::U32, "uint32"),
    (Scalar::U64, "uint64"),
    (Scalar::Usize, "size"),
    (Scalar::F32, "float"),
    (Scalar::F64, "double"),
];
/// `atomic_swap`: the extended AMOs, each with its whole function name, because `double` goes
/// through pgas's `pgas_double_atomic_swap` (NVSHMEM 3.4.5's returns the old value's bits
/// converted as an integer; `crate::prelude` says more).
const AMO_SWAP: &[(Scalar, &str)] = &[
    (Scalar::I32, "nvshmem_int32"),
    (Scalar::I64, "nvshmem_int64"),
    (Scalar::Isize, "nvshmem_ptrdiff"),
    (Scalar::U32, "nvshmem_uint32"),
    (Scalar::U64, "nvshmem_uint64"),
    (Scalar::Usize, "nvshmem_size"),
    (Scalar::F32, "nvshmem_float"),
    (Scalar::F64, "pgas_double"),
];
/// Bitwise AMOs (and, or, xor).
const AMO_BIT: &[(Scalar, &str)] = &[
    (Scalar::I32, "int32"),
    (Scalar::I64, "int64"),
    (Scalar::U32, "uint32"),
    (Scalar::U64, "uint64"),
];
/// `wait_until` / `test`.
const WAIT: &[(Scalar, &str)] = &[
    (Scalar::I16, "short"),
    (Scalar::I32, "int32"),
    (Scalar::I64, "int64"),
    (Scalar::Isize, "ptrdiff"),
    (Scalar::U16, "ushort"),
    (Scalar::U32, "uint32"),
    (Scalar::U64, "uint64"),
    (Scalar::Usize, "size"),
];
/// Reductions; the bit operations are limited to [`REDUCE_BITWISE`] by the checker.
const REDUCE: &[(Scalar, &str)] = &[
    (Scalar::I8, "int8"),
    (Scalar::I16, "int16"),
    (Scalar::I32, "int32"),
    (Scalar::I64, "int64"),
    (Scalar::U8, "uint8"),
    (Scalar::U16, "uint16"),
    (Scalar::U32, "uint32"),
    (Scalar::U64, "uint64"),
    (Scalar::Usize, "size"),
    (Scalar::F16, "half"),
    (Scalar::Bf16, "bfloat16"),
    (Scalar::F32, "float"),
    (Scalar::F64, "double"),
];
/// Types NVSHMEM's `and`/`or`/`xor` reductions accept.
pub const REDUCE_BITWISE: &[Scalar] = &[
    Scalar::I8,
    Scalar::I16,
    Scalar::I32,
    Scalar::I64,
    Scalar::U8,
    Scalar::U16,
    Scalar::U32,
    Scalar::U64,
    Scalar::Usize,
];
/// Float math: `{T}` is the C function suffix (`sqrtf` / `sqrt`).
const FLOAT: &[(Scalar, &str)] = &[(Scalar::F32, "f"), (Scalar::F64, "")];
/// `min`: the whole function name.
const MIN: &[(Scalar, &str)] = &[
    (Scalar::F32, "fminf"),
    (Scalar::F64, "fmin"),
    (Scalar::I8, "pgas_min"),
    (Scalar::I16, "pgas_min"),
    (Scalar::I32, "pgas_min"),
    (Scalar::I64, "pgas_min"),
    (Scalar::Isize, "pgas_min"),
    (Scalar::U8, "pgas_min"),
    (Scalar::U16, "pgas_min"),
    (Scalar::U32, "pgas_min"),
    (Scalar::U64, "pgas_min"),
    (Scalar::Usize, "pgas_min"),
];
const MAX: &[(Scalar, &str)] = &[
    (Scalar::F32, "fmaxf"),
    (Scalar::F64, "fmax"),
    (Scalar::I8, "pgas_max"),
    (Scalar::I16, "pgas_max"),
    (Scalar::I32, "pgas_max"),
    (Scalar::I64, "pgas_max"),
    (Scalar::Isize, "pgas_max"),
    (Scalar::U8, "pgas_max"),
    (Scalar::U16, "pgas_max"),
    (Scalar::U32, "pgas_max"),
    (Scalar::U64, "pgas_max"),
    (Scalar::Usize, "pgas_max"),
];
const ABS: &[(Scalar, &str)] = &[
    (Scalar::F32, "fabsf"),
    (Scalar::F64, "fabs"),
    (Scalar::I8, "pgas_abs"),
    (Scalar::I16, "pgas_abs"),
    (Scalar::I32, "pgas_abs"),
    (Scalar::I64, "pgas_abs"),
    (Scalar::Isize, "pgas_abs"),
];
/// `__shfl_*_sync` overloads.
const SHFL: &[(Scalar, &str)] = &[
    (Scalar::I32, ""),
    (Scalar::I64, ""),
    (Scalar::U32, ""),
    (Scalar::U64, ""),
    (Scalar::F16, ""),
    (Scalar::Bf16, ""),
    (Scalar::F32, ""),
    (Scalar::F64, ""),
];
/// Local atomics: `{T}` is the C type CUDA's `atomic*` overload takes.
const ATOMIC_ADD: &[(Scalar, &str)] = &[
    (Scalar::I32, "int"),
    (Scalar::I64, "unsigned long long"),
    (Scalar::U32, "unsigned int"),
    (Scalar::U64, "unsigned long long"),
    (Scalar::Usize, "unsigned long long"),
    (Scalar::F32, "float"),
    (Scalar::F64, "double"),
];
const ATOMIC_SUB: &[(Scalar, &str)] = &[(Scalar::I32, "int"), (Scalar::U32, "unsigned int")];
const ATOMIC_MINMAX: &[(Scalar, &str)] = &[
    (Scalar::I32, "int"),
    (Scalar::I64, "long long"),
    (Scalar::U32, "unsigned int"),
    (Scalar::U64, "unsigned long long"),
    (Scalar::Usize, "unsigned long long"),
];
const ATOMIC_CAS: &[(Scalar, &str)] = &[
    (Scalar::I32, "int"),
    (Scalar::I64, "unsigned long long"),
    (Scalar::U32, "unsigned int"),
    (Scalar::U64, "unsigned long long"),
    (Scalar::Usize, "unsigned long long"),
];
const ATOMIC_EXCH: &[(Scalar, &str)] = &[
    (Scalar::I32, "int"),
    (Scalar::I64, "unsigned long long"),
    (Scalar::U32, "unsigned int"),
    (Scalar::U64, "unsigned long long"),
    (Scalar::Usize, "unsigned long long"),
    (Scalar::F32, "float"),
];
/// `shared_array::<T, N>()`, `dyn_shared`, 16-byte copies and vectors: every scalar but `bool`
/// (kept out so shared flags are explicit integers), FP8 included (no row here spells `{T}`).
const SHARED: &[(Scalar, &str)] = &[
    (Scalar::I8, "int8"),
    (Scalar::I16, "int16"),
    (Scalar::I32, "int32"),
    (Scalar::I64, "int64"),
    (Scalar::Isize, "ptrdiff"),
    (Scalar::U8, "uint8"),
    (Scalar::U16, "uint16"),
    (Scalar::U32, "uint32"),
    (Scalar::U64, "uint64"),
    (Scalar::Usize, "size"),
    (Scalar::F16, "half"),
    (Scalar::Bf16, "bfloat16"),
    (Scalar::E4m3, "e4m3"),
    (Scalar::E5m2, "e5m2"),
    (Scalar::F32, "float"),
    (Scalar::F64, "double"),
];
/// The 16-bit floats `mma.sync` multiplies; `{T}` is the suffix of the support helper
/// (`pgas_mma_bf16`), which spells the PTX type.
const HALF16: &[(Scalar, &str)] = &[(Scalar::Bf16, "bf16"), (Scalar::F16, "f16")];
/// The 8-bit floats `wgmma ... k32` multiplies (both operands of one type; PTX also has the
/// mixed `.e4m3.e5m2` and `.e5m2.e4m3`, which no row offers); `{T}` is the suffix of the support
/// helper (`pgas_wgmma_m64n64k32_e4m3`), which spells the PTX type.
const FP8: &[(Scalar, &str)] = &[(Scalar::E4m3, "e4m3"), (Scalar::E5m2, "e5m2")];
/// What an A fragment holds: the 16-bit floats of `mma_sync` and `wgmma ... k16`, and the 8-bit
/// floats of `wgmma ... k32` (the same 4 registers a lane hold 16 x 32 of them).
const FRAG_A: &[(Scalar, &str)] = &[
    (Scalar::Bf16, "bf16"),
    (Scalar::F16, "f16"),
    (Scalar::E4m3, "e4m3"),
    (Scalar::E5m2, "e5m2"),
];
/// What the copy engine moves (`tma_load_2d`): the `CUtensorMap` data types pgas builds maps
/// for.
const TMA: &[(Scalar, &str)] = &[
    (Scalar::U8, ""),
    (Scalar::U16, ""),
    (Scalar::U32, ""),
    (Scalar::I32, ""),
    (Scalar::U64, ""),
    (Scalar::I64, ""),
    (Scalar::F16, ""),
    (Scalar::Bf16, ""),
    (Scalar::E4m3, ""),
    (Scalar::E5m2, ""),
    (Scalar::F32, ""),
    (Scalar::F64, ""),
];
/// What the copy engine adds into global memory (`tma_reduce_add_2d`): the types
/// `cp.reduce.async.bulk.tensor .add` takes.
const TMA_ADD: &[(Scalar, &str)] = &[
    (Scalar::U32, ""),
    (Scalar::I32, ""),
    (Scalar::U64, ""),
    (Scalar::F16, ""),
    (Scalar::Bf16, ""),
    (Scalar::F32, ""),
];
/// What `multimem.ld_reduce .add` and `multimem.red .add` take (NVSHMEM's own multicast
/// reductions use the same set); `{T}` is the suffix of the support helper
/// (`pgas_multimem_ld_add_s32`), one per Rust type: `i64` adds as `.u64` (the same bits).
const MM_ADD: &[(Scalar, &str)] = &[
    (Scalar::I32, "s32"),
    (Scalar::U32, "u32"),
    (Scalar::I64, "s64"),
    (Scalar::U64, "u64"),
    (Scalar::F32, "f32"),
    (Scalar::F64, "f64"),
];
/// What `multimem.ld_reduce .min` / `.max` take: integers only (no floating-point min/max on
/// 32- and 64-bit floats).
const MM_MINMAX: &[(Scalar, &str)] = &[
    (Scalar::I32, "s32"),
    (Scalar::U32, "u32"),
    (Scalar::I64, "s64"),
    (Scalar::U64, "u64"),
];
/// The accumulator of `mma.sync ... .f32.{T}.{T}.f32`.
const ACC: &[(Scalar, &str)] = &[(Scalar::F32, "f32")];
/// The arguments of a multimem store or reduction: an element of a symmetric buffer, the team
/// whose multicast address reaches it, the value.
const MM_WRITE_ARGS: &[(&str, Arg)] = &[
    ("x", A::SymElem { mutable: true }),
    ("team", A::Team),
    ("v", A::Value),
];
/// The arguments of a multimem load-reduce.
const MM_READ_ARGS: &[(&str, Arg)] = &[("x", A::SymElem { mutable: false }), ("team", A::Team)];
const SMEM: Space = Space::Shared;
const GMEM: Space = Space::Global;

/// Builds a table row; keeps each row on a few lines.
#[allow(clippy::too_many_arguments)]
const fn row(
    name: &'static str, group: Group, form: Form, args: &'static [(&'static str, Arg)], ret: Ret,
    scope: Scope, types: &'static [(Scalar, &'static str)], cuda: &'static str, count: Count,
    collective: bool, doc: &'static str,
) -> Intrinsic {
    Intrinsic {
        name,
        group,
        form,
        args,
        ret,
        scope,
        types,
        cuda,
        count,
        prelude: if collective {
            Prelude::Full
        } else {
            Prelude::P2p
        },
        doc,
    }
}

use Arg as A;
use Count as N;
use Form as F;
use Group as G;
use Ret as R;
use Scope as S;

const U32: Ret = R::Exact(Scalar::U32);
const I32: Ret = R::Exact(Scalar::I32);
const BOOL: Ret = R::Exact(Scalar::Bool);
const U64: Ret = R::Exact(Scalar::U64);
const NONE: &[(Scalar, &str)] = &[];

const fn thread(name: &'static str, cuda: &'static str, doc: &'static str) -> Intrinsic {
    row(
        name,
        G::Thread,
        F::Free,
        &[],
        U32,
        S::Thread,
        NONE,
        cuda,
        N::None,
        false,
        doc,
    )
}
const fn unary_math(name: &'static str, cuda: &'static str, doc: &'static str) -> Intrinsic {
    row(
        name,
        G::Math,
        F::Both,
        &[("x", A::Value)],
        R::Elem,
        S::Thread,
        FLOAT,
        cuda,
        N::None,
        false,
        doc,
    )
}
const fn local_atomic(
    name: &'static str, types: &'static [(Scalar, &'static str)], cuda: &'static str,
    doc: &'static str,
) -> Intrinsic {
    row(
        name,
        G::LocalAtomic,
        F::Free,
        &[("x", A::AnyElemMut), ("v", A::Value)],
        R::Elem,
        S::Thread,
        types,
        cuda,
        N::None,
        false,
        doc,
    )
}
const fn bulk(
    name: &'static str, get: bool, scope: Scope, cuda: &'static str, doc: &'static str,
) -> Intrinsic {
    let args: &'static [(&'static str, Arg)] = if get {
        &[("dst", A::AnyDst), ("src", A::SymSrc), ("pe", A::Pe)]
    } else {
        &[("dst", A::RemoteDst), ("src", A::AnySrc), ("pe", A::Pe)]
    };
    row(
        name,
        G::BlockRma,
        F::Free,
        args,
        R::Unit,
        scope,
        RMA,
        cuda,
        N::Min(0, 1),
        false,
        doc,
    )
}
const PUT_SIGNAL_ARGS: &[(&str, Arg)] = &[
    ("dst", A::RemoteDst),
    ("src", A::AnySrc),
    ("sig", A::Signal { mutable: true }),
    ("value", A::Exact(Scalar::U64)),
    ("op", A::SignalOp),
    ("pe", A::Pe),
];
const fn put_signal(
    name: &'static str, scope: Scope, cuda: &'static str, doc: &'static str,
) -> Intrinsic {
    row(
        name,
        G::SignalledPut,
        F::Free,
        PUT_SIGNAL_ARGS,
        R::Unit,
        scope,
        RMA,
        cuda,
        N::Min(0, 1),
        false,
        doc,
    )
}
const fn amo(
    name: &'static str, args: &'static [(&'static str, Arg)], ret: Ret,
    types: &'static [(Scalar, &'static str)], cuda: &'static str, doc: &'static str,
) -> Intrinsic {
    row(
        name,
        G::Amo,
        F::Free,
        args,
        ret,
        S::Thread,
        types,
        cuda,
        N::None,
        false,
        doc,
    )
}
const AMO_VALUE: &[(&str, Arg)] = &[
    ("x", A::SymElem { mutable: true }),
    ("v", A::Value),
    ("pe", A::Pe),
];
const AMO_NOVALUE: &[(&str, Arg)] = &[("x", A::SymElem { mutable: true }), ("pe", A::Pe)];
const fn barrier(
    name: &'static str, team: bool, scope: Scope, cuda: &'static str, doc: &'static str,
) -> Intrinsic {
    let args: &'static [(&'static str, Arg)] = if team { &[("team", A::Team)] } else { &[] };
    Intrinsic {
        prelude: Prelude::Barrier,
        ..row(
            name,
            G::Barrier,
            F::Free,
            args,
            R::Unit,
            scope,
            NONE,
            cuda,
            N::None,
            true,
            doc,
        )
    }
}
const REDUCE_ARGS: &[(&str, Arg)] = &[
    ("team", A::Team),
    ("dst", A::RemoteDst),
    ("src", A::SymSrc),
    ("op", A::ReduceOp),
];
const COLL_ARGS: &[(&str, Arg)] = &[("team", A::Team), ("dst", A::RemoteDst), ("src", A::SymSrc)];
const BCAST_ARGS: &[(&str, Arg)] = &[
    ("team", A::Team),
    ("dst", A::RemoteDst),
    ("src", A::SymSrc),
    ("root", A::TeamPe(0)),
];
const TEAM_ALL_REDUCE_ARGS: &[(&str, Arg)] = &[
    ("team", A::Team),
    ("dst", A::AnyDst),
    ("src", A::AnySrc),
    ("scratch", A::Signal { mutable: true }),
    ("op", A::ReduceOp),
];
const TEAM_ALL_GATHER_ARGS: &[(&str, Arg)] = &[
    ("team", A::Team),
    ("dst", A::AnyDst),
    ("src", A::AnySrc),
    ("scratch", A::Signal { mutable: true }),
];
const TEAM_BROADCAST_ARGS: &[(&str, Arg)] = &[
    ("team", A::Team),
    ("dst", A::AnyDst),
    ("src", A::AnySrc),
    ("scratch", A::Signal { mutable: true }),
    ("root", A::TeamPe(0)),
];
#[allow(clippy::too_many_arguments)]
const fn coll(
    name: &'static str, args: &'static [(&'static str, Arg)], scope: Scope,
    types: &'static [(Scalar, &'static str)], cuda: &'static str, count: Count, doc: &'static str,
) -> Intrinsic {
    row(
        name,
        G::Collective,
        F::Free,
        args,
        R::Unit,
        scope,
        types,
        cuda,
        count,
        true,
        doc,
    )
}

/// The table.
#[rustfmt::skip]
pub static INTRINSICS: &[Intrinsic] = &[
    // Thread and warp.
    thread("thread_idx_x", "threadIdx.x", "Thread index in the block, x."),
    thread("thread_idx_y", "threadIdx.y", "Thread index in the block, y."),
    thread("thread_idx_z", "threadIdx.z", "Thread index in the block, z."),
    thread("block_idx_x", "blockIdx.x", "Block index in the grid, x."),
    thread("block_idx_y", "blockIdx.y", "Block index in the grid, y."),
    thread("block_idx_z", "blockIdx.z", "Block index in the grid, z."),
    thread("block_dim_x", "blockDim.x", "Threads per block, x."),
    thread("block_dim_y", "blockDim.y", "Threads per block, y."),
    thread("block_dim_z", "blockDim.z", "Threads per block, z."),
    thread("grid_dim_x", "gridDim.x", "Blocks per grid, x."),
    thread("grid_dim_y", "gridDim.y", "Blocks per grid, y."),
    thread("grid_dim_z", "gridDim.z", "Blocks per grid, z."),
    row("global_thread_idx", G::Thread, F::Free, &[], R::Exact(Scalar::Usize), S::Thread, NONE,
        "((size_t)blockIdx.x * blockDim.x + threadIdx.x)", N::None, false,
        "Global thread index in the x dimension."),
    thread("lane_id", "(threadIdx.x & 31u)", "Lane of the thread in its warp (x dimension)."),
    thread("warp_id", "(threadIdx.x >> 5)", "Warp of the thread in its block (x dimension)."),
    thread("warpgroup_id", "__shfl_sync(0xffffffffu, threadIdx.x >> 7, 0)",
        "Warpgroup of the thread in its block (x dimension), read from lane 0 so that the compiler knows it is the same across the warp: addresses computed from it (a warpgroup's `wgmma` operands) stay in uniform registers instead of being moved there before each `wgmma`."),
    row("sync_threads", G::Thread, F::Free, &[], R::Unit, S::Block, NONE, "__syncthreads()", N::None, false,
        "Block-wide barrier."),
    row("sync_warp", G::Thread, F::Free, &[], R::Unit, S::Warp, NONE, "__syncwarp()", N::None, false,
        "Warp-wide barrier."),
    row("threadfence", G::Thread, F::Free, &[], R::Unit, S::Thread, NONE, "__threadfence()", N::None, false,
        "Device-wide memory fence."),
    row("threadfence_system", G::Thread, F::Free, &[], R::Unit, S::Thread, NONE, "__threadfence_system()", N::None, false,
        "System-wide memory fence: orders this thread's stores, peer stores through `x.peer(pe)` included, before its later ones (a signal, say) as every GPU sees them."),
    row("shared_array", G::Thread, F::Free, &[], R::SharedArray, S::Block, SHARED, "__shared__ {C} name[N]", N::None, false,
        "`let s = shared_array::<T, N>();` declares static shared memory of N elements (N a literal or a comptime parameter)."),
    row("shfl_xor_sync", G::Thread, F::Free, &[("mask", A::Exact(Scalar::U32)), ("v", A::Value), ("lane_mask", A::Exact(Scalar::I32))],
        R::Elem, S::Warp, SHFL, "__shfl_xor_sync({0}, {1}, {2})", N::None, false,
        "Butterfly exchange within the warp."),
    row("any_sync", G::Thread, F::Free, &[("mask", A::Exact(Scalar::U32)), ("pred", A::Exact(Scalar::Bool))],
        R::Exact(Scalar::Bool), S::Warp, NONE, "(__any_sync({0}, {1}) != 0)", N::None, false,
        "Whether `pred` holds in any lane of `mask` (`vote.any`): the same answer in every lane, so a branch on it keeps the warp together (around warpgroup instructions, which need whole warps)."),
    row("shfl_down_sync", G::Thread, F::Free, &[("mask", A::Exact(Scalar::U32)), ("v", A::Value), ("delta", A::Exact(Scalar::U32))],
        R::Elem, S::Warp, SHFL, "__shfl_down_sync({0}, {1}, {2})", N::None, false,
        "Value from the lane `delta` above."),
    // Math.
    unary_math("sqrt", "sqrt{T}({0})", "Square root."),
    unary_math("rsqrt", "rsqrt{T}({0})", "Reciprocal square root."),
    unary_math("exp", "exp{T}({0})", "e^x."),
    unary_math("exp2", "exp2{T}({0})", "2^x (an online softmax in base 2 folds log2(e) into its scale)."),
    row("exp2_approx", G::Math, F::Both, &[("x", A::Value)], R::Elem, S::Thread, &[(Scalar::F32, "")], "pgas_ex2_approx({0})", N::None, false,
        "2^x in one instruction of the special-function unit (`ex2.approx.ftz.f32`, a relative error of about 2^-22), a result below 2^-126 flushed to 0: the softmax's exponential, which `exp2` wraps in a rescaling for subnormal results that costs three more instructions."),
    unary_math("ln", "log{T}({0})", "Natural logarithm."),
    unary_math("log2", "log2{T}({0})", "Base-2 logarithm."),
    unary_math("sin", "sin{T}({0})", "Sine."),
    unary_math("cos", "cos{T}({0})", "Cosine."),
    unary_math("tanh", "tanh{T}({0})", "Hyperbolic tangent."),
    unary_math("floor", "floor{T}({0})", "Round down."),
    unary_math("ceil", "ceil{T}({0})", "Round up."),
    unary_math("recip", "(({C})1 / {0})", "1 / x."),
    row("abs", G::Math, F::Both, &[("x", A::Value)], R::Elem, S::Thread, ABS, "{T}({0})", N::None, false,
        "Absolute value (floats and signed integers)."),
    row("min", G::Math, F::Both, &[("a", A::Value), ("b", A::Value)], R::Elem, S::Thread, MIN, "{T}({0}, {1})", N::None, false,
        "Smaller of two values (floats ignore a NaN, like Rust)."),
    row("max", G::Math, F::Both, &[("a", A::Value), ("b", A::Value)], R::Elem, S::Thread, MAX, "{T}({0}, {1})", N::None, false,
        "Larger of two values (floats ignore a NaN, like Rust)."),
    row("combine", G::Math, F::Free, &[("op", A::ReduceOpValue), ("a", A::Value), ("b", A::Value)], R::Elem, S::Thread, REDUCE, "pgas_combine({0}, {1}, {2})", N::None, false,
        "`a` and `b` combined by the reduction `op` (`a + b` for `ReduceOp::Sum`, `min(a, b)` for `Min`, ...; the bitwise ones on integers only), as the collectives reduce. `op` may be a variant, a kernel's `#[comptime] op: ReduceOp` or a device function's `ReduceOp` parameter; a constant one folds to the one operation."),
    row("powf", G::Math, F::Both, &[("x", A::Value), ("y", A::Value)], R::Elem, S::Thread, FLOAT, "pow{T}({0}, {1})", N::None, false,
        "x^y."),
    row("powi", G::Math, F::Both, &[("x", A::Value), ("n", A::Exact(Scalar::I32))], R::Elem, S::Thread, FLOAT, "pow{T}({0}, ({C}){1})", N::None, false,
        "x^n for an i32 n."),
    row("mul_add", G::Math, F::Both, &[("x", A::Value), ("a", A::Value), ("b", A::Value)], R::Elem, S::Thread, FLOAT, "fma{T}({0}, {1}, {2})", N::None, false,
        "x * a + b with one rounding."),
    // Local atomics.
    local_atomic("atomic_add_local", ATOMIC_ADD, "(({C})atomicAdd(({T} *){0}, ({T}){1}))", "Atomic add on local or shared memory; returns the old value."),
    local_atomic("atomic_sub_local", ATOMIC_SUB, "(({C})atomicSub(({T} *){0}, ({T}){1}))", "Atomic subtract; returns the old value."),
    local_atomic("atomic_min_local", ATOMIC_MINMAX, "(({C})atomicMin(({T} *){0}, ({T}){1}))", "Atomic minimum; returns the old value."),
    local_atomic("atomic_max_local", ATOMIC_MINMAX, "(({C})atomicMax(({T} *){0}, ({T}){1}))", "Atomic maximum; returns the old value."),
    local_atomic("atomic_exch_local", ATOMIC_EXCH, "(({C})atomicExch(({T} *){0}, ({T}){1}))", "Atomic exchange; returns the old value."),
    row("atomic_cas_local", G::LocalAtomic, F::Free, &[("x", A::AnyElemMut), ("compare", A::Value), ("v", A::Value)], R::Elem, S::Thread, ATOMIC_CAS,
        "(({C})atomicCAS(({T} *){0}, ({T}){1}, ({T}){2}))", N::None, false,
        "Atomic compare-and-swap; returns the old value."),
    // NVSHMEM queries.
    row("my_pe", G::Query, F::Free, &[], I32, S::Thread, NONE, "nvshmem_my_pe()", N::None, false, "This PE's number."),
    row("n_pes", G::Query, F::Free, &[], I32, S::Thread, NONE, "nvshmem_n_pes()", N::None, false, "Number of PEs."),
    row("team_my_pe", G::Query, F::Free, &[("team", A::Team)], I32, S::Thread, NONE, "nvshmem_team_my_pe({0})", N::None, false,
        "This PE's number in `team`."),
    row("team_n_pes", G::Query, F::Free, &[("team", A::Team)], I32, S::Thread, NONE, "nvshmem_team_n_pes({0})", N::None, false,
        "Number of PEs in `team`."),
    row("team_translate_pe", G::Query, F::Free, &[("src_team", A::Team), ("pe", A::TeamPe(0)), ("dst_team", A::Team)], I32, S::Thread, NONE,
        "nvshmem_team_translate_pe({0}, {1}, {2})", N::None, false,
        "The number in `dst_team` of PE `pe` of `src_team` (-1 if not a member)."),
    // Element RMA.
    row("p", G::ElementRma, F::Free, &[("dst", A::SymElem { mutable: true }), ("v", A::Value), ("pe", A::Pe)], R::Unit, S::Thread, RMA,
        "nvshmem_{T}_p({0}, {1}, {2})", N::None, false, "Store one element on PE `pe`."),
    row("g", G::ElementRma, F::Free, &[("src", A::SymElem { mutable: false }), ("pe", A::Pe)], R::Elem, S::Thread, RMA,
        "nvshmem_{T}_g({0}, {1})", N::None, false, "Load one element from PE `pe`."),
    // Bulk RMA.
    bulk("put", false, S::Thread, "nvshmem_{T}_put({0}, {1}, {n}, {2})", "Copy `min(dst.len(), src.len())` elements to PE `pe`; returns when `src` may be reused."),
    bulk("get", true, S::Thread, "nvshmem_{T}_get({0}, {1}, {n}, {2})", "Copy from PE `pe` into local `dst`."),
    bulk("put_nbi", false, S::Thread, "nvshmem_{T}_put_nbi({0}, {1}, {n}, {2})", "Non-blocking put; complete with `quiet()`."),
    bulk("get_nbi", true, S::Thread, "nvshmem_{T}_get_nbi({0}, {1}, {n}, {2})", "Non-blocking get; complete with `quiet()`."),
    bulk("put_warp", false, S::Warp, "nvshmemx_{T}_put_warp({0}, {1}, {n}, {2})", "Put by the whole warp."),
    bulk("get_warp", true, S::Warp, "nvshmemx_{T}_get_warp({0}, {1}, {n}, {2})", "Get by the whole warp."),
    bulk("put_block", false, S::Block, "nvshmemx_{T}_put_block({0}, {1}, {n}, {2})", "Put by the whole block."),
    bulk("get_block", true, S::Block, "nvshmemx_{T}_get_block({0}, {1}, {n}, {2})", "Get by the whole block."),
    bulk("put_nbi_warp", false, S::Warp, "nvshmemx_{T}_put_nbi_warp({0}, {1}, {n}, {2})", "Non-blocking put by the warp."),
    bulk("get_nbi_warp", true, S::Warp, "nvshmemx_{T}_get_nbi_warp({0}, {1}, {n}, {2})", "Non-blocking get by the warp."),
    bulk("put_nbi_block", false, S::Block, "nvshmemx_{T}_put_nbi_block({0}, {1}, {n}, {2})", "Non-blocking put by the block."),
    bulk("get_nbi_block", true, S::Block, "nvshmemx_{T}_get_nbi_block({0}, {1}, {n}, {2})", "Non-blocking get by the block."),
    // Signalled put.
    put_signal("put_signal", S::Thread, "nvshmem_{T}_put_signal({0}, {1}, {n}, {2}, {3}, {4}, {5})", "Put, then update `sig` on PE `pe` once the data is delivered."),
    put_signal("put_signal_nbi", S::Thread, "nvshmem_{T}_put_signal_nbi({0}, {1}, {n}, {2}, {3}, {4}, {5})", "Non-blocking signalled put."),
    put_signal("put_signal_warp", S::Warp, "nvshmemx_{T}_put_signal_warp({0}, {1}, {n}, {2}, {3}, {4}, {5})", "Signalled put by the warp."),
    put_signal("put_signal_block", S::Block, "nvshmemx_{T}_put_signal_block({0}, {1}, {n}, {2}, {3}, {4}, {5})", "Signalled put by the block."),
    put_signal("put_signal_nbi_warp", S::Warp, "nvshmemx_{T}_put_signal_nbi_warp({0}, {1}, {n}, {2}, {3}, {4}, {5})", "Non-blocking signalled put by the warp."),
    put_signal("put_signal_nbi_block", S::Block, "nvshmemx_{T}_put_signal_nbi_block({0}, {1}, {n}, {2}, {3}, {4}, {5})", "Non-blocking signalled put by the block."),
    // Signals.
    row("signal_op", G::Signal, F::Free, &[("sig", A::Signal { mutable: true }), ("value", A::Exact(Scalar::U64)), ("op", A::SignalOp), ("pe", A::Pe)],
        R::Unit, S::Thread, NONE, "nvshmemx_signal_op({0}, {1}, {2}, {3})", N::None, false, "Set or add to `sig` on PE `pe`."),
    row("signal_wait_until", G::Signal, F::Free, &[("sig", A::Signal { mutable: false }), ("cmp", A::Cmp), ("value", A::Exact(Scalar::U64))],
        U64, S::Thread, NONE, "nvshmem_signal_wait_until({0}, {1}, {2})", N::None, false,
        "Wait until the local `sig` compares true; returns its value."),
    row("signal_fetch", G::Signal, F::Free, &[("sig", A::Signal { mutable: false })], U64, S::Thread, NONE,
        "nvshmem_signal_fetch({0})", N::None, false, "Read the local `sig`."),
    // Point-to-point synchronization.
    row("wait_until", G::PointToPoint, F::Free, &[("x", A::SymElem { mutable: false }), ("cmp", A::Cmp), ("value", A::Value)], R::Unit, S::Thread, WAIT,
        "nvshmem_{T}_wait_until({0}, {1}, {2})", N::None, false, "Wait until the local `x[i]` compares true."),
    row("test", G::PointToPoint, F::Free, &[("x", A::SymElem { mutable: false }), ("cmp", A::Cmp), ("value", A::Value)], BOOL, S::Thread, WAIT,
        "(nvshmem_{T}_test({0}, {1}, {2}) != 0)", N::None, false, "Whether the local `x[i]` compares true now."),
    // Ordering.
    row("fence", G::Ordering, F::Free, &[], R::Unit, S::Thread, NONE, "nvshmem_fence()", N::None, false,
        "Order this thread's puts to each PE."),
    row("quiet", G::Ordering, F::Free, &[], R::Unit, S::Thread, NONE, "nvshmem_quiet()", N::None, false,
        "Complete this thread's outstanding puts and non-blocking calls."),
    // Remote atomics.
    amo("atomic_fetch", &[("x", A::SymElem { mutable: false }), ("pe", A::Pe)], R::Elem, AMO_EXT, "nvshmem_{T}_atomic_fetch({0}, {1})", "Atomic read of `x[i]` on PE `pe`."),
    amo("atomic_set", AMO_VALUE, R::Unit, AMO_EXT, "nvshmem_{T}_atomic_set({0}, {1}, {2})", "Atomic write."),
    amo("atomic_swap", AMO_VALUE, R::Elem, AMO_SWAP, "{T}_atomic_swap({0}, {1}, {2})", "Atomic swap; returns the old value."),
    amo("atomic_compare_swap", &[("x", A::SymElem { mutable: true }), ("compare", A::Value), ("v", A::Value), ("pe", A::Pe)], R::Elem, AMO_STD,
        "nvshmem_{T}_atomic_compare_swap({0}, {1}, {2}, {3})", "Store `v` if `x[i] == compare`; returns the old value."),
    amo("atomic_inc", AMO_NOVALUE, R::Unit, AMO_ARITH, "nvshmem_{T}_atomic_inc({0}, {1})", "Atomic increment."),
    amo("atomic_fetch_inc", AMO_NOVALUE, R::Elem, AMO_ARITH, "nvshmem_{T}_atomic_fetch_inc({0}, {1})", "Atomic increment; returns the old value."),
    amo("atomic_add", AMO_VALUE, R::Unit, AMO_ARITH, "nvshmem_{T}_atomic_add({0}, {1}, {2})", "Atomic add."),
    amo("atomic_fetch_add", AMO_VALUE, R::Elem, AMO_ARITH, "nvshmem_{T}_atomic_fetch_add({0}, {1}, {2})", "Atomic add; returns the old value."),
    amo("atomic_and", AMO_VALUE, R::Unit, AMO_BIT, "nvshmem_{T}_atomic_and({0}, {1}, {2})", "Atomic bitwise and."),
    amo("atomic_fetch_and", AMO_VALUE, R::Elem, AMO_BIT, "nvshmem_{T}_atomic_fetch_and({0}, {1}, {2})", "Atomic bitwise and; returns the old value."),
    amo("atomic_or", AMO_VALUE, R::Unit, AMO_BIT, "nvshmem_{T}_atomic_or({0}, {1}, {2})", "Atomic bitwise or."),
    amo("atomic_fetch_or", AMO_VALUE, R::Elem, AMO_BIT, "nvshmem_{T}_atomic_fetch_or({0}, {1}, {2})", "Atomic bitwise or; returns the old value."),
    amo("atomic_xor", AMO_VALUE, R::Unit, AMO_BIT, "nvshmem_{T}_atomic_xor({0}, {1}, {2})", "Atomic bitwise xor."),
    amo("atomic_fetch_xor", AMO_VALUE, R::Elem, AMO_BIT, "nvshmem_{T}_atomic_fetch_xor({0}, {1}, {2})", "Atomic bitwise xor; returns the old value."),
    // Barriers and syncs.
    barrier("barrier_all", false, S::Thread, "nvshmemi_barrier_threadgroup<nvshmemi_threadgroup_thread>(NVSHMEM_TEAM_WORLD)", "Complete all puts, then wait for every PE."),
    barrier("barrier_all_warp", false, S::Warp, "nvshmemi_barrier_threadgroup<nvshmemi_threadgroup_warp>(NVSHMEM_TEAM_WORLD)", "`barrier_all` by the warp."),
    barrier("barrier_all_block", false, S::Block, "nvshmemi_barrier_threadgroup<nvshmemi_threadgroup_block>(NVSHMEM_TEAM_WORLD)", "`barrier_all` by the block."),
    barrier("sync_all", false, S::Thread, "nvshmemi_sync_threadgroup<nvshmemi_threadgroup_thread>(NVSHMEM_TEAM_WORLD)", "Wait for every PE (no completion of puts)."),
    barrier("sync_all_warp", false, S::Warp, "nvshmemi_sync_threadgroup<nvshmemi_threadgroup_warp>(NVSHMEM_TEAM_WORLD)", "`sync_all` by the warp."),
    barrier("sync_all_block", false, S::Block, "nvshmemi_sync_threadgroup<nvshmemi_threadgroup_block>(NVSHMEM_TEAM_WORLD)", "`sync_all` by the block."),
    barrier("barrier", true, S::Thread, "nvshmemi_barrier_threadgroup<nvshmemi_threadgroup_thread>({0})", "Complete puts, then wait for every PE of `team`."),
    barrier("barrier_warp", true, S::Warp, "nvshmemi_barrier_threadgroup<nvshmemi_threadgroup_warp>({0})", "`barrier` by the warp."),
    barrier("barrier_block", true, S::Block, "nvshmemi_barrier_threadgroup<nvshmemi_threadgroup_block>({0})", "`barrier` by the block."),
    barrier("team_sync", true, S::Thread, "nvshmemi_sync_threadgroup<nvshmemi_threadgroup_thread>({0})", "Wait for every PE of `team`."),
    barrier("team_sync_warp", true, S::Warp, "nvshmemi_sync_threadgroup<nvshmemi_threadgroup_warp>({0})", "`team_sync` by the warp."),
    barrier("team_sync_block", true, S::Block, "nvshmemi_sync_threadgroup<nvshmemi_threadgroup_block>({0})", "`team_sync` by the block."),
    // Device collectives.
    coll("reduce_block", REDUCE_ARGS, S::Block, REDUCE, "nvshmemx_{T}_{op}_reduce_block({0}, {1}, {2}, {n})", N::Min(1, 2),
        "Element-wise reduction of `src` over the team into every PE's `dst`."),
    coll("reduce_warp", REDUCE_ARGS, S::Warp, REDUCE, "nvshmemx_{T}_{op}_reduce_warp({0}, {1}, {2}, {n})", N::Min(1, 2),
        "`reduce_block` by one warp."),
    coll("reduce_scatter_block", REDUCE_ARGS, S::Block, REDUCE, "nvshmemx_{T}_{op}_reducescatter_block({0}, {1}, {2}, {n})", N::ReduceScatter,
        "Reduce `src` (team size x n) and leave block `team_my_pe` of the result in `dst` (n)."),
    coll("reduce_scatter_warp", REDUCE_ARGS, S::Warp, REDUCE, "nvshmemx_{T}_{op}_reducescatter_warp({0}, {1}, {2}, {n})", N::ReduceScatter,
        "`reduce_scatter_block` by one warp."),
    coll("all_gather_block", COLL_ARGS, S::Block, RMA, "nvshmemx_{T}_fcollect_block({0}, {1}, {2}, {n})", N::AllGather,
        "Concatenate every PE's `src` (n) into `dst` (team size x n), in team order (fcollect)."),
    coll("all_gather_warp", COLL_ARGS, S::Warp, RMA, "nvshmemx_{T}_fcollect_warp({0}, {1}, {2}, {n})", N::AllGather,
        "`all_gather_block` by one warp."),
    coll("all_to_all_block", COLL_ARGS, S::Block, RMA, "nvshmemx_{T}_alltoall_block({0}, {1}, {2}, {n})", N::AllToAll,
        "Send block j of `src` to PE j, receive block i of `dst` from PE i."),
    coll("all_to_all_warp", COLL_ARGS, S::Warp, RMA, "nvshmemx_{T}_alltoall_warp({0}, {1}, {2}, {n})", N::AllToAll,
        "`all_to_all_block` by one warp."),
    coll("broadcast_block", BCAST_ARGS, S::Block, RMA, "nvshmemx_{T}_broadcast_block({0}, {1}, {2}, {n}, {3})", N::Min(1, 2),
        "Copy `src` of team PE `root` into every PE's `dst`."),
    coll("broadcast_warp", BCAST_ARGS, S::Warp, RMA, "nvshmemx_{T}_broadcast_warp({0}, {1}, {2}, {n}, {3})", N::Min(1, 2),
        "`broadcast_block` by one warp."),
    // Collectives over peer memory: pgas's LL protocol (prelude.rs, `LL_SUPPORT`).
    row("team_all_reduce_block", G::PeerCollective, F::Free, TEAM_ALL_REDUCE_ARGS, R::Unit, S::Block, REDUCE,
        "pgas_ll_block<{C}, pgas_op_{op}, false, false>({0}, {1}, {2}, {n}, {3})", N::Min(1, 2), false,
        "Element-wise reduction of every team PE's `src` into its `dst` (`dst` may be `src`), by the whole block, with the same block of every PE: each PE stores its data into every peer's `scratch` as 16-byte lines of 8 data bytes and two copies of a 32-bit call flag, and polls its own for the peers' (no collective launch, no fence; it starts with a block barrier, so `src` may be what other threads of the block just wrote). Results are the same bits on every PE (reduced in team rank order; 16-bit floats in `f32`). `scratch`: a `u64` symmetric buffer of `pgas::coll::device_scratch_len::<T>(team size, len)` words from an even `k` on (16-byte aligned), this block's alone (one region per block that calls it, one scratch per team), zeroed once and reused; every team PE load/store reachable. Blocks wait for their namesakes on the peers, so those must be resident."),
    row("team_all_gather_block", G::PeerCollective, F::Free, TEAM_ALL_GATHER_ARGS, R::Unit, S::Block, RMA,
        "pgas_ll_block<{C}, pgas_op_sum, true, false>({0}, {1}, {2}, {n}, {3})", N::AllGather, false,
        "Every team PE's `src` (n) into every PE's `dst` (team size x n), in team order, by the whole block with the same block of every PE, over `scratch` as `team_all_reduce_block` (the same protocol; `dst` apart from `src`)."),
    row("team_reduce_scatter_block", G::PeerCollective, F::Free, TEAM_ALL_REDUCE_ARGS, R::Unit, S::Block, REDUCE,
        "pgas_ll_block<{C}, pgas_op_{op}, false, true>({0}, {1}, {2}, {n}, {3})", N::ReduceScatter, false,
        "Reduce every team PE's `src` (team size x n) and leave chunk `team_my_pe` of the result in `dst` (n), by the whole block with the same block of every PE, over `scratch` as `team_all_reduce_block` (the same protocol and rounding; `dst` apart from `src`; `scratch` of `device_scratch_len::<T>(team size, n)` words): each PE sends rank `q` only its chunk `q`, so each line crosses NVLink once."),
    row("team_all_to_all_block", G::PeerCollective, F::Free, TEAM_ALL_GATHER_ARGS, R::Unit, S::Block, RMA,
        "pgas_ll_block<{C}, pgas_op_sum, true, true>({0}, {1}, {2}, {n}, {3})", N::AllToAll, false,
        "Chunk `q` of every team PE's `src` (team size x n) to PE `q`: chunk `r` of `dst` (team size x n) is chunk `team_my_pe` of rank `r`'s `src`, by the whole block with the same block of every PE, over `scratch` as `team_all_reduce_block` (the same protocol; `dst` apart from `src`; `scratch` of `device_scratch_len::<T>(team size, n)` words)."),
    row("team_broadcast_block", G::PeerCollective, F::Free, TEAM_BROADCAST_ARGS, R::Unit, S::Block, RMA,
        "pgas_ll_bcast_block<{C}, false>({0}, {1}, {2}, {n}, {4}, {3})", N::Min(1, 2), false,
        "Team rank `root`'s `src` into every team PE's `dst` (`dst` may be `src`), by the whole block with the same block of every PE, over `scratch` as `team_all_reduce_block` (the same protocol and scratch): only the root sends data lines, each other rank one flag-only line to each peer, so the data crosses NVLink once, from the root to each PE."),
    row("team_broadcast_relay_block", G::PeerCollective, F::Free, TEAM_BROADCAST_ARGS, R::Unit, S::Block, RMA,
        "pgas_ll_bcast_block<{C}, true>({0}, {1}, {2}, {n}, {4}, {3})", N::Min(1, 2), false,
        "`team_broadcast_block` in two crossings, for larger data: the root sends each other rank a chunk of the lines, which it passes on to the rest, so the root's links carry one copy of the data instead of one per peer (on 2 PEs it is `team_broadcast_block`)."),
    // Peer memory.
    // Any storage type (FP8 included): a peer view is a pointer, not an NVSHMEM typed call.
    row("peer", G::PeerMemory, F::Method, &[("x", A::SymSrc), ("pe", A::Pe)], R::PeerView, S::Thread, SHARED,
        "(({C} *)nvshmem_ptr({0}, {1}))", N::None, false,
        "`x.peer(pe)`: view of `x` on PE `pe` for plain loads and stores over NVLink (index it)."),
    row("has_peer", G::PeerMemory, F::Method, &[("x", A::SymSrc), ("pe", A::Pe)], BOOL, S::Thread, SHARED,
        "(nvshmem_ptr({0}, {1}) != NULL)", N::None, false,
        "`x.has_peer(pe)`: whether PE `pe` is load/store reachable."),
    // Buffers.
    row("len", G::Buffer, F::Method, &[("x", A::AnyBuf)], R::Exact(Scalar::Usize), S::Thread, NONE,
        "((size_t){0.len})", N::None, false, "`x.len()`: number of elements (also of a local array `[v; n]`, where it is the constant `n`)."),
    // Tiles.
    row("dyn_shared", G::Tiles, F::Free, &[], R::DynShared, S::Block, SHARED, "(({C} *)pgas_dyn_smem)", N::None, false,
        "`let s = dyn_shared::<T>();` views the block's dynamic shared memory (`LaunchConfig::with_shared_mem(bytes)`, over 48 KiB allowed up to the GPU's limit) as `bytes / size_of::<T>()` elements, 128-byte aligned. Every call views the same bytes: slice it to split."),
    row("cp_async_16", G::Tiles, F::Free, &[("smem", A::Bytes16 { space: SMEM, mutable: true }), ("src", A::Bytes16 { space: GMEM, mutable: false })],
        R::Unit, S::Thread, SHARED, "pgas_cp_async_16({0}, {1})", N::None, false,
        "Start copying 16 bytes from global memory (`SymTensor`, `CudaSlice`, peer view) to shared memory without registers (`cp.async.cg`); both 16-byte aligned. Complete with `cp_async_commit` and `cp_async_wait`."),
    row("cp_async_commit", G::Tiles, F::Free, &[], R::Unit, S::Thread, NONE, "pgas_cp_async_commit()", N::None, false,
        "Close the group of this thread's `cp_async_16` copies started since the last commit."),
    row("cp_async_wait", G::Tiles, F::Free, &[("n", A::Const(Scalar::U32))], R::Unit, S::Thread, NONE, "pgas_cp_async_wait<{0}>()", N::None, false,
        "Wait until at most `n` of this thread's committed groups are in flight (`n`: a literal or comptime value); `sync_threads()` after it to see the other threads' copies."),
    row("load_vec16", G::Tiles, F::Free, &[("src", A::Bytes16 { space: Space::Any, mutable: false })], R::Vec16, S::Thread, SHARED, "pgas_load_vec16({0})", N::None, false,
        "Load 16 bytes (`16 / size_of::<T>()` elements from `src[i]` on, 16-byte aligned) in one instruction."),
    row("store_vec16", G::Tiles, F::Free, &[("dst", A::Bytes16 { space: Space::Any, mutable: true }), ("v", A::Vec16)], R::Unit, S::Thread, SHARED, "pgas_store_vec16({0}, {1})", N::None, false,
        "Store 16 bytes loaded by `load_vec16` (of the same `T`) at `dst[i]` on, 16-byte aligned."),
    row("vec16_get", G::Tiles, F::Free, &[("v", A::Vec16), ("j", A::Exact(Scalar::U32))], R::Elem, S::Thread, SHARED, "pgas_vec16_get<{C}>({0}, {1})", N::None, false,
        "Lane `j` of `v` (element `i + j` of the `load_vec16(&x[i])` it came from), `j < 16 / size_of::<T>()` (past it the value is unspecified; no memory is touched). Registers only: a constant `j` (a literal, or the counter of a loop with constant bounds the compiler unrolls) folds to a move, another costs a few selects."),
    row("vec16_set", G::Tiles, F::Free, &[("v", A::Vec16), ("j", A::Exact(Scalar::U32)), ("x", A::Value)], R::Vec16, S::Thread, SHARED, "pgas_vec16_set<{C}>({0}, {1}, {2})", N::None, false,
        "`v` with lane `j` replaced by `x` (`v = vec16_set(v, j, x);`), `j < 16 / size_of::<T>()` (past it the result is unspecified); element-wise arithmetic on 16-byte vectors is `vec16_get` and `vec16_set` over the lanes."),
    row("idx2", G::Tiles, F::Free, &[("row", A::Exact(Scalar::Usize)), ("col", A::Col(2)), ("ld", A::Exact(Scalar::Usize))], R::Exact(Scalar::Usize), S::Thread, NONE,
        "({0} * {2} + {1})", N::None, false,
        "Index of (`row`, `col`) in a row-major tile of `ld` elements per row; the checked variant traps when `col >= ld`."),
    // Tensor cores.
    row("frag_a", G::Tensor, F::Free, &[], R::FragArray(FragKind::A), S::Thread, FRAG_A, "pgas_frag_a name[N]", N::None, false,
        "`let mut a = frag_a::<T, N>();`: N fragments of A (16 x 16, row-major, of 16-bit `T`; 16 x 32 of FP8 `T`, for `pack_a_k32`; 4 `u32` registers a lane), zeroed. Index them with constants (loops over them are unrolled)."),
    row("frag_b", G::Tensor, F::Free, &[], R::FragArray(FragKind::B), S::Thread, HALF16, "pgas_frag_b name[N]", N::None, false,
        "`let mut b = frag_b::<T, N>();`: N fragments of B (16 x 8, column-major; 2 `u32` registers a lane), zeroed."),
    row("frag_c", G::Tensor, F::Free, &[], R::FragArray(FragKind::C), S::Thread, ACC, "pgas_frag_c name[N]", N::None, false,
        "`let mut c = frag_c::<f32, N>();`: N accumulators (16 x 8 `f32`), zeroed. Lane `l` holds `c[i][0..2]` at row `l / 4`, columns `2 * (l % 4) + 0..2`, and `c[i][2..4]` 8 rows below."),
    row("pack_a", G::Tensor, F::Free, &[("a", A::Frag { kind: FragKind::A, mutable: true }), ("acc", A::AccIn { n: 2 })],
        R::Unit, S::Thread, HALF16, "pgas_pack_a_{T}({0}, {1})", N::None, false,
        "`a` = the 16 x 16 tile that the accumulators `acc[i]` (columns 0..8) and `acc[i + 1]` (8..16) hold, each value rounded to `T` (the accumulator layout of a warp's 16 rows is the A layout): the probabilities of an attention's `S = Q K^T` become the A operand of `P V` (`mma_sync`, `wgmma_m64nNk16_rs`) in registers. Convert before `wgmma_fence`: a conversion between `wgmma`s makes ptxas fence each of them."),
    row("pack_a_k32", G::Tensor, F::Free, &[("a", A::Frag { kind: FragKind::A, mutable: true }), ("acc", A::AccIn { n: 4 })],
        R::Unit, S::Thread, FP8, "pgas_pack_a_k32_{T}({0}, {1})", N::None, false,
        "`a` = the 16 x 32 tile that the accumulators `acc[i..i + 4]` hold, each value rounded to FP8 `T` (saturating), as the A fragment of `wgmma_m64nNk32_rs`, in a permuted K order: the fragment's K index `4 t + j` (and `16 + 4 t + j`) holds the accumulators' column `2 t + [0, 1, 8, 9][j]` (and `16 +` that), for `t` in 0..4, so no value leaves its thread. The B operand's K rows must be permuted the same way: row `k` of B in shared memory holds the product's row `32 (k / 32) + perm(k % 32)` (an attention stores V's keys so). Convert before `wgmma_fence`, as `pack_a`."),
    row("ldmatrix_x4", G::Tensor, F::Free, &[("a", A::Frag { kind: FragKind::A, mutable: true }), ("smem", A::Bytes16 { space: SMEM, mutable: false })],
        R::Unit, S::FullWarp, HALF16, "pgas_ldmatrix_x4({0}, {1})", N::None, false,
        "Load an A fragment from a row-major 16 x 16 tile in shared memory (`ldmatrix.x4`): lane `l` passes the address of row `l % 16`, column `8 * (l / 16)`."),
    row("ldmatrix_x2", G::Tensor, F::Free, &[("b", A::Frag { kind: FragKind::B, mutable: true }), ("smem", A::Bytes16 { space: SMEM, mutable: false })],
        R::Unit, S::FullWarp, HALF16, "pgas_ldmatrix_x2({0}, {1})", N::None, false,
        "Load a B fragment from an 8 x 16 tile stored `[n][k]` in shared memory (`ldmatrix.x2`): lane `l` passes the address of row `l % 8`, column `8 * ((l / 8) % 2)`."),
    row("ldmatrix_x2_trans", G::Tensor, F::Free, &[("b", A::Frag { kind: FragKind::B, mutable: true }), ("smem", A::Bytes16 { space: SMEM, mutable: false })],
        R::Unit, S::FullWarp, HALF16, "pgas_ldmatrix_x2_trans({0}, {1})", N::None, false,
        "Load a B fragment from a row-major 16 x 8 `[k][n]` tile in shared memory (`ldmatrix.x2.trans`): lane `l` passes the address of row `l % 16`, column 0."),
    row("ldmatrix_x4_trans", G::Tensor, F::Free, &[("b0", A::Frag { kind: FragKind::B, mutable: true }), ("b1", A::Frag { kind: FragKind::B, mutable: true }), ("smem", A::Bytes16 { space: SMEM, mutable: false })],
        R::Unit, S::FullWarp, HALF16, "pgas_ldmatrix_x4_trans({0}, {1}, {2})", N::None, false,
        "Load two B fragments (columns 0..8 into `b0`, 8..16 into `b1`) from a row-major 16 x 16 `[k][n]` tile in shared memory (`ldmatrix.x4.trans`): lane `l` passes the address of row `l % 16`, column `8 * (l / 16)`."),
    row("mma_sync", G::Tensor, F::Free, &[("c", A::Frag { kind: FragKind::C, mutable: true }), ("a", A::Frag { kind: FragKind::A, mutable: false }), ("b", A::Frag { kind: FragKind::B, mutable: false })],
        R::Unit, S::FullWarp, HALF16, "pgas_mma_{T}({0}, {1}, {2})", N::None, false,
        "`c += a * b` on the tensor cores, f32 accumulate (`mma.sync.aligned.m16n8k16.row.col.f32.{T}.{T}.f32`)."),
    // Hopper.
    row("mbarrier_init", G::Hopper, F::Free, &[("bar", A::Mbar { mutable: true }), ("count", A::Exact(Scalar::U32))], R::Unit, S::Thread, NONE,
        "pgas_mbarrier_init({0}, {1})", N::None, false,
        "Initialize the mbarrier `bar` (an element of a shared `u64` array) for `count` arrivals a phase; one thread, then `sync_threads()` before anyone uses it."),
    row("mbarrier_arrive", G::Hopper, F::Free, &[("bar", A::Mbar { mutable: true })], R::Unit, S::Thread, NONE,
        "pgas_mbarrier_arrive({0})", N::None, false,
        "Arrive on `bar` (release: this thread's earlier shared-memory accesses are visible to whoever waits for the phase)."),
    row("mbarrier_arrive_expect_tx", G::Hopper, F::Free, &[("bar", A::Mbar { mutable: true }), ("bytes", A::Exact(Scalar::U32))], R::Unit, S::Thread, NONE,
        "pgas_mbarrier_arrive_expect_tx({0}, {1})", N::None, false,
        "Arrive on `bar` and add `bytes` to the transfer its phase waits for: the bytes of the `tma_load_2d` copies that complete on it."),
    row("mbarrier_wait", G::Hopper, F::Free, &[("bar", A::Mbar { mutable: false }), ("parity", A::Exact(Scalar::U32))], R::Unit, S::Thread, NONE,
        "pgas_mbarrier_wait({0}, {1}, {line})", N::None, false,
        "Wait until the phase of `bar` with parity `parity` (0, 1, 0, ... for its 1st, 2nd, 3rd phase) has completed (`mbarrier.try_wait.parity` loop). A wait that lasts over about 2^35 cycles (some 15 s) traps instead of hanging; the checked variant prints the Rust line first (the plain one cannot: a `printf` in a kernel makes ptxas serialize its `wgmma`s)."),
    row("fence_proxy_async", G::Hopper, F::Free, &[], R::Unit, S::Thread, NONE,
        "pgas_fence_proxy_async()", N::None, false,
        "Order this thread's ordinary shared-memory writes before later reads by the copy engine or the tensor cores (`fence.proxy.async.shared::cta`); then a barrier."),
    row("fence_proxy_async_global", G::Hopper, F::Free, &[], R::Unit, S::Thread, NONE,
        "pgas_fence_proxy_async_global()", N::None, false,
        "Order this thread's global-memory accesses, such as the read of a flag that says data has landed, before its later copy-engine accesses of global memory (`fence.proxy.async.global`): `tma_load_2d` after waiting for data another PE or a copy stream wrote."),
    row("tma_load_2d", G::Hopper, F::Free, &[("dst", A::TmaDst(1)), ("map", A::Map), ("bar", A::Mbar { mutable: true }), ("col", A::Exact(Scalar::I32)), ("row", A::Exact(Scalar::I32))],
        R::Unit, S::Thread, TMA, "pgas_tma_load_2d({0}, &{1}, {2}, {3}, {4})", N::None, false,
        "Start the copy engine on the tile of `map` whose first element is (`row`, `col`) of the tensor, into shared memory at `dst` (128-byte aligned; 1024 for a 128-byte swizzle read by `wgmma`); it completes on `bar` with the tile's bytes (`cp.async.bulk.tensor.2d`). The tensor may be a `CudaSlice`, a `SymTensor` or another PE's copy of one (`TensorMap::tiled_2d_peer`)."),
    row("wgmma_fence", G::Hopper, F::Free, &[], R::Unit, S::Warpgroup, NONE, "pgas_wgmma_fence()", N::None, false,
        "Before the first `wgmma_*` of a batch: orders the accumulators' register writes before the tensor cores read them (`wgmma.fence`)."),
    row("wgmma_fence_operand", G::Hopper, F::Free, &[("acc", A::Frag { kind: FragKind::C, mutable: true })], R::Unit, S::Thread, NONE, "pgas_wgmma_fence_operand({0})", N::None, false,
        "Pin the accumulator `acc[i]`'s registers here: the compiler moves no arithmetic on them across this point (CUTLASS's `warpgroup_fence_operand`). Call it on each accumulator a thread rescales before `wgmma_fence`, or the compiler may sink the arithmetic into the batch, where ptxas has to wait for the `wgmma`s in flight (C7517)."),
    row("wgmma_commit", G::Hopper, F::Free, &[], R::Unit, S::Warpgroup, NONE, "pgas_wgmma_commit()", N::None, false,
        "Close the batch of `wgmma_*` issued since the last commit (`wgmma.commit_group`)."),
    row("wgmma_wait", G::Hopper, F::Free, &[("n", A::Const(Scalar::U32))], R::Unit, S::Warpgroup, NONE, "pgas_wgmma_wait<{0}>()", N::None, false,
        "Wait until at most `n` committed batches are in flight (`wgmma.wait_group`, `n` a constant); only then read the accumulators or reuse the operands' shared memory."),
    row("wgmma_m64n64k16", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 8 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 64 })],
        R::Unit, S::Warpgroup, HALF16, "pgas_wgmma_m64n64k16_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}))", N::None, false,
        "`acc[i..i + 8] += a * b` by the warpgroup (`wgmma.mma_async` m64n64k16, f32 accumulate): `a` is 64 rows x 16 of K, `b` 64 rows (N) x 16 of K, both K-major tiles in shared memory as `tma_load_2d` leaves them with a 128-byte swizzle (rows of 64 elements); pass row 0 and the K offset (0, 16, 32, 48). Warp `w` of the warpgroup holds rows `16 w ..` of the result, fragment `i + j` columns `8 j ..`, laid out as `frag_c`. Asynchronous: `wgmma_fence` before, `wgmma_commit` and `wgmma_wait` after."),
    row("wgmma_m64n128k16", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 16 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 128 })],
        R::Unit, S::Warpgroup, HALF16, "pgas_wgmma_m64n128k16_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}))", N::None, false,
        "`wgmma_m64n64k16` with N = 128: `acc[i..i + 16]`, `b` 128 rows."),
    row("wgmma_m64n176k16", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 22 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 176 })],
        R::Unit, S::Warpgroup, HALF16, "pgas_wgmma_m64n176k16_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}))", N::None, false,
        "`wgmma_m64n64k16` with N = 176: `acc[i..i + 22]`, `b` 176 rows (attention's tile of keys at head dim 128)."),
    row("wgmma_m64n256k16", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 32 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 256 })],
        R::Unit, S::Warpgroup, HALF16, "pgas_wgmma_m64n256k16_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}))", N::None, false,
        "`wgmma_m64n64k16` with N = 256: `acc[i..i + 32]`, `b` 256 rows."),
    row("wgmma_m64n64k32", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 8 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 64 })],
        R::Unit, S::Warpgroup, FP8, "pgas_wgmma_m64n64k32_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}))", N::None, false,
        "`wgmma_m64n64k16` on FP8 (`wgmma.mma_async` m64n64k32, f32 accumulate, `a` and `b` of one type): `acc[i..i + 8] += a * b`, `a` 64 rows x 32 of K, `b` 64 rows (N) x 32 of K, both K-major 128-byte-swizzled tiles in shared memory (rows of 128 elements); pass row 0 and the K offset (0, 32, 64, 96). The accumulator is `frag_c::<f32, N>`, laid out as for `wgmma_m64n64k16`."),
    row("wgmma_m64n128k32", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 16 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 128 })],
        R::Unit, S::Warpgroup, FP8, "pgas_wgmma_m64n128k32_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}))", N::None, false,
        "`wgmma_m64n64k32` with N = 128: `acc[i..i + 16]`, `b` 128 rows."),
    row("wgmma_m64n256k32", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 32 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 256 })],
        R::Unit, S::Warpgroup, FP8, "pgas_wgmma_m64n256k32_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}))", N::None, false,
        "`wgmma_m64n64k32` with N = 256: `acc[i..i + 32]`, `b` 256 rows."),
    row("wgmma_m64n64k16_acc", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 8 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 64 }), ("add", A::Exact(Scalar::Bool))],
        R::Unit, S::Warpgroup, HALF16, "pgas_wgmma_m64n64k16_acc_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}), {3})", N::None, false,
        "`wgmma_m64n64k16` that adds to the accumulators only when `add` holds (PTX's scale-d): with `add == false` `acc[i..i + 8] = a * b`, whatever the accumulators held, so they need no zeroing before the first K step (an attention's `S = Q K^T` each tile). `add` may be a runtime value."),
    row("wgmma_m64n128k16_acc", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 16 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 128 }), ("add", A::Exact(Scalar::Bool))],
        R::Unit, S::Warpgroup, HALF16, "pgas_wgmma_m64n128k16_acc_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}), {3})", N::None, false,
        "`wgmma_m64n128k16` with `add` as in `wgmma_m64n64k16_acc`: `acc[i..i + 16]`."),
    row("wgmma_m64n176k16_acc", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 22 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 176 }), ("add", A::Exact(Scalar::Bool))],
        R::Unit, S::Warpgroup, HALF16, "pgas_wgmma_m64n176k16_acc_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}), {3})", N::None, false,
        "`wgmma_m64n176k16` with `add` as in `wgmma_m64n64k16_acc`: `acc[i..i + 22]`."),
    row("wgmma_m64n256k16_acc", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 32 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 256 }), ("add", A::Exact(Scalar::Bool))],
        R::Unit, S::Warpgroup, HALF16, "pgas_wgmma_m64n256k16_acc_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}), {3})", N::None, false,
        "`wgmma_m64n256k16` with `add` as in `wgmma_m64n64k16_acc`: `acc[i..i + 32]`."),
    row("wgmma_m64n64k32_acc", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 8 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 64 }), ("add", A::Exact(Scalar::Bool))],
        R::Unit, S::Warpgroup, FP8, "pgas_wgmma_m64n64k32_acc_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}), {3})", N::None, false,
        "`wgmma_m64n64k32` with `add` as in `wgmma_m64n64k16_acc`: `acc[i..i + 8]`."),
    row("wgmma_m64n128k32_acc", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 16 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 128 }), ("add", A::Exact(Scalar::Bool))],
        R::Unit, S::Warpgroup, FP8, "pgas_wgmma_m64n128k32_acc_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}), {3})", N::None, false,
        "`wgmma_m64n128k32` with `add` as in `wgmma_m64n64k16_acc`: `acc[i..i + 16]`."),
    row("wgmma_m64n256k32_acc", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 32 }), ("a", A::WgTile { rows: 64 }), ("b", A::WgTile { rows: 256 }), ("add", A::Exact(Scalar::Bool))],
        R::Unit, S::Warpgroup, FP8, "pgas_wgmma_m64n256k32_acc_{T}({0}, pgas_wgmma_desc({1}), pgas_wgmma_desc({2}), {3})", N::None, false,
        "`wgmma_m64n256k32` with `add` as in `wgmma_m64n64k16_acc`: `acc[i..i + 32]`."),
    row("wgmma_m64n64k32_rs", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 8 }), ("p", A::Frag { kind: FragKind::A, mutable: false }), ("b", A::WgTile { rows: 64 })],
        R::Unit, S::Warpgroup, FP8, "pgas_wgmma_m64n64k32_rs_{T}({0}, {1}, pgas_wgmma_desc({2}))", N::None, false,
        "`acc[i..i + 8] += P * b` on FP8 with A from registers (`wgmma.mma_async` m64n64k32, f32 accumulate): P is the 64 x 32 tile whose 16 rows of each warp `p[j]` holds (`pack_a_k32`, whose K order `b`'s rows must follow), `b` 64 rows (N) x 32 of K, K-major in shared memory as `wgmma_m64n64k32` takes it (FP8 has no MN-major operand: a `[K][N]` tensor such as V is stored transposed). Asynchronous, as `wgmma_m64n64k16`."),
    row("wgmma_m64n128k32_rs", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 16 }), ("p", A::Frag { kind: FragKind::A, mutable: false }), ("b", A::WgTile { rows: 128 })],
        R::Unit, S::Warpgroup, FP8, "pgas_wgmma_m64n128k32_rs_{T}({0}, {1}, pgas_wgmma_desc({2}))", N::None, false,
        "`wgmma_m64n64k32_rs` with N = 128: `acc[i..i + 16]`, `b` 128 rows."),
    row("wgmma_m64n256k32_rs", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 32 }), ("p", A::Frag { kind: FragKind::A, mutable: false }), ("b", A::WgTile { rows: 256 })],
        R::Unit, S::Warpgroup, FP8, "pgas_wgmma_m64n256k32_rs_{T}({0}, {1}, pgas_wgmma_desc({2}))", N::None, false,
        "`wgmma_m64n64k32_rs` with N = 256: `acc[i..i + 32]`, `b` 256 rows."),
    row("wgmma_m64n64k16_rs", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 8 }), ("p", A::Frag { kind: FragKind::A, mutable: false }), ("b", A::WgTileMn { n: 64, chunk: 3 }), ("chunk", A::Exact(Scalar::U32))],
        R::Unit, S::Warpgroup, HALF16, "pgas_wgmma_m64n64k16_rs_{T}({0}, {1}, pgas_wgmma_desc_mn({2}, {3}))", N::None, false,
        "`acc[i..i + 8] += P * b` by the warpgroup with A from registers (`wgmma.mma_async` m64n64k16, A in registers, B transposed): P is the 64 x 16 tile whose 16 rows of each warp `p[j]` holds, an A fragment (`pack_a` makes it from an earlier `wgmma`'s accumulators), so the probabilities of an attention's `S = Q K^T` feed `P V` without leaving registers; `b` is 16 rows of K by N = 64 columns, MN-major (N contiguous, as a `[K][N]` row-major tensor such as V is), at the K step's row of a 128-byte-swizzled tile of 64 columns; `chunk` is the elements between two such tiles (for N > 64). Asynchronous, as `wgmma_m64n64k16`."),
    row("wgmma_m64n128k16_rs", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 16 }), ("p", A::Frag { kind: FragKind::A, mutable: false }), ("b", A::WgTileMn { n: 128, chunk: 3 }), ("chunk", A::Exact(Scalar::U32))],
        R::Unit, S::Warpgroup, HALF16, "pgas_wgmma_m64n128k16_rs_{T}({0}, {1}, pgas_wgmma_desc_mn({2}, {3}))", N::None, false,
        "`wgmma_m64n64k16_rs` with N = 128: `acc[i..i + 16]`, `b` two tiles of 64 columns, `chunk` elements apart."),
    row("wgmma_m64n256k16_rs", G::Hopper, F::Free, &[("acc", A::WgAcc { n: 32 }), ("p", A::Frag { kind: FragKind::A, mutable: false }), ("b", A::WgTileMn { n: 256, chunk: 3 }), ("chunk", A::Exact(Scalar::U32))],
        R::Unit, S::Warpgroup, HALF16, "pgas_wgmma_m64n256k16_rs_{T}({0}, {1}, pgas_wgmma_desc_mn({2}, {3}))", N::None, false,
        "`wgmma_m64n64k16_rs` with N = 256: `acc[i..i + 32]`, `b` four tiles of 64 columns, `chunk` elements apart."),
    // Thread-block clusters, multicast, register reallocation (sm_90a).
    row("cluster_ctarank", G::Cluster, F::Free, &[], U32, S::Thread, NONE, "pgas_cluster_ctarank()", N::None, false,
        "This block's rank in its thread-block cluster, 0 .. `cluster_nctarank()` (`%cluster_ctarank`); 0 without clusters. Launch in clusters with `LaunchConfig::with_cluster`."),
    row("cluster_nctarank", G::Cluster, F::Free, &[], U32, S::Thread, NONE, "pgas_cluster_nctarank()", N::None, false,
        "Blocks in this block's cluster (`%cluster_nctarank`); 1 without clusters."),
    row("cluster_id_x", G::Cluster, F::Free, &[], U32, S::Thread, NONE, "pgas_cluster_id_x()", N::None, false,
        "This cluster's index in the grid along x (`%clusterid.x`): `block_idx_x() / cluster width` for a 1-D grid."),
    row("cluster_count_x", G::Cluster, F::Free, &[], U32, S::Thread, NONE, "pgas_cluster_count_x()", N::None, false,
        "Clusters in the grid along x (`%nclusterid.x`)."),
    row("cluster_sync", G::Cluster, F::Free, &[], R::Unit, S::Block, NONE, "pgas_cluster_sync()", N::None, false,
        "Barrier of every thread of every block of the cluster, with release and acquire at cluster scope (`barrier.cluster.arrive` + `wait`): shared-memory writes before it (`cluster_peer` stores, mbarrier inits) are visible to the cluster after it. Call it after initializing mbarriers that peers arrive on or copy into, and before a block exits while peers may still touch its shared memory."),
    row("cluster_arrive", G::Cluster, F::Free, &[], R::Unit, S::Block, NONE, "pgas_cluster_arrive()", N::None, false,
        "The first half of `cluster_sync` (`barrier.cluster.arrive.release`): work may go on before `cluster_wait`."),
    row("cluster_wait", G::Cluster, F::Free, &[], R::Unit, S::Block, NONE, "pgas_cluster_wait()", N::None, false,
        "The second half of `cluster_sync` (`barrier.cluster.wait.acquire`): waits until every thread of the cluster has arrived."),
    row("cluster_peer", G::Cluster, F::Method, &[("s", A::SharedBuf), ("rank", A::ClusterRank)], R::ClusterView, S::Thread, SHARED,
        "(({C} *)pgas_cluster_map({0}, {1}))", N::None, false,
        "`s.cluster_peer(rank)`: the same shared buffer in block `rank` of the cluster (distributed shared memory, `mapa`), for plain loads and stores (index it); `rank < cluster_nctarank()` (the checked variant traps otherwise). Order them with `cluster_sync`."),
    row("mbarrier_arrive_cluster", G::Cluster, F::Free, &[("bar", A::Mbar { mutable: true }), ("rank", A::ClusterRank)], R::Unit, S::Thread, NONE,
        "pgas_mbarrier_arrive_cluster({0}, {1})", N::None, false,
        "Arrive on the mbarrier at `bar`'s place in block `rank` of the cluster (release at CTA scope, as `mbarrier_arrive`): how a consumer frees a slot that a peer's multicast copy fills. `rank < cluster_nctarank()` (the checked variant traps otherwise)."),
    row("tma_load_2d_multicast", G::Cluster, F::Free, &[("dst", A::TmaDst(1)), ("map", A::Map), ("bar", A::Mbar { mutable: true }), ("col", A::Exact(Scalar::I32)), ("row", A::Exact(Scalar::I32)), ("mask", A::ClusterMask)],
        R::Unit, S::Thread, TMA, "pgas_tma_load_2d_multicast({0}, &{1}, {2}, {3}, {4}, {5})", N::None, false,
        "`tma_load_2d` into every block of the cluster whose rank is a bit of `mask`: one read of global memory lands at `dst`'s place in each of them and completes on the mbarrier at `bar`'s place in each (`.multicast::cluster`); each of those mbarriers expects the tile's bytes. `mask` must be non-zero and within the cluster (the checked variant traps otherwise)."),
    row("sync_named", G::Cluster, F::Free, &[("id", A::Exact(Scalar::U32)), ("threads", A::Const(Scalar::U32))], R::Unit, S::Thread, NONE,
        "pgas_sync_named<{1}>({0})", N::None, false,
        "Barrier of the `threads` threads (a constant multiple of 32: whole warps) that call it with the same `id` (1 to 15; 0 is `sync_threads`'s), ordering their shared-memory accesses (`bar.sync id, threads`): one warpgroup's barrier while the block's other warpgroups do other work."),
    row("arrive_named", G::Cluster, F::Free, &[("id", A::Exact(Scalar::U32)), ("threads", A::Const(Scalar::U32))], R::Unit, S::Thread, NONE,
        "pgas_arrive_named<{1}>({0})", N::None, false,
        "Arrive on the named barrier `id` of `threads` threads without waiting (`bar.arrive id, threads`): with `sync_named` on the same `id` and count, one group of warps lets another go on, as two warpgroups taking turns at the tensor cores do (each waits on its own barrier, then arrives on the other's)."),
    row("tma_store_2d", G::Cluster, F::Free, &[("map", A::MapMut), ("src", A::TmaSrc(0)), ("col", A::Exact(Scalar::I32)), ("row", A::Exact(Scalar::I32))],
        R::Unit, S::Thread, TMA, "pgas_tma_store_2d(&{0}, {1}, {2}, {3})", N::None, false,
        "Start the copy engine on the tile of shared memory at `src` (128-byte aligned, laid out as the map's tile and swizzle), storing it into the tensor of `map` from element (`row`, `col`) on (`cp.async.bulk.tensor.2d.global.shared::cta`). Each writing thread calls `fence_proxy_async()` and the writers synchronize before one thread stores; close the stores with `tma_store_commit` and wait with `tma_store_wait_read` (before reusing `src`) or `tma_store_wait` (before others read the tensor). `map` is a `&mut TensorMap<T>` parameter, built with `TensorMap::tiled_2d_mut` (a local tensor, or a peer's symmetric copy with `tiled_2d_peer_mut`)."),
    row("tma_reduce_add_2d", G::Cluster, F::Free, &[("map", A::MapMut), ("src", A::TmaSrc(0)), ("col", A::Exact(Scalar::I32)), ("row", A::Exact(Scalar::I32))],
        R::Unit, S::Thread, TMA_ADD, "pgas_tma_reduce_add_2d(&{0}, {1}, {2}, {3})", N::None, false,
        "`tma_store_2d` that adds the tile into the tensor element by element (`cp.reduce.async.bulk.tensor.2d ... .add`), atomically per element: the epilogue of a GEMM + reduce-scatter, into a local tensor or a peer's copy."),
    row("tma_store_commit", G::Cluster, F::Free, &[], R::Unit, S::Thread, NONE, "pgas_tma_store_commit()", N::None, false,
        "Close the group of this thread's TMA stores started since the last commit (`cp.async.bulk.commit_group`)."),
    row("tma_store_wait", G::Cluster, F::Free, &[("n", A::Const(Scalar::U32))], R::Unit, S::Thread, NONE, "pgas_tma_store_wait<{0}>()", N::None, false,
        "Wait until at most `n` of this thread's committed store groups are in flight, the others' writes done (`cp.async.bulk.wait_group`, `n` a constant)."),
    row("tma_store_wait_read", G::Cluster, F::Free, &[("n", A::Const(Scalar::U32))], R::Unit, S::Thread, NONE, "pgas_tma_store_wait_read<{0}>()", N::None, false,
        "Wait until at most `n` of this thread's committed store groups still read their shared memory (`cp.async.bulk.wait_group.read`): their sources may then be overwritten."),
    row("setmaxnreg_inc", G::Cluster, F::Free, &[("regs", A::Const(Scalar::U32))], R::Unit, S::Warpgroup, NONE, "pgas_setmaxnreg_inc<{0}>()", N::None, false,
        "Raise this warpgroup's registers per thread to `regs` (24 to 256, a multiple of 8; `setmaxnreg.inc`), taking them from warpgroups that released theirs with `setmaxnreg_dec`: the multiplying warpgroups of a warp-specialized kernel. The kernel must declare its block (`#[pgas_kernel(max_threads = N)]`, launched with exactly N threads: the checked variant traps otherwise), and each warpgroup's role is one branch of an `if`/`else`."),
    row("setmaxnreg_dec", G::Cluster, F::Free, &[("regs", A::Const(Scalar::U32))], R::Unit, S::Warpgroup, NONE, "pgas_setmaxnreg_dec<{0}>()", N::None, false,
        "Lower this warpgroup's registers per thread to `regs` (24 to 256, a multiple of 8; `setmaxnreg.dec`), releasing them for `setmaxnreg_inc`: the copy-engine feeding warpgroup. Same rules as `setmaxnreg_inc`."),
    row("stmatrix_x4", G::Cluster, F::Free, &[("dst", A::Bytes16 { space: SMEM, mutable: true }), ("acc", A::AccIn { n: 2 })],
        R::Unit, S::FullWarp, HALF16, "pgas_stmatrix_x4_{T}({0}, {1})", N::None, false,
        "Store the 16 x 16 tile of accumulators `acc[i]` (columns 0..8) and `acc[i + 1]` (8..16), rounded to `T`, into shared memory (`stmatrix.x4`): lane `l` passes the address of row `l % 16`, column `8 * (l / 16)` (16-byte aligned; rows may be anywhere, so a swizzled layout is the caller's to compute). The epilogue of a `wgmma` tile before a `tma_store_2d`."),
    // Multicast (NVLink SHARP): through the team's multicast address of a symmetric element.
    row("has_multicast", G::Multicast, F::Method, &[("x", A::SymSrc), ("team", A::Team)], BOOL, S::Thread, RMA,
        "(pgas_mc_ptr({1}, {0}) != NULL)", N::None, false,
        "`x.has_multicast(team)`: whether `team` has a multicast address for `x` (NVLink SHARP on an NVSwitch system, NVLS not disabled, `x` in a multicast-capable heap). Test it before the `multimem_*` calls, which trap without one; the host's `SymTensor::multicast(team)` says why not."),
    row("multimem_ld_add", G::Multicast, F::Free, MM_READ_ARGS, R::Elem, S::Thread, MM_ADD,
        "pgas_multimem_ld_add_{T}(pgas_mc_elem({1}, {0}, {line}))", N::None, false,
        "The sum of `x[i]` over every PE of `team`, read in one load through the multicast address (`multimem.ld_reduce.relaxed.sys.add`): the switch adds the copies. Traps where the team has no multicast address for `x` (test `x.has_multicast(team)`)."),
    row("multimem_ld_min", G::Multicast, F::Free, MM_READ_ARGS, R::Elem, S::Thread, MM_MINMAX,
        "pgas_multimem_ld_min_{T}(pgas_mc_elem({1}, {0}, {line}))", N::None, false,
        "`multimem_ld_add` with the minimum over the team's copies (integers only)."),
    row("multimem_ld_max", G::Multicast, F::Free, MM_READ_ARGS, R::Elem, S::Thread, MM_MINMAX,
        "pgas_multimem_ld_max_{T}(pgas_mc_elem({1}, {0}, {line}))", N::None, false,
        "`multimem_ld_add` with the maximum over the team's copies (integers only)."),
    row("multimem_st", G::Multicast, F::Free, MM_WRITE_ARGS, R::Unit, S::Thread, MM_ADD,
        "pgas_multimem_st_{T}(pgas_mc_elem({1}, {0}, {line}), {2})", N::None, false,
        "Store `v` into `x[i]` on every PE of `team` with one store through the multicast address (`multimem.st.relaxed.sys`). Order it before others' reads as any remote store (a fence or barrier, then a signal). Traps without a multicast address."),
    row("multimem_red_add", G::Multicast, F::Free, MM_WRITE_ARGS, R::Unit, S::Thread, MM_ADD,
        "pgas_multimem_red_add_{T}(pgas_mc_elem({1}, {0}, {line}), {2})", N::None, false,
        "Add `v` into `x[i]` on every PE of `team` with one reduction through the multicast address (`multimem.red.relaxed.sys.add`), atomically per copy. Traps without a multicast address."),
];

/// The row for a free call `name(...)`.
pub fn free(name: &str) -> Option<&'static Intrinsic> {
    INTRINSICS
        .iter()
        .find(|r| r.name == name && r.form != Form::Method)
}

/// The row for a method call `x.name(...)`.
pub fn method(name: &str) -> Option<&'static Intrinsic> {
    INTRINSICS
        .iter()
        .find(|r| r.name == name && r.form != Form::Free)
}

/// The text `{T}` expands to for element type `elem`, if the row supports it.
pub fn type_text(row: &Intrinsic, elem: Scalar) -> Option<&'static str> {
    row.types.iter().find(|(s, _)| *s == elem).map(|(_, t)| *t)
}
