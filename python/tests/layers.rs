//! The Python module's files only import downwards and have no import loops, checked by
//! `pgas_layers::check` as the other crates are (`runtime/tests/layers.rs`):
//!
//! | layer | modules | holds |
//! | --- | --- | --- |
//! | 0 | `errors` | the exceptions |
//! | 0 | `locks` | the one way the module locks its process-wide mutexes |
//! | 1 | `dtype`, `stream` | element types, the `stream=` argument |
//! | 1 | `torch_tensor` | a torch tensor read from Rust (the GEMM's `out=` in one call) |
//! | 2 | `state` | the process's context, the tensor registry, `init` / `finalize` |
//! | 3 | `tensor`, `team` | the Python classes over tensors and teams |
//! | 4 | `ops` | the module's functions |
//! | 4 | `device` | the device API of Numba kernels: the library's wrappers, PTX, module readying |
//! | 5 | `kernel` | `pgas.kernel`: kernels from a string, launched through `ops`' call |
//! | 5 | `coll` | `pgas.Comm`: pgas's own collectives, called through `ops`' call |
//! | 6 | `library` | pgas's library (GEMM, collectives, fused ops) on foreign memory, by address |
//!
//! The root lists the modules and registers them with Python; nothing imports through it.

use std::path::Path;

const LAYERS: &[(&str, u32)] = &[
    ("errors", 0),
    ("locks", 0),
    ("dtype", 1),
    ("stream", 1),
    ("torch_tensor", 1),
    ("state", 2),
    ("tensor", 3),
    ("team", 3),
    ("ops", 4),
    ("kernel", 5),
    ("coll", 5),
    ("library", 6),
    ("device", 4),
];

#[test]
fn the_module_only_imports_downwards_and_has_no_loops() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let wrong = pgas_layers::check(&pgas_layers::Crate {
        src: &src,
        layers: LAYERS,
        skip: &[],
        root_is_a_list: true,
    });
    assert!(wrong.is_empty(), "\n{}\n", wrong.join("\n"));
}
