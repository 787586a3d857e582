//! Peer memory: `x.has_peer(pe)` for every PE, and loads and stores through `x.peer(pe)`.
//! A PE can always reach itself; the test machines join their GPUs with NVLink, so every other
//! PE is expected to be reachable too, and a PE that is not is reported as a failure there.

use crate::runner::{case, Case};
use crate::util::{self, check_eq, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[case("peer/has_peer_load_store", peer_case)];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[&peer_access::SPEC];

const H: usize = 64;

/// Thread i stores into the upper half of the next PE's `x` and loads from its lower half.
#[pgas_kernel]
fn peer_access(
    x: &mut SymTensor<u32>, has: &mut SymTensor<u32>, got: &mut SymTensor<u32>, pe: i32,
) {
    let i = thread_idx_x() as usize;
    if i == 0 {
        for k in 0..n_pes() {
            has[k as usize] = x.has_peer(k) as u32;
        }
    }
    if x.has_peer(pe) {
        x.peer(pe)[i + 64] = my_pe() as u32 * 1000 + i as u32;
        got[i] = x.peer(pe)[i];
    }
}

fn peer_case(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let lower = |pe: usize| (0..H as u32).map(move |i| pe as u32 * 7 + i);
    let mut init: Vec<u32> = lower(me).collect();
    init.extend(std::iter::repeat_n(u32::MAX, H));
    let mut x = p.alloc_from(&init)?;
    let mut has = p.alloc::<u32>(n)?;
    let mut got = p.alloc::<u32>(H)?;
    has.fill(9)?;
    got.fill(u32::MAX)?;
    p.barrier_all()?;
    peer_access::launch(
        p,
        LaunchConfig::blocks(1, H as u32),
        &mut x,
        &mut has,
        &mut got,
        util::next(p) as i32,
    )?;
    util::settle(p)?;
    check_eq(
        "has_peer for every PE (all NVLink-reachable)",
        &has.to_vec()?,
        &vec![1; n],
    )?;
    let xv = x.to_vec()?;
    let stored: Vec<u32> = (0..H as u32)
        .map(|i| util::prev(p) as u32 * 1000 + i)
        .collect();
    check_eq("stores through peer()", &xv[H..], &stored)?;
    check_eq(
        "loads through peer()",
        &got.to_vec()?,
        &lower(util::next(p)).collect::<Vec<_>>(),
    )
}
