//! Long-context attention across PEs (context parallel): one causal sequence of 4096 tokens a PE,
//! 16 query and 8 key heads of 128 (grouped-query), each PE holding a slice of it, computed two
//! ways with `pgas::ops`:
//! - `RingAttention`: K/V blocks travel round the ring (put + signal on a copy stream) while
//!   each PE runs the attention kernel on the block it holds; partial outputs merge by their
//!   log-sum-exp. Causal slices are zigzag (chunks `r` and `2P-1-r`), so every PE does the
//!   same work.
//! - `UlyssesAttention`: all-to-alls trade the sequence split for a head split, each PE runs
//!   the whole sequence for its heads, and all-to-alls trade back.
//!
//! Every PE checks its rows of both against `pgas::attention` over the whole sequence on one
//! PE, then times each form (median of 5). Needs sm_90a (H100, H200); elsewhere it says so.
//!
//! ```text
//! pgas-run -n 4 -- target/release/examples/long_context_attention
//! ```

use pgas::attention::reference::values;
use pgas::attention::{Attention, AttentionParams};
use pgas::ops::{RingAttention, UlyssesAttention};
use pgas::prelude::*;

const TOKENS: usize = 4096;
const PARAMS: AttentionParams = AttentionParams {
    heads_q: 16,
    heads_kv: 8,
    head_dim: 128,
    causal: true,
    scale: None,
};

/// This PE's rows of a whole `[tokens][heads][128]` tensor: the token ranges of its slice.
fn rows(x: &[bf16], heads: usize, ranges: &[std::ops::Range<usize>]) -> Vec<bf16> {
    let w = heads * PARAMS.head_dim;
    ranges
        .iter()
        .flat_map(|r| x[r.start * w..r.end * w].iter().copied())
        .collect()
}

/// The median of 5 timed runs of `f` (after one untimed), in ms, with every PE in step.
fn median_ms(pgas: &Pgas, mut f: impl FnMut() -> pgas::Result<()>) -> pgas::Result<f64> {
    let mut ms = Vec::new();
    for rep in 0..6 {
        pgas.barrier_all()?;
        let start = std::time::Instant::now();
        f()?;
        pgas.stream().synchronize()?;
        if rep > 0 {
            ms.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let (me, pes) = (pgas.my_pe(), pgas.n_pes());
    let s = pgas.stream().clone();
    let (major, _) = pgas.compute_capability()?;
    if major != 9 {
        println!(
            "PE {me}: skipped: needs compute capability 9.0 (sm_90a), this GPU is {major}.x, ok"
        );
        return Ok(());
    }
    let fail = |what: String| -> ! {
        eprintln!("PE {me}: {what}");
        std::process::exit(1)
    };
    let (hq, hkv, d) = (PARAMS.heads_q, PARAMS.heads_kv, PARAMS.head_dim);

    // The whole sequence, the same on every PE, and its attention on this PE alone.
    let total = TOKENS * pes;
    let (q, k, v) = (
        values(total * hq * d, 1),
        values(total * hkv * d, 2),
        values(total * hkv * d, 3),
    );
    let whole = Attention::fixed(&pgas, PARAMS, 1, (total, total))?;
    let mut whole_o = s.alloc_zeros::<bf16>(total * hq * d)?;
    let mut lse = s.alloc_zeros::<f32>(total * hq)?;
    let (dq, dk, dv) = (s.clone_htod(&q)?, s.clone_htod(&k)?, s.clone_htod(&v)?);
    let mut one_pe = || whole.run(&pgas, &mut whole_o, &mut lse, &dq, &dk, &dv, false);
    one_pe()?;
    let whole_ms = median_ms(&pgas, &mut one_pe)?;
    let want = s.clone_dtoh(&whole_o)?;

    let mut ring = RingAttention::new(&pgas, PARAMS, TOKENS)?;
    let mut ulysses = UlyssesAttention::new(&pgas, PARAMS, TOKENS)?;
    let zigzag = ring.slice_of(me);
    // All-to-all form: the contiguous slice.
    let contiguous = me * TOKENS..(me + 1) * TOKENS;
    let mut o = s.alloc_zeros::<bf16>(TOKENS * hq * d)?;
    let mut report = Vec::new();
    for (form, ranges) in [
        ("ring", &zigzag[..]),
        ("ulysses", std::slice::from_ref(&contiguous)),
    ] {
        let (lq, lk, lv) = (
            s.clone_htod(&rows(&q, hq, ranges))?,
            s.clone_htod(&rows(&k, hkv, ranges))?,
            s.clone_htod(&rows(&v, hkv, ranges))?,
        );
        let mut call = || match form {
            "ring" => ring.run(&pgas, &mut o, &lq, &lk, &lv),
            _ => ulysses.run(&pgas, &mut o, &lq, &lk, &lv),
        };
        let ms = median_ms(&pgas, &mut call)?;
        // The last call's O; bf16 partial outputs merged in f32: within 0.02 + 2% of one PE's.
        let got = s.clone_dtoh(&o)?;
        for (i, (g, w)) in got.iter().zip(rows(&want, hq, ranges)).enumerate() {
            let (g, w) = (g.to_f32(), w.to_f32());
            if (g - w).abs() > 0.02 + 0.02 * w.abs() {
                fail(format!(
                    "{form}: O[{i}] = {g}, the one-PE attention says {w}"
                ));
            }
        }
        // The causal FLOPs of this PE's share of the whole sequence.
        let tflops =
            2.0 * (total * total) as f64 * (hq * d) as f64 / pes as f64 / (ms * 1e-3) / 1e12;
        report.push(format!("{form} {ms:.3} ms ({tflops:.0} TFLOP/s a PE)"));
    }
    println!(
        "PE {me}: {total} causal tokens over {pes} PEs, both forms match one-PE attention; {}; \
         the whole sequence on one PE {whole_ms:.3} ms, ok",
        report.join(", ")
    );
    Ok(())
}
