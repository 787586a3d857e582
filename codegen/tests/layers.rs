//! The compiler is a stack of layers that only import downwards (docs/internals.md), checked by
//! `pgas_layers::check` as the runtime's are (`runtime/tests/layers.rs`):
//!
//! | layer | modules | holds |
//! | --- | --- | --- |
//! | 0 | `error`, `types`, `prelude`, `bound`, `attr`, `template` | errors and spans, the scalar and buffer types, the fixed CUDA text, a kernel's block bound, `#[pgas_kernel]`'s arguments, a row's template filled |
//! | 1 | `intrinsics` | the one table of intrinsics |
//! | 2 | `ir`, `nvcall`, `docs`, `specialize`, `generic`, `params` | the kernel IR, the NVSHMEM call wrappers, the DSL reference, specializations, generic functions' instances, parameter groups flattened |
//! | 3 | `parse`, `check` | syntax to IR, the type check |
//! | 4 | `emit` | IR to CUDA |
//! | 5 | `compile` | a file or function through the stages |
//! | 6 | `expand` | the macros' tokens |

use std::path::Path;

const LAYERS: &[(&str, u32)] = &[
    ("error", 0),
    ("types", 0),
    ("prelude", 0),
    ("bound", 0),
    ("attr", 0),
    ("template", 0),
    ("intrinsics", 1),
    ("ir", 2),
    ("nvcall", 2),
    ("docs", 2),
    ("specialize", 2),
    ("generic", 2),
    ("params", 2),
    ("parse", 3),
    ("check", 3),
    ("emit", 4),
    ("compile", 5),
    ("expand", 6),
];

#[test]
fn the_compiler_only_imports_downwards_and_has_no_loops() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let wrong = pgas_layers::check(&pgas_layers::Crate {
        src: &src,
        layers: LAYERS,
        skip: &[],
        root_is_a_list: true,
    });
    assert!(wrong.is_empty(), "\n{}\n", wrong.join("\n"));
}
