//! Rank death on GPUs, one job per run: `gpu_suite --rank-death HOW` with 2 PEs or more. Every PE
//! initializes and meets the others once; then the last PE dies while the others wait for it:
//!
//! - `panic`, `abort`, `kill` (a SIGKILL to itself), `exit` (`std::process::exit(7)`, without
//!   finalizing): the others wait in a host barrier (`barrier_all`, waiting on the GPU);
//! - `kill-in-kernel`: the others wait in a kernel spinning on a signal that never comes;
//! - `kill-in-all-reduce`, `kill-in-all-to-all-v`, `kill-in-ag-gemm`, `kill-in-moe-dispatch`:
//!   every PE sets the operation up (`pgas::coll::Comm`, `pgas::ops::AllGatherMatmul`,
//!   `pgas::ops::moe::MoeDispatcher`, all collective) and calls it; the last PE's call is
//!   queued behind a kernel that never ends, so its part never runs, and it is SIGKILLed
//!   while the others are inside the operation, waiting for its data;
//! - `trap-in-collective`: every PE launches a kernel that stores into a tensor and then enters
//!   a device barrier; the last PE's store is out of bounds, so its checked kernel traps before
//!   the barrier and the process exits with the launch error, while the others wait in the
//!   barrier for it.
//!
//! The launcher (`pgas-run`, or `mpirun`) must end every rank and exit non-zero, naming the rank
//! and how it ended; scripts/gpu-suite.sh checks that, and that the job ended within 5 s of the
//! death, using the time the dying PE prints (`dies ... at MS ms`, Unix milliseconds).
//!
//! Nothing here may return normally on a surviving PE: reaching the end of the wait is a failure
//! (the barrier, kernel or operation completed without the dead PE), reported as exit status 3.
//!
//! `gpu_suite --expect-hang` (one PE or more, with `PGAS_SUITE_CASE_TIMEOUT` a few seconds) runs
//! one case that waits in a kernel forever: the runner's watchdog must report it as hung, naming
//! the case, and end the process with status 124 (not a crash in the exit handlers).

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

/// Stores into `x[at]` (the checked variant traps when `at` is out of bounds), then waits for
/// every PE in a device barrier.
#[pgas_kernel]
fn store_then_barrier(x: &mut SymTensor<u32>, at: usize) {
    if global_thread_idx() == 0 {
        x[at] = 1;
    }
    barrier_all();
}

/// Every `HOW` of `--rank-death`.
const HOWS: &[&str] = &[
    "panic",
    "abort",
    "kill",
    "exit",
    "kill-in-kernel",
    "kill-in-all-reduce",
    "kill-in-all-to-all-v",
    "kill-in-ag-gemm",
    "kill-in-moe-dispatch",
    "trap-in-collective",
];

pub fn run(how: &str) -> ExitCode {
    if !HOWS.contains(&how) {
        println!("gpu_suite: --rank-death takes one of {HOWS:?}, not `{how}`");
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
    let kernels = [&wait_forever::SPEC, &store_then_barrier::SPEC].map(|spec| Prewarm {
        spec,
        variant: Variant::Checked,
        comptime: &[],
    });
    if !["panic", "abort", "kill", "exit"].contains(&how) {
        if let Err(e) = pgas::launch::prewarm(&pgas, &kernels) {
            println!("rank-death {how}: FAIL: compiling the waiting kernels: {e}");
            return ExitCode::from(1);
        }
    }
    if let Some(op) = how.strip_prefix("kill-in-").filter(|&op| op != "kernel") {
        return die_inside(&pgas, op, &mut sig);
    }
    if how == "trap-in-collective" {
        return trap_in_collective(&pgas);
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
    survivor_ended(how, me, n - 1, "wait", waited)
}

/// A surviving PE whose wait returned: `Ok` is a failure (it completed without the dead PE);
/// an `Err` is how CUDA MPS ends it where the PEs share a GPU (a client that dies with work on
/// the GPU faults every client of the server), so the PE says so, lingers long enough for the
/// launcher to see the dead PE first and name it, and exits non-zero. Never returns normally.
fn survivor_ended(how: &str, me: usize, dead: usize, what: &str, waited: pgas::Result<()>) -> ! {
    match waited {
        Ok(()) => println!(
            "rank-death {how}: FAIL: PE {me}'s {what} ended (Ok) although PE {dead} is dead"
        ),
        Err(e) => {
            println!(
                "rank-death {how}: PE {me}'s {what} failed after PE {dead} died (CUDA MPS \
                 reports a dead client's fault to every client sharing the GPU): {e}"
            );
            let _ = std::io::stdout().flush();
            std::thread::sleep(Duration::from_secs(2));
        }
    }
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
        "exit" => std::process::exit(7),
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

/// An operation that every PE has set up and can call again.
type Call<'a> = Box<dyn FnMut() -> pgas::Result<()> + 'a>;

/// Sets up `op` on every PE, meets the others, then calls it: the last PE's call is queued
/// behind a kernel that never ends and the PE is SIGKILLed 500 ms later, while the others wait
/// inside theirs.
fn die_inside(pgas: &Pgas, op: &str, sig: &mut SymTensor<u64>) -> ExitCode {
    let how = format!("kill-in-{op}");
    let (me, n) = (util::me(pgas), util::npes(pgas));
    let mut call = match setup(pgas, op) {
        Ok(c) => c,
        Err(e) => {
            println!("rank-death {how}: FAIL: setting up {op}: {e}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = pgas.barrier_all() {
        println!("rank-death {how}: FAIL: the first barrier: {e}");
        return ExitCode::from(1);
    }
    if me == n - 1 {
        if let Err(e) = wait_forever::launch(pgas, LaunchConfig::blocks(1, 1), sig) {
            println!("rank-death {how}: FAIL: stalling PE {me}'s stream: {e}");
            return ExitCode::from(1);
        }
        // The call may wait on the host for the stalled stream, so the death comes from a
        // thread of its own.
        let h = how.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            die(me, &h)
        });
    } else {
        println!(
            "rank-death {how}: PE {me} waits inside {op} for PE {}",
            n - 1
        );
    }
    let waited = call().and_then(|()| pgas.stream().synchronize().map_err(Into::into));
    if me == n - 1 {
        // Reached only if the call returned before the death; wait for it.
        std::thread::sleep(Duration::from_secs(3600));
    }
    survivor_ended(&how, me, n - 1, op, waited)
}

/// Every PE's set-up of `op` (collective), as a call that runs it once on the context's stream.
fn setup<'a>(pgas: &'a Pgas, op: &str) -> pgas::Result<Call<'a>> {
    use pgas::coll::{Algorithm, Comm};
    use pgas::ops::moe::{reference, MoeConfig, MoeDispatcher};
    use pgas::ops::AllGatherMatmul;
    let (me, n) = (util::me(pgas), util::npes(pgas));
    Ok(match op {
        "all-reduce" => {
            let mut comm = Comm::new(pgas, Team::WORLD)?;
            // 4 MiB: the two-shot algorithm, many blocks waiting on the peers' flags.
            let src = pgas.alloc_from(&vec![1.0f32; 1 << 20])?;
            let mut dst = pgas.alloc::<f32>(1 << 20)?;
            Box::new(move || {
                comm.all_reduce(&mut dst, &src, ReduceOp::Sum, Algorithm::Auto)
                    .map(|_| ())
            })
        }
        "all-to-all-v" => {
            let mut comm = Comm::new(pgas, Team::WORLD)?;
            // PE p sends p + q + 1 elements to PE q.
            let send: Vec<usize> = (0..n).map(|q| me + q + 1).collect();
            let recv: Vec<usize> = (0..n).map(|p| p + me + 1).collect();
            let displs = |c: &[usize]| -> Vec<usize> {
                c.iter()
                    .scan(0, |acc, &x| Some(std::mem::replace(acc, *acc + x)))
                    .collect()
            };
            let layout = comm.all_to_all_layout(&send, &displs(&send), &recv, &displs(&recv))?;
            let src = pgas.alloc::<u32>(4 * n * n + 1)?;
            let mut dst = pgas.alloc::<u32>(4 * n * n + 1)?;
            Box::new(move || {
                comm.all_to_all_v(&mut dst, &src, &layout, Algorithm::Auto)
                    .map(|_| ())
            })
        }
        "ag-gemm" => {
            let (mp, nn, k) = (512, 512, 512);
            let mut plan = AllGatherMatmul::new(pgas, (mp, nn, k))?;
            let s = pgas.stream();
            let shard = s.alloc_zeros::<bf16>(mp * k)?;
            let bt = s.alloc_zeros::<bf16>(nn * k)?;
            let mut c = s.alloc_zeros::<bf16>(mp * n * nn)?;
            Box::new(move || plan.run(&mut c, &shard, &bt))
        }
        "moe-dispatch" => {
            let cfg = MoeConfig {
                max_tokens: 128,
                hidden: 1024,
                top_k: 4,
                experts_per_pe: 2,
            };
            let mut moe = MoeDispatcher::new(pgas, cfg)?;
            let (idx, w) = reference::sample_routing(&cfg, n, cfg.max_tokens, 7 + me as u64, false);
            let routing = moe.route(&idx, &w)?;
            let x = pgas
                .stream()
                .alloc_zeros::<bf16>(cfg.max_tokens * cfg.hidden)?;
            Box::new(move || moe.dispatch(&x, &routing))
        }
        _ => unreachable!("HOWS lists only these operations"),
    })
}

/// Every PE stores into a tensor and enters a device barrier; the last PE's store is out of
/// bounds, so its checked kernel traps and it exits with the launch error.
fn trap_in_collective(pgas: &Pgas) -> ExitCode {
    let how = "trap-in-collective";
    let (me, n) = (util::me(pgas), util::npes(pgas));
    let mut x = match pgas.alloc::<u32>(16) {
        Ok(x) => x,
        Err(e) => {
            println!("rank-death {how}: FAIL: allocation failed: {e}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = pgas.barrier_all() {
        println!("rank-death {how}: FAIL: the first barrier: {e}");
        return ExitCode::from(1);
    }
    let at = if me == n - 1 { 16 } else { 0 };
    if me == n - 1 {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        println!("rank-death {how}: PE {me} dies by a trap in its kernel at {ms} ms");
    } else {
        println!(
            "rank-death {how}: PE {me} waits in a device barrier for PE {}",
            n - 1
        );
    }
    let _ = std::io::stdout().flush();
    let r = store_then_barrier::launch(pgas, LaunchConfig::blocks(1, 32), &mut x, at)
        .and_then(|()| pgas.stream().synchronize().map_err(Into::into));
    match r {
        Err(e) if me == n - 1 => {
            println!("rank-death {how}: PE {me}'s kernel trapped as it should: {e}");
            let _ = std::io::stdout().flush();
            // SAFETY: `_exit` ends the process at once. Its CUDA context is gone, so NVSHMEM's
            // exit handlers, which `std::process::exit` would run, could only fail or crash.
            unsafe { libc::_exit(1) }
        }
        _ => survivor_ended(how, me, n - 1, "kernel", r),
    }
}

/// `--expect-hang`: one case that waits in a kernel for a signal nobody sends; the watchdog must
/// give up on it after `PGAS_SUITE_CASE_TIMEOUT` seconds with status 124.
pub fn expect_hang() -> ExitCode {
    let short = std::env::var("PGAS_SUITE_CASE_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|s| s <= 30);
    if !short {
        println!("gpu_suite: --expect-hang needs PGAS_SUITE_CASE_TIMEOUT of at most 30 (seconds)");
        return ExitCode::from(2);
    }
    let cases = [crate::runner::case("faults/hang_in_kernel", hang_in_kernel)];
    crate::runner::run(&cases, &[&wait_forever::SPEC], &[])
}

fn hang_in_kernel(p: &Pgas) -> util::CaseResult {
    let mut sig = p.alloc::<u64>(1)?;
    p.barrier_all()?;
    wait_forever::launch(p, LaunchConfig::blocks(1, 1), &mut sig)?;
    util::settle(p)?;
    Err("the kernel waiting for a signal nobody sends returned".into())
}
