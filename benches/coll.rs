//! bf16 all-reduce: `pgas::coll` (one-shot, two-shot, the automatic choice, NVSHMEM's own)
//! against NCCL, eager and captured into CUDA graphs, in the same job, 8 B to 1 GiB.
//!
//! ```text
//! pgas-run -n 2 -- target/release/deps/coll-<hash> [OUTDIR]
//! ```
//!
//! Run it with `NVSHMEM_DISABLE_CUDA_VMM=1`: NVSHMEM 3.4.5's default (VMM) heap refuses single
//! allocations of 1 GiB, which the top size needs.
//!
//! Every PE runs it. Each (size, method, mode) is timed with CUDA events around `K` back-to-back
//! calls (`K` shrinks with the size), repeated, and the median of the repetitions is reported;
//! each method's result is checked against the sum computed here before its figures count.
//! NCCL is loaded by name (`libnccl.so`, which cudarc looks for; PyTorch's wheel has
//! `nvidia/nccl/lib/libnccl.so.2`, so put a `libnccl.so` link to it on `LD_LIBRARY_PATH`), its
//! unique id crosses the PEs through an NVSHMEM broadcast, and it runs on the same symmetric
//! buffers through cudarc's raw calls. Without it the NCCL columns say so. PE 0 prints a table
//! and `FIGURE` lines, and writes the table to `OUTDIR/coll.md` when given.

mod common;

use common::nccl::{nccl_comm, Nccl};
use common::plot::{self, human};
use common::{emit, median, show, time_on_stream, BenchResult, Figure};
use pgas::coll::{self, Algorithm, Comm};
use pgas::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use pgas::cudarc::driver::CudaStream;
use pgas::cudarc::nccl::{result as nccl, sys as nccl_sys};
use pgas::prelude::*;
use std::fmt::Write as _;
use std::sync::Arc;

const BENCH: &str = "coll";
const REPS: usize = 7;
const SIZES: &[usize] = &[
    8,
    1 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
    256 << 20,
    1 << 30,
];

#[derive(Clone, Copy, PartialEq)]
enum Method {
    Pgas(Algorithm),
    Nccl,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Pgas(Algorithm::OneShot) => "one_shot",
            Method::Pgas(Algorithm::TwoShot) => "two_shot",
            Method::Pgas(Algorithm::Auto) => "auto",
            Method::Pgas(Algorithm::Nvshmem) => "nvshmem",
            Method::Nccl => "nccl",
        }
    }
    /// Whether it runs at `bytes` (one-shot's traffic grows with the PEs; NVSHMEM's host
    /// reduction is slow at the top and not captured).
    fn runs(self, bytes: usize, graph: bool) -> bool {
        match self {
            Method::Pgas(Algorithm::OneShot) => bytes <= 16 << 20,
            Method::Pgas(Algorithm::Nvshmem) => !graph && bytes <= 64 << 20,
            _ => true,
        }
    }
}

const METHODS: &[Method] = &[
    Method::Pgas(Algorithm::OneShot),
    Method::Pgas(Algorithm::TwoShot),
    Method::Pgas(Algorithm::Auto),
    Method::Pgas(Algorithm::Nvshmem),
    Method::Nccl,
];

/// Enqueues one all-reduce of `len` elements by `m` on `stream`.
fn enqueue(
    m: Method,
    comm: &mut Comm,
    nccl_comm: Option<&Nccl>,
    stream: &CudaStream,
    dst: &mut SymViewMut<'_, bf16>,
    src: &SymView<'_, bf16>,
) -> BenchResult<()> {
    match m {
        Method::Pgas(a) => {
            comm.all_reduce_on(stream, dst, src, ReduceOp::Sum, a)?;
        }
        Method::Nccl => {
            let c = nccl_comm.ok_or("NCCL is not loaded")?;
            // SAFETY: both buffers are device memory of `len` elements on this GPU.
            unsafe {
                nccl::all_reduce(
                    src.as_device_ptr() as *const _,
                    dst.as_device_ptr() as *mut _,
                    src.len(),
                    nccl_sys::ncclDataType_t::ncclBfloat16,
                    nccl_sys::ncclRedOp_t::ncclSum,
                    c.0,
                    stream.cu_stream() as _,
                )
            }
            .map_err(|e| format!("ncclAllReduce: {e:?}"))?;
        }
    }
    Ok(())
}

fn main() -> BenchResult<()> {
    if !common::gpu_present() {
        println!("{BENCH}: skipped: no GPU");
        return Ok(());
    }
    let out_dir = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let max = *SIZES.last().unwrap();
    let p = pgas::builder().heap_size(2 * max + (512 << 20)).init()?;
    let (me, n) = (p.my_pe(), p.n_pes());
    let machine = format!("{} x{n} PE", p.cuda().name()?);
    let nccl_comm = nccl_comm(&p)?;
    let mut comm = Comm::new(&p, Team::WORLD)?;
    coll::prewarm::<bf16>(&p)?;
    let len_max = max / 2;
    let src_host: Vec<bf16> = (0..len_max)
        .map(|i| bf16::from_f32(((me + i) % 8) as f32))
        .collect();
    let src = p.alloc_from(&src_host)?;
    drop(src_host);
    let mut dst = p.alloc::<bf16>(len_max)?;
    let want = |i: usize| -> f32 { (0..n).map(|pe| ((pe + i) % 8) as f32).sum() };
    let side: Arc<CudaStream> = p.cuda().new_stream()?;
    if me == 0 {
        println!(
            "{BENCH}: bf16 all-reduce Sum on {machine}; NCCL {}",
            if nccl_comm.is_some() {
                "loaded"
            } else {
                "not found (no libnccl.so on the loader's path): NCCL columns empty"
            }
        );
    }
    // results[size][method][mode] = microseconds (NaN: not run).
    let mut results = vec![[[f64::NAN; 2]; 5]; SIZES.len()];
    for (si, &bytes) in SIZES.iter().enumerate() {
        let len = bytes / 2;
        let k = (64 << 20) / bytes.max(1 << 20);
        let k = k.clamp(2, 20);
        for (mi, &m) in METHODS.iter().enumerate() {
            if m == Method::Nccl && nccl_comm.is_none() {
                continue;
            }
            for (gi, graph) in [false, true].into_iter().enumerate() {
                if !m.runs(bytes, graph) {
                    continue;
                }
                // NVSHMEM's host reduction runs on the context's stream only.
                let stream: Arc<CudaStream> = if m == Method::Pgas(Algorithm::Nvshmem) {
                    p.stream().clone()
                } else {
                    side.clone()
                };
                let s = src.view(0..len)?;
                let mut d = dst.view_mut(0..len)?;
                // Warm up (also the first launch, which a capture needs behind it).
                p.barrier_all()?;
                for _ in 0..3 {
                    enqueue(m, &mut comm, nccl_comm.as_ref(), &stream, &mut d, &s)?;
                }
                stream.synchronize()?;
                let graph_exec = if graph {
                    p.barrier_all()?;
                    stream
                        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
                    let mut r = Ok(());
                    for _ in 0..k {
                        r = r.and(enqueue(
                            m,
                            &mut comm,
                            nccl_comm.as_ref(),
                            &stream,
                            &mut d,
                            &s,
                        ));
                    }
                    let g = stream.end_capture(CUgraphInstantiate_flags(0))?;
                    r?;
                    let g = g.ok_or("empty capture")?;
                    g.upload()?;
                    Some(g)
                } else {
                    None
                };
                let mut times = Vec::with_capacity(REPS);
                for _ in 0..REPS {
                    p.barrier_all()?;
                    let ms = time_on_stream(&stream, || {
                        match &graph_exec {
                            Some(g) => g.launch()?,
                            None => {
                                for _ in 0..k {
                                    enqueue(m, &mut comm, nccl_comm.as_ref(), &stream, &mut d, &s)?;
                                }
                            }
                        }
                        Ok(())
                    })?;
                    times.push(ms * 1000.0 / k as f64);
                }
                drop(graph_exec);
                stream.synchronize()?;
                // Check the first and last million elements (one range when they meet), then
                // poison them so the next method's result is its own.
                let head = len.min(1 << 20);
                let tail_start = (len - len.min(1 << 20)).max(head);
                for (lo, hi) in [(0, head), (tail_start, len)] {
                    if lo == hi {
                        continue;
                    }
                    let got = dst.view(lo..hi)?.to_vec()?;
                    if let Some(j) = (0..got.len()).find(|&j| got[j].to_f32() != want(lo + j)) {
                        return Err(format!(
                            "{} {} of {bytes} B: element {} is {}, expected {}",
                            m.name(),
                            if graph { "graph" } else { "eager" },
                            lo + j,
                            got[j],
                            want(lo + j)
                        )
                        .into());
                    }
                    dst.view_mut(lo..hi)?.fill(bf16::from_f32(-1.0))?;
                }
                results[si][mi][gi] = median(&times);
            }
        }
        p.barrier_all()?;
    }
    if me != 0 {
        return Ok(());
    }
    let busbw =
        |bytes: usize, us: f64| bytes as f64 / (us * 1e-6) * 2.0 * (n - 1) as f64 / n as f64 / 1e9;
    let mut table = format!(
        "# bf16 all-reduce on {machine}\n\nMedian microseconds per call ({REPS} repetitions of K back-to-back calls); \
         `eager / graph`. Bus bandwidth (GB/s) = bytes / time x 2(n-1)/n.\n\n\
         | size | one-shot | two-shot | auto | NVSHMEM | NCCL | auto busbw | NCCL busbw |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    );
    for (si, &bytes) in SIZES.iter().enumerate() {
        let r = &results[si];
        let cell = |mi: usize| format!("{} / {}", show(r[mi][0]), show(r[mi][1]));
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            human(bytes),
            cell(0),
            cell(1),
            cell(2),
            cell(3),
            cell(4),
            show(busbw(bytes, r[2][0].min(r[2][1]))),
            show(busbw(bytes, r[4][0].min(r[4][1]))),
        );
        for (mi, m) in METHODS.iter().enumerate() {
            for (gi, mode) in ["eager", "graph"].iter().enumerate() {
                if r[mi][gi].is_finite() {
                    emit(
                        BENCH,
                        &machine,
                        &Figure {
                            name: format!("allreduce_bf16_{}_{}_{mode}", human(bytes), m.name()),
                            value: r[mi][gi],
                            unit: "us",
                            note: format!("median of {REPS}"),
                        },
                    );
                }
            }
        }
        if r[4][0].is_finite() {
            let best = |mi: usize| r[mi][0].min(r[mi][1]);
            emit(
                BENCH,
                &machine,
                &Figure {
                    name: format!("allreduce_bf16_{}_auto_speedup_vs_nccl", human(bytes)),
                    value: best(4) / best(2),
                    unit: "x",
                    note: "best of eager and graph, each side".to_owned(),
                },
            );
        }
    }
    println!("{table}");
    if let Some(dir) = out_dir {
        std::fs::create_dir_all(&dir)?;
        let dir = std::path::Path::new(&dir);
        std::fs::write(dir.join("coll.md"), &table)?;
        let names: [&str; 5] = std::array::from_fn(|i| METHODS[i].name());
        plot::all_reduce(dir, &machine, SIZES, &results, &names, n)?;
    }
    Ok(())
}
