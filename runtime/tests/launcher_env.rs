//! `pgas-run` passes its environment on, plus the rank variables. In its own test binary
//! because it sets an environment variable.

use pgas_runtime::launcher::{launch, RunArgs};

#[test]
fn environment_is_passed_on_with_rank_variables() {
    std::env::set_var("NVSHMEM_DISABLE_NVLS", "1");
    let script = r#"
        [ "$NVSHMEM_DISABLE_NVLS" = 1 ] || { echo "NVSHMEM_DISABLE_NVLS lost"; exit 10; }
        [ "$PGAS_WORLD_SIZE" = 2 ] && [ "$PGAS_LOCAL_WORLD_SIZE" = 2 ] || exit 11
        [ "$PGAS_RANK" = "$PGAS_LOCAL_RANK" ] || exit 12
        case "$PGAS_RENDEZVOUS" in 127.0.0.1:*) ;; *) exit 13;; esac
        [ -n "$PGAS_RUN_ID" ] || exit 14
    "#;
    let args = RunArgs {
        nproc: 2,
        gpus: None,
        share_gpus: false,
        nodes: None,
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
    };
    let r = launch(&args, 2);
    assert!(r.is_ok(), "{r:?}");
}
