//! Fixed CUDA text every generated source starts with.

/// The first lines of every prelude (shared/notes/nvshmem-jit.md): IBGDA off (its header needs
/// `mlx5dv.h`), `std::` aliased to `cuda::std::` because NVSHMEM 3.4.5's `reduce.cuh` names
/// `std::is_integral`, and the FP8 types. `cuda_fp8.h` is in the prelude rather than added by
/// the kernels that use FP8 because batched sources (`crate::batch`) share the prelude and put
/// the rest of each source inside a namespace, where no header may be included; it costs a
/// p2p compile about 15 ms of its ~1 s.
macro_rules! prelude_head {
    () => {
        "#include <non_abi/nvshmem_build_options.h>
#undef NVSHMEM_IBGDA_SUPPORT        // else ibgda_device.cuh wants <infiniband/mlx5dv.h>
#include <cuda/std/type_traits>
namespace std { using namespace cuda::std; }   // 3.4.5's reduce.cuh:819 names std::is_integral
#include <cuda_fp8.h>                          // e4m3, e5m2 (NVSHMEM's headers bring fp16, bf16)
"
    };
}

/// NVSHMEM's device API without its collective headers, for kernels that use no barrier, sync or
/// collective.
macro_rules! p2p_headers {
    () => {
        "#include <device/nvshmem_defines.h>     // nvshmem.h without the collective headers
#include <device/nvshmemx_defines.h>
"
    };
}

/// Device helpers that wrap NVSHMEM calls, after NVSHMEM's headers in every prelude (and so in
/// the link-time library, which compiles the prelude's text).
///
/// `pgas_double_atomic_swap`: NVSHMEM 3.4.5's `nvshmem_double_atomic_swap` swaps the bits as an
/// `unsigned long long` and then converts that integer to `double` by value
/// (`NVSHMEM_TYPE_SWAP_CAST` in `nvshmem_defines.h`), so the old value -0.25 came back as
/// 13821547256400052224.0; swapping the bits through the `uint64` AMO returns them unchanged.
macro_rules! nvshmem_fixes {
    () => {
        "__device__ __forceinline__ double pgas_double_atomic_swap(double *x, double v, int pe) {
    return __longlong_as_double((long long)nvshmem_uint64_atomic_swap((uint64_t *)x, (uint64_t)__double_as_longlong(v), pe));
}
"
    };
}

/// The whole device API (`nvshmem.h`, `nvshmemx.h`), for kernels that call a device collective
/// (reduce, reduce-scatter, all-gather, all-to-all, broadcast).
pub const PRELUDE: &str = concat!(
    prelude_head!(),
    "#include <nvshmem.h>
#include <nvshmemx.h>
",
    nvshmem_fixes!()
);

/// The prelude of kernels that use no barrier, sync or collective: NVSHMEM's device API without
/// its collective headers (`nvshmem.h` minus `nvshmem{,x}_coll_defines.cuh`). Those headers
/// define a wrapper for every collective, type and operation, which instantiates NVSHMEM's
/// collective templates whether a kernel uses them or not: most of an NVRTC compile (docs/jit.md).
pub const PRELUDE_P2P: &str = concat!(prelude_head!(), p2p_headers!(), nvshmem_fixes!());

/// The prelude of kernels whose only collectives are barriers and syncs: the point-to-point one
/// plus NVSHMEM's barrier templates alone. The intrinsic table calls those templates
/// (`nvshmemi_barrier_threadgroup`, `nvshmemi_sync_threadgroup`) as NVSHMEM's own wrappers do,
/// so none of the other collectives is instantiated: a barrier kernel compiles in a third of the
/// time (docs/jit.md).
pub const PRELUDE_BARRIER: &str = concat!(
    prelude_head!(),
    p2p_headers!(),
    "#include <non_abi/device/coll/barrier.cuh>   // barriers and syncs, no other collective
",
    nvshmem_fixes!()
);

/// Which NVSHMEM headers a kernel needs, in increasing order: the checker keeps the largest its
/// calls (and its device functions' calls) need.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Prelude {
    /// No barrier, sync or collective: [`PRELUDE_P2P`].
    #[default]
    P2p,
    /// Barriers and syncs only: [`PRELUDE_BARRIER`].
    Barrier,
    /// A device collective: [`PRELUDE`].
    Full,
}

impl Prelude {
    /// Every prelude, the ones that contain another's text first (so [`Prelude::of_source`] finds
    /// the right one).
    pub const ALL: [Prelude; 3] = [Prelude::Full, Prelude::Barrier, Prelude::P2p];

    /// The CUDA text a source of this kind starts with.
    pub fn text(self) -> &'static str {
        match self {
            Prelude::P2p => PRELUDE_P2P,
            Prelude::Barrier => PRELUDE_BARRIER,
            Prelude::Full => PRELUDE,
        }
    }

    /// Whether kernels of this kind need a collective (cooperative) launch.
    pub fn collective(self) -> bool {
        self != Prelude::P2p
    }

    /// The prelude a (specialized) generated source starts with, if any.
    pub fn of_source(source: &str) -> Option<Prelude> {
        Prelude::ALL.into_iter().find(|p| source.contains(p.text()))
    }

    /// How progress lines and docs name it.
    pub fn name(self) -> &'static str {
        match self {
            Prelude::P2p => "point-to-point prelude",
            Prelude::Barrier => "barrier prelude",
            Prelude::Full => "full prelude",
        }
    }
}

/// Helpers both variants use. Integer `min`/`max`/`abs` are templates so each fixed-width type
/// keeps its own type (CUDA's overloads would promote `int8_t` to `int`).
pub const SUPPORT: &str =
    "// Rust accepts comparisons such as `x >= 0` on unsigned integers; NVRTC would warn (#186).
#pragma nv_diag_suppress 186
template <typename T> __device__ __forceinline__ T pgas_min(T a, T b) { return b < a ? b : a; }
template <typename T> __device__ __forceinline__ T pgas_max(T a, T b) { return a < b ? b : a; }
template <typename T> __device__ __forceinline__ T pgas_abs(T a) { return a < (T)0 ? (T)-a : a; }
__device__ __forceinline__ size_t pgas_min_len(unsigned long long a, unsigned long long b) {
    return (size_t)(a < b ? a : b);
}
// Two floats rounded to a 16-bit type, packed into a register (the first in the low half):
// `pack_a`, and `stmatrix_x4` of accumulators.
__device__ __forceinline__ uint32_t pgas_pack2_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}
__device__ __forceinline__ uint32_t pgas_pack2_f16(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}
// `exp2_approx`: not volatile, so the compiler may schedule it or drop it like arithmetic.
__device__ __forceinline__ float pgas_ex2_approx(float x) {
    float y;
    asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x));
    return y;
}
template <typename A> __device__ __forceinline__ A pgas_op_min2(A a, A b) { return pgas_min(a, b); }
template <> __device__ __forceinline__ float pgas_op_min2(float a, float b) { return fminf(a, b); }
template <> __device__ __forceinline__ double pgas_op_min2(double a, double b) { return fmin(a, b); }
template <typename A> __device__ __forceinline__ A pgas_op_max2(A a, A b) { return pgas_max(a, b); }
template <> __device__ __forceinline__ float pgas_op_max2(float a, float b) { return fmaxf(a, b); }
template <> __device__ __forceinline__ double pgas_op_max2(double a, double b) { return fmax(a, b); }
struct pgas_op_sum { template <typename A> static __device__ __forceinline__ A f(A a, A b) { return (A)(a + b); } };
struct pgas_op_prod { template <typename A> static __device__ __forceinline__ A f(A a, A b) { return (A)(a * b); } };
struct pgas_op_min { template <typename A> static __device__ __forceinline__ A f(A a, A b) { return pgas_op_min2(a, b); } };
struct pgas_op_max { template <typename A> static __device__ __forceinline__ A f(A a, A b) { return pgas_op_max2(a, b); } };
struct pgas_op_and { template <typename A> static __device__ __forceinline__ A f(A a, A b) { return (A)(a & b); } };
struct pgas_op_or { template <typename A> static __device__ __forceinline__ A f(A a, A b) { return (A)(a | b); } };
struct pgas_op_xor { template <typename A> static __device__ __forceinline__ A f(A a, A b) { return (A)(a ^ b); } };
// The reductions by code (`EnumTy::ReduceOp`'s order): a comptime reduction's type, and
// `combine`'s value, which folds to one operation once the code is a constant. The bitwise
// ones exist for integers only (the checker and the collectives' host side refuse them on
// floats, where this would sum).
template <int N> struct pgas_op_of : pgas_op_sum {};
template <> struct pgas_op_of<1> : pgas_op_prod {};
template <> struct pgas_op_of<2> : pgas_op_min {};
template <> struct pgas_op_of<3> : pgas_op_max {};
template <> struct pgas_op_of<4> : pgas_op_and {};
template <> struct pgas_op_of<5> : pgas_op_or {};
template <> struct pgas_op_of<6> : pgas_op_xor {};
template <typename A> struct pgas_bits { static constexpr bool value = false; };
template <> struct pgas_bits<int8_t> { static constexpr bool value = true; };
template <> struct pgas_bits<int16_t> { static constexpr bool value = true; };
template <> struct pgas_bits<int32_t> { static constexpr bool value = true; };
template <> struct pgas_bits<int64_t> { static constexpr bool value = true; };
template <> struct pgas_bits<uint8_t> { static constexpr bool value = true; };
template <> struct pgas_bits<uint16_t> { static constexpr bool value = true; };
template <> struct pgas_bits<uint32_t> { static constexpr bool value = true; };
template <> struct pgas_bits<uint64_t> { static constexpr bool value = true; };
template <typename A> __device__ __forceinline__ A pgas_combine(int op, A a, A b) {
    if (op == 1) return pgas_op_prod::f(a, b);
    if (op == 2) return pgas_op_min::f(a, b);
    if (op == 3) return pgas_op_max::f(a, b);
    if constexpr (pgas_bits<A>::value) {
        if (op == 4) return pgas_op_and::f(a, b);
        if (op == 5) return pgas_op_or::f(a, b);
        if (op == 6) return pgas_op_xor::f(a, b);
    }
    return pgas_op_sum::f(a, b);
}
";

/// Helpers of the checked variant: each checks, prints the Rust `file:line` and traps on a
/// violation, and otherwise returns its checked operand so checks nest inside expressions.
pub const CHECK_SUPPORT: &str = "__device__ __forceinline__ size_t pgas_check_index(size_t i, unsigned long long len, int line) {
    if (i >= len) {
        printf(\"%s:%d: index out of bounds: the len is %llu but the index is %llu\\n\", PGAS_RUST_FILE, line, len, (unsigned long long)i);
        __trap();
    }
    return i;
}
__device__ __forceinline__ size_t pgas_check_range(size_t start, size_t end, unsigned long long len, int line) {
    if (start > end || end > len) {
        printf(\"%s:%d: slice out of bounds: range %llu..%llu of a buffer of len %llu\\n\", PGAS_RUST_FILE, line, (unsigned long long)start, (unsigned long long)end, len);
        __trap();
    }
    return start;
}
__device__ __forceinline__ int pgas_check_pe(long long pe, int line) {
    int n = nvshmem_n_pes();
    if (pe < 0 || pe >= n) {
        printf(\"%s:%d: PE out of range: pe is %lld but n_pes() is %d\\n\", PGAS_RUST_FILE, line, pe, n);
        __trap();
    }
    return (int)pe;
}
__device__ __forceinline__ int pgas_check_team_pe(long long pe, nvshmem_team_t team, int line) {
    int n = nvshmem_team_n_pes(team);
    if (pe < 0 || pe >= n) {
        printf(\"%s:%d: PE out of range: pe is %lld but the team has %d PEs\\n\", PGAS_RUST_FILE, line, pe, n);
        __trap();
    }
    return (int)pe;
}
template <typename T> __device__ __forceinline__ T *pgas_check_peer(T *sym, long long pe, int line) {
    int p = pgas_check_pe(pe, line);
    T *ptr = (T *)nvshmem_ptr(sym, p);
    if (ptr == NULL) {
        printf(\"%s:%d: PE %d is not load/store reachable from PE %d (test x.has_peer(pe) first)\\n\", PGAS_RUST_FILE, line, p, nvshmem_my_pe());
        __trap();
    }
    return ptr;
}
";

/// The checked variant's index check of a local array (kernels that declare one): as
/// `pgas_check_index`, naming the array, and with signed indices (a negative one is out of
/// bounds too).
pub const CHECK_LOCAL_SUPPORT: &str = "__device__ __forceinline__ long long pgas_check_local_index(long long i, unsigned long long len, const char *name, int line) {
    if (i < 0 || (unsigned long long)i >= len) {
        printf(\"%s:%d: index out of bounds: the len of local array `%s` is %llu but the index is %lld\\n\", PGAS_RUST_FILE, line, name, len, i);
        __trap();
    }
    return i;
}
";

/// Helpers of kernels that use the tile or tensor-core intrinsics (both variants): fragment
/// structs, dynamic shared memory, `cp.async`, 16-byte vectors, `ldmatrix` and `mma.sync` as
/// inline PTX (PTX ISA 7.0+, sm_80+ for `cp.async`, `ldmatrix` and the bf16 `mma`). Kept out of
/// [`SUPPORT`] so that other kernels do not carry them. The `asm` statements that move data
/// behind the compiler's back (`cp.async` and its waits) clobber `memory`, so no shared-memory
/// access is moved across them.
pub const TENSOR_SUPPORT: &str = "// Fragments of mma.sync.m16n8k16 (PTX ISA, \"Matrix fragments for mma.m16n8k16\").
struct pgas_frag_a { uint32_t x[4]; };
struct pgas_frag_b { uint32_t x[2]; };
struct pgas_frag_c { float x[4]; };
extern __shared__ __align__(128) unsigned char pgas_dyn_smem[];
// The dynamic shared memory of this launch, in elements of `elem_size` bytes.
__device__ __forceinline__ unsigned long long pgas_dyn_smem_len(unsigned long long elem_size) {
    uint32_t bytes;
    asm(\"mov.u32 %0, %%dynamic_smem_size;\" : \"=r\"(bytes));
    return bytes / elem_size;
}
__device__ __forceinline__ uint32_t pgas_smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void pgas_cp_async_16(void *smem, const void *gmem) {
    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\" :: \"r\"(pgas_smem_addr(smem)), \"l\"(__cvta_generic_to_global(gmem)) : \"memory\");
}
__device__ __forceinline__ void pgas_cp_async_commit() {
    asm volatile(\"cp.async.commit_group;\" ::: \"memory\");
}
template <unsigned N> __device__ __forceinline__ void pgas_cp_async_wait() {
    asm volatile(\"cp.async.wait_group %0;\" :: \"n\"(N) : \"memory\");
}
__device__ __forceinline__ uint4 pgas_load_vec16(const void *p) {
    return *(const uint4 *)p;
}
__device__ __forceinline__ void pgas_store_vec16(void *p, uint4 v) {
    *(uint4 *)p = v;
}
// Lanes by shifts and selects on the four words, not by indexing the uint4 in memory: a lane
// index the compiler cannot fold (a loop it does not unroll) then costs selects, not a stack
// frame.
__device__ __forceinline__ uint32_t pgas_vec16_word(uint4 v, unsigned w) {
    return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w;
}
__device__ __forceinline__ uint4 pgas_vec16_put_word(uint4 v, unsigned w, uint32_t x) {
    v.x = w == 0 ? x : v.x;
    v.y = w == 1 ? x : v.y;
    v.z = w == 2 ? x : v.z;
    v.w = w == 3 ? x : v.w;
    return v;
}
template <typename T> __device__ __forceinline__ T pgas_vec16_get(uint4 v, unsigned j) {
    T r;
    if constexpr (sizeof(T) == 8) {
        unsigned long long bits = ((unsigned long long)pgas_vec16_word(v, 2 * j + 1) << 32)
                                  | pgas_vec16_word(v, 2 * j);
        memcpy(&r, &bits, 8);
    } else if constexpr (sizeof(T) == 4) {
        uint32_t bits = pgas_vec16_word(v, j);
        memcpy(&r, &bits, 4);
    } else if constexpr (sizeof(T) == 2) {
        unsigned short bits = (unsigned short)(pgas_vec16_word(v, j / 2) >> (16 * (j % 2)));
        memcpy(&r, &bits, 2);
    } else {
        unsigned char bits = (unsigned char)(pgas_vec16_word(v, j / 4) >> (8 * (j % 4)));
        memcpy(&r, &bits, 1);
    }
    return r;
}
template <typename T> __device__ __forceinline__ uint4 pgas_vec16_set(uint4 v, unsigned j, T x) {
    if constexpr (sizeof(T) == 8) {
        unsigned long long bits;
        memcpy(&bits, &x, 8);
        v = pgas_vec16_put_word(v, 2 * j, (uint32_t)bits);
        return pgas_vec16_put_word(v, 2 * j + 1, (uint32_t)(bits >> 32));
    } else if constexpr (sizeof(T) == 4) {
        uint32_t bits;
        memcpy(&bits, &x, 4);
        return pgas_vec16_put_word(v, j, bits);
    } else {
        // 1 or 2 bytes: replace that many bytes of word `j / lanes-per-word`.
        constexpr unsigned per = 4 / sizeof(T);
        unsigned sh = 8 * sizeof(T) * (j % per);
        uint32_t mask = (sizeof(T) == 2 ? 0xffffu : 0xffu) << sh;
        uint32_t bits = 0;
        memcpy(&bits, &x, sizeof(T));
        uint32_t w = pgas_vec16_word(v, j / per);
        return pgas_vec16_put_word(v, j / per, (w & ~mask) | (bits << sh));
    }
}
__device__ __forceinline__ void pgas_ldmatrix_x4(pgas_frag_a &a, const void *smem) {
    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\"
                 : \"=r\"(a.x[0]), \"=r\"(a.x[1]), \"=r\"(a.x[2]), \"=r\"(a.x[3]) : \"r\"(pgas_smem_addr(smem)));
}
__device__ __forceinline__ void pgas_ldmatrix_x2(pgas_frag_b &b, const void *smem) {
    asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\"
                 : \"=r\"(b.x[0]), \"=r\"(b.x[1]) : \"r\"(pgas_smem_addr(smem)));
}
__device__ __forceinline__ void pgas_ldmatrix_x2_trans(pgas_frag_b &b, const void *smem) {
    asm volatile(\"ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\"
                 : \"=r\"(b.x[0]), \"=r\"(b.x[1]) : \"r\"(pgas_smem_addr(smem)));
}
__device__ __forceinline__ void pgas_ldmatrix_x4_trans(pgas_frag_b &b0, pgas_frag_b &b1, const void *smem) {
    asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\"
                 : \"=r\"(b0.x[0]), \"=r\"(b0.x[1]), \"=r\"(b1.x[0]), \"=r\"(b1.x[1]) : \"r\"(pgas_smem_addr(smem)));
}
__device__ __forceinline__ void pgas_mma_bf16(pgas_frag_c &c, const pgas_frag_a &a, const pgas_frag_b &b) {
    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\"
                 : \"+f\"(c.x[0]), \"+f\"(c.x[1]), \"+f\"(c.x[2]), \"+f\"(c.x[3])
                 : \"r\"(a.x[0]), \"r\"(a.x[1]), \"r\"(a.x[2]), \"r\"(a.x[3]), \"r\"(b.x[0]), \"r\"(b.x[1]));
}
__device__ __forceinline__ void pgas_mma_f16(pgas_frag_c &c, const pgas_frag_a &a, const pgas_frag_b &b) {
    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\"
                 : \"+f\"(c.x[0]), \"+f\"(c.x[1]), \"+f\"(c.x[2]), \"+f\"(c.x[3])
                 : \"r\"(a.x[0]), \"r\"(a.x[1]), \"r\"(a.x[2]), \"r\"(a.x[3]), \"r\"(b.x[0]), \"r\"(b.x[1]));
}
// The 16 x 16 tile of two accumulators (columns 0..8, 8..16) as an A fragment: an accumulator's
// rows g and g + 8 at columns 2 (l % 4).. are the A registers 0 and 1 of that lane.
#define PGAS_PACK_A(T) \
    __device__ __forceinline__ void pgas_pack_a_##T(pgas_frag_a &a, const pgas_frag_c *c) { \
        a.x[0] = pgas_pack2_##T(c[0].x[0], c[0].x[1]); \
        a.x[1] = pgas_pack2_##T(c[0].x[2], c[0].x[3]); \
        a.x[2] = pgas_pack2_##T(c[1].x[0], c[1].x[1]); \
        a.x[3] = pgas_pack2_##T(c[1].x[2], c[1].x[3]); \
    }
PGAS_PACK_A(bf16)
PGAS_PACK_A(f16)
// Four floats as FP8 bytes, the first in the low byte (cvt puts its first source in the high
// half), saturating to the type's largest finite value.
#define PGAS_PACK4_FP8(T) \
    __device__ __forceinline__ uint32_t pgas_pack4_##T(float a, float b, float c, float d) { \
        uint32_t r; \
        asm(\"{ .reg .b16 lo, hi; cvt.rn.satfinite.\" #T \"x2.f32 lo, %2, %1; cvt.rn.satfinite.\" #T \"x2.f32 hi, %4, %3; mov.b32 %0, {lo, hi}; }\" \
            : \"=r\"(r) : \"f\"(a), \"f\"(b), \"f\"(c), \"f\"(d)); \
        return r; \
    }
// The 16 x 32 tile of four accumulators as an FP8 A fragment of wgmma k32, whose register 0
// holds row g at K 4 (l % 4).. and register 2 at K 16 + 4 (l % 4)..: this lane's columns
// 2 (l % 4), + 1 of accumulators 0 and 1 (then 2 and 3) fill them, a K order permuted against
// the accumulators' that the B operand's rows follow (`pack_a_k32`'s docs).
#define PGAS_PACK_A_K32(T) PGAS_PACK4_FP8(T) \
    __device__ __forceinline__ void pgas_pack_a_k32_##T(pgas_frag_a &a, const pgas_frag_c *c) { \
        a.x[0] = pgas_pack4_##T(c[0].x[0], c[0].x[1], c[1].x[0], c[1].x[1]); \
        a.x[1] = pgas_pack4_##T(c[0].x[2], c[0].x[3], c[1].x[2], c[1].x[3]); \
        a.x[2] = pgas_pack4_##T(c[2].x[0], c[2].x[1], c[3].x[0], c[3].x[1]); \
        a.x[3] = pgas_pack4_##T(c[2].x[2], c[2].x[3], c[3].x[2], c[3].x[3]); \
    }
PGAS_PACK_A_K32(e4m3)
PGAS_PACK_A_K32(e5m2)
// Warp-wide instructions need every lane: a block that is not whole warps would leave the last
// warp short and the instruction undefined (a hang or garbage), so the kernel traps at entry.
__device__ __forceinline__ void pgas_require_whole_warps(int line) {
    unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    if (threads % 32u != 0u) {
        if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
            printf(\"%s:%d: this kernel uses warp-wide tensor-core instructions (mma_sync, ldmatrix_*) and needs whole warps, but its block has %u threads, not a multiple of 32\\n\", PGAS_RUST_FILE, line, threads);
        }
        // Every thread traps only after the report is written: a trap in another warp first
        // would end the grid before thread 0's printf (the block-wide condition is uniform).
        __syncthreads();
        __trap();
    }
}
";

/// The checked variant's check of a peer collective's scratch (`team_all_reduce_block`,
/// `team_all_gather_block`, `team_reduce_scatter_block`, `team_all_to_all_block`, the
/// broadcasts): `pgas::coll::device_scratch_len` words (2 + 4 x team size x the
/// data's 8-byte lines rounded up to a group of 32, at least one group) from an even index on
/// (16-byte lines). A short one
/// would have the peers' lines land past its end, in whatever the heap holds there.
pub const CHECK_LL_SUPPORT: &str = "__device__ __forceinline__ void pgas_check_ll_scratch(const uint64_t *base, size_t k, unsigned long long len, nvshmem_team_t team, unsigned long long data_bytes, int line) {
    const unsigned long long n = (unsigned long long)nvshmem_team_n_pes(team);
    const unsigned long long lines = data_bytes == 0 ? 1ull : (data_bytes + 7ull) / 8ull;
    const unsigned long long need = 2ull + 4ull * n * ((lines + 31ull) / 32ull * 32ull);
    if (k % 2 != 0 || k > len || len - k < need) {
        if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
            printf(\"%s:%d: scratch too small or misaligned for this team collective: it needs %llu u64 words from an even index (%llu PEs, %llu data bytes), but has %llu words from index %llu. Fix: give each block pgas::coll::device_scratch_len::<T>(team size, len) words starting at an even index\\n\", PGAS_RUST_FILE, line, need, n, data_bytes, len > k ? len - k : 0ull, (unsigned long long)k);
        }
        // The condition is the same for the whole block: trap after thread 0's report.
        __syncthreads();
        __trap();
    }
}
";

/// Helpers of the collectives over peer memory (`team_all_reduce_block`,
/// `team_all_gather_block`, their personal forms `team_reduce_scatter_block` and
/// `team_all_to_all_block`, and the broadcasts `team_broadcast_block` and
/// `team_broadcast_relay_block`, whose other ranks send flag-only lines; both variants): pgas's
/// LL ("low latency") protocol. A PE stores its
/// data into every peer's scratch as 16-byte lines of two 64-bit words `{d0 | f << 32,
/// d1 | f << 32}`: 8 data bytes, each 4 of them beside a copy of the call's 32-bit flag `f`, in
/// one `st.volatile.global.v2.u64`, read by one `ld.volatile.global.v2.u64`. A reader that sees
/// both flags equal to this call's has both data words, from the PTX memory model alone: a
/// vector access is a set of scalar accesses of its element type (PTX ISA, "Vector
/// Data-types"), here naturally aligned 64-bit ones; `.volatile` is `.relaxed.sys`, so the
/// writer's and the reader's accesses to a word are morally strong and overlap completely, and
/// such a read takes its whole value from one write (the model's atomicity axiom). The flag and
/// the data it guards are in one word, so no fence is needed between them: one NVLink crossing.
/// (A `v4.u32` store, as NCCL's LL lines use, is four 32-bit accesses in no specified order:
/// there, a flag seen new beside data seen old is allowed by the model, and the protocol would
/// rest on the hardware moving 8 or 16 bytes whole.) A
/// block's scratch is `[0]` its call counter (local), `[1]` unused, then the lines (16 bytes
/// each) in groups of 32 consecutive lines of one sender (`pgas_ll_line`): sender rank `r`'s line
/// `l` at `((l / 32 * 2 + parity) * n + r) * 32 + l % 32`, so that a warp's 32 lines to a peer
/// are 512 contiguous bytes, four whole 128-byte writes over NVLink. (Until issue 25's second
/// round the lines of one `l` from every sender were adjacent, `(l * 2 + parity) * n + r`: a
/// warp's stores then went 16 bytes each to 32 places, and NVLink's rate of small writes, not
/// its bandwidth, bounded the 64 KiB all-reduce.) `parity` is
/// the call counter's lowest bit: a sender gets two calls ahead of a reader only after the
/// reader has read the lines of the call before, so two sets of lines suffice. The flag is the
/// call counter modulo 2^32, never 0 (a zeroed line is not a call's); a line left unused for a
/// whole multiple of 2^32 calls of its block would be taken for the current call's. A call
/// of 0 elements still exchanges one (zero) line: it is what keeps every PE within a call of
/// its peers, so the scratch always holds at least one line.
pub const LL_SUPPORT: &str = "template <typename T> struct pgas_acc { typedef T type; };
template <> struct pgas_acc<__half> { typedef float type; };
template <> struct pgas_acc<__nv_bfloat16> { typedef float type; };
// Each 64-bit word is one memory operation of the PTX model: flag (high half) and data (low
// half) are read from the same write (see LL_SUPPORT's doc in prelude.rs).
__device__ __forceinline__ void pgas_ll_store(void *p, uint32_t d0, uint32_t d1, uint32_t f) {
    const unsigned long long w0 = ((unsigned long long)f << 32) | d0, w1 = ((unsigned long long)f << 32) | d1;
    asm volatile(\"st.volatile.global.v2.u64 [%0], {%1, %2};\" :: \"l\"(p), \"l\"(w0), \"l\"(w1) : \"memory\");
}
// The line as {d0, f0, d1, f1}.
__device__ __forceinline__ uint4 pgas_ll_load(const void *p) {
    unsigned long long w0, w1;
    asm volatile(\"ld.volatile.global.v2.u64 {%0, %1}, [%2];\" : \"=l\"(w0), \"=l\"(w1) : \"l\"(p) : \"memory\");
    return make_uint4((uint32_t)w0, (uint32_t)(w0 >> 32), (uint32_t)w1, (uint32_t)(w1 >> 32));
}
// Where sender `r`'s line `l` of the call of parity `parity` sits among a block's lines (see
// LL_SUPPORT's doc in prelude.rs): groups of a warp's 32 lines of one sender.
__device__ __forceinline__ size_t pgas_ll_line(size_t l, size_t parity, size_t n, size_t r) {
    return (((l / 32) * 2 + parity) * n + r) * 32 + l % 32;
}
// Line `l` of `src` (8 bytes; zeros past `len`) as two words.
template <typename T> __device__ __forceinline__ uint2 pgas_ll_pack(const T *src, size_t len, size_t l) {
    constexpr size_t per = 8 / sizeof(T);
    unsigned char bytes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t j = 0; j < per; j++) {
        if (l * per + j < len) memcpy(bytes + j * sizeof(T), &src[l * per + j], sizeof(T));
    }
    uint2 w;
    memcpy(&w, bytes, 8);
    return w;
}
// The data of a line loaded as `v`, loading it again until both its flags are `f`.
__device__ __forceinline__ uint2 pgas_ll_poll(uint4 v, const void *line, uint32_t f) {
    while (v.y != f || v.w != f) v = pgas_ll_load(line);
    return make_uint2(v.x, v.z);
}
// A block's call of the protocol: its number (the block's call counter's next), its flag (never
// 0: a zeroed line is not a call's), the parity of its set of lines, and the lines.
struct pgas_ll_call {
    unsigned long long n;
    uint32_t f;
    size_t parity;
    unsigned char *lines;
};
// Starts a call, with a block barrier: `src` is often what the block just computed, each thread
// a part, and the lines are packed by other threads than those that wrote them.
__device__ __forceinline__ pgas_ll_call pgas_ll_begin(uint64_t *scratch) {
    __syncthreads();
    pgas_ll_call c;
    c.n = *(volatile unsigned long long *)scratch + 1;
    c.f = (uint32_t)c.n == 0u ? 1u : (uint32_t)c.n;
    c.parity = (size_t)(c.n & 1ull);
    c.lines = (unsigned char *)(scratch + 2);
    return c;
}
// Ends a call: every thread has read the counter; the next call (of this kernel or a later one)
// sees the new value.
__device__ __forceinline__ void pgas_ll_end(uint64_t *scratch, const pgas_ll_call &c) {
    __syncthreads();
    if (threadIdx.x == 0) *(volatile unsigned long long *)scratch = c.n;
    __syncthreads();
}
// All-reduce by `Op` (Gather false: `dst[i]` = the reduction over team ranks of their `src[i]`)
// or all-gather (Gather true: `dst[r * len + i]` = rank r's `src[i]`) of `len` elements, by the
// whole block, with the same block of every team PE (see LL_SUPPORT's doc in prelude.rs).
// Personal: each rank sends rank q its chunk `src[q * len ..]` instead of the same `src`, so
// the two become reduce-scatter (`dst[i]` = the reduction of every rank's `src[me * len + i]`)
// and all-to-all (`dst[r * len + i]` = rank r's `src[me * len + i]`), each line crossing once.
template <typename T, typename Op, bool Gather, bool Personal>
__device__ void pgas_ll_block(nvshmem_team_t team, T *dst, const T *src, size_t len, uint64_t *scratch) {
    typedef typename pgas_acc<T>::type A;
    constexpr size_t per = 8 / sizeof(T);
    const int n = nvshmem_team_n_pes(team);
    const int me = nvshmem_team_my_pe(team);
    const pgas_ll_call call = pgas_ll_begin(scratch);
    const uint32_t f = call.f;
    const size_t parity = call.parity;
    unsigned char *lines = call.lines;
    // At least one line, also for `len == 0`: a call with no data still exchanges a (flag-only)
    // line with every peer, so no PE runs two calls ahead of a peer that is still reading
    // (with no line, a fast PE would pass a call of 0 elements without waiting and overwrite
    // the lines of the call before while a slow peer still polls them: both would hang).
    const size_t nl = len == 0 ? 1 : (len + per - 1) / per;
    // This rank's lines into every peer's scratch (none to itself: it reads its own src), a
    // peer at a time, so its address is looked up once.
    for (int k = 1; k < n; k++) {
        const int q = (me + k) % n;
        const int pe = nvshmem_team_translate_pe(team, q, NVSHMEM_TEAM_WORLD);
        unsigned char *peer = (unsigned char *)nvshmem_ptr(lines, pe);
        const T *from = Personal ? src + (size_t)q * len : src;
        for (size_t l = threadIdx.x; l < nl; l += blockDim.x) {
            const uint2 w = pgas_ll_pack(from, len, l);
            pgas_ll_store(peer + 16 * pgas_ll_line(l, parity, (size_t)n, (size_t)me), w.x, w.y, f);
        }
    }
    // Every rank's lines, in rank order, so every PE combines the same values the same way.
    // Four senders at a time: their lines are loaded back to back before any is looked at, so
    // a line waits about one L2 round trip for four senders instead of one each.
    for (size_t l = threadIdx.x; l < nl; l += blockDim.x) {
        A acc[per];
        for (int r0 = 0; r0 < n; r0 += 4) {
            uint4 v[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int r = r0 + u;
                if (r < n && r != me) v[u] = pgas_ll_load(lines + 16 * pgas_ll_line(l, parity, (size_t)n, (size_t)r));
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int r = r0 + u;
                if (r >= n) break;
                uint2 w;
                if (r == me) {
                    w = pgas_ll_pack(Personal ? src + (size_t)me * len : src, len, l);
                } else {
                    w = pgas_ll_poll(v[u], lines + 16 * pgas_ll_line(l, parity, (size_t)n, (size_t)r), f);
                }
                T vals[per];
                memcpy(vals, &w, 8);
                for (size_t j = 0; j < per; j++) {
                    if constexpr (Gather) {
                        if (l * per + j < len) dst[(size_t)r * len + l * per + j] = vals[j];
                    } else {
                        acc[j] = r == 0 ? (A)vals[j] : Op::f(acc[j], (A)vals[j]);
                    }
                }
            }
        }
        if constexpr (!Gather) {
            for (size_t j = 0; j < per; j++) {
                if (l * per + j < len) dst[l * per + j] = (T)acc[j];
            }
        }
    }
    pgas_ll_end(scratch, call);
}
// Broadcast of team rank `root`'s `src` (`len` elements) into every team PE's `dst`, by the
// whole block, with the same block of every team PE. `dst` may be `src`.
// Direct (Relay false, or 2 PEs): only the root sends data lines (into its own sender slot of
// every peer's lines); every other rank sends each peer one flag-only line (line 0 of its
// slot) and waits for one from each peer but the root. The flag lines keep the protocol's
// invariant that each call gets something from every peer to every PE (see LL_SUPPORT's doc):
// without them a rank could finish a call on the root's lines alone and start storing the call
// after next into a peer that is still reading. They are one line a peer, sent first, so they
// cost no crossing of their own.
// Relay (more than 2 PEs): the root's links carry one copy of the data instead of `n - 1`.
// The lines are cut into a chunk for each other rank (its owner); the root sends chunk `j`
// only to its owner, which stores each line into its `dst` as it lands and passes it on to
// every rank but the root (into the owner's slot, at the line's place in the chunk), and
// sends the root a flag-only line. Two crossings, for a third of the root's outgoing lines on
// 4 PEs. A chunk of no lines still sends one (flag-only) line, for the invariant.
template <typename T, bool Relay>
__device__ void pgas_ll_bcast_block(nvshmem_team_t team, T *dst, const T *src, size_t len, int root, uint64_t *scratch) {
    constexpr size_t per = 8 / sizeof(T);
    const int n = nvshmem_team_n_pes(team);
    const int me = nvshmem_team_my_pe(team);
    const pgas_ll_call c = pgas_ll_begin(scratch);
    // At least one line, for the protocol's rule (see pgas_ll_block).
    const size_t nl = len == 0 ? 1 : (len + per - 1) / per;
    const bool relay = Relay && n > 2;
    // Chunk `j` is lines `j * cl ..`, owned by rank `j` below the root and `j + 1` above it.
    const size_t cl = relay ? (nl + n - 2) / (n - 1) : nl;
    const int mine = me < root ? me : me - 1;
    // The lines of chunk `j` a sender sends (at least one) and where they start.
    auto chunk_lo = [&](int j) { return (size_t)j * cl < nl ? (size_t)j * cl : nl; };
    auto chunk_cnt = [&](int j) { const size_t lo = chunk_lo(j), hi = lo + cl < nl ? lo + cl : nl; return hi > lo ? hi - lo : (size_t)1; };
    auto store_line = [&](void *line, uint2 w) { pgas_ll_store(line, w.x, w.y, c.f); };
    // Line `at` of sender `r`'s, once this call's.
    auto take_line = [&](size_t at, int r) {
        const void *line = c.lines + 16 * pgas_ll_line(at, c.parity, (size_t)n, (size_t)r);
        return pgas_ll_poll(pgas_ll_load(line), line, c.f);
    };
    auto to_dst = [&](size_t l, uint2 w) {
        T vals[per];
        memcpy(vals, &w, 8);
        for (size_t j = 0; j < per; j++) {
            if (l * per + j < len) dst[l * per + j] = vals[j];
        }
    };
    for (int k = 1; k < n; k++) {
        const int q = (me + k) % n;
        const int pe = nvshmem_team_translate_pe(team, q, NVSHMEM_TEAM_WORLD);
        unsigned char *peer = (unsigned char *)nvshmem_ptr(c.lines, pe);
        if (me == root) {
            // Every line to every peer, or chunk `j` to its owner only.
            const int j = q < root ? q : q - 1;
            const size_t lo = relay ? chunk_lo(j) : 0, cnt = relay ? chunk_cnt(j) : nl;
            for (size_t i = threadIdx.x; i < cnt; i += blockDim.x) {
                store_line(peer + 16 * pgas_ll_line(i, c.parity, (size_t)n, (size_t)me), pgas_ll_pack(src, len, lo + i));
            }
        } else if (threadIdx.x == 0 && (!relay || q == root)) {
            store_line(peer + 16 * pgas_ll_line(0, c.parity, (size_t)n, (size_t)me), make_uint2(0u, 0u));
        }
    }
    if (me == root) {
        if (dst != src) {
            for (size_t i = threadIdx.x; i < len; i += blockDim.x) dst[i] = src[i];
        }
        // Every other rank's flag line, a thread each.
        for (int r = threadIdx.x; r < n; r += blockDim.x) {
            if (r != me) take_line(0, r);
        }
    } else if (!relay) {
        for (size_t l = threadIdx.x; l < nl; l += blockDim.x) to_dst(l, take_line(l, root));
        for (int r = threadIdx.x; r < n; r += blockDim.x) {
            if (r != me && r != root) take_line(0, r);
        }
    } else {
        // This rank's chunk from the root, passed on to the other ranks as it lands.
        const size_t lo = chunk_lo(mine), cnt = chunk_cnt(mine);
        for (size_t i = threadIdx.x; i < cnt; i += blockDim.x) {
            const uint2 w = take_line(i, root);
            to_dst(lo + i, w);
            for (int k = 1; k < n; k++) {
                const int q = (me + k) % n;
                if (q == root) continue;
                const int pe = nvshmem_team_translate_pe(team, q, NVSHMEM_TEAM_WORLD);
                store_line((unsigned char *)nvshmem_ptr(c.lines, pe) + 16 * pgas_ll_line(i, c.parity, (size_t)n, (size_t)me), w);
            }
        }
        // The other owners' chunks.
        for (int r = 0; r < n; r++) {
            if (r == me || r == root) continue;
            const int j = r < root ? r : r - 1;
            const size_t rlo = chunk_lo(j), rcnt = chunk_cnt(j);
            for (size_t i = threadIdx.x; i < rcnt; i += blockDim.x) to_dst(rlo + i, take_line(i, r));
        }
    }
    pgas_ll_end(scratch, c);
}
";

/// Checks of the checked variant for [`TENSOR_SUPPORT`]'s intrinsics: 16-byte accesses in
/// bounds and aligned, column indices within the leading dimension, warp-wide instructions
/// reached by the whole warp.
pub const CHECK_TENSOR_SUPPORT: &str = "template <typename T> __device__ __forceinline__ T *pgas_check_16(T *base, size_t i, unsigned long long len, int line) {
    const unsigned long long n = 16 / sizeof(T);
    if (i >= len || len - i < n) {
        printf(\"%s:%d: 16-byte access out of bounds: elements %llu..%llu of a buffer of len %llu\\n\", PGAS_RUST_FILE, line, (unsigned long long)i, (unsigned long long)i + n, len);
        __trap();
    }
    if ((size_t)(base + i) % 16 != 0) {
        printf(\"%s:%d: 16-byte access at element %llu is not 16-byte aligned\\n\", PGAS_RUST_FILE, line, (unsigned long long)i);
        __trap();
    }
    return base + i;
}
__device__ __forceinline__ size_t pgas_check_col(size_t col, size_t ld, int line) {
    if (col >= ld) {
        printf(\"%s:%d: column out of range: the column is %llu but the leading dimension is %llu\\n\", PGAS_RUST_FILE, line, (unsigned long long)col, (unsigned long long)ld);
        __trap();
    }
    return col;
}
__device__ __forceinline__ void pgas_check_full_warp(int line) {
    unsigned mask = __activemask();
    if (mask != 0xffffffffu) {
        printf(\"%s:%d: a warp-wide tensor-core instruction is reached by part of a warp (active lanes %08x); all 32 lanes must call it together\\n\", PGAS_RUST_FILE, line, mask);
        __trap();
    }
}
";

/// Helpers of the multicast rows (`multimem_*`, `has_multicast`): the team's multicast address
/// of a symmetric element (`nvshmemx_mc_ptr`; a trap naming the Rust line where there is none,
/// in both variants, since a null multimem address would fault without saying why), and one
/// function per PTX form and element type, generated by the macros below. `.relaxed.sys`: the
/// copies live on other GPUs, so ordering against their readers is the caller's fence or
/// barrier, as for any remote store. Multimem is sm_90 PTX 8.1: the emitter puts
/// [`SM90A_MARKER`] before these (where the Hopper support did not), so the runtime compiles the
/// source for sm_90a and refuses older GPUs with an error, as for the Hopper rows.
pub const MULTIMEM_SUPPORT: &str = "template <typename T> __device__ __forceinline__ T *pgas_mc_ptr(nvshmem_team_t team, T *p) {
    return (T *)nvshmemx_mc_ptr(team, p);
}
template <typename T> __device__ __forceinline__ T *pgas_mc_elem(nvshmem_team_t team, T *p, int line) {
    T *m = pgas_mc_ptr(team, p);
    if (m == NULL) {
        printf(\"%s:%d: team %d has no multicast address for this buffer (NVLink SHARP off or absent; test x.has_multicast(team) first)\\n\", PGAS_RUST_FILE, line, (int)team);
        __trap();
    }
    return m;
}
#define PGAS_MM_LD(OP, SUF, CT, PTX, REG) __device__ __forceinline__ CT pgas_multimem_ld_##OP##_##SUF(const CT *mc) { \\
    CT v; asm volatile(\"multimem.ld_reduce.relaxed.sys.global.\" #OP \".\" PTX \" %0, [%1];\" : \"=\" REG(v) : \"l\"(mc) : \"memory\"); return v; }
#define PGAS_MM_ST(SUF, CT, PTX, REG) __device__ __forceinline__ void pgas_multimem_st_##SUF(CT *mc, CT v) { \\
    asm volatile(\"multimem.st.relaxed.sys.global.\" PTX \" [%0], %1;\" :: \"l\"(mc), REG(v) : \"memory\"); }
#define PGAS_MM_RED(SUF, CT, PTX, REG) __device__ __forceinline__ void pgas_multimem_red_add_##SUF(CT *mc, CT v) { \\
    asm volatile(\"multimem.red.relaxed.sys.global.add.\" PTX \" [%0], %1;\" :: \"l\"(mc), REG(v) : \"memory\"); }
#define PGAS_MM_ALL(SUF, CT, ADD, BITS, REG) PGAS_MM_LD(add, SUF, CT, ADD, REG) PGAS_MM_ST(SUF, CT, BITS, REG) PGAS_MM_RED(SUF, CT, ADD, REG)
#define PGAS_MM_INT(SUF, CT, ADD, BITS, REG) PGAS_MM_ALL(SUF, CT, ADD, BITS, REG) \\
    PGAS_MM_LD(min, SUF, CT, #SUF, REG) PGAS_MM_LD(max, SUF, CT, #SUF, REG)
PGAS_MM_INT(s32, int32_t, \"s32\", \"b32\", \"r\")
PGAS_MM_INT(u32, uint32_t, \"u32\", \"b32\", \"r\")
PGAS_MM_INT(s64, int64_t, \"u64\", \"b64\", \"l\")
PGAS_MM_INT(u64, uint64_t, \"u64\", \"b64\", \"l\")
PGAS_MM_ALL(f32, float, \"f32\", \"f32\", \"f\")
PGAS_MM_ALL(f64, double, \"f64\", \"f64\", \"d\")
";

/// The first line of `sm90_support()`: a source that contains it uses sm_90a-only instructions
/// (`wgmma`), so the runtime compiles it with `-arch=sm_90a` and refuses other GPUs.
pub const SM90A_MARKER: &str = "// pgas: this source needs sm_90a (wgmma, TMA, mbarrier tx)";

/// The shapes of `wgmma.mma_async` the intrinsic table has rows for (`m64nNkK`). N = 176 is
/// attention's tile of keys at head dim 128 (FlashAttention-3's): only its 16-bit form with both
/// operands in shared memory has a row.
const WGMMA_N: [u32; 4] = [64, 128, 176, 256];

/// The operand types of `wgmma.mma_async` with f32 accumulation the rows use, with their K (32
/// bytes of each operand row a step: 16 elements of 16 bits, 32 of FP8) and the helper suffix,
/// which is the PTX type.
const WGMMA_TYPES: [(u32, &str); 4] = [(16, "bf16"), (16, "f16"), (32, "e4m3"), (32, "e5m2")];

/// Helpers of kernels that use the Hopper intrinsics (both variants): the tensor map parameter
/// type, mbarriers, the copy engine (`cp.async.bulk.tensor`), and `wgmma` with shared-memory
/// operands through matrix descriptors, as inline PTX (sm_90a). The `wgmma` helpers are
/// generated: one per shape and type, each naming all `N / 2` accumulator registers.
pub fn sm90_support() -> String {
    let mut s = String::new();
    s.push_str(SM90A_MARKER);
    s.push('\n');
    s.push_str(SM90_FIXED);
    s.push_str(SM90_CLUSTER);
    for n in WGMMA_N {
        let whole = n % 64 == 0;
        for (k, t) in WGMMA_TYPES.into_iter().filter(|&(k, _)| whole || k == 16) {
            s.push_str(&wgmma_helper(n, k, t, false));
            s.push_str(&wgmma_helper(n, k, t, true));
        }
        for (k, t) in WGMMA_TYPES.into_iter().filter(|_| whole) {
            s.push_str(&wgmma_rs_helper(n, k, t));
        }
    }
    s
}

/// `pgas_wgmma_m64n{n}k{k}_{t}(acc, desc_a, desc_b)`: `acc += A B` with both operands of PTX
/// type `t` K-major in shared memory, accumulating in f32 into the `n / 8` fragments from `acc`
/// on (4 registers each). The immediates after the predicate scale A and B by 1 and, for the
/// 16-bit types only, leave them untransposed (PTX has no transpose operands for FP8, whose
/// operands are always K-major). With `choose`, the `_acc` form: a last argument `add` is the
/// predicate (PTX's scale-d), and `add == false` writes `A B` over the accumulators.
fn wgmma_helper(n: u32, k: u32, t: &str, choose: bool) -> String {
    let regs = n / 2;
    let list: Vec<String> = (0..regs).map(|i| format!("%{i}")).collect();
    let outs: Vec<String> = (0..regs)
        .map(|i| format!("\"+f\"(c[{}].x[{}])", i / 4, i % 4))
        .collect();
    let imms = if k == 16 { "1, 1, 0, 0" } else { "1, 1" };
    let (name, param, pred, input) = if choose {
        (
            "_acc",
            ", bool add",
            format!("%{}", regs + 2),
            ", \"r\"((int)add)",
        )
    } else {
        ("", "", "1".to_string(), "")
    };
    format!(
        "__device__ __forceinline__ void pgas_wgmma_m64n{n}k{k}{name}_{t}(pgas_frag_c *c, uint64_t da, uint64_t db{param}) {{
    asm volatile(\"{{ .reg .pred p; setp.ne.b32 p, {pred}, 0; wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{t}.{t} {{{}}}, %{}, %{}, p, {imms}; }}\"
                 : {}
                 : \"l\"(da), \"l\"(db){input});
}}
",
        list.join(", "),
        regs,
        regs + 1,
        outs.join(", ")
    )
}

/// `pgas_wgmma_m64n{n}k{k}_rs_{t}(acc, p, desc_b)`: `acc += P B` with A from registers, the
/// 64 x `k` tile whose warp rows the fragment `p` holds (`pack_a`, `pack_a_k32`), and B in
/// shared memory: MN-major for the 16-bit types (the last immediate transposes it), K-major for
/// FP8 (which has no transpose operand). PTX reads the A registers asynchronously too: ptxas
/// keeps them until the `wgmma_wait` that ends the batch.
fn wgmma_rs_helper(n: u32, k: u32, t: &str) -> String {
    let regs = n / 2;
    let list: Vec<String> = (0..regs).map(|i| format!("%{i}")).collect();
    let outs: Vec<String> = (0..regs)
        .map(|i| format!("\"+f\"(c[{}].x[{}])", i / 4, i % 4))
        .collect();
    let imms = if k == 16 { "1, 1, 1" } else { "1, 1" };
    format!(
        "__device__ __forceinline__ void pgas_wgmma_m64n{n}k{k}_rs_{t}(pgas_frag_c *c, const pgas_frag_a &p, uint64_t db) {{
    asm volatile(\"{{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{t}.{t} {{{}}}, {{%{}, %{}, %{}, %{}}}, %{}, p, {imms}; }}\"
                 : {}
                 : \"r\"(p.x[0]), \"r\"(p.x[1]), \"r\"(p.x[2]), \"r\"(p.x[3]), \"l\"(db));
}}
",
        list.join(", "),
        regs,
        regs + 1,
        regs + 2,
        regs + 3,
        regs + 4,
        outs.join(", ")
    )
}

/// The fixed part of [`sm90_support`].
const SM90_FIXED: &str = "// A CUtensorMap (cuda.h, which NVRTC does not ship): 128 opaque bytes, 64-byte aligned.
struct __align__(64) pgas_tensor_map { unsigned long long opaque[16]; };
__device__ __forceinline__ void pgas_mbarrier_init(uint64_t *bar, uint32_t count) {
    asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: \"r\"(pgas_smem_addr(bar)), \"r\"(count) : \"memory\");
    // Makes the initialization visible to the copy engine's complete_tx.
    asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");
}
__device__ __forceinline__ void pgas_mbarrier_arrive(uint64_t *bar) {
    asm volatile(\"mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\" :: \"r\"(pgas_smem_addr(bar)) : \"memory\");
}
__device__ __forceinline__ void pgas_mbarrier_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile(\"mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\" :: \"r\"(pgas_smem_addr(bar)), \"r\"(bytes) : \"memory\");
}
// try_wait suspends the thread for a while before it fails, so the loop does not spin hot; a
// phase that never completes (a lost arrival, a wrong parity or byte count) traps after about
// 2^35 cycles instead of hanging the GPU. Only the checked variant prints the Rust line first:
// a printf is a function call, and ptxas serializes every wgmma of a kernel with one (warning
// C7510), which cost the plain variant's GEMMs a large share of their speed.
__device__ __forceinline__ void pgas_mbarrier_wait(const uint64_t *bar, uint32_t parity, int line) {
    const uint32_t addr = pgas_smem_addr(bar);
    long long start = 0;
    for (;;) {
        uint32_t done;
        asm volatile(\"{ .reg .pred p; mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\"
                     : \"=r\"(done) : \"r\"(addr), \"r\"(parity) : \"memory\");
        if (done) return;
        if (start == 0) {
            start = clock64();
        } else if (clock64() - start > (1ll << 35)) {
            if (PGAS_CHECKED_VARIANT) {
                printf(\"%s:%d: mbarrier_wait timed out: the phase with parity %u never completed (check the arrival count, the parity and the bytes of arrive_expect_tx)\\n\", PGAS_RUST_FILE, line, parity);
            }
            __trap();
        }
    }
}
__device__ __forceinline__ void pgas_fence_proxy_async() {
    asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");
}
__device__ __forceinline__ void pgas_fence_proxy_async_global() {
    asm volatile(\"fence.proxy.async.global;\" ::: \"memory\");
}
__device__ __forceinline__ void pgas_tma_load_2d(void *dst, const pgas_tensor_map *map, uint64_t *bar, int col, int row) {
    asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\"
                 :: \"r\"(pgas_smem_addr(dst)), \"l\"((unsigned long long)map), \"r\"(pgas_smem_addr(bar)), \"r\"(col), \"r\"(row)
                 : \"memory\");
}
// A wgmma matrix descriptor for a K-major operand tile as the copy engine writes it with a
// 128-byte swizzle: rows of 128 bytes, 8-row atoms 1024 bytes apart (the stride), the leading
// offset unused; the start address moves 32 bytes per 16 elements of K inside the atom.
// Shared addresses are below 2^18, so the address field (bits 0-13, in 16-byte units) needs no
// mask, and the low word is a sum: descriptors of one tile at constant offsets then differ by
// a constant, which the compiler adds instead of rebuilding each one (6 instructions a wgmma).
__device__ __forceinline__ uint64_t pgas_wgmma_desc(const void *smem) {
    return (uint64_t)((pgas_smem_addr(smem) >> 4) + (1u << 16)) | (((1024ull >> 4) | (1ull << 30)) << 32);
}
// The same for an MN-major operand (N contiguous) in tiles of 64 columns as the copy engine
// writes them with a 128-byte swizzle: 8-row atoms 1024 bytes apart along K (the stride), the
// tiles `chunk` elements apart along N (the leading offset); a K step of 16 moves 16 rows.
__device__ __forceinline__ uint64_t pgas_wgmma_desc_mn(const void *smem, uint32_t chunk) {
    return (uint64_t)((pgas_smem_addr(smem) >> 4) + ((chunk * 2u >> 4) << 16)) | (((1024ull >> 4) | (1ull << 30)) << 32);
}
__device__ __forceinline__ void pgas_wgmma_fence_operand(pgas_frag_c &c) {
    asm volatile(\"\" : \"+f\"(c.x[0]), \"+f\"(c.x[1]), \"+f\"(c.x[2]), \"+f\"(c.x[3]) :: \"memory\");
}
__device__ __forceinline__ void pgas_wgmma_fence() {
    asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");
}
__device__ __forceinline__ void pgas_wgmma_commit() {
    asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");
}
template <unsigned N> __device__ __forceinline__ void pgas_wgmma_wait() {
    asm volatile(\"wgmma.wait_group.sync.aligned %0;\" :: \"n\"(N) : \"memory\");
}
// wgmma needs all 128 threads of a warpgroup: a block that is not whole warpgroups would leave
// the last one short and the instruction undefined, so the kernel traps at entry. Only the
// checked variant says why: a printf anywhere in the kernel is a call that makes ptxas
// serialize its wgmmas (C7510).
__device__ __forceinline__ void pgas_require_whole_warpgroups(int line) {
    unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    if (threads % 128u != 0u) {
        if (PGAS_CHECKED_VARIANT && threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
            printf(\"%s:%d: this kernel uses warpgroup-wide instructions (wgmma_*) and needs whole warpgroups, but its block has %u threads, not a multiple of 128\\n\", PGAS_RUST_FILE, line, threads);
        }
        __syncthreads();
        __trap();
    }
}
";

/// The thread-block cluster rows of [`sm90_support`]: cluster queries and barriers, distributed
/// shared memory (`mapa`), remote mbarrier arrivals, multicast copies, register reallocation
/// and `stmatrix`.
const SM90_CLUSTER: &str = "__device__ __forceinline__ uint32_t pgas_cluster_ctarank() {
    uint32_t r;
    asm volatile(\"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(r));
    return r;
}
__device__ __forceinline__ uint32_t pgas_cluster_nctarank() {
    uint32_t r;
    asm volatile(\"mov.u32 %0, %%cluster_nctarank;\" : \"=r\"(r));
    return r;
}
__device__ __forceinline__ uint32_t pgas_cluster_id_x() {
    uint32_t r;
    asm volatile(\"mov.u32 %0, %%clusterid.x;\" : \"=r\"(r));
    return r;
}
__device__ __forceinline__ uint32_t pgas_cluster_count_x() {
    uint32_t r;
    asm volatile(\"mov.u32 %0, %%nclusterid.x;\" : \"=r\"(r));
    return r;
}
// Not .aligned: the threads of a warp may reach them apart (a warp-specialized kernel's roles).
__device__ __forceinline__ void pgas_cluster_arrive() {
    asm volatile(\"barrier.cluster.arrive.release;\" ::: \"memory\");
}
__device__ __forceinline__ void pgas_cluster_wait() {
    asm volatile(\"barrier.cluster.wait.acquire;\" ::: \"memory\");
}
__device__ __forceinline__ void pgas_cluster_sync() {
    pgas_cluster_arrive();
    pgas_cluster_wait();
}
// The generic address of `p`'s place in block `rank` of the cluster (distributed shared memory).
template <typename T> __device__ __forceinline__ T *pgas_cluster_map(T *p, uint32_t rank) {
    uint64_t out;
    asm volatile(\"mapa.u64 %0, %1, %2;\" : \"=l\"(out) : \"l\"((uint64_t)p), \"r\"(rank));
    return (T *)out;
}
__device__ __forceinline__ void pgas_mbarrier_arrive_cluster(uint64_t *bar, uint32_t rank) {
    uint32_t remote;
    asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(remote) : \"r\"(pgas_smem_addr(bar)), \"r\"(rank));
    // Release at CTA scope, as a local arrive: what it orders is this thread's reads of the
    // slot, which a completed wgmma_wait already finished; a cluster-scope release would be a
    // fence of every memory access on each call.
    asm volatile(\"mbarrier.arrive.release.cta.shared::cluster.b64 _, [%0];\" :: \"r\"(remote) : \"memory\");
}
__device__ __forceinline__ void pgas_tma_load_2d_multicast(void *dst, const pgas_tensor_map *map, uint64_t *bar, int col, int row, uint16_t mask) {
    asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\"
                 :: \"r\"(pgas_smem_addr(dst)), \"l\"((unsigned long long)map), \"r\"(pgas_smem_addr(bar)), \"r\"(col), \"r\"(row), \"h\"(mask)
                 : \"memory\");
}
__device__ __forceinline__ void pgas_tma_store_2d(const pgas_tensor_map *map, const void *src, int col, int row) {
    asm volatile(\"cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];\"
                 :: \"l\"((unsigned long long)map), \"r\"(pgas_smem_addr(src)), \"r\"(col), \"r\"(row) : \"memory\");
}
__device__ __forceinline__ void pgas_tma_reduce_add_2d(const pgas_tensor_map *map, const void *src, int col, int row) {
    asm volatile(\"cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3}], [%1];\"
                 :: \"l\"((unsigned long long)map), \"r\"(pgas_smem_addr(src)), \"r\"(col), \"r\"(row) : \"memory\");
}
__device__ __forceinline__ void pgas_tma_store_commit() {
    asm volatile(\"cp.async.bulk.commit_group;\" ::: \"memory\");
}
template <unsigned N> __device__ __forceinline__ void pgas_tma_store_wait() {
    asm volatile(\"cp.async.bulk.wait_group %0;\" :: \"n\"(N) : \"memory\");
}
template <unsigned N> __device__ __forceinline__ void pgas_tma_store_wait_read() {
    asm volatile(\"cp.async.bulk.wait_group.read %0;\" :: \"n\"(N) : \"memory\");
}
template <unsigned Threads> __device__ __forceinline__ void pgas_sync_named(uint32_t id) {
    static_assert(Threads % 32 == 0 && Threads > 0, \"sync_named takes a multiple of 32 threads\");
    asm volatile(\"bar.sync %0, %1;\" :: \"r\"(id), \"n\"(Threads) : \"memory\");
}
template <unsigned Threads> __device__ __forceinline__ void pgas_arrive_named(uint32_t id) {
    static_assert(Threads % 32 == 0 && Threads > 0, \"arrive_named takes a multiple of 32 threads\");
    asm volatile(\"bar.arrive %0, %1;\" :: \"r\"(id), \"n\"(Threads) : \"memory\");
}
template <unsigned N> __device__ __forceinline__ void pgas_setmaxnreg_inc() {
    static_assert(N >= 24 && N <= 256 && N % 8 == 0, \"setmaxnreg_inc takes a register count from 24 to 256, a multiple of 8\");
    asm volatile(\"setmaxnreg.inc.sync.aligned.u32 %0;\" :: \"n\"(N));
}
template <unsigned N> __device__ __forceinline__ void pgas_setmaxnreg_dec() {
    static_assert(N >= 24 && N <= 256 && N % 8 == 0, \"setmaxnreg_dec takes a register count from 24 to 256, a multiple of 8\");
    asm volatile(\"setmaxnreg.dec.sync.aligned.u32 %0;\" :: \"n\"(N));
}
// Matrix j of the four is rows 8 (j % 2).. and columns 8 (j / 2).. of the 16 x 16 tile: the
// registers of c[j / 2] at row l / 4 (+ 8), each pair of f32 packed into one word. (Functions,
// not a function-like macro: batch() resets macros by the name after #define.)
__device__ __forceinline__ void pgas_stmatrix_x4(void *dst, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
    asm volatile(\"stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\"
                 :: \"r\"(pgas_smem_addr(dst)), \"r\"(r0), \"r\"(r1), \"r\"(r2), \"r\"(r3) : \"memory\");
}
__device__ __forceinline__ void pgas_stmatrix_x4_bf16(void *dst, const pgas_frag_c *c) {
    pgas_stmatrix_x4(dst, pgas_pack2_bf16(c[0].x[0], c[0].x[1]), pgas_pack2_bf16(c[0].x[2], c[0].x[3]),
                     pgas_pack2_bf16(c[1].x[0], c[1].x[1]), pgas_pack2_bf16(c[1].x[2], c[1].x[3]));
}
__device__ __forceinline__ void pgas_stmatrix_x4_f16(void *dst, const pgas_frag_c *c) {
    pgas_stmatrix_x4(dst, pgas_pack2_f16(c[0].x[0], c[0].x[1]), pgas_pack2_f16(c[0].x[2], c[0].x[3]),
                     pgas_pack2_f16(c[1].x[0], c[1].x[1]), pgas_pack2_f16(c[1].x[2], c[1].x[3]));
}
";

/// Checks of the checked variant for [`sm90_support`]'s intrinsics: TMA destinations aligned
/// and large enough for the tile, wgmma operands where a swizzled tile's row 0 can be.
pub const CHECK_SM90_SUPPORT: &str = "template <typename T> __device__ __forceinline__ T *pgas_check_tma_dst(T *base, size_t i, unsigned long long len, unsigned long long box, int line) {
    const unsigned long long n = (box >> 32) * (box & 0xffffffffull);
    if (i >= len || len - i < n) {
        printf(\"%s:%d: TMA tile out of bounds: %llu elements from element %llu of a buffer of len %llu\\n\", PGAS_RUST_FILE, line, n, (unsigned long long)i, len);
        __trap();
    }
    if (pgas_smem_addr(base + i) % 128 != 0) {
        printf(\"%s:%d: a TMA tile's destination must be 128-byte aligned (1024 for a 128-byte swizzle read by wgmma); element %llu is not\\n\", PGAS_RUST_FILE, line, (unsigned long long)i);
        __trap();
    }
    return base + i;
}
__device__ __forceinline__ uint32_t pgas_check_cluster_rank(uint32_t rank, int line) {
    if (rank >= pgas_cluster_nctarank()) {
        printf(\"%s:%d: block rank %u is outside the cluster of %u blocks\\n\", PGAS_RUST_FILE, line, rank, pgas_cluster_nctarank());
        __trap();
    }
    return rank;
}
__device__ __forceinline__ uint16_t pgas_check_cluster_mask(uint16_t mask, int line) {
    const uint32_t n = pgas_cluster_nctarank();
    if (mask == 0 || (n < 16 && (mask >> n) != 0)) {
        printf(\"%s:%d: multicast mask 0x%x names no block or a block outside the cluster of %u blocks\\n\", PGAS_RUST_FILE, line, (unsigned)mask, n);
        __trap();
    }
    return mask;
}
__device__ __forceinline__ void pgas_check_block_threads(unsigned want, int line) {
    unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    if (threads != want) {
        if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
            printf(\"%s:%d: this kernel reallocates registers (setmaxnreg_*) for blocks of max_threads = %u threads, but was launched with %u\\n\", PGAS_RUST_FILE, line, want, threads);
        }
        __trap();
    }
}
template <typename T> __device__ __forceinline__ T *pgas_check_wgmma_tile(T *base, size_t i, unsigned long long len, unsigned rows, int line) {
    const uint32_t addr = pgas_smem_addr(base + i);
    const unsigned long long n = (unsigned long long)rows * (128 / sizeof(T)) - (addr % 128) / sizeof(T);
    if (i >= len || len - i < n) {
        printf(\"%s:%d: wgmma operand out of bounds: %u rows of 128 bytes from element %llu of a buffer of len %llu\\n\", PGAS_RUST_FILE, line, rows, (unsigned long long)i, len);
        __trap();
    }
    if (addr % 1024 >= 128 || addr % 32 != 0) {
        printf(\"%s:%d: a wgmma operand starts at row 0 of a 1024-byte-aligned swizzled tile, at a K offset of a multiple of 32 bytes (16 elements of 16 bits, 32 of FP8); shared address %u is not\\n\", PGAS_RUST_FILE, line, addr);
        __trap();
    }
    return base + i;
}
template <typename T> __device__ __forceinline__ T *pgas_check_wgmma_tile_mn(T *base, size_t i, unsigned long long len, unsigned n, uint32_t chunk, int line) {
    const uint32_t addr = pgas_smem_addr(base + i);
    const unsigned long long need = (unsigned long long)(n / 64 - 1) * chunk + 16 * 64;
    if (i >= len || len - i < need) {
        printf(\"%s:%d: wgmma operand out of bounds: %u tiles of 64 columns, %u elements apart, 16 rows each, from element %llu of a buffer of len %llu\\n\", PGAS_RUST_FILE, line, n / 64, chunk, (unsigned long long)i, len);
        __trap();
    }
    if (addr % 1024 != 0 || (n > 64 && (chunk * 2u) % 1024 != 0)) {
        printf(\"%s:%d: an MN-major wgmma operand starts at a 1024-byte-aligned row of a swizzled tile, its tiles a multiple of 1024 bytes apart; shared address %u, %u elements apart, are not\\n\", PGAS_RUST_FILE, line, addr, chunk);
        __trap();
    }
    return base + i;
}
";

#[cfg(test)]
mod tests {
    use crate::prelude::SUPPORT;
    use crate::types::EnumTy;

    /// The reductions' codes are `EnumTy::ReduceOp`'s order in the prelude too: `pgas_op_of`
    /// (a comptime reduction's type) and `pgas_combine` (`combine`'s value).
    #[test]
    fn the_prelude_names_each_reduction_by_its_code() {
        for (code, (_, infix)) in EnumTy::ReduceOp.variants().iter().enumerate() {
            if code == 0 {
                assert!(SUPPORT.contains(&format!("struct pgas_op_of : pgas_op_{infix} {{}}")));
                assert!(SUPPORT.contains(&format!("    return pgas_op_{infix}::f(a, b);\n}}")));
            } else {
                let of = format!("struct pgas_op_of<{code}> : pgas_op_{infix} {{}}");
                let combine = format!("if (op == {code}) return pgas_op_{infix}::f(a, b);");
                assert!(SUPPORT.contains(&of), "{of}");
                assert!(SUPPORT.contains(&combine), "{combine}");
            }
        }
    }
}
