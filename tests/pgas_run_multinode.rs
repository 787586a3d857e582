//! `pgas-run --nodes` through the real binary: the srun and mpirun command lines it prints with
//! `--dry-run` (the shape, the passed-on settings, NVSHMEM's bootstrap), and the errors that say
//! what to add. Needs no GPU, Slurm or MPI.

use std::process::Command;

/// Runs `pgas-run ARGS` with `env` added; returns its exit code, stdout and stderr.
fn pgas_run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pgas-run"))
        .args(args)
        .env_remove("SLURM_JOB_ID")
        .envs(env.iter().copied())
        .output()
        .expect("pgas-run starts");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn srun_inside_slurm_by_default() {
    let (code, out, err) = pgas_run(
        &[
            "--nodes",
            "2",
            "-n",
            "4",
            "--dry-run",
            "--",
            "/shared/train",
            "--steps",
            "10",
        ],
        &[("SLURM_JOB_ID", "77")],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        "srun --nodes=2 --ntasks-per-node=4 --gpus-per-node=4 --mpi=pmix --kill-on-bad-exit=1 \
         --export=ALL,NVSHMEM_BOOTSTRAP=PMI,NVSHMEM_BOOTSTRAP_PMI=PMIX /shared/train --steps 10"
    );
}

#[test]
fn mpirun_elsewhere_with_the_settings_passed_on() {
    let (code, out, err) = pgas_run(
        &[
            "--nodes=2",
            "-n",
            "8",
            "--hosts",
            "gpu1,gpu2",
            "--dry-run",
            "--",
            "./prog",
        ],
        &[
            ("NVSHMEM_DISABLE_NVLS", "1"),
            ("PGAS_CACHE_DIR", "/nfs/cache"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let line = out.trim();
    assert!(
        line.starts_with("mpirun -np 16 -H gpu1:8,gpu2:8 --map-by ppr:8:node --bind-to none"),
        "{line}"
    );
    for part in [
        "-x NVSHMEM_DISABLE_NVLS",
        "-x PGAS_CACHE_DIR",
        "-x NVSHMEM_BOOTSTRAP=MPI ./prog",
    ] {
        assert!(line.contains(part), "{part}: {line}");
    }
}

#[test]
fn missing_pieces_are_named() {
    let (code, _, err) = pgas_run(&["--nodes", "2", "-n", "4", "--dry-run", "--", "p"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("--hosts a,b"), "{err}");
    let (code, _, err) = pgas_run(&["-n", "4", "--hosts", "a", "--", "p"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("add --nodes M"), "{err}");
}
