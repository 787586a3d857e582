//! The bindgen configuration for `runtime/src/ffi/bindings.rs`.
//!
//! One function, [`builder`], is shared by the generator (`src/main.rs`, run by
//! `scripts/regen-ffi.sh`) and by the freshness test (`tests/fresh.rs`), so the checked-in file
//! and the check can never disagree about options.
//!
//! Only functions that `libnvshmem_host.so.3` really exports are allowlisted: the bindings use
//! bindgen's `dynamic_link_require_all`, so every listed symbol must resolve when the library is
//! loaded. `static inline` header functions such as `nvshmem_init` or `nvshmemx_init_attr` are
//! therefore absent (they call into `libnvshmem_device.a`).

use std::path::{Path, PathBuf};

/// Name of the generated libloading struct (`NvshmemHost::from_library`).
pub const LIBRARY_STRUCT: &str = "NvshmemHost";

/// Path of the checked-in bindings, relative to the workspace root.
pub const BINDINGS_PATH: &str = "runtime/src/ffi/bindings.rs";

/// Untyped host functions pgas uses or that host users of NVSHMEM need (init, memory,
/// RMA and signals on a stream, ordering, teams, module init for the JIT).
const FUNCTIONS: &[&str] = &[
    // Initialization, finalization, query.
    "nvshmemx_hostlib_init_attr",
    "nvshmemx_hostlib_finalize",
    "nvshmemx_init_status",
    "nvshmemx_get_uniqueid",
    "nvshmemx_set_attr_uniqueid_args",
    "nvshmemx_vendor_get_version_info",
    "nvshmem_info_get_version",
    "nvshmem_info_get_name",
    "nvshmem_my_pe",
    "nvshmem_n_pes",
    "nvshmem_global_exit",
    // Symmetric memory.
    "nvshmem_malloc",
    "nvshmem_calloc",
    "nvshmem_align",
    "nvshmem_free",
    "nvshmem_ptr",
    "nvshmemx_mc_ptr",
    "nvshmemx_buffer_register",
    "nvshmemx_buffer_unregister",
    "nvshmemx_buffer_register_symmetric",
    "nvshmemx_buffer_unregister_symmetric",
    // JIT-loaded modules carry their own copy of the device state.
    "nvshmemx_cumodule_init",
    "nvshmemx_cumodule_finalize",
    "nvshmemx_culibrary_init",
    "nvshmemx_culibrary_finalize",
    // RMA and signals, blocking and on a stream.
    "nvshmem_putmem",
    "nvshmem_getmem",
    "nvshmemx_putmem_on_stream",
    "nvshmemx_getmem_on_stream",
    "nvshmemx_putmem_signal_on_stream",
    "nvshmemx_putmem_nbi_on_stream",
    "nvshmemx_getmem_nbi_on_stream",
    "nvshmemx_putmem_signal_nbi_on_stream",
    "nvshmem_signal_fetch",
    "nvshmemx_signal_op_on_stream",
    "nvshmemx_signal_wait_until_on_stream",
    // Ordering and synchronization.
    "nvshmem_quiet",
    "nvshmem_fence",
    "nvshmemx_quiet_on_stream",
    "nvshmem_barrier_all",
    "nvshmemx_barrier_all_on_stream",
    "nvshmem_barrier",
    "nvshmemx_barrier_on_stream",
    "nvshmem_sync_all",
    "nvshmemx_sync_all_on_stream",
    "nvshmem_team_sync",
    "nvshmemx_team_sync_on_stream",
    // Teams.
    "nvshmem_team_my_pe",
    "nvshmem_team_n_pes",
    "nvshmem_team_translate_pe",
    "nvshmem_team_split_strided",
    "nvshmem_team_split_2d",
    "nvshmem_team_destroy",
    "nvshmem_team_get_config",
    // A team from a unique id that its members share (`TeamConfig::uniqueid`).
    "nvshmemx_team_get_uniqueid",
    "nvshmemx_team_init",
    // Untyped collectives on a stream.
    "nvshmemx_broadcastmem_on_stream",
    "nvshmemx_fcollectmem_on_stream",
    "nvshmemx_alltoallmem_on_stream",
];

/// Element types of the typed collectives on a stream (names as in the NVSHMEM API).
const COLLECTIVE_TYPES: &str =
    "half|bfloat16|float|double|int8|int16|int32|int64|uint8|uint16|uint32|uint64";

/// Regex for the typed collectives on a stream that host code can call.
fn typed_collectives() -> Vec<String> {
    vec![
        format!("nvshmemx_({COLLECTIVE_TYPES})_(broadcast|fcollect|alltoall)_on_stream"),
        format!("nvshmemx_({COLLECTIVE_TYPES})_(sum|max|min|prod)_reduce_on_stream"),
        "nvshmemx_(int8|int16|int32|int64|uint8|uint16|uint32|uint64)_(and|or|xor)_reduce_on_stream"
            .to_string(),
        format!("nvshmemx_({COLLECTIVE_TYPES})_(sum|max|min|prod)_reducescatter_on_stream"),
        "nvshmemx_(int8|int16|int32|int64|uint8|uint16|uint32|uint64)_(and|or|xor)_reducescatter_on_stream"
            .to_string(),
    ]
}

/// Regex for the blocking host AMOs: every operation on the fixed-width integers, and the ones
/// NVSHMEM also offers on floating point (fetch, set, swap).
fn host_atomics() -> Vec<String> {
    vec![
        "nvshmem_(int32|int64|uint32|uint64)_atomic_(fetch|set|swap|compare_swap|add|fetch_add|inc|fetch_inc|and|fetch_and|or|fetch_or|xor|fetch_xor)"
            .to_string(),
        "nvshmem_(float|double)_atomic_(fetch|set|swap)".to_string(),
    ]
}

/// The header bindgen parses: the public host API, without device code.
const WRAPPER: &str = "#include <host/nvshmemx_api.h>\n";

/// Builds the bindgen configuration from an NVSHMEM root (holding `include/`) and a CUDA
/// include directory (holding `cuda.h` and `cuda_runtime.h`).
pub fn builder(nvshmem_root: &Path, cuda_include: &Path) -> bindgen::Builder {
    let nvshmem_include: PathBuf = nvshmem_root.join("include");
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("shim");
    let mut b = bindgen::Builder::default()
        .header_contents("pgas_nvshmem_wrapper.h", WRAPPER)
        .clang_args(["-x", "c++", "-std=c++17"])
        // The shim goes first so that it stands in for cuda_runtime.h / cuda_fp16.h / cuda_bf16.h.
        .clang_arg(format!("-I{}", shim.display()))
        .clang_arg(format!("-I{}", nvshmem_include.display()))
        .clang_arg(format!("-I{}", cuda_include.display()))
        .dynamic_library_name(LIBRARY_STRUCT)
        .dynamic_link_require_all(true)
        // CUDA handles and 16-bit floats are cudarc's and half's types, so values pass
        // between the crates without casts.
        .blocklist_type("CUstream|CUstream_st|CUmodule|CUmod_st|CUlibrary|CUlib_st|cudaStream_t")
        .blocklist_type("__half|half|__nv_bfloat16")
        .raw_line("// @generated by tools/ffi-gen (scripts/regen-ffi.sh). Do not edit by hand.")
        .raw_line("use cudarc::driver::sys::{CUlibrary, CUmodule, CUstream};")
        .raw_line("/// `cudaStream_t` is the driver's `CUstream`.")
        .raw_line("pub type cudaStream_t = CUstream;")
        .raw_line("pub use ::half::{bf16 as __nv_bfloat16, f16 as half};")
        .allowlist_type("nvshmemx_init_attr_t")
        .allowlist_type("nvshmemx_uniqueid_t")
        .allowlist_type("nvshmemx_uniqueid_args_t")
        .allowlist_type("nvshmem_team_t")
        .allowlist_type("nvshmem_team_config_t")
        .allowlist_type("flags")
        // Team ids, comparison and signal operators, init status: C enums, emitted as consts.
        .allowlist_type("nvshmem_team_id_t|nvshmemx_cmp_type_t|nvshmemx_signal_op_t")
        .allowlist_type("nvshmemx_init_status_t")
        .allowlist_var("NVSHMEM_VENDOR_(MAJOR|MINOR|PATCH)_VERSION")
        .allowlist_var("NVSHMEM_INIT_ATTR_VER")
        .allowlist_var("NVSHMEM_TEAM_CONFIG_MASK_.*")
        .constified_enum_module("flags")
        .prepend_enum_name(false)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .layout_tests(true)
        .derive_default(true)
        .derive_debug(false)
        .generate_comments(false)
        .formatter(bindgen::Formatter::Prettyplease);
    for f in FUNCTIONS {
        b = b.allowlist_function(format!("^{f}$"));
    }
    for f in typed_collectives().into_iter().chain(host_atomics()) {
        b = b.allowlist_function(format!("^{f}$"));
    }
    b
}

/// Generates the bindings text for the given roots.
pub fn generate(nvshmem_root: &Path, cuda_include: &Path) -> Result<String, String> {
    builder(nvshmem_root, cuda_include)
        .generate()
        .map(|b| b.to_string())
        .map_err(|e| format!("bindgen failed on {}: {e}", nvshmem_root.display()))
}

/// The NVSHMEM root and CUDA include directory from `PGAS_NVSHMEM_HOME` and `PGAS_CUDA_HOME`
/// (a CUDA toolkit or the `nvidia/cu13` folder of the CUDA wheels; `include/` is appended).
pub fn roots_from_env() -> Result<(PathBuf, PathBuf), String> {
    let get = |k: &str| {
        std::env::var_os(k).map(PathBuf::from).ok_or_else(|| {
            format!(
                "{k} is not set. Set PGAS_NVSHMEM_HOME to an NVSHMEM root (e.g. the nvidia/nvshmem \
                 folder of `pip install nvidia-nvshmem-cu13==3.4.5`) and PGAS_CUDA_HOME to a folder \
                 with include/cuda.h (e.g. /usr/local/cuda or the nvidia/cu13 folder of the CUDA wheels)"
            )
        })
    };
    Ok((
        get("PGAS_NVSHMEM_HOME")?,
        get("PGAS_CUDA_HOME")?.join("include"),
    ))
}
