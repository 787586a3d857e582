//! Helpers shared by the cases: who is who among the PEs, a common end point, comparisons
//! that say which element differed and how, the host's reductions, and the set-ups several
//! cases repeat (a refused call, a captured graph replayed, a team non-members must refuse).

use pgas::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use pgas::cudarc::driver::CudaStream;
use pgas::prelude::*;
use std::fmt::Debug;
use std::sync::Arc;

pub type CaseResult = Result<(), Box<dyn std::error::Error>>;

/// Whether a CUDA driver and at least one GPU are there.
pub fn gpu_present() -> bool {
    pgas::gpu_count().is_ok_and(|n| n > 0)
}

pub fn me(p: &Pgas) -> usize {
    p.my_pe()
}

pub fn npes(p: &Pgas) -> usize {
    p.n_pes()
}

/// The PE this one sends to: the next in the ring (itself when alone).
pub fn next(p: &Pgas) -> usize {
    (me(p) + 1) % npes(p)
}

/// The PE that sends to this one.
pub fn prev(p: &Pgas) -> usize {
    (me(p) + npes(p) - 1) % npes(p)
}

/// The GPU's compute capability major version (9 on Hopper, which sm_90a's rows and the
/// `pgas::gemm` paths need).
pub fn compute_major(p: &Pgas) -> pgas::Result<i32> {
    Ok(p.compute_capability()?.0 as i32)
}

pub fn device_name(p: &Pgas) -> String {
    p.cuda()
        .name()
        .unwrap_or_else(|e| format!("(name unknown: {e})"))
}

/// Runs `f` with cudarc's event tracking off (a CUDA graph capture on the pgas stream cannot
/// take the events it would record on other streams), and turns it back on however `f` ends.
/// `f` must run everything on the pgas stream and drop the buffers it makes before it returns.
pub fn untracked(p: &Pgas, f: impl FnOnce(&Pgas) -> CaseResult) -> CaseResult {
    // SAFETY: the caller's contract above: all of `f`'s work is on the pgas stream.
    unsafe { p.cuda().disable_event_tracking() };
    let result = f(p);
    // SAFETY: the untracked buffers were all dropped inside `f`.
    unsafe { p.cuda().enable_event_tracking() };
    result
}

/// Waits for this PE's work, then for every PE: the point where results may be read back.
pub fn settle(p: &Pgas) -> CaseResult {
    p.stream().synchronize()?;
    p.barrier_all()?;
    Ok(())
}

/// Exact comparison; names the first differing index and how many differ.
pub fn check_eq<T: PartialEq + Debug>(what: &str, got: &[T], want: &[T]) -> CaseResult {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    let bad: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{what}: {} of {} elements differ; first at [{i}]: got {:?}, expected {:?}",
            bad.len(),
            got.len(),
            got[i],
            want[i]
        )
        .into()),
    }
}

/// Comparison within a relative tolerance (absolute near zero). NaN never passes.
pub fn check_close(what: &str, got: &[f64], want: &[f64], rel: f64) -> CaseResult {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    for i in 0..got.len() {
        let tol = rel * want[i].abs().max(1.0);
        if got[i].is_nan() || (got[i] - want[i]).abs() > tol {
            return Err(format!(
                "{what}[{i}]: got {}, expected {} (tolerance {tol:e})",
                got[i], want[i]
            )
            .into());
        }
    }
    Ok(())
}

/// Fails with `msg` unless `cond`.
pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> CaseResult {
    if cond {
        Ok(())
    } else {
        Err(msg().into())
    }
}

/// Sorted copy, to compare sets of values that arrive in any order (atomics).
pub fn sorted<T: Ord + Clone>(v: &[T]) -> Vec<T> {
    let mut s = v.to_vec();
    s.sort();
    s
}

/// A reduction of `T` computed on the host as the GPU computes it: floats in f64, rounded to `T`
/// after every step; integers wrapping.
pub trait HostFold: Copy {
    fn fold(op: ReduceOp, a: Self, b: Self) -> Self;
}

macro_rules! float_fold {
    ($($t:ty: $to:expr, $back:expr;)*) => {$(
        impl HostFold for $t {
            fn fold(op: ReduceOp, a: Self, b: Self) -> Self {
                let (to, back): (fn(f64) -> $t, fn($t) -> f64) = ($to, $back);
                let (a, b) = (back(a), back(b));
                to(match op {
                    ReduceOp::Sum => a + b,
                    ReduceOp::Prod => a * b,
                    ReduceOp::Min => a.min(b),
                    _ => a.max(b),
                })
            }
        }
    )*};
}

float_fold! {
    f32: |v| v as f32, |v| v as f64;
    f64: |v| v, |v| v;
    f16: f16::from_f64, |v| v.to_f64();
    bf16: bf16::from_f64, |v| v.to_f64();
}

macro_rules! int_fold {
    ($($t:ty),*) => {$(
        impl HostFold for $t {
            fn fold(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::And => a & b,
                    ReduceOp::Or => a | b,
                    ReduceOp::Xor => a ^ b,
                }
            }
        }
    )*};
}

int_fold!(i8, i16, i32, i64, u8, u16, u32, u64);

/// The low-latency forms of `pgas::coll` that move data, for [`ll_moves`]: what each stages in a
/// block's shared memory (the broadcast nothing, the all-gather a PE's data once a rank, the
/// all-to-all a chunk both ways).
#[derive(Clone, Copy)]
pub enum LlForm {
    Broadcast,
    Gather,
    AllToAll,
}

/// Whether the low-latency `form` on `n` PEs takes `bytes` (the broadcast's data, a PE's part of
/// the all-gather, a chunk of the all-to-all), where the communicator's limit is `ll_max`
/// (`Comm::low_latency_max_bytes`: `LL_MAX_BYTES`, less on a GPU of fewer SMs or sharing its
/// SMs with other PEs): more than one PE, and [`ll_takes`] of the form's staging.
pub fn ll_moves(ll_max: usize, n: usize, form: LlForm, bytes: usize) -> bool {
    n > 1
        && match form {
            LlForm::Broadcast => ll_takes(ll_max, bytes, 1, 0),
            LlForm::Gather => ll_takes(ll_max, bytes, n, n),
            LlForm::AllToAll => ll_takes(ll_max, bytes, n, 2 * n),
        }
}

/// Whether a low-latency kernel takes `chunks` chunks of `chunk` bytes, staging `copies` of a
/// block's share of one in shared memory, under the limit `ll_max`. A block's share is whole
/// 16-byte vectors, at most `LL_BYTES_PER_BLOCK` over the chunks, more where the scratch's
/// regions (one a block, as many as `ll_max` holds) run out. This models `Comm::ll_fits`
/// independently of the library, so a change to its staging rule is made in both.
fn ll_takes(ll_max: usize, chunk: usize, chunks: usize, copies: usize) -> bool {
    let regions = ll_max / pgas::coll::LL_BYTES_PER_BLOCK;
    let share = (pgas::coll::LL_BYTES_PER_BLOCK / chunks / 16 * 16)
        .max(chunk.div_ceil(regions.max(1)).next_multiple_of(16));
    chunk <= ll_max
        && copies * share.min(chunk.next_multiple_of(16)) <= pgas::coll::LL_SHARED_MAX_BYTES
}

/// Passes when `r` is an error whose message says `words` (a bad input refused before
/// anything is launched).
pub fn refused<T: Debug>(r: pgas::Result<T>, words: &str) -> CaseResult {
    match r {
        Ok(v) => Err(format!("accepted ({v:?}); expected an error saying '{words}'").into()),
        Err(e) if e.to_string().contains(words) => Ok(()),
        Err(e) => Err(format!("error '{e}' does not say '{words}'").into()),
    }
}

/// The calls of `body` captured into one graph on `stream`, replayed `replays` times, then
/// every PE settled.
pub fn replay_captured(
    p: &Pgas, stream: &Arc<CudaStream>, replays: usize, body: impl FnOnce() -> pgas::Result<()>,
) -> CaseResult {
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let captured = body();
    let graph = stream.end_capture(CUgraphInstantiate_flags(0))?;
    captured?;
    let graph = graph.ok_or("the capture produced no graph")?;
    for _ in 0..replays {
        graph.launch()?;
    }
    stream.synchronize()?;
    settle(p)
}

/// The even PEs as a team (`None` on the odd ones).
pub fn even_team(p: &Pgas) -> pgas::Result<Option<Team>> {
    Team::WORLD.split_strided(p, 0, 2, npes(p).div_ceil(2))
}

/// On a PE outside a team: each of its calls over the team (named by what it did) was refused
/// as not a member's.
pub fn refused_to_non_member<T>(
    outcomes: impl IntoIterator<Item = (&'static str, pgas::Result<T>)>,
) -> CaseResult {
    for (what, o) in outcomes {
        let e = o
            .err()
            .ok_or_else(|| format!("an odd PE's {what} over the even team succeeded"))?;
        ensure(e.to_string().contains("not a member"), || {
            format!("unclear error: {e}")
        })?;
    }
    Ok(())
}
