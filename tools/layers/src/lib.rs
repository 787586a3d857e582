//! The layering check of pgas's crates (`runtime/tests/layers.rs`, `codegen/tests/layers.rs`,
//! `tests/layers.rs`): a crate is a stack of layers of top-level modules that only import
//! downwards, with no loop among its files. [`check`] reads every `crate::` and `super::` path
//! of a crate's sources and returns what breaks the rule:
//!
//! - an import into a higher layer;
//! - a loop among the files (a module reaching a sibling through its parent's re-exports counts
//!   as a loop: import siblings directly);
//! - where the crate root only lists and re-exports, a path through it (import from the module);
//! - a top-level module that belongs to no layer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's sources and its layers: `(top-level module, layer)`, higher layers import lower.
pub struct Crate<'a> {
    /// The crate's `src` directory.
    pub src: &'a Path,
    /// Every top-level module and its layer.
    pub layers: &'a [(&'a str, u32)],
    /// Files (relative to `src`) that are not read: generated code.
    pub skip: &'a [&'a str],
    /// Whether a path through the crate root is refused: true where the root re-exports only
    /// the crate's own modules; false for a facade whose root re-exports another crate (its
    /// `crate::Pgas` names no file of this crate).
    pub root_is_a_list: bool,
}

/// Module path of a file: `jit/state.rs` -> `["jit", "state"]`, `jit/mod.rs` -> `["jit"]`,
/// `lib.rs` -> `[]`.
pub fn module_of(rel: &Path) -> Vec<String> {
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

/// The file under `src` that defines module `path`, or its deepest ancestor that is a file.
pub fn file_of(src: &Path, path: &[String]) -> Option<PathBuf> {
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
        candidates.into_iter().find(|c| src.join(c).is_file())
    })
}

fn rust_files(src: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(src, &p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            if let Ok(rel) = p.strip_prefix(src) {
                out.push(rel.to_path_buf());
            }
        }
    }
}

/// Every path a file names through `crate::` or `super::`, expanded out of `use` groups, as
/// absolute module paths. Comments and `#[cfg(test)]` modules' `use super::*` are skipped.
pub fn imports(rel: &Path, text: &str) -> Vec<Vec<String>> {
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
        // Bytes, not `&str`: `i` steps a byte at a time and may stand inside a character.
        let rest = &bytes[i..];
        let (base, skip) = if rest.starts_with(b"crate::") {
            (Vec::new(), "crate::".len())
        } else if rest.starts_with(b"super::") {
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

impl Crate<'_> {
    /// The layer of the file `rel`, by its top-level module.
    pub fn layer(&self, rel: &Path) -> Option<u32> {
        let top = module_of(rel).into_iter().next()?;
        self.layers.iter().find(|(m, _)| *m == top).map(|(_, l)| *l)
    }
}

/// What breaks the layering of `krate`, one line each (empty: nothing).
pub fn check(krate: &Crate<'_>) -> Vec<String> {
    let src = krate.src;
    let mut files = Vec::new();
    rust_files(src, src, &mut files);
    files.retain(|f| !krate.skip.iter().any(|s| f == Path::new(s)));
    files.sort();
    let mut graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(src.join(f)) else {
            wrong.push(format!("{} cannot be read", f.display()));
            continue;
        };
        let from_layer = krate.layer(f);
        if f != Path::new("lib.rs") && from_layer.is_none() {
            wrong.push(format!(
                "{} belongs to no layer: add it to the layers",
                f.display()
            ));
        }
        for path in imports(f, &text) {
            let Some(target) = file_of(src, &path) else {
                continue;
            };
            if target == *f {
                continue;
            }
            if target == Path::new("lib.rs") {
                if krate.root_is_a_list {
                    wrong.push(format!(
                        "{} names crate::{} through lib.rs's re-exports: import it from its module",
                        f.display(),
                        path.join("::")
                    ));
                }
                continue;
            }
            if let (Some(a), Some(b)) = (from_layer, krate.layer(&target)) {
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
    let mut state = BTreeMap::new();
    for f in &files {
        if !state.contains_key(f) {
            visit(f, &graph, &mut state, &mut Vec::new(), &mut wrong);
        }
    }
    wrong
}

/// A depth-first search from `n` that reports each back edge as a loop.
fn visit(
    n: &PathBuf, g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>, state: &mut BTreeMap<PathBuf, u8>,
    stack: &mut Vec<PathBuf>, loops: &mut Vec<String>,
) {
    state.insert(n.clone(), 1);
    stack.push(n.clone());
    for m in g.get(n).into_iter().flatten() {
        match state.get(m).copied().unwrap_or(0) {
            0 => visit(m, g, state, stack, loops),
            1 => {
                let start = stack.iter().position(|s| s == m).unwrap_or(0);
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

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn text_with_wide_characters_is_read() {
        let found = imports(
            Path::new("a.rs"),
            "/// `S = Q K\u{1d40}`\nconst D: &str = \"K\u{1d40} \u{e9}\"; use crate::b::C;\n",
        );
        let found: Vec<String> = found.iter().map(|p| p.join("::")).collect();
        assert_eq!(found, ["b::C"]);
    }

    #[test]
    fn a_loop_and_an_upward_import_are_reported() {
        let dir = std::env::temp_dir().join(format!("pgas-layers-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("b")).unwrap();
        std::fs::write(dir.join("lib.rs"), "mod a; mod b;").unwrap();
        std::fs::write(dir.join("a.rs"), "use crate::b::X;").unwrap();
        std::fs::write(
            dir.join("b/mod.rs"),
            "mod c; pub struct X; pub use crate::b::c::Y;",
        )
        .unwrap();
        std::fs::write(dir.join("b/c.rs"), "use super::X; pub struct Y;").unwrap();
        let layers = [("a", 0), ("b", 1)];
        let krate = Crate {
            src: &dir,
            layers: &layers,
            skip: &[],
            root_is_a_list: true,
        };
        assert_eq!(
            file_of(&dir, &["b".into(), "c".into(), "Y".into()]),
            Some("b/c.rs".into())
        );
        assert_eq!(krate.layer(Path::new("b/c.rs")), Some(1));
        let wrong = check(&krate);
        assert!(
            wrong
                .iter()
                .any(|w| w.contains("a.rs (layer 0) imports b/mod.rs (layer 1)")),
            "{wrong:?}"
        );
        assert!(wrong.iter().any(|w| w.starts_with("loop:")), "{wrong:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
