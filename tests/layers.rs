//! The facade's libraries written in pgas only import downwards and have no import loops,
//! checked by `pgas_layers::check` as the runtime's layers are (`runtime/tests/layers.rs`):
//!
//! | layer | modules | holds |
//! | --- | --- | --- |
//! | 0 | `gemm`, `coll`, `debug` | the Hopper GEMM, the collectives, the `Debug` impls' macro |
//! | 1 | `attention` | the Hopper attention (its test inputs are the GEMM's) |
//! | 2 | `ops` | fused operations, on the GEMM, the attention and the collectives |
//! | 3 | `bin` | the `pgas` and `pgas-run` programs |
//!
//! The root re-exports the runtime, so `crate::Pgas` names no file here: only paths to this
//! crate's own modules count.

use std::path::Path;

const LAYERS: &[(&str, u32)] = &[
    ("gemm", 0),
    ("coll", 0),
    ("debug", 0),
    ("attention", 1),
    ("ops", 2),
    ("bin", 3),
];

#[test]
fn the_libraries_only_import_downwards_and_have_no_loops() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let wrong = pgas_layers::check(&pgas_layers::Crate {
        src: &src,
        layers: LAYERS,
        skip: &[],
        root_is_a_list: false,
    });
    assert!(wrong.is_empty(), "\n{}\n", wrong.join("\n"));
}
