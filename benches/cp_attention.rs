//! Context-parallel attention across PEs (issue 46's item 2): one sequence of `T` tokens a PE,
//! 32 query and 8 key heads of 128 (grouped-query), bf16, causal and not, computed three ways on
//! every PE in the same job, each the median of 10 after 3 (CUDA events on the pgas stream, a
//! barrier before each):
//! - `pgas::ops::RingAttention`: K/V round the ring by put + signal beside the attention kernel
//!   (zigzag slices when causal);
//! - `pgas::ops::UlyssesAttention`: all-to-alls from a sequence split to a head split and back;
//! - NCCL's all-gather of K and V (where NCCL loads), then `pgas::attention` over the gathered
//!   keys: the same kernel, so the difference is the communication.
//!
//! `scripts/cp_attention_sdpa.py` times the same with torch: NCCL's all-gather of K/V, then
//! `scaled_dot_product_attention` on cuDNN, one process a GPU (NCCL refuses two on one GPU, so
//! only where each PE has a GPU of its own). Its speed across GPUs belongs to issue 49; on one GPU
//! the PEs share it and the times say nothing of the forms' overlap.
//!
//! Where NCCL loads, Ulysses' O (and the ring's without masking, where its slices are the same)
//! is checked against the all-gather form's (within bf16 rounding of the merged partials), so a
//! wrong result fails the run. Run: `pgas-run -n P cp_attention` (sm_90a).

mod common;

use common::nccl::{all_gather_bf16, nccl_comm};
use common::{bf16_rel_diff, median_ms, report, BenchResult, Figure};
use pgas::attention::reference::values;
use pgas::attention::{Attention, AttentionParams};
use pgas::ops::{RingAttention, UlyssesAttention};
use pgas::prelude::*;

const BENCH: &str = "cp_attention";
/// Tokens a PE.
const TOKENS: [usize; 2] = [4096, 16384];
const HEADS: (usize, usize, usize) = (32, 8, 128);
const RUNS: (usize, usize) = (3, 10);
/// The largest difference of a form's O from the all-gather form's, relative to its largest
/// value: both merge bf16 partial results.
const MAX_REL_DIFF: f64 = 2e-2;

/// This PE's rows of a whole `[tokens][heads][d]` tensor, for the token ranges of its slice.
fn rows(x: &[bf16], width: usize, ranges: &[std::ops::Range<usize>]) -> Vec<bf16> {
    ranges
        .iter()
        .flat_map(|r| x[r.start * width..r.end * width].iter().copied())
        .collect()
}

fn main() -> BenchResult<()> {
    if !common::gpu_present() {
        println!("{BENCH}: skipped: no GPU");
        return Ok(());
    }
    let p = pgas::init()?;
    let (me, pes) = (p.my_pe(), p.n_pes());
    if p.compute_capability()?.0 != 9 {
        println!("{BENCH}: skipped: the attention kernel needs sm_90a");
        return Ok(());
    }
    let machine = format!("{} x{pes} PE", p.cuda().name()?);
    let s = p.stream().clone();
    let nccl = nccl_comm(&p)?;
    let (hq, hkv, d) = HEADS;
    let timed = |run: &mut dyn FnMut() -> BenchResult<()>| {
        median_ms(&s, RUNS, || Ok(p.barrier_all()?), run)
    };
    let mut figs = Vec::new();
    let mut wrong = Vec::new();
    for t in TOKENS {
        for causal in [false, true] {
            let params = AttentionParams {
                heads_q: hq,
                heads_kv: hkv,
                head_dim: d,
                causal,
                scale: None,
            };
            let total = t * pes;
            let (q, k, v) = (
                values(total * hq * d, 1),
                values(total * hkv * d, 2),
                values(total * hkv * d, 3),
            );
            let name = |form: &str| {
                let mask = if causal { "causal" } else { "full" };
                format!("{t}x{pes} {mask} {form}")
            };
            // The all-gather form: contiguous slices; this PE's queries see the keys of the
            // slices up to its own (causal, aligned to the end of that range) or all of them.
            let mine = me * t..(me + 1) * t;
            let mine = std::slice::from_ref(&mine);
            let end = if causal { (me + 1) * t } else { total };
            let gathered_plan = Attention::with_key_ranges(&p, params, &[t], &[(0, end)])?;
            let (lq, lk, lv) = (
                s.clone_htod(&rows(&q, hq * d, mine))?,
                s.clone_htod(&rows(&k, hkv * d, mine))?,
                s.clone_htod(&rows(&v, hkv * d, mine))?,
            );
            let mut o = s.alloc_zeros::<bf16>(t * hq * d)?;
            let mut lse = s.alloc_zeros::<f32>(t * hq)?;
            let (mut gk, mut gv) = (
                s.alloc_zeros::<bf16>(total * hkv * d)?,
                s.alloc_zeros::<bf16>(total * hkv * d)?,
            );
            let reference = match &nccl {
                Some(c) => {
                    let mut all_gather = || -> BenchResult<()> {
                        all_gather_bf16(&p, c, &mut gk, &lk)?;
                        all_gather_bf16(&p, c, &mut gv, &lv)?;
                        gathered_plan.run(&p, &mut o, &mut lse, &lq, &gk, &gv, false)?;
                        Ok(())
                    };
                    let ms = timed(&mut all_gather)?;
                    figs.push(Figure::new(
                        &name("nccl_ag_ms"),
                        ms,
                        "ms",
                        "NCCL all-gather of K, V + pgas::attention",
                    ));
                    Some(s.clone_dtoh(&o)?)
                }
                None => None,
            };
            // Ulysses: contiguous slices too.
            let mut ulysses = UlyssesAttention::new(&p, params, t)?;
            let ms = timed(&mut || Ok(ulysses.run(&p, &mut o, &lq, &lk, &lv)?))?;
            figs.push(Figure::new(
                &name("ulysses_ms"),
                ms,
                "ms",
                "UlyssesAttention",
            ));
            if let Some(want) = &reference {
                let diff = bf16_rel_diff(&s.clone_dtoh(&o)?, want);
                if diff.is_nan() || diff > MAX_REL_DIFF {
                    wrong.push(format!("{}: {diff:.4}", name("ulysses")));
                }
            }
            // The ring: zigzag slices when causal, so its O is compared in its own row order.
            let mut ring = RingAttention::new(&p, params, t)?;
            let zigzag = ring.slice_of(me);
            let (rq, rk, rv) = (
                s.clone_htod(&rows(&q, hq * d, &zigzag))?,
                s.clone_htod(&rows(&k, hkv * d, &zigzag))?,
                s.clone_htod(&rows(&v, hkv * d, &zigzag))?,
            );
            let ms = timed(&mut || Ok(ring.run(&p, &mut o, &rq, &rk, &rv)?))?;
            figs.push(Figure::new(&name("ring_ms"), ms, "ms", "RingAttention"));
            // Without masking the ring's slices are the contiguous ones (its causal, zigzag rows
            // are checked against one-PE attention by the GPU suite).
            if let (Some(want), false) = (&reference, causal) {
                let diff = bf16_rel_diff(&s.clone_dtoh(&o)?, want);
                if diff.is_nan() || diff > MAX_REL_DIFF {
                    wrong.push(format!("{}: {diff:.4}", name("ring")));
                }
            }
        }
    }
    p.barrier_all()?;
    if me == 0 {
        report(BENCH, &machine, &figs);
    }
    if !wrong.is_empty() {
        eprintln!(
            "{BENCH}: PE {me}: results off the all-gather form's: {}",
            wrong.join(", ")
        );
        std::process::exit(1);
    }
    Ok(())
}
