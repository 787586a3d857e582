//! `pgas::coll`: all-reduce by every algorithm, element type and reduction at several lengths
//! (1 element, odd lengths, several blocks' worth), against sums computed here (each PE's input
//! is a function of its number, so every PE computes all of them); back-to-back calls with no
//! host sync between them (the flag protocol's buffer-reuse race); a split team; every bad
//! input; and CUDA graph capture of pgas launches (a collective and a cooperative kernel),
//! replayed several times. Then reduce-scatter and all-gather: several types, ops and lengths per
//! rank (whole buffers and views off a 16-byte boundary), back-to-back, a split team, every bad
//! input, graph capture; and the all-gather's and all-to-all's algorithms by name (low-latency,
//! pulling, pushing, `Auto`), the same ways (`coll/ag_a2a_*`).

use crate::runner::{case, Case};
use crate::util::{self, check_close, check_eq, ensure, refused, CaseResult, HostFold, LlForm};
use pgas::coll::{self, Algorithm, AllReduceElem, Comm};
use pgas::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use pgas::cudarc::driver::DevicePtr;
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("coll/all_reduce_f32", f32_case),
    case("coll/all_reduce_bf16", bf16_case),
    case("coll/all_reduce_f16", f16_case),
    case("coll/all_reduce_f64", f64_case),
    case("coll/all_reduce_i32", i32_case),
    case("coll/all_reduce_i8_u8", narrow_case),
    case("coll/all_reduce_i64_u64_u16_i16_u32", wide_case),
    case("coll/back_to_back", back_to_back),
    case("coll/split_team", split_team),
    case("coll/bad_input", bad_input),
    case("coll/graph_capture", graph_capture),
    case("coll/graph_capture_cooperative", graph_capture_cooperative),
    case("coll/capture_refuses_a_compile", capture_refuses_a_compile),
    case("coll/reduce_scatter_floats", reduce_scatter_floats),
    case("coll/reduce_scatter_ints", reduce_scatter_ints),
    case("coll/all_gather", all_gather_types),
    case("coll/rs_ag_back_to_back", rs_ag_back_to_back),
    case("coll/rs_ag_split_team", rs_ag_split_team),
    case("coll/rs_ag_bad_input", rs_ag_bad_input),
    case("coll/rs_ag_graph_capture", rs_ag_graph_capture),
    case("coll/pushed_two_shot", pushed_two_shot),
    case("coll/broadcast", broadcast_types),
    case("coll/all_to_all", all_to_all_types),
    case("coll/all_to_all_v", all_to_all_v_case),
    case("coll/move_split_team", move_split_team),
    case("coll/move_bad_input", move_bad_input),
    case("coll/move_graph_capture", move_graph_capture),
    case("coll/low_latency", low_latency),
    case("coll/device_all_reduce", device_all_reduce_case),
    case("coll/ag_a2a_algorithms", move_algorithms),
    case("coll/ag_a2a_back_to_back", move_back_to_back),
    case("coll/ag_a2a_graph_capture", move_graph_capture_algs),
    case("coll/ag_a2a_split_team", move_split_team_algs),
    case("coll/ag_a2a_bad_input", move_bad_algorithms),
];

/// The suite's own kernels (the collectives' are prewarmed by the cases through
/// `coll::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[
    &coop_count::SPEC,
    &device_all_reduce::SPEC,
    &device_all_gather::SPEC,
];

/// 1 element, odd lengths, one block's worth, several blocks (two-shot chunks of unequal length),
/// one 16-byte vector of 4- and 2-byte types (4, 8), and enough vectors that threads take a
/// second step with a partial pair (300_007, a tail past the last vector in every type).
const LENS: &[usize] = &[1, 4, 7, 8, 1000, 4099, 70_001, 300_007];

/// Lengths of the views that start off a 16-byte boundary (see `sweep`).
const VIEW_LENS: &[usize] = &[5, 4099, 70_001];

const ALGS: &[Algorithm] = &[
    Algorithm::LowLatency,
    Algorithm::OneShot,
    Algorithm::TwoShot,
    Algorithm::Auto,
    Algorithm::Nvshmem,
];

/// Input element `i` of PE `pe` as a small integer (exact in every type, also bf16 for sums).
fn input(pe: usize, i: usize) -> i64 {
    ((pe * 31 + i * 17) % 13) as i64 - 4
}

/// An element type of the sweeps: its value of a small integer input, and how a result is
/// compared with the host's fold ([`HostFold`]): floats within a tolerance, integers exactly.
trait SweepElem: AllReduceElem + HostFold + std::fmt::Debug + PartialEq {
    fn small(v: i64) -> Self;
    fn compare(what: &str, got: &[Self], want: &[Self]) -> CaseResult;
}

macro_rules! float_sweep {
    ($($t:ty: $to:expr, $back:expr, $rel:expr;)*) => {$(
        impl SweepElem for $t {
            fn small(v: i64) -> Self {
                let to: fn(f64) -> $t = $to;
                to(v as f64)
            }
            fn compare(what: &str, got: &[Self], want: &[Self]) -> CaseResult {
                let back: fn($t) -> f64 = $back;
                let g: Vec<f64> = got.iter().map(|&x| back(x)).collect();
                let w: Vec<f64> = want.iter().map(|&x| back(x)).collect();
                check_close(what, &g, &w, $rel)
            }
        }
    )*};
}

// The 16-bit floats reduce in f32 and round once; the host rounds after every step, so allow
// a rounding step per PE (products of up to 4 values reach 2^8, past bf16's exact integers).
float_sweep! {
    f32: |v| v as f32, |v| v as f64, 0.0;
    f64: |v| v, |v| v, 0.0;
    bf16: bf16::from_f64, |v| v.to_f64(), 2.0f64.powi(-7);
    f16: f16::from_f64, |v| v.to_f64(), 2.0f64.powi(-10);
}

/// Integers wrap like the GPU, so they compare exactly.
macro_rules! int_sweep {
    ($($t:ty),*) => {$(
        impl SweepElem for $t {
            fn small(v: i64) -> Self {
                v as $t
            }
            fn compare(what: &str, got: &[Self], want: &[Self]) -> CaseResult {
                check_eq(what, got, want)
            }
        }
    )*};
}

int_sweep!(i8, i16, i32, i64, u8, u16, u32, u64);

/// The reductions of floats; integers have every one.
const FLOAT_OPS: &[ReduceOp] = &[ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max];
const INT_OPS: &[ReduceOp] = &[
    ReduceOp::Sum,
    ReduceOp::Prod,
    ReduceOp::Min,
    ReduceOp::Max,
    ReduceOp::And,
    ReduceOp::Or,
    ReduceOp::Xor,
];

/// The fold over PEs of the inputs at element `k`, on the host.
fn folded<T: SweepElem>(op: ReduceOp, n: usize, k: usize) -> T {
    (1..n).fold(T::small(input(0, k)), |acc, pe| {
        T::fold(op, acc, T::small(input(pe, k)))
    })
}

/// A destination viewed from `at`: the view holds `want` (compared by `compare`), and the
/// elements before and past it still hold `marks`.
fn check_view<T>(
    compare: impl Fn(&str, &[T], &[T]) -> CaseResult, what: &str, got: &[T], at: usize, want: &[T],
    marks: &[T],
) -> CaseResult {
    let end = at + want.len();
    compare(what, &got[at..end], want)?;
    compare(
        &format!("{what}: outside the view"),
        &got[..at],
        &marks[..at],
    )?;
    compare(
        &format!("{what}: past the view"),
        &got[end..],
        &marks[end..],
    )
}

/// One (type, op) over every algorithm and length, then views and in place: the result is the
/// host's fold of the PEs' inputs.
fn sweep<T: SweepElem>(p: &Pgas, op: ReduceOp) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    coll::prewarm::<T>(p)?;
    for &len in LENS {
        let src = p.alloc_from(&(0..len).map(|i| T::small(input(me, i))).collect::<Vec<_>>())?;
        let want: Vec<T> = (0..len).map(|i| folded(op, n, i)).collect();
        for &alg in ALGS {
            // NVSHMEM's reductions exist for And/Or/Xor only on integers, as ours.
            let mut dst = p.alloc::<T>(len)?;
            p.barrier_all()?;
            if alg == Algorithm::LowLatency
                && len * std::mem::size_of::<T>() > comm.low_latency_max_bytes()
            {
                // Past the low-latency scratch: refused on every PE before any launch.
                refused(comm.all_reduce(&mut dst, &src, op, alg), "LL_MAX_BYTES")?;
                continue;
            }
            let used = comm.all_reduce(&mut dst, &src, op, alg)?;
            util::settle(p)?;
            T::compare(
                &format!("{op:?} {alg:?} (ran {used:?}) of {len}"),
                &dst.to_vec()?,
                &want,
            )?;
        }
    }
    // Views starting at element `ss` of the source and `ds` of the destination: both at 1
    // (scalar elements up to the first 16-byte boundary, then vectors), 0 and 1 (offsets that
    // differ modulo 16 bytes: every element one at a time), and two-shot in place at 1. The
    // elements outside the views must keep their values.
    for &len in VIEW_LENS {
        let want: Vec<T> = (0..len).map(|i| folded(op, n, i)).collect();
        // Element `k` of a buffer viewed from `at` holds input `k - at`; before it, a marker.
        let filled = |at: usize| -> Vec<T> {
            (0..len + 2)
                .map(|k| T::small(if k < at { 5 } else { input(me, k - at) }))
                .collect()
        };
        for (ds, ss, alg) in [
            (1, 1, Algorithm::LowLatency),
            (0, 1, Algorithm::LowLatency),
            (1, 1, Algorithm::OneShot),
            (1, 1, Algorithm::TwoShot),
            (0, 1, Algorithm::OneShot),
            (0, 1, Algorithm::TwoShot),
        ] {
            if alg == Algorithm::LowLatency
                && len * std::mem::size_of::<T>() > comm.low_latency_max_bytes()
            {
                continue;
            }
            let src = p.alloc_from(&filled(ss))?;
            let marks = vec![T::small(5); len + 2];
            let mut dst = p.alloc_from(&marks)?;
            p.barrier_all()?;
            comm.all_reduce(
                &mut dst.view_mut(ds..ds + len)?,
                &src.view(ss..ss + len)?,
                op,
                alg,
            )?;
            util::settle(p)?;
            let what = format!("{op:?} {alg:?} of {len}, dst at {ds}, src at {ss}");
            check_view(T::compare, &what, &dst.to_vec()?, ds, &want, &marks)?;
        }
        let filled = filled(1);
        let mut x = p.alloc_from(&filled)?;
        p.barrier_all()?;
        comm.all_reduce_in_place(&mut x.view_mut(1..1 + len)?, op, Algorithm::TwoShot)?;
        util::settle(p)?;
        let what = format!("{op:?} TwoShot in place of {len} at 1");
        check_view(T::compare, &what, &x.to_vec()?, 1, &want, &filled)?;
    }
    Ok(())
}

/// One [`sweep`] per op of `ops`.
fn all_reduce_ops<T: SweepElem>(p: &Pgas, ops: &[ReduceOp]) -> CaseResult {
    for &op in ops {
        sweep::<T>(p, op)?;
    }
    Ok(())
}

fn f32_case(p: &Pgas) -> CaseResult {
    all_reduce_ops::<f32>(p, FLOAT_OPS)
}

fn f64_case(p: &Pgas) -> CaseResult {
    all_reduce_ops::<f64>(p, FLOAT_OPS)
}

fn bf16_case(p: &Pgas) -> CaseResult {
    all_reduce_ops::<bf16>(p, FLOAT_OPS)
}

fn f16_case(p: &Pgas) -> CaseResult {
    all_reduce_ops::<f16>(p, FLOAT_OPS)
}

fn i32_case(p: &Pgas) -> CaseResult {
    all_reduce_ops::<i32>(p, INT_OPS)
}

fn narrow_case(p: &Pgas) -> CaseResult {
    all_reduce_ops::<i8>(p, INT_OPS)?;
    all_reduce_ops::<u8>(p, INT_OPS)
}

fn wide_case(p: &Pgas) -> CaseResult {
    all_reduce_ops::<i64>(p, INT_OPS)?;
    all_reduce_ops::<u64>(p, INT_OPS)?;
    all_reduce_ops::<u16>(p, INT_OPS)?;
    all_reduce_ops::<i16>(p, INT_OPS)?;
    all_reduce_ops::<u32>(p, INT_OPS)
}

/// 20 all-reduces queued with no host sync: one-shot ping-pong between two buffers (each call
/// reads what the last wrote, while peers may still be in the last call), and two-shot in place.
/// After the first call every PE holds the same sum `S`, and each further Sum multiplies by `n`.
fn back_to_back(p: &Pgas) -> CaseResult {
    let n = util::npes(p) as u64;
    let me = util::me(p);
    let len = 50_000;
    let mut comm = Comm::new(p, Team::WORLD)?;
    coll::prewarm::<u64>(p)?;
    let start: Vec<u64> = (0..len).map(|i| (me * 7 + i) as u64).collect();
    let s: Vec<u64> = (0..len)
        .map(|i| (0..n as usize).map(|pe| (pe * 7 + i) as u64).sum())
        .collect();
    let want = |calls: u32| -> Vec<u64> {
        s.iter()
            .map(|&v| v.wrapping_mul(n.wrapping_pow(calls - 1)))
            .collect()
    };
    for alg in [Algorithm::OneShot, Algorithm::TwoShot] {
        let mut a = p.alloc_from(&start)?;
        let mut b = p.alloc::<u64>(len)?;
        p.barrier_all()?;
        for k in 0..20 {
            if alg == Algorithm::TwoShot {
                comm.all_reduce_in_place(&mut a, ReduceOp::Sum, alg)?;
            } else if k % 2 == 0 {
                comm.all_reduce(&mut b, &a, ReduceOp::Sum, alg)?;
            } else {
                comm.all_reduce(&mut a, &b, ReduceOp::Sum, alg)?;
            }
        }
        util::settle(p)?;
        // Both end in `a`: in place, or after an even number of ping-pong calls.
        check_eq(
            &format!("20 back-to-back {alg:?} sums"),
            &a.to_vec()?,
            &want(20),
        )?;
    }
    Ok(())
}

/// The even PEs as a team: members reduce over it; an odd PE's communicator refuses calls.
fn split_team(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let team = util::even_team(p)?;
    let mut comm = Comm::new(p, team)?;
    coll::prewarm::<f32>(p)?;
    let src = p.alloc_from(&vec![me as f32 + 1.0; 999])?;
    let mut dst = p.alloc::<f32>(999)?;
    p.barrier_all()?;
    let mut outcomes = Vec::new();
    // Each algorithm's result is read before the next runs (into a zeroed `dst`): checking only
    // the last one's would let every earlier algorithm be wrong unseen.
    let mut results = Vec::new();
    for alg in [
        Algorithm::LowLatency,
        Algorithm::OneShot,
        Algorithm::TwoShot,
        Algorithm::Nvshmem,
    ] {
        outcomes.push(comm.all_reduce(&mut dst, &src, ReduceOp::Sum, alg));
        p.stream().synchronize()?;
        results.push((alg, dst.to_vec()?));
        dst.fill(0.0)?;
        p.stream().synchronize()?;
        p.barrier_all()?;
    }
    util::settle(p)?;
    if let Some(t) = team {
        t.destroy(p)?;
    }
    if me.is_multiple_of(2) {
        ensure(comm.rank() == Some(me / 2), || {
            format!("rank {:?}, expected {}", comm.rank(), me / 2)
        })?;
        for o in outcomes {
            o?;
        }
        let want: f32 = (0..n).step_by(2).map(|pe| pe as f32 + 1.0).sum();
        for (alg, got) in results {
            check_eq(
                &format!("{alg:?} sum over the even PEs"),
                &got,
                &vec![want; 999],
            )?;
        }
        Ok(())
    } else {
        util::refused_to_non_member(outcomes.into_iter().map(|o| ("all-reduce", o)))
    }
}

/// Every bad input is an `Err` on every PE before anything is launched (so no PE hangs).
fn bad_input(p: &Pgas) -> CaseResult {
    let mut comm = Comm::new(p, Team::WORLD)?;
    let a = p.alloc::<f32>(64)?;
    let mut b = p.alloc::<f32>(65)?;
    let mut c = p.alloc::<f32>(64)?;
    refused(
        comm.all_reduce(&mut b, &a, ReduceOp::Sum, Algorithm::Auto),
        "length mismatch",
    )?;
    refused(
        comm.all_reduce(&mut c, &a, ReduceOp::Xor, Algorithm::Auto),
        "integer types only",
    )?;
    refused(
        comm.all_reduce_in_place(&mut c, ReduceOp::Sum, Algorithm::OneShot),
        "cannot run in place",
    )?;
    // Safe Rust cannot borrow overlapping views as `&mut` and `&`; a SymRegion of one's own can.
    let shifted = Alias(c.as_device_ptr() + 4 * 20, 40);
    refused(
        comm.all_reduce(
            &mut c.view_mut(0..40)?,
            &shifted,
            ReduceOp::Sum,
            Algorithm::TwoShot,
        ),
        "overlap",
    )?;
    // NVSHMEM's reduction runs on any stream of the context, but eagerly only: refused while
    // the stream is captured (before anything is enqueued, so the capture stays empty).
    let other = p.cuda().new_stream()?;
    other.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let captured = comm.all_reduce(&mut c, &a, ReduceOp::Sum, Algorithm::Nvshmem.on(&other));
    let _ = other.end_capture(CUgraphInstantiate_flags(0));
    refused(captured, "eagerly only")?;
    Ok(())
}

/// A region named by address and length (what a user's own `SymRegion` could be).
struct Alias(u64, usize);

// SAFETY: each case builds an `Alias` from a live tensor it keeps alive while the alias is used.
unsafe impl SymRegion<f32> for Alias {
    fn as_device_ptr(&self) -> u64 {
        self.0
    }
    fn len(&self) -> usize {
        self.1
    }
}

/// Three all-reduces captured into one graph (one-shot a -> b, two-shot in place on b, one-shot
/// Max b -> a), replayed 5 times: the epochs live in device memory, so each replay is a new call for the flags.
fn graph_capture(p: &Pgas) -> CaseResult {
    let n = util::npes(p) as u64;
    let me = util::me(p);
    let len = 3001;
    let mut comm = Comm::new(p, Team::WORLD)?;
    coll::prewarm::<u64>(p)?;
    let mut a = p.alloc_from(&(0..len).map(|i| (me + i) as u64).collect::<Vec<_>>())?;
    let mut b = p.alloc::<u64>(len)?;
    let stream = p.cuda().new_stream()?;
    p.barrier_all()?;
    util::replay_captured(p, &stream, 5, || {
        comm.all_reduce(&mut b, &a, ReduceOp::Sum, Algorithm::OneShot.on(&stream))?;
        comm.all_reduce_in_place(&mut b, ReduceOp::Sum, Algorithm::TwoShot.on(&stream))?;
        // b -> a so that the next replay starts from the last result.
        comm.all_reduce(&mut a, &b, ReduceOp::Max, Algorithm::OneShot.on(&stream))?;
        Ok(())
    })?;
    // One replay: a <- n * sum(a over PEs) (all PEs equal afterwards, so Max keeps it).
    let mut want: Vec<u64> = (0..len)
        .map(|i| (0..n as usize).map(|pe| (pe + i) as u64).sum::<u64>() * n)
        .collect();
    for _ in 1..5 {
        for w in want.iter_mut() {
            *w = w.wrapping_mul(n * n);
        }
    }
    check_eq(
        "5 replays of a captured all-reduce graph",
        &a.to_vec()?,
        &want,
    )
}

/// A cooperative launch (the kernel calls a device barrier) captured and replayed.
#[pgas_kernel]
fn coop_count(x: &mut SymTensor<u64>) {
    if thread_idx_x() == 0 {
        x[0] += 1;
    }
    barrier_all_block();
}

fn graph_capture_cooperative(p: &Pgas) -> CaseResult {
    let mut x = p.alloc::<u64>(1)?;
    let stream = p.cuda().new_stream()?;
    p.barrier_all()?;
    // Once outside the capture: compiles and loads it.
    coop_count::launch_on(p, &stream, LaunchConfig::blocks(1, 128), &mut x)?;
    stream.synchronize()?;
    p.barrier_all()?;
    util::replay_captured(p, &stream, 4, || {
        coop_count::launch_on(p, &stream, LaunchConfig::blocks(1, 128), &mut x)
    })?;
    check_eq("1 + 4 replays of a cooperative kernel", &x.to_vec()?, &[5])
}

/// Never launched before this case: its first launch would compile, which is refused while the
/// stream is being captured.
#[pgas_kernel]
fn never_run(x: &mut SymTensor<u32>) {
    x[0] = 7;
}

fn capture_refuses_a_compile(p: &Pgas) -> CaseResult {
    let mut x = p.alloc::<u32>(1)?;
    let stream = p.cuda().new_stream()?;
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let r = never_run::launch_on(p, &stream, LaunchConfig::blocks(1, 1), &mut x);
    let _ = stream.end_capture(CUgraphInstantiate_flags(0));
    match r {
        Ok(()) => Err("a launch that compiles was accepted during capture".into()),
        Err(e) if e.to_string().contains("captured into a CUDA graph") => {
            // And outside the capture it compiles and runs.
            never_run::launch_on(p, &stream, LaunchConfig::blocks(1, 1), &mut x)?;
            stream.synchronize()?;
            check_eq("after the capture", &x.to_vec()?, &[7])
        }
        Err(e) => Err(format!("unclear error: {e}").into()),
    }
}

/// Per-rank lengths of the reduce-scatter and all-gather sweeps: 1 element, odd, several
/// blocks' worth (chunks of every rank at different 16-byte offsets when the length is odd).
const RS_AG_LENS: &[usize] = &[1, 7, 4099, 70_001];

/// Where the destination and source views start (see `sweep`): whole buffers, both at element 1
/// (scalars up to the first 16-byte boundary, then vectors), only the source at 1.
const RS_AG_VIEWS: &[(usize, usize)] = &[(0, 0), (1, 1), (0, 1)];

/// Buffer of `len + 1` elements whose view from `at` holds `input(pe, k)` at `k`; 5 before it.
fn shifted<T: SweepElem>(pe: usize, len: usize, at: usize) -> Vec<T> {
    (0..len + 1)
        .map(|k| T::small(if k < at { 5 } else { input(pe, k - at) }))
        .collect()
}

/// Reduce-scatter by `op` of `n * m` elements per PE at every length of [`RS_AG_LENS`] and view
/// of [`RS_AG_VIEWS`]: rank `r` gets the fold over PEs of elements `r * m ..` of the inputs,
/// and the destination's elements outside the view keep their marks.
fn rs_sweep<T: SweepElem>(p: &Pgas, op: ReduceOp) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    coll::prewarm::<T>(p)?;
    let r = comm.rank().ok_or("not a member of the world team")?;
    for &m in RS_AG_LENS {
        let want: Vec<T> = (0..m).map(|i| folded(op, n, r * m + i)).collect();
        for &(ds, ss) in RS_AG_VIEWS {
            let src = p.alloc_from(&shifted::<T>(me, n * m, ss))?;
            let marks = vec![T::small(5); m + 1];
            let mut dst = p.alloc_from(&marks)?;
            p.barrier_all()?;
            comm.reduce_scatter(
                &mut dst.view_mut(ds..ds + m)?,
                &src.view(ss..ss + n * m)?,
                op,
                Algorithm::Auto,
            )?;
            util::settle(p)?;
            let what = format!("reduce-scatter {op:?} of {m} per rank, dst at {ds}, src at {ss}");
            check_view(T::compare, &what, &dst.to_vec()?, ds, &want, &marks)?;
        }
    }
    Ok(())
}

/// One [`rs_sweep`] per op of `ops`.
fn reduce_scatter_ops<T: SweepElem>(p: &Pgas, ops: &[ReduceOp]) -> CaseResult {
    for &op in ops {
        rs_sweep::<T>(p, op)?;
    }
    Ok(())
}

fn reduce_scatter_floats(p: &Pgas) -> CaseResult {
    use ReduceOp::{Max, Min, Prod, Sum};
    reduce_scatter_ops::<f32>(p, &[Sum, Prod, Min, Max])?;
    reduce_scatter_ops::<f64>(p, &[Sum, Max])?;
    reduce_scatter_ops::<bf16>(p, &[Sum, Min])?;
    reduce_scatter_ops::<f16>(p, &[Sum, Prod])
}

fn reduce_scatter_ints(p: &Pgas) -> CaseResult {
    use ReduceOp::*;
    reduce_scatter_ops::<i32>(p, &[Sum, Prod, Min, Max, And, Or, Xor])?;
    reduce_scatter_ops::<u8>(p, &[Sum, Xor])?;
    reduce_scatter_ops::<i8>(p, &[Min])?;
    reduce_scatter_ops::<u16>(p, &[Sum])?;
    reduce_scatter_ops::<i64>(p, &[Sum, Min])?;
    reduce_scatter_ops::<u64>(p, &[Prod, Or])
}

/// All-gather of `m` elements per PE at every length and view: chunk `r` of every PE's
/// destination is rank `r`'s input, and the elements outside the view keep their marks.
fn ag_sweep<T: SweepElem>(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    coll::prewarm::<T>(p)?;
    for &m in RS_AG_LENS {
        let want: Vec<T> = (0..n * m).map(|k| T::small(input(k / m, k % m))).collect();
        for &(ds, ss) in RS_AG_VIEWS {
            let src = p.alloc_from(&shifted::<T>(me, m, ss))?;
            let marks = vec![T::small(5); n * m + 1];
            let mut dst = p.alloc_from(&marks)?;
            p.barrier_all()?;
            comm.all_gather(
                &mut dst.view_mut(ds..ds + n * m)?,
                &src.view(ss..ss + m)?,
                Algorithm::Auto,
            )?;
            util::settle(p)?;
            let what = format!(
                "all-gather of {m} per rank ({}), dst at {ds}, src at {ss}",
                std::any::type_name::<T>()
            );
            check_view(check_eq, &what, &dst.to_vec()?, ds, &want, &marks)?;
        }
    }
    Ok(())
}

/// Every element size (the 16-byte vectors hold 16, 8, 4 or 2 of them) and both 16-bit floats.
fn all_gather_types(p: &Pgas) -> CaseResult {
    ag_sweep::<f32>(p)?;
    ag_sweep::<bf16>(p)?;
    ag_sweep::<f16>(p)?;
    ag_sweep::<f64>(p)?;
    ag_sweep::<i8>(p)?;
    ag_sweep::<u16>(p)?;
    ag_sweep::<i32>(p)?;
    ag_sweep::<u64>(p)
}

/// 20 calls queued with no host sync, reduce-scatter `a -> b` then all-gather `b -> a` (each
/// reads what the last wrote, while peers may still be in the last call; the grids are the
/// same), then a one-shot all-reduce `a -> c` (a larger grid on the same flags). After the
/// first pair every PE's `a` is the sum `S` over PEs; each further pair multiplies it by `n`.
fn rs_ag_back_to_back(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let m = 50_000;
    let mut comm = Comm::new(p, Team::WORLD)?;
    coll::prewarm::<u64>(p)?;
    let start: Vec<u64> = (0..n * m).map(|k| (me * 7 + k) as u64).collect();
    let s: Vec<u64> = (0..n * m)
        .map(|k| (0..n).map(|pe| (pe * 7 + k) as u64).sum())
        .collect();
    let mut a = p.alloc_from(&start)?;
    let mut b = p.alloc::<u64>(m)?;
    let mut c = p.alloc::<u64>(n * m)?;
    p.barrier_all()?;
    for _ in 0..10 {
        comm.reduce_scatter(&mut b, &a, ReduceOp::Sum, Algorithm::Auto)?;
        comm.all_gather(&mut a, &b, Algorithm::Auto)?;
    }
    comm.all_reduce(&mut c, &a, ReduceOp::Sum, Algorithm::OneShot)?;
    util::settle(p)?;
    let nn = n as u64;
    let want: Vec<u64> = s.iter().map(|&v| v.wrapping_mul(nn.pow(9))).collect();
    check_eq(
        "10 back-to-back reduce-scatter + all-gather pairs",
        &a.to_vec()?,
        &want,
    )?;
    let want: Vec<u64> = want.iter().map(|&v| v.wrapping_mul(nn)).collect();
    check_eq("and an all-reduce after them", &c.to_vec()?, &want)
}

/// The even PEs as a team: members reduce-scatter and all-gather over it (chunks by team rank);
/// an odd PE's communicator refuses both.
fn rs_ag_split_team(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let evens = n.div_ceil(2);
    let team = util::even_team(p)?;
    let mut comm = Comm::new(p, team)?;
    coll::prewarm::<i32>(p)?;
    let m = 333;
    // Symmetric allocations are collective over all PEs: the same sizes everywhere.
    let src = p.alloc_from(
        &(0..evens * m)
            .map(|k| (me * 1000 + k) as i32)
            .collect::<Vec<_>>(),
    )?;
    let mut rs = p.alloc::<i32>(m)?;
    let mut ag = p.alloc::<i32>(evens * m)?;
    p.barrier_all()?;
    let r1 = comm.reduce_scatter(&mut rs, &src, ReduceOp::Sum, Algorithm::Auto);
    p.stream().synchronize()?;
    let r2 = comm.all_gather(&mut ag, &rs, Algorithm::Auto);
    p.stream().synchronize()?;
    util::settle(p)?;
    if let Some(t) = team {
        t.destroy(p)?;
    }
    if me.is_multiple_of(2) {
        r1?;
        r2?;
        let sum = |k: usize| -> i32 { (0..n).step_by(2).map(|pe| (pe * 1000 + k) as i32).sum() };
        let want_rs: Vec<i32> = (0..m).map(|i| sum(me / 2 * m + i)).collect();
        check_eq("reduce-scatter over the even PEs", &rs.to_vec()?, &want_rs)?;
        let want_ag: Vec<i32> = (0..evens * m).map(sum).collect();
        check_eq("all-gather over the even PEs", &ag.to_vec()?, &want_ag)
    } else {
        util::refused_to_non_member([("reduce-scatter", r1), ("all-gather", r2)])
    }
}

/// Every bad input of reduce-scatter and all-gather is an `Err` on every PE before anything is
/// launched (each input is bad on every PE alike, so no PE waits for another).
fn rs_ag_bad_input(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let m = 64;
    let mut comm = Comm::new(p, Team::WORLD)?;
    let big = p.alloc::<f32>(n * m + 1)?;
    let mut small = p.alloc::<f32>(m + 1)?;
    let mut gathered = p.alloc::<f32>(n * m + 1)?;
    let part = p.alloc::<f32>(m)?;
    if n > 1 {
        // Lengths that do not split into one chunk per PE.
        refused(
            comm.reduce_scatter(
                &mut small.view_mut(0..m)?,
                &big,
                ReduceOp::Sum,
                Algorithm::Auto,
            ),
            "multiple of",
        )?;
        refused(
            comm.all_gather(&mut gathered, &part, Algorithm::Auto),
            "multiple of",
        )?;
    }
    // Lengths that split, but not into the other buffer's length.
    refused(
        comm.reduce_scatter(
            &mut small,
            &big.view(0..n * m)?,
            ReduceOp::Sum,
            Algorithm::Auto,
        ),
        "length mismatch",
    )?;
    refused(
        comm.all_gather(&mut gathered.view_mut(0..n * m)?, &small, Algorithm::Auto),
        "length mismatch",
    )?;
    refused(
        comm.reduce_scatter(
            &mut small.view_mut(0..m)?,
            &big.view(0..n * m)?,
            ReduceOp::Xor,
            Algorithm::Auto,
        ),
        "integer types only",
    )?;
    // Overlapping buffers (a SymRegion of one's own can name any address; nothing launches).
    let into_dst = Alias(small.as_device_ptr() + 4, n * m);
    refused(
        comm.reduce_scatter(
            &mut small.view_mut(0..m)?,
            &into_dst,
            ReduceOp::Sum,
            Algorithm::Auto,
        ),
        "overlap",
    )?;
    let inside = Alias(big.as_device_ptr() + 4, n * m);
    refused(
        comm.reduce_scatter(
            &mut Alias(inside.0, m),
            &big.view(0..n * m)?,
            ReduceOp::Sum,
            Algorithm::Auto,
        ),
        "overlap",
    )?;
    let inside = Alias(gathered.as_device_ptr() + 4, m);
    refused(
        comm.all_gather(&mut gathered.view_mut(0..n * m)?, &inside, Algorithm::Auto),
        "overlap",
    )?;
    // Buffers outside the symmetric heap where peers reach them: reduce-scatter's source,
    // all-gather's destination (a plain CUDA allocation; nothing is launched on it).
    if comm.peers_reachable() {
        let stream = p.stream();
        let plain = stream.alloc_zeros::<f32>(n * m)?;
        let (ptr, guard) = plain.device_ptr(stream);
        let mut outside = Alias(ptr, n * m);
        let r1 = comm.reduce_scatter(
            &mut small.view_mut(0..m)?,
            &outside,
            ReduceOp::Sum,
            Algorithm::Auto,
        );
        let r2 = comm.all_gather(&mut outside, &part, Algorithm::Auto);
        drop(guard);
        refused(r1, "symmetric heap")?;
        refused(r2, "symmetric heap")?;
    }
    Ok(())
}

/// A reduce-scatter `a -> b` and an all-gather `b -> a` captured into one graph on another
/// stream and replayed 4 times: after the first replay `a` is the sum `S` on every PE, and each
/// further replay multiplies it by `n`.
fn rs_ag_graph_capture(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let m = 2001;
    let mut comm = Comm::new(p, Team::WORLD)?;
    coll::prewarm::<u64>(p)?;
    let mut a = p.alloc_from(&(0..n * m).map(|k| (me + k) as u64).collect::<Vec<_>>())?;
    let mut b = p.alloc::<u64>(m)?;
    let stream = p.cuda().new_stream()?;
    p.barrier_all()?;
    util::replay_captured(p, &stream, 4, || {
        comm.reduce_scatter(&mut b, &a, ReduceOp::Sum, Algorithm::Auto.on(&stream))?;
        comm.all_gather(&mut a, &b, Algorithm::Auto.on(&stream))?;
        Ok(())
    })?;
    let nn = n as u64;
    let want: Vec<u64> = (0..n * m)
        .map(|k| (0..n).map(|pe| (pe + k) as u64).sum::<u64>() * nn.pow(3))
        .collect();
    check_eq(
        "4 replays of a captured reduce-scatter + all-gather graph",
        &a.to_vec()?,
        &want,
    )
}

/// The pushed two-shot (`coll::PUSH_MIN_BYTES` and up, in kernels of `coll::PUSH_MAX_BYTES`):
/// an all-reduce whose chunks end in a partial vector, then one of two kernels in place (one
/// of `PUSH_MAX_BYTES`, one of the rest), back to back with no host wait between calls; then
/// captured into a graph (the stage grown by the eager calls) and replayed.
fn pushed_two_shot(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    coll::prewarm::<u64>(p)?;
    let small = coll::PUSH_MIN_BYTES / 8 + 3;
    let large = coll::PUSH_MAX_BYTES / 8 + 611_393;
    let input = |pe: usize, k: usize| (pe * 3 + k % 101) as u64;
    let summed = |k: usize| (0..n).map(|pe| input(pe, k)).sum::<u64>();
    let a = p.alloc_from(&(0..small).map(|k| input(me, k)).collect::<Vec<_>>())?;
    let mut b = p.alloc::<u64>(small)?;
    let mut x = p.alloc_from(&(0..large).map(|k| input(me, k)).collect::<Vec<_>>())?;
    p.barrier_all()?;
    let used = comm.all_reduce(&mut b, &a, ReduceOp::Sum, Algorithm::TwoShot)?;
    comm.all_reduce_in_place(&mut x, ReduceOp::Sum, Algorithm::TwoShot)?;
    comm.all_reduce_in_place(&mut b, ReduceOp::Sum, Algorithm::Auto)?;
    util::settle(p)?;
    let nn = n as u64;
    let want: Vec<u64> = (0..small).map(|k| summed(k) * nn).collect();
    check_eq(
        &format!(
            "{used:?} of {small} u64, then {:?} in place",
            Algorithm::Auto
        ),
        &b.to_vec()?,
        &want,
    )?;
    let want: Vec<u64> = (0..large).map(summed).collect();
    check_eq(
        &format!("two-shot in place of {large} u64 (two kernels)"),
        &x.to_vec()?,
        &want,
    )?;
    let stream = p.cuda().new_stream()?;
    p.barrier_all()?;
    util::replay_captured(p, &stream, 3, || {
        comm.all_reduce_in_place(&mut b, ReduceOp::Sum, Algorithm::TwoShot.on(&stream))?;
        Ok(())
    })?;
    let want: Vec<u64> = (0..small).map(|k| summed(k) * nn.pow(4)).collect();
    check_eq(
        "3 replays of a captured pushed two-shot in place",
        &b.to_vec()?,
        &want,
    )
}

/// Element `k` of the data a PE sends (or the root broadcasts) as a small integer: every PE can
/// compute every PE's, so each checks what it received.
fn moved(pe: usize, k: usize) -> i64 {
    ((pe * 29 + k * 7) % 101) as i64 - 50
}

/// Buffer of `len + 1` elements whose view from `at` holds `moved(pe, k)` at `k`; 5 before it.
fn moved_from<T: SweepElem>(pe: usize, len: usize, at: usize) -> Vec<T> {
    (0..len + 1)
        .map(|k| T::small(if k < at { 5 } else { moved(pe, k - at) }))
        .collect()
}

/// Broadcast of one type from the first and the last rank by every algorithm, at every length
/// of [`RS_AG_LENS`], whole buffers, views at element 1 (both, or only the source: then every
/// element goes one at a time) and in place; the elements around the views keep their marks.
fn bcast_sweep<T: SweepElem>(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    prewarm_moves(p)?;
    for &len in RS_AG_LENS {
        for root in [0, n - 1] {
            // Every algorithm; the low-latency one where it takes the size (past it: bad input).
            let ll = util::ll_moves(
                comm.low_latency_max_bytes(),
                n,
                LlForm::Broadcast,
                len * size_of::<T>(),
            );
            for &alg in ALGS.iter().filter(|&&a| ll || a != Algorithm::LowLatency) {
                bcast_check::<T>(p, &mut comm, len, root, alg, RS_AG_VIEWS)?;
            }
        }
    }
    Ok(())
}

/// One broadcast of `len` elements of `T` from `root` by `alg` for each view of `views`, then
/// one in place (every PE's buffer becomes the root's), each checked, the marks around the
/// views kept.
fn bcast_check<T: SweepElem>(
    p: &Pgas, comm: &mut Comm, len: usize, root: usize, alg: Algorithm, views: &[(usize, usize)],
) -> CaseResult {
    let me = util::me(p);
    let want: Vec<T> = (0..len).map(|k| T::small(moved(root, k))).collect();
    for &(ds, ss) in views {
        let src = p.alloc_from(&moved_from::<T>(me, len, ss))?;
        let marks = vec![T::small(6); len + 1];
        let mut dst = p.alloc_from(&marks)?;
        p.barrier_all()?;
        let used = comm.broadcast(
            &mut dst.view_mut(ds..ds + len)?,
            &src.view(ss..ss + len)?,
            root,
            alg,
        )?;
        util::settle(p)?;
        let what = format!(
            "broadcast of {len} {} from {root}, {alg:?} (ran {used:?}), dst at {ds}, src at {ss}",
            std::any::type_name::<T>()
        );
        check_view(check_eq, &what, &dst.to_vec()?, ds, &want, &marks)?;
    }
    let mut x = p.alloc_from(&(0..len).map(|k| T::small(moved(me, k))).collect::<Vec<_>>())?;
    p.barrier_all()?;
    let xr = Alias(x.as_device_ptr(), len);
    comm.broadcast(
        &mut x,
        &TypedAlias::<T>(xr, std::marker::PhantomData),
        root,
        alg,
    )?;
    util::settle(p)?;
    check_eq(
        &format!("in-place broadcast of {len} from {root}, {alg:?}"),
        &x.to_vec()?,
        &want,
    )
}

/// A region by address and length in elements of any `T` (an in-place call names one buffer
/// twice; the borrow checker forbids `&mut x` and `&x` together).
struct TypedAlias<T>(Alias, std::marker::PhantomData<T>);

// SAFETY: as for `Alias`.
unsafe impl<T> SymRegion<T> for TypedAlias<T> {
    fn as_device_ptr(&self) -> u64 {
        self.0 .0
    }
    fn len(&self) -> usize {
        self.0 .1
    }
}

/// Every element size (the kernels exist per size) and a 16-bit float; then the sizes past the
/// sweep's.
fn broadcast_types(p: &Pgas) -> CaseResult {
    bcast_sweep::<f32>(p)?;
    bcast_sweep::<bf16>(p)?;
    bcast_sweep::<u8>(p)?;
    bcast_sweep::<i64>(p)?;
    bcast_large(p)
}

/// Two-shot and `Auto` broadcasts from the last rank of 250 007 `f32` (on 4 PEs the relay,
/// about 8 KiB a block) and of just past `BROADCAST_RELAY_MAX_BYTES` (the handshaking
/// two-shot), whole buffers and views at element 1, then in place.
fn bcast_large(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    for len in [250_007, coll::BROADCAST_RELAY_MAX_BYTES / 4 + 5] {
        for alg in [Algorithm::TwoShot, Algorithm::Auto] {
            bcast_check::<f32>(p, &mut comm, len, n - 1, alg, &RS_AG_VIEWS[..2])?;
        }
    }
    Ok(())
}

/// All-to-all of `m` elements per pair at every length of [`RS_AG_LENS`] and view of
/// [`RS_AG_VIEWS`]: chunk `r` of every PE's destination is chunk `me` of rank `r`'s source.
fn a2a_sweep<T: SweepElem>(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    prewarm_moves(p)?;
    for &m in RS_AG_LENS {
        // Rank r's source element k is moved(r, k); rank me receives chunk me of each.
        let want: Vec<T> = (0..n * m)
            .map(|k| T::small(moved(k / m, me * m + k % m)))
            .collect();
        for &(ds, ss) in RS_AG_VIEWS {
            let src = p.alloc_from(&moved_from::<T>(me, n * m, ss))?;
            let marks = vec![T::small(6); n * m + 1];
            let mut dst = p.alloc_from(&marks)?;
            p.barrier_all()?;
            comm.all_to_all(
                &mut dst.view_mut(ds..ds + n * m)?,
                &src.view(ss..ss + n * m)?,
                Algorithm::Auto,
            )?;
            util::settle(p)?;
            let what = format!(
                "all-to-all of {m} per pair ({}), dst at {ds}, src at {ss}",
                std::any::type_name::<T>()
            );
            check_view(check_eq, &what, &dst.to_vec()?, ds, &want, &marks)?;
        }
    }
    Ok(())
}

fn all_to_all_types(p: &Pgas) -> CaseResult {
    a2a_sweep::<f32>(p)?;
    a2a_sweep::<u16>(p)?;
    a2a_sweep::<i8>(p)?;
    a2a_sweep::<u64>(p)
}

/// The all-to-all-v layout of the cases: rank `p` sends `count(p, q)` elements to rank `q`
/// (0 for some pairs with 4 PEs or more, never to itself; sizes that are not whole vectors), packed in rank order on both sides
/// with a gap of 3 elements after each segment of the destination (untouched).
fn count(p: usize, q: usize, scale: usize) -> usize {
    ((p * 5 + q * 3 + 1) % 4) * scale + (p + 2 * q) % 3
}

/// (send counts, send displs, recv counts, recv displs) of rank `me`, and the source and
/// destination lengths the layout needs.
type Layout = (Vec<usize>, Vec<usize>, Vec<usize>, Vec<usize>);
fn layout_of(n: usize, me: usize, scale: usize) -> Layout {
    let sc: Vec<usize> = (0..n).map(|q| count(me, q, scale)).collect();
    let rc: Vec<usize> = (0..n).map(|p| count(p, me, scale)).collect();
    let displs = |c: &[usize], gap: usize| -> Vec<usize> {
        c.iter()
            .scan(0, |at, &k| {
                let d = *at;
                *at += k + gap;
                Some(d)
            })
            .collect()
    };
    (sc.clone(), displs(&sc, 0), rc.clone(), displs(&rc, 3))
}

/// All-to-all-v with uneven counts (zeros included) at three scales, whole buffers, views at
/// element 1 and views as long as each PE's own regions (lengths that differ across PEs): each
/// received segment holds the sender's elements, the gaps keep their marks.
fn all_to_all_v_case(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    prewarm_moves(p)?;
    for scale in [1, 1000, 40_000] {
        let (sc, sd, rc, rd) = layout_of(n, me, scale);
        let layout = comm.all_to_all_layout(&sc, &sd, &rc, &rd)?;
        // Every PE's buffers have the same (largest) lengths, as for every collective.
        let (slen, dlen) = (layout.src_len(), layout.dst_len());
        for (ds, ss) in [(0, 0), (1, 1), (0, 1)] {
            let src = p.alloc_from(
                &(0..slen + 1)
                    .map(|k| {
                        if k < ss {
                            5.0
                        } else {
                            moved(me, k - ss) as f32
                        }
                    })
                    .collect::<Vec<_>>(),
            )?;
            let marks = vec![6.0f32; dlen + 1];
            let mut dst = p.alloc_from(&marks)?;
            p.barrier_all()?;
            comm.all_to_all_v(
                &mut dst.view_mut(ds..ds + dlen)?,
                &src.view(ss..ss + slen)?,
                &layout,
                Algorithm::Auto,
            )?;
            util::settle(p)?;
            let got = dst.to_vec()?;
            let mut want = marks.clone();
            for q in 0..n {
                // Rank q's segment for me starts at its send displacement for me.
                let (_, qsd, _, _) = layout_of(n, q, scale);
                for k in 0..rc[q] {
                    want[ds + rd[q] + k] = moved(q, qsd[me] + k) as f32;
                }
            }
            check_eq(
                &format!("all-to-all-v at scale {scale}, dst at {ds}, src at {ss}"),
                &got,
                &want,
            )?;
        }
        // Views as long as this PE's own regions, which differ from PE to PE: the layout's
        // offsets count from the views' starts, and the tensors behind them are long enough.
        let own_s = (0..n).map(|q| sd[q] + sc[q]).max().unwrap_or(0).max(1);
        let own_d = (0..n).map(|q| rd[q] + rc[q]).max().unwrap_or(0).max(1);
        let src = p.alloc_from(&(0..slen).map(|k| moved(me, k) as f32).collect::<Vec<_>>())?;
        let marks = vec![6.0f32; dlen];
        let mut dst = p.alloc_from(&marks)?;
        p.barrier_all()?;
        comm.all_to_all_v(
            &mut dst.view_mut(0..own_d)?,
            &src.view(0..own_s)?,
            &layout,
            Algorithm::Auto,
        )?;
        util::settle(p)?;
        let mut want = marks;
        for q in 0..n {
            let (_, qsd, _, _) = layout_of(n, q, scale);
            for k in 0..rc[q] {
                want[rd[q] + k] = moved(q, qsd[me] + k) as f32;
            }
        }
        check_eq(
            &format!("all-to-all-v at scale {scale}, views of {own_s} / {own_d} elements"),
            &dst.to_vec()?,
            &want,
        )?;
        // A 2-byte type through the same layout (the counts are in elements of any type).
        let src = p.alloc_from(&(0..slen).map(|k| moved(me, k) as u16).collect::<Vec<_>>())?;
        let mut dst = p.alloc::<u16>(dlen)?;
        p.barrier_all()?;
        comm.all_to_all_v(&mut dst, &src, &layout, Algorithm::Auto)?;
        util::settle(p)?;
        let got = dst.to_vec()?;
        for q in 0..n {
            let (_, qsd, _, _) = layout_of(n, q, scale);
            let want: Vec<u16> = (0..rc[q]).map(|k| moved(q, qsd[me] + k) as u16).collect();
            check_eq(
                &format!("u16 all-to-all-v at scale {scale} from {q}"),
                &got[rd[q]..rd[q] + rc[q]],
                &want,
            )?;
        }
    }
    Ok(())
}

/// The even PEs as a team: members broadcast from their last rank, all-to-all and all-to-all-v
/// over it; an odd PE's communicator refuses all of them, the layout included.
fn move_split_team(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let evens = n.div_ceil(2);
    let team = util::even_team(p)?;
    let mut comm = Comm::new(p, team)?;
    prewarm_moves(p)?;
    let m = 77;
    let src = p.alloc_from(
        &(0..evens * m)
            .map(|k| (me * 1000 + k) as i32)
            .collect::<Vec<_>>(),
    )?;
    let mut bc = p.alloc::<i32>(evens * m)?;
    let mut aa = p.alloc::<i32>(evens * m)?;
    let mut av = p.alloc::<i32>(evens * m)?;
    p.barrier_all()?;
    let r1 = comm.broadcast(&mut bc, &src, evens - 1, Algorithm::Auto);
    let r2 = comm.all_to_all(&mut aa, &src, Algorithm::Auto);
    // The uniform layout through all-to-all-v: the same result as all-to-all.
    let counts = vec![m; evens];
    let displs: Vec<usize> = (0..evens).map(|q| q * m).collect();
    let r3 = comm
        .all_to_all_layout(&counts, &displs, &counts, &displs)
        .and_then(|l| comm.all_to_all_v(&mut av, &src, &l, Algorithm::Auto));
    p.stream().synchronize()?;
    util::settle(p)?;
    if let Some(t) = team {
        t.destroy(p)?;
    }
    if me.is_multiple_of(2) {
        r1?;
        r2?;
        r3?;
        let root_pe = 2 * (evens - 1);
        let want: Vec<i32> = (0..evens * m)
            .map(|k| (root_pe * 1000 + k) as i32)
            .collect();
        check_eq("broadcast over the even PEs", &bc.to_vec()?, &want)?;
        let want: Vec<i32> = (0..evens * m)
            .map(|k| (2 * (k / m) * 1000 + (me / 2) * m + k % m) as i32)
            .collect();
        check_eq("all-to-all over the even PEs", &aa.to_vec()?, &want)?;
        check_eq("all-to-all-v over the even PEs", &av.to_vec()?, &want)
    } else {
        util::refused_to_non_member([("broadcast", r1), ("all-to-all", r2), ("all-to-all-v", r3)])
    }
}

/// Every bad input of broadcast, all-to-all and all-to-all-v is an `Err` on every PE before
/// anything is launched (bad on every PE alike; the layout's cross-PE checks give every PE the
/// same verdict).
fn move_bad_input(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let m = 64;
    let mut comm = Comm::new(p, Team::WORLD)?;
    let mut other = Comm::new(p, Team::WORLD)?;
    let a = p.alloc::<f32>(n * m + 1)?;
    let mut b = p.alloc::<f32>(n * m + 1)?;
    // Broadcast: a root outside the team, lengths that differ, overlap, a source outside the
    // symmetric heap, the low-latency protocol past its size.
    refused(
        comm.broadcast(&mut b, &a, n, Algorithm::Auto).map(|_| ()),
        "root",
    )?;
    refused(
        comm.broadcast(&mut b.view_mut(0..m)?, &a, 0, Algorithm::OneShot)
            .map(|_| ()),
        "length mismatch",
    )?;
    let inside = Alias(b.as_device_ptr() + 4, m);
    refused(
        comm.broadcast(&mut b.view_mut(0..m)?, &inside, 0, Algorithm::TwoShot)
            .map(|_| ()),
        "overlap",
    )?;
    let over = coll::LL_GATHER_MAX_BYTES / 4 + 1;
    let (big, mut big_dst) = (p.alloc::<f32>(over)?, p.alloc::<f32>(over)?);
    refused(
        comm.broadcast(&mut big_dst, &big, 0, Algorithm::LowLatency)
            .map(|_| ()),
        "LL_GATHER_MAX_BYTES",
    )?;
    // All-to-all: lengths that differ, or do not split into one chunk per PE; overlap.
    refused(
        comm.all_to_all(&mut b.view_mut(0..n * m)?, &a, Algorithm::Auto),
        "length mismatch",
    )?;
    if n > 1 {
        refused(comm.all_to_all(&mut b, &a, Algorithm::Auto), "multiple of")?;
    }
    let inside = Alias(b.as_device_ptr() + 4, n * m);
    refused(
        comm.all_to_all(&mut b.view_mut(0..n * m)?, &inside, Algorithm::Auto),
        "overlap",
    )?;
    // Buffers outside the symmetric heap: the broadcast source, the all-to-all destination.
    if comm.peers_reachable() {
        let stream = p.stream();
        let plain = stream.alloc_zeros::<f32>(n * m)?;
        let (ptr, guard) = plain.device_ptr(stream);
        let mut outside = Alias(ptr, n * m);
        let r1 = comm
            .broadcast(&mut b.view_mut(0..n * m)?, &outside, 0, Algorithm::OneShot)
            .map(|_| ());
        let r2 = comm.all_to_all(&mut outside, &a.view(0..n * m)?, Algorithm::Auto);
        drop(guard);
        refused(r1, "symmetric heap")?;
        refused(r2, "symmetric heap")?;
    }
    // All-to-all-v: slices that are not one per PE (on one PE only: the exchange still tells
    // every PE), counts that disagree across PEs (2 PEs or more), a layout of another
    // communicator, buffers shorter than the layout needs.
    let ones = vec![1usize; n];
    let displs: Vec<usize> = (0..n).collect();
    let short = if me == 0 { &ones[1..] } else { &ones[..] };
    refused(
        comm.all_to_all_layout(short, &displs, &ones, &displs)
            .map(|_| ()),
        "one per PE",
    )?;
    if n > 1 {
        // Rank 0 expects 2 elements from rank 1, which sends 1.
        let mut rc = ones.clone();
        let mut rd = displs.clone();
        if me == 0 {
            rc[1] = 2;
            rd = (0..n).map(|q| if q > 1 { q + 1 } else { q }).collect();
        }
        refused(
            comm.all_to_all_layout(&ones, &displs, &rc, &rd).map(|_| ()),
            "expects 2",
        )?;
    }
    let layout = comm.all_to_all_layout(&ones, &displs, &ones, &displs)?;
    refused(
        other.all_to_all_v(
            &mut b.view_mut(0..n)?,
            &a.view(0..n)?,
            &layout,
            Algorithm::Auto,
        ),
        "another communicator",
    )?;
    // Receive displacements one further: the destination needs n + 1 elements.
    let further: Vec<usize> = (1..=n).collect();
    let needs_more = comm.all_to_all_layout(&ones, &displs, &ones, &further)?;
    let mut exact = p.alloc::<f32>(n)?;
    refused(
        comm.all_to_all_v(&mut exact, &a.view(0..n)?, &needs_more, Algorithm::Auto),
        "at least that long",
    )?;
    // What decides is the tensor from the view's start on (the layout's offsets count from
    // there): a view that starts later reaches less.
    if n > 1 {
        refused(
            comm.all_to_all_v(
                &mut exact.view_mut(1..n)?,
                &a.view(0..1)?,
                &needs_more,
                Algorithm::Auto,
            ),
            "at least that long",
        )?;
    }
    // And the good layout works after all of that (no PE was left in a kernel).
    let src = p.alloc_from(&(0..n).map(|q| (me * n + q) as f32).collect::<Vec<_>>())?;
    let mut dst = p.alloc::<f32>(n)?;
    p.barrier_all()?;
    comm.all_to_all_v(&mut dst, &src, &layout, Algorithm::Auto)?;
    util::settle(p)?;
    let want: Vec<f32> = (0..n).map(|q| (q * n + me) as f32).collect();
    check_eq("all-to-all-v after the refusals", &dst.to_vec()?, &want)
}

/// A broadcast (two-shot, from the last rank), an all-to-all and an all-to-all-v captured into
/// one graph on another stream and replayed 3 times: `x` becomes the root's `x`, `y` its
/// all-to-all, `z` the all-to-all-v of `y` (the uniform layout: `z` is all-to-all of `y`, which
/// undoes it). Each replay is a new call for the flags (device-side epochs).
fn move_graph_capture(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let m = 3001;
    let mut comm = Comm::new(p, Team::WORLD)?;
    prewarm_moves(p)?;
    let start: Vec<u32> = (0..n * m).map(|k| (me * 100_000 + k) as u32).collect();
    let mut x = p.alloc_from(&start)?;
    let mut y = p.alloc::<u32>(n * m)?;
    let mut z = p.alloc::<u32>(n * m)?;
    let counts = vec![m; n];
    let displs: Vec<usize> = (0..n).map(|q| q * m).collect();
    let layout = comm.all_to_all_layout(&counts, &displs, &counts, &displs)?;
    let stream = p.cuda().new_stream()?;
    p.barrier_all()?;
    util::replay_captured(p, &stream, 3, || {
        let xr = TypedAlias::<u32>(Alias(x.as_device_ptr(), n * m), std::marker::PhantomData);
        comm.broadcast(&mut x, &xr, n - 1, Algorithm::TwoShot.on(&stream))?;
        comm.all_to_all(&mut y, &x, Algorithm::Auto.on(&stream))?;
        comm.all_to_all_v(&mut z, &y, &layout, Algorithm::Auto.on(&stream))?;
        Ok(())
    })?;
    let root: Vec<u32> = (0..n * m).map(|k| ((n - 1) * 100_000 + k) as u32).collect();
    check_eq("3 replays: the broadcast", &x.to_vec()?, &root)?;
    // Every PE holds the root's data, so chunk r of y is chunk me of the root's.
    let want_y: Vec<u32> = (0..n * m).map(|k| root[me * m + k % m]).collect();
    check_eq("3 replays: the all-to-all", &y.to_vec()?, &want_y)?;
    check_eq("3 replays: the all-to-all-v", &z.to_vec()?, &root)
}

/// The low-latency all-reduce: 40 calls queued with no host sync, alternating sizes (one
/// block's lines, then eight blocks', so some lines of a block sit out calls) in place and
/// ping-pong, then one-shot on the same communicator; 10 replays of a captured graph of LL
/// calls; the limit refused.
fn low_latency(p: &Pgas) -> CaseResult {
    let n = util::npes(p) as u64;
    let me = util::me(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    // The low-latency and one-shot kernels of u64 only, in one NVRTC program.
    let list: Vec<_> = coll::prewarm_list::<u64>()
        .into_iter()
        .filter(|k| {
            std::ptr::eq(k.spec, <u64 as AllReduceElem>::LOW_LATENCY)
                || std::ptr::eq(k.spec, <u64 as AllReduceElem>::ONE_SHOT)
        })
        .collect();
    pgas::launch::prewarm(p, &list)?;
    // As large as the low-latency form takes on this GPU (less than LL_MAX_BYTES on fewer SMs
    // or SMs the PEs share).
    let big = comm.low_latency_max_bytes() / 8;
    let sum = |len: usize| -> Vec<u64> {
        (0..len)
            .map(|i| (0..n as usize).map(|pe| (pe * 3 + i) as u64).sum())
            .collect()
    };
    let start = |len: usize| -> Vec<u64> { (0..len).map(|i| (me * 3 + i) as u64).collect() };
    let mut small = p.alloc_from(&start(3))?;
    let mut a = p.alloc_from(&start(big))?;
    let mut b = p.alloc::<u64>(big)?;
    p.barrier_all()?;
    for k in 0..40 {
        if k % 2 == 0 {
            comm.all_reduce_in_place(&mut small, ReduceOp::Sum, Algorithm::LowLatency)?;
        } else if k % 4 == 1 {
            comm.all_reduce(&mut b, &a, ReduceOp::Sum, Algorithm::LowLatency)?;
        } else {
            comm.all_reduce(&mut a, &b, ReduceOp::Sum, Algorithm::Auto)?;
        }
    }
    let mut c = p.alloc::<u64>(big)?;
    comm.all_reduce(&mut c, &a, ReduceOp::Sum, Algorithm::OneShot)?;
    util::settle(p)?;
    let times = |v: Vec<u64>, calls: u32| -> Vec<u64> {
        v.iter()
            .map(|&x| x.wrapping_mul(n.wrapping_pow(calls - 1)))
            .collect()
    };
    check_eq(
        "20 in-place LL sums of 3",
        &small.to_vec()?,
        &times(sum(3), 20),
    )?;
    check_eq(
        &format!("20 ping-pong LL sums of {} KiB", big * 8 / 1024),
        &a.to_vec()?,
        &times(sum(big), 20),
    )?;
    check_eq(
        "and a one-shot after them",
        &c.to_vec()?,
        &times(sum(big), 21),
    )?;
    // A captured graph of two LL calls, replayed: each replay multiplies by n^2.
    let mut x = p.alloc_from(&start(1000))?;
    let mut y = p.alloc::<u64>(1000)?;
    let stream = p.cuda().new_stream()?;
    p.barrier_all()?;
    util::replay_captured(p, &stream, 10, || {
        comm.all_reduce(&mut y, &x, ReduceOp::Sum, Algorithm::LowLatency.on(&stream))?;
        comm.all_reduce_in_place(&mut y, ReduceOp::Sum, Algorithm::Auto.on(&stream))?;
        comm.all_reduce(&mut x, &y, ReduceOp::Max, Algorithm::LowLatency.on(&stream))?;
        Ok(())
    })?;
    let want: Vec<u64> = sum(1000)
        .iter()
        .map(|&v| v.wrapping_mul(n).wrapping_mul(n.wrapping_pow(2 * 9)))
        .collect();
    check_eq("10 replays of a captured LL graph", &x.to_vec()?, &want)?;
    let mut over = p.alloc::<u64>(big + 1)?;
    let e = comm
        .all_reduce_in_place(&mut over, ReduceOp::Sum, Algorithm::LowLatency)
        .err()
        .ok_or("a low-latency all-reduce past LL_MAX_BYTES was accepted")?;
    ensure(e.to_string().contains("LL_MAX_BYTES"), || {
        format!("unclear error: {e}")
    })
}

/// `team_all_reduce_block` inside a user kernel: each block all-reduces its `per_block`
/// elements `a -> b -> a` (with an empty call between), `reps` times over, with its own scratch
/// region of `words` words.
#[pgas_kernel(max_threads = 256)]
fn device_all_reduce(
    team: Team, a: &mut SymTensor<i32>, b: &mut SymTensor<i32>, scratch: &mut SymTensor<u64>,
    words: usize, per_block: usize, reps: u32,
) {
    let blk = block_idx_x() as usize;
    let lo = min(blk * per_block, a.len());
    let hi = min(lo + per_block, a.len());
    let mut r = 0;
    while r < reps {
        team_all_reduce_block(
            team,
            &mut b[lo..hi],
            &a[lo..hi],
            &mut scratch[blk * words],
            ReduceOp::Sum,
        );
        // A call of no elements between two with data: it must still keep the PEs within a
        // call of each other (a fast PE would otherwise overwrite lines a peer still reads).
        team_all_reduce_block(
            team,
            &mut b[lo..lo],
            &a[lo..lo],
            &mut scratch[blk * words],
            ReduceOp::Sum,
        );
        team_all_reduce_block(
            team,
            &mut a[lo..hi],
            &b[lo..hi],
            &mut scratch[blk * words],
            ReduceOp::Sum,
        );
        r += 1;
    }
}

/// `team_all_gather_block` from shared memory: 100 values of each team PE into `dst`.
#[pgas_kernel(max_threads = 128)]
fn device_all_gather(team: Team, dst: &mut SymTensor<f16>, scratch: &mut SymTensor<u64>) {
    let s = shared_array::<f16, 100>();
    let t = thread_idx_x() as usize;
    if t < 100 {
        s[t] = (team_my_pe(team) * 100 + t as i32) as f32 as f16;
    }
    sync_threads();
    team_all_gather_block(team, dst, &s[0..100], &mut scratch[0]);
}

/// The personal forms by several blocks, `reps` times over the same scratch: block `b`
/// reduce-scatters its `n` chunks of `m` (`x[b n m ..]`) into `rs[b m ..]` and exchanges its `n`
/// chunks of `y` into `z`, both over its own region of `scratch` (`words` each).
#[pgas_kernel(max_threads = 256)]
fn device_personal(
    team: Team, rs: &mut SymTensor<i32>, x: &SymTensor<i32>, z: &mut SymTensor<u16>,
    y: &SymTensor<u16>, scratch: &mut SymTensor<u64>, words: usize, m: usize, reps: u32,
) {
    let blk = block_idx_x() as usize;
    let n = team_n_pes(team) as usize;
    let c = blk * n * m;
    let mut r = 0;
    while r < reps {
        team_reduce_scatter_block(
            team,
            &mut rs[blk * m..blk * m + m],
            &x[c..c + n * m],
            &mut scratch[blk * words],
            ReduceOp::Sum,
        );
        team_all_to_all_block(
            team,
            &mut z[c..c + n * m],
            &y[c..c + n * m],
            &mut scratch[blk * words],
        );
        r += 1;
    }
}

/// `team_broadcast_block` and `team_broadcast_relay_block` in a user kernel, mixed with
/// `team_all_reduce_block` over the same scratch region: in round `r` block `b` broadcasts its
/// `m` elements of `x` from team rank `(b + r) % n` into round `r`'s part of `y` (the direct
/// form in even rounds, the relay in odd ones), then all-reduces its first element into `sums`.
#[pgas_kernel(max_threads = 256)]
fn device_broadcast(
    team: Team, y: &mut SymTensor<i32>, x: &SymTensor<i32>, sums: &mut SymTensor<i32>,
    scratch: &mut SymTensor<u64>, words: usize, m: usize, reps: u32,
) {
    let blk = block_idx_x() as usize;
    let nb = grid_dim_x() as usize;
    let n = team_n_pes(team) as u32;
    let mut r = 0;
    while r < reps {
        let root = ((blk as u32 + r) % n) as i32;
        let q = r as usize * nb + blk;
        let o = q * m;
        if r % 2 == 0 {
            team_broadcast_block(
                team,
                &mut y[o..o + m],
                &x[blk * m..blk * m + m],
                &mut scratch[blk * words],
                root,
            );
        } else {
            team_broadcast_relay_block(
                team,
                &mut y[o..o + m],
                &x[blk * m..blk * m + m],
                &mut scratch[blk * words],
                root,
            );
        }
        team_all_reduce_block(
            team,
            &mut sums[q..q + 1],
            &x[blk * m..blk * m + 1],
            &mut scratch[blk * words],
            ReduceOp::Sum,
        );
        r += 1;
    }
}

/// The in-kernel building blocks: 4 blocks x 3 rounds of two all-reduces each (odd lengths,
/// the last block's share short), twice over the same scratch (its counters carry on across
/// launches), over the world and over the even PEs (a scratch for each); then an all-gather
/// from shared memory.
fn device_all_reduce_case(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let evens = n.div_ceil(2);
    let split = Team::WORLD.split_strided(p, 0, 2, evens)?;
    let (per_block, blocks, len) = (1001, 4, 3 * 1001 + 17);
    let words = coll::device_scratch_len::<i32>(n, per_block);
    let start: Vec<i32> = (0..len).map(|i| (me * 10 + i % 97) as i32).collect();
    for (team, members) in [(Some(Team::WORLD), n), (split, evens)] {
        // One scratch per team (its lines are laid out by the team's size).
        let mut scratch = p.alloc::<u64>(blocks * words)?;
        let mut a = p.alloc_from(&start)?;
        let mut b = p.alloc::<i32>(len)?;
        p.barrier_all()?;
        if let Some(team) = team {
            for _ in 0..2 {
                device_all_reduce::launch(
                    p,
                    LaunchConfig::blocks(blocks as u32, 256),
                    team,
                    &mut a,
                    &mut b,
                    &mut scratch,
                    words,
                    per_block,
                    3,
                )?;
            }
        }
        util::settle(p)?;
        if team.is_none() {
            continue;
        }
        // 12 all-reduces over the members (PEs 0, 2, .. of the split; all of the world).
        let step = if members == n { 1 } else { 2 };
        let s: Vec<i32> = (0..len)
            .map(|i| {
                (0..n)
                    .step_by(step)
                    .map(|pe| (pe * 10 + i % 97) as i32)
                    .sum()
            })
            .collect();
        let mm = members as i32;
        let want: Vec<i32> = s
            .iter()
            .map(|&v| v.wrapping_mul(mm.wrapping_pow(11)))
            .collect();
        check_eq(
            &format!("12 in-kernel all-reduces over {members} PEs"),
            &a.to_vec()?,
            &want,
        )?;
    }
    if let Some(t) = split {
        t.destroy(p)?;
    }
    let mut dst = p.alloc::<f16>(n * 100)?;
    let mut gscratch = p.alloc::<u64>(coll::device_scratch_len::<f16>(n, 100))?;
    p.barrier_all()?;
    device_all_gather::launch(
        p,
        LaunchConfig::blocks(1, 128),
        Team::WORLD,
        &mut dst,
        &mut gscratch,
    )?;
    util::settle(p)?;
    let want: Vec<f16> = (0..n * 100).map(|k| f16::from_f64(k as f64)).collect();
    check_eq(
        "in-kernel all-gather from shared memory",
        &dst.to_vec()?,
        &want,
    )?;
    device_personal_case(p)?;
    device_broadcast_case(p)
}

/// [`device_broadcast`]: 3 blocks of 1001 `i32` (501 lines: part groups, chunks of 167 lines
/// on 4 PEs), 5 rounds, every root, both forms; checked against the host.
fn device_broadcast_case(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let (blocks, m, reps) = (3, 1001, 5);
    let words = coll::device_scratch_len::<i32>(n, m);
    let xv = |pe: usize, k: usize| (pe * 100_000 + k * 3) as i32;
    let x = p.alloc_from(&(0..blocks * m).map(|k| xv(me, k)).collect::<Vec<_>>())?;
    let mut y = p.alloc::<i32>(reps * blocks * m)?;
    let mut sums = p.alloc::<i32>(reps * blocks)?;
    let mut scratch = p.alloc::<u64>(blocks * words)?;
    p.barrier_all()?;
    device_broadcast::launch(
        p,
        LaunchConfig::blocks(blocks as u32, 256),
        Team::WORLD,
        &mut y,
        &x,
        &mut sums,
        &mut scratch,
        words,
        m,
        reps as u32,
    )?;
    util::settle(p)?;
    let want_y: Vec<i32> = (0..reps * blocks * m)
        .map(|k| {
            let (r, b, i) = (k / (blocks * m), k / m % blocks, k % m);
            xv((b + r) % n, b * m + i)
        })
        .collect();
    check_eq(
        "in-kernel broadcasts (direct and relay)",
        &y.to_vec()?,
        &want_y,
    )?;
    let want_sums: Vec<i32> = (0..reps * blocks)
        .map(|q| (0..n).map(|pe| xv(pe, q % blocks * m)).sum())
        .collect();
    check_eq(
        "in-kernel all-reduces between them",
        &sums.to_vec()?,
        &want_sums,
    )
}

/// `team_reduce_scatter_block` and `team_all_to_all_block` in a user kernel: 3 blocks of odd
/// chunks (37 elements: part lines), 3 rounds, checked against the host.
fn device_personal_case(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let (blocks, m) = (3, 37);
    let words = coll::device_scratch_len::<i32>(n, m);
    let xv = |pe: usize, k: usize| (pe * 1000 + k % 977) as i32;
    let yv = |pe: usize, k: usize| (pe * 7 + 3 * k) as u16;
    let x = p.alloc_from(&(0..blocks * n * m).map(|k| xv(me, k)).collect::<Vec<_>>())?;
    let y = p.alloc_from(&(0..blocks * n * m).map(|k| yv(me, k)).collect::<Vec<_>>())?;
    let mut rs = p.alloc::<i32>(blocks * m)?;
    let mut z = p.alloc::<u16>(blocks * n * m)?;
    let mut scratch = p.alloc::<u64>(blocks * words)?;
    p.barrier_all()?;
    device_personal::launch(
        p,
        LaunchConfig::blocks(blocks as u32, 256),
        Team::WORLD,
        &mut rs,
        &x,
        &mut z,
        &y,
        &mut scratch,
        words,
        m,
        3,
    )?;
    util::settle(p)?;
    // Block b's chunk `me` of every PE's x, summed; chunk `me` of rank r's y as chunk r of z.
    let want_rs: Vec<i32> = (0..blocks * m)
        .map(|k| {
            let (b, i) = (k / m, k % m);
            (0..n).map(|pe| xv(pe, b * n * m + me * m + i)).sum()
        })
        .collect();
    check_eq("in-kernel reduce-scatter", &rs.to_vec()?, &want_rs)?;
    let want_z: Vec<u16> = (0..blocks * n * m)
        .map(|k| {
            let (b, r, i) = (k / (n * m), k / m % n, k % m);
            yv(r, b * n * m + me * m + i)
        })
        .collect();
    check_eq("in-kernel all-to-all", &z.to_vec()?, &want_z)
}

/// Compiles the data-movement kernels of every element size (and the all-gathers: the
/// specializations with no reduction), in one NVRTC program: the broadcast and all-to-all cases
/// need no reductions, which `coll::prewarm` of each type they use would compile too. The later
/// cases load them from the disk cache.
fn prewarm_moves(p: &Pgas) -> CaseResult {
    let mut list = Vec::new();
    for l in [
        coll::prewarm_list::<u8>(),
        coll::prewarm_list::<u16>(),
        coll::prewarm_list::<u32>(),
        coll::prewarm_list::<u64>(),
    ] {
        list.extend(l.into_iter().filter(|k| k.comptime.is_empty()));
    }
    pgas::launch::prewarm(p, &list)?;
    Ok(())
}

/// The all-gather's and all-to-all's algorithms asked for by name, `Auto` last.
const MOVE_ALGS: &[Algorithm] = &[
    Algorithm::LowLatency,
    Algorithm::OneShot,
    Algorithm::TwoShot,
    Algorithm::Auto,
];

/// The algorithm `alg` should come out as for an all-gather or all-to-all whose PE sends
/// `sbytes` (a chunk of them, for the all-to-all) and whose larger buffer holds `largest` bytes
/// (every member reachable), or `None` where it is refused.
fn moved_by(
    comm: &Comm, alg: Algorithm, n: usize, how: LlForm, sbytes: usize, largest: usize,
) -> Option<Algorithm> {
    let ll = util::ll_moves(comm.low_latency_max_bytes(), n, how, sbytes);
    match alg {
        Algorithm::LowLatency if !ll => None,
        Algorithm::Auto if ll => Some(Algorithm::LowLatency),
        Algorithm::Auto if largest <= coll::MOVE_PULL_MAX_BYTES => Some(Algorithm::OneShot),
        Algorithm::Auto => Some(Algorithm::TwoShot),
        a => Some(a),
    }
}

/// One all-gather and one all-to-all by each of [`MOVE_ALGS`] at every length of
/// [`RS_AG_LENS`] and view of [`RS_AG_VIEWS`] (views at element 1: the pulling kernels' vectors
/// start where source and destination chunk share their offset, the low-latency copy out of
/// shared memory where the destination does): the results against the host's, the marks
/// around the views untouched, the algorithm returned what `Auto` should pick, and low
/// latency past its size (or on one PE) refused.
fn move_alg_sweep<T: SweepElem>(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let size = std::mem::size_of::<T>();
    let mut comm = Comm::new(p, Team::WORLD)?;
    let ty = std::any::type_name::<T>();
    for &m in RS_AG_LENS {
        let gathered: Vec<T> = (0..n * m).map(|k| T::small(input(k / m, k % m))).collect();
        let swapped: Vec<T> = (0..n * m)
            .map(|k| T::small(moved(k / m, me * m + k % m)))
            .collect();
        for &alg in MOVE_ALGS {
            for &(ds, ss) in RS_AG_VIEWS {
                let what = format!("{alg:?} of {m} per rank ({ty}), dst at {ds}, src at {ss}");
                let marks = vec![T::small(5); n * m + 1];
                // All-gather.
                let src = p.alloc_from(&shifted::<T>(me, m, ss))?;
                let mut dst = p.alloc_from(&marks)?;
                p.barrier_all()?;
                let got = comm.all_gather(
                    &mut dst.view_mut(ds..ds + n * m)?,
                    &src.view(ss..ss + m)?,
                    alg,
                );
                util::settle(p)?;
                match moved_by(&comm, alg, n, LlForm::Gather, m * size, n * m * size) {
                    None => refused(got, "low-latency")?,
                    Some(want) => {
                        let used = got?;
                        ensure(used == want, || {
                            format!("all-gather {what}: ran {used:?}, expected {want:?}")
                        })?;
                        let w = format!("all-gather {what}");
                        check_view(check_eq, &w, &dst.to_vec()?, ds, &gathered, &marks)?;
                    }
                }
                // All-to-all.
                let src = p.alloc_from(&moved_from::<T>(me, n * m, ss))?;
                let mut dst = p.alloc_from(&marks)?;
                p.barrier_all()?;
                let got = comm.all_to_all(
                    &mut dst.view_mut(ds..ds + n * m)?,
                    &src.view(ss..ss + n * m)?,
                    alg,
                );
                util::settle(p)?;
                match moved_by(&comm, alg, n, LlForm::AllToAll, m * size, n * m * size) {
                    None => refused(got, "low-latency")?,
                    Some(want) => {
                        let used = got?;
                        ensure(used == want, || {
                            format!("all-to-all {what}: ran {used:?}, expected {want:?}")
                        })?;
                        let w = format!("all-to-all {what}");
                        check_view(check_eq, &w, &dst.to_vec()?, ds, &swapped, &marks)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Every element size (the 16-byte vectors hold 16, 8, 4 or 2 of them).
fn move_algorithms(p: &Pgas) -> CaseResult {
    prewarm_moves(p)?;
    move_alg_sweep::<i8>(p)?;
    move_alg_sweep::<bf16>(p)?;
    move_alg_sweep::<f32>(p)?;
    move_alg_sweep::<u64>(p)
}

/// The algorithms of [`MOVE_ALGS`] this team runs for `sbytes` a PE (an all-gather) or a chunk
/// (an all-to-all): low latency where it fits.
fn move_algs_for(comm: &Comm, n: usize, how: LlForm, sbytes: usize) -> Vec<Algorithm> {
    MOVE_ALGS
        .iter()
        .copied()
        .filter(|&a| {
            a != Algorithm::LowLatency
                || util::ll_moves(comm.low_latency_max_bytes(), n, how, sbytes)
        })
        .collect()
}

/// 10 rounds queued with no host sync, each an all-to-all `x -> y`, another `y -> x` (which
/// undoes it) and an all-gather of chunk 0 of `x` into `g`, by the algorithms in turn (each
/// call's kernel reads what the last one wrote, while peers may still be in the last call, on
/// the same flags): at 1000 elements a chunk (low latency too) and at 40 000 (several blocks
/// of the pulling and pushing kernels).
fn move_back_to_back(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    prewarm_moves(p)?;
    for m in [1000, 40_000] {
        let start: Vec<u64> = (0..n * m).map(|k| (me * 1_000_000 + k) as u64).collect();
        let mut x = p.alloc_from(&start)?;
        let mut y = p.alloc::<u64>(n * m)?;
        let mut g = p.alloc::<u64>(n * m)?;
        let a2a = move_algs_for(&comm, n, LlForm::AllToAll, m * 8);
        let ag = move_algs_for(&comm, n, LlForm::Gather, m * 8);
        // The broadcast's low-latency forms (direct where it fits, and the relay) between them,
        // on the same regions of the scratch, from every root in turn.
        let bc_algs = if util::ll_moves(comm.low_latency_max_bytes(), n, LlForm::Broadcast, m * 8) {
            [Algorithm::LowLatency, Algorithm::TwoShot]
        } else {
            [Algorithm::TwoShot, Algorithm::Auto]
        };
        let mut bcs = Vec::new();
        for _ in 0..10 {
            bcs.push(p.alloc::<u64>(m)?);
        }
        p.barrier_all()?;
        for (i, bc) in bcs.iter_mut().enumerate() {
            comm.all_to_all(&mut y, &x, a2a[i % a2a.len()])?;
            comm.broadcast(bc, &x.view(0..m)?, i % n, bc_algs[i % 2])?;
            comm.all_to_all(&mut x, &y, a2a[(i + 1) % a2a.len()])?;
            let x0 = TypedAlias::<u64>(Alias(x.as_device_ptr(), m), std::marker::PhantomData);
            comm.all_gather(&mut g, &x0, ag[i % ag.len()])?;
        }
        util::settle(p)?;
        for (i, bc) in bcs.iter().enumerate() {
            let want: Vec<u64> = (0..m).map(|k| ((i % n) * 1_000_000 + k) as u64).collect();
            check_eq(&format!("broadcast {i} of 10 at {m}"), &bc.to_vec()?, &want)?;
        }
        let what = format!("10 back-to-back rounds at {m} a chunk");
        check_eq(&format!("{what}: x"), &x.to_vec()?, &start)?;
        let want_y: Vec<u64> = (0..n * m)
            .map(|k| ((k / m) * 1_000_000 + me * m + k % m) as u64)
            .collect();
        check_eq(&format!("{what}: y"), &y.to_vec()?, &want_y)?;
        let want_g: Vec<u64> = (0..n * m)
            .map(|k| ((k / m) * 1_000_000 + k % m) as u64)
            .collect();
        check_eq(&format!("{what}: g"), &g.to_vec()?, &want_g)?;
    }
    Ok(())
}

/// Each algorithm's all-gather and all-to-all captured into one graph on another stream and
/// replayed 4 times (the low-latency forms' call counters and the flags' epochs live in device
/// memory, so each replay is a new call): an all-to-all `x -> y` by each form, then back
/// `y -> z` pushed, and an all-gather of chunk 0 of the first `z` (that is of `x`) by each
/// form.
fn move_graph_capture_algs(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let m = 1500;
    let mut comm = Comm::new(p, Team::WORLD)?;
    prewarm_moves(p)?;
    let start: Vec<u32> = (0..n * m).map(|k| (me * 100_000 + k) as u32).collect();
    let x = p.alloc_from(&start)?;
    let a2a = move_algs_for(&comm, n, LlForm::AllToAll, m * 4);
    let ag = move_algs_for(&comm, n, LlForm::Gather, m * 4);
    let mut ys = Vec::new();
    let mut zs = Vec::new();
    for _ in &a2a {
        ys.push(p.alloc::<u32>(n * m)?);
        zs.push(p.alloc::<u32>(n * m)?);
    }
    let mut gs = Vec::new();
    for _ in &ag {
        gs.push(p.alloc::<u32>(n * m)?);
    }
    let stream = p.cuda().new_stream()?;
    p.barrier_all()?;
    util::replay_captured(p, &stream, 4, || {
        for (i, &alg) in a2a.iter().enumerate() {
            comm.all_to_all(&mut ys[i], &x, alg.on(&stream))?;
            comm.all_to_all(&mut zs[i], &ys[i], Algorithm::TwoShot.on(&stream))?;
        }
        for (i, &alg) in ag.iter().enumerate() {
            let z0 = TypedAlias::<u32>(Alias(zs[0].as_device_ptr(), m), std::marker::PhantomData);
            comm.all_gather(&mut gs[i], &z0, alg.on(&stream))?;
        }
        Ok(())
    })?;
    let want_y: Vec<u32> = (0..n * m)
        .map(|k| ((k / m) * 100_000 + me * m + k % m) as u32)
        .collect();
    let want_g: Vec<u32> = (0..n * m)
        .map(|k| ((k / m) * 100_000 + k % m) as u32)
        .collect();
    for (i, alg) in a2a.iter().enumerate() {
        check_eq(
            &format!("4 replays: all-to-all by {alg:?}"),
            &ys[i].to_vec()?,
            &want_y,
        )?;
        check_eq(
            &format!("4 replays: and back, after {alg:?}"),
            &zs[i].to_vec()?,
            &start,
        )?;
    }
    for (i, alg) in ag.iter().enumerate() {
        check_eq(
            &format!("4 replays: all-gather by {alg:?}"),
            &gs[i].to_vec()?,
            &want_g,
        )?;
    }
    Ok(())
}

/// The even PEs as a team: members all-gather and all-to-all over it by each algorithm (chunks
/// by team rank, peers by the team's table); an odd PE's communicator refuses every call.
fn move_split_team_algs(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let evens = n.div_ceil(2);
    let team = util::even_team(p)?;
    let mut comm = Comm::new(p, team)?;
    prewarm_moves(p)?;
    let m = 501;
    let src = p.alloc_from(
        &(0..evens * m)
            .map(|k| (me * 1000 + k) as i32)
            .collect::<Vec<_>>(),
    )?;
    let algs = move_algs_for(&comm, evens, LlForm::AllToAll, evens * m * 4);
    let mut ags = Vec::new();
    let mut aas = Vec::new();
    for _ in &algs {
        ags.push(p.alloc::<i32>(evens * m)?);
        aas.push(p.alloc::<i32>(evens * m)?);
    }
    p.barrier_all()?;
    let mut outcomes = Vec::new();
    for (i, &alg) in algs.iter().enumerate() {
        let part = TypedAlias::<i32>(Alias(src.as_device_ptr(), m), std::marker::PhantomData);
        outcomes.push(("all-gather", comm.all_gather(&mut ags[i], &part, alg)));
        outcomes.push(("all-to-all", comm.all_to_all(&mut aas[i], &src, alg)));
    }
    p.stream().synchronize()?;
    util::settle(p)?;
    if let Some(t) = team {
        t.destroy(p)?;
    }
    if !me.is_multiple_of(2) {
        return util::refused_to_non_member(outcomes);
    }
    for (what, o) in outcomes {
        o.map_err(|e| format!("{what} over the even PEs: {e}"))?;
    }
    let want_ag: Vec<i32> = (0..evens * m)
        .map(|k| (2 * (k / m) * 1000 + k % m) as i32)
        .collect();
    let want_aa: Vec<i32> = (0..evens * m)
        .map(|k| (2 * (k / m) * 1000 + (me / 2) * m + k % m) as i32)
        .collect();
    for (i, alg) in algs.iter().enumerate() {
        check_eq(
            &format!("all-gather by {alg:?} over the even PEs"),
            &ags[i].to_vec()?,
            &want_ag,
        )?;
        check_eq(
            &format!("all-to-all by {alg:?} over the even PEs"),
            &aas[i].to_vec()?,
            &want_aa,
        )?;
    }
    Ok(())
}

/// The refusals of the algorithms by name, on every PE alike before anything launches: low
/// latency past its size (and on one PE), the hierarchical algorithm, the pulling forms' source
/// outside the symmetric heap (peers load it there); then a good call.
fn move_bad_algorithms(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    prewarm_moves(p)?;
    let m = coll::LL_GATHER_MAX_BYTES / 4 + 1;
    let part = p.alloc::<f32>(m)?;
    let mut whole = p.alloc::<f32>(n * m)?;
    let mut other = p.alloc::<f32>(n * m)?;
    refused(
        comm.all_gather(&mut whole, &part, Algorithm::LowLatency),
        "low-latency",
    )?;
    refused(
        comm.all_to_all(&mut other, &whole, Algorithm::LowLatency),
        "low-latency",
    )?;
    refused(
        comm.all_gather(&mut whole, &part, Algorithm::Hierarchical),
        "Hierarchical",
    )?;
    refused(
        comm.all_to_all(&mut other, &whole, Algorithm::Hierarchical),
        "Hierarchical",
    )?;
    if comm.peers_reachable() {
        let stream = p.stream();
        let plain = stream.alloc_zeros::<f32>(n * m)?;
        let (ptr, guard) = plain.device_ptr(stream);
        let r1 = comm.all_gather(&mut whole, &Alias(ptr, m), Algorithm::OneShot);
        let r2 = comm.all_to_all(&mut other, &Alias(ptr, n * m), Algorithm::OneShot);
        drop(guard);
        refused(r1, "symmetric heap")?;
        refused(r2, "symmetric heap")?;
    }
    let ones = p.alloc_from(&vec![1.0f32; m])?;
    p.barrier_all()?;
    comm.all_gather(&mut whole, &ones, Algorithm::Auto)?;
    util::settle(p)?;
    check_eq(
        "an all-gather after the refusals",
        &whole.to_vec()?,
        &vec![1.0; n * m],
    )
}
