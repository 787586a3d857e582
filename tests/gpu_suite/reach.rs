//! Which peers count as reachable (`PGAS_PEER_ACCESS`, runtime `context/reach.rs`) and what runs
//! when one is not: the case holds with any policy, so the GPU script runs it as is and again
//! under `PGAS_PEER_ACCESS=none` (every peer off-node), where `pgas::coll` falls back to
//! NVSHMEM's collectives and the copy-engine operations refuse on every PE alike.

use crate::runner::{case, Case};
use crate::util::{self, check_eq, ensure, CaseResult};
use pgas::coll::{self, Algorithm, Comm};
use pgas::ops::AllGatherMatmul;
use pgas::prelude::*;

pub const CASES: &[Case] = &[case("reach/peer_access_and_fallbacks", peer_access)];

fn peer_access(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let policy = p.peer_access();
    let probe = p.alloc::<u64>(1)?;
    // The one decision, seen three ways: the policy, `peer_reachable` and `peer`.
    for pe in 0..n {
        let reachable = p.peer_reachable(&probe, pe)?;
        ensure(policy.allows(me, pe) || !reachable, || {
            format!("PGAS_PEER_ACCESS={policy} forbids PE {pe}, yet peer_reachable says yes")
        })?;
        ensure(probe.peer(pe)?.is_some() == reachable, || {
            format!("peer({pe}) and peer_reachable({pe}) disagree")
        })?;
    }
    ensure(p.peer_reachable(&probe, me)?, || {
        "a PE must reach itself".into()
    })?;
    let all = p.first_unreachable(&probe, 0..n)?.is_none();

    let mut comm = Comm::new(p, Team::WORLD)?;
    ensure(comm.peers_reachable() == all, || {
        format!(
            "the communicator says every peer reachable: {}, the context: {all}",
            comm.peers_reachable()
        )
    })?;
    coll::prewarm::<u32>(p)?;
    let m = 1000;
    let src = p.alloc_from(&(0..m).map(|i| (me * m + i) as u32).collect::<Vec<_>>())?;
    let mut sum = p.alloc::<u32>(m)?;
    let used = comm.all_reduce(&mut sum, &src, ReduceOp::Sum, Algorithm::Auto)?;
    ensure(all || used == Algorithm::Nvshmem, || {
        format!("a peer is off-node, yet Auto all-reduced with {used:?}")
    })?;
    let mut gathered = p.alloc::<u32>(n * m)?;
    comm.all_gather(&mut gathered, &src)?;
    let blocks = p.alloc_from(
        &(0..n * m)
            .map(|i| (me * n * m + i) as u32)
            .collect::<Vec<_>>(),
    )?;
    let mut swapped = p.alloc::<u32>(n * m)?;
    comm.all_to_all(&mut swapped, &blocks)?;
    let mut bcast = p.alloc::<u32>(m)?;
    comm.broadcast(&mut bcast, &src, 0, Algorithm::Auto)?;
    // A copy-engine operation refuses a peer off NVLink on every PE (no hang, no launch).
    let fused = AllGatherMatmul::new(p, (128, 64, 64));
    util::settle(p)?;

    let want_sum: Vec<u32> = (0..m)
        .map(|i| (0..n).map(|pe| (pe * m + i) as u32).sum())
        .collect();
    check_eq(&format!("all-reduce ({used:?})"), &sum.to_vec()?, &want_sum)?;
    let want_gather: Vec<u32> = (0..n * m).map(|k| k as u32).collect();
    check_eq("all-gather", &gathered.to_vec()?, &want_gather)?;
    // Block `me` of PE `q`'s source (`q n m + me m + i`) lands as block `q` here.
    let want_a2a: Vec<u32> = (0..n * m)
        .map(|k| ((k / m) * n * m + me * m + k % m) as u32)
        .collect();
    check_eq("all-to-all", &swapped.to_vec()?, &want_a2a)?;
    let want_bcast: Vec<u32> = (0..m).map(|i| i as u32).collect();
    check_eq("broadcast from PE 0", &bcast.to_vec()?, &want_bcast)?;
    if !all {
        let e = fused.err().map(|e| e.to_string()).unwrap_or_default();
        ensure(e.contains("not mapped") || e.contains("NVLink"), || {
            format!("AllGatherMatmul with a peer off-node: expected a refusal naming it, got '{e}'")
        })?;
    }
    Ok(())
}
