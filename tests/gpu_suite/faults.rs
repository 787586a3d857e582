//! Rank death on GPUs, one job per run: `gpu_suite --rank-death HOW` with 2 PEs or more. Every PE
//! initializes and meets the others once; then the last PE dies (`HOW`: `panic`, `abort`, or
//! `kill`, a SIGKILL to itself) while the others wait for it: in a host barrier
//! (`barrier_all`, waiting on the GPU), or with `kill-in-kernel` in a kernel spinning on a
//! signal that never comes. The launcher (`pgas-run`, or `mpirun`) must end every rank and exit
//! non-zero, naming the rank and how it ended; scripts/gpu-suite.sh checks that, and that the job
//! ended within 5 s of the death, using the time the dying PE prints (`dies ... at MS ms`, Unix
//! milliseconds).
//!
//! Nothing here may return normally on a surviving PE: reaching the end of the wait is a failure
//! (the barrier or kernel completed without the dead PE), reported as exit status 3.

use crate::util;
use pgas::kernel::Variant;
use pgas::launch::Prewarm;
use pgas::prelude::*;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Spins until `sig[0]` becomes 1, which no PE ever sets.
#[pgas_kernel]
fn wait_forever(sig: &mut SymTensor<u64>) {
    signal_wait_until(&sig[0], Cmp::Eq, 1);
}

pub fn run(how: &str) -> ExitCode {
    if !["panic", "abort", "kill", "kill-in-kernel"].contains(&how) {
        println!(
            "gpu_suite: --rank-death takes `panic`, `abort`, `kill` or `kill-in-kernel`, not `{how}`"
        );
        return ExitCode::from(2);
    }
    let pgas = match pgas::init() {
        Ok(p) => p,
        Err(e) => {
            println!("rank-death {how}: FAIL: pgas::init failed: {e}");
            return ExitCode::from(1);
        }
    };
    let (me, n) = (util::me(&pgas), util::npes(&pgas));
    if n < 2 {
        println!("rank-death {how}: FAIL: needs 2 PEs or more (pgas-run -n 2)");
        return ExitCode::from(2);
    }
    let mut sig = match pgas.alloc::<u64>(1) {
        Ok(s) => s,
        Err(e) => {
            println!("rank-death {how}: FAIL: allocation failed: {e}");
            return ExitCode::from(1);
        }
    };
    // Compile before meeting, so the death is not delayed by NVRTC on the others.
    if how == "kill-in-kernel" {
        let wanted = Prewarm {
            spec: &wait_forever::SPEC,
            variant: Variant::Checked,
            comptime: &[],
        };
        if let Err(e) = pgas::launch::prewarm(&pgas, &[wanted]) {
            println!("rank-death {how}: FAIL: compiling the waiting kernel: {e}");
            return ExitCode::from(1);
        }
    }
    if let Err(e) = pgas.barrier_all() {
        println!("rank-death {how}: FAIL: the first barrier: {e}");
        return ExitCode::from(1);
    }
    if me == n - 1 {
        // Give the others time to start waiting.
        std::thread::sleep(Duration::from_millis(500));
        die(me, how);
    }
    let waited = if how == "kill-in-kernel" {
        println!(
            "rank-death {how}: PE {me} waits in a kernel for PE {}",
            n - 1
        );
        wait_forever::launch(&pgas, LaunchConfig::blocks(1, 1), &mut sig)
            .and_then(|()| pgas.stream().synchronize().map_err(Into::into))
    } else {
        println!(
            "rank-death {how}: PE {me} waits in barrier_all for PE {}",
            n - 1
        );
        pgas.barrier_all()
    };
    println!(
        "rank-death {how}: FAIL: PE {me}'s wait ended ({waited:?}) although PE {} is dead",
        n - 1
    );
    // Leave without finalizing: the dead PE would never join it.
    std::process::exit(3)
}

fn die(me: usize, how: &str) -> ! {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    println!("rank-death {how}: PE {me} dies by {how} at {ms} ms");
    let _ = std::io::stdout().flush();
    match how {
        "panic" => panic!("rank-death: PE {me} panics on purpose"),
        "abort" => std::process::abort(),
        _ => {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &std::process::id().to_string()])
                .status();
            // `kill` delivers the signal before it exits; this is not reached.
            std::thread::sleep(Duration::from_secs(3600));
            std::process::exit(4)
        }
    }
}
