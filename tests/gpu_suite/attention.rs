//! `pgas::attention` against its f32 GPU reference (`attention::reference`) at every shape
//! class: head dims 64, 128 and 256, causal and not, multi-head, grouped- and multi-query,
//! lengths that are not whole tiles, unequal query and key lengths, a variable-length batch,
//! a long sequence, one of 128k tokens (against the host at a few rows: the f32 reference would
//! take minutes there); the checked variant once; and the refusals before anything launches. Every
//! PE computes its own (the kernel does not communicate). On a GPU below sm_90 the cases check
//! that the launch is refused.

use crate::runner::{case, Case};
use crate::util::{self, ensure, CaseResult};
use pgas::attention::reference::{attention_reference, host_row, values};
use pgas::attention::{Attention, AttentionParams, Fp8Scales};
use pgas::ops::{RingAttention, UlyssesAttention};
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("attention/matches_the_f32_reference", shapes_case),
    case("attention/varlen_batch_and_checked_variant", varlen_case),
    case("attention/fp8_matches_the_f32_reference", fp8_case),
    case("attention/refuses_bad_input", refusals_case),
    case("attention/sequence_of_128k_tokens", longest_case),
    case("attention/ulysses_equals_one_pe_attention", ulysses_case),
    case("attention/ring_matches_one_pe_attention", ring_case),
];

/// A batch and its parameters: (lengths of Q, lengths of K, query heads, key heads, head dim,
/// causal).
type Shape = (Vec<usize>, Vec<usize>, usize, usize, usize, bool);

fn params(&(_, _, hq, hkv, d, causal): &Shape) -> AttentionParams {
    AttentionParams {
        heads_q: hq,
        heads_kv: hkv,
        head_dim: d,
        causal,
        scale: None,
    }
}

/// The scales of the FP8 checks: powers of two, so each dequantized value is exact in bf16 for
/// the reference.
const SCALES: Fp8Scales = Fp8Scales {
    q: 1.0 / 64.0,
    k: 1.0 / 32.0,
    v: 0.25,
};

/// Runs `shape` (the checked variant with `checked`) and compares O and the LSE with the f32
/// reference: O within 0.02 + 2% of the reference (bf16 P and O), the LSE within 0.01. With
/// `fp8`, Q, K and V are the same values quantized to e4m3 with [`SCALES`] (V transposed by
/// `transpose_v`), the reference reads them dequantized, and O is within 0.03 + 3% (P in e4m3).
fn check_shape(p: &Pgas, shape: &Shape, checked: bool, fp8: bool) -> CaseResult {
    let (lq, lk, hq, hkv, d, causal) = shape;
    let att = Attention::varlen(p, params(shape), lq, lk)?;
    let (tq, tk) = att.tokens();
    let s = p.stream();
    let (mut q, mut k, mut v) = (
        values(tq * hq * d, 21),
        values(tk * hkv * d, 22),
        values(tk * hkv * d, 23),
    );
    let mut o = s.alloc_zeros::<bf16>(tq * hq * d)?;
    let mut lse = s.alloc_zeros::<f32>(tq * hq)?;
    if fp8 {
        // Quantized with the scales, then the values they stand for (exact in bf16).
        let quant = |x: &[bf16], scale: f32| -> Vec<e4m3> {
            x.iter()
                .map(|x| e4m3::from_f32(x.to_f32() / scale))
                .collect()
        };
        let deq = |x: &[e4m3], scale: f32| -> Vec<bf16> {
            x.iter()
                .map(|x| bf16::from_f32(x.to_f32() * scale))
                .collect()
        };
        let (q8, k8, v8) = (
            quant(&q, SCALES.q),
            quant(&k, SCALES.k),
            quant(&v, SCALES.v),
        );
        let mut vt = s.alloc_zeros::<e4m3>(att.vt_len())?;
        let (dq, dk, dv) = (s.clone_htod(&q8)?, s.clone_htod(&k8)?, s.clone_htod(&v8)?);
        att.transpose_v(p, &mut vt, &dv)?;
        att.run_fp8(p, &mut o, &mut lse, (&dq, &dk, &vt), SCALES, checked)?;
        (q, k, v) = (deq(&q8, SCALES.q), deq(&k8, SCALES.k), deq(&v8, SCALES.v));
    }
    let (q, k, v) = (s.clone_htod(&q)?, s.clone_htod(&k)?, s.clone_htod(&v)?);
    if !fp8 {
        att.run(p, &mut o, &mut lse, &q, &k, &v, checked)?;
    }
    // The reference: one thread per (token, head).
    let cum = |l: &[usize]| {
        let mut c = vec![0u32];
        for &x in l {
            c.push(c.last().unwrap() + x as u32);
        }
        c
    };
    let seq_of: Vec<u32> = lq
        .iter()
        .enumerate()
        .flat_map(|(b, &n)| std::iter::repeat_n(b as u32, n))
        .collect();
    // Key ranges as the plan makes them from lengths: (start, end) a sequence.
    let ranges: Vec<u32> = cum(lk).windows(2).flat_map(|w| [w[0], w[1]]).collect();
    let (cq, ck, so) = (
        s.clone_htod(&cum(lq))?,
        s.clone_htod(&ranges)?,
        s.clone_htod(&seq_of)?,
    );
    let mut ro = s.alloc_zeros::<f32>(tq * hq * d)?;
    let mut rl = s.alloc_zeros::<f32>(tq * hq)?;
    let scale = 1.0 / (*d as f32).sqrt();
    let n = (tq * hq) as u32;
    attention_reference::launch(
        p,
        LaunchConfig::blocks(n.div_ceil(128), 128),
        &mut ro,
        &mut rl,
        &q,
        &k,
        &v,
        &cq,
        &ck,
        &so,
        *hq,
        *hkv,
        *d,
        scale,
        *causal,
    )?;
    s.synchronize()?;
    let (got, want) = (s.clone_dtoh(&o)?, s.clone_dtoh(&ro)?);
    let (gl, wl) = (s.clone_dtoh(&lse)?, s.clone_dtoh(&rl)?);
    let what = format!("{}{shape:?}", if fp8 { "FP8 " } else { "" });
    let tol = if fp8 { 0.03 } else { 0.02 };
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let g = g.to_f32();
        ensure((g - w).abs() <= tol + tol * w.abs(), || {
            format!("{what}: O[{i}] = {g}, reference {w}")
        })?;
    }
    for (i, (g, w)) in gl.iter().zip(&wl).enumerate() {
        ensure((g - w).abs() <= 0.01 + 1e-4 * w.abs(), || {
            format!("{what}: LSE[{i}] = {g}, reference {w}")
        })?;
    }
    Ok(())
}

/// The longest sequence issue 46 names, 131,072 tokens, two query heads on one key head, causal
/// and not: O and the LSE at rows across the sequence (the first, the last, rows past 2^16 and
/// off the tiles) against the host in f64. Each row is a pass over up to all 131,072 keys, which
/// the host does in well under a second; the GPU reference, a thread a row, would take minutes.
fn longest_case(p: &Pgas) -> CaseResult {
    if !hopper_or_refused(p)? {
        return Ok(());
    }
    let (n, hq, hkv, d) = (131_072usize, 2usize, 1usize, 128usize);
    let (qh, kh, vh) = (
        values(n * hq * d, 41),
        values(n * hkv * d, 42),
        values(n * hkv * d, 43),
    );
    let s = p.stream();
    let (q, k, v) = (s.clone_htod(&qh)?, s.clone_htod(&kh)?, s.clone_htod(&vh)?);
    let mut o = s.alloc_zeros::<bf16>(n * hq * d)?;
    let mut lse = s.alloc_zeros::<f32>(n * hq)?;
    for causal in [false, true] {
        let shape: Shape = (vec![n], vec![n], hq, hkv, d, causal);
        let att = Attention::varlen(p, params(&shape), &[n], &[n])?;
        att.run(p, &mut o, &mut lse, &q, &k, &v, false)?;
        let (got, gl) = (s.clone_dtoh(&o)?, s.clone_dtoh(&lse)?);
        for tok in [0, 1, 4_097, 65_537, 100_003, n - 1] {
            for head in 0..hq {
                let keys = if causal { tok + 1 } else { n };
                let (want, want_lse) = host_row((&qh, &kh, &vh), (hq, hkv, d), tok, head, keys);
                let what = format!("128k tokens, causal {causal}, token {tok}, head {head}");
                let qa = (tok * hq + head) * d;
                for (x, w) in want.iter().enumerate() {
                    let g = got[qa + x].to_f64();
                    ensure((g - w).abs() <= 0.02 + 0.02 * w.abs(), || {
                        format!("{what}: O[{x}] = {g}, host {w}")
                    })?;
                }
                let g = gl[tok * hq + head] as f64;
                ensure((g - want_lse).abs() <= 0.01 + 1e-4 * want_lse.abs(), || {
                    format!("{what}: LSE = {g}, host {want_lse}")
                })?;
            }
        }
    }
    Ok(())
}

/// Whether this GPU runs the sm_90a kernel; below it, that the plan's launch is refused.
fn hopper_or_refused(p: &Pgas) -> Result<bool, String> {
    let major = util::compute_major(p).map_err(|e| e.to_string())?;
    if major == 9 {
        return Ok(true);
    }
    let shape: Shape = (vec![128], vec![128], 1, 1, 64, false);
    match check_shape(p, &shape, false, false) {
        Err(e) if e.to_string().contains("sm_90a") => Ok(false),
        other => Err(format!(
            "attention on compute capability {major}.x: {other:?}"
        )),
    }
}

fn shapes_case(p: &Pgas) -> CaseResult {
    if !hopper_or_refused(p)? {
        return Ok(());
    }
    let shapes: Vec<Shape> = vec![
        (vec![256; 2], vec![256; 2], 4, 4, 128, false),
        (vec![256; 2], vec![256; 2], 4, 4, 128, true),
        // Grouped-query, lengths off the tiles.
        (vec![300], vec![300], 8, 2, 64, true),
        (vec![300], vec![300], 8, 2, 64, false),
        // Multi-query, head dim 256, more keys than queries (causal aligned to the end).
        (vec![200], vec![333], 4, 1, 256, true),
        (vec![200], vec![333], 4, 1, 256, false),
        // More queries than keys: the first rows see no key.
        (vec![192], vec![64], 2, 2, 128, true),
        // A long sequence: many tiles through the ring.
        (vec![4096], vec![4096], 2, 1, 128, true),
    ];
    for shape in &shapes {
        check_shape(p, shape, false, false)?;
    }
    Ok(())
}

fn varlen_case(p: &Pgas) -> CaseResult {
    if !hopper_or_refused(p)? {
        return Ok(());
    }
    let varlen: Shape = (vec![100, 1, 257, 0], vec![130, 64, 257, 5], 4, 2, 128, true);
    check_shape(p, &varlen, false, false)?;
    check_shape(p, &varlen, true, false)?;
    let short: Shape = (vec![70, 129], vec![70, 129], 2, 2, 64, false);
    check_shape(p, &short, true, false)
}

/// FP8 at every head dim: multi-head and grouped-query, multi-query at 128, lengths off the
/// tiles, a variable-length batch with an empty sequence, causal and not, unequal lengths; the
/// checked variant once; and FP8's own refusals (odd heads at head dim 64, a transposed V of
/// the wrong length, a scale that is not positive).
fn fp8_case(p: &Pgas) -> CaseResult {
    if !hopper_or_refused(p)? {
        return Ok(());
    }
    let shapes: Vec<Shape> = vec![
        (vec![300], vec![300], 8, 2, 64, true),
        (vec![300], vec![300], 8, 2, 64, false),
        (vec![256; 2], vec![256; 2], 4, 4, 128, false),
        (vec![100, 1, 257, 0], vec![130, 64, 257, 5], 4, 1, 128, true),
        (vec![200], vec![333], 2, 2, 256, true),
        (vec![200], vec![333], 2, 2, 256, false),
        (vec![4096], vec![4096], 2, 1, 128, true),
    ];
    for shape in &shapes {
        check_shape(p, shape, false, true)?;
    }
    check_shape(p, &shapes[3], true, true)?;
    let odd: Shape = (vec![128], vec![128], 3, 1, 64, false);
    let att = Attention::varlen(p, params(&odd), &odd.0, &odd.1)?;
    let s = p.stream();
    let x = s.alloc_zeros::<e4m3>(128 * 3 * 64)?;
    let vt = s.alloc_zeros::<e4m3>(att.vt_len())?;
    let (mut o, mut lse) = (
        s.alloc_zeros::<bf16>(128 * 3 * 64)?,
        s.alloc_zeros::<f32>(384)?,
    );
    let e = att
        .run_fp8(p, &mut o, &mut lse, (&x, &x, &vt), SCALES, false)
        .expect_err("3 query heads of 64 in FP8");
    ensure(e.to_string().contains("must be even"), || {
        format!("the odd-heads error: {e}")
    })?;
    let mut short = s.alloc_zeros::<e4m3>(att.vt_len() - 1)?;
    let e = att
        .transpose_v(p, &mut short, &x)
        .expect_err("a transposed V one short");
    ensure(e.to_string().contains("Attention::vt_len"), || {
        format!("the transposed V's size error: {e}")
    })?;
    let even: Shape = (vec![128], vec![128], 2, 2, 64, false);
    let att = Attention::varlen(p, params(&even), &even.0, &even.1)?;
    let x = s.alloc_zeros::<e4m3>(128 * 2 * 64)?;
    let mut vt = s.alloc_zeros::<e4m3>(att.vt_len())?;
    att.transpose_v(p, &mut vt, &x)?;
    let (mut o, mut lse) = (
        s.alloc_zeros::<bf16>(128 * 2 * 64)?,
        s.alloc_zeros::<f32>(256)?,
    );
    let bad = Fp8Scales { v: 0.0, ..SCALES };
    let e = att
        .run_fp8(p, &mut o, &mut lse, (&x, &x, &vt), bad, false)
        .expect_err("a zero scale");
    ensure(e.to_string().contains("finite positive"), || {
        format!("the scale error: {e}")
    })?;
    Ok(())
}

fn refusals_case(p: &Pgas) -> CaseResult {
    let refused = |r: pgas::Result<Attention>, needle: &str| -> CaseResult {
        match r {
            Err(e) if e.to_string().contains(needle) => Ok(()),
            Err(e) => Err(format!("expected an error with {needle:?}, got: {e}").into()),
            Ok(_) => Err(format!("expected an error with {needle:?}, it was accepted").into()),
        }
    };
    let base: Shape = (vec![128], vec![128], 4, 4, 128, false);
    let with = |f: &dyn Fn(&mut AttentionParams)| {
        let mut a = params(&base);
        f(&mut a);
        a
    };
    refused(
        Attention::fixed(p, with(&|a| a.head_dim = 96), 1, (128, 128)),
        "64, 128 or 256",
    )?;
    refused(
        Attention::fixed(p, with(&|a| a.heads_kv = 3), 1, (128, 128)),
        "must divide the query heads",
    )?;
    refused(
        Attention::fixed(p, with(&|a| a.scale = Some(-1.0)), 1, (128, 128)),
        "finite positive",
    )?;
    refused(
        Attention::varlen(p, params(&base), &[128, 64], &[128]),
        "one of each per sequence",
    )?;
    refused(
        Attention::with_key_ranges(p, params(&base), &[128], &[(64, 32)]),
        "ends before it starts",
    )?;
    // Buffers that do not match the batch: refused before anything launches.
    let att = Attention::fixed(p, params(&base), 1, (128, 128))?;
    let s = p.stream();
    let q = s.alloc_zeros::<bf16>(128 * 4 * 128)?;
    let short = s.alloc_zeros::<bf16>(127 * 4 * 128)?;
    let mut o = s.alloc_zeros::<bf16>(128 * 4 * 128)?;
    let mut lse = s.alloc_zeros::<f32>(128 * 4)?;
    let e = att
        .run(p, &mut o, &mut lse, &q, &short, &q, false)
        .expect_err("a K of 127 tokens for 128");
    ensure(e.to_string().contains("K has 65024 elements"), || {
        format!("the size error names K: {e}")
    })?;
    // V of another length than K.
    let e = att
        .run(p, &mut o, &mut lse, &q, &q, &short, false)
        .expect_err("a V of 127 tokens beside a K of 128");
    ensure(e.to_string().contains("V has 65024 elements"), || {
        format!("the size error names V: {e}")
    })?;
    // Queries and no key anywhere in the batch.
    let none = Attention::varlen(p, params(&base), &[4], &[0])?;
    let (mut o4, mut l4) = (
        s.alloc_zeros::<bf16>(4 * 4 * 128)?,
        s.alloc_zeros::<f32>(16)?,
    );
    let q4 = s.alloc_zeros::<bf16>(4 * 4 * 128)?;
    let e = none
        .run(p, &mut o4, &mut l4, &q4, &q4, &q4, false)
        .expect_err("no key at all");
    ensure(e.to_string().contains("no key at all"), || {
        format!("the empty batch's error: {e}")
    })?;
    Ok(())
}

/// Q, K and V of one whole sequence of `total` tokens (from `salt`, `salt + 1`, `salt + 2`) and
/// O of the single-PE attention over it, on the host: what each PE's slice of a
/// context-parallel form is checked against.
fn whole_sequence(
    p: &Pgas, params: AttentionParams, total: usize, salt: u64,
) -> Result<[Vec<bf16>; 4], Box<dyn std::error::Error>> {
    let (hq, hkv, d) = (params.heads_q, params.heads_kv, params.head_dim);
    let (q, k, v) = (
        values(total * hq * d, salt),
        values(total * hkv * d, salt + 1),
        values(total * hkv * d, salt + 2),
    );
    let s = p.stream();
    let whole = Attention::fixed(p, params, 1, (total, total))?;
    let (dq, dk, dv) = (s.clone_htod(&q)?, s.clone_htod(&k)?, s.clone_htod(&v)?);
    let mut o = s.alloc_zeros::<bf16>(total * hq * d)?;
    let mut lse = s.alloc_zeros::<f32>(total * hq)?;
    whole.run(p, &mut o, &mut lse, &dq, &dk, &dv, false)?;
    let o = s.clone_dtoh(&o)?;
    Ok([q, k, v, o])
}

/// Context parallel by all-to-all: each PE holds a slice of one sequence (96 tokens, not whole
/// tiles) with every head; its O must equal, bit for bit, its rows of the single-PE attention
/// over the whole sequence (the same kernel runs each head on the same data). Grouped-query,
/// causal and not, head dims 64 and 128; and the refusal of key heads the PEs do not divide.
fn ulysses_case(p: &Pgas) -> CaseResult {
    if !hopper_or_refused(p)? {
        return Ok(());
    }
    let (pes, me, t) = (p.n_pes(), util::me(p), 96);
    let s = p.stream();
    for (d, causal) in [(128, true), (64, false)] {
        let params = AttentionParams {
            heads_q: 8,
            heads_kv: 4,
            head_dim: d,
            causal,
            scale: None,
        };
        let [q, k, v, want] = whole_sequence(p, params, t * pes, 41)?;
        // This PE's slice through the all-to-all form.
        let slice = |x: &[bf16], h: usize| x[me * t * h * d..(me + 1) * t * h * d].to_vec();
        let lq = s.clone_htod(&slice(&q, 8))?;
        let lk = s.clone_htod(&slice(&k, 4))?;
        let lv = s.clone_htod(&slice(&v, 4))?;
        let mut got = s.alloc_zeros::<bf16>(t * 8 * d)?;
        let mut op = UlyssesAttention::new(p, params, t)?;
        op.run(p, &mut got, &lq, &lk, &lv)?;
        util::settle(p)?;
        let got = s.clone_dtoh(&got)?;
        let mine = &want[me * t * 8 * d..(me + 1) * t * 8 * d];
        if let Some(i) = (0..got.len()).find(|&i| got[i] != mine[i]) {
            return Err(format!(
                "Ulysses on {pes} PEs, d {d}, causal {causal}: O[{i}] = {}, one-PE attention {}",
                got[i], mine[i]
            )
            .into());
        }
    }
    if pes > 1 {
        let mqa = AttentionParams {
            heads_q: 8,
            heads_kv: 1,
            head_dim: 64,
            causal: false,
            scale: None,
        };
        match UlyssesAttention::new(p, mqa, t) {
            Err(e) if e.to_string().contains("must be multiples of") => {}
            Err(e) => return Err(format!("the MQA refusal: {e}").into()),
            Ok(_) => return Err("one key head over several PEs was accepted".into()),
        }
    }
    Ok(())
}

/// Context parallel by a ring: each PE holds a slice of one sequence (causal: the zigzag slice of
/// 96 tokens, two chunks of 48; else 70 contiguous tokens); its O must match its rows of the
/// single-PE attention over the whole sequence within the rounding of the partial results
/// (0.02 + 2%). Grouped-query with fewer key heads than some PE counts (the ring has no head
/// rule), causal and not, head dims 128 and 64; and the refusal of an odd causal slice.
fn ring_case(p: &Pgas) -> CaseResult {
    if !hopper_or_refused(p)? {
        return Ok(());
    }
    let (pes, me) = (p.n_pes(), util::me(p));
    let s = p.stream();
    for (d, causal, t) in [(128, true, 96), (64, false, 70)] {
        let params = AttentionParams {
            heads_q: 8,
            heads_kv: 2,
            head_dim: d,
            causal,
            scale: None,
        };
        let [q, k, v, want] = whole_sequence(p, params, t * pes, 51)?;
        let mut op = RingAttention::new(p, params, t)?;
        let ranges = op.slice_of(me);
        // This PE's rows of a [tokens][heads][d] tensor, in its slice's order.
        let rows = |x: &[bf16], h: usize| -> Vec<bf16> {
            ranges
                .iter()
                .flat_map(|r| x[r.start * h * d..r.end * h * d].iter().copied())
                .collect()
        };
        let (lq, lk, lv) = (
            s.clone_htod(&rows(&q, 8))?,
            s.clone_htod(&rows(&k, 2))?,
            s.clone_htod(&rows(&v, 2))?,
        );
        let mut got = s.alloc_zeros::<bf16>(t * 8 * d)?;
        // Twice: the second call reuses the signal words (their values grow with the calls).
        for _ in 0..2 {
            op.run(p, &mut got, &lq, &lk, &lv)?;
        }
        util::settle(p)?;
        let want = rows(&want, 8);
        let got = s.clone_dtoh(&got)?;
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let (g, w) = (g.to_f32(), w.to_f32());
            ensure((g - w).abs() <= 0.02 + 0.02 * w.abs(), || {
                format!("ring on {pes} PEs, d {d}, causal {causal}: O[{i}] = {g}, one-PE {w}")
            })?;
        }
    }
    let odd = AttentionParams {
        heads_q: 8,
        heads_kv: 2,
        head_dim: 64,
        causal: true,
        scale: None,
    };
    match RingAttention::new(p, odd, 95) {
        Err(e) if e.to_string().contains("must be even") => Ok(()),
        Err(e) => Err(format!("the odd causal slice's refusal: {e}").into()),
        Ok(_) => Err("an odd causal slice was accepted".into()),
    }
}
