//! A dry run of `scripts/gpu-suite.sh`, the one script a GPU session runs, on this machine (no
//! GPU): every mode, against stub programs and a fake `nvidia-smi` that lists one GPU (so the
//! GPU steps are taken, the 2- and 4-PE ones through `pgas-run --share-gpus` under a fake MPS
//! daemon), with a fake `compute-sanitizer`. A script mistake (a shell function handed to
//! `timeout`, an unset variable, a wrong path) costs a whole device call there; here it fails a
//! test. Each stub says `skipped: no GPU`, as the real programs do without one, so every step
//! that ran must be a SKIP; the few steps that check a program's own output (the launcher's
//! refusal, the kernel-cache warning) are the only FAILs allowed.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Steps that judge the real program's output, which a stub cannot give.
const EXPECTED_FAILS: &[&str] = &["pgas-run refuses", "unwritable kernel cache"];

fn write_exe(path: &Path, body: &str) {
    fs::write(path, format!("#!/usr/bin/env bash\n{body}\n")).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A stub device folder (`bin/` with every program build-device.sh makes) and a folder of fake
/// system tools, under a fresh temporary directory.
fn fixtures(root: &Path) -> (PathBuf, PathBuf) {
    let dev = root.join("device");
    let bin = dev.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let mut programs: Vec<String> = ["gpu_suite", "hello_ring_mpi", "pgas"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for dir in ["examples", "benches"] {
        for entry in fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if let Some(stem) = name.strip_suffix(".rs") {
                programs.push(stem.to_string());
            }
        }
    }
    // Benchmarks whose target is not named after their file (`[[bench]]` with a `path`):
    // build-device.sh copies them under the target's name.
    let manifest =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    for block in manifest.split("[[bench]]").skip(1) {
        if let Some(name) = block
            .lines()
            .find_map(|l| l.trim().strip_prefix("name = \""))
            .and_then(|rest| rest.strip_suffix('"'))
        {
            programs.push(name.to_string());
        }
    }
    for p in &programs {
        write_exe(&bin.join(p), "echo \"$(basename \"$0\"): skipped: no GPU\"");
    }
    // pgas-run: runs what follows `--` once (the ranks would each say the same).
    write_exe(
        &bin.join("pgas-run"),
        "while [ $# -gt 0 ] && [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"",
    );
    fs::write(dev.join("COMMIT"), "dry-run").unwrap();

    let tools = root.join("tools");
    fs::create_dir_all(&tools).unwrap();
    write_exe(
        &tools.join("nvidia-smi"),
        "case \"$*\" in *-L*) echo 'GPU 0: Stub GPU (UUID: GPU-stub)';; *query-gpu*) echo 'Stub GPU';; *) echo stub;; esac",
    );
    write_exe(
        &tools.join("nvidia-cuda-mps-control"),
        "d=${CUDA_MPS_PIPE_DIRECTORY:?}; if [ \"$1\" = -d ]; then mkdir -p \"$d\"; touch \"$d/control\"; else read -r c; [ \"$c\" = quit ] && rm -f \"$d/control\"; fi",
    );
    write_exe(
        &tools.join("compute-sanitizer"),
        "echo \"$*\" >>\"$PGAS_DRY_SANITIZER_LOG\"; while [ \"$1\" != --tool ]; do shift; done; shift 2; \"$@\"; echo '========= ERROR SUMMARY: 0 errors'",
    );
    (dev, tools)
}

/// Every mode of the script (`all` is the default run).
const MODES: &[&str] = &[
    "all",
    "suite",
    "rest",
    "faults",
    "sanitize",
    "coll",
    "fused",
    "soak2",
    "soak4",
    "python",
    "pe8",
    "attention",
    "torch",
    "quick",
];

/// The modes that run compute-sanitizer.
const SANITIZER_MODES: &[&str] = &["all", "faults", "sanitize"];

/// The programs `PGAS_DEVICE_ONLY="gpu_suite hello_ring" scripts/build-device.sh` keeps.
const SUITE_ONLY: &[&str] = &["gpu_suite", "hello_ring", "pgas", "pgas-run"];

/// A device folder beside `dev` with only `keep` of its programs, as `PGAS_DEVICE_ONLY` makes.
fn only_programs(dev: &Path, to: &Path, keep: &[&str]) -> PathBuf {
    let _ = fs::remove_dir_all(to);
    fs::create_dir_all(to.join("bin")).unwrap();
    for p in keep {
        fs::copy(dev.join("bin").join(p), to.join("bin").join(p)).unwrap();
    }
    fs::copy(dev.join("COMMIT"), to.join("COMMIT")).unwrap();
    to.to_path_buf()
}

#[test]
// Long on purpose: one stub directory serves every mode of the script, each checked against
// its summary.
fn every_mode_runs_to_its_summary_on_stubs() {
    let root = std::env::temp_dir().join(format!("pgas-gpu-suite-dry-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    let (dev, tools) = fixtures(&root);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-suite.sh");
    let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap());
    // Each mode in a thread of its own, with folders of its own: the script spends its time in
    // stub calls and the fake MPS daemon's pauses, so the modes overlap well.
    let check = |mode: &str| {
        let out_dir = root.join(format!("out-{mode}"));
        // `suite` runs on another NVSHMEM, packed as build-device.sh's PGAS_DEVICE_NVSHMEM does,
        // beside only the programs `PGAS_DEVICE_ONLY="gpu_suite hello_ring"` keeps.
        let dev = if mode == "suite" {
            only_programs(&dev, &root.join("device-only"), SUITE_ONLY)
        } else {
            dev.clone()
        };
        let packed = dev.join("nvshmem.tar.xz");
        if mode == "suite" {
            let stage = root.join("nvshmem-stage");
            fs::create_dir_all(stage.join("nvshmem/include")).unwrap();
            fs::write(stage.join("nvshmem/include/nvshmem.h"), "").unwrap();
            // Python's tarfile, as the script unpacks it (no xz command needed).
            let tar = Command::new("python3")
                .arg("-c")
                .arg("import sys, tarfile; tarfile.open(sys.argv[1], 'w:xz').add(sys.argv[2], 'nvshmem')")
                .arg(&packed)
                .arg(stage.join("nvshmem"))
                .status()
                .unwrap();
            assert!(tar.success());
        } else {
            let _ = fs::remove_file(&packed);
        }
        let out = Command::new("bash")
            .arg(&script)
            .arg(&out_dir)
            .arg(mode)
            .env("PATH", &path)
            .env("PGAS_DEVICE_DIR", &dev)
            .env("PGAS_CACHE_DIR", root.join(format!("cache-{mode}")))
            .env("CUDA_MPS_PIPE_DIRECTORY", root.join(format!("mps-{mode}")))
            .env("PGAS_SUITE_BUDGET", "120")
            .env("PGAS_SAVE_CACHE", "1")
            .env(
                "PGAS_SANITIZER_ARGS",
                "--launch-count 5 --kernel-name kns=k",
            )
            .env(
                "PGAS_DRY_SANITIZER_LOG",
                root.join(format!("sanitizer-{mode}.log")),
            )
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for bad in [
            "command not found",
            "unbound variable",
            "syntax error",
            "failed to run command",
            "No such file",
        ] {
            assert!(!text.contains(bad), "{mode}: '{bad}' in:\n{text}");
        }
        let summary = fs::read_to_string(out_dir.join("summary.txt"))
            .unwrap_or_else(|e| panic!("{mode}: no summary.txt ({e}):\n{text}"));
        assert!(
            summary.contains("run on 1 x Stub GPU"),
            "{mode}:\n{summary}"
        );
        assert!(summary.contains("step(s) failed"), "{mode}:\n{summary}");
        // PGAS_SAVE_CACHE=1: the kernel cache came back, in every mode.
        assert!(
            out_dir.join("kernel-cache.tar.gz").is_file(),
            "{mode}: no kernel-cache.tar.gz:\n{summary}"
        );
        for line in summary.lines().filter(|l| l.starts_with("FAIL")) {
            assert!(
                EXPECTED_FAILS.iter().any(|w| line.contains(w)),
                "{mode}: unexpected {line}\n{summary}"
            );
        }
        // The GPU steps of the mode were taken (SKIPs from the stubs, not skipped for time).
        let ran = summary
            .lines()
            .filter(|l| l.contains("found no GPU"))
            .count();
        assert!(ran > 0, "{mode}: no step reached a program:\n{summary}");
        assert!(!summary.contains("out of time"), "{mode}:\n{summary}");
        if mode == "sanitize" {
            // The warm-up ran the gallery; then every tool went over every shard of the suite
            // and every example.
            assert!(
                summary.contains("hello_ring 1 PE (4 examples at a time)"),
                "the sanitize warm-up did not run the gallery:\n{summary}"
            );
            for tool in ["memcheck", "racecheck", "synccheck"] {
                for job in ["gpu_suite shard 0/6", "gpu_suite shard 5/6", "moe_dispatch"] {
                    assert!(
                        summary.contains(&format!(
                            "SKIP {tool} {job} 1 PE (the program found no GPU)"
                        )),
                        "{tool} {job} did not run:\n{summary}"
                    );
                }
            }
        }
        // Every sanitizer call carried PGAS_SANITIZER_ARGS, before --tool.
        if mode == "suite" {
            // The packed NVSHMEM was unpacked and named, kernels compile inline, and only the
            // suite's steps ran.
            let env = fs::read_to_string(out_dir.join("env.log")).unwrap();
            assert!(
                env.contains("PGAS_NVSHMEM_HOME=/tmp/pgas-nvshmem/nvshmem")
                    && env.contains("PGAS_JIT_LTO=off"),
                "suite: the packed NVSHMEM is not in the environment:\n{env}"
            );
            assert!(Path::new("/tmp/pgas-nvshmem/nvshmem/include/nvshmem.h").is_file());
            assert!(
                summary.contains("gpu_suite 2 PE") && summary.contains("gpu_suite 1 PE"),
                "suite: the suite did not run:\n{summary}"
            );
            assert!(
                !summary.contains("trap ") && !summary.contains("gallery"),
                "suite: steps beyond the suite ran:\n{summary}"
            );
            // The sanitizer's gallery programs were left out: SKIPs that say so, not FAILs.
            assert!(
                summary.contains(
                    "SKIP racecheck team_allreduce 1 PE (team_allreduce not built: PGAS_DEVICE_ONLY left it out)"
                ),
                "suite: a program left out was not a SKIP:\n{summary}"
            );
        }
        if let Some(pes) = mode.strip_prefix("soak") {
            assert!(
                summary.contains(&format!("SKIP soak {pes} PE (sharing 1 GPU)")),
                "{mode}: the soak was not taken:\n{summary}"
            );
        }
        if mode == "attention" {
            assert!(
                summary.contains("gpu_suite 1 PE") && summary.contains("attention bench"),
                "attention: the suite's cases or the bench are missing:\n{summary}"
            );
        }
        if mode == "quick" {
            assert!(
                summary.contains("gpu_suite 4 PE")
                    && summary.contains("gpu_suite 1 PE")
                    && summary.contains("differential 2 PE")
                    && summary.contains("gallery"),
                "quick: the suite, the differential or the gallery is missing:\n{summary}"
            );
        }
        if mode == "pe8" {
            assert!(
                summary.contains("gpu_suite 8 PE") && summary.contains("differential 8 PE"),
                "pe8: the 8-PE suite or differential step is missing:\n{summary}"
            );
        }
        if SANITIZER_MODES.contains(&mode) {
            let calls = fs::read_to_string(root.join(format!("sanitizer-{mode}.log")))
                .unwrap_or_else(|e| panic!("{mode}: the sanitizer never ran ({e})"));
            for call in calls.lines() {
                assert!(
                    call.contains("--target-processes all --launch-count 5 --kernel-name kns=k "),
                    "{mode}: a sanitizer call without PGAS_SANITIZER_ARGS: {call}"
                );
            }
            // The one job with options of its own got them, and only it.
            if mode == "sanitize" {
                let own = "--kernel-name kns=pgas_gemm_bf16_ --launch-count 5 --tool";
                let gemm = format!("--tool racecheck {}", dev.join("bin/gemm_bf16").display());
                let with: Vec<&str> = calls.lines().filter(|c| c.contains(own)).collect();
                assert!(
                    with.len() == 1 && with[0].trim_end().ends_with(&gemm),
                    "racecheck gemm_bf16's own options: {with:?}"
                );
            }
        }
        if mode == "all" {
            assert!(
                summary.contains("gpu_suite 4 PE (sharing 1 GPU)")
                    && summary.contains("gpu_suite 2 PE (sharing 1 GPU)")
                    && summary.contains("SKIP differential 2 PE (sharing 1 GPU)"),
                "the shared-GPU suites were not taken:\n{summary}"
            );
            // Rank death runs with the two PEs sharing the one GPU, and the jobs after a death.
            assert!(
                summary.contains("SKIP rank death: exit in barrier (pgas-run)")
                    && summary.contains("SKIP after a trap in a kernel: next 2-PE job"),
                "rank death on the shared GPU was not taken:\n{summary}"
            );
            // The stub folder has no Python module: the Python steps say why they skipped.
            assert!(
                summary.contains("SKIP python (no wheel in .device/python or no torch)"),
                "the Python steps were not reached:\n{summary}"
            );
        }
    };
    std::thread::scope(|s| {
        for &mode in MODES {
            s.spawn(move || check(mode));
        }
    });
    fs::remove_dir_all(&root).unwrap();
}
