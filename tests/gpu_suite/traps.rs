//! The checked variant's traps, one per process (a trap kills the CUDA context):
//! `gpu_suite --expect-trap oob` indexes one past the end of a buffer, `--expect-trap bad-pe`
//! targets PE `n_pes()`. The checked launch must print the Rust file and line of the offending
//! statement before trapping; scripts/gpu-suite.sh checks that the output names
//! `tests/gpu_suite/traps.rs:LINE` with the line announced here. The announcement spells the
//! location differently (`file ..., line N`) so that it can never satisfy that check itself.

use crate::util;
use pgas::prelude::*;
use std::process::ExitCode;

#[pgas_kernel]
fn trap_oob(x: &mut SymTensor<u32>, i: usize) {
    x[i] = 7;
}
/// The line of `x[i] = 7` above.
const OOB_LINE: u32 = line!() - 3;

#[pgas_kernel]
fn trap_bad_pe(x: &mut SymTensor<u32>, pe: i32) {
    p(&mut x[0], 7, pe);
}
/// The line of `p(...)` above.
const BAD_PE_LINE: u32 = line!() - 3;

pub fn run(which: &str) -> ExitCode {
    let line = match which {
        "oob" => OOB_LINE,
        "bad-pe" => BAD_PE_LINE,
        other => {
            println!("gpu_suite: --expect-trap takes `oob` or `bad-pe`, not `{other}`");
            return ExitCode::from(2);
        }
    };
    println!(
        "expect-trap {which}: the report must name file {}, line {line}",
        file!()
    );
    // Nothing that touches NVSHMEM may be dropped after the trap (freeing symmetric memory or
    // finalizing on a dead context can abort the process), so every value lives until `exit`.
    let pgas = match pgas::init() {
        Ok(p) => p,
        Err(e) => {
            println!("expect-trap {which}: FAIL: pgas::init failed: {e}");
            std::process::exit(1)
        }
    };
    let mut x = match pgas
        .alloc::<u32>(16)
        .and_then(|mut x| x.fill(0).map(|()| x))
    {
        Ok(x) => x,
        Err(e) => {
            println!("expect-trap {which}: FAIL: allocation failed: {e}");
            std::process::exit(1)
        }
    };
    let outcome = (|| -> Result<(), Box<dyn std::error::Error>> {
        if which == "oob" {
            trap_oob::launch(&pgas, LaunchConfig::blocks(1, 1), &mut x, 16)?;
        } else {
            let bad = util::npes(&pgas) as i32;
            trap_bad_pe::launch(&pgas, LaunchConfig::blocks(1, 1), &mut x, bad)?;
        }
        pgas.stream().synchronize()?;
        Ok(())
    })();
    // Exit at once, without destructors: after a trap the context is dead.
    match outcome {
        Err(e) => {
            println!("expect-trap {which}: the launch failed as expected: {e}");
            std::process::exit(0)
        }
        Ok(()) => {
            println!("expect-trap {which}: FAIL: the checked kernel completed without trapping");
            std::process::exit(1)
        }
    }
}
