//! `pgas doctor`, run as users run it: the real binary, on whatever this machine has. In CI that is
//! no GPU, and the wheels that scripts/test.sh installs (PGAS_CUDA_HOME, PGAS_NVSHMEM_HOME).

use std::process::{Command, Output};

fn doctor(args: &[&str], env: &[(&str, &str)]) -> (Output, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pgas"));
    cmd.arg("doctor").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the pgas binary runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, text)
}

#[test]
fn reports_every_piece_with_a_fix_for_what_is_missing() {
    let (out, text) = doctor(&[], &[]);
    assert!(
        out.status.success(),
        "doctor without --strict exits 0:\n{text}"
    );
    for piece in [
        "NVIDIA driver",
        "NVRTC",
        "NVSHMEM",
        "MPI",
        "bootstrap",
        "symmetric heap",
    ] {
        assert!(text.contains(piece), "no line for {piece}:\n{text}");
    }
    if pgas::gpu_count().is_err() {
        // No driver here: doctor must say so, with the fix, and --strict must fail.
        assert!(
            text.contains("[MISSING] NVIDIA driver")
                && text.contains("fix: run on a machine with an NVIDIA GPU"),
            "{text}"
        );
        let (strict, _) = doctor(&["--strict"], &[]);
        assert_eq!(
            strict.status.code(),
            Some(1),
            "--strict exits 1 when a piece is missing"
        );
    }
    if std::env::var_os("PGAS_NVSHMEM_HOME").is_some() {
        assert!(
            text.contains("[     ok] NVSHMEM:") && text.contains("found via PGAS_NVSHMEM_HOME"),
            "{text}"
        );
    }
    if std::env::var_os("PGAS_CUDA_HOME").is_some() {
        assert!(text.contains("[     ok] NVRTC: 13."), "{text}");
    }
}

#[test]
fn a_wrong_cuda_home_is_missing_nvrtc_with_the_fix() {
    let empty = std::env::temp_dir().join(format!("pgas-doctor-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let (_, text) = doctor(&[], &[("PGAS_CUDA_HOME", empty.to_str().unwrap())]);
    std::fs::remove_dir_all(&empty).ok();
    assert!(text.contains("[MISSING] NVRTC"), "{text}");
    assert!(
        text.contains("PGAS_CUDA_HOME"),
        "the fix names the variable:\n{text}"
    );
}

#[test]
fn the_jit_helpers_line_says_whether_a_build_starts_them() {
    // The CLI finds itself (it is the helper).
    let (_, text) = doctor(&[], &[("PGAS_JIT_HELPERS", "3")]);
    let me = env!("CARGO_BIN_EXE_pgas");
    assert!(
        text.contains("[     ok] JIT helpers: up to 3 `pgas jit-helper`") && text.contains(me),
        "{text}"
    );
    let (_, text) = doctor(&[], &[("PGAS_JIT_HELPERS", "0")]);
    assert!(
        text.contains("[     ok] JIT helpers: off (PGAS_JIT_HELPERS=0"),
        "{text}"
    );
    let (_, text) = doctor(&[], &[("PGAS_JIT_HELPER", "off")]);
    assert!(
        text.contains("[     ok] JIT helpers: off (PGAS_JIT_HELPER=off)"),
        "{text}"
    );
}

#[test]
fn an_unknown_option_is_a_usage_error() {
    let (out, _) = doctor(&["--frobnicate"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: pgas doctor"));
}

#[test]
fn info_prints_the_versions_it_finds() {
    let out = Command::new(env!("CARGO_BIN_EXE_pgas"))
        .arg("info")
        .output()
        .expect("the pgas binary runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.starts_with(&format!("pgas {}\n", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    for line in ["NVSHMEM", "NVRTC", "CUDA driver", "kernel cache"] {
        assert!(text.contains(line), "no {line} line:\n{text}");
    }
    if std::env::var_os("PGAS_NVSHMEM_HOME").is_some() {
        // CI's pinned wheel: NVSHMEM 3.4.5, which implements OpenSHMEM 1.3.
        assert!(text.contains("NVSHMEM 3.4.5 (OpenSHMEM 1.3) at"), "{text}");
    }
    if std::env::var_os("PGAS_CUDA_HOME").is_some() {
        assert!(text.contains("NVRTC 13."), "{text}");
    }
    if pgas::gpu_count().is_err() {
        assert!(text.contains("CUDA driver: no CUDA driver"), "{text}");
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_pgas"))
        .args(["info", "--bogus"])
        .output()
        .expect("the pgas binary runs");
    assert_eq!(
        bad.status.code(),
        Some(2),
        "an unknown argument is a usage error"
    );
}
