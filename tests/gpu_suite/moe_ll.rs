//! `pgas::ops::moe::LowLatencyMoe`, the decode-time mode: every received row against the
//! routings of every PE (each (local expert, source) region holds exactly that source's pairs
//! for the expert, each row its token's), the counts, and every combined element against a host
//! reference, bit for bit; for a routing with unused slots (`-1`), ids out of range (ignored),
//! an expert twice in a token, a different token count on each PE and one PE with no token,
//! three rounds back to back; a CUDA graph of dispatch + combine replayed, then an eager round;
//! and the bad inputs, each an `Err` that launches nothing. Where a peer is not load/store
//! reachable (another node, `PGAS_PEER_ACCESS`), each case checks the mode's refusal instead.

use crate::runner::{case, Case};
use crate::util::{self, ensure, CaseResult};
use pgas::coll::Comm;
use pgas::cudarc::driver::CudaSlice;
use pgas::ops::moe::{LowLatencyMoe, MoeConfig};
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("moe/ll_round_trip", round_trip),
    case("moe/ll_graph_replay", graph_replay),
    case("moe/ll_bad_input", bad_input),
];

/// hidden 264: 33 vectors a row, so lane 0 takes two.
const LL: MoeConfig = MoeConfig {
    max_tokens: 40,
    hidden: 264,
    top_k: 4,
    experts_per_pe: 3,
};

/// Weights by slot: powers of two, so every weighted sum below is exact in f32.
const WEIGHTS: [f32; 4] = [1.0, 0.5, 0.25, 0.125];

/// Token `t` of PE `pe`, element `c`: multiples of 1/4, exact in bf16.
fn x_value(pe: usize, t: usize, c: usize) -> f32 {
    ((pe * 13 + t * 7 + c) % 23) as f32 * 0.25 - 2.5
}

/// PE `pe`'s tokens in round `seed` (PE `n - 1` has none in odd rounds).
fn tokens_of(n: usize, pe: usize, seed: usize) -> usize {
    if n > 1 && pe == n - 1 && seed % 2 == 1 {
        0
    } else {
        LL.max_tokens - (pe * 7 + seed) % 11
    }
}

/// PE `pe`'s expert ids in round `seed`: `tokens * top_k`, with `-1` slots, ids past the last
/// expert (which send nothing), and now and then one expert twice in a token.
fn ids_of(n: usize, pe: usize, seed: usize) -> Vec<i32> {
    let ee = n * LL.experts_per_pe;
    (0..tokens_of(n, pe, seed) * LL.top_k)
        .map(|i| {
            let h = (i * 31 + pe * 17 + seed * 7) % (ee + 3);
            h as i32 - 1
        })
        .collect()
}

/// Whether `id` is an expert (the others send nothing).
fn valid(id: i32, n: usize) -> bool {
    id >= 0 && (id as usize) < n * LL.experts_per_pe
}

/// This PE's buffers for one round.
struct Round {
    tokens: usize,
    ids: Vec<i32>,
    idx: CudaSlice<i32>,
    wts: CudaSlice<f32>,
    x: CudaSlice<bf16>,
    out: CudaSlice<bf16>,
}

fn round(p: &Pgas, seed: usize) -> pgas::Result<Round> {
    let (me, n) = (p.my_pe(), p.n_pes());
    let (h, k) = (LL.hidden, LL.top_k);
    let tokens = tokens_of(n, me, seed);
    let ids = ids_of(n, me, seed);
    let s = p.stream();
    let x: Vec<bf16> = (0..tokens.max(1) * h)
        .map(|i| bf16::from_f32(x_value(me, i / h, i % h)))
        .collect();
    let wts: Vec<f32> = (0..tokens.max(1) * k).map(|i| WEIGHTS[i % k]).collect();
    let mut idx = ids.clone();
    idx.resize(tokens.max(1) * k, -1);
    Ok(Round {
        tokens,
        idx: s.clone_htod(&idx)?,
        wts: s.clone_htod(&wts)?,
        x: s.clone_htod(&x)?,
        out: s.alloc_zeros::<bf16>(LL.max_tokens * h)?,
        ids,
    })
}

/// Checks the received rows and counts of round `seed` here against every PE's routing, and
/// returns the experts' output: each row times its local expert's number plus one (exact).
fn check_received(
    p: &Pgas, ll: &LowLatencyMoe, seed: usize,
) -> Result<Vec<bf16>, Box<dyn std::error::Error>> {
    let (me, n) = (p.my_pe(), p.n_pes());
    let (h, k, m, el) = (LL.hidden, LL.top_k, LL.max_tokens, LL.experts_per_pe);
    let counts = ll.recv_counts().to_vec()?;
    let rows = ll.recv_x().to_vec()?;
    let src = ll.recv_src().to_vec()?;
    let mut out = vec![bf16::from_f32(0.0); ll.expert_out_len()];
    for le in 0..el {
        for s in 0..n {
            let g = (me * el + le) as i32;
            let mut want: Vec<usize> = (0..ids_of(n, s, seed).len())
                .filter(|&i| ids_of(n, s, seed)[i] == g)
                .collect();
            let q = le * n + s;
            let c = counts[q] as usize;
            if c != want.len() {
                return Err(format!(
                    "expert {le} here got {c} rows from PE {s}; expected {}",
                    want.len()
                )
                .into());
            }
            let mut got: Vec<usize> = (0..c).map(|j| src[q * m + j] as usize).collect();
            got.sort_unstable();
            want.sort_unstable();
            if got != want {
                return Err(format!(
                    "expert {le} here from PE {s}: pairs {got:?}, expected {want:?}"
                )
                .into());
            }
            for j in 0..c {
                let r = q * m + j;
                let t = src[r] as usize / k;
                for col in 0..h {
                    let v = rows[r * h + col].to_f32();
                    if v != x_value(s, t, col) {
                        return Err(format!(
                            "row {r} (PE {s}'s token {t}) element {col} = {v}, expected {}",
                            x_value(s, t, col)
                        )
                        .into());
                    }
                    out[r * h + col] = bf16::from_f32(v * (le + 1) as f32);
                }
            }
        }
    }
    Ok(out)
}

/// Checks `r.out` against the combine's sums: for each PE `d` holding some of the token's
/// experts, `sum over its valid slots j of w_j * y_j` in f32 rounded to bf16, then those in PE
/// order in f32, rounded to bf16; `y` is `expert` of the slot's expert and the token's row.
fn check_out(p: &Pgas, r: &Round, expert: impl Fn(usize, usize, usize) -> f32) -> CaseResult {
    let (me, n) = (p.my_pe(), p.n_pes());
    let (h, k, el) = (LL.hidden, LL.top_k, LL.experts_per_pe);
    let out = p.stream().clone_dtoh(&r.out)?;
    for t in 0..r.tokens {
        let slots = &r.ids[t * k..(t + 1) * k];
        for c in 0..h {
            let mut acc = 0.0f32;
            for d in 0..n {
                let on_d = |id: i32| valid(id, n) && id as usize / el == d;
                if !slots.iter().any(|&id| on_d(id)) {
                    continue;
                }
                let mut part = 0.0f32;
                for (&id, w) in slots.iter().zip(WEIGHTS) {
                    if on_d(id) {
                        part += w * bf16::from_f32(expert(id as usize % el, t, c)).to_f32();
                    }
                }
                acc += bf16::from_f32(part).to_f32();
            }
            let want = bf16::from_f32(acc);
            ensure(out[t * h + c] == want, || {
                format!(
                    "PE {me} token {t} element {c}: {} after combine, expected {}",
                    out[t * h + c],
                    want
                )
            })?;
        }
    }
    Ok(())
}

/// The mode for `LL`, or `None` where this PE cannot reach every peer by loads and stores: then
/// the refusal has been checked (it must name the mode that works there, `MoeDispatcher`).
fn low_latency(p: &Pgas) -> Result<Option<LowLatencyMoe>, Box<dyn std::error::Error>> {
    let made = LowLatencyMoe::new(p, LL);
    if Comm::new(p, Team::WORLD)?.peers_reachable() {
        return Ok(Some(made?));
    }
    expect(made, "MoeDispatcher")?;
    Ok(None)
}

fn round_trip(p: &Pgas) -> CaseResult {
    let me = p.my_pe();
    let Some(mut ll) = low_latency(p)? else {
        return Ok(());
    };
    for seed in 0..3 {
        let mut r = round(p, seed)?;
        ll.dispatch(&r.x, &r.idx, &r.wts, r.tokens)?;
        p.stream().synchronize()?;
        let y = check_received(p, &ll, seed)?;
        let y = p.stream().clone_htod(&y)?;
        ll.combine(&y, &r.idx, r.tokens, &mut r.out)?;
        p.stream().synchronize()?;
        check_out(p, &r, |le, t, c| x_value(me, t, c) * (le + 1) as f32)?;
        util::settle(p)?;
    }
    Ok(())
}

/// What every expert writes in the graph round: a value of its local expert and the column
/// only, so the result does not depend on which slot a row landed in.
fn flat(le: usize, c: usize) -> f32 {
    (le + 1) as f32 * 0.5 + (c % 3) as f32 * 0.25
}

fn graph_replay(p: &Pgas) -> CaseResult {
    util::untracked(p, graph_replay_untracked)
}

fn graph_replay_untracked(p: &Pgas) -> CaseResult {
    let n = p.n_pes();
    let (h, m, el) = (LL.hidden, LL.max_tokens, LL.experts_per_pe);
    let Some(mut ll) = low_latency(p)? else {
        return Ok(());
    };
    let y: Vec<bf16> = (0..ll.expert_out_len())
        .map(|i| bf16::from_f32(flat(i / h / (n * m) % el, i % h)))
        .collect();
    let y = p.stream().clone_htod(&y)?;
    // An eager round first: the kernels compile outside the capture.
    let mut r = round(p, 4)?;
    ll.dispatch(&r.x, &r.idx, &r.wts, r.tokens)?;
    ll.combine(&y, &r.idx, r.tokens, &mut r.out)?;
    p.stream().synchronize()?;
    check_out(p, &r, |le, _, c| flat(le, c))?;
    util::settle(p)?;
    let stream = p.stream().clone();
    // Cleared before the replays (same stream): what the check finds, the replays wrote.
    stream.memset_zeros(&mut r.out)?;
    util::replay_captured(p, &stream, 3, || {
        ll.dispatch(&r.x, &r.idx, &r.wts, r.tokens)?;
        ll.combine(&y, &r.idx, r.tokens, &mut r.out)
    })?;
    check_out(p, &r, |le, _, c| flat(le, c))?;
    util::settle(p)?;
    // An eager round after the replays: the epochs counted them on the GPU.
    let mut r2 = round(p, 5)?;
    ll.dispatch(&r2.x, &r2.idx, &r2.wts, r2.tokens)?;
    ll.combine(&y, &r2.idx, r2.tokens, &mut r2.out)?;
    p.stream().synchronize()?;
    check_out(p, &r2, |le, _, c| flat(le, c))?;
    util::settle(p)
}

fn expect<T>(r: pgas::Result<T>, words: &str) -> CaseResult {
    match r {
        Ok(_) => Err(format!("accepted; expected an error saying '{words}'").into()),
        Err(e) if e.to_string().contains(words) => Ok(()),
        Err(e) => Err(format!("error '{e}' does not say '{words}'").into()),
    }
}

fn bad_input(p: &Pgas) -> CaseResult {
    let (me, n) = (p.my_pe(), p.n_pes());
    expect(
        LowLatencyMoe::new(p, MoeConfig { hidden: 100, ..LL }),
        "multiple of 8",
    )?;
    expect(
        LowLatencyMoe::new(
            p,
            MoeConfig {
                max_tokens: 5000,
                ..LL
            },
        ),
        "at most 1024 tokens",
    )?;
    // 1024 tokens from each PE of 2^22 vectors each: past 32-bit vector counts.
    expect(
        LowLatencyMoe::new(
            p,
            MoeConfig {
                max_tokens: 1024,
                hidden: 1 << 25,
                experts_per_pe: 1,
                ..LL
            },
        ),
        "16-byte vectors (n_pes * max_tokens of them) in 32 bits",
    )?;
    if n > 1 {
        let top_k = if me == n - 1 { 2 } else { 4 };
        expect(LowLatencyMoe::new(p, MoeConfig { top_k, ..LL }), "top_k")?;
    }
    let Some(mut ll) = low_latency(p)? else {
        return Ok(());
    };
    let mut r = round(p, 0)?;
    let y = p.stream().alloc_zeros::<bf16>(ll.expert_out_len())?;
    expect(
        ll.combine(&y, &r.idx, r.tokens, &mut r.out),
        "no dispatch since the last combine",
    )?;
    expect(
        ll.dispatch(&r.x, &r.idx, &r.wts, LL.max_tokens + 1),
        "at most max_tokens",
    )?;
    let short = p.stream().alloc_zeros::<i32>(1)?;
    if r.tokens > 0 {
        expect(ll.dispatch(&r.x, &short, &r.wts, r.tokens), "expert ids")?;
        let few = p.stream().alloc_zeros::<f32>(1)?;
        expect(ll.dispatch(&r.x, &r.idx, &few, r.tokens), "the weights")?;
    }
    // A good round still works after the refusals.
    ll.dispatch(&r.x, &r.idx, &r.wts, r.tokens)?;
    expect(
        ll.combine(&y, &r.idx, r.tokens + 1, &mut r.out),
        "the last dispatch sent",
    )?;
    let small = p.stream().alloc_zeros::<bf16>(8)?;
    expect(
        ll.combine(&small, &r.idx, r.tokens, &mut r.out),
        "expert_out_len",
    )?;
    ll.combine(&y, &r.idx, r.tokens, &mut r.out)?;
    p.stream().synchronize()?;
    check_out(p, &r, |_, _, _| 0.0)?;
    util::settle(p)
}
