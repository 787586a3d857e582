//! `pgas::ops`: the cuBLAS wrapper (both B layouts against the host) and `AllGatherMatmul`
//! (every element against the host at a shape that is no multiple of any tile, three calls in a
//! row on one plan with different shards, then four more enqueued back to back with no host
//! wait, which exercise the double buffer and the signal words' epochs; the one-call form), and its bad input: a shape that differs between PEs, a zero
//! dimension and a buffer of the wrong size are an `Err` on every PE, with nothing launched; the
//! `pgas::gemm` paths, and the one kernel's pushes in pieces of K (`set_pieces`).

use crate::runner::{case, Case};
use crate::util::{ensure, CaseResult};
use pgas::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use pgas::ops::all_gather_matmul::DEFAULT_PIECES;
use pgas::ops::cublas::{BLayout, Cublas};
use pgas::ops::{all_gather_matmul, AllGatherMatmul, GemmPath};
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("ops/cublas_gemm", cublas_gemm),
    case("ops/all_gather_matmul", ag_matmul),
    case("ops/all_gather_matmul_bad_input", ag_matmul_bad_input),
    case("ops/all_gather_matmul_pgas_paths", ag_matmul_pgas_paths),
    case("ops/all_gather_matmul_pieces", ag_matmul_pieces),
];

/// A small integer-valued bf16 (exact, and so are the f32 sums here).
fn small(i: usize, salt: usize) -> bf16 {
    bf16::from_f32(((i * 7 + salt * 13) % 9) as f32 - 4.0)
}

/// Row-major `A · Btᵀ` on the host.
fn host_nt(a: &[bf16], bt: &[bf16], (m, n, k): (usize, usize, usize)) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for r in 0..m {
        for col in 0..n {
            c[r * n + col] = (0..k)
                .map(|x| a[r * k + x].to_f32() * bt[col * k + x].to_f32())
                .sum();
        }
    }
    c
}

/// Every element equal: the f32 sums are exact integers, and cuBLAS and `bf16::from_f32` round
/// them to bf16 alike (to nearest, ties to even).
fn check(what: &str, got: &[bf16], want: &[f32]) -> CaseResult {
    ensure(got.len() == want.len(), || {
        format!("{what}: {} elements, expected {}", got.len(), want.len())
    })?;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let w = bf16::from_f32(*w).to_f32();
        ensure(g.to_f32() == w, || {
            format!("{what}: element {i} is {g}, expected {w}")
        })?;
    }
    Ok(())
}

fn cublas_gemm(p: &Pgas) -> CaseResult {
    let (m, n, k) = (33, 40, 24);
    let s = p.stream();
    let a: Vec<bf16> = (0..m * k).map(|i| small(i, 1)).collect();
    let bt: Vec<bf16> = (0..n * k).map(|i| small(i, 2)).collect();
    let b: Vec<bf16> = (0..k * n).map(|i| bt[(i % n) * k + i / n]).collect();
    let want = host_nt(&a, &bt, (m, n, k));
    let blas = Cublas::new(p.cuda())?;
    let (da, dbt, db) = (s.clone_htod(&a)?, s.clone_htod(&bt)?, s.clone_htod(&b)?);
    let mut c = s.alloc_zeros::<bf16>(m * n)?;
    blas.gemm_bf16(s, &mut c, &da, &dbt, (m, n, k), BLayout::Transposed)?;
    check("A·Btᵀ", &s.clone_dtoh(&c)?, &want)?;
    let mut c = s.alloc_zeros::<bf16>(m * n)?;
    blas.gemm_bf16(s, &mut c, &da, &db, (m, n, k), BLayout::Plain)?;
    check("A·B", &s.clone_dtoh(&c)?, &want)?;
    let e = blas.gemm_bf16(s, &mut c, &da, &dbt, (m, n, k + 1), BLayout::Transposed);
    ensure(matches!(e, Err(pgas::Error::LengthMismatch { .. })), || {
        format!("a K that does not match the buffers was not refused: {e:?}")
    })
}

fn ag_matmul(p: &Pgas) -> CaseResult {
    let (me, np) = (p.my_pe(), p.n_pes());
    let (mp, n, k) = (40, 72, 56);
    let m = mp * np;
    let s = p.stream();
    let bt: Vec<bf16> = (0..n * k).map(|i| small(i, 5)).collect();
    let dbt = s.clone_htod(&bt)?;
    let mut op = AllGatherMatmul::new(p, (mp, n, k))?;
    ag_calls(p, &mut op, &bt, "")?;
    drop(op);
    let full: Vec<bf16> = (0..m * k).map(|i| small(i, 3)).collect();
    let shard = s.clone_htod(&full[me * mp * k..(me + 1) * mp * k])?;
    let mut c = s.alloc_zeros::<bf16>(m * n)?;
    all_gather_matmul(p, &mut c, &shard, &dbt, (mp, n, k))?;
    check(
        "all_gather_matmul",
        &s.clone_dtoh(&c)?,
        &host_nt(&full, &bt, (m, n, k)),
    )
}

/// Three calls checked one by one, then four enqueued back to back (each parity twice, no host
/// wait between them: the double buffer and the peers' words reused while a peer may still be in
/// the previous call) and checked at the end, all against the host. `what` prefixes messages.
fn ag_calls(p: &Pgas, op: &mut AllGatherMatmul, bt: &[bf16], what: &str) -> CaseResult {
    let (me, np) = (p.my_pe(), p.n_pes());
    let (mp, n, k) = op.shape();
    let m = mp * np;
    let s = p.stream();
    let dbt = s.clone_htod(bt)?;
    for call in 0..3 {
        // Every PE can build every PE's shard: element i of the full A of this call.
        let full: Vec<bf16> = (0..m * k).map(|i| small(i, 10 + call)).collect();
        let shard = s.clone_htod(&full[me * mp * k..(me + 1) * mp * k])?;
        let mut c = s.alloc_zeros::<bf16>(m * n)?;
        op.run(&mut c, &shard, &dbt)?;
        let want = host_nt(&full, bt, (m, n, k));
        check(&format!("{what}call {call}"), &s.clone_dtoh(&c)?, &want)?;
    }
    let fulls: Vec<Vec<bf16>> = (0..4)
        .map(|call| (0..m * k).map(|i| small(i, 20 + call)).collect())
        .collect();
    let mut shards = Vec::new();
    let mut cs = Vec::new();
    for full in &fulls {
        shards.push(s.clone_htod(&full[me * mp * k..(me + 1) * mp * k])?);
        cs.push(s.alloc_zeros::<bf16>(m * n)?);
    }
    for (c, shard) in cs.iter_mut().zip(&shards) {
        op.run(c, shard, &dbt)?;
    }
    for (call, (c, full)) in cs.iter().zip(&fulls).enumerate() {
        let want = host_nt(full, bt, (m, n, k));
        check(
            &format!("{what}back-to-back call {call}"),
            &s.clone_dtoh(c)?,
            &want,
        )?;
    }
    Ok(())
}

/// Whether the GPU is a Hopper (sm_90), which the `pgas::gemm` paths need.
pub(crate) fn hopper(p: &Pgas) -> pgas::Result<bool> {
    Ok(crate::util::compute_major(p)? == 9)
}

/// Whether `AllGatherMatmul`'s one-kernel path is refused here, as where more than 2 PEs share
/// a GPU (a known fault, `docs/faults.md`): every PE gets the same answer. Collective.
fn one_kernel_refused(p: &Pgas) -> pgas::Result<bool> {
    if !hopper(p)? || p.n_pes() < 2 {
        return Ok(false);
    }
    // A shape the one kernel takes (the pieces case's last).
    let mut op = AllGatherMatmul::new(p, (128, 128, 128))?;
    Ok(matches!(op.set_gemm(GemmPath::PgasOneKernel),
        Err(e) if e.to_string().contains("share one GPU") && e.to_string().contains("Fix:")))
}

/// `AllGatherMatmul` on `pgas::gemm`: the path `new` starts on (on sm_90 with more than one PE
/// the one kernel up to 512 rows a PE, the path measured fastest there, cuBLAS above; cuBLAS on
/// one PE, below sm_90, for shards that are not whole tiles and where more than 2 PEs share a
/// GPU), then per shard and as one kernel fed by pushes (`set_gemm`), the same calls as the
/// cuBLAS path; below sm_90 both paths refused on every PE, the one kernel where PEs crowd a GPU.
fn ag_matmul_pgas_paths(p: &Pgas) -> CaseResult {
    let (mp, n, k) = (256, 128, 128);
    let bt: Vec<bf16> = (0..n * k).map(|i| small(i, 5)).collect();
    let refused = one_kernel_refused(p)?;
    let fastest = if hopper(p)? && p.n_pes() > 1 && !refused {
        GemmPath::PgasOneKernel
    } else {
        GemmPath::Cublas
    };
    let shapes = [
        ((mp, n, k), fastest),
        ((40, 72, 56), GemmPath::Cublas),
        ((1024, 64, 64), GemmPath::Cublas),
    ];
    for (shape, want) in shapes {
        let op = AllGatherMatmul::new(p, shape)?;
        ensure(op.gemm_path() == want, || {
            format!(
                "a new plan of {shape:?} took {:?}, not {want:?}",
                op.gemm_path()
            )
        })?;
    }
    let mut op = AllGatherMatmul::new(p, (mp, n, k))?;
    ag_calls(p, &mut op, &bt, &format!("the default ({fastest:?}): "))?;
    for path in [GemmPath::PgasPerShard, GemmPath::PgasOneKernel] {
        let mut op = AllGatherMatmul::new(p, (mp, n, k))?;
        if let Err(e) = op.set_gemm(path) {
            let crowded = refused && path == GemmPath::PgasOneKernel;
            ensure(
                crowded || !hopper(p)? && e.to_string().contains("sm_90a"),
                || format!("{path:?} was refused: {e}"),
            )?;
            continue;
        }
        ensure(op.gemm_path() == path, || {
            format!("set_gemm({path:?}) left {:?}", op.gemm_path())
        })?;
        ag_calls(p, &mut op, &bt, &format!("{path:?}: "))?;
    }
    Ok(())
}

/// The one kernel fed by pushes in pieces of K (`set_pieces`): the calls of [`ag_calls`] (every
/// element against the host, back-to-back calls reusing the words) with K split in 8, 1 (whole
/// shards) and 4 pieces on one plan, the count changed between calls (a piece's word keeps its
/// place); in 3 pieces of one K step each, with shards of 384 rows (no whole cluster tile);
/// in 2 pieces of 128-row shards. Then the refusals, each an `Err` on every PE that leaves the
/// plan as it was: a count that does not divide K / 64, 0, more than 16, counts that differ
/// between PEs, and `set_pieces` off the one-kernel path. Below sm_90, and where the one kernel
/// is refused (more than 2 PEs on a GPU), only the last runs.
fn ag_matmul_pieces(p: &Pgas) -> CaseResult {
    let (me, np) = (p.my_pe(), p.n_pes());
    let mut cublas = AllGatherMatmul::new(p, (128, 64, 128))?;
    cublas.set_gemm(GemmPath::Cublas)?;
    let e = cublas.set_pieces(2);
    ensure(
        matches!(&e, Err(e) if e.to_string().contains("set_gemm(GemmPath::PgasOneKernel) first")),
        || format!("set_pieces off the one-kernel path was not refused: {e:?}"),
    )?;
    ensure(cublas.pieces().is_none(), || {
        format!("the cuBLAS path reports {:?} pieces", cublas.pieces())
    })?;
    drop(cublas);
    if !hopper(p)? || one_kernel_refused(p)? {
        return Ok(());
    }
    for (mp, n, k, counts) in [
        (256, 64, 512, &[8, 1, 4][..]),
        (384, 64, 192, &[3][..]),
        (128, 128, 128, &[2][..]),
    ] {
        let bt: Vec<bf16> = (0..n * k).map(|i| small(i, 6)).collect();
        let mut op = AllGatherMatmul::new(p, (mp, n, k))?;
        op.set_gemm(GemmPath::PgasOneKernel)?;
        let default = DEFAULT_PIECES;
        ensure(op.pieces() == Some(default), || {
            format!(
                "set_gemm left {:?} pieces, not the default {default}",
                op.pieces()
            )
        })?;
        for &count in counts {
            op.set_pieces(count)?;
            ensure(op.pieces() == Some(count), || {
                format!("set_pieces({count}) left {:?}", op.pieces())
            })?;
            ag_calls(
                p,
                &mut op,
                &bt,
                &format!("{mp}x{n}x{k} in {count} pieces: "),
            )?;
        }
    }
    let (mp, n, k) = (128, 64, 128);
    let bt: Vec<bf16> = (0..n * k).map(|i| small(i, 7)).collect();
    let mut op = AllGatherMatmul::new(p, (mp, n, k))?;
    op.set_gemm(GemmPath::PgasOneKernel)?;
    op.set_pieces(2)?;
    for (count, says) in [
        (3, "Fix: a divisor of 2 up to 16"),
        (0, "Fix: a divisor of 2 up to 16"),
        (32, "Fix: a divisor of 2 up to 16"),
    ] {
        let e = op.set_pieces(count);
        ensure(matches!(&e, Err(e) if e.to_string().contains(says)), || {
            format!("{count} pieces of K = {k} were not refused with \"{says}\": {e:?}")
        })?;
    }
    if np > 1 {
        let e = op.set_pieces(1 + me % 2);
        ensure(
            matches!(&e, Err(e) if e.to_string().contains("pieces: PE 0 1, PE 1 2")),
            || format!("piece counts differing between PEs were not refused on PE {me}: {e:?}"),
        )?;
    }
    ensure(op.pieces() == Some(2), || {
        format!("a refused count changed the plan's to {:?}", op.pieces())
    })?;
    ag_calls(p, &mut op, &bt, "after the refused counts: ")
}

fn ag_matmul_bad_input(p: &Pgas) -> CaseResult {
    let (me, np) = (p.my_pe(), p.n_pes());
    // N differs between PEs (with one PE there is nothing to disagree with).
    if np > 1 {
        let e = AllGatherMatmul::new(p, (64, 64 + 64 * (me % 2), 64));
        ensure(
            matches!(&e, Err(e) if e.to_string().contains("N: PE 0 64, PE 1 128")),
            || format!("a shape differing between PEs was not refused on PE {me}: {e:?}"),
        )?;
    }
    let e = AllGatherMatmul::new(p, (64, 0, 64));
    ensure(
        matches!(&e, Err(e) if e.to_string().contains("N is 0")),
        || format!("N = 0 was not refused: {e:?}"),
    )?;
    let mut op = AllGatherMatmul::new(p, (64, 64, 64))?;
    let s = p.stream();
    let me = p.my_pe();
    let full: Vec<bf16> = (0..64 * np * 64).map(|i| small(i, 30)).collect();
    let host_bt: Vec<bf16> = (0..64 * 64).map(|i| small(i, 31)).collect();
    let want = host_nt(&full, &host_bt, (64 * np, 64, 64));
    let (shard, bt) = (
        s.clone_htod(&full[me * 64 * 64..(me + 1) * 64 * 64])?,
        s.clone_htod(&host_bt)?,
    );
    let mut c = s.alloc_zeros::<bf16>(64 * 64 * np + 1)?;
    let e = op.run(&mut c, &shard, &bt);
    ensure(matches!(e, Err(pgas::Error::LengthMismatch { .. })), || {
        format!("a C of the wrong size was not refused: {e:?}")
    })?;
    // The plan still works after the refused call (nothing was enqueued).
    let mut c = s.alloc_zeros::<bf16>(64 * 64 * np)?;
    op.run(&mut c, &shard, &bt)?;
    check("after a refused call", &s.clone_dtoh(&c)?, &want)?;
    if np > 1 {
        // A call on a stream under CUDA-graph capture is refused before anything is enqueued
        // (a replay would repeat the captured call number and not wait for the peers).
        s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        let e = op.run(&mut c, &shard, &bt);
        drop(s.end_capture(CUgraphInstantiate_flags(0))?);
        ensure(
            matches!(&e, Err(e) if e.to_string().contains("captured into a CUDA graph")),
            || format!("a call under graph capture was not refused: {e:?}"),
        )?;
        let mut c = s.alloc_zeros::<bf16>(64 * 64 * np)?;
        op.run(&mut c, &shard, &bt)?;
        check("after a refused capture", &s.clone_dtoh(&c)?, &want)?;
    }
    s.synchronize()?;
    Ok(())
}
