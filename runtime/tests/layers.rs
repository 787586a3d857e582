//! The runtime is a stack of layers that only import downwards (docs/internals.md):
//!
//! | layer | modules | holds |
//! | --- | --- | --- |
//! | 0 foundation | `error`, `launch_cause`, `ffi`, `fp8`, `nvshmem`, `device` | errors, raw bindings, the FP8 host types, loading NVSHMEM, the driver probe |
//! | 1 bootstrap | `bootstrap`, `heap` | how PEs find each other, heap sizes |
//! | 2 kernel | `kernel` | what a kernel is: spec, variants, packed arguments (pure data) |
//! | 3 jit | `jit` | specialize, compile, cache, load |
//! | 4 context | `context` | init, the `Pgas` handle, symmetric memory, teams, host RMA and collectives |
//! | 5 launch | `launch` | launch geometry, checks and the driver call; prewarm, raw kernels |
//! | 6 tools | `doctor`, `info`, `launcher`, `prelude` | the CLI's checks and versions, `pgas-run`, re-exports |
//!
//! `pgas_layers::check` reads every `crate::` and `super::` path in `runtime/src` and fails on an
//! import into a higher layer, a path through lib.rs's re-exports, or any loop among the files (a
//! module reaching a sibling through its parent's re-exports counts as a loop: import siblings
//! directly).

use std::path::Path;

const LAYERS: &[(&str, u32)] = &[
    ("error", 0),
    ("launch_cause", 0),
    ("ffi", 0),
    ("fp8", 0),
    ("nvshmem", 0),
    ("device", 0),
    ("bootstrap", 1),
    ("heap", 1),
    ("kernel", 2),
    ("jit", 3),
    ("context", 4),
    ("launch", 5),
    ("doctor", 6),
    ("info", 6),
    ("launcher", 6),
    ("prelude", 6),
];

#[test]
fn the_runtime_only_imports_downwards_and_has_no_loops() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let wrong = pgas_layers::check(&pgas_layers::Crate {
        src: &src,
        layers: LAYERS,
        skip: &["ffi/bindings.rs"],
        root_is_a_list: true,
    });
    assert!(wrong.is_empty(), "\n{}\n", wrong.join("\n"));
}
