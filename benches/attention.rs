//! `pgas::attention` (the Hopper attention forward kernel written in pgas) on the shapes of
//! issue 46's table, bf16 and FP8 (e4m3, with V's transpose timed apart), causal and not: median time of 20 runs after 3 (CUDA events on the
//! pgas stream) and TFLOP/s (FlashAttention's count: `4 d` a visible (query, key) pair a
//! head); and the cold JIT compile of the kernel. `scripts/attention_sdpa.py` times torch's
//! `scaled_dot_product_attention` (cuDNN and flash backends) on the shapes this bench's figures
//! name, in the same job, so the two tables compare side by side (`SHAPES` is their one list). Each shape is also checked at a few rows against
//! the host (f64), so a wrong result fails the run.
//!
//! Run: `attention [SHAPE ...]` (1 PE, sm_90a): every shape, or those whose name (as the figures
//! give it, `16x16(16)x1024x128`) contains one of the SHAPEs, e.g. `attention x1024x` for a
//! profiler (`scripts/studies/ncu_attention.sh`). Exit status 1 when a result is wrong.
//!
//! `attention --plot FIGURES.jsonl OUT.png` (no GPU) draws TFLOP/s against sequence length at
//! head dim 128 from this bench's and `attention_sdpa.py`'s figures in one file: pgas (bf16 and
//! FP8), cuDNN and flash, causal and not (`scripts/gpu-suite.sh OUTDIR attention` makes it).

mod common;

use common::plot::{by_count, Series};
use common::{median_ms, report, wall, BenchResult, Figure};
use pgas::attention::reference::{host_row, values};
use pgas::attention::{attention_fwd_sm90, Attention, AttentionConfig, AttentionParams, Fp8Scales};
use pgas::kernel::Variant;
use pgas::launch::Prewarm;
use pgas::prelude::*;

const BENCH: &str = "attention";

/// (batch, query heads, key heads, sequence, head dim), as issue 46's table.
const SHAPES: [(usize, usize, usize, usize, usize); 7] = [
    (16, 16, 16, 1024, 128),
    (4, 16, 16, 4096, 128),
    (1, 16, 16, 16384, 128),
    (4, 32, 32, 4096, 64),
    (4, 8, 8, 4096, 256),
    (4, 32, 8, 4096, 128),
    (1, 32, 8, 32768, 128),
];

/// The host's O at (token, head) in f64 for the fixed-length batch, and the worst difference
/// of `got` there.
fn spot_check(
    got: &[bf16], qkv: (&[bf16], &[bf16], &[bf16]),
    (seq, hq, hkv, d, causal): (usize, usize, usize, usize, bool),
) -> f64 {
    let mut worst: f64 = 0.0;
    for i in 0..6 {
        let tok = (i * 7919 + 13) % seq;
        let head = (i * 5) % hq;
        let keys = if causal { tok + 1 } else { seq };
        let (want, _) = host_row(qkv, (hq, hkv, d), tok, head, keys);
        let qa = (tok * hq + head) * d;
        for (x, w) in want.iter().enumerate() {
            worst = worst.max((got[qa + x].to_f64() - w).abs());
        }
    }
    worst
}

/// Plots the head-dim-128 shapes of `figures` (JSON lines of this bench and of
/// `attention_sdpa.py`) as TFLOP/s against sequence length into `out`: one line per
/// (implementation, mask); where two shapes share a length, the multi-head one.
fn plot(figures: &str, out: &str) -> BenchResult<()> {
    let text = std::fs::read_to_string(figures)?;
    let mut series: Vec<Series> = Vec::new();
    let who = [
        ("pgas", ""),
        ("pgas FP8", " fp8"),
        ("cuDNN", " cudnn"),
        ("flash", " flash"),
    ];
    for (who, suffix) in who {
        for mask in ["full", "causal"] {
            let mut points: Vec<(f64, f64)> = Vec::new();
            for &(b, hq, hkv, seq, d) in SHAPES.iter().filter(|s| s.4 == 128) {
                let name = format!("\"{b}x{hq}({hkv})x{seq}x{d} {mask}{suffix}\"");
                let value = text
                    .lines()
                    .find(|l| {
                        l.contains(&format!("\"name\": {name}"))
                            || l.contains(&format!("\"name\":{name}"))
                    })
                    .and_then(|l| l.split("\"value\":").nth(1))
                    .and_then(|v| v.split([',', '}']).next())
                    .and_then(|v| v.trim().parse::<f64>().ok());
                if let (Some(v), false) = (value, points.iter().any(|p| p.0 == seq as f64)) {
                    points.push((seq as f64, v));
                }
            }
            series.push(Series {
                name: format!("{who} {mask}"),
                points,
            });
        }
    }
    by_count(
        std::path::Path::new(out),
        "attention forward, bf16 (pgas FP8: e4m3), head dim 128, one H200",
        ("sequence length", "TFLOP/s"),
        &series,
    )
}

fn main() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--plot") {
        let (Some(figures), Some(out)) = (args.get(i + 1), args.get(i + 2)) else {
            return Err("usage: attention --plot FIGURES.jsonl OUT.png".into());
        };
        return plot(figures, out);
    }
    if !common::gpu_present() {
        println!("{BENCH}: skipped: no GPU");
        return Ok(());
    }
    let cache = std::env::temp_dir().join(format!("pgas-attention-bench-{}", std::process::id()));
    std::env::set_var("PGAS_CACHE_DIR", &cache);
    let p = pgas::init()?;
    let machine = format!("{} x1 PE", p.cuda().name()?);
    let (major, _) = p.compute_capability()?;
    if major != 9 {
        println!("{BENCH}: skipped: the kernel needs sm_90a (compute capability {major}.x here)");
        return Ok(());
    }
    let mut figs = Vec::new();
    // Cold JIT compile of the head-dim-128 causal specialization (fresh cache).
    let cfg = AttentionConfig::for_shape(128, true, 4096);
    let ct = cfg.comptime(128, true);
    let one = [Prewarm {
        spec: &attention_fwd_sm90::SPEC,
        variant: Variant::Plain,
        comptime: &ct,
    }];
    let (r, s) = wall(|| pgas::launch::prewarm(&p, &one));
    r?;
    figs.push(Figure::new(
        "cold compile d128 causal",
        s,
        "s",
        "NVRTC + load, fresh cache",
    ));

    let stream = p.stream().clone();
    let mut wrong = Vec::new();
    // (`cargo bench` passes `--bench`.)
    let only: Vec<&String> = args
        .iter()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    for (batch, hq, hkv, seq, d) in SHAPES {
        let shape = format!("{batch}x{hq}({hkv})x{seq}x{d}");
        if !only.is_empty() && !only.iter().any(|o| shape.contains(o.as_str())) {
            continue;
        }
        let (hq_, hk_) = (batch * seq * hq * d, batch * seq * hkv * d);
        let (qh, kh, vh) = (values(hq_, 31), values(hk_, 32), values(hk_, 33));
        let q = stream.clone_htod(&qh)?;
        let k = stream.clone_htod(&kh)?;
        let v = stream.clone_htod(&vh)?;
        let mut o = stream.alloc_zeros::<bf16>(hq_)?;
        let mut lse = stream.alloc_zeros::<f32>(batch * seq * hq)?;
        // The same values in e4m3 (scale 1: they are within its range), and as bf16 again for
        // the FP8 run's check.
        let e8 = |x: &[bf16]| {
            x.iter()
                .map(|x| e4m3::from_f32(x.to_f32()))
                .collect::<Vec<_>>()
        };
        let back = |x: &[e4m3]| {
            x.iter()
                .map(|x| bf16::from_f32(x.to_f32()))
                .collect::<Vec<_>>()
        };
        let (q8h, k8h, v8h) = (e8(&qh), e8(&kh), e8(&vh));
        let q8 = stream.clone_htod(&q8h)?;
        let k8 = stream.clone_htod(&k8h)?;
        let v8 = stream.clone_htod(&v8h)?;
        for causal in [false, true] {
            let params = AttentionParams {
                heads_q: hq,
                heads_kv: hkv,
                head_dim: d,
                causal,
                scale: None,
            };
            let att = Attention::fixed(&p, params, batch, (seq, seq))?;
            let ms = median_ms(
                &stream,
                (3, 20),
                || Ok(()),
                || {
                    att.run(&p, &mut o, &mut lse, &q, &k, &v, false)?;
                    Ok(())
                },
            )?;
            let tflops = att.flops() / (ms * 1e-3) / 1e12;
            let name = format!("{shape} {}", if causal { "causal" } else { "full" });
            figs.push(Figure::new(
                &name,
                tflops,
                "TFLOP/s",
                &format!("median {ms:.3} ms of 20"),
            ));
            let got = stream.clone_dtoh(&o)?;
            // Sequence 0 only (the first `seq` tokens).
            let err = spot_check(&got, (&qh, &kh, &vh), (seq, hq, hkv, d, causal));
            if err > 2e-2 {
                wrong.push(format!("{name}: off by {err} at a checked row"));
            }
            // FP8: V transposed once (timed on its own), then the attention on it.
            let mut vt = stream.alloc_zeros::<e4m3>(att.vt_len())?;
            let t_ms = median_ms(
                &stream,
                (3, 20),
                || Ok(()),
                || {
                    att.transpose_v(&p, &mut vt, &v8)?;
                    Ok(())
                },
            )?;
            let one = Fp8Scales {
                q: 1.0,
                k: 1.0,
                v: 1.0,
            };
            let ms8 = median_ms(
                &stream,
                (3, 20),
                || Ok(()),
                || {
                    att.run_fp8(&p, &mut o, &mut lse, (&q8, &k8, &vt), one, false)?;
                    Ok(())
                },
            )?;
            let tf8 = att.flops() / (ms8 * 1e-3) / 1e12;
            figs.push(Figure::new(
                &format!("{name} fp8"),
                tf8,
                "TFLOP/s",
                &format!(
                    "median {ms8:.3} ms of 20, {:.3}x bf16; V's transpose {:.1} us",
                    tf8 / tflops,
                    t_ms * 1e3
                ),
            ));
            let got = stream.clone_dtoh(&o)?;
            let deq = (&back(&q8h), &back(&k8h), &back(&v8h));
            let err = spot_check(&got, (deq.0, deq.1, deq.2), (seq, hq, hkv, d, causal));
            if err > 3e-2 {
                wrong.push(format!("{name} fp8: off by {err} at a checked row"));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&cache);
    report(BENCH, &machine, &figs);
    if !wrong.is_empty() {
        eprintln!("{BENCH}: WRONG: {}", wrong.join("; "));
        std::process::exit(1);
    }
    Ok(())
}
