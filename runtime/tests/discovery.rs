//! NVSHMEM discovery and version checks against fake roots (temp folders). The mismatch test
//! also loads the real library when `PGAS_NVSHMEM_HOME` points at one (CI sets it to the wheel).

use std::fs;
use std::path::{Path, PathBuf};

use pgas_runtime::nvshmem::discover::{FoundVia, Search};
use pgas_runtime::nvshmem::Nvshmem;
use pgas_runtime::Error;

/// A fresh empty folder under the target dir (no tempfile dependency needed).
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("discovery-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Lays out a fake NVSHMEM root; `lib` is copied in as the host library if given.
fn fake_root(dir: &Path, version: (u32, u32, u32), lib: Option<&Path>) {
    fs::create_dir_all(dir.join("include/non_abi")).unwrap();
    fs::create_dir_all(dir.join("lib")).unwrap();
    fs::write(dir.join("include/nvshmem.h"), "").unwrap();
    fs::write(
        dir.join("include/non_abi/nvshmem_version.h"),
        format!(
            "#define NVSHMEM_VENDOR_MAJOR_VERSION {}\n#define NVSHMEM_VENDOR_MINOR_VERSION {}\n\
             #define NVSHMEM_VENDOR_PATCH_VERSION {}\n",
            version.0, version.1, version.2
        ),
    )
    .unwrap();
    let target = dir.join("lib/libnvshmem_host.so.3");
    match lib {
        Some(real) => std::os::unix::fs::symlink(real, target).unwrap(),
        None => fs::write(target, "").unwrap(),
    }
}

fn search() -> Search {
    Search {
        pgas_nvshmem_home: None,
        nvshmem_home: None,
        python: None,
        system_prefixes: vec![],
    }
}

#[test]
fn pgas_nvshmem_home_wins_over_nvshmem_home_and_prefixes() {
    let (a, b, c) = (scratch("a"), scratch("b"), scratch("c"));
    for d in [&a, &b, &c] {
        fake_root(d, (3, 4, 5), None);
    }
    let s = Search {
        pgas_nvshmem_home: Some(a.clone()),
        nvshmem_home: Some(b.clone()),
        system_prefixes: vec![c.clone()],
        ..search()
    };
    let found = s.find().unwrap();
    assert_eq!(
        (found.root, found.found_via),
        (a, FoundVia::PgasNvshmemHome)
    );
    assert_eq!(found.header_version, (3, 4, 5));
    assert_eq!(
        found.include_dir,
        found.lib_dir.parent().unwrap().join("include")
    );

    let s = Search {
        nvshmem_home: Some(b.clone()),
        system_prefixes: vec![c.clone()],
        ..search()
    };
    assert_eq!(s.find().unwrap().found_via, FoundVia::NvshmemHome);

    let s = Search {
        system_prefixes: vec![scratch("empty"), c.clone()],
        ..search()
    };
    let found = s.find().unwrap();
    assert_eq!((found.root, found.found_via), (c, FoundVia::SystemPrefix));
}

#[test]
fn python_interpreter_is_asked_for_the_wheel() {
    let root = scratch("wheel");
    fake_root(&root, (3, 4, 5), None);
    // A stand-in interpreter that prints the wheel folder, as python3 does for nvidia.nvshmem.
    let py = scratch("py").join("python3");
    fs::write(&py, format!("#!/bin/sh\necho {}\n", root.display())).unwrap();
    fs::set_permissions(&py, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let s = Search {
        python: Some(py.display().to_string()),
        ..search()
    };
    let found = s.find().unwrap();
    assert_eq!(found.root, root);
    assert!(matches!(found.found_via, FoundVia::Python(_)));
}

#[test]
fn not_found_lists_every_place_and_the_fix() {
    let empty = scratch("nothing");
    let s = Search {
        python: Some("/nonexistent/python3".into()),
        system_prefixes: vec![empty.clone()],
        ..search()
    };
    let msg = s.find().unwrap_err().to_string();
    for want in [
        "PGAS_NVSHMEM_HOME: not set",
        "NVSHMEM_HOME: not set",
        "/nonexistent/python3",
        &format!("{}: no include/nvshmem.h", empty.display()),
        "pip install nvidia-nvshmem-cu13==3.4.5",
    ] {
        assert!(msg.contains(want), "missing {want:?} in:\n{msg}");
    }
}

#[test]
fn a_broken_explicit_root_is_an_error_not_skipped() {
    let broken = scratch("broken");
    fs::create_dir_all(broken.join("include")).unwrap();
    fs::write(broken.join("include/nvshmem.h"), "").unwrap();
    let good = scratch("good");
    fake_root(&good, (3, 4, 5), None);
    let s = Search {
        pgas_nvshmem_home: Some(broken.clone()),
        system_prefixes: vec![good],
        ..search()
    };
    let msg = s.find().unwrap_err().to_string();
    assert!(
        msg.contains("PGAS_NVSHMEM_HOME=") && msg.contains("libnvshmem_host.so.3"),
        "{msg}"
    );
}

#[test]
fn garbage_header_version_is_reported() {
    let root = scratch("garbage");
    fake_root(&root, (3, 4, 5), None);
    fs::write(
        root.join("include/non_abi/nvshmem_version.h"),
        "#define NVSHMEM_VENDOR_MAJOR_VERSION x\n",
    )
    .unwrap();
    let msg = Search {
        nvshmem_home: Some(root),
        ..search()
    }
    .find()
    .unwrap_err()
    .to_string();
    assert!(
        msg.contains("nvshmem_version.h") && msg.contains("not a number"),
        "{msg}"
    );
}

#[test]
fn unloadable_library_is_an_error() {
    let root = scratch("unloadable");
    fake_root(&root, (3, 4, 5), None); // an empty file is not an ELF library
    let install = Search {
        pgas_nvshmem_home: Some(root),
        ..search()
    }
    .find()
    .unwrap();
    let msg = Nvshmem::load(&install).unwrap_err().to_string();
    assert!(
        msg.contains("cannot load") && msg.contains("PGAS_NVSHMEM_HOME"),
        "{msg}"
    );
}

/// Needs a real NVSHMEM (`PGAS_NVSHMEM_HOME`); skipped with a note otherwise.
#[test]
fn real_library_against_mismatched_headers() {
    let Some(home) = std::env::var_os("PGAS_NVSHMEM_HOME").map(PathBuf::from) else {
        eprintln!("skipped: PGAS_NVSHMEM_HOME is not set");
        return;
    };
    let real = Search {
        pgas_nvshmem_home: Some(home),
        ..search()
    }
    .find()
    .unwrap();
    let nv = Nvshmem::load(&real).expect("the real install loads and matches its headers");
    assert_eq!(nv.version(), real.header_version);
    // nvshmemx_flush_on_stream came with 3.7 (tests/flush_symbol.rs finds it in 3.8).
    assert_eq!(
        nv.has_flush(),
        nv.version() >= (3, 7, 0),
        "{:?}",
        nv.version()
    );

    let fake = scratch("mismatch");
    fake_root(&fake, (3, 3, 9), Some(&real.host_library()));
    let install = Search {
        pgas_nvshmem_home: Some(fake),
        ..search()
    }
    .find()
    .unwrap();
    match Nvshmem::load(&install) {
        Err(e @ Error::NvshmemVersionMismatch { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("3.3.9")
                    && msg.contains(&format!("{}.{}.", nv.version().0, nv.version().1)),
                "{msg}"
            );
        }
        other => panic!("expected a version mismatch, got {other:?}"),
    }
}
