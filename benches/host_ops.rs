//! What pgas's host calls cost (`host_ops`; one PE, or `pgas-run -n N`), each the median of many
//! calls, host call plus the stream synchronize that makes its result visible:
//! - put and get of 4 KiB, quiet, barrier_all, atomic_fetch_add;
//! - a put-with-signal to the next PE followed by the wait for the previous PE's signal, three
//!   ways: pgas's bounded host wait (`signal_wait_until`, which polls with a back-off), NVSHMEM's
//!   own on-stream wait followed by a stream synchronize (`signal_wait_until_on_stream`, the
//!   form NVSHMEM4Py's `signal_wait(stream=)` is), and their ratio;
//! - a wait satisfied 10 us after it starts (another thread signals this PE on a second stream
//!   10 us in): the time until the bounded wait returns, which had a floor of about 300 us while
//!   it slept 200 us between polls;
//! - the live-allocation check every host call makes (`heap::LiveSpans::check`), per call, with
//!   1, 64 and 4096 allocations live: it must not show beside the latencies above;
//! - the host time of two library calls, enqueue only (the stream synchronized between calls,
//!   untimed): `pgas::gemm::gemm_raw` at 256^3 (sm_90a) and `Comm::all_reduce` of 8 bytes;
//!   `python/benches/torch_ops.py` times the same calls from Python, for the cost the Python
//!   layer adds.

mod common;

use common::{median, BenchResult, Figure};
use pgas::cudarc::driver::{DevicePtr, DevicePtrMut};
use pgas::heap::{LiveSpans, SpanKind};
use pgas::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const BENCH: &str = "host_ops";
const REPS: usize = 2000;
const WARMUP: usize = 50;
const WAIT: Duration = Duration::from_secs(10);

/// Median microseconds of `REPS` runs of `op` after `WARMUP` unrecorded ones.
fn median_us(mut op: impl FnMut() -> BenchResult<()>) -> BenchResult<f64> {
    let mut us = Vec::with_capacity(REPS);
    for i in 0..WARMUP + REPS {
        let t = Instant::now();
        op()?;
        if i >= WARMUP {
            us.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(median(&us))
}

/// Median microseconds of the host call `op` alone, the stream synchronized after each (untimed).
fn enqueue_us(p: &Pgas, mut op: impl FnMut() -> BenchResult<()>) -> BenchResult<f64> {
    let mut us = Vec::with_capacity(REPS);
    for i in 0..WARMUP + REPS {
        let t = Instant::now();
        op()?;
        let elapsed = t.elapsed().as_secs_f64() * 1e6;
        p.stream().synchronize()?;
        if i >= WARMUP {
            us.push(elapsed);
        }
    }
    Ok(median(&us))
}

/// The library calls' host times (see the module docs): the GEMM where the GPU is sm_90a.
fn library_enqueue(
    p: &Pgas, fig: &mut impl FnMut(&str, f64, &'static str, &str),
) -> BenchResult<()> {
    use pgas::coll::{Algorithm, Comm};
    let mut comm = Comm::new(p, Team::WORLD)?;
    let (mut dst, src) = (p.alloc::<f32>(2)?, p.alloc::<f32>(2)?);
    p.barrier_all()?;
    let all_reduce = enqueue_us(p, || {
        comm.all_reduce(&mut dst, &src, ReduceOp::Sum, Algorithm::Auto)?;
        Ok(())
    })?;
    fig(
        "all_reduce_8B_enqueue",
        all_reduce,
        "us",
        "Comm::all_reduce of 8 bytes, host time of the call (pgas.coll.all_reduce's Rust call)",
    );
    if p.compute_capability()?.0 == 9 {
        let n = 256;
        let s = p.stream();
        let (mut c, a, b) = (
            s.alloc_zeros::<bf16>(n * n)?,
            s.alloc_zeros::<bf16>(n * n)?,
            s.alloc_zeros::<bf16>(n * n)?,
        );
        let (pc, pa, pb) = (c.device_ptr_mut(s).0, a.device_ptr(s).0, b.device_ptr(s).0);
        let gemm = enqueue_us(p, || {
            // SAFETY: three live 256 x 256 bf16 buffers on this GPU, synchronized after each call.
            unsafe { pgas::gemm::gemm_raw(p, s, (pc, pa, pb), (n, n, n), false)? };
            Ok(())
        })?;
        fig(
            "gemm_256_enqueue",
            gemm,
            "us",
            "pgas::gemm::gemm_raw at 256^3 bf16, host time of the call (pgas.gemm.gemm's Rust call)",
        );
    }
    Ok(())
}

/// Nanoseconds of one `LiveSpans::check` with `spans` allocations live (the median of 101
/// batches of 10,000 checks spread over the allocations).
fn live_check_ns(spans: usize) -> f64 {
    let live = LiveSpans::default();
    for i in 0..spans as u64 {
        live.track(0x7f00_0000_0000 + i * 4096, 2048, SpanKind::Allocation);
    }
    let batch = 10_000u64;
    let per_call: Vec<f64> = (0..101)
        .map(|_| {
            let t = Instant::now();
            for k in 0..batch {
                let at = 0x7f00_0000_0000 + (k % spans as u64) * 4096 + 64;
                std::hint::black_box(live.check(std::hint::black_box(at), 1024).is_ok());
            }
            t.elapsed().as_secs_f64() * 1e9 / batch as f64
        })
        .collect();
    median(&per_call)
}

fn main() -> BenchResult<()> {
    if !common::gpu_present() {
        println!("{BENCH}: skipped: no GPU");
        return Ok(());
    }
    let p = pgas::init()?;
    let (me, n) = (p.my_pe(), p.n_pes());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    let machine = format!("{} x{} PE", p.cuda().name()?, n);
    let src = p.alloc::<u8>(4096)?;
    let dst = p.alloc::<u8>(4096)?;
    let counter = p.alloc::<u64>(1)?;
    let sig = p.alloc::<u64>(2)?;
    let sync = || -> BenchResult<()> { Ok(p.stream().synchronize()?) };
    let mut figs: Vec<Figure> = Vec::new();
    let mut fig = |name: &str, value: f64, unit: &'static str, note: &str| {
        figs.push(Figure::new(name, value, unit, note))
    };
    p.barrier_all()?;

    let put = median_us(|| {
        p.put(&dst, &src, next)?;
        sync()
    })?;
    fig(
        "put_4KiB",
        put,
        "us",
        "put to the next PE + stream synchronize",
    );
    let get = median_us(|| {
        p.get(&dst, &src, prev)?;
        sync()
    })?;
    fig(
        "get_4KiB",
        get,
        "us",
        "get from the previous PE + stream synchronize",
    );
    let quiet = median_us(|| Ok(p.quiet()?))?;
    fig("quiet", quiet, "us", "quiet (waits for the stream)");
    let barrier = median_us(|| Ok(p.barrier_all()?))?;
    fig(
        "barrier_all",
        barrier,
        "us",
        "barrier_all (waits for the stream)",
    );
    let amo = median_us(|| {
        p.atomic_fetch_add::<u64>(&counter, 0, 1, next)?;
        Ok(())
    })?;
    fig(
        "atomic_fetch_add",
        amo,
        "us",
        "blocking fetch-add on the next PE",
    );

    // Signal word 0: each round k, every PE sets the next PE's word to k and waits for its own
    // word to become k (set by the previous PE).
    let mut round = 0u64;
    p.barrier_all()?;
    let bounded = median_us(|| {
        round += 1;
        p.put_signal(&dst, &src, &sig, 0, round, SignalOp::Set, next)?;
        p.signal_wait_until(&sig, 0, Cmp::Ge, round, WAIT)?;
        Ok(())
    })?;
    p.barrier_all()?;
    let on_stream = median_us(|| {
        round += 1;
        p.put_signal(&dst, &src, &sig, 0, round, SignalOp::Set, next)?;
        p.signal_wait_until_on_stream(p.stream(), &sig, 0, Cmp::Ge, round)?;
        sync()
    })?;
    fig(
        "put_signal_wait_bounded",
        bounded,
        "us",
        "put_signal 4 KiB + signal_wait_until (pgas's bounded host wait)",
    );
    fig(
        "put_signal_wait_on_stream",
        on_stream,
        "us",
        "put_signal 4 KiB + NVSHMEM's on-stream wait + stream synchronize",
    );
    fig(
        "bounded_over_on_stream",
        bounded / on_stream,
        "x",
        "the bounded wait's time over NVSHMEM's on-stream wait's (1.0: no floor)",
    );

    // Word 1: a thread of this PE signals it 10 us after the wait starts, on a second stream.
    // The thread lives for the whole measurement (spawning one per wait would be timed too):
    // it spins until the main thread publishes a round's start, then until 10 us past it.
    let second = p.cuda().new_stream()?;
    let delay = Duration::from_micros(10);
    let origin = Instant::now();
    // The round's value and its start in ns since `origin` (0: no round yet; u64::MAX: stop).
    let round_value = AtomicU64::new(0);
    let round_start = AtomicU64::new(0);
    let mut late = Vec::with_capacity(REPS);
    std::thread::scope(|s| -> BenchResult<()> {
        let signaler = s.spawn(|| -> pgas::Result<()> {
            let mut done = 0;
            loop {
                let value = round_value.load(Ordering::Acquire);
                if value == u64::MAX {
                    return Ok(());
                }
                if value == done {
                    std::hint::spin_loop();
                    continue;
                }
                let at = Duration::from_nanos(round_start.load(Ordering::Acquire)) + delay;
                while origin.elapsed() < at {
                    std::hint::spin_loop();
                }
                p.signal_op_on(&second, &sig, 1, value, SignalOp::Set, me)?;
                done = value;
            }
        });
        let mut result = Ok(());
        for i in 0..WARMUP + REPS {
            let value = i as u64 + 1;
            let start = origin.elapsed();
            round_start.store(start.as_nanos() as u64, Ordering::Release);
            round_value.store(value, Ordering::Release);
            if let Err(e) = p.signal_wait_until(&sig, 1, Cmp::Eq, value, WAIT) {
                result = Err(e.into());
                break;
            }
            if i >= WARMUP {
                late.push((origin.elapsed() - start).as_secs_f64() * 1e6);
            }
        }
        round_value.store(u64::MAX, Ordering::Release);
        signaler
            .join()
            .map_err(|_| "the signaling thread panicked")??;
        result
    })?;
    second.synchronize()?;
    fig(
        "wait_signaled_after_10us",
        median(&late),
        "us",
        "signal_wait_until satisfied by a signal issued 10 us after it started, from another \
         thread on a second stream (was >= 300 us with 200 us sleeps)",
    );

    for spans in [1, 64, 4096] {
        fig(
            &format!("live_check_{spans}_allocations"),
            live_check_ns(spans),
            "ns",
            "LiveSpans::check, the live-allocation check of every host call",
        );
    }
    library_enqueue(&p, &mut fig)?;
    p.barrier_all()?;

    if me == 0 {
        common::report(BENCH, &machine, &figs);
    }
    Ok(())
}
