//! `pgas::ops::moe`: dispatch and combine against `moe::reference` (every received row, its
//! metadata, the per-expert row lists, every combined element), for a skewed routing (experts
//! with no token, unused slots, tokens routed nowhere, a different token count on each PE, one
//! PE with no token at all) at hidden sizes that take the 4-vector path and the one-vector
//! tail, and over 8192 tokens a PE (the layout ranks 4096 tokens a round, in 4 steps: three
//! rounds, the last partial); three rounds back to back with no host wait between them; the checked variant; a CUDA
//! graph of dispatch + combine replayed; `combine_rows` (rows reduced on the experts' PEs,
//! pulled by the tokens' PEs) against `reference::combine_rows`, alternating with `combine`, in
//! the checked variant and in a graph; FP8 dispatch (rows against `reference::fp8_round_trip`,
//! bit for bit), turned on and off between rounds; dispatch and combine on a second stream,
//! the routing freed before they finish; and every bad input, an `Err` on every PE.

use crate::runner::{case, Case};
use crate::util::{self, ensure, CaseResult};
use pgas::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use pgas::cudarc::driver::CudaSlice;
use pgas::ops::moe::{reference, MoeConfig, MoeDispatcher, Routing};
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("moe/dispatch_combine", dispatch_combine),
    case("moe/back_to_back", back_to_back),
    case("moe/checked_variant", checked_variant),
    case("moe/graph_capture", graph_capture),
    case("moe/second_stream", second_stream),
    case("moe/combine_rows", combine_rows),
    case("moe/fp8_dispatch", fp8_dispatch),
    case("moe/bad_input", bad_input),
];

/// hidden 1032: 129 vectors a row, so lanes take one 4-vector step and lane 0 a tail vector.
const CFG: MoeConfig = MoeConfig {
    max_tokens: 300,
    hidden: 1032,
    top_k: 4,
    experts_per_pe: 3,
};

/// hidden 264: 33 vectors, tails only; top-1.
const SMALL: MoeConfig = MoeConfig {
    max_tokens: 64,
    hidden: 264,
    top_k: 1,
    experts_per_pe: 2,
};

/// 9000 tokens a PE (fewer on the others): the layout kernel ranks them in three rounds of up
/// to 4 steps of 1024, so ranks carry across steps, rounds and a partial last step.
const MANY: MoeConfig = MoeConfig {
    max_tokens: 9000,
    hidden: 16,
    top_k: 4,
    experts_per_pe: 3,
};

/// Token `t` of PE `pe`, element `c`: small multiples of 1/4, exact in bf16.
fn x_value(pe: usize, t: usize, c: usize) -> bf16 {
    bf16::from_f32(((pe * 13 + t * 7 + c) % 23) as f32 * 0.25 - 2.5)
}

/// The experts' output of pair `p` on PE `d`, element `c` (a function the host knows, so the
/// combine check needs no expert kernel).
fn y_value(d: usize, p: usize, c: usize) -> bf16 {
    bf16::from_f32(((d * 5 + p * 3 + c * 11) % 19) as f32 * 0.5 - 4.0)
}

/// The row of pair `p` on PE `d`.
fn y_row(d: usize, p: usize, h: usize) -> Vec<bf16> {
    (0..h).map(|c| y_value(d, p, c)).collect()
}

/// Row `row` of PE `d`'s combine input, element `c` (what its experts would have reduced for
/// that received row): multiples of 1/2 below 16, so any sum of a few is exact in f32 and the
/// GPU's one bf16 rounding matches the reference's bit for bit.
fn z_row(d: usize, row: usize, h: usize) -> Vec<bf16> {
    (0..h)
        .map(|c| bf16::from_f32(((d * 7 + row * 5 + c * 3) % 29) as f32 * 0.5 - 7.0))
        .collect()
}

/// hidden 1152: 9 groups of 128 for FP8 dispatch, so a warp's last step of 512 values has
/// lanes past the row's end.
const FP8: MoeConfig = MoeConfig {
    max_tokens: 200,
    hidden: 1152,
    top_k: 4,
    experts_per_pe: 3,
};

/// One round's data on every PE: routing of each PE (PE `empty` routes no token), this PE's
/// tokens.
pub(crate) struct Round {
    routings: Vec<(Vec<i32>, Vec<f32>)>,
    tokens: usize,
    x: CudaSlice<bf16>,
    expert_out: CudaSlice<bf16>,
    out: CudaSlice<bf16>,
}

pub(crate) fn round(
    p: &Pgas, cfg: &MoeConfig, seed: u64, empty: Option<usize>,
) -> pgas::Result<Round> {
    let (me, n) = (p.my_pe(), p.n_pes());
    let tokens_of = |pe: usize| match empty {
        Some(e) if e == pe => 0,
        _ => cfg.max_tokens - (pe * 37) % cfg.max_tokens,
    };
    let routings: Vec<_> = (0..n)
        .map(|pe| reference::sample_routing(cfg, n, tokens_of(pe), seed * 10 + pe as u64, true))
        .collect();
    let tokens = tokens_of(me);
    let h = cfg.hidden;
    let s = p.stream();
    let x_host: Vec<bf16> = (0..tokens.max(1) * h)
        .map(|i| x_value(me, i / h, i % h))
        .collect();
    // Worst-case pairs: rounds that do not read the counts on the host before combining.
    let pairs = cfg.max_pairs(n);
    let y_host: Vec<bf16> = (0..pairs * h).map(|i| y_value(me, i / h, i % h)).collect();
    Ok(Round {
        x: s.clone_htod(&x_host)?,
        expert_out: s.clone_htod(&y_host)?,
        out: s.alloc_zeros::<bf16>(cfg.max_tokens * h)?,
        routings,
        tokens,
    })
}

/// Checks what the last dispatch left here and the combined tokens in `r.out` against the
/// reference.
pub(crate) fn check(
    p: &Pgas, moe: &mut MoeDispatcher, cfg: &MoeConfig, r: &Round, what: &str,
) -> CaseResult {
    check_as(p, moe, cfg, r, what, false)
}

/// [`check`], the rows as an FP8 dispatch delivers them where `fp8`.
fn check_as(
    p: &Pgas, moe: &mut MoeDispatcher, cfg: &MoeConfig, r: &Round, what: &str, fp8: bool,
) -> CaseResult {
    let me = p.my_pe();
    let idx: Vec<&[i32]> = r.routings.iter().map(|x| x.0.as_slice()).collect();
    let wts: Vec<&[f32]> = r.routings.iter().map(|x| x.1.as_slice()).collect();
    let want = reference::dispatch(cfg, &idx, &wts);
    let mine = &want[me];
    let (h, k) = (cfg.hidden, cfg.top_k);
    let counts = moe.recv_counts()?;
    let rows = mine.src.len();
    ensure(
        counts.rows == rows && counts.expert_offsets == mine.expert_offsets,
        || {
            format!(
                "{what}: {} rows, expert offsets {:?}; expected {rows}, {:?}",
                counts.rows, counts.expert_offsets, mine.expert_offsets
            )
        },
    )?;
    if rows > 0 {
        let src = moe.recv_src().view(0..2 * rows)?.to_vec()?;
        let got: Vec<(usize, usize)> = src
            .chunks(2)
            .map(|c| (c[0] as usize, c[1] as usize))
            .collect();
        util::check_eq(&format!("{what}: row sources"), &got, &mine.src)?;
        util::check_eq(
            &format!("{what}: row experts"),
            &moe.recv_topk_idx().view(0..k * rows)?.to_vec()?,
            &mine.idx,
        )?;
        let w: Vec<u32> = moe
            .recv_topk_weights()
            .view(0..k * rows)?
            .to_vec()?
            .iter()
            .map(|w| w.to_bits())
            .collect();
        util::check_eq(&format!("{what}: row weights"), &w, &mine.weight_bits)?;
        let want_x: Vec<bf16> = mine
            .src
            .iter()
            .flat_map(|&(s, t)| {
                let row: Vec<bf16> = (0..h).map(|c| x_value(s, t, c)).collect();
                if fp8 {
                    reference::fp8_round_trip(&row)
                } else {
                    row
                }
            })
            .collect();
        util::check_eq(
            &format!("{what}: rows"),
            &moe.recv_x().view(0..rows * h)?.to_vec()?,
            &want_x,
        )?;
    }
    if counts.pairs > 0 {
        util::check_eq(
            &format!("{what}: per-expert rows"),
            &moe.expert_rows().view(0..counts.pairs)?.to_vec()?,
            &mine.expert_rows,
        )?;
    }
    if r.tokens > 0 {
        let got = p.stream().clone_dtoh(&r.out.slice(0..r.tokens * h))?;
        let want_out = reference::combine(cfg, me, r.tokens, &want, |d, p| y_row(d, p, cfg.hidden));
        let got: Vec<f64> = got.iter().map(|v| v.to_f64()).collect();
        let want_out: Vec<f64> = want_out.iter().map(|v| v.to_f64()).collect();
        // The GPU rounds as the reference does; one bf16 step of slack for a contraction.
        util::check_close(&format!("{what}: combined"), &got, &want_out, 1.0 / 128.0)?;
    }
    Ok(())
}

pub(crate) fn run_round(
    moe: &mut MoeDispatcher, r: &mut Round, me: usize,
) -> pgas::Result<Routing> {
    let routing = moe.route(&r.routings[me].0, &r.routings[me].1)?;
    moe.dispatch(&r.x, &routing)?;
    moe.combine(&r.expert_out, &routing, &mut r.out)?;
    Ok(routing)
}

fn dispatch_combine(p: &Pgas) -> CaseResult {
    let me = p.my_pe();
    // The last: one PE routes no token (on one PE, no PE has any).
    for (cfg, empty) in [
        (CFG, None),
        (SMALL, None),
        (MANY, None),
        (CFG, Some(p.n_pes() - 1)),
    ] {
        let mut m = MoeDispatcher::new(p, cfg)?;
        m.prewarm()?;
        let mut r = round(p, &cfg, 1, empty)?;
        run_round(&mut m, &mut r, me)?;
        check(
            p,
            &mut m,
            &cfg,
            &r,
            &format!("hidden {}, empty PE {empty:?}", cfg.hidden),
        )?;
        util::settle(p)?;
    }
    Ok(())
}

/// Three rounds, each dispatch and combine right after the last with no host wait: the
/// buffer-reuse protocol of `kernels.rs`. Each round's combine has its own output buffer.
fn back_to_back(p: &Pgas) -> CaseResult {
    let me = p.my_pe();
    let mut m = MoeDispatcher::new(p, CFG)?;
    let mut rounds = Vec::new();
    for seed in 0..3 {
        rounds.push(round(p, &CFG, 20 + seed, None)?);
    }
    // Routing first (it waits on the host), then the launches back to back.
    let mut routings = Vec::new();
    for r in &rounds {
        routings.push(m.route(&r.routings[me].0, &r.routings[me].1)?);
    }
    for (r, routing) in rounds.iter_mut().zip(&routings) {
        m.dispatch(&r.x, routing)?;
        m.combine(&r.expert_out, routing, &mut r.out)?;
    }
    // Only the last round's receive buffers are left; every round's output is.
    check(p, &mut m, &CFG, &rounds[2], "round 3")?;
    let idx_of = |r: &Round| -> Vec<Vec<i32>> { r.routings.iter().map(|x| x.0.clone()).collect() };
    for (i, r) in rounds.iter().enumerate().take(2) {
        let idx = idx_of(r);
        let idx: Vec<&[i32]> = idx.iter().map(Vec::as_slice).collect();
        let wts: Vec<&[f32]> = r.routings.iter().map(|x| x.1.as_slice()).collect();
        let want = reference::dispatch(&CFG, &idx, &wts);
        let got = p
            .stream()
            .clone_dtoh(&r.out.slice(0..r.tokens * CFG.hidden))?;
        let want_out =
            reference::combine(&CFG, me, r.tokens, &want, |d, p| y_row(d, p, CFG.hidden));
        let got: Vec<f64> = got.iter().map(|v| v.to_f64()).collect();
        let want_out: Vec<f64> = want_out.iter().map(|v| v.to_f64()).collect();
        util::check_close(
            &format!("round {} combined", i + 1),
            &got,
            &want_out,
            1.0 / 128.0,
        )?;
    }
    util::settle(p)
}

/// The checked variant (every index and PE checked) on the same data: no trap.
fn checked_variant(p: &Pgas) -> CaseResult {
    let me = p.my_pe();
    let mut m = MoeDispatcher::new(p, CFG)?;
    m.set_checked(true);
    let mut r = round(p, &CFG, 3, None)?;
    run_round(&mut m, &mut r, me)?;
    check(p, &mut m, &CFG, &r, "checked")?;
    util::settle(p)
}

/// Dispatch + combine captured into a graph once (after a first run compiled and loaded the
/// kernels) and replayed: the epochs live on the GPU, so replays keep counting, and an eager
/// round after them still agrees with every peer. The buffers are made with cudarc's event
/// tracking off (all on one stream): a capture cannot wait for events recorded before it.
fn graph_capture(p: &Pgas) -> CaseResult {
    util::untracked(p, graph_capture_untracked)
}

fn graph_capture_untracked(p: &Pgas) -> CaseResult {
    let me = p.my_pe();
    let mut m = MoeDispatcher::new(p, CFG)?;
    let mut r = round(p, &CFG, 4, None)?;
    let routing = run_round(&mut m, &mut r, me)?;
    util::settle(p)?;
    let stream = p.stream().clone();
    // Cleared (before the replays, on the same stream), so that what the check finds was
    // written by the replays.
    stream.memset_zeros(&mut r.out)?;
    util::replay_captured(p, &stream, 3, || {
        m.dispatch(&r.x, &routing)?;
        m.combine(&r.expert_out, &routing, &mut r.out)
    })?;
    check(p, &mut m, &CFG, &r, "3 graph replays")?;
    // One more eager round through the same dispatcher: its epochs counted the replays.
    let mut r2 = round(p, &CFG, 5, None)?;
    run_round(&mut m, &mut r2, me)?;
    check(p, &mut m, &CFG, &r2, "eager after replays")?;
    util::settle(p)
}

/// Dispatch and combine on a stream of their own, while the routing's buffers were copied on
/// the context's stream and are freed there: the dispatch must wait for the copy, and the free
/// (the routing dropped right after the calls) for the kernels.
fn second_stream(p: &Pgas) -> CaseResult {
    let me = p.my_pe();
    let mut m = MoeDispatcher::new(p, CFG)?;
    let mut r = round(p, &CFG, 6, None)?;
    let side = p.cuda().new_stream()?;
    let routing = m.route(&r.routings[me].0, &r.routings[me].1)?;
    m.dispatch_on(&side, &r.x, &routing)?;
    m.combine_on(&side, &r.expert_out, &routing, &mut r.out)?;
    drop(routing);
    side.synchronize()?;
    check(p, &mut m, &CFG, &r, "second stream, routing dropped")?;
    util::settle(p)
}

/// Writes this PE's combine input for the last dispatch (rows `0..rows` of `z_row`) and
/// runs `combine_rows` into `r.out`.
fn pull_round(p: &Pgas, m: &mut MoeDispatcher, r: &mut Round, routing: &Routing) -> CaseResult {
    let h = m.config().hidden;
    let rows = m.recv_counts()?.rows;
    if rows > 0 {
        let z: Vec<bf16> = (0..rows).flat_map(|row| z_row(p.my_pe(), row, h)).collect();
        m.combine_input().view_mut(0..rows * h)?.copy_from(&z)?;
    }
    m.combine_rows(routing, &mut r.out)?;
    Ok(())
}

/// `r.out` against `reference::combine_rows` of every PE's `z_row`s: exactly.
fn check_rows(p: &Pgas, cfg: &MoeConfig, r: &Round, what: &str) -> CaseResult {
    let idx: Vec<&[i32]> = r.routings.iter().map(|x| x.0.as_slice()).collect();
    let wts: Vec<&[f32]> = r.routings.iter().map(|x| x.1.as_slice()).collect();
    let want = reference::dispatch(cfg, &idx, &wts);
    let h = cfg.hidden;
    let want_out =
        reference::combine_rows(cfg, p.my_pe(), r.tokens, &want, |d, row| z_row(d, row, h));
    let got = p
        .stream()
        .clone_dtoh(&r.out.slice(0..r.tokens.max(1) * h))?;
    util::check_eq(
        &format!("{what}: combined rows"),
        &got[..r.tokens * h],
        &want_out[..],
    )
}

/// `combine_rows` for both sizes, with a PE that routes no token, and in the checked variant,
/// three rounds through one dispatcher with `combine` in the middle one (the two share the
/// combine buffer and the once-per-dispatch rule); then dispatch + `combine_rows` captured into
/// a graph and replayed.
fn combine_rows(p: &Pgas) -> CaseResult {
    let last = p.n_pes() - 1;
    for (cfg, empty, checked) in [
        (CFG, None, false),
        (SMALL, None, false),
        (CFG, Some(last), false),
        (CFG, None, true),
    ] {
        let what = format!(
            "hidden {}, empty PE {empty:?}, checked {checked}",
            cfg.hidden
        );
        let mut m = MoeDispatcher::new(p, cfg)?;
        m.set_checked(checked);
        for i in 0..3 {
            let mut r = round(p, &cfg, 30 + i, empty)?;
            let routing = m.route(&r.routings[p.my_pe()].0, &r.routings[p.my_pe()].1)?;
            m.dispatch(&r.x, &routing)?;
            if i == 1 {
                m.combine(&r.expert_out, &routing, &mut r.out)?;
                check(p, &mut m, &cfg, &r, &format!("{what}, round 2 (combine)"))?;
            } else {
                pull_round(p, &mut m, &mut r, &routing)?;
                check_rows(p, &cfg, &r, &format!("{what}, round {}", i + 1))?;
            }
        }
        util::settle(p)?;
    }
    util::untracked(p, combine_rows_graph)
}

/// Dispatch + `combine_rows` captured once (after an eager round loaded the kernels) and
/// replayed 3 times: the input, written before the capture, is written by nothing else.
fn combine_rows_graph(p: &Pgas) -> CaseResult {
    let mut m = MoeDispatcher::new(p, CFG)?;
    let mut r = round(p, &CFG, 40, None)?;
    let routing = m.route(&r.routings[p.my_pe()].0, &r.routings[p.my_pe()].1)?;
    m.dispatch(&r.x, &routing)?;
    pull_round(p, &mut m, &mut r, &routing)?;
    util::settle(p)?;
    let stream = p.stream().clone();
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let captured = (|| -> pgas::Result<()> {
        m.dispatch(&r.x, &routing)?;
        m.combine_rows(&routing, &mut r.out)
    })();
    let graph = stream.end_capture(CUgraphInstantiate_flags(0))?;
    captured?;
    let graph = graph.ok_or("the capture produced no graph")?;
    stream.memset_zeros(&mut r.out)?;
    for _ in 0..3 {
        graph.launch()?;
    }
    stream.synchronize()?;
    drop(graph);
    util::settle(p)?;
    check_rows(p, &CFG, &r, "3 graph replays of combine_rows")?;
    util::settle(p)
}

/// FP8 dispatch: received rows equal the host's quantize-and-expand of the sent rows bit for bit,
/// the metadata and both combines as with bf16; a PE with no token; the checked variant; then
/// bf16 again through the same dispatcher, and FP8 once more (its buffers kept).
fn fp8_dispatch(p: &Pgas) -> CaseResult {
    let me = p.my_pe();
    let last = p.n_pes() - 1;
    let probe = p.alloc::<u64>(1)?;
    if p.first_unreachable(&probe, 0..p.n_pes())?.is_some() {
        // Off NVLink rows move by NVSHMEM's puts, which have no FP8 type: refused, naming it.
        let mut m = MoeDispatcher::new(p, FP8)?;
        return expect(m.set_fp8_dispatch(true), "keep bf16 dispatch off NVLink");
    }
    for (empty, checked) in [(None, false), (Some(last), false), (None, true)] {
        let what = format!("FP8, empty PE {empty:?}, checked {checked}");
        let mut m = MoeDispatcher::new(p, FP8)?;
        m.set_checked(checked);
        for (i, fp8) in [true, false, true].into_iter().enumerate() {
            m.set_fp8_dispatch(fp8)?;
            let mut r = round(p, &FP8, 50 + i as u64, empty)?;
            let routing = m.route(&r.routings[me].0, &r.routings[me].1)?;
            m.dispatch(&r.x, &routing)?;
            if i == 1 {
                pull_round(p, &mut m, &mut r, &routing)?;
                check_rows(p, &FP8, &r, &format!("{what}, round 2 (bf16)"))?;
            } else {
                m.combine(&r.expert_out, &routing, &mut r.out)?;
                check_as(
                    p,
                    &mut m,
                    &FP8,
                    &r,
                    &format!("{what}, round {}", i + 1),
                    fp8,
                )?;
            }
        }
        util::settle(p)?;
    }
    Ok(())
}

fn expect<T: std::fmt::Debug>(r: pgas::Result<T>, words: &str) -> CaseResult {
    match r {
        Ok(v) => Err(format!("accepted ({v:?}); expected an error saying '{words}'").into()),
        Err(e) if e.to_string().contains(words) => Ok(()),
        Err(e) => Err(format!("error '{e}' does not say '{words}'").into()),
    }
}

/// Every bad input is an `Err` on every PE and launches nothing; the dispatcher works after.
fn bad_input(p: &Pgas) -> CaseResult {
    let (me, n) = (p.my_pe(), p.n_pes());
    let last = n - 1;
    // Sizes out of range, and sizes that differ between PEs.
    expect(
        MoeDispatcher::new(p, MoeConfig { hidden: 100, ..CFG }),
        "multiple of 8",
    )?;
    if n > 1 {
        let cfg = MoeConfig {
            hidden: if me == last { 2048 } else { 1024 },
            ..CFG
        };
        expect(MoeDispatcher::new(p, cfg), "hidden: PE 0 1024")?;
    }
    // A heap too small for the buffers (a 400-GiB receive buffer).
    expect(
        MoeDispatcher::new(
            p,
            MoeConfig {
                max_tokens: 1 << 22,
                hidden: 51200,
                ..CFG
            },
        ),
        "MoeConfig::symmetric_bytes",
    )?;
    let mut m = MoeDispatcher::new(p, CFG)?;
    // FP8 dispatch: a choice that differs between PEs, then a hidden size it cannot scale.
    if n > 1 {
        expect(
            m.set_fp8_dispatch(me == last),
            "every PE must make the same choice",
        )?;
    }
    expect(m.set_fp8_dispatch(true), "multiple of 128")?;
    let k = CFG.top_k;
    let experts = (n * CFG.experts_per_pe) as i32;
    let good = reference::sample_routing(&CFG, n, 10, 9, false);
    // The last PE's expert id is out of range: every PE fails, naming it.
    let mut idx = good.0.clone();
    if me == last {
        idx[3 * k + 1] = experts;
    }
    let r = m.route(&idx, &good.1);
    if me == last {
        expect(
            r,
            &format!("token 3 slot 1: expert id {experts} is out of range"),
        )?;
    } else {
        expect(r, &format!("PE {last}'s routing was rejected"))?;
    }
    let mut dup = good.0.clone();
    dup[k + 2] = dup[k];
    expect(
        m.route(&dup, &good.1),
        "a token goes to each expert at most once",
    )?;
    expect(
        m.route(&good.0[..k + 1], &good.1[..k + 1]),
        "not a multiple of top_k",
    )?;
    let many = reference::sample_routing(&CFG, n, CFG.max_tokens + 1, 9, false);
    expect(
        m.route(&many.0, &many.1),
        "more than the dispatcher's max_tokens",
    )?;
    // Local calls in the wrong order or with short buffers (the same on every PE).
    let routing = m.route(&good.0, &good.1)?;
    let s = p.stream();
    let h = CFG.hidden;
    let mut out = s.alloc_zeros::<bf16>(10 * h)?;
    let y = s.alloc_zeros::<bf16>(CFG.max_pairs(n) * h)?;
    expect(m.combine(&y, &routing, &mut out), "before a dispatch")?;
    expect(m.combine_rows(&routing, &mut out), "before a dispatch")?;
    let short = s.alloc_zeros::<bf16>(10 * h - 1)?;
    expect(m.dispatch(&short, &routing), "tokens * hidden")?;
    let x = s.alloc_zeros::<bf16>(10 * h)?;
    m.dispatch(&x, &routing)?;
    let other = m.route(&good.0, &good.1)?;
    expect(
        m.combine(&y, &other, &mut out),
        "the routing of the last dispatch",
    )?;
    expect(
        m.combine_rows(&other, &mut out),
        "the routing of the last dispatch",
    )?;
    expect(
        m.combine(&short, &routing, &mut out),
        "MoeConfig::max_pairs",
    )?;
    let mut short_out = s.alloc_zeros::<bf16>(10 * h - 1)?;
    expect(m.combine(&y, &routing, &mut short_out), "tokens * hidden")?;
    expect(m.combine_rows(&routing, &mut short_out), "tokens * hidden")?;
    m.combine(&y, &routing, &mut out)?;
    expect(
        m.combine(&y, &routing, &mut out),
        "combine runs once per dispatch",
    )?;
    expect(
        m.combine_rows(&routing, &mut out),
        "combine runs once per dispatch",
    )?;
    // The dispatcher works after every refusal: a whole round against the reference.
    let mut r = round(p, &CFG, 4, None)?;
    run_round(&mut m, &mut r, me)?;
    check(p, &mut m, &CFG, &r, "after the refusals")?;
    util::settle(p)
}
