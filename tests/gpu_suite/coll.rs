//! `pgas::coll`: all-reduce by every algorithm, element type and reduction at several lengths
//! (1 element, odd lengths, several blocks' worth), against sums computed here (each PE's input
//! is a function of its number, so every PE computes all of them); back-to-back calls with no
//! host sync between them (the flag protocol's buffer-reuse race); a split team; every bad
//! input; and CUDA graph capture of pgas launches (a collective and a cooperative kernel),
//! replayed several times. Then reduce-scatter and all-gather: several types, ops and lengths per
//! rank (whole buffers and views off a 16-byte boundary), back-to-back, a split team, every bad
//! input, graph capture.

use crate::runner::{case, Case};
use crate::util::{self, check_close, check_eq, ensure, CaseResult};
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
];

/// The suite's own kernels (the collectives' are prewarmed by the cases through
/// `coll::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[&coop_count::SPEC];

/// 1 element, odd lengths, one block's worth, several blocks (two-shot chunks of unequal length),
/// one 16-byte vector of 4- and 2-byte types (4, 8), and enough vectors that threads take a
/// second step with a partial pair (300_007, a tail past the last vector in every type).
const LENS: &[usize] = &[1, 4, 7, 8, 1000, 4099, 70_001, 300_007];

/// Lengths of the views that start off a 16-byte boundary (see `sweep`).
const VIEW_LENS: &[usize] = &[5, 4099, 70_001];

const ALGS: &[Algorithm] = &[
    Algorithm::OneShot,
    Algorithm::TwoShot,
    Algorithm::Auto,
    Algorithm::Nvshmem,
];

/// Input element `i` of PE `pe` as a small integer (exact in every type, also bf16 for sums).
fn input(pe: usize, i: usize) -> i64 {
    ((pe * 31 + i * 17) % 13) as i64 - 4
}

/// One (type, op) over every algorithm and length: `to` makes a `T` from a small integer,
/// `want` folds the PEs' inputs as f64 (for floats) or exactly (integers through `from`).
fn sweep<T: AllReduceElem + Copy + std::fmt::Debug + PartialEq>(
    p: &Pgas,
    op: ReduceOp,
    to: impl Fn(i64) -> T,
    fold: impl Fn(T, T) -> T,
    compare: impl Fn(&str, &[T], &[T]) -> CaseResult,
) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    coll::prewarm::<T>(p)?;
    for &len in LENS {
        let src = p.alloc_from(&(0..len).map(|i| to(input(me, i))).collect::<Vec<_>>())?;
        let want: Vec<T> = (0..len)
            .map(|i| (1..n).fold(to(input(0, i)), |acc, pe| fold(acc, to(input(pe, i)))))
            .collect();
        for &alg in ALGS {
            // NVSHMEM's reductions exist for And/Or/Xor only on integers, as ours.
            let mut dst = p.alloc::<T>(len)?;
            p.barrier_all()?;
            let used = comm.all_reduce(&mut dst, &src, op, alg)?;
            util::settle(p)?;
            compare(
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
        let want: Vec<T> = (0..len)
            .map(|i| (1..n).fold(to(input(0, i)), |acc, pe| fold(acc, to(input(pe, i)))))
            .collect();
        // Element `k` of a buffer viewed from `at` holds input `k - at`; before it, a marker.
        let filled = |at: usize| -> Vec<T> {
            (0..len + 2)
                .map(|k| to(if k < at { 5 } else { input(me, k - at) }))
                .collect()
        };
        for (ds, ss, alg) in [
            (1, 1, Algorithm::OneShot),
            (1, 1, Algorithm::TwoShot),
            (0, 1, Algorithm::OneShot),
            (0, 1, Algorithm::TwoShot),
        ] {
            let src = p.alloc_from(&filled(ss))?;
            let marks = vec![to(5); len + 2];
            let mut dst = p.alloc_from(&marks)?;
            p.barrier_all()?;
            comm.all_reduce(
                &mut dst.view_mut(ds..ds + len)?,
                &src.view(ss..ss + len)?,
                op,
                alg,
            )?;
            util::settle(p)?;
            let got = dst.to_vec()?;
            let what = format!("{op:?} {alg:?} of {len}, dst at {ds}, src at {ss}");
            compare(&what, &got[ds..ds + len], &want)?;
            compare(
                &format!("{what}: outside the view"),
                &got[..ds],
                &marks[..ds],
            )?;
            compare(
                &format!("{what}: past the view"),
                &got[ds + len..],
                &marks[ds + len..],
            )?;
        }
        let mut x = p.alloc_from(&filled(1))?;
        p.barrier_all()?;
        comm.all_reduce_in_place(&mut x.view_mut(1..1 + len)?, op, Algorithm::TwoShot)?;
        util::settle(p)?;
        let got = x.to_vec()?;
        let what = format!("{op:?} TwoShot in place of {len} at 1");
        compare(&what, &got[1..1 + len], &want)?;
        compare(&format!("{what}: outside the view"), &got[..1], &[to(5)])?;
        compare(
            &format!("{what}: past the view"),
            &got[1 + len..],
            &filled(1)[1 + len..],
        )?;
    }
    Ok(())
}

fn float_ops<T: AllReduceElem + Copy + std::fmt::Debug + PartialEq>(
    p: &Pgas,
    to: fn(f64) -> T,
    back: fn(T) -> f64,
    rel: f64,
) -> CaseResult {
    for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max] {
        let f = move |a: T, b: T| {
            let (a, b) = (back(a), back(b));
            to(match op {
                ReduceOp::Sum => a + b,
                ReduceOp::Prod => a * b,
                ReduceOp::Min => a.min(b),
                _ => a.max(b),
            })
        };
        sweep(
            p,
            op,
            |v| to(v as f64),
            f,
            |what, got: &[T], want: &[T]| {
                let g: Vec<f64> = got.iter().map(|&x| back(x)).collect();
                let w: Vec<f64> = want.iter().map(|&x| back(x)).collect();
                check_close(what, &g, &w, rel)
            },
        )?;
    }
    Ok(())
}

fn f32_case(p: &Pgas) -> CaseResult {
    float_ops::<f32>(p, |v| v as f32, |v| v as f64, 0.0)
}

fn f64_case(p: &Pgas) -> CaseResult {
    float_ops::<f64>(p, |v| v, |v| v, 0.0)
}

// The 16-bit floats reduce in f32 and round once; the host rounds after every step, so allow
// a rounding step per PE (products of up to 4 values reach 2^8, past bf16's exact integers).
fn bf16_case(p: &Pgas) -> CaseResult {
    float_ops::<bf16>(p, bf16::from_f64, |v| v.to_f64(), 2.0f64.powi(-7))
}

fn f16_case(p: &Pgas) -> CaseResult {
    float_ops::<f16>(p, f16::from_f64, |v| v.to_f64(), 2.0f64.powi(-10))
}

/// Every op of an integer type, wrapping like the GPU.
macro_rules! int_ops {
    ($p:expr, $t:ty) => {{
        for op in [
            ReduceOp::Sum,
            ReduceOp::Prod,
            ReduceOp::Min,
            ReduceOp::Max,
            ReduceOp::And,
            ReduceOp::Or,
            ReduceOp::Xor,
        ] {
            let f = move |a: $t, b: $t| -> $t {
                match op {
                    ReduceOp::Sum => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::And => a & b,
                    ReduceOp::Or => a | b,
                    ReduceOp::Xor => a ^ b,
                }
            };
            sweep(
                $p,
                op,
                |v| v as $t,
                f,
                |w, g: &[$t], e: &[$t]| check_eq(w, g, e),
            )?;
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    }};
}

fn i32_case(p: &Pgas) -> CaseResult {
    int_ops!(p, i32)
}

fn narrow_case(p: &Pgas) -> CaseResult {
    int_ops!(p, i8)?;
    int_ops!(p, u8)
}

fn wide_case(p: &Pgas) -> CaseResult {
    int_ops!(p, i64)?;
    int_ops!(p, u64)?;
    int_ops!(p, u16)?;
    int_ops!(p, i16)?;
    int_ops!(p, u32)
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
    let evens = n.div_ceil(2);
    let team = Team::WORLD.split_strided(p, 0, 2, evens)?;
    let mut comm = Comm::new(p, team)?;
    coll::prewarm::<f32>(p)?;
    let src = p.alloc_from(&vec![me as f32 + 1.0; 999])?;
    let mut dst = p.alloc::<f32>(999)?;
    p.barrier_all()?;
    let mut outcomes = Vec::new();
    for alg in [Algorithm::OneShot, Algorithm::TwoShot, Algorithm::Nvshmem] {
        outcomes.push(comm.all_reduce(&mut dst, &src, ReduceOp::Sum, alg));
        p.stream().synchronize()?;
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
        check_eq("sum over the even PEs", &dst.to_vec()?, &vec![want; 999])
    } else {
        for o in outcomes {
            let e = o
                .err()
                .ok_or("an odd PE's all-reduce over the even team succeeded")?;
            ensure(e.to_string().contains("not a member"), || {
                format!("unclear error: {e}")
            })?;
        }
        Ok(())
    }
}

/// Every bad input is an `Err` on every PE before anything is launched (so no PE hangs).
fn bad_input(p: &Pgas) -> CaseResult {
    let mut comm = Comm::new(p, Team::WORLD)?;
    let a = p.alloc::<f32>(64)?;
    let mut b = p.alloc::<f32>(65)?;
    let mut c = p.alloc::<f32>(64)?;
    let expect = |r: pgas::Result<Algorithm>, words: &str| -> CaseResult {
        match r {
            Ok(a) => Err(format!("accepted ({a:?}); expected an error saying '{words}'").into()),
            Err(e) if e.to_string().contains(words) => Ok(()),
            Err(e) => Err(format!("error '{e}' does not say '{words}'").into()),
        }
    };
    expect(
        comm.all_reduce(&mut b, &a, ReduceOp::Sum, Algorithm::Auto),
        "length mismatch",
    )?;
    expect(
        comm.all_reduce(&mut c, &a, ReduceOp::Xor, Algorithm::Auto),
        "integer types only",
    )?;
    expect(
        comm.all_reduce_in_place(&mut c, ReduceOp::Sum, Algorithm::OneShot),
        "cannot run in place",
    )?;
    // Safe Rust cannot borrow overlapping views as `&mut` and `&`; a SymRegion of one's own can.
    let shifted = Alias(c.as_device_ptr() + 4 * 20, 40);
    expect(
        comm.all_reduce(
            &mut c.view_mut(0..40)?,
            &shifted,
            ReduceOp::Sum,
            Algorithm::TwoShot,
        ),
        "overlap",
    )?;
    let other = p.cuda().new_stream()?;
    expect(
        comm.all_reduce_on(&other, &mut c, &a, ReduceOp::Sum, Algorithm::Nvshmem),
        "Pgas::stream()",
    )?;
    Ok(())
}

/// A region named by address and length (what a user's own `SymRegion` could be).
struct Alias(u64, usize);

impl SymRegion<f32> for Alias {
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
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let captured = (|| -> pgas::Result<()> {
        comm.all_reduce_on(&stream, &mut b, &a, ReduceOp::Sum, Algorithm::OneShot)?;
        comm.all_reduce_in_place_on(&stream, &mut b, ReduceOp::Sum, Algorithm::TwoShot)?;
        // b -> a so that the next replay starts from the last result.
        comm.all_reduce_on(&stream, &mut a, &b, ReduceOp::Max, Algorithm::OneShot)?;
        Ok(())
    })();
    let graph = stream.end_capture(CUgraphInstantiate_flags(0))?;
    captured?;
    let graph = graph.ok_or("the capture produced no graph")?;
    for _ in 0..5 {
        graph.launch()?;
    }
    stream.synchronize()?;
    util::settle(p)?;
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
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let captured = coop_count::launch_on(p, &stream, LaunchConfig::blocks(1, 128), &mut x);
    let graph = stream.end_capture(CUgraphInstantiate_flags(0))?;
    captured?;
    let graph = graph.ok_or("the capture produced no graph")?;
    for _ in 0..4 {
        graph.launch()?;
    }
    stream.synchronize()?;
    util::settle(p)?;
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
fn shifted<T>(to: &impl Fn(i64) -> T, pe: usize, len: usize, at: usize) -> Vec<T> {
    (0..len + 1)
        .map(|k| to(if k < at { 5 } else { input(pe, k - at) }))
        .collect()
}

/// Reduce-scatter by `op` of `n * m` elements per PE at every length of [`RS_AG_LENS`] and view
/// of [`RS_AG_VIEWS`]: rank `r` gets the fold over PEs of elements `r * m ..` of the inputs,
/// and the destination's elements outside the view keep their marks.
fn rs_sweep<T: AllReduceElem + Copy + std::fmt::Debug + PartialEq>(
    p: &Pgas,
    op: ReduceOp,
    to: impl Fn(i64) -> T,
    fold: impl Fn(T, T) -> T,
    compare: impl Fn(&str, &[T], &[T]) -> CaseResult,
) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    coll::prewarm::<T>(p)?;
    let r = comm.rank().ok_or("not a member of the world team")?;
    for &m in RS_AG_LENS {
        let want: Vec<T> = (0..m)
            .map(|i| {
                let k = r * m + i;
                (1..n).fold(to(input(0, k)), |acc, pe| fold(acc, to(input(pe, k))))
            })
            .collect();
        for &(ds, ss) in RS_AG_VIEWS {
            let src = p.alloc_from(&shifted(&to, me, n * m, ss))?;
            let marks = vec![to(5); m + 1];
            let mut dst = p.alloc_from(&marks)?;
            p.barrier_all()?;
            comm.reduce_scatter(
                &mut dst.view_mut(ds..ds + m)?,
                &src.view(ss..ss + n * m)?,
                op,
            )?;
            util::settle(p)?;
            let got = dst.to_vec()?;
            let what = format!("reduce-scatter {op:?} of {m} per rank, dst at {ds}, src at {ss}");
            compare(&what, &got[ds..ds + m], &want)?;
            compare(
                &format!("{what}: outside the view"),
                &got[..ds],
                &marks[..ds],
            )?;
            compare(
                &format!("{what}: past the view"),
                &got[ds + m..],
                &marks[ds + m..],
            )?;
        }
    }
    Ok(())
}

fn rs_floats<T: AllReduceElem + Copy + std::fmt::Debug + PartialEq>(
    p: &Pgas,
    ops: &[ReduceOp],
    to: fn(f64) -> T,
    back: fn(T) -> f64,
    rel: f64,
) -> CaseResult {
    for &op in ops {
        let f = move |a: T, b: T| {
            let (a, b) = (back(a), back(b));
            to(match op {
                ReduceOp::Sum => a + b,
                ReduceOp::Prod => a * b,
                ReduceOp::Min => a.min(b),
                _ => a.max(b),
            })
        };
        rs_sweep(
            p,
            op,
            |v| to(v as f64),
            f,
            |what, got: &[T], want: &[T]| {
                let g: Vec<f64> = got.iter().map(|&x| back(x)).collect();
                let w: Vec<f64> = want.iter().map(|&x| back(x)).collect();
                check_close(what, &g, &w, rel)
            },
        )?;
    }
    Ok(())
}

fn reduce_scatter_floats(p: &Pgas) -> CaseResult {
    use ReduceOp::{Max, Min, Prod, Sum};
    rs_floats::<f32>(p, &[Sum, Prod, Min, Max], |v| v as f32, |v| v as f64, 0.0)?;
    rs_floats::<f64>(p, &[Sum, Max], |v| v, |v| v, 0.0)?;
    rs_floats::<bf16>(
        p,
        &[Sum, Min],
        bf16::from_f64,
        |v| v.to_f64(),
        2.0f64.powi(-7),
    )?;
    rs_floats::<f16>(
        p,
        &[Sum, Prod],
        f16::from_f64,
        |v| v.to_f64(),
        2.0f64.powi(-10),
    )
}

/// Reduce-scatter by every op of the given integer types, wrapping like the GPU.
macro_rules! rs_ints {
    ($p:expr, $t:ty, $ops:expr) => {{
        for op in $ops {
            let f = move |a: $t, b: $t| -> $t {
                match op {
                    ReduceOp::Sum => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::And => a & b,
                    ReduceOp::Or => a | b,
                    ReduceOp::Xor => a ^ b,
                }
            };
            rs_sweep(
                $p,
                op,
                |v| v as $t,
                f,
                |w, g: &[$t], e: &[$t]| check_eq(w, g, e),
            )?;
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    }};
}

fn reduce_scatter_ints(p: &Pgas) -> CaseResult {
    use ReduceOp::*;
    rs_ints!(p, i32, [Sum, Prod, Min, Max, And, Or, Xor])?;
    rs_ints!(p, u8, [Sum, Xor])?;
    rs_ints!(p, i8, [Min])?;
    rs_ints!(p, u16, [Sum])?;
    rs_ints!(p, i64, [Sum, Min])?;
    rs_ints!(p, u64, [Prod, Or])
}

/// All-gather of `m` elements per PE at every length and view: chunk `r` of every PE's
/// destination is rank `r`'s input, and the elements outside the view keep their marks.
fn ag_sweep<T: AllReduceElem + Copy + std::fmt::Debug + PartialEq>(
    p: &Pgas,
    to: impl Fn(i64) -> T,
) -> CaseResult {
    let n = util::npes(p);
    let me = util::me(p);
    let mut comm = Comm::new(p, Team::WORLD)?;
    coll::prewarm::<T>(p)?;
    for &m in RS_AG_LENS {
        let want: Vec<T> = (0..n * m).map(|k| to(input(k / m, k % m))).collect();
        for &(ds, ss) in RS_AG_VIEWS {
            let src = p.alloc_from(&shifted(&to, me, m, ss))?;
            let marks = vec![to(5); n * m + 1];
            let mut dst = p.alloc_from(&marks)?;
            p.barrier_all()?;
            comm.all_gather(&mut dst.view_mut(ds..ds + n * m)?, &src.view(ss..ss + m)?)?;
            util::settle(p)?;
            let got = dst.to_vec()?;
            let what = format!(
                "all-gather of {m} per rank ({}), dst at {ds}, src at {ss}",
                std::any::type_name::<T>()
            );
            check_eq(&what, &got[ds..ds + n * m], &want)?;
            check_eq(
                &format!("{what}: outside the view"),
                &got[..ds],
                &marks[..ds],
            )?;
            check_eq(
                &format!("{what}: past the view"),
                &got[ds + n * m..],
                &marks[ds + n * m..],
            )?;
        }
    }
    Ok(())
}

/// Every element size (the 16-byte vectors hold 16, 8, 4 or 2 of them) and both 16-bit floats.
fn all_gather_types(p: &Pgas) -> CaseResult {
    ag_sweep::<f32>(p, |v| v as f32)?;
    ag_sweep::<bf16>(p, |v| bf16::from_f64(v as f64))?;
    ag_sweep::<f16>(p, |v| f16::from_f64(v as f64))?;
    ag_sweep::<f64>(p, |v| v as f64)?;
    ag_sweep::<i8>(p, |v| v as i8)?;
    ag_sweep::<u16>(p, |v| v as u16)?;
    ag_sweep::<i32>(p, |v| v as i32)?;
    ag_sweep::<u64>(p, |v| v as u64)
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
        comm.reduce_scatter(&mut b, &a, ReduceOp::Sum)?;
        comm.all_gather(&mut a, &b)?;
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
    let team = Team::WORLD.split_strided(p, 0, 2, evens)?;
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
    let r1 = comm.reduce_scatter(&mut rs, &src, ReduceOp::Sum);
    p.stream().synchronize()?;
    let r2 = comm.all_gather(&mut ag, &rs);
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
        for (what, o) in [("reduce-scatter", r1), ("all-gather", r2)] {
            let e = o
                .err()
                .ok_or_else(|| format!("an odd PE's {what} over the even team succeeded"))?;
            ensure(e.to_string().contains("not a member"), || {
                format!("unclear error: {e}")
            })?;
        }
        Ok(())
    }
}

/// Every bad input of reduce-scatter and all-gather is an `Err` on every PE before anything is
/// launched (each input is bad on every PE alike, so no PE waits for another).
fn rs_ag_bad_input(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let m = 64;
    let mut comm = Comm::new(p, Team::WORLD)?;
    let expect = |r: pgas::Result<()>, words: &str| -> CaseResult {
        match r {
            Ok(()) => Err(format!("accepted; expected an error saying '{words}'").into()),
            Err(e) if e.to_string().contains(words) => Ok(()),
            Err(e) => Err(format!("error '{e}' does not say '{words}'").into()),
        }
    };
    let big = p.alloc::<f32>(n * m + 1)?;
    let mut small = p.alloc::<f32>(m + 1)?;
    let mut gathered = p.alloc::<f32>(n * m + 1)?;
    let part = p.alloc::<f32>(m)?;
    if n > 1 {
        // Lengths that do not split into one chunk per PE.
        expect(
            comm.reduce_scatter(&mut small.view_mut(0..m)?, &big, ReduceOp::Sum),
            "multiple of",
        )?;
        expect(comm.all_gather(&mut gathered, &part), "multiple of")?;
    }
    // Lengths that split, but not into the other buffer's length.
    expect(
        comm.reduce_scatter(&mut small, &big.view(0..n * m)?, ReduceOp::Sum),
        "length mismatch",
    )?;
    expect(
        comm.all_gather(&mut gathered.view_mut(0..n * m)?, &small),
        "length mismatch",
    )?;
    expect(
        comm.reduce_scatter(
            &mut small.view_mut(0..m)?,
            &big.view(0..n * m)?,
            ReduceOp::Xor,
        ),
        "integer types only",
    )?;
    // Overlapping buffers (a SymRegion of one's own can name any address; nothing launches).
    let into_dst = Alias(small.as_device_ptr() + 4, n * m);
    expect(
        comm.reduce_scatter(&mut small.view_mut(0..m)?, &into_dst, ReduceOp::Sum),
        "overlap",
    )?;
    let inside = Alias(big.as_device_ptr() + 4, n * m);
    expect(
        comm.reduce_scatter(&mut Alias(inside.0, m), &big.view(0..n * m)?, ReduceOp::Sum),
        "overlap",
    )?;
    let inside = Alias(gathered.as_device_ptr() + 4, m);
    expect(
        comm.all_gather(&mut gathered.view_mut(0..n * m)?, &inside),
        "overlap",
    )?;
    // Buffers outside the symmetric heap where peers reach them: reduce-scatter's source,
    // all-gather's destination (a plain CUDA allocation; nothing is launched on it).
    if comm.peers_reachable() {
        let stream = p.stream();
        let plain = stream.alloc_zeros::<f32>(n * m)?;
        let (ptr, guard) = plain.device_ptr(stream);
        let mut outside = Alias(ptr, n * m);
        let r1 = comm.reduce_scatter(&mut small.view_mut(0..m)?, &outside, ReduceOp::Sum);
        let r2 = comm.all_gather(&mut outside, &part);
        drop(guard);
        expect(r1, "symmetric heap")?;
        expect(r2, "symmetric heap")?;
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
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let captured = (|| -> pgas::Result<()> {
        comm.reduce_scatter_on(&stream, &mut b, &a, ReduceOp::Sum)?;
        comm.all_gather_on(&stream, &mut a, &b)?;
        Ok(())
    })();
    let graph = stream.end_capture(CUgraphInstantiate_flags(0))?;
    captured?;
    let graph = graph.ok_or("the capture produced no graph")?;
    for _ in 0..4 {
        graph.launch()?;
    }
    stream.synchronize()?;
    util::settle(p)?;
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
