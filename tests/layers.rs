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
//! crate's own modules count. And every fused operation's folder has the same files.

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

/// Every fused operation is a folder of `src/ops/` (a mode with a type of its own, a folder in
/// its op's) holding `mod.rs` (the public type and its docs), `plan.rs` (set-up, checks,
/// buffers) and `op.rs` (the calls), with its kernels in `kernels.rs` (a reference kernel, for
/// checking, in `reference.rs`): CONTRIBUTING.md's recipe. The files beside the folders are the
/// operations' shared helpers and hold no kernel.
#[test]
fn every_fused_operation_has_the_same_files() {
    fn walk(dir: &Path, top: bool, wrong: &mut Vec<String>) {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).expect("a readable folder") {
            let path = entry.expect("a readable entry").path();
            if path.is_dir() {
                walk(&path, false, wrong);
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).expect("a readable source");
            let kernel_file = !top && (name == "kernels.rs" || name == "reference.rs");
            if text.contains("#[pgas_kernel") && !kernel_file {
                wrong.push(format!("{}: a kernel outside kernels.rs", path.display()));
            }
            names.push(name);
        }
        for needed in ["mod.rs", "plan.rs", "op.rs"] {
            if !top && !names.iter().any(|n| n == needed) {
                wrong.push(format!("{}: no {needed}", dir.display()));
            }
        }
    }
    let ops = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ops");
    let mut wrong = Vec::new();
    walk(&ops, true, &mut wrong);
    assert!(
        wrong.is_empty(),
        "{}\nFix: lay the operation out as CONTRIBUTING.md's fused-operation recipe says",
        wrong.join("\n")
    );
}
