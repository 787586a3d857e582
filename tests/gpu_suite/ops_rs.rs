//! `pgas::ops::matmul_reduce_scatter`: every PE's rows of `sum over PEs of A_p Bt_pᵀ` against the
//! host, three calls in a row on one plan (the epochs; new inputs each call), four more enqueued
//! back to back with no host wait between them (the acknowledgements), at a shape of one
//! chunk per owner whose sizes are not tile multiples, at one of two chunks per owner and with 3
//! chunks asked for; and the refusals, on every PE, of shapes and chunk counts that do not divide,
//! shapes that differ between PEs, a heap too small and buffers of the wrong length. Inputs are
//! -1, 0 or 1, so every partial sum is a small integer, exact in bf16, and the results compare
//! exactly.

use crate::ops::hopper;
use crate::runner::{case, Case};
use crate::util::{check_eq, ensure, CaseResult};
use pgas::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use pgas::cudarc::driver::CudaStream;
use pgas::ops::matmul_reduce_scatter::{matmul_reduce_scatter, MatmulReduceScatter};
use pgas::ops::GemmPath;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("ops/matmul_reduce_scatter_matches_host", matches_host_case),
    case(
        "ops/matmul_reduce_scatter_refuses_bad_input",
        bad_input_case,
    ),
    case("ops/matmul_reduce_scatter_pgas_gemm", pgas_gemm_case),
    case("ops/matmul_reduce_scatter_default_path", default_path_case),
];

/// Element `i` of PE `pe`'s A (`which` 0) or Bt (`which` 1) in call `call`: -1, 0 or 1.
fn input(pe: usize, which: usize, call: usize, i: usize) -> f32 {
    ((i * 7 + pe * 5 + which * 3 + call * 11) % 3) as f32 - 1.0
}

/// PE `me`'s A (m x k) and Bt (n x k) of call `call`, on the GPU.
fn inputs_of(
    stream: &std::sync::Arc<CudaStream>, me: usize, call: usize, (m, n, k): (usize, usize, usize),
) -> pgas::Result<(CudaSlice<bf16>, CudaSlice<bf16>)> {
    let of = |which: usize, len: usize| -> Vec<bf16> {
        (0..len)
            .map(|i| bf16::from_f32(input(me, which, call, i)))
            .collect()
    };
    Ok((
        stream.clone_htod(&of(0, m * k))?,
        stream.clone_htod(&of(1, n * k))?,
    ))
}

fn host(pes: usize, me: usize, call: usize, (m, n, k): (usize, usize, usize)) -> Vec<bf16> {
    let mp = m / pes;
    let mut want = vec![0.0f32; mp * n];
    for q in 0..pes {
        for r in 0..mp {
            for c in 0..n {
                let row = me * mp + r;
                want[r * n + c] += (0..k)
                    .map(|x| input(q, 0, call, row * k + x) * input(q, 1, call, c * k + x))
                    .sum::<f32>();
            }
        }
    }
    want.into_iter().map(bf16::from_f32).collect()
}

/// One call of `op` on inputs `call`, checked against the host.
fn run_checked(
    p: &Pgas, op: &mut MatmulReduceScatter, (m, n, k): (usize, usize, usize), call: usize,
    what: &str,
) -> CaseResult {
    let (me, pes) = (p.my_pe(), p.n_pes());
    let stream = p.stream().clone();
    let (a, bt) = inputs_of(&stream, me, call, (m, n, k))?;
    let mut out = stream.alloc_zeros::<bf16>(m / pes * n)?;
    op.run(p, p.stream(), &mut out, &a, &bt)?;
    check_eq(
        &format!("{m} x {n} x {k}, {what}, call {call}"),
        &stream.clone_dtoh(&out)?,
        &host(pes, me, call, (m, n, k)),
    )
}

/// `set_gemm(GemmPath::PgasPerShard)` (the chunks' GEMMs by `pgas::gemm`) and
/// `set_gemm(GemmPath::PgasOneKernel)` (one kernel announcing each chunk as it finishes it):
/// exact against the host over three calls enqueued back to back, with one and with two chunks
/// per owner (chunks of 128 rows, and of 512 in clusters of two blocks); the one kernel after
/// calls by cuBLAS on the same plan; on a GPU that is not sm_90, and for chunks that are not
/// whole tiles, the same `Err` on every PE, after which the plan still runs its cuBLAS GEMM.
fn pgas_gemm_case(p: &Pgas) -> CaseResult {
    let (me, pes) = (p.my_pe(), p.n_pes());
    let stream = p.stream().clone();
    let hopper = hopper(p)?;
    let paths = [GemmPath::PgasPerShard, GemmPath::PgasOneKernel];
    for path in paths {
        for ((mp, n, k), splits) in [
            ((128, 256, 128), 1),
            ((256, 512, 192), 2),
            ((512, 256, 64), 1),
        ] {
            let m = mp * pes;
            let mut op = MatmulReduceScatter::with_splits(p, (m, n, k), Some(splits))?;
            match (op.set_gemm(p, path), hopper) {
                (Ok(()), true) => {}
                (Err(e), false) if e.to_string().contains("sm_90a") => {}
                (r, _) => {
                    return Err(format!("set_gemm({path:?}) on sm_90 = {hopper}: {r:?}").into())
                }
            }
            // Three calls with no host wait between them: the chunks' words and the
            // acknowledgements carry each call's number.
            let calls = 20..23;
            let mut outs = Vec::new();
            let mut inputs = Vec::new();
            for call in calls.clone() {
                inputs.push(inputs_of(&stream, me, call, (m, n, k))?);
                outs.push(stream.alloc_zeros::<bf16>(mp * n)?);
            }
            for ((a, bt), out) in inputs.iter().zip(&mut outs) {
                op.run(p, p.stream(), out, a, bt)?;
            }
            for (call, out) in calls.zip(&outs) {
                check_eq(
                    &format!("{m} x {n} x {k} a PE by pgas::gemm ({path:?}), call {call}"),
                    &stream.clone_dtoh(out)?,
                    &host(pes, me, call, (m, n, k)),
                )?;
            }
            if path == GemmPath::PgasOneKernel {
                // cuBLAS between runs of the one kernel: the words keep their counts, and
                // the kernel's next call must still wait for its own.
                op.set_gemm(p, GemmPath::Cublas)?;
                run_checked(p, &mut op, (m, n, k), 24, "cuBLAS after the one kernel")?;
                if hopper {
                    op.set_gemm(p, path)?;
                }
                run_checked(p, &mut op, (m, n, k), 25, "the one kernel again")?;
            }
        }
    }
    // Chunks of 96 rows: refused everywhere, the plan unchanged.
    let mut op = MatmulReduceScatter::with_splits(p, (96 * pes, 64, 64), Some(1))?;
    let words = if hopper {
        "not a multiple of 128"
    } else {
        "sm_90a"
    };
    for path in paths {
        let e = op.set_gemm(p, path);
        ensure(
            e.as_ref().is_err_and(|e| e.to_string().contains(words)),
            || {
                format!(
                    "set_gemm({path:?}) on 96-row chunks: {e:?}, expected an Err naming {words:?}"
                )
            },
        )?;
    }
    run_checked(
        p,
        &mut op,
        (96 * pes, 64, 64),
        30,
        "96-row chunks by cuBLAS after the refusals",
    )
}

/// The path `new` starts on, by rows a PE: on sm_90 with more than one PE, the pgas GEMM per
/// chunk up to 1024 rows, the one kernel at 2048, cuBLAS above (the paths measured fastest at
/// N = K = 8192); cuBLAS on one PE, below sm_90, and where the chunks are not whole tiles.
/// Each plan's first call checked against the host.
fn default_path_case(p: &Pgas) -> CaseResult {
    let pes = p.n_pes();
    let pgas_runs = pes > 1 && hopper(p)?;
    let (n, k) = (128, 64);
    for (mp, fastest) in [
        (256, GemmPath::PgasPerShard),
        (2048, GemmPath::PgasOneKernel),
        (4096, GemmPath::Cublas),
        (96, GemmPath::Cublas),
    ] {
        let want = if pgas_runs { fastest } else { GemmPath::Cublas };
        let m = mp * pes;
        let mut op = MatmulReduceScatter::new(p, (m, n, k))?;
        ensure(op.gemm_path() == want, || {
            format!(
                "a new plan of {mp} rows a PE took {:?}, not {want:?}",
                op.gemm_path()
            )
        })?;
        run_checked(
            p,
            &mut op,
            (m, n, k),
            40,
            &format!("the default ({want:?})"),
        )?;
    }
    Ok(())
}

fn matches_host_case(p: &Pgas) -> CaseResult {
    let (me, pes) = (p.my_pe(), p.n_pes());
    let stream = p.stream().clone();
    // 96 rows a PE, N = 200, K / P = 72: one chunk per owner, nothing a tile multiple; 2048
    // rows a PE: two chunks per owner; and 96 rows in 3 chunks of 32 (`with_splits`).
    for ((mp, n, k), splits) in [
        ((96, 200, 72), None),
        ((2048, 64, 32), None),
        ((96, 200, 72), Some(3)),
    ] {
        let m = mp * pes;
        let mut op = MatmulReduceScatter::with_splits(p, (m, n, k), splits)?;
        let want = splits.unwrap_or(if mp == 2048 { 2 } else { 1 });
        ensure(op.splits() == want, || {
            format!("{} chunks per owner at {mp} rows, not {want}", op.splits())
        })?;
        let mut out = stream.alloc_zeros::<bf16>(mp * n)?;
        for call in 0..3 {
            let (a, bt) = inputs_of(&stream, me, call, (m, n, k))?;
            op.run(p, p.stream(), &mut out, &a, &bt)?;
            let got = stream.clone_dtoh(&out)?;
            check_eq(
                &format!("{m} x {n} x {k} a PE, call {call}"),
                &got,
                &host(pes, me, call, (m, n, k)),
            )?;
        }
    }
    // Back to back: the calls above wait on the host after each, so a source never copies into
    // a slot its owner may still be reading. Here 4 calls with new inputs are enqueued with no
    // host wait between them, each into its own output, checked only at the end (the
    // acknowledgements order the slots' reuse), with 2 chunks per owner.
    let (mp, n, k) = (256, 64, 64);
    let m = mp * pes;
    let mut op = MatmulReduceScatter::with_splits(p, (m, n, k), Some(2))?;
    let mut inputs = Vec::new();
    let mut outs = Vec::new();
    for call in 10..14 {
        inputs.push(inputs_of(&stream, me, call, (m, n, k))?);
        outs.push(stream.alloc_zeros::<bf16>(mp * n)?);
    }
    for (out, (a, bt)) in outs.iter_mut().zip(&inputs) {
        op.run(p, p.stream(), out, a, bt)?;
    }
    for (call, out) in (10..14).zip(&outs) {
        check_eq(
            &format!("{m} x {n} x {k} a PE, back-to-back call {call}"),
            &stream.clone_dtoh(out)?,
            &host(pes, me, call, (m, n, k)),
        )?;
    }
    drop(op);
    // The one-call form.
    let (m, n, k) = (64 * pes, 16, 8);
    let (a, bt) = inputs_of(&stream, me, 5, (m, n, k))?;
    let mut out = stream.alloc_zeros::<bf16>(64 * n)?;
    matmul_reduce_scatter(p, &mut out, &a, &bt, (m, n, k))?;
    check_eq(
        "the one-call form",
        &stream.clone_dtoh(&out)?,
        &host(pes, me, 5, (m, n, k)),
    )
}

fn bad_input_case(p: &Pgas) -> CaseResult {
    let (me, pes) = (p.my_pe(), p.n_pes());
    let expect = |what: &str, r: pgas::Result<MatmulReduceScatter>, words: &[&str]| match r {
        Err(e) if words.iter().all(|w| e.to_string().contains(w)) => Ok(()),
        Err(e) => Err(format!("{what}: the error does not say {words:?}: {e}")),
        Ok(_) => Err(format!("{what}: accepted")),
    };
    expect(
        "N = 100",
        MatmulReduceScatter::new(p, (64 * pes, 100, 64)),
        &["N = 100 is not a positive multiple of 8"],
    )?;
    if pes > 1 {
        expect(
            "M not divisible by P",
            MatmulReduceScatter::new(p, (64 * pes + 1, 64, 64)),
            &["is not a positive multiple of the"],
        )?;
        let n = if me == 0 { 64 } else { 72 };
        expect(
            "N differing between PEs",
            MatmulReduceScatter::new(p, (64 * pes, n, 64)),
            &["N: PE 0 64, PE 1 72", "nothing was launched"],
        )?;
    }
    expect(
        "5 chunks of 96 rows",
        MatmulReduceScatter::with_splits(p, (96 * pes, 64, 64), Some(5)),
        &["5 chunks per owner do not divide its M / P = 96 rows"],
    )?;
    expect(
        "a staging buffer over the heap",
        MatmulReduceScatter::new(p, ((1 << 20) * pes, 65536, 64)),
        &["symmetric heap"],
    )?;
    let mut op = MatmulReduceScatter::new(p, (64 * pes, 64, 64))?;
    let stream = p.stream();
    // Inputs of call 5 of `input`, so that the calls after the refusals can be checked.
    let host_a: Vec<bf16> = (0..64 * pes * 64)
        .map(|i| bf16::from_f32(input(me, 0, 5, i)))
        .collect();
    let host_bt: Vec<bf16> = (0..64 * 64)
        .map(|i| bf16::from_f32(input(me, 1, 5, i)))
        .collect();
    let want = host(pes, me, 5, (64 * pes, 64, 64));
    let a = stream.clone_htod(&host_a)?;
    let bt = stream.alloc_zeros::<bf16>(63 * 64)?;
    let mut out = stream.alloc_zeros::<bf16>(64 * 64)?;
    match op.run(p, p.stream(), &mut out, &a, &bt) {
        Err(e) if e.to_string().contains("Bt (N x K/P) has 4032 elements") => {}
        other => return Err(format!("a Bt of 63 rows was not refused: {other:?}").into()),
    }
    if pes > 1 {
        // A call on a stream under CUDA-graph capture is refused before anything is enqueued
        // (a replay would repeat the captured call number and not wait for the peers).
        let bt = stream.clone_htod(&host_bt)?;
        stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        let r = op.run(p, p.stream(), &mut out, &a, &bt);
        drop(stream.end_capture(CUgraphInstantiate_flags(0))?);
        match r {
            Err(e) if e.to_string().contains("captured into a CUDA graph") => {}
            other => {
                return Err(format!("a call under graph capture was not refused: {other:?}").into())
            }
        }
        // The plan still works after the refused call.
        op.run(p, p.stream(), &mut out, &a, &bt)?;
        check_eq("after a refused capture", &stream.clone_dtoh(&out)?, &want)?;
    }
    Ok(())
}
