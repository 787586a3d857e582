//! `pgas::ops::AllReduceRmsNorm`: the fused all-reduce + residual add + RMSNorm against the host
//! (`ops::allreduce_rmsnorm::reference`: the residual bit for bit, the norm within two bf16
//! steps) at 1, 7, 64 and 1000 tokens, one-shot, two-shot, low-latency and automatic, over
//! two calls each
//! (the residual carries over), with `x` a view into a larger tensor; ten calls of mixed
//! algorithms and token counts queued with no host wait; a CUDA graph of four calls replayed
//! four times; the unfused form (`pgas::coll` all-reduce + `add_rms_norm_on`); and every bad
//! input, each an `Err` before anything is launched, then a good call.

use crate::runner::{case, Case};
use crate::util::{ensure, CaseResult};
use pgas::coll::{Algorithm, Comm};
use pgas::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use pgas::ops::allreduce_rmsnorm::{reference, within_tolerance};
use pgas::ops::AllReduceRmsNorm;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("ops/allreduce_rmsnorm", sweep),
    case("ops/allreduce_rmsnorm_back_to_back", back_to_back),
    case("ops/allreduce_rmsnorm_graph", graph),
    case("ops/allreduce_rmsnorm_unfused", unfused),
    case("ops/allreduce_rmsnorm_bad_input", bad_input),
];

const EPS: f32 = 1e-5;

/// A small value exact in bf16, different per element, PE and salt (sums of a few are exact).
fn val(i: usize, pe: usize, salt: usize) -> bf16 {
    bf16::from_f32(((i * 7 + pe * 13 + salt * 5) % 17) as f32 / 8.0 - 1.0)
}

fn weights(hidden: usize) -> Vec<bf16> {
    (0..hidden)
        .map(|i| bf16::from_f32(1.0 + (i % 5) as f32 / 8.0))
        .collect()
}

/// Every PE's `x` of call `salt`.
fn parts(n: usize, len: usize, salt: usize) -> Vec<Vec<bf16>> {
    (0..n)
        .map(|pe| (0..len).map(|i| val(i, pe, salt)).collect())
        .collect()
}

/// The residual bit for bit and the norm within tolerance.
fn check(what: &str, (r, y): (&[bf16], &[bf16]), (rw, yw): (&[bf16], &[bf16])) -> CaseResult {
    ensure(r.len() == rw.len() && y.len() == yw.len(), || {
        format!(
            "{what}: lengths {} / {}, expected {}",
            r.len(),
            y.len(),
            rw.len()
        )
    })?;
    if let Some(i) = (0..r.len()).find(|&i| r[i].to_bits() != rw[i].to_bits()) {
        return Err(format!("{what}: residual[{i}] is {}, expected {}", r[i], rw[i]).into());
    }
    if let Some(i) = (0..y.len()).find(|&i| !within_tolerance(y[i], yw[i])) {
        return Err(format!("{what}: out[{i}] is {}, expected {}", y[i], yw[i]).into());
    }
    Ok(())
}

fn sweep(p: &Pgas) -> CaseResult {
    let (me, n) = (p.my_pe(), p.n_pes());
    let s = p.stream().clone();
    for (hidden, tokens_list) in [(2048, &[1usize, 7, 64, 1000][..]), (8192, &[1, 64][..])] {
        let max = *tokens_list.iter().max().unwrap();
        let mut op = AllReduceRmsNorm::new(p, hidden, max, EPS)?;
        let w_h = weights(hidden);
        let weight = p.alloc_from(&w_h)?;
        // x lives 8 elements into a larger tensor: a view, still 16-byte aligned.
        let mut xbig = p.alloc::<bf16>(max * hidden + 16)?;
        for &tokens in tokens_list {
            let len = tokens * hidden;
            for alg in [
                Algorithm::OneShot,
                Algorithm::TwoShot,
                Algorithm::LowLatency,
                Algorithm::Auto,
            ] {
                let mut res_h: Vec<bf16> = (0..len).map(|i| val(i, 0, 9)).collect();
                let mut residual = p.alloc_from(&res_h)?;
                let mut out = p.alloc::<bf16>(len)?;
                for call in 0..2 {
                    let xs = parts(n, len, call);
                    xbig.view_mut(8..8 + len)?.copy_from(&xs[me])?;
                    p.barrier_all()?;
                    let x = xbig.view(8..8 + len)?;
                    let used = op.run(&x, &mut residual, &weight, &mut out, alg.on(&s))?;
                    s.synchronize()?;
                    ensure(alg == Algorithm::Auto || used == alg, || {
                        format!("asked for {alg:?}, ran {used:?}")
                    })?;
                    let refs: Vec<&[bf16]> = xs.iter().map(Vec::as_slice).collect();
                    let want = reference(&refs, &res_h, &w_h, hidden, EPS);
                    let got = (residual.to_vec()?, out.to_vec()?);
                    check(
                        &format!("{tokens} x {hidden}, {alg:?}, call {call}"),
                        (&got.0, &got.1),
                        (&want.0, &want.1),
                    )?;
                    res_h = want.0;
                    // No PE rewrites x before every PE's call is done.
                    p.barrier_all()?;
                }
            }
        }
    }
    Ok(())
}

/// Ten calls of mixed token counts and algorithms, queued with no host wait: the flags' call
/// counters keep consecutive calls apart. At hidden 1024 the algorithms in turn; at hidden 8192
/// mostly the low-latency form, whose rows split over 8 blocks up to 4 tokens and stay whole
/// above (`ll_slices`), so consecutive calls meet at their groups' barriers in different
/// groupings.
fn back_to_back(p: &Pgas) -> CaseResult {
    use Algorithm::{Auto, LowLatency as Ll, OneShot, TwoShot};
    for (hidden, algs) in [
        (1024, [OneShot, TwoShot, Ll, Auto]),
        (8192, [Ll, Ll, Auto, Ll]),
    ] {
        queued_calls(p, hidden, algs)?;
    }
    Ok(())
}

/// [`back_to_back`] at one hidden size, the algorithms taken in turn.
fn queued_calls(p: &Pgas, hidden: usize, algs: [Algorithm; 4]) -> CaseResult {
    let (me, n) = (p.my_pe(), p.n_pes());
    let tokens = [3usize, 40, 1, 40, 17, 3, 64, 2, 40, 5];
    let mut op = AllReduceRmsNorm::new(p, hidden, 64, EPS)?;
    let w_h = weights(hidden);
    let weight = p.alloc_from(&w_h)?;
    let all: Vec<Vec<Vec<bf16>>> = (0..tokens.len())
        .map(|c| parts(n, 64 * hidden, c))
        .collect();
    let xs = all
        .iter()
        .map(|a| p.alloc_from(&a[me]))
        .collect::<pgas::Result<Vec<_>>>()?;
    let mut res_h: Vec<bf16> = (0..64 * hidden).map(|i| val(i, 0, 9)).collect();
    let mut residual = p.alloc_from(&res_h)?;
    let mut out = p.alloc::<bf16>(64 * hidden)?;
    let mut want_out = Vec::new();
    p.barrier_all()?;
    let s = p.stream().clone();
    for (c, &t) in tokens.iter().enumerate() {
        let len = t * hidden;
        let x = xs[c].view(0..len)?;
        let mut r = residual.view_mut(0..len)?;
        let mut o = out.view_mut(0..len)?;
        op.run(&x, &mut r, &weight, &mut o, algs[c % 4].on(&s))?;
        let refs: Vec<&[bf16]> = all[c].iter().map(|v| &v[..len]).collect();
        let (r_new, y) = reference(&refs, &res_h[..len], &w_h, hidden, EPS);
        res_h[..len].copy_from_slice(&r_new);
        want_out = y;
    }
    s.synchronize()?;
    let last = tokens[tokens.len() - 1] * hidden;
    let got = (residual.to_vec()?, out.view(0..last)?.to_vec()?);
    check(
        &format!("after 10 queued calls at hidden {hidden}"),
        (&got.0, &got.1),
        (&res_h, &want_out),
    )?;
    p.barrier_all()?;
    Ok(())
}

/// Four calls (one-shot, two-shot, low-latency, automatic) captured into a CUDA graph,
/// replayed 4 times: 13 rows of 1024, and 3 rows of 8192, which the low-latency form (and so
/// `Auto`) splits over 8 blocks each, so each replay meets at the groups' barriers again.
fn graph(p: &Pgas) -> CaseResult {
    for (hidden, tokens) in [(1024, 13), (8192, 3)] {
        replayed(p, hidden, tokens)?;
    }
    Ok(())
}

/// [`graph`] at one size.
fn replayed(p: &Pgas, hidden: usize, tokens: usize) -> CaseResult {
    let (me, n) = (p.my_pe(), p.n_pes());
    let len = tokens * hidden;
    let mut op = AllReduceRmsNorm::new(p, hidden, tokens, EPS)?;
    op.prewarm()?;
    let w_h = weights(hidden);
    let weight = p.alloc_from(&w_h)?;
    let xs_h = parts(n, len, 3);
    let x = p.alloc_from(&xs_h[me])?;
    let mut res_h: Vec<bf16> = (0..len).map(|i| val(i, 0, 9)).collect();
    let mut residual = p.alloc_from(&res_h)?;
    let mut out = p.alloc::<bf16>(len)?;
    let s = p.cuda().new_stream()?;
    p.barrier_all()?;
    s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let mut r = Ok(Algorithm::Auto);
    for alg in [
        Algorithm::OneShot,
        Algorithm::TwoShot,
        Algorithm::LowLatency,
        Algorithm::Auto,
    ] {
        r = r.and(op.run(&x, &mut residual, &weight, &mut out, alg.on(&s)));
    }
    let g = s.end_capture(CUgraphInstantiate_flags(0))?;
    r?;
    let g = g.ok_or("empty capture")?;
    for _ in 0..4 {
        g.launch()?;
    }
    s.synchronize()?;
    let refs: Vec<&[bf16]> = xs_h.iter().map(Vec::as_slice).collect();
    let mut y = Vec::new();
    for _ in 0..16 {
        let (r_new, y_new) = reference(&refs, &res_h, &w_h, hidden, EPS);
        res_h = r_new;
        y = y_new;
    }
    let got = (residual.to_vec()?, out.to_vec()?);
    check(
        &format!("{tokens} x {hidden}, after 4 replays of 4 captured calls"),
        (&got.0, &got.1),
        (&res_h, &y),
    )?;
    drop(g);
    p.barrier_all()?;
    Ok(())
}

/// `pgas::coll` all-reduce, then the norm alone: the unfused form, against the host.
fn unfused(p: &Pgas) -> CaseResult {
    let (me, n) = (p.my_pe(), p.n_pes());
    let (hidden, tokens) = (2048, 7);
    let len = tokens * hidden;
    let mut op = AllReduceRmsNorm::new(p, hidden, tokens, EPS)?;
    let mut comm = Comm::new(p, Team::WORLD)?;
    let w_h = weights(hidden);
    let weight = p.alloc_from(&w_h)?;
    let xs_h = parts(n, len, 4);
    let x = p.alloc_from(&xs_h[me])?;
    let res_h: Vec<bf16> = (0..len).map(|i| val(i, 0, 9)).collect();
    let mut residual = p.alloc_from(&res_h)?;
    let mut reduced = p.alloc::<bf16>(len)?;
    let mut out = p.alloc::<bf16>(len)?;
    p.barrier_all()?;
    let s = p.stream().clone();
    comm.all_reduce(&mut reduced, &x, ReduceOp::Sum, Algorithm::OneShot.on(&s))?;
    op.add_rms_norm_on(&s, &reduced, &mut residual, &weight, &mut out)?;
    s.synchronize()?;
    // The all-reduce rounds the sum to bf16 first: the host does the same, from the sum.
    let sum: Vec<bf16> = reduced.to_vec()?;
    let (rw, yw) = reference(&[&sum], &res_h, &w_h, hidden, EPS);
    let got = (residual.to_vec()?, out.to_vec()?);
    check("all-reduce + add_rms_norm_on", (&got.0, &got.1), (&rw, &yw))?;
    p.barrier_all()?;
    Ok(())
}

fn expect_err<T: std::fmt::Debug>(what: &str, r: pgas::Result<T>, needle: &str) -> CaseResult {
    match r {
        Err(e) if e.to_string().contains(needle) => Ok(()),
        other => {
            Err(format!("{what}: expected an Err containing {needle:?}, got {other:?}").into())
        }
    }
}

/// Another name for memory of a tensor (so that two arguments can overlap, which the borrow
/// checker would not let views do).
struct Alias {
    ptr: u64,
    len: usize,
}

// SAFETY: made only from live symmetric tensors of the case, within their length, and used
// while they live.
unsafe impl SymRegion<bf16> for Alias {
    fn as_device_ptr(&self) -> u64 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn extent(&self) -> usize {
        self.len
    }
}

// Long on purpose: one refusal after another on the same operation and buffers, each with the words
// its error must contain.
fn bad_input(p: &Pgas) -> CaseResult {
    let (me, n) = (p.my_pe(), p.n_pes());
    if n > 1 {
        let h = 64 + 64 * (me % 2);
        expect_err(
            "hidden differing between PEs",
            AllReduceRmsNorm::new(p, h, 4, EPS),
            "hidden: PE 0 64, PE 1 128",
        )?;
    }
    expect_err(
        "hidden 12",
        AllReduceRmsNorm::new(p, 12, 4, EPS),
        "multiple of 8",
    )?;
    expect_err(
        "max_tokens 0",
        AllReduceRmsNorm::new(p, 64, 0, EPS),
        "max_tokens is 0",
    )?;
    expect_err(
        "eps NaN",
        AllReduceRmsNorm::new(p, 64, 4, f32::NAN),
        "finite eps",
    )?;
    let hidden = 64;
    let len = 4 * hidden;
    let mut op = AllReduceRmsNorm::new(p, hidden, 4, EPS)?;
    let s = p.stream().clone();
    let w_h = weights(hidden);
    let weight = p.alloc_from(&w_h)?;
    let xs_h = parts(n, 5 * hidden, 5);
    let x = p.alloc_from(&xs_h[me])?;
    let res_h: Vec<bf16> = (0..len).map(|i| val(i, 0, 9)).collect();
    let mut residual = p.alloc_from(&res_h)?;
    let mut out = p.alloc::<bf16>(5 * hidden)?;
    let xv = x.view(0..len)?;
    expect_err(
        "not whole rows",
        op.run(
            &x.view(0..len - 1)?,
            &mut residual,
            &weight,
            &mut out,
            Algorithm::Auto.on(&s),
        ),
        "whole rows",
    )?;
    expect_err(
        "more tokens than max_tokens",
        op.run(
            &x.view(0..len + hidden)?,
            &mut residual,
            &weight,
            &mut out,
            Algorithm::Auto.on(&s),
        ),
        "at most 4 tokens",
    )?;
    expect_err(
        "out of another length",
        op.run(
            &xv,
            &mut residual,
            &weight,
            &mut out,
            Algorithm::Auto.on(&s),
        ),
        "out (the input's length)",
    )?;
    expect_err(
        "weight of another length",
        op.run(
            &xv,
            &mut residual,
            &weight.view(0..hidden - 8)?,
            &mut out.view_mut(0..len)?,
            Algorithm::Auto.on(&s),
        ),
        "weight (hidden)",
    )?;
    expect_err(
        "a misaligned x",
        op.run(
            &x.view(1..len + 1)?,
            &mut residual,
            &weight,
            &mut out.view_mut(0..len)?,
            Algorithm::Auto.on(&s),
        ),
        "16-byte boundary",
    )?;
    let at = out.as_device_ptr();
    let mut o_alias = Alias { ptr: at, len };
    let mut r_alias = Alias {
        ptr: at + hidden as u64 * 2,
        len,
    };
    expect_err(
        "overlapping residual and out",
        op.run(
            &xv,
            &mut r_alias,
            &weight,
            &mut o_alias,
            Algorithm::Auto.on(&s),
        ),
        "overlap",
    )?;
    expect_err(
        "NVSHMEM's algorithm",
        op.run(
            &xv,
            &mut residual,
            &weight,
            &mut out.view_mut(0..len)?,
            Algorithm::Nvshmem.on(&s),
        ),
        "low-latency forms only",
    )?;
    // Rows of every PE past a block's shared memory: no low-latency form.
    let wide = (pgas::ops::allreduce_rmsnorm::LL_MAX_SHARED_BYTES / 2 / n + 8).next_multiple_of(8);
    let mut big_op = AllReduceRmsNorm::new(p, wide, 1, EPS)?;
    ensure(!big_op.low_latency_available(), || {
        format!("hidden {wide} on {n} PEs offers the low-latency form")
    })?;
    let bx = p.alloc::<bf16>(wide)?;
    let (mut br, mut bo, bw) = (
        p.alloc::<bf16>(wide)?,
        p.alloc::<bf16>(wide)?,
        p.alloc::<bf16>(wide)?,
    );
    expect_err(
        "low latency past the shared memory",
        big_op.run(&bx, &mut br, &bw, &mut bo, Algorithm::LowLatency.on(&s)),
        "LL_MAX_SHARED_BYTES",
    )?;
    // Nothing was launched: a good call works and matches the host.
    p.barrier_all()?;
    op.run(
        &xv,
        &mut residual,
        &weight,
        &mut out.view_mut(0..len)?,
        Algorithm::Auto.on(&s),
    )?;
    s.synchronize()?;
    let refs: Vec<&[bf16]> = xs_h.iter().map(|v| &v[..len]).collect();
    let (rw, yw) = reference(&refs, &res_h, &w_h, hidden, EPS);
    let got = (residual.to_vec()?, out.view(0..len)?.to_vec()?);
    check(
        "a good call after the refusals",
        (&got.0, &got.1),
        (&rw, &yw),
    )?;
    p.barrier_all()?;
    Ok(())
}
