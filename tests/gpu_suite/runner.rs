//! The runner: runs each case on every PE, prints per-case lines as they finish (so a log shows
//! how far a run got even when a case hangs), then combines the PEs' verdicts on PE 0.

use crate::util::{self, CaseResult};
use pgas::kernel::{KernelSpec, Variant};
use pgas::launch::Prewarm;
use pgas::prelude::*;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One named check. `run` is called on every PE with the same context; it must make the same
/// collective calls (launches of collective kernels, `barrier_all`) on every PE, and report a
/// mismatch only after those, so that one PE failing never leaves the others waiting.
#[derive(Clone, Copy)]
pub struct Case {
    pub name: &'static str,
    pub run: fn(&Pgas) -> CaseResult,
}

/// A named case (a `const fn`, so the case lists are constants).
pub const fn case(name: &'static str, run: fn(&Pgas) -> CaseResult) -> Case {
    Case { name, run }
}

/// A case that runs longer than this is reported as hung and the process exits: a lost signal
/// would otherwise keep the GPU spinning until the outer `timeout` kills everything silently.
/// Generous, because the first run of a case includes NVRTC compiles (several seconds each).
/// `PGAS_SUITE_CASE_TIMEOUT` (seconds) replaces it: under compute-sanitizer a case with hundreds
/// of launches takes minutes.
fn case_timeout() -> Duration {
    let secs = std::env::var("PGAS_SUITE_CASE_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    Duration::from_secs(secs)
}

/// `shard:I/N` among the arguments: of the cases the other arguments select, those whose
/// position modulo N is I, so N processes (compute-sanitizer's, say) run every case once.
fn shard(args: &[String]) -> Option<(usize, usize)> {
    let spec = args.iter().find_map(|a| a.strip_prefix("shard:"))?;
    let (i, n) = spec.split_once('/')?;
    let (i, n) = (i.parse().ok()?, n.parse().ok()?);
    (i < n).then_some((i, n))
}

static CURRENT: Mutex<&str> = Mutex::new("");
static STARTED_MS: AtomicU64 = AtomicU64::new(0);

fn watchdog(origin: Instant, pe: usize) {
    let timeout = case_timeout();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        let started = STARTED_MS.load(Ordering::SeqCst);
        let now = origin.elapsed().as_millis() as u64;
        // `started` is a case's start + 1 ms (0: none running), so within that millisecond it
        // is ahead of `now`: an unsigned `now - started` wrapped and reported a case a few
        // milliseconds old as hung (issue 23's false hang).
        if started > 0 && now.saturating_sub(started) > timeout.as_millis() as u64 {
            let name = *CURRENT.lock().unwrap_or_else(|e| e.into_inner());
            println!(
                "gpu_suite[pe {pe}]: FAIL {name}: still running after {} s (hung); giving up",
                timeout.as_secs()
            );
            println!("gpu_suite: aborted in case {name}");
            give_up();
        }
    });
}

/// Ends the process at once with status 124, from the watchdog's thread. Not
/// `std::process::exit`: that runs the C exit handlers (NVSHMEM's, CUDA's) while the main thread
/// is still inside a CUDA or NVSHMEM call, and they crashed the process with SIGSEGV (issue 23).
/// A hung PE cannot finalize anyway; the launcher ends the others when this one exits.
fn give_up() -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` ends the process without running exit handlers or destructors, which is
    // the point; nothing after it runs.
    unsafe { libc::_exit(124) }
}

pub fn run(cases: &[Case], kernels: &[&'static KernelSpec], args: &[String]) -> ExitCode {
    let shard = shard(args);
    if args.iter().any(|a| a.starts_with("shard:")) && shard.is_none() {
        println!("gpu_suite: FAIL arguments: a shard is written shard:I/N with I < N");
        return ExitCode::FAILURE;
    }
    run_with(pgas::init(), cases, kernels, args)
}

/// [`run`] on a context that the caller initialized (`--uid-bootstrap` starts it from a unique
/// id of its own, see `uid_start.rs`).
pub fn run_with(
    init: pgas::Result<Pgas>, cases: &[Case], kernels: &[&'static KernelSpec], args: &[String],
) -> ExitCode {
    let shard = shard(args);
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with("shard:")).collect();
    let pgas = match init {
        Ok(p) => p,
        Err(e) => {
            println!("gpu_suite: FAIL init: {e}");
            println!("gpu_suite: 0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    };
    let me = util::me(&pgas);
    let n = util::npes(&pgas);
    let selected: Vec<&Case> = cases
        .iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.name.contains(f.as_str())))
        .enumerate()
        .filter(|(i, _)| shard.is_none_or(|(s, n)| i % n == s))
        .map(|(_, c)| c)
        .collect();
    if me == 0 {
        println!(
            "gpu_suite: {} cases on {n} PE(s), device {}",
            selected.len(),
            util::device_name(&pgas)
        );
    }
    if filters.is_empty() {
        prewarm(&pgas, kernels);
    }
    let origin = Instant::now();
    watchdog(origin, me);
    let mut ok = Vec::with_capacity(selected.len());
    for case in &selected {
        *CURRENT.lock().unwrap() = case.name;
        STARTED_MS.store(origin.elapsed().as_millis() as u64 + 1, Ordering::SeqCst);
        let t = Instant::now();
        let result = std::panic::catch_unwind(|| (case.run)(&pgas))
            .unwrap_or_else(|_| Err("panicked (see the message above)".into()));
        // Every case ends at a common point, whatever it returned.
        let fence = util::settle(&pgas);
        STARTED_MS.store(0, Ordering::SeqCst);
        let ms = t.elapsed().as_millis();
        match result.and(fence) {
            Ok(()) => {
                println!("gpu_suite[pe {me}]: PASS {} ({ms} ms)", case.name);
                ok.push(true);
            }
            Err(e) => {
                println!("gpu_suite[pe {me}]: FAIL {}: {e}", case.name);
                ok.push(false);
            }
        }
    }
    report(&pgas, &selected, &ok)
}

/// Compiles (or loads from the disk cache) every kernel at once, in the build's programs and its
/// helper processes, instead of one after the other as the cases first launch them: NVRTC takes
/// about a second per program. With the suite's kernels go `pgas::coll`'s of every element type,
/// which the cases would otherwise compile a type at a time in their `coll::prewarm` (twelve
/// builds of a few seconds each, one after the other); here they fill the processes the
/// collective kernels' programs leave free. A kernel that fails to compile is only reported
/// here; its case fails with the full error.
fn prewarm(pgas: &Pgas, kernels: &[&'static KernelSpec]) {
    let mut list: Vec<Prewarm<'static>> = kernels
        .iter()
        .map(|&spec| Prewarm {
            spec,
            variant: Variant::Checked,
            comptime: &[],
        })
        .collect();
    list.push(Prewarm {
        spec: &publish::SPEC,
        variant: Variant::Checked,
        comptime: &[],
    });
    list.extend(pgas::coll::prewarm_all());
    let t = Instant::now();
    let outcome = pgas::launch::prewarm(pgas, &list);
    if util::me(pgas) == 0 {
        match outcome {
            Ok(()) => println!(
                "gpu_suite: {} kernels compiled or loaded in {:.1} s",
                list.len(),
                t.elapsed().as_secs_f64()
            ),
            Err(e) => {
                println!("gpu_suite: prewarm stopped at an error (the case will say more): {e}")
            }
        }
    }
}

/// Combines every PE's verdicts (each PE puts its row into every PE's table) and prints the total.
fn report(pgas: &Pgas, cases: &[&Case], ok: &[bool]) -> ExitCode {
    let me = util::me(pgas);
    let n = util::npes(pgas);
    let mine: Vec<u32> = ok.iter().map(|&b| b as u32).collect();
    let table = gather(pgas, &mine).unwrap_or_else(|e| {
        println!("gpu_suite[pe {me}]: could not combine the PEs' results ({e}); this PE's only");
        let mut t = vec![1u32; n * mine.len()];
        t[me * mine.len()..(me + 1) * mine.len()].copy_from_slice(&mine);
        t
    });
    let (mut passed, mut failed) = (0, 0);
    for (c, case) in cases.iter().enumerate() {
        let bad: Vec<usize> = (0..n)
            .filter(|&pe| table[pe * cases.len() + c] == 0)
            .collect();
        if bad.is_empty() {
            passed += 1;
        } else {
            failed += 1;
            if me == 0 {
                println!("gpu_suite: FAIL {} on PE(s) {bad:?}", case.name);
            }
        }
    }
    if me == 0 {
        println!("gpu_suite: {passed} passed, {failed} failed");
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[pgas_kernel]
fn publish(table: &mut SymTensor<u32>, mine: &SymTensor<u32>) {
    let rows = mine.len();
    let at = my_pe() as usize * rows;
    for pe in 0..n_pes() {
        put(&mut table[at..at + rows], mine, pe);
    }
    quiet();
}

pub(crate) fn gather(pgas: &Pgas, mine: &[u32]) -> Result<Vec<u32>, Box<dyn std::error::Error>> {
    let n = util::npes(pgas);
    let mut table = pgas.alloc::<u32>(n * mine.len().max(1))?;
    table.fill(0)?;
    let src = pgas.alloc_from(if mine.is_empty() { &[1] } else { mine })?;
    pgas.barrier_all()?;
    publish::launch(pgas, LaunchConfig::blocks(1, 1), &mut table, &src)?;
    util::settle(pgas)?;
    Ok(table.to_vec()?)
}
