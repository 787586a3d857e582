//! The Python module's files only import downwards and have no import loops, checked by
//! `pgas_layers::check` as the other crates are (`runtime/tests/layers.rs`):
//!
//! | layer | modules | holds |
//! | --- | --- | --- |
//! | 0 | `dtype`, `stream` | element types, the `stream=` argument |
//! | 1 | `state` | the process's context, the tensor registry, `init` / `finalize` |
//! | 2 | `tensor`, `team` | the Python classes over tensors and teams |
//! | 3 | `ops` | the module's functions |
//!
//! The root holds the module's errors and registration (not a list), so paths to it count as
//! naming no file.

use std::path::Path;

const LAYERS: &[(&str, u32)] = &[
    ("dtype", 0),
    ("stream", 0),
    ("state", 1),
    ("tensor", 2),
    ("team", 2),
    ("ops", 3),
];

#[test]
fn the_module_only_imports_downwards_and_has_no_loops() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let wrong = pgas_layers::check(&pgas_layers::Crate {
        src: &src,
        layers: LAYERS,
        skip: &[],
        root_is_a_list: false,
    });
    assert!(wrong.is_empty(), "\n{}\n", wrong.join("\n"));
}
