//! The runtime is a stack of layers that only import downwards (docs/internals.md):
//!
//! | layer | modules | holds |
//! | --- | --- | --- |
//! | 0 foundation | `error`, `ffi`, `fp8`, `nvshmem`, `device` | errors, raw bindings, the FP8 host types, loading NVSHMEM, the driver probe |
//! | 1 bootstrap | `bootstrap`, `heap` | how PEs find each other, heap sizes |
//! | 2 kernel | `kernel` | what a kernel is: spec, variants, packed arguments (pure data) |
//! | 3 jit | `jit` | specialize, compile, cache, load |
//! | 4 context | `context` | init, the `Pgas` handle, symmetric memory, teams, host RMA and collectives |
//! | 5 launch | `launch` | launch geometry, checks and the driver call; prewarm, raw kernels |
//! | 6 tools | `doctor`, `info`, `launcher`, `prelude` | the CLI's checks and versions, `pgas-run`, re-exports |
//!
//! This test reads every `crate::` and `super::` path in `runtime/src` and fails on an import into a
//! higher layer, or on any loop among the files (a module reaching a sibling through its parent's
//! re-exports counts as a loop: import siblings directly).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LAYERS: &[(&str, u32)] = &[
    ("error", 0),
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

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Module path of a file: `jit/state.rs` -> [jit, state], `jit/mod.rs` -> [jit], `lib.rs` -> [].
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The file that defines module `path`, or its deepest ancestor that is a file.
fn file_of(path: &[String]) -> Option<PathBuf> {
    (0..=path.len()).rev().find_map(|n| {
        let p = path[..n].join("/");
        let candidates = if n == 0 {
            vec![PathBuf::from("lib.rs")]
        } else {
            vec![
                PathBuf::from(format!("{p}.rs")),
                PathBuf::from(format!("{p}/mod.rs")),
            ]
        };
        candidates.into_iter().find(|c| src().join(c).is_file())
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p.strip_prefix(src()).unwrap().to_path_buf());
        }
    }
}

/// Every path a file names through `crate::` or `super::`, expanded out of `use` groups, as
/// absolute module paths. Comments and `#[cfg(test)]` modules' `use super::*` are skipped.
fn imports(rel: &Path, text: &str) -> Vec<Vec<String>> {
    let module = module_of(rel);
    let mut out = Vec::new();
    let code: String = text
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &code[i..];
        let (base, skip) = if rest.starts_with("crate::") {
            (Vec::new(), "crate::".len())
        } else if rest.starts_with("super::") {
            // `super` of a file `a/b.rs` (module a::b) is `a`; of `a/mod.rs` (module a) is the root.
            (
                module[..module.len().saturating_sub(1)].to_vec(),
                "super::".len(),
            )
        } else {
            i += 1;
            continue;
        };
        // Only at an identifier boundary.
        if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
            i += 1;
            continue;
        }
        i += skip;
        let mut path = base;
        loop {
            let seg: String = code[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if seg.is_empty() {
                break;
            }
            i += seg.len();
            path.push(seg);
            if code[i..].starts_with("::") {
                i += 2;
            } else {
                break;
            }
        }
        if code[i..].starts_with('{') {
            // A `use` group: each member's first segment extends the path.
            let end = i + code[i..].find('}').unwrap_or(code.len() - i);
            for member in code[i + 1..end].split(',') {
                let first: String = member
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let mut p = path.clone();
                if !first.is_empty() && first != "self" {
                    p.push(first);
                }
                out.push(p);
            }
            i = end;
        } else if code[i..].starts_with('*') && path.len() >= module.len().saturating_sub(1) {
            // `use super::*` in a test module names its own file.
        } else {
            out.push(path);
        }
    }
    out
}

fn layer(rel: &Path) -> Option<u32> {
    let top = module_of(rel).into_iter().next()?;
    LAYERS.iter().find(|(m, _)| *m == top).map(|(_, l)| *l)
}

#[test]
fn the_runtime_only_imports_downwards_and_has_no_loops() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.retain(|f| !f.starts_with("ffi/bindings.rs"));
    let mut graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(src().join(f)).unwrap();
        let from_layer = layer(f);
        if f != Path::new("lib.rs") && from_layer.is_none() {
            wrong.push(format!(
                "{} belongs to no layer: add it to LAYERS",
                f.display()
            ));
        }
        for path in imports(f, &text) {
            let Some(target) = file_of(&path) else {
                continue;
            };
            if target == *f {
                continue;
            }
            if target == Path::new("lib.rs") {
                wrong.push(format!(
                    "{} names crate::{} through lib.rs's re-exports: import it from its module",
                    f.display(),
                    path.join("::")
                ));
                continue;
            }
            if let (Some(a), Some(b)) = (from_layer, layer(&target)) {
                if b > a {
                    wrong.push(format!(
                        "{} (layer {a}) imports {} (layer {b}) through {}: layers only import \
                         downwards",
                        f.display(),
                        target.display(),
                        path.join("::")
                    ));
                }
            }
            graph.entry(f.clone()).or_default().insert(target);
        }
    }
    // Loops: a depth-first search for a back edge.
    fn visit(
        n: &PathBuf,
        g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        state: &mut BTreeMap<PathBuf, u8>,
        stack: &mut Vec<PathBuf>,
        loops: &mut Vec<String>,
    ) {
        state.insert(n.clone(), 1);
        stack.push(n.clone());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m).copied().unwrap_or(0) {
                0 => visit(m, g, state, stack, loops),
                1 => {
                    let start = stack.iter().position(|s| s == m).unwrap();
                    let cycle: Vec<String> = stack[start..]
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect();
                    loops.push(format!("loop: {} -> {}", cycle.join(" -> "), m.display()));
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.clone(), 2);
    }
    let mut state = BTreeMap::new();
    for f in &files {
        if !state.contains_key(f) {
            visit(f, &graph, &mut state, &mut Vec::new(), &mut wrong);
        }
    }
    assert!(wrong.is_empty(), "\n{}\n", wrong.join("\n"));
}

#[test]
fn the_checker_sees_imports() {
    let found = imports(
        Path::new("jit/state.rs"),
        "use crate::kernel::{Variant, self};\n// use crate::launch::x;\nuse super::disk::DiskCache;\nfn f() { crate::context::Pgas::x(); }\n",
    );
    let found: Vec<String> = found.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        found,
        [
            "kernel::Variant",
            "kernel",
            "jit::disk::DiskCache",
            "context::Pgas::x"
        ]
    );
    assert_eq!(
        file_of(&["jit".into(), "state".into(), "Target".into()]),
        Some("jit/state.rs".into())
    );
    assert_eq!(layer(Path::new("launch/raw.rs")), Some(5));
}
