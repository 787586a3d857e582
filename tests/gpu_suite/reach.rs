//! Which peers count as reachable (`PGAS_PEER_ACCESS`, runtime `context/reach.rs`) and what runs
//! when one is not: the case holds with any policy, so the GPU script runs it as is and again
//! under `PGAS_PEER_ACCESS=none` (every peer off-node), where `pgas::coll` falls back to
//! NVSHMEM's collectives (the all-to-all-v to NVSHMEM puts between team barriers), all-gather + GEMM gathers with NVSHMEM's fcollect before one cuBLAS
//! GEMM, GEMM + reduce-scatter reduces with NVSHMEM's reduce-scatter after one, and the
//! all-reduce + RMSNorm all-reduces with `pgas::coll` before its norm kernel.

use crate::runner::{case, Case};
use crate::util::{self, check_eq, ensure, CaseResult};
use pgas::coll::{self, Algorithm, Comm};
use pgas::ops::matmul_reduce_scatter::MatmulReduceScatter;
use pgas::ops::AllGatherMatmul;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("reach/peer_access_and_fallbacks", peer_access),
    case("reach/allreduce_rmsnorm", allreduce_rmsnorm),
];

/// All-reduce + residual add + RMSNorm, two calls (the residual carries over) on a view: fused
/// where every peer is reachable, `pgas::coll`'s all-reduce and the norm kernel where one is
/// not (and there a fused form asked for by name is refused, naming `Auto`). Checked against
/// the host from the bf16 sums (exact for these values, so both forms give the same bits).
fn allreduce_rmsnorm(p: &Pgas) -> CaseResult {
    use pgas::ops::allreduce_rmsnorm::{reference, within_tolerance};
    use pgas::ops::AllReduceRmsNorm;
    let (me, n) = (util::me(p), util::npes(p));
    let (hidden, tokens) = (1024, 7);
    let len = tokens * hidden;
    let probe = p.alloc::<u64>(1)?;
    let all = p.first_unreachable(&probe, 0..n)?.is_none();
    let mut op = AllReduceRmsNorm::new(p, hidden, tokens, 1e-5)?;
    let val = |i: usize, pe: usize, call: usize| {
        bf16::from_f32(((i * 5 + pe * 11 + call * 3) % 13) as f32 / 4.0 - 1.5)
    };
    let w_h: Vec<bf16> = (0..hidden)
        .map(|i| bf16::from_f32(1.0 + (i % 3) as f32 / 4.0))
        .collect();
    let weight = p.alloc_from(&w_h)?;
    let mut res_h: Vec<bf16> = (0..len).map(|i| val(i, 7, 7)).collect();
    let mut residual = p.alloc_from(&res_h)?;
    let mut out = p.alloc::<bf16>(len)?;
    let mut xbig = p.alloc::<bf16>(len + 8)?;
    let s = p.stream().clone();
    for call in 0..2 {
        let xs: Vec<Vec<bf16>> = (0..n)
            .map(|pe| (0..len).map(|i| val(i, pe, call)).collect())
            .collect();
        xbig.view_mut(8..8 + len)?.copy_from(&xs[me])?;
        p.barrier_all()?;
        let x = xbig.view(8..8 + len)?;
        let used = op.run(&x, &mut residual, &weight, &mut out, Algorithm::Auto.on(&s))?;
        s.synchronize()?;
        let fused = matches!(
            used,
            Algorithm::OneShot | Algorithm::TwoShot | Algorithm::LowLatency
        );
        ensure(fused == all, || {
            format!("every peer reachable: {all}, yet the operation ran {used:?}")
        })?;
        let sum: Vec<bf16> = (0..len)
            .map(|i| bf16::from_f32(xs.iter().map(|x| x[i].to_f32()).sum()))
            .collect();
        let (rw, yw) = reference(&[&sum], &res_h, &w_h, hidden, 1e-5);
        let (r, y) = (residual.to_vec()?, out.to_vec()?);
        check_eq(&format!("call {call} ({used:?}): residual"), &r, &rw)?;
        ensure((0..len).all(|i| within_tolerance(y[i], yw[i])), || {
            format!("call {call} ({used:?}): the norm is off")
        })?;
        res_h = rw;
        p.barrier_all()?;
    }
    if !all {
        let x = xbig.view(8..8 + len)?;
        let e = op
            .run(
                &x,
                &mut residual,
                &weight,
                &mut out,
                Algorithm::OneShot.on(&s),
            )
            .err();
        ensure(
            e.is_some_and(|e| e.to_string().contains("pass Algorithm::Auto")),
            || "a fused form with a peer off NVLink was not refused".into(),
        )?;
    }
    Ok(())
}

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
    // Nodes of `g` PEs (`PGAS_PEER_ACCESS=nodes:g`, at least two of them): the hierarchical
    // algorithms (peer memory inside a node, NVSHMEM across).
    let nodes = match policy {
        pgas::PeerAccess::Nodes(g) if g >= 2 && n > g && n.is_multiple_of(g) => Some(g),
        _ => None,
    };
    ensure(all || comm.hierarchy() == nodes, || {
        format!(
            "PGAS_PEER_ACCESS={policy} on {n} PEs, yet the communicator's hierarchy is {:?}",
            comm.hierarchy()
        )
    })?;
    let used = comm.all_reduce(&mut sum, &src, ReduceOp::Sum, Algorithm::Auto)?;
    let off_node = if nodes.is_some() {
        Algorithm::Hierarchical
    } else {
        Algorithm::Nvshmem
    };
    ensure(all || used == off_node, || {
        format!("a peer is off-node, yet Auto all-reduced with {used:?} (expected {off_node:?})")
    })?;
    // The other collectives that have a hierarchical form, checked below with the flat ones'
    // results: a reduce-scatter (chunk `me` of the sums).
    let mut scattered = p.alloc::<u32>(m / n * n / n)?;
    let rs_src = p.alloc_from(
        &(0..m / n * n)
            .map(|i| (me * m + i) as u32)
            .collect::<Vec<_>>(),
    )?;
    comm.reduce_scatter(&mut scattered, &rs_src, ReduceOp::Sum, Algorithm::Auto)?;
    let mut gathered = p.alloc::<u32>(n * m)?;
    comm.all_gather(&mut gathered, &src, Algorithm::Auto)?;
    let blocks = p.alloc_from(
        &(0..n * m)
            .map(|i| (me * n * m + i) as u32)
            .collect::<Vec<_>>(),
    )?;
    let mut swapped = p.alloc::<u32>(n * m)?;
    let a2a_used = comm.all_to_all(&mut swapped, &blocks, Algorithm::Auto)?;
    ensure(
        nodes.is_none() || a2a_used == Algorithm::Hierarchical,
        || format!("over nodes of PEs, Auto's all-to-all took {a2a_used:?}"),
    )?;
    let mut bcast = p.alloc::<u32>(m)?;
    comm.broadcast(&mut bcast, &src, 0, Algorithm::Auto)?;
    // All-to-all-v: PE `q` sends `3 + r + q` elements to rank `r` (peer stores on NVLink,
    // NVSHMEM puts between two team barriers off it).
    let count = |from: usize, to: usize| 3 + to + from;
    let displs = |counts: &[usize]| -> Vec<usize> {
        counts
            .iter()
            .scan(0, |at, c| Some(std::mem::replace(at, *at + c)))
            .collect()
    };
    let send_counts: Vec<usize> = (0..n).map(|r| count(me, r)).collect();
    let recv_counts: Vec<usize> = (0..n).map(|q| count(q, me)).collect();
    let (send_displs, recv_displs) = (displs(&send_counts), displs(&recv_counts));
    let layout = comm.all_to_all_layout(&send_counts, &send_displs, &recv_counts, &recv_displs)?;
    let vsrc = p.alloc_from(
        &(0..layout.src_len())
            .map(|j| (me * 10_000 + j) as u32)
            .collect::<Vec<_>>(),
    )?;
    let mut vdst = p.alloc::<u32>(layout.dst_len())?;
    comm.all_to_all_v(&mut vdst, &vsrc, &layout, Algorithm::Auto)?;
    // All-gather + GEMM: copy-engine pulls on NVLink, NVSHMEM's fcollect and one GEMM off it.
    let (mp, gn, gk) = (128, 64, 64);
    let a_val = |row: usize, c: usize| ((row * 3 + c) % 5) as f32;
    let b_val = |j: usize, c: usize| ((j + 2 * c) % 3) as f32;
    let stream = p.stream();
    let shard: Vec<bf16> = (0..mp * gk)
        .map(|i| bf16::from_f32(a_val(me * mp + i / gk, i % gk)))
        .collect();
    let bt: Vec<bf16> = (0..gn * gk)
        .map(|i| bf16::from_f32(b_val(i / gk, i % gk)))
        .collect();
    let (shard, bt) = (stream.clone_htod(&shard)?, stream.clone_htod(&bt)?);
    let mut c = stream.alloc_zeros::<bf16>(n * mp * gn)?;
    let mut op = AllGatherMatmul::new(p, (mp, gn, gk))?;
    op.run(&mut c, &shard, &bt)?;
    util::settle(p)?;

    let want_sum: Vec<u32> = (0..m)
        .map(|i| (0..n).map(|pe| (pe * m + i) as u32).sum())
        .collect();
    check_eq(&format!("all-reduce ({used:?})"), &sum.to_vec()?, &want_sum)?;
    let k = m / n;
    let want_rs: Vec<u32> = (0..k)
        .map(|i| (0..n).map(|pe| (pe * m + me * k + i) as u32).sum())
        .collect();
    check_eq("reduce-scatter", &scattered.to_vec()?, &want_rs)?;
    let want_gather: Vec<u32> = (0..n * m).map(|k| k as u32).collect();
    check_eq("all-gather", &gathered.to_vec()?, &want_gather)?;
    // Block `me` of PE `q`'s source (`q n m + me m + i`) lands as block `q` here.
    let want_a2a: Vec<u32> = (0..n * m)
        .map(|k| ((k / m) * n * m + me * m + k % m) as u32)
        .collect();
    check_eq("all-to-all", &swapped.to_vec()?, &want_a2a)?;
    let mut want_v = vec![0u32; layout.dst_len()];
    for q in 0..n {
        // PE `q`'s segment for this PE starts after what it sends to the ranks before.
        let from: usize = (0..me).map(|r| count(q, r)).sum();
        for j in 0..count(q, me) {
            want_v[recv_displs[q] + j] = (q * 10_000 + from + j) as u32;
        }
    }
    check_eq("all-to-all-v", &vdst.to_vec()?, &want_v)?;
    let want_bcast: Vec<u32> = (0..m).map(|i| i as u32).collect();
    check_eq("broadcast from PE 0", &bcast.to_vec()?, &want_bcast)?;
    // Small integers: the f32 sums are exact, so one bf16 rounding gives the same bits.
    let want_c: Vec<bf16> = (0..n * mp * gn)
        .map(|i| {
            let (row, j) = (i / gn, i % gn);
            bf16::from_f32((0..gk).map(|c| a_val(row, c) * b_val(j, c)).sum())
        })
        .collect();
    check_eq("all-gather + GEMM", &stream.clone_dtoh(&c)?, &want_c)?;
    // GEMM + reduce-scatter: copy-engine chunks on NVLink, NVSHMEM's reduce-scatter off it.
    // Partial sums of at most 64 and totals of at most 256 are exact in bf16 either way.
    let (m, rn, kl) = (64 * n, 64, 32);
    let ra = |pe: usize, row: usize, c: usize| ((row + c + pe) % 2) as f32;
    let rb = |pe: usize, j: usize, c: usize| ((j * c + pe) % 3) as f32;
    let a: Vec<bf16> = (0..m * kl)
        .map(|i| bf16::from_f32(ra(me, i / kl, i % kl)))
        .collect();
    let b: Vec<bf16> = (0..rn * kl)
        .map(|i| bf16::from_f32(rb(me, i / kl, i % kl)))
        .collect();
    let (a, b) = (stream.clone_htod(&a)?, stream.clone_htod(&b)?);
    let mut out = stream.alloc_zeros::<bf16>(m / n * rn)?;
    let mut rs = MatmulReduceScatter::new(p, (m, rn, kl))?;
    rs.run(p, p.stream(), &mut out, &a, &b)?;
    util::settle(p)?;
    let want_rs: Vec<bf16> = (0..m / n * rn)
        .map(|i| {
            let (row, j) = (me * (m / n) + i / rn, i % rn);
            let sum: f32 = (0..n)
                .map(|pe| (0..kl).map(|c| ra(pe, row, c) * rb(pe, j, c)).sum::<f32>())
                .sum();
            bf16::from_f32(sum)
        })
        .collect();
    check_eq("GEMM + reduce-scatter", &stream.clone_dtoh(&out)?, &want_rs)?;
    if !all {
        // Off NVLink both fused operations start on cuBLAS and refuse the pgas paths.
        use pgas::ops::GemmPath::{Cublas, PgasPerShard};
        let refused = [
            (
                "all-gather + GEMM",
                op.gemm_path(),
                op.set_gemm(PgasPerShard).err(),
            ),
            (
                "GEMM + reduce-scatter",
                rs.gemm_path(),
                rs.set_gemm(p, PgasPerShard).err(),
            ),
        ];
        for (what, path, e) in refused {
            ensure(path == Cublas, || {
                format!("{what} with a peer off NVLink started on {path:?}, not cuBLAS")
            })?;
            ensure(
                e.is_some_and(|e| e.to_string().contains("off NVLink")),
                || format!("{what}: a pgas GEMM path with a peer off NVLink was not refused"),
            )?;
        }
    }
    Ok(())
}
