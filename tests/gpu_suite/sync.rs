//! Device barriers and syncs at thread, warp and block scope, on all PEs and on a team, and the
//! team queries. Each barrier is checked for what it promises: in each round every PE writes
//! the round number into slot `my_pe` on every PE, then passes the barrier, then must find
//! every slot at least at that round. `barrier*` completes the writes itself; `sync*` only
//! synchronizes, so the writer calls `quiet()` before it.

use crate::runner::{case, Case};
use crate::util::{self, check_eq, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("sync/team_queries", queries),
    case("sync/barriers_thread", thread_scope),
    case("sync/barriers_warp", warp_scope),
    case("sync/barriers_block", block_scope),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[
    &team_queries::SPEC,
    &barriers_thread::SPEC,
    &barriers_warp::SPEC,
    &barriers_block::SPEC,
];

const ROUNDS: u32 = 50;

#[pgas_kernel]
fn team_queries(out: &mut SymTensor<i32>, team: Team) {
    out[0] = my_pe();
    out[1] = n_pes();
    out[2] = team_my_pe(team);
    out[3] = team_n_pes(team);
    out[4] = team_translate_pe(team, (my_pe() + 1) % n_pes(), team);
}

fn queries(p: &Pgas) -> CaseResult {
    let mut out = p.alloc::<i32>(5)?;
    out.fill(-7)?;
    team_queries::launch(p, LaunchConfig::blocks(1, 1), &mut out, Team::WORLD)?;
    util::settle(p)?;
    let (me, n) = (util::me(p) as i32, util::npes(p) as i32);
    check_eq(
        "my_pe n_pes team_my_pe team_n_pes team_translate_pe",
        &out.to_vec()?,
        &[me, n, me, n, (me + 1) % n],
    )
}

/// One thread per PE: four stages per round, one per barrier form.
#[pgas_kernel]
fn barriers_thread(x: &mut SymTensor<u32>, errs: &mut SymTensor<u32>, team: Team, rounds: u32) {
    let me = my_pe() as usize;
    let n = n_pes();
    for r in 0..rounds {
        for s in 0..4u32 {
            let v = r * 4 + s + 1;
            for k in 0..n {
                p(&mut x[me], v, k);
            }
            if s == 0 {
                barrier_all();
            } else if s == 1 {
                quiet();
                sync_all();
            } else if s == 2 {
                barrier(team);
            } else {
                quiet();
                team_sync(team);
            }
            for k in 0..n as usize {
                if x[k] < v {
                    errs[s as usize] += 1;
                }
            }
        }
    }
}

/// One warp per PE; lane 0 writes and checks.
#[pgas_kernel]
fn barriers_warp(x: &mut SymTensor<u32>, errs: &mut SymTensor<u32>, team: Team, rounds: u32) {
    let me = my_pe() as usize;
    let n = n_pes();
    let lane = lane_id();
    for r in 0..rounds {
        for s in 0..4u32 {
            let v = r * 4 + s + 1;
            if lane == 0 {
                for k in 0..n {
                    p(&mut x[me], v, k);
                }
                if s % 2 == 1 {
                    quiet();
                }
            }
            sync_warp();
            if s == 0 {
                barrier_all_warp();
            } else if s == 1 {
                sync_all_warp();
            } else if s == 2 {
                barrier_warp(team);
            } else {
                team_sync_warp(team);
            }
            if lane == 0 {
                for k in 0..n as usize {
                    if x[k] < v {
                        errs[s as usize] += 1;
                    }
                }
            }
        }
    }
}

/// One block of 128 threads per PE; thread k writes slot `my_pe` on PE k, thread 0 checks.
#[pgas_kernel]
fn barriers_block(x: &mut SymTensor<u32>, errs: &mut SymTensor<u32>, team: Team, rounds: u32) {
    let me = my_pe() as usize;
    let n = n_pes();
    let t = thread_idx_x() as i32;
    for r in 0..rounds {
        for s in 0..4u32 {
            let v = r * 4 + s + 1;
            if t < n {
                p(&mut x[me], v, t);
                if s % 2 == 1 {
                    quiet();
                }
            }
            sync_threads();
            if s == 0 {
                barrier_all_block();
            } else if s == 1 {
                sync_all_block();
            } else if s == 2 {
                barrier_block(team);
            } else {
                team_sync_block(team);
            }
            if t == 0 {
                for k in 0..n as usize {
                    if x[k] < v {
                        errs[s as usize] += 1;
                    }
                }
            }
            sync_threads();
        }
    }
}

type BarrierLaunch = fn(&Pgas, &mut SymTensor<u32>, &mut SymTensor<u32>) -> pgas::Result<()>;

fn run_barriers(p: &Pgas, launch: BarrierLaunch, forms: [&str; 4]) -> CaseResult {
    let n = util::npes(p);
    let mut x = p.alloc::<u32>(n)?;
    let mut errs = p.alloc::<u32>(4)?;
    x.fill(0)?;
    errs.fill(0)?;
    p.barrier_all()?;
    launch(p, &mut x, &mut errs)?;
    util::settle(p)?;
    let e = errs.to_vec()?;
    for (s, form) in forms.iter().enumerate() {
        util::ensure(e[s] == 0, || {
            format!(
                "{form}: {} stale slots seen after it in {ROUNDS} rounds",
                e[s]
            )
        })?;
    }
    check_eq(
        "slots after the last round",
        &x.to_vec()?,
        &vec![ROUNDS * 4; n],
    )
}

fn thread_scope(p: &Pgas) -> CaseResult {
    let forms = [
        "barrier_all",
        "quiet+sync_all",
        "barrier(team)",
        "quiet+team_sync(team)",
    ];
    run_barriers(
        p,
        |p, x, e| barriers_thread::launch(p, LaunchConfig::blocks(1, 1), x, e, Team::WORLD, ROUNDS),
        forms,
    )
}

fn warp_scope(p: &Pgas) -> CaseResult {
    let forms = [
        "barrier_all_warp",
        "quiet+sync_all_warp",
        "barrier_warp(team)",
        "quiet+team_sync_warp(team)",
    ];
    run_barriers(
        p,
        |p, x, e| barriers_warp::launch(p, LaunchConfig::blocks(1, 32), x, e, Team::WORLD, ROUNDS),
        forms,
    )
}

fn block_scope(p: &Pgas) -> CaseResult {
    let forms = [
        "barrier_all_block",
        "quiet+sync_all_block",
        "barrier_block(team)",
        "quiet+team_sync_block(team)",
    ];
    run_barriers(
        p,
        |p, x, e| {
            barriers_block::launch(p, LaunchConfig::blocks(1, 128), x, e, Team::WORLD, ROUNDS)
        },
        forms,
    )
}
