//! Rank death through the real `pgas-run` binary, with stand-in ranks and no GPU
//! (`PGAS_RUN_GPU_COUNT` pretends the GPUs): one rank panics, aborts or is SIGKILLed while the
//! others wait (here in `sleep`, as a PE waits in a barrier or a kernel for the dead one). Every
//! rank must end within 5 s of the death, and `pgas-run` exit non-zero naming the rank and how it
//! ended. The GPU counterpart is `gpu_suite --rank-death` (tests/gpu_suite/faults.rs).
//!
//! The panicking and aborting ranks are this test binary again, started with `ROLE_VAR` set, so
//! they die the way a Rust program does (unwinding, exit status 101; `abort`, SIGABRT).

use std::process::Command;
use std::time::{Duration, Instant};

/// Tells a copy of this binary started by `pgas-run` to act as a rank.
const ROLE_VAR: &str = "PGAS_TEST_RANK_ROLE";

/// How long the dying rank waits before it dies, so the others are waiting by then.
const DELAY: Duration = Duration::from_millis(300);

/// The rank side (returns at once in a normal run): the last rank dies as `ROLE_VAR` says, the
/// others wait "forever".
#[test]
fn rank_stand_in() {
    let Ok(role) = std::env::var(ROLE_VAR) else {
        return;
    };
    let rank: usize = std::env::var("PGAS_RANK").unwrap().parse().unwrap();
    let size: usize = std::env::var("PGAS_WORLD_SIZE").unwrap().parse().unwrap();
    if rank + 1 == size {
        std::thread::sleep(DELAY);
        match role.as_str() {
            "panic" => panic!("rank {rank} panics on purpose"),
            "abort" => std::process::abort(),
            other => unreachable!("unknown role {other}"),
        }
    }
    std::thread::sleep(Duration::from_secs(60));
}

/// Runs `pgas-run -n N -- PROGRAM ARGS` with `env`; returns its exit code, stderr and run time.
fn pgas_run(
    n: usize, program: &str, args: &[&str], env: &[(&str, &str)],
) -> (i32, String, Duration) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pgas-run"));
    cmd.args(["-n", &n.to_string(), "--", program])
        .args(args)
        .env("PGAS_RUN_GPU_COUNT", n.to_string());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let t = Instant::now();
    let out = cmd.output().expect("pgas-run runs");
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), err, took)
}

/// The stand-in as a `pgas-run` program: this binary, running only `rank_stand_in`.
fn stand_in(n: usize, role: &str) -> (i32, String, Duration) {
    let me = std::env::current_exe().unwrap();
    pgas_run(
        n,
        me.to_str().unwrap(),
        &[
            "--exact",
            "rank_stand_in",
            "--nocapture",
            "--test-threads=1",
        ],
        &[(ROLE_VAR, role)],
    )
}

fn assert_ended(
    what: &str, (code, err, took): (i32, String, Duration), status: &str, want_code: i32,
) {
    assert!(
        took < DELAY + Duration::from_secs(5),
        "{what}: the job took {took:?} to end after the death:\n{err}"
    );
    assert_eq!(code, want_code, "{what}: exit code\n{err}");
    assert!(
        err.contains(&format!(
            "pgas-run: rank 2 {status}; the other ranks were stopped"
        )),
        "{what}: stderr does not name rank 2 and its status {status:?}:\n{err}"
    );
}

#[test]
fn a_panicking_rank_ends_the_job_and_is_named() {
    let r = stand_in(3, "panic");
    assert!(
        r.1.contains("panics on purpose"),
        "the rank's message is relayed:\n{}",
        r.1
    );
    assert_ended("panic", r, "exited with status 101", 101);
}

#[test]
fn an_aborting_rank_ends_the_job_and_is_named() {
    assert_ended(
        "abort",
        stand_in(3, "abort"),
        "was killed by signal 6 (SIGABRT)",
        134,
    );
}

#[test]
fn a_sigkilled_rank_ends_the_job_and_is_named() {
    let script = r#"if [ "$PGAS_RANK" = 2 ]; then sleep 0.3; kill -KILL $$; fi; sleep 60"#;
    assert_ended(
        "SIGKILL",
        pgas_run(3, "/bin/sh", &["-c", script], &[]),
        "was killed by signal 9 (SIGKILL)",
        137,
    );
}

#[test]
fn ranks_that_ignore_sigterm_are_killed_within_5_s() {
    // The waiting ranks ignore SIGTERM (a process stuck in a driver call may not act on it):
    // pgas-run's SIGKILL after its grace period ends them.
    let script = r#"if [ "$PGAS_RANK" = 2 ]; then sleep 0.3; exit 7; fi; trap '' TERM; sleep 60"#;
    assert_ended(
        "TERM ignored",
        pgas_run(3, "/bin/sh", &["-c", script], &[]),
        "exited with status 7",
        7,
    );
}

#[test]
fn a_job_whose_ranks_all_succeed_exits_0() {
    let (code, err, _) = pgas_run(2, "/bin/sh", &["-c", "exit 0"], &[]);
    assert_eq!(code, 0, "{err}");
}
