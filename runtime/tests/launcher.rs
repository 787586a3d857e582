//! `pgas-run` behaviour with ordinary shell children (no GPU needed).

use std::time::{Duration, Instant};

use pgas_runtime::launcher::{exit_code, launch, RunArgs};
use pgas_runtime::Error;

fn sh(nproc: usize, script: &str) -> RunArgs {
    RunArgs {
        nproc,
        gpus: None,
        share_gpus: false,
        nodes: None,
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
    }
}

#[test]
fn all_ranks_succeeding_is_success() {
    let r = launch(
        &sh(
            3,
            r#"echo "hello from $PGAS_RANK of $PGAS_WORLD_SIZE on GPU $PGAS_DEVICE""#,
        ),
        4,
    );
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(exit_code(&r), 0);
}

#[test]
fn a_failing_rank_stops_the_others_within_5_s_and_is_named() {
    let t = Instant::now();
    let r = launch(
        &sh(
            3,
            r#"if [ "$PGAS_RANK" = 1 ]; then sleep 0.3; exit 3; fi; sleep 30"#,
        ),
        3,
    );
    let took = t.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
    match &r {
        Err(Error::RankFailed { rank: 1, status }) => assert_eq!(status, "exited with status 3"),
        other => panic!("{other:?}"),
    }
    let msg = r.as_ref().unwrap_err().to_string();
    assert!(msg.contains("rank 1 exited with status 3"), "{msg}");
    assert_eq!(exit_code(&r), 3);
}

#[test]
fn a_rank_that_ignores_sigterm_is_killed_within_5_s() {
    let t = Instant::now();
    let r = launch(
        &sh(
            2,
            r#"if [ "$PGAS_RANK" = 0 ]; then sleep 0.2; exit 1; fi; trap '' TERM; sleep 30"#,
        ),
        2,
    );
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    assert!(matches!(r, Err(Error::RankFailed { rank: 0, .. })), "{r:?}");
}

#[test]
fn a_crashing_rank_is_reported_with_its_signal() {
    let r = launch(
        &sh(
            2,
            r#"if [ "$PGAS_RANK" = 1 ]; then kill -SEGV $$; fi; sleep 30"#,
        ),
        2,
    );
    let msg = r.as_ref().unwrap_err().to_string();
    assert!(
        msg.contains("rank 1 was killed by signal 11 (SIGSEGV)"),
        "{msg}"
    );
    assert_eq!(exit_code(&r), 139);
}

#[test]
fn more_ranks_than_gpus_starts_nothing() {
    let t = Instant::now();
    let r = launch(&sh(4, "sleep 30"), 2);
    let msg = r.unwrap_err().to_string();
    assert!(
        msg.contains("4 ranks") && msg.contains("only 2 GPU"),
        "{msg}"
    );
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn a_missing_program_is_a_clear_error() {
    let args = RunArgs {
        nproc: 2,
        gpus: None,
        share_gpus: false,
        nodes: None,
        program: "/nonexistent/prog".into(),
        args: vec![],
    };
    let msg = launch(&args, 2).unwrap_err().to_string();
    assert!(
        msg.contains("cannot start") && msg.contains("/nonexistent/prog"),
        "{msg}"
    );
}

#[test]
fn ranks_get_their_gpu_from_the_list() {
    let mut args = sh(2, r#"[ "$PGAS_DEVICE" = "$(( 3 - PGAS_RANK ))" ]"#);
    args.gpus = Some(vec![3, 2]);
    assert!(launch(&args, 4).is_ok());
}
