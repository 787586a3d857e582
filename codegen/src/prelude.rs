//! Fixed CUDA text every generated source starts with.

/// The first lines of every prelude (shared/notes/nvshmem-jit.md): IBGDA off (its header needs
/// `mlx5dv.h`), and `std::` aliased to `cuda::std::` because NVSHMEM 3.4.5's `reduce.cuh` names
/// `std::is_integral`.
macro_rules! prelude_head {
    () => {
        "#include <non_abi/nvshmem_build_options.h>
#undef NVSHMEM_IBGDA_SUPPORT        // else ibgda_device.cuh wants <infiniband/mlx5dv.h>
#include <cuda/std/type_traits>
namespace std { using namespace cuda::std; }   // 3.4.5's reduce.cuh:819 names std::is_integral
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

/// The whole device API (`nvshmem.h`, `nvshmemx.h`), for kernels that call a device collective
/// (reduce, reduce-scatter, all-gather, all-to-all, broadcast).
pub const PRELUDE: &str = concat!(
    prelude_head!(),
    "#include <nvshmem.h>
#include <nvshmemx.h>
"
);

/// The prelude of kernels that use no barrier, sync or collective: NVSHMEM's device API without
/// its collective headers (`nvshmem.h` minus `nvshmem{,x}_coll_defines.cuh`). Those headers
/// define a wrapper for every collective, type and operation, which instantiates NVSHMEM's
/// collective templates whether a kernel uses them or not: most of an NVRTC compile (docs/jit.md).
pub const PRELUDE_P2P: &str = concat!(prelude_head!(), p2p_headers!());

/// The prelude of kernels whose only collectives are barriers and syncs: the point-to-point one
/// plus NVSHMEM's barrier templates alone. The intrinsic table calls those templates
/// (`nvshmemi_barrier_threadgroup`, `nvshmemi_sync_threadgroup`) as NVSHMEM's own wrappers do,
/// so none of the other collectives is instantiated: a barrier kernel compiles in a third of the
/// time (docs/jit.md).
pub const PRELUDE_BARRIER: &str = concat!(
    prelude_head!(),
    p2p_headers!(),
    "#include <non_abi/device/coll/barrier.cuh>   // barriers and syncs, no other collective
"
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
