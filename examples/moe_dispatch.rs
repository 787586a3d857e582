//! MoE token dispatch and combine at DeepSeek-V3 sizes: every PE routes up to 4096 tokens of
//! 7168 `bf16` to its top 8 of `8 * n_pes` experts (8 per PE) with `pgas::ops::moe`. Dispatch
//! sends each token once to each PE holding one of its experts (the counts are exchanged on the
//! GPU); a pgas kernel plays the experts (expert `e` scales its rows by `(e + 1) / 4`), reading
//! its rows through the dispatcher's per-expert row lists; combine brings the outputs back and
//! sums them with the routing weights. Every PE checks what it received and its combined tokens
//! against the host (`pgas::ops::moe::reference`), for a skewed routing (experts with no token,
//! unused slots, tokens routed nowhere, a different token count on each PE) and then a uniform
//! one through the same buffers.
//!
//! ```text
//! pgas-run -n 2 -- target/release/examples/moe_dispatch
//! ```

use pgas::ops::moe::reference::{experts, x_value};
use pgas::ops::moe::{reference, MoeConfig, MoeDispatcher};
use pgas::prelude::*;

const CFG: MoeConfig = MoeConfig {
    max_tokens: 4096,
    hidden: 7168,
    top_k: 8,
    experts_per_pe: 8,
};

// One function on purpose: an example reads top to bottom as the program a user would write.
fn main() -> pgas::Result<()> {
    // Room for the dispatcher's buffers on up to 8 PEs (MoeConfig::symmetric_bytes).
    let pgas = pgas::builder().heap_size(2 << 30).init()?;
    let (me, n) = (pgas.my_pe(), pgas.n_pes());
    let mut moe = MoeDispatcher::new(&pgas, CFG)?;
    moe.prewarm()?;
    let h = CFG.hidden;
    let stream = pgas.stream().clone();
    let mut out = stream.alloc_zeros::<bf16>(CFG.max_tokens * h)?;
    for (round, skewed) in [(0u64, true), (1, false)] {
        // A different token count on each PE in the skewed round.
        let tokens_of = |pe: usize| CFG.max_tokens - if skewed { 96 * pe % 1000 } else { 0 };
        let routings: Vec<(Vec<i32>, Vec<f32>)> = (0..n)
            .map(|pe| {
                reference::sample_routing(&CFG, n, tokens_of(pe), round * 100 + pe as u64, skewed)
            })
            .collect();
        let tokens = tokens_of(me);
        let x_host: Vec<bf16> = (0..tokens * h).map(|i| x_value(me, i / h, i % h)).collect();
        let x = stream.clone_htod(&x_host)?;
        let routing = moe.route(&routings[me].0, &routings[me].1)?;
        moe.dispatch(&x, &routing)?;
        let counts = moe.recv_counts()?;

        let idx: Vec<&[i32]> = routings.iter().map(|r| r.0.as_slice()).collect();
        let wts: Vec<&[f32]> = routings.iter().map(|r| r.1.as_slice()).collect();
        let want = reference::dispatch(&CFG, &idx, &wts);
        let mine = &want[me];
        let rows = mine.src.len();
        let fail = |what: String| -> pgas::Result<()> {
            eprintln!("PE {me}: round {round}: {what}");
            std::process::exit(1);
        };
        if counts.rows != rows || counts.expert_offsets != mine.expert_offsets {
            fail(format!(
                "received {} rows and expert offsets {:?}, expected {rows} and {:?}",
                counts.rows, counts.expert_offsets, mine.expert_offsets
            ))?;
        }
        let k = CFG.top_k;
        let got_src = moe.recv_src().view(0..2 * rows.max(1))?.to_vec()?;
        let got_idx = moe.recv_topk_idx().view(0..k * rows.max(1))?.to_vec()?;
        let got_w = moe.recv_topk_weights().view(0..k * rows.max(1))?.to_vec()?;
        let got_x = moe.recv_x().view(0..h * rows.max(1))?.to_vec()?;
        let got_rows = moe.expert_rows().view(0..counts.pairs.max(1))?.to_vec()?;
        for (row, &(s, t)) in mine.src.iter().enumerate() {
            if (got_src[2 * row] as usize, got_src[2 * row + 1] as usize) != (s, t) {
                fail(format!(
                    "row {row} came from {:?}, expected {:?}",
                    &got_src[2 * row..2 * row + 2],
                    (s, t)
                ))?;
            }
            let slots = row * k..(row + 1) * k;
            let w_bits: Vec<u32> = got_w[slots.clone()].iter().map(|w| w.to_bits()).collect();
            if got_idx[slots.clone()] != mine.idx[slots.clone()]
                || w_bits != mine.weight_bits[slots]
            {
                fail(format!(
                    "row {row} (PE {s} token {t}): wrong experts or weights"
                ))?;
            }
            if let Some(c) = (0..h).find(|&c| got_x[row * h + c] != x_value(s, t, c)) {
                fail(format!(
                    "row {row} (PE {s} token {t}) differs at column {c}"
                ))?;
            }
        }
        if got_rows[..counts.pairs] != mine.expert_rows[..] {
            fail("the per-expert row lists differ".into())?;
        }

        let offsets: Vec<i32> = counts.expert_offsets.iter().map(|&o| o as i32).collect();
        let offsets = stream.clone_htod(&offsets)?;
        // Sized exactly: recv_counts was read, so combine checks against this call's pairs.
        let mut expert_out = stream.alloc_zeros::<bf16>(counts.pairs.max(1) * h)?;
        let warps = counts.pairs.clamp(1, 132 * 16) as u32;
        experts::launch(
            &pgas,
            LaunchConfig::blocks(warps.div_ceil(16), 512),
            &mut expert_out,
            moe.recv_x(),
            moe.expert_rows(),
            &offsets,
            h as u32,
        )?;
        moe.combine(&expert_out, &routing, &mut out)?;
        let got = stream.clone_dtoh(&out.slice(0..tokens * h))?;
        // The experts' outputs, as the kernel computes them, for the reference.
        let expert_row = |d: usize, p: usize| {
            let r = &want[d];
            let e = r.expert_offsets.iter().rposition(|&o| o <= p).unwrap_or(0);
            let (s, t) = r.src[r.expert_rows[p] as usize];
            let scale = (e + 1) as f32 * 0.25;
            (0..h)
                .map(|c| bf16::from_f32(x_value(s, t, c).to_f32() * scale))
                .collect()
        };
        let want_out = reference::combine(&CFG, me, tokens, &want, expert_row);
        // One bf16 step of slack per element: the GPU rounds as the reference does, but a
        // contracted multiply-add is allowed to differ in the last bit.
        if let Some(i) = (0..tokens * h).find(|&i| {
            let (g, w) = (got[i].to_f32(), want_out[i].to_f32());
            (g - w).abs() > w.abs() / 128.0 + 1e-6
        }) {
            fail(format!(
                "combined token {} column {}: {}, expected {}",
                i / h,
                i % h,
                got[i],
                want_out[i]
            ))?;
        }
        pgas.barrier_all()?;
        println!(
            "PE {me}/{n}: {} routing: {tokens} tokens out, {rows} rows ({:?} from each PE) and {} \
             expert pairs in ({:?} per expert), every row, list and combined token as the host's",
            if skewed { "skewed" } else { "uniform" },
            counts.rows_from,
            counts.pairs,
            counts.per_expert
        );
    }
    println!("PE {me}/{n}: ok");
    Ok(())
}
