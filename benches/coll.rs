//! `pgas::coll` against NCCL, eager and captured into CUDA graphs, in the same job, on bf16:
//! all-reduce (low-latency, one-shot, two-shot, the automatic choice, NVSHMEM's own; 8 B to
//! 1 GiB), all-gather and all-to-all (NCCL: grouped `ncclSend` / `ncclRecv`; low-latency,
//! pulling, pushing and the automatic choice), reduce-scatter and broadcast (the automatic
//! choice, from PE 0), each at 8 B, 64 KiB, 256 KiB, 1 MiB, 16 MiB,
//! 256 MiB and 1 GiB (fewer sizes than the all-reduce's, to keep the whole run within a few
//! minutes).
//!
//! ```text
//! pgas-run -n 2 -- target/release/deps/coll-<hash> [OUTDIR] [--max-bytes=N]
//! ```
//!
//! `--max-bytes=N` measures only the sizes up to `N` bytes (the latency-bound ones in seconds);
//! `--only=NAME` only the collective of that name (`broadcast`, as in the figures' names).
//!
//! Peers off NVLink (issue 21's emulated nodes): run it with `PGAS_PEER_ACCESS=none` and NCCL
//! restricted the same way (`NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1`, so it too crosses its
//! network transport); then only pgas's automatic choice (NVSHMEM's collectives, eager, up to
//! 64 MiB) runs beside NCCL, and the machine line says so.
//!
//! Run it with `NVSHMEM_DISABLE_CUDA_VMM=1`: NVSHMEM 3.4.5's default (VMM) heap refuses single
//! allocations of 1 GiB, which the top size needs.
//!
//! A size is the bytes of the largest buffer of a call, as nccl-tests counts them: the
//! all-gather's output, the reduce-scatter's input, each PE's all-to-all buffer. Every PE runs
//! it. Each (collective, size, method, mode) is timed with CUDA events around `K` back-to-back
//! calls (`K` shrinks with the size), repeated, and the median of the repetitions is reported;
//! each method's result is checked against values computed here before its figures count.
//! NCCL comes from `common/nccl.rs` (loaded by name; its unique id crosses the PEs through an
//! NVSHMEM broadcast) and runs on the same symmetric buffers through cudarc's raw calls. Without it the NCCL columns say so. PE 0 prints a table
//! per collective and `FIGURE` lines, and writes the tables to `OUTDIR/coll.md` and two plots
//! per collective (`{allreduce,allgather,reducescatter,broadcast,alltoall}_{latency,busbw}.png`)
//! when given.

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
/// The all-reduce's sizes.
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
/// The other collectives' sizes (256 KiB: where the low-latency forms stop).
const FEW_SIZES: &[usize] = &[
    8,
    64 << 10,
    256 << 10,
    1 << 20,
    16 << 20,
    256 << 20,
    1 << 30,
];

/// The collectives measured.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Coll {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    AllToAll,
}

const COLLS: &[Coll] = &[
    Coll::AllReduce,
    Coll::AllGather,
    Coll::ReduceScatter,
    Coll::Broadcast,
    Coll::AllToAll,
];

impl Coll {
    /// Names in FIGURE lines and file names.
    fn stem(self) -> &'static str {
        match self {
            Coll::AllReduce => "allreduce",
            Coll::AllGather => "allgather",
            Coll::ReduceScatter => "reducescatter",
            Coll::Broadcast => "broadcast",
            Coll::AllToAll => "alltoall",
        }
    }
    fn title(self) -> &'static str {
        match self {
            Coll::AllReduce => "bf16 all-reduce Sum",
            Coll::AllGather => "bf16 all-gather",
            Coll::ReduceScatter => "bf16 reduce-scatter Sum",
            Coll::Broadcast => "bf16 broadcast from PE 0",
            Coll::AllToAll => "bf16 all-to-all",
        }
    }
    /// nccl-tests' bus bandwidth factor, and its formula.
    fn bus(self, n: usize) -> (f64, &'static str) {
        let f = (n - 1) as f64 / n as f64;
        match self {
            Coll::AllReduce => (2.0 * f, "2(n-1)/n"),
            Coll::Broadcast => (1.0, "1"),
            _ => (f, "(n-1)/n"),
        }
    }
    fn sizes(self) -> &'static [usize] {
        match self {
            Coll::AllReduce | Coll::Broadcast => SIZES,
            _ => FEW_SIZES,
        }
    }
    fn methods(self) -> &'static [Method] {
        match self {
            Coll::AllReduce => &[
                Method::Pgas(Algorithm::LowLatency),
                Method::Pgas(Algorithm::OneShot),
                Method::Pgas(Algorithm::TwoShot),
                Method::Pgas(Algorithm::Auto),
                Method::Pgas(Algorithm::Nvshmem),
                Method::Nccl,
            ],
            // The direct low-latency form, the peers' loads and the two-shot (the relay up to
            // BROADCAST_RELAY_MAX_BYTES) side by side with the choice.
            Coll::Broadcast => &[
                Method::Pgas(Algorithm::LowLatency),
                Method::Pgas(Algorithm::OneShot),
                Method::Pgas(Algorithm::TwoShot),
                Method::Pgas(Algorithm::Auto),
                Method::Nccl,
            ],
            // The low-latency, pulling and pushing forms side by side with the choice.
            Coll::AllGather | Coll::AllToAll => &[
                Method::Pgas(Algorithm::LowLatency),
                Method::Pgas(Algorithm::OneShot),
                Method::Pgas(Algorithm::TwoShot),
                Method::Pgas(Algorithm::Auto),
                Method::Nccl,
            ],
            _ => &[Method::Pgas(Algorithm::Auto), Method::Nccl],
        }
    }
}

/// The method the speedup figure compares with NCCL: pgas's own choice, which every collective
/// runs.
const HEADLINE: Method = Method::Pgas(Algorithm::Auto);

#[derive(Clone, Copy, PartialEq)]
enum Method {
    Pgas(Algorithm),
    Nccl,
}

impl Method {
    fn name(self, c: Coll) -> &'static str {
        let moving = matches!(c, Coll::AllGather | Coll::AllToAll);
        match self {
            Method::Pgas(Algorithm::LowLatency) => "low_latency",
            // All-gather's and all-to-all's one-shot loads from the peers, two-shot stores.
            Method::Pgas(Algorithm::OneShot) if moving => "pull",
            Method::Pgas(Algorithm::TwoShot) if moving => "push",
            Method::Pgas(Algorithm::OneShot) => "one_shot",
            Method::Pgas(Algorithm::TwoShot) => "two_shot",
            // The automatic choice keeps the name it had when reduce-scatter, all-gather and
            // all-to-all had one algorithm, so that their figures compare across runs.
            Method::Pgas(Algorithm::Auto) if matches!(c, Coll::AllReduce | Coll::Broadcast) => {
                "auto"
            }
            Method::Pgas(Algorithm::Auto) => "pgas",
            Method::Pgas(Algorithm::Nvshmem) => "nvshmem",
            Method::Pgas(Algorithm::Hierarchical) => "hierarchical",
            Method::Nccl => "nccl",
        }
    }
    /// Whether it runs at `bytes` (low latency up to its limit; the all-reduce's one-shot
    /// traffic grows with the PEs, the all-gather's and all-to-all's pulling form moves what
    /// the pushing one does; NVSHMEM's host reduction is slow at the top and not captured).
    /// With a peer off NVLink (`p2p` false: `PGAS_PEER_ACCESS`, another node) only pgas's
    /// choice, which is then NVSHMEM's path, eager, and NCCL run: the peer-to-peer algorithms
    /// are refused there.
    fn runs(self, c: Coll, n: usize, bytes: usize, graph: bool, p2p: bool) -> bool {
        if !p2p {
            return match self {
                Method::Nccl => true,
                Method::Pgas(a) => a == Algorithm::Auto && !graph && bytes <= 64 << 20,
            };
        }
        match self {
            // The broadcast's: the root's lines, nothing staged.
            Method::Pgas(Algorithm::LowLatency) if c == Coll::Broadcast => {
                n > 1 && bytes <= coll::LL_GATHER_MAX_BYTES
            }
            // The gathering forms: on 2 to 32 PEs (a block's shared memory holds every PE's
            // LL_BYTES_PER_BLOCK), up to LL_GATHER_MAX_BYTES a PE (on GPUs of 128 SMs or more).
            Method::Pgas(Algorithm::LowLatency) if c != Coll::AllReduce => {
                let (sl, _) = lens(c, bytes, n);
                // The all-to-all's limit is on a chunk.
                let sbytes = if c == Coll::AllToAll {
                    sl * 2 / n
                } else {
                    sl * 2
                };
                n > 1
                    && sbytes <= coll::LL_GATHER_MAX_BYTES
                    && n * sbytes.min(coll::LL_BYTES_PER_BLOCK) <= coll::LL_SHARED_MAX_BYTES
            }
            Method::Pgas(Algorithm::LowLatency) => bytes <= coll::LL_MAX_BYTES,
            Method::Pgas(Algorithm::OneShot) => c != Coll::AllReduce || bytes <= 16 << 20,
            Method::Pgas(Algorithm::Nvshmem) => !graph && bytes <= 64 << 20,
            _ => true,
        }
    }
}

/// Elements of the call's buffers for a size of `bytes`: (source, destination), whole
/// multiples of the PEs where split by them.
fn lens(c: Coll, bytes: usize, n: usize) -> (usize, usize) {
    let len = bytes / 2 / n * n;
    match c {
        Coll::AllGather => (len / n, len),
        Coll::ReduceScatter => (len, len / n),
        _ => (len, len),
    }
}

/// Enqueues one call of `c` by `m` on `stream`, on the first elements of `src` and `dst`.
#[allow(clippy::too_many_arguments)]
fn enqueue(
    c: Coll, m: Method, comm: &mut Comm, nccl_comm: Option<&Nccl>, stream: &CudaStream,
    bytes: usize, dst: &mut SymTensor<bf16>, src: &SymTensor<bf16>,
) -> BenchResult<()> {
    let n = comm.n_pes();
    let (sl, dl) = lens(c, bytes, n);
    let s = src.view(0..sl)?;
    let mut d = dst.view_mut(0..dl)?;
    let Method::Pgas(a) = m else {
        let comm = nccl_comm.ok_or("NCCL is not loaded")?.0;
        let (sp, dp) = (s.as_device_ptr(), d.as_device_ptr());
        let st = stream.cu_stream() as _;
        let bf = nccl_sys::ncclDataType_t::ncclBfloat16;
        let sum = nccl_sys::ncclRedOp_t::ncclSum;
        // SAFETY: both buffers are device memory on this GPU of the lengths given.
        let r = unsafe {
            match c {
                Coll::AllReduce => nccl::all_reduce(sp as _, dp as _, sl, bf, sum, comm, st),
                Coll::AllGather => nccl::all_gather(sp as _, dp as _, sl, bf, comm, st),
                Coll::ReduceScatter => {
                    nccl::reduce_scatter(sp as _, dp as _, dl, bf, sum, comm, st)
                }
                Coll::Broadcast => nccl::broadcast(sp as _, dp as _, sl, bf, 0, comm, st),
                Coll::AllToAll => {
                    let m = sl / n;
                    nccl::group_start().and_then(|_| {
                        for q in 0..n {
                            let off = (q * m * 2) as u64;
                            nccl::send((sp + off) as _, m, bf, q as i32, comm, st)?;
                            nccl::recv((dp + off) as _, m, bf, q as i32, comm, st)?;
                        }
                        nccl::group_end()
                    })
                }
            }
        };
        r.map_err(|e| format!("NCCL {c:?}: {e:?}"))?;
        return Ok(());
    };
    match c {
        Coll::AllReduce => comm.all_reduce(&mut d, &s, ReduceOp::Sum, a.on(stream)),
        Coll::AllGather => comm.all_gather(&mut d, &s, a.on(stream)),
        Coll::ReduceScatter => {
            comm.reduce_scatter(&mut d, &s, ReduceOp::Sum, Algorithm::Auto.on(stream))
        }
        Coll::Broadcast => comm.broadcast(&mut d, &s, 0, a.on(stream)),
        Coll::AllToAll => comm.all_to_all(&mut d, &s, a.on(stream)),
    }?;
    Ok(())
}

/// Source element `i` of PE `pe` (small integers: exact in bf16, also summed).
fn input(pe: usize, i: usize) -> f32 {
    ((pe + i) % 8) as f32
}

/// Element `k` of PE `me`'s destination after `c` (`sl`: source length).
fn want(c: Coll, k: usize, me: usize, n: usize, sl: usize) -> f32 {
    match c {
        Coll::AllReduce => (0..n).map(|pe| input(pe, k)).sum(),
        Coll::AllGather => input(k / sl, k % sl),
        Coll::ReduceScatter => (0..n).map(|pe| input(pe, me * (sl / n) + k)).sum(),
        Coll::Broadcast => input(0, k),
        Coll::AllToAll => {
            let m = sl / n;
            input(k / m, me * m + k % m)
        }
    }
}

// One long function on purpose: the loop over collectives, sizes, methods and modes is the
// benchmark; its body is the one timing-and-checking step they share.
fn main() -> BenchResult<()> {
    if !common::gpu_present() {
        println!("{BENCH}: skipped: no GPU");
        return Ok(());
    }
    let out_dir = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let max_arg = std::env::args().find_map(|a| {
        a.strip_prefix("--max-bytes=").map(|v| {
            v.parse::<usize>()
                .map_err(|e| format!("--max-bytes={v}: {e}"))
        })
    });
    let only = std::env::args().find_map(|a| a.strip_prefix("--only=").map(str::to_string));
    let max = match max_arg {
        Some(v) => v?.min(*SIZES.last().unwrap()),
        None => *SIZES.last().unwrap(),
    };
    let p = pgas::builder().heap_size(2 * max + (512 << 20)).init()?;
    let (me, n) = (p.my_pe(), p.n_pes());
    let nccl_comm = nccl_comm(&p)?;
    let mut comm = Comm::new(&p, Team::WORLD)?;
    let machine = if comm.peers_reachable() {
        format!("{} x{n} PE", p.cuda().name()?)
    } else {
        // The emulated two-node setup of issue 21: say so in every table and figure.
        format!(
            "{} x{n} PE, peers off NVLink (PGAS_PEER_ACCESS={}, NCCL_P2P_DISABLE={}, NCCL_SHM_DISABLE={})",
            p.cuda().name()?,
            p.peer_access(),
            std::env::var("NCCL_P2P_DISABLE").unwrap_or_default(),
            std::env::var("NCCL_SHM_DISABLE").unwrap_or_default()
        )
    };
    coll::prewarm::<bf16>(&p)?;
    let len_max = max / 2;
    let src_host: Vec<bf16> = (0..len_max).map(|i| bf16::from_f32(input(me, i))).collect();
    let src = p.alloc_from(&src_host)?;
    drop(src_host);
    let mut dst = p.alloc::<bf16>(len_max)?;
    let side: Arc<CudaStream> = p.cuda().new_stream()?;
    if me == 0 {
        println!(
            "{BENCH}: bf16 collectives on {machine}; NCCL {}",
            if nccl_comm.is_some() {
                "loaded"
            } else {
                "not found (no libnccl.so on the loader's path): NCCL columns empty"
            }
        );
    }
    let mut tables = String::new();
    for &c in COLLS {
        if only.as_ref().is_some_and(|o| o != c.stem()) {
            continue;
        }
        let methods = c.methods();
        // results[size][method][mode] = microseconds (NaN: not run).
        let mut results = vec![vec![[f64::NAN; 2]; methods.len()]; c.sizes().len()];
        for (si, &bytes) in c.sizes().iter().enumerate() {
            if bytes > max {
                continue;
            }
            let (sl, dl) = lens(c, bytes, n);
            if sl == 0 || dl == 0 {
                continue;
            }
            let k = ((64 << 20) / bytes.max(1 << 20)).clamp(2, 20);
            for (mi, &m) in methods.iter().enumerate() {
                if m == Method::Nccl && nccl_comm.is_none() {
                    continue;
                }
                for (gi, graph) in [false, true].into_iter().enumerate() {
                    if !m.runs(c, n, bytes, graph, comm.peers_reachable()) {
                        continue;
                    }
                    // NVSHMEM's host reduction runs on the context's stream only.
                    let stream: Arc<CudaStream> = if m == Method::Pgas(Algorithm::Nvshmem) {
                        p.stream().clone()
                    } else {
                        side.clone()
                    };
                    let mut call = |stream: &CudaStream| {
                        enqueue(
                            c,
                            m,
                            &mut comm,
                            nccl_comm.as_ref(),
                            stream,
                            bytes,
                            &mut dst,
                            &src,
                        )
                    };
                    // Warm up (also the first launch, which a capture needs behind it).
                    p.barrier_all()?;
                    for _ in 0..3 {
                        call(&stream)?;
                    }
                    stream.synchronize()?;
                    let graph_exec = if graph {
                        p.barrier_all()?;
                        stream.begin_capture(
                            CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                        )?;
                        let mut r = Ok(());
                        for _ in 0..k {
                            r = r.and(call(&stream));
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
                                        call(&stream)?;
                                    }
                                }
                            }
                            Ok(())
                        })?;
                        times.push(ms * 1000.0 / k as f64);
                    }
                    drop(graph_exec);
                    stream.synchronize()?;
                    // Check the first and last million elements (one range when they meet),
                    // then poison them so the next method's result is its own.
                    let head = dl.min(1 << 20);
                    let tail_start = (dl - dl.min(1 << 20)).max(head);
                    for (lo, hi) in [(0, head), (tail_start, dl)] {
                        if lo == hi {
                            continue;
                        }
                        let got = dst.view(lo..hi)?.to_vec()?;
                        let w = |j: usize| want(c, lo + j, me, n, sl);
                        if let Some(j) = (0..got.len()).find(|&j| got[j].to_f32() != w(j)) {
                            return Err(format!(
                                "{} {} {} of {bytes} B: element {} is {}, expected {}",
                                c.stem(),
                                m.name(c),
                                if graph { "graph" } else { "eager" },
                                lo + j,
                                got[j],
                                w(j)
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
        if me == 0 {
            tables.push_str(&report(c, &machine, n, &results));
            if let Some(dir) = &out_dir {
                std::fs::create_dir_all(dir)?;
                let names: Vec<&str> = methods.iter().map(|m| m.name(c)).collect();
                let (bus_factor, bus_text) = c.bus(n);
                plot::collective(
                    std::path::Path::new(dir),
                    &plot::Collective {
                        stem: c.stem(),
                        what: c.title(),
                        bus_factor,
                        bus_text,
                    },
                    &machine,
                    c.sizes(),
                    &results,
                    &names,
                    n,
                )?;
            }
        }
    }
    if me != 0 {
        return Ok(());
    }
    println!("{tables}");
    if let Some(dir) = out_dir {
        std::fs::write(std::path::Path::new(&dir).join("coll.md"), &tables)?;
    }
    Ok(())
}

/// One collective's table (returned) and FIGURE lines (printed).
fn report(c: Coll, machine: &str, n: usize, results: &[Vec<[f64; 2]>]) -> String {
    let methods = c.methods();
    let (factor, text) = c.bus(n);
    let busbw = |bytes: usize, us: f64| bytes as f64 / (us * 1e-6) * factor / 1e9;
    let head = methods
        .iter()
        .position(|&m| m == HEADLINE)
        .expect("every collective runs the headline method");
    let nccl = methods.iter().position(|&m| m == Method::Nccl);
    let mut table = format!(
        "# {} on {machine}\n\nMedian microseconds per call ({REPS} repetitions of K back-to-back \
         calls); `eager / graph`. Bus bandwidth (GB/s) = bytes / time x {text}.\n\n| size |",
        c.title()
    );
    for m in methods {
        let _ = write!(table, " {} |", m.name(c));
    }
    let _ = writeln!(
        table,
        " {} busbw | NCCL busbw |\n|{}",
        methods[head].name(c),
        " --- |".repeat(methods.len() + 3)
    );
    for (si, &bytes) in c.sizes().iter().enumerate() {
        let r = &results[si];
        let best = |mi: usize| r[mi][0].min(r[mi][1]);
        let _ = write!(table, "| {} |", human(bytes));
        for cell in r {
            let _ = write!(table, " {} / {} |", show(cell[0]), show(cell[1]));
        }
        let nccl_bw = nccl.map_or(f64::NAN, |i| busbw(bytes, best(i)));
        let _ = writeln!(
            table,
            " {} | {} |",
            show(busbw(bytes, best(head))),
            show(nccl_bw)
        );
        for (mi, m) in methods.iter().enumerate() {
            for (gi, mode) in ["eager", "graph"].iter().enumerate() {
                if r[mi][gi].is_finite() {
                    emit(
                        BENCH,
                        machine,
                        &Figure {
                            name: format!(
                                "{}_bf16_{}_{}_{mode}",
                                c.stem(),
                                human(bytes),
                                m.name(c)
                            ),
                            value: r[mi][gi],
                            unit: "us",
                            note: format!("median of {REPS}"),
                        },
                    );
                }
            }
        }
        if let Some(ni) = nccl.filter(|&i| r[i][0].is_finite() && best(head).is_finite()) {
            emit(
                BENCH,
                machine,
                &Figure {
                    name: format!(
                        "{}_bf16_{}_{}_speedup_vs_nccl",
                        c.stem(),
                        human(bytes),
                        methods[head].name(c)
                    ),
                    value: best(ni) / best(head),
                    unit: "x",
                    note: "best of eager and graph, each side".to_owned(),
                },
            );
        }
    }
    table.push('\n');
    table
}
