//! Fixed CUDA text every generated source starts with.

/// The NVSHMEM prelude for NVRTC (shared/notes/nvshmem-jit.md): IBGDA off (its header needs
/// `mlx5dv.h`), and `std::` aliased to `cuda::std::` because NVSHMEM 3.4.5's `reduce.cuh`
/// names `std::is_integral`. The whole device API; kernels that use a barrier, sync or
/// collective start with it.
pub const PRELUDE: &str = "#include <non_abi/nvshmem_build_options.h>
#undef NVSHMEM_IBGDA_SUPPORT        // else ibgda_device.cuh wants <infiniband/mlx5dv.h>
#include <cuda/std/type_traits>
namespace std { using namespace cuda::std; }   // 3.4.5's reduce.cuh:819 names std::is_integral
#include <nvshmem.h>
#include <nvshmemx.h>
";

/// The prelude of kernels that use no barrier, sync or collective: NVSHMEM's device API without
/// its collective headers (`nvshmem.h` minus `nvshmem{,x}_coll_defines.cuh`). Those headers
/// instantiate every collective template for every type and operation, which is most of an
/// NVRTC compile (docs/jit.md: 2.1-2.5 s with them, 0.9 s without, on an H200 machine), and
/// the barriers live there too, so the intrinsic table's collective flag decides.
pub const PRELUDE_P2P: &str = "#include <non_abi/nvshmem_build_options.h>
#undef NVSHMEM_IBGDA_SUPPORT        // else ibgda_device.cuh wants <infiniband/mlx5dv.h>
#include <cuda/std/type_traits>
namespace std { using namespace cuda::std; }   // as in the full prelude
#include <device/nvshmem_defines.h>     // nvshmem.h without the collective headers
#include <device/nvshmemx_defines.h>
";

/// The prelude a kernel's source starts with: [`PRELUDE`] when it needs a collective launch,
/// else the lighter [`PRELUDE_P2P`].
pub fn prelude_for(collective: bool) -> &'static str {
    if collective {
        PRELUDE
    } else {
        PRELUDE_P2P
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
