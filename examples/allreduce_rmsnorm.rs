//! The step between two layers of a tensor-parallel decoder: the all-reduce of the row-parallel
//! GEMM's partial sums, the residual add and RMSNorm, fused into one kernel
//! (`pgas::ops::AllReduceRmsNorm`, `docs/ops.md`). Each PE holds partial sums `x`
//! (tokens x hidden bf16), the residual stream (the same on every PE) and the norm's weight;
//! after the call every PE's residual is `sum(x) + residual` and `out` its RMSNorm.
//!
//! Checks every element against the host (`ops::allreduce_rmsnorm::reference`) at 1, 7, 64 and
//! 1000 tokens, one-shot, two-shot and low-latency, over three calls each (the residual carries
//! over), then times 1 and 64 tokens (the automatic choice and low-latency) eagerly and
//! replayed from a CUDA graph. Prints one `ok` line per PE.
//!
//! ```text
//! pgas-run -n 2 -- target/release/examples/allreduce_rmsnorm [hidden]
//! ```

use pgas::coll::Algorithm;
use pgas::cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use pgas::ops::allreduce_rmsnorm::{reference, within_tolerance};
use pgas::ops::AllReduceRmsNorm;
use pgas::prelude::*;

const TOKENS: [usize; 4] = [1, 7, 64, 1000];
const EPS: f32 = 1e-5;

/// A small value exact in bf16, different per element, PE and salt.
fn val(i: usize, pe: usize, salt: usize) -> bf16 {
    bf16::from_f32(((i * 7 + pe * 13 + salt * 5) % 17) as f32 / 8.0 - 1.0)
}

fn fail(me: usize, msg: String) -> ! {
    eprintln!("FAIL PE {me}: {msg}");
    std::process::exit(1);
}

// One function on purpose: an example reads top to bottom as the program a user would write.
fn main() -> pgas::Result<()> {
    let hidden: usize = std::env::args()
        .nth(1)
        .map_or(8192, |a| a.parse().expect("hidden: a number"));
    let pgas = pgas::init()?;
    let (me, n) = (pgas.my_pe(), pgas.n_pes());
    let max = *TOKENS.iter().max().unwrap();
    let mut op = AllReduceRmsNorm::new(&pgas, hidden, max, EPS)?;
    op.prewarm()?;
    let stream = pgas.cuda().new_stream()?;
    let weight_h: Vec<bf16> = (0..hidden)
        .map(|i| bf16::from_f32(1.0 + (i % 5) as f32 / 8.0))
        .collect();
    let weight = pgas.alloc_from(&weight_h)?;
    // Low latency where every PE's row fits a block's shared memory.
    let ll = op.low_latency_available();
    let algs = [
        Algorithm::OneShot,
        Algorithm::TwoShot,
        Algorithm::LowLatency,
    ];
    for tokens in TOKENS {
        for alg in algs
            .into_iter()
            .filter(|&a| ll || a != Algorithm::LowLatency)
        {
            let len = tokens * hidden;
            let mut res_h: Vec<bf16> = (0..len).map(|i| val(i, 0, 9)).collect();
            let mut residual = pgas.alloc_from(&res_h)?;
            let mut out = pgas.alloc::<bf16>(len)?;
            for call in 0..3 {
                let parts: Vec<Vec<bf16>> = (0..n)
                    .map(|pe| (0..len).map(|i| val(i, pe, call)).collect())
                    .collect();
                let x = pgas.alloc_from(&parts[me])?;
                pgas.barrier_all()?;
                op.run(&x, &mut residual, &weight, &mut out, alg.on(&stream))?;
                stream.synchronize()?;
                let refs: Vec<&[bf16]> = parts.iter().map(Vec::as_slice).collect();
                let (r_want, y_want) = reference(&refs, &res_h, &weight_h, hidden, EPS);
                let (r_got, y_got) = (residual.to_vec()?, out.to_vec()?);
                let at = format!("{tokens} tokens, {alg:?}, call {call}");
                if let Some(i) = (0..len).find(|&i| r_got[i].to_bits() != r_want[i].to_bits()) {
                    fail(
                        me,
                        format!("{at}: residual[{i}] {} != {}", r_got[i], r_want[i]),
                    );
                }
                if let Some(i) = (0..len).find(|&i| !within_tolerance(y_got[i], y_want[i])) {
                    fail(me, format!("{at}: out[{i}] {} != {}", y_got[i], y_want[i]));
                }
                res_h = r_want;
                drop(x);
                pgas.barrier_all()?;
            }
        }
    }
    // Timing: 1 and 64 tokens, eager and from a CUDA graph of ITERS calls.
    const ITERS: usize = 50;
    for (tokens, alg) in [1, 64]
        .into_iter()
        .flat_map(|t| [(t, Algorithm::Auto), (t, Algorithm::LowLatency)])
        .filter(|&(_, a)| ll || a != Algorithm::LowLatency)
    {
        let len = tokens * hidden;
        let x = pgas.alloc_from(&(0..len).map(|i| val(i, me, 1)).collect::<Vec<_>>())?;
        let mut residual = pgas.alloc::<bf16>(len)?;
        let mut out = pgas.alloc::<bf16>(len)?;
        let mut us = [0.0f64; 2];
        for (mode, slot) in us.iter_mut().enumerate() {
            let graph = if mode == 1 {
                stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
                let mut r = Ok(Algorithm::Auto);
                for _ in 0..ITERS {
                    r = r.and(op.run(&x, &mut residual, &weight, &mut out, alg.on(&stream)));
                }
                let g = stream.end_capture(CUgraphInstantiate_flags(0))?;
                r?;
                g
            } else {
                None
            };
            let mut run = |op: &mut AllReduceRmsNorm| -> pgas::Result<()> {
                match &graph {
                    Some(g) => g.launch()?,
                    None => {
                        for _ in 0..ITERS {
                            op.run(&x, &mut residual, &weight, &mut out, alg.on(&stream))?;
                        }
                    }
                }
                Ok(())
            };
            pgas.barrier_all()?;
            run(&mut op)?;
            stream.synchronize()?;
            pgas.barrier_all()?;
            let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
            let start = stream.record_event(flags)?;
            run(&mut op)?;
            let end = stream.record_event(flags)?;
            end.synchronize()?;
            *slot = start.elapsed_ms(&end)? as f64 * 1000.0 / ITERS as f64;
        }
        if me == 0 {
            println!(
                "allreduce_rmsnorm: {tokens} x {hidden} bf16 on {n} PE(s): {:.2} us eager, \
                 {:.2} us graph ({alg:?}: {:?})",
                us[0],
                us[1],
                if alg == Algorithm::Auto {
                    op.algorithm_for(tokens)
                } else {
                    alg
                }
            );
        }
        // Every PE is done with x before any PE frees it.
        pgas.barrier_all()?;
    }
    println!(
        "PE {me}/{n}: all-reduce + residual + RMSNorm of {:?} tokens x {hidden} match the host, ok",
        TOKENS
    );
    Ok(())
}
