//! Collective launch: a kernel that calls a device barrier must have all its blocks resident at
//! once. Too large a grid must come back as the runtime's error naming the largest grid that
//! fits; that largest grid must then launch and run.

use crate::runner::{case, Case};
use crate::util::{self, ensure, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[case("launch/collective_grid_too_large", too_large)];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[&grid_barrier::SPEC];

/// More blocks than any GPU holds at once (an H200 holds at most 8 blocks of 256 threads on each
/// of its 132 SMs). 256 threads, not 1024, so that even a register-hungry build of the kernel
/// fits at least one block per SM.
const TOO_MANY: u32 = 100_000;
const THREADS: u32 = 256;

#[pgas_kernel]
fn grid_barrier(out: &mut SymTensor<u32>) {
    if block_idx_x() == 0 && thread_idx_x() == 0 {
        barrier_all();
    }
    if thread_idx_x() == 0 {
        out[block_idx_x() as usize] = block_idx_x() + 1;
    }
}

fn too_large(p: &Pgas) -> CaseResult {
    let mut out = p.alloc::<u32>(TOO_MANY as usize)?;
    out.fill(0)?;
    p.barrier_all()?;
    let err = match grid_barrier::launch(p, LaunchConfig::blocks(TOO_MANY, THREADS), &mut out) {
        Ok(()) => {
            util::settle(p)?;
            return Err(format!(
                "a collective launch of {TOO_MANY} x {THREADS} threads was accepted"
            )
            .into());
        }
        Err(e) => e,
    };
    let msg = err.to_string();
    let max = match &err {
        pgas::Error::CollectiveGrid { max, .. } => *max,
        other => return Err(format!("expected the collective-grid error, got: {other}").into()),
    };
    ensure(
        max > 0 && max < TOO_MANY as u64 && msg.contains(&max.to_string()),
        || format!("the error does not name a usable largest grid: {msg}"),
    )?;
    println!(
        "gpu_suite[pe {}]: collective grid error as expected: {msg}",
        util::me(p)
    );
    // The largest grid it names must fit and run; every block leaves its mark.
    grid_barrier::launch(p, LaunchConfig::blocks(max as u32, THREADS), &mut out)?;
    util::settle(p)?;
    let v = out.to_vec()?;
    let want: Vec<u32> = (1..=max as u32).collect();
    util::check_eq(
        &format!("largest grid ({max} blocks) ran"),
        &v[..max as usize],
        &want,
    )?;
    ensure(v[max as usize..].iter().all(|&x| x == 0), || {
        "blocks past the grid wrote".into()
    })
}
