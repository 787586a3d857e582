//! Snapshot tests of the CUDA generated for every kernel of the corpus: `tests/corpus/`, and
//! `tests/gpu_suite/kernels/`, the corpus files whose kernels the GPU suite also launches (one
//! text for the snapshots, the NVRTC test and the GPU).
//!
//! Each kernel's plain and checked sources are snapshotted without the fixed prelude and
//! support helpers (checked separately below), so a snapshot shows only what the kernel
//! produced. `cargo insta review` updates them.

use pgas_codegen::{compile_file, CompiledKernel, Prelude};
use std::path::{Path, PathBuf};

/// The corpus folders, relative to the workspace root.
const CORPUS: &[&str] = &["tests/corpus", "tests/gpu_suite/kernels"];

/// A corpus file: its stem (which names its snapshots), its path from the workspace root, its
/// text.
struct File {
    stem: String,
    path: String,
    src: String,
}

fn corpus() -> Vec<File> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files: Vec<(String, PathBuf)> = CORPUS
        .iter()
        .flat_map(|dir| {
            std::fs::read_dir(root.join(dir))
                .unwrap_or_else(|e| panic!("{dir}: {e}"))
                .map(move |e| e.expect("readable entry").path())
                .filter(|p| p.extension().is_some_and(|e| e == "rs"))
                .map(move |p| {
                    let name = p.file_name().unwrap().to_string_lossy().into_owned();
                    (format!("{dir}/{name}"), p)
                })
        })
        .collect();
    files.sort_by(|a, b| a.1.file_stem().cmp(&b.1.file_stem()));
    files
        .into_iter()
        .map(|(path, p)| File {
            stem: p
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("")
                .to_string(),
            src: std::fs::read_to_string(&p).expect("readable corpus file"),
            path,
        })
        .collect()
}

fn compile(f: &File) -> Vec<CompiledKernel> {
    match compile_file(&f.src, &f.path) {
        Ok(k) => k,
        Err(errors) => {
            let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            panic!("{} does not compile:\n{}", f.path, list.join("\n"))
        }
    }
}

/// The part of a source after the fixed helpers: the device functions and the kernel.
fn kernel_part(src: &str) -> &str {
    let start = src
        .find("\nstatic __device__ ")
        .into_iter()
        .chain(src.find("\nextern \"C\" __global__"))
        .min()
        .map(|i| i + 1)
        .unwrap_or(0);
    &src[start..]
}

#[test]
fn corpus_snapshots() {
    let mut count = 0;
    for f in corpus() {
        let stem = &f.stem;
        for k in compile(&f) {
            count += 1;
            // A generic kernel's instances are `k::<f32>`: `k__f32` in a file name.
            let name = k.rust_name.replace("::<", "__").replace('>', "");
            let mut meta = format!(
                "cuda_name: {}\nline: {}\ncollective: {}\ncomptime: {:?}\nparams: {:#?}\n",
                k.cuda_name, k.line, k.collective, k.comptime, k.params
            );
            // Only where declared, so the snapshots of kernels without it stay as they were.
            if let Some(n) = k.max_threads {
                meta.push_str(&format!("max_threads: {n}\n"));
            }
            insta::assert_snapshot!(format!("{stem}__{name}__meta"), meta);
            insta::assert_snapshot!(format!("{stem}__{name}__plain"), kernel_part(&k.plain));
            insta::assert_snapshot!(format!("{stem}__{name}__checked"), kernel_part(&k.checked));
        }
    }
    assert!(
        count >= 25,
        "the corpus has {count} kernels; it must have at least 25"
    );
}

#[test]
fn every_source_starts_with_the_prelude_and_names_the_file() {
    for f in corpus() {
        for k in compile(&f) {
            for s in [&k.plain, &k.checked] {
                assert!(s.starts_with(k.prelude.text()), "{}: prelude", k.rust_name);
                assert_eq!(Prelude::of_source(s), Some(k.prelude), "{}", k.rust_name);
                assert_eq!(k.collective, k.prelude.collective(), "{}", k.rust_name);
                assert!(s.contains(&format!("#define PGAS_RUST_FILE \"{}\"", f.path)));
                assert!(s.contains("#line "), "{}: #line directives", k.rust_name);
                assert_eq!(s.matches("extern \"C\" __global__").count(), 1);
            }
            assert!(
                k.checked.contains("pgas_check_"),
                "{}: checked variant checks",
                k.rust_name
            );
            assert!(
                !k.plain.contains("pgas_check_"),
                "{}: plain variant has no checks",
                k.rust_name
            );
        }
    }
}

#[test]
fn collective_flag_follows_barriers_and_collectives() {
    let mut seen = std::collections::BTreeMap::new();
    for f in corpus() {
        for k in compile(&f) {
            seen.insert(k.rust_name.clone(), k.collective);
        }
    }
    for name in [
        "world_barriers",
        "team_barriers",
        "reductions",
        "data_movement",
        "normalize",
    ] {
        assert_eq!(
            seen.get(name),
            Some(&true),
            "{name} needs a collective launch"
        );
    }
    for name in [
        "ring_shift",
        "saxpy",
        "element_rma",
        "peer_copy",
        "tiled_copy",
    ] {
        assert_eq!(
            seen.get(name),
            Some(&false),
            "{name} does not need a collective launch"
        );
    }
}

#[test]
fn corpus_uses_every_intrinsic() {
    let all: String = corpus().into_iter().map(|f| f.src).collect();
    let missing: Vec<&str> = pgas_codegen::intrinsics::INTRINSICS
        .iter()
        .map(|r| r.name)
        .filter(|n| {
            let free = format!("{n}(");
            let generic = format!("{n}::<");
            let method = format!(".{n}(");
            !all.match_indices(&free).any(|(i, _)| {
                i == 0
                    || !all.as_bytes()[i - 1].is_ascii_alphanumeric()
                        && all.as_bytes()[i - 1] != b'_'
            }) && !all.contains(&generic)
                && !all.contains(&method)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "intrinsics no corpus kernel calls: {missing:?}"
    );
}

#[test]
fn barrier_kernels_get_the_barrier_prelude_and_collective_ones_the_full_one() {
    let src = r#"
use pgas::prelude::*;
#[pgas_kernel]
fn only_barriers(team: Team, x: &mut SymTensor<f32>) {
    barrier_all_block();
    x[0] = 1.0;
    team_sync_warp(team);
}
#[pgas_kernel]
fn reduces(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>) {
    barrier_all_block();
    reduce_block(team, dst, src, ReduceOp::Sum);
}
#[pgas_kernel]
fn p2p(x: &mut SymTensor<f32>) {
    p(&mut x[0], 1.0, 0);
}
"#;
    let ks = compile_file(src, "k.rs").unwrap();
    let prelude = |name: &str| ks.iter().find(|k| k.rust_name == name).unwrap().prelude;
    assert_eq!(prelude("only_barriers"), Prelude::Barrier);
    assert_eq!(prelude("reduces"), Prelude::Full);
    assert_eq!(prelude("p2p"), Prelude::P2p);
    let barrier = ks.iter().find(|k| k.rust_name == "only_barriers").unwrap();
    assert!(barrier
        .plain
        .contains("nvshmemi_barrier_threadgroup<nvshmemi_threadgroup_block>(NVSHMEM_TEAM_WORLD)"));
    assert!(!barrier.plain.contains("#include <nvshmem.h>"));
}
