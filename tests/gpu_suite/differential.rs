//! Randomized differential testing (issue 23, item 2): `gpu_suite --differential SEED CALLS
//! [SECONDS]` under `pgas-run -n N` makes up to CALLS calls of `pgas::coll` (every collective,
//! element type, reduction and algorithm, `Auto` included; sizes from 0 elements to 32 MiB,
//! skewed towards the small ones and the algorithm thresholds; random element offsets into two
//! large symmetric buffers; in place or not; the context stream, a second stream, or captured
//! into a CUDA graph on the second stream and replayed) and, about one call in 70, of
//! `pgas::ops` at random shapes (all-gather + matmul, matmul + reduce-scatter, MoE dispatch +
//! combine), and compares every result with a reference computed here on the host. SECONDS
//! counts from the start of the process (kernel compiles included).
//!
//! Every PE draws the same calls from SEED (splitmix64), and input element `i` of PE `p` in
//! call `c` is a hash of (SEED, c, p, i), so each PE computes every PE's inputs and the whole
//! reference without communicating. Inputs are exact: small integers (and halves or quarters)
//! for the float types so that sums are exact in any order, powers of two for products, ranges
//! that cannot overflow for the integer sums and products; min, max and the bitwise reductions
//! take any value. Each PE checks its own output exactly, and that the elements around the
//! destination (and the whole source window, unless in place) kept what was written there.
//! Arguments the API must refuse (the low-latency all-reduce past the communicator's
//! `low_latency_max_bytes`, which is `LL_MAX_BYTES` or less on a GPU of fewer or shared SMs,
//! one-shot in place, overlapping buffers, NVSHMEM's algorithm on another stream, a bitwise
//! reduction of a float type, lengths that do not split over the PEs, bad shapes of the ops)
//! must be an `Err` with nothing written; the model of which calls are refused follows
//! `src/coll`'s checks in their order. The combine of MoE compares within one bf16 step (its
//! `f32` fused multiply-adds round once per expert, as `moe.rs`'s check allows; off NVLink too,
//! where its rows move by NVSHMEM's RMA); everything else exactly.
//!
//! The seed is printed first. A mismatch prints the seed, the call's index and every parameter,
//! and the first differing element; the run goes on. Every 32 calls the PEs agree (NVSHMEM's own
//! max-reduction of a flag, not the code under test) whether any PE's clock passed SECONDS, so
//! all stop at the same call. At the end PE 0 prints one line,
//! `differential: seed S, N calls (coll X, ops Y) on P PEs: ..., M mismatches, T s`, and every
//! PE exits non-zero when any PE saw a mismatch.

use crate::util::{self, HostFold, LlForm};
use pgas::coll::{self, Algorithm, AllReduceElem, Comm};
use pgas::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use pgas::cudarc::driver::{CudaSlice, CudaStream};
use pgas::ops::all_gather_matmul::AllGatherMatmul;
use pgas::ops::matmul_reduce_scatter::MatmulReduceScatter;
use pgas::ops::moe::{MoeConfig, MoeDispatcher};
use pgas::prelude::*;
use std::fmt::Debug;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The largest buffer of a collective call (an all-gather's destination, a reduce-scatter's
/// source): 32 MiB.
const MAX_BYTES: usize = 32 << 20;
/// Each of the two symmetric buffers: the largest region, the largest offset and the guards.
const BUF_BYTES: usize = MAX_BYTES + (1 << 20);
/// Guard elements checked after the destination (and before it, where the offset allows).
const GUARD: usize = 16;
/// Calls between two agreements on whether the time is up.
const STOP_EVERY: u64 = 32;
/// A call that runs longer than this is reported as hung and the process exits.
const HANG: Duration = Duration::from_secs(90);

// ---------------------------------------------------------------------------------------------
// Random numbers: splitmix64, the same on every PE.

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    /// True with probability `pct` percent.
    fn chance(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
    /// Log-uniform in `lo..=hi` (`lo >= 1`).
    fn log_uniform(&mut self, lo: usize, hi: usize) -> usize {
        let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((a + (b - a) * u).exp() as usize).clamp(lo, hi)
    }
}

/// The inputs of PE `pe` in call `c` (`tag` tells inputs from guards and poison apart): element
/// `i` is `mix(base + i)`.
fn stream_of(seed: u64, c: u64, pe: usize, tag: u64) -> u64 {
    mix(mix(mix(seed ^ c.wrapping_mul(0xd6e8_feb8_6659_fd93)) ^ pe as u64) ^ tag)
}

fn at(base: u64, i: usize) -> u64 {
    mix(base.wrapping_add((i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d)))
}

const INPUT: u64 = 1;
const GUARDS: u64 = 2;
const POISON: u64 = 3;

// ---------------------------------------------------------------------------------------------
// Element types: exact inputs (the host's reduction is `util::HostFold`).

trait Elem: AllReduceElem + HostFold + PartialEq + Debug + 'static {
    const NAME: &'static str;
    /// Whether the bitwise reductions exist (integers).
    const INT: bool;
    /// An input for `op` from hash `h`, exact under that op over `n` PEs.
    fn gen(h: u64, op: ReduceOp, n: usize) -> Self;
    /// Any value (guards and poison): finite for floats.
    fn any(h: u64) -> Self;
}

macro_rules! float_elem {
    ($t:ty, $name:literal, $to:expr, $narrow:literal) => {
        impl Elem for $t {
            const NAME: &'static str = $name;
            const INT: bool = false;
            fn gen(h: u64, op: ReduceOp, _n: usize) -> Self {
                let to: fn(f64) -> $t = $to;
                to(match op {
                    // Halves up to 8 (16-bit floats: a sum of 8 PEs stays within 8 significant
                    // bits), quarters up to 2^18 (f32: 24 bits for 8 PEs).
                    ReduceOp::Sum if $narrow => ((h % 33) as i64 - 16) as f64 * 0.5,
                    ReduceOp::Sum => ((h % (1 << 21)) as i64 - (1 << 20)) as f64 * 0.25,
                    // Powers of two (and 0): every product exact.
                    ReduceOp::Prod => [-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0][(h % 7) as usize],
                    _ if $narrow => ((h % 511) as i64 - 255) as f64 * 0.25,
                    _ => (h as i32) as f64 / 256.0,
                })
            }
            fn any(h: u64) -> Self {
                let to: fn(f64) -> $t = $to;
                to(((h % 2001) as i64 - 1000) as f64 * 0.125)
            }
        }
    };
}

float_elem!(f32, "f32", |v| v as f32, false);
float_elem!(f64, "f64", |v| v, false);
float_elem!(half::f16, "f16", half::f16::from_f64, true);
float_elem!(half::bf16, "bf16", half::bf16::from_f64, true);

macro_rules! int_elem {
    ($($t:ty, $name:literal;)*) => {$(
        impl Elem for $t {
            const NAME: &'static str = $name;
            const INT: bool = true;
            fn gen(h: u64, op: ReduceOp, n: usize) -> Self {
                let signed = <$t>::MIN != 0;
                match op {
                    // No sum of 8 PEs overflows.
                    ReduceOp::Sum => {
                        let lim = (<$t>::MAX / 8) as i128;
                        let span = if signed { 2 * lim + 1 } else { lim + 1 };
                        let v = (h as i128 % span) - if signed { lim } else { 0 };
                        v as $t
                    }
                    // -1..=2 (0..=2 unsigned); 2 only up to 4 PEs (2^4 fits in 8 bits).
                    ReduceOp::Prod => {
                        let top = if n <= 4 { 2 } else { 1 };
                        let lo = if signed { -1 } else { 0 };
                        (lo + (h % (top - lo + 1) as u64) as i64) as $t
                    }
                    _ => h as $t,
                }
            }
            fn any(h: u64) -> Self {
                h as $t
            }
        }
    )*};
}

int_elem! {
    i8, "i8"; i16, "i16"; i32, "i32"; i64, "i64";
    u8, "u8"; u16, "u16"; u32, "u32"; u64, "u64";
}

fn to_bytes<T: Copy>(v: &[T]) -> Vec<u8> {
    // SAFETY: every element type here is plain data without padding.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
        .to_vec()
}

fn from_bytes<T: Copy>(b: &[u8]) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    (0..b.len() / size)
        // SAFETY: `b` holds `b.len() / size` values of a plain-data `T`, maybe unaligned.
        .map(|i| unsafe { std::ptr::read_unaligned(b.as_ptr().add(i * size).cast::<T>()) })
        .collect()
}

/// A symmetric region by address and length (any length, 0 too; one buffer may be both
/// operands).
#[derive(Clone, Copy)]
struct Span<T> {
    ptr: u64,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

// SAFETY: every `Span` is carved from the two symmetric buffers `run` allocates once and keeps
// alive until the end (same offsets on every PE), and lies within them.
unsafe impl<T> SymRegion<T> for Span<T> {
    fn as_device_ptr(&self) -> u64 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

// ---------------------------------------------------------------------------------------------
// What is counted.

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    AllReduce,
    ReduceScatter,
    AllGather,
    Broadcast,
    AllToAll,
    AllToAllV,
    AgMatmul,
    MatmulRs,
    Moe,
}

const KINDS: [(Kind, &str); 9] = [
    (Kind::AllReduce, "all_reduce"),
    (Kind::ReduceScatter, "reduce_scatter"),
    (Kind::AllGather, "all_gather"),
    (Kind::Broadcast, "broadcast"),
    (Kind::AllToAll, "all_to_all"),
    (Kind::AllToAllV, "all_to_all_v"),
    (Kind::AgMatmul, "all_gather_matmul"),
    (Kind::MatmulRs, "matmul_reduce_scatter"),
    (Kind::Moe, "moe"),
];

/// Counters, in the order of [`KINDS`], then these.
const REFUSALS: usize = KINDS.len();
const GRAPHS: usize = REFUSALS + 1;
const SIDE: usize = GRAPHS + 1;
const MISMATCHES: usize = SIDE + 1;
const COUNTERS: usize = MISMATCHES + 1;

/// How a call runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Exec {
    /// Eagerly on the context's stream.
    Context,
    /// Eagerly on a second stream (`*_on`).
    Side,
    /// Captured into a CUDA graph on the second stream, the graph launched this many times.
    Graph(u32),
}

/// What a call left on the host side of the check: Ok, or the mismatch.
type Verdict = Result<(), String>;

struct Ctx<'a> {
    p: &'a Pgas,
    comm: Comm,
    side: Arc<CudaStream>,
    /// Sources (and in-place buffers) live in `x`, destinations in `y`.
    x: SymTensor<u8>,
    y: SymTensor<u8>,
    seed: u64,
    me: usize,
    n: usize,
    p2p: bool,
    /// The low-latency forms' limit on this GPU (`Comm::low_latency_max_bytes`: less than
    /// `LL_MAX_BYTES` where the GPU has fewer SMs than the scratch has regions, or shares them).
    ll_max: usize,
    /// The PEs a node has where the communicator runs the hierarchical algorithms.
    hier: Option<usize>,
    counts: [u32; COUNTERS],
}

/// From this many calls a run is a soak, whose host heap must be flat after the warm point.
const SOAK_CALLS: u64 = 20_000;
/// How much the host heap may grow from a soak's warm point to its end.
const HEAP_FLAT: i64 = 8 << 20;

static PROGRESS_MS: AtomicU64 = AtomicU64::new(0);
static CURRENT: Mutex<String> = Mutex::new(String::new());

fn watchdog(origin: Instant, seed: u64) {
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        let last = PROGRESS_MS.load(Ordering::SeqCst);
        let now = origin.elapsed().as_millis() as u64;
        if now.saturating_sub(last) > HANG.as_millis() as u64 {
            println!(
                "differential: seed {seed}: HUNG in {} (no progress for {} s); giving up",
                CURRENT.lock().unwrap(),
                HANG.as_secs()
            );
            std::process::exit(124);
        }
    });
}

/// This process's resident host memory and the memory in use on its GPU (by every process on
/// it), for the soak's flat-memory check.
struct Memory {
    host_rss: u64,
    heap: i64,
    device_used: u64,
    /// The stream-ordered allocator's pool of this process (cudarc allocates from it): in use
    /// and reserved.
    pool: (u64, u64),
}

/// The default memory pool of the context's device: bytes in use and reserved.
fn pool_bytes(p: &Pgas) -> Result<(u64, u64), Box<dyn std::error::Error>> {
    use pgas::cudarc::driver::sys::{self as cu, CUmemPool_attribute as A};
    let mut pool = std::ptr::null_mut();
    let read = |pool, attr| -> Result<u64, Box<dyn std::error::Error>> {
        let mut v = 0u64;
        // SAFETY: a live pool; the attribute is a u64.
        unsafe { cu::cuMemPoolGetAttribute(pool, attr, (&mut v as *mut u64).cast()) }.result()?;
        Ok(v)
    };
    // SAFETY: the context is bound (Memory::now); `pool` is an out-pointer.
    unsafe { cu::cuDeviceGetDefaultMemPool(&mut pool, p.device_ordinal() as i32) }.result()?;
    Ok((
        read(pool, A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
        read(pool, A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
    ))
}

/// This process's resident host memory in bytes (`VmRSS`).
fn host_rss() -> Result<u64, Box<dyn std::error::Error>> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .ok_or("no VmRSS in /proc/self/status")?;
    Ok(kib * 1024)
}

/// Bytes the process's allocator has handed out and not had back (glibc's `mallinfo2`: the
/// heap's in-use chunks and the mmapped ones). Unlike the RSS it does not move with what the
/// allocator keeps for reuse or returns to the system. It walks the allocator's free lists, so
/// it is read at the memory points only, not at every call.
fn heap_in_use() -> i64 {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let info = unsafe { libc::mallinfo2() };
    (info.uordblks + info.hblkhd) as i64
}

impl Memory {
    fn now(p: &Pgas) -> Result<Memory, Box<dyn std::error::Error>> {
        let host_rss = host_rss()?;
        p.cuda().bind_to_thread()?;
        let (free, total) = pgas::cudarc::driver::result::mem_get_info()?;
        Ok(Memory {
            host_rss,
            heap: heap_in_use(),
            device_used: (total - free) as u64,
            pool: pool_bytes(p)?,
        })
    }
}

impl std::fmt::Display for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        write!(
            f,
            "(host RSS {:.1} MiB, heap in use {:.1} MiB, GPU in use {:.1} MiB, stream-ordered \
             pool {:.1} MiB used / {:.1} MiB reserved)",
            mib(self.host_rss),
            self.heap as f64 / (1u64 << 20) as f64,
            mib(self.device_used),
            mib(self.pool.0),
            mib(self.pool.1)
        )
    }
}

pub fn run(args: &[String]) -> ExitCode {
    let pos = args.iter().position(|a| a == "--differential").unwrap_or(0);
    let num = |k: usize| args.get(pos + k).and_then(|v| v.parse::<u64>().ok());
    let (Some(seed), Some(calls)) = (num(1), num(2)) else {
        println!("differential: FAIL arguments: gpu_suite --differential SEED CALLS [SECONDS]");
        return ExitCode::FAILURE;
    };
    let budget = Duration::from_secs(num(3).unwrap_or(u64::MAX / 4));
    println!("differential: seed {seed}");
    let p = match pgas::init() {
        Ok(p) => p,
        Err(e) => {
            println!("differential: seed {seed}: FAIL init: {e}");
            return ExitCode::FAILURE;
        }
    };
    match drive(&p, seed, calls, budget) {
        Ok(code) => code,
        Err(e) => {
            println!(
                "differential[pe {}]: seed {seed}: FAIL setup or agreement: {e}",
                p.my_pe()
            );
            ExitCode::FAILURE
        }
    }
}

fn drive(
    p: &Pgas, seed: u64, calls: u64, budget: Duration,
) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let (me, n) = (util::me(p), util::npes(p));
    let origin = Instant::now();
    // Every collective kernel, and MoE's for top-k 1 and 4 (the only ones drawn), compiled or
    // loaded before the clock of the calls starts: a graph capture cannot compile.
    let mut list = coll::prewarm_all();
    // MoE moves rows by NVSHMEM's RMA where some peer is not load/store reachable.
    let probe = p.alloc::<u64>(1)?;
    let rma = i128::from(p.first_unreachable(&probe, 0..n)?.is_some());
    let moe1 = [1, n as i128, rma, 0];
    let moe4 = [4, n as i128, rma, 0];
    list.extend(pgas::ops::moe::prewarm_list(&moe1));
    list.extend(pgas::ops::moe::prewarm_list(&moe4));
    pgas::launch::prewarm(p, &list)?;
    if me == 0 {
        println!(
            "differential: {} kernels compiled or loaded in {:.1} s; {calls} calls on {n} PE(s), \
             at most {} s, device {}",
            list.len(),
            origin.elapsed().as_secs_f64(),
            budget.as_secs(),
            util::device_name(p)
        );
    }
    let comm = Comm::new(p, Team::WORLD)?;
    let p2p = comm.peers_reachable();
    let hier = comm.hierarchy();
    let ll_max = comm.low_latency_max_bytes();
    let mut cx = Ctx {
        p,
        comm,
        side: p.cuda().new_stream()?,
        x: p.alloc::<u8>(BUF_BYTES)?,
        y: p.alloc::<u8>(BUF_BYTES)?,
        seed,
        me,
        n,
        p2p,
        ll_max,
        hier,
        counts: [0; COUNTERS],
    };
    let mut stop_in = p.alloc::<u32>(1)?;
    let stop_out = p.alloc::<u32>(1)?;
    p.barrier_all()?;
    let t0 = Instant::now();
    PROGRESS_MS.store(origin.elapsed().as_millis() as u64, Ordering::SeqCst);
    watchdog(origin, seed);
    let mut rng = Rng(mix(seed));
    let mut done = 0u64;
    // Memory at the start, once warm and at the end: a soak must stay flat after the warm
    // point. Warm is two fifths of the calls, at most 10,000: until then the JIT compiles a
    // kernel for each new shape of the fused operations' GEMMs and the collectives make their
    // plans and graph instances (docs/faults.md, "The soak", has the measured curve).
    let warm_at = (calls * 2 / 5).min(10_000);
    let mut memory = vec![("start", Memory::now(p)?)];
    // Nine more points between warm and end: linear growth is a leak, a plateau is a pool.
    let series_every = ((calls - warm_at) / 10).max(1);
    let mut series = Vec::new();
    while done < calls {
        if done == warm_at && warm_at > 0 {
            memory.push(("warm", Memory::now(p)?));
        }
        if done > 0 && done.is_multiple_of(STOP_EVERY) {
            // From the process's start: the compiles count, so the whole fits SECONDS.
            stop_in.copy_from(&[(origin.elapsed() > budget) as u32])?;
            p.barrier_all()?;
            p.reduce(Team::WORLD, ReduceOp::Max, &stop_out, &stop_in)?;
            if stop_out.to_vec()?[0] != 0 {
                break;
            }
        }
        let c = done;
        let mut call_rng = Rng(mix(rng.next()));
        let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            one_call(&mut cx, &mut call_rng, c)
        }))
        .unwrap_or_else(|_| Err(format!("call {c}: panicked (see the message above)")));
        if done > warm_at && (done - warm_at).is_multiple_of(series_every) {
            series.push(Memory::now(p)?);
        }
        if let Err(e) = verdict {
            cx.counts[MISMATCHES] += 1;
            println!("differential[pe {me}]: MISMATCH seed {seed}, {e}");
        }
        PROGRESS_MS.store(origin.elapsed().as_millis() as u64, Ordering::SeqCst);
        done += 1;
    }
    let secs = t0.elapsed().as_secs_f64();
    util::settle(p)?;
    memory.push(("end", Memory::now(p)?));
    let shown: Vec<String> = memory.iter().map(|(at, m)| format!("{at} {m}")).collect();
    println!("differential[pe {me}]: memory {}", shown.join(", "));
    // A soak's verdict on the host heap: flat from the warm point to the end.
    let warm_heap = memory
        .iter()
        .find(|(at, _)| *at == "warm")
        .map(|(_, m)| m.heap);
    let grew = warm_heap.map(|w| memory.last().map_or(0, |(_, m)| m.heap) - w);
    let heap_grew = calls >= SOAK_CALLS && grew.is_some_and(|g| g > HEAP_FLAT);
    if let Some(g) = grew.filter(|_| calls >= SOAK_CALLS) {
        println!(
            "differential[pe {me}]: host heap {} from warm to end: {:+.1} MiB (limit {} MiB)",
            if heap_grew { "NOT FLAT" } else { "flat" },
            g as f64 / (1u64 << 20) as f64,
            HEAP_FLAT >> 20
        );
    }
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let points: Vec<String> = series
        .iter()
        .map(|m| {
            format!(
                "{:.0}/{:.0}/{:.0}",
                mib(m.host_rss),
                m.heap as f64 / (1u64 << 20) as f64,
                mib(m.pool.1)
            )
        })
        .collect();
    println!(
        "differential[pe {me}]: every {series_every} calls after warm, host RSS / heap in use / \
         pool reserved, MiB: {}",
        points.join(" ")
    );
    let table = crate::runner::gather(p, &cx.counts)?;
    let mismatches: Vec<u32> = (0..n).map(|q| table[q * COUNTERS + MISMATCHES]).collect();
    let total: u32 = mismatches.iter().sum();
    if me == 0 {
        let c = &cx.counts;
        let ops = c[6] + c[7] + c[8];
        let per: Vec<String> = KINDS
            .iter()
            .enumerate()
            .map(|(i, (_, name))| format!("{name} {}", c[i]))
            .collect();
        println!(
            "differential: seed {seed}, {done} calls (coll {}, ops {ops}) on {n} PEs: {}; \
             refusals {}, graphs {}, second stream {}; {total} mismatches{}, {secs:.1} s",
            done as u32 - ops,
            per.join(", "),
            c[REFUSALS],
            c[GRAPHS],
            c[SIDE],
            if total > 0 {
                format!(" (by PE: {mismatches:?})")
            } else {
                String::new()
            }
        );
    }
    // A heap that grew fails this PE's run (its line above says so), not the mismatch count.
    Ok(if total == 0 && !heap_grew {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Draws call `c` and runs it.
fn one_call(cx: &mut Ctx, rng: &mut Rng, c: u64) -> Verdict {
    let pick = rng.below(1000);
    let kind = match pick {
        0..=4 => Kind::AgMatmul,
        5..=9 => Kind::MatmulRs,
        10..=13 => Kind::Moe,
        14..=379 => Kind::AllReduce,
        380..=509 => Kind::ReduceScatter,
        510..=639 => Kind::AllGather,
        640..=799 => Kind::Broadcast,
        800..=919 => Kind::AllToAll,
        _ => Kind::AllToAllV,
    };
    let slot = KINDS.iter().position(|k| k.0 == kind).unwrap();
    cx.counts[slot] += 1;
    match kind {
        Kind::AgMatmul => return ag_matmul(cx, rng, c),
        Kind::MatmulRs => return matmul_rs(cx, rng, c),
        Kind::Moe => return moe(cx, rng, c),
        _ => {}
    }
    match rng.below(12) {
        0 => coll_call::<f32>(cx, rng, c, kind),
        1 => coll_call::<f64>(cx, rng, c, kind),
        2 => coll_call::<half::f16>(cx, rng, c, kind),
        3 => coll_call::<half::bf16>(cx, rng, c, kind),
        4 => coll_call::<i8>(cx, rng, c, kind),
        5 => coll_call::<i16>(cx, rng, c, kind),
        6 => coll_call::<i32>(cx, rng, c, kind),
        7 => coll_call::<i64>(cx, rng, c, kind),
        8 => coll_call::<u8>(cx, rng, c, kind),
        9 => coll_call::<u16>(cx, rng, c, kind),
        10 => coll_call::<u32>(cx, rng, c, kind),
        _ => coll_call::<u64>(cx, rng, c, kind),
    }
}

/// Bytes of a call's largest buffer: mostly small, many at the algorithms' thresholds, some up
/// to [`MAX_BYTES`].
fn draw_bytes(rng: &mut Rng, size: usize) -> usize {
    let around = |rng: &mut Rng, at: usize| {
        let d = rng.range(0, 8 * size) as isize - 4 * size as isize;
        (at as isize + d).max(0) as usize
    };
    match rng.below(100) {
        0..=7 => 0,
        8..=24 => rng.range(1, 16) * size,
        25..=44 => rng.range(17, 2000) * size,
        45..=56 => around(rng, coll::LL_MAX_BYTES),
        57..=61 => around(rng, coll::ONE_SHOT_MAX_BYTES),
        62..=63 => around(rng, coll::ONE_SHOT_MAX_BYTES_2PE),
        // Block boundaries of the kernels: 8 KiB (low latency), 16 KiB (the others).
        64..=71 => {
            let at = rng.range(1, 16) * (8 << 10);
            around(rng, at)
        }
        72..=96 => rng.log_uniform(2 << 10, 4 << 20),
        97 => around(rng, coll::PUSH_MIN_BYTES),
        _ => rng.log_uniform(4 << 20, MAX_BYTES),
    }
    .min(MAX_BYTES)
}

/// An element offset: mostly 0 or a few elements (off the 16-byte boundary), some far.
fn draw_offset(rng: &mut Rng) -> usize {
    match rng.below(100) {
        0..=34 => 0,
        35..=74 => rng.range(1, 31),
        _ => rng.range(32, 8192),
    }
}

fn draw_exec(rng: &mut Rng, replays: bool) -> Exec {
    match rng.below(10) {
        0..=3 => Exec::Context,
        4..=6 => Exec::Side,
        _ => Exec::Graph(if replays { rng.range(1, 3) as u32 } else { 1 }),
    }
}

/// Runs `issue` as `exec` says, waits for its stream. The outer `Err`: the stream or graph
/// machinery failed (a mismatch); the inner result is the API's.
fn execute<R>(
    p: &Pgas, side: &Arc<CudaStream>, exec: Exec,
    issue: impl FnOnce(&CudaStream) -> pgas::Result<R>,
) -> Result<pgas::Result<R>, String> {
    let sync = |s: &CudaStream| s.synchronize().map_err(|e| format!("stream sync: {e}"));
    match exec {
        Exec::Context => {
            let r = issue(p.stream());
            sync(p.stream())?;
            Ok(r)
        }
        Exec::Side => {
            let r = issue(side);
            sync(side)?;
            Ok(r)
        }
        Exec::Graph(replays) => {
            side.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                .map_err(|e| format!("begin_capture: {e}"))?;
            let r = issue(side);
            let graph = side
                .end_capture(CUgraphInstantiate_flags(0))
                .map_err(|e| format!("end_capture (the call returned {:?}): {e}", r.is_ok()))?;
            if r.is_ok() {
                // No graph: nothing was captured (a call with nothing to move).
                if let Some(graph) = graph {
                    for _ in 0..replays {
                        graph.launch().map_err(|e| format!("graph launch: {e}"))?;
                    }
                }
            }
            sync(side)?;
            Ok(r)
        }
    }
}

/// A window of a buffer: elements `lo..hi` of `T` from the buffer's start.
#[derive(Clone, Copy, Debug)]
struct Window {
    lo: usize,
    hi: usize,
}

/// The window around a region of `len` elements at element `off`: up to [`GUARD`] before,
/// [`GUARD`] after.
fn window(off: usize, len: usize) -> Window {
    Window {
        lo: off - off.min(GUARD),
        hi: off + len + GUARD,
    }
}

fn write_window<T: Copy>(buf: &mut SymTensor<u8>, w: Window, data: &[T]) -> Result<(), String> {
    let size = std::mem::size_of::<T>();
    buf.view_mut(w.lo * size..w.hi * size)
        .and_then(|mut v| v.copy_from(&to_bytes(data)))
        .map_err(|e| format!("writing the inputs: {e}"))
}

fn read_window<T: Copy>(buf: &SymTensor<u8>, w: Window) -> Result<Vec<T>, String> {
    let size = std::mem::size_of::<T>();
    buf.view(w.lo * size..w.hi * size)
        .and_then(|v| v.to_vec())
        .map(|b| from_bytes(&b))
        .map_err(|e| format!("reading the results back: {e}"))
}

/// The first element where `got` and `want` differ, described; `base` is the element number of
/// `got[0]` in the buffer, `region` the destination's (or source's) range there.
fn compare<T: PartialEq + Debug>(
    what: &str, got: &[T], want: &[T], base: usize, region: (usize, usize),
) -> Verdict {
    let bad = (0..want.len()).filter(|&i| got[i] != want[i]).count();
    let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) else {
        return Ok(());
    };
    let e = base + i;
    let place = if e < region.0 {
        format!("guard {} before the region", region.0 - e)
    } else if e >= region.1 {
        format!("guard {} past the region", e - region.1)
    } else {
        format!("element [{}] of the region", e - region.0)
    };
    Err(format!(
        "{what}: {bad} element(s) differ; first at {place}: got {:?}, expected {:?}",
        got[i], want[i]
    ))
}

/// A fused operation's output read once the call's stream is done, as a user reads it, and
/// again after the whole device is idle: where the two differ, some of the call's work was
/// still running when its stream said it was done (an ordering bug, not a wrong result).
fn read_twice(
    p: &Pgas, s: &Arc<CudaStream>, out: &CudaSlice<bf16>,
) -> pgas::Result<(Vec<bf16>, Vec<bf16>)> {
    s.synchronize().map_err(pgas::Error::cuda("sync"))?;
    let got = s.clone_dtoh(out).map_err(pgas::Error::cuda("download"))?;
    p.cuda()
        .synchronize()
        .map_err(pgas::Error::cuda("device sync"))?;
    let late = s.clone_dtoh(out).map_err(pgas::Error::cuda("download"))?;
    Ok((got, late))
}

/// `desc`, saying how many elements changed between the two reads of [`read_twice`].
fn late_note(desc: String, got: &[bf16], late: &[bf16]) -> String {
    match got.iter().zip(late).filter(|(g, l)| g != l).count() {
        0 => desc,
        changed => format!(
            "{desc} [{changed} element(s) changed after the stream was done: the call returned \
             before its work]"
        ),
    }
}

/// An all-to-all-v layout of every PE: counts `[p][q]`, send displacements `[p][q]`, receive
/// displacements `[q][p]`.
type A2avLayout = (Vec<Vec<usize>>, Vec<Vec<usize>>, Vec<Vec<usize>>);

/// What the API must answer for the parameters (`Err(())`: refused before anything runs).
type Expect = Result<Option<Algorithm>, ()>;

/// Overlap of two byte ranges, as `check_apart` sees it (empty ranges overlap nothing).
fn overlap(d: u64, dbytes: usize, s: u64, sbytes: usize) -> bool {
    dbytes > 0 && sbytes > 0 && d < s + sbytes as u64 && s < d + dbytes as u64
}

/// One collective call of element type `T`.
// Long on purpose: one arm per collective, each drawing its arguments, predicting the verdict from
// the model and comparing, so a collective's whole rule reads in one place.
fn coll_call<T: Elem>(cx: &mut Ctx, rng: &mut Rng, c: u64, kind: Kind) -> Verdict {
    let (n, me, seed) = (cx.n, cx.me, cx.seed);
    let size = std::mem::size_of::<T>();
    let reducing = matches!(kind, Kind::AllReduce | Kind::ReduceScatter);
    let op = if !reducing {
        ReduceOp::Sum
    } else if T::INT {
        [
            ReduceOp::Sum,
            ReduceOp::Prod,
            ReduceOp::Min,
            ReduceOp::Max,
            ReduceOp::And,
            ReduceOp::Or,
            ReduceOp::Xor,
        ][rng.below(7)]
    } else if rng.chance(2) {
        // Refused: bitwise reductions are for integers.
        [ReduceOp::And, ReduceOp::Or, ReduceOp::Xor][rng.below(3)]
    } else {
        [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max][rng.below(4)]
    };
    let total = draw_bytes(rng, size) / size;
    // Element counts of the source and destination, and whether in place (one buffer, x).
    let (mut slen, mut dlen) = match kind {
        Kind::AllReduce | Kind::Broadcast => (total, total),
        Kind::ReduceScatter => (total / n * n, total / n),
        Kind::AllGather => (total / n, total / n * n),
        _ => (total / n * n, total / n * n),
    };
    // A length that does not split over the PEs (refused) now and then.
    if n > 1 && matches!(kind, Kind::ReduceScatter | Kind::AllToAll) && rng.chance(2) {
        slen += rng.range(1, n - 1);
        if kind == Kind::AllToAll {
            dlen = slen;
        }
    }
    if n > 1 && kind == Kind::AllGather && rng.chance(2) {
        dlen += rng.range(1, n - 1);
    }
    let algs = [
        Algorithm::Auto,
        Algorithm::LowLatency,
        Algorithm::OneShot,
        Algorithm::TwoShot,
        Algorithm::Nvshmem,
    ];
    let alg = match kind {
        Kind::AllReduce => algs[rng.below(5)],
        // The low-latency broadcast, refused above its sizes: now and then.
        Kind::Broadcast if rng.chance(3) => Algorithm::LowLatency,
        Kind::Broadcast => [algs[0], algs[2], algs[3], algs[4]][rng.below(4)],
        // By name: low latency (refused above its sizes), pulling, pushing, or the choice.
        Kind::AllGather | Kind::AllToAll => algs[rng.below(4)],
        _ => Algorithm::Auto,
    };
    let root = if kind == Kind::Broadcast {
        if rng.chance(1) {
            n // refused
        } else {
            rng.below(n)
        }
    } else {
        0
    };
    // In place: one buffer for both operands. Partial overlap (refused) now and then, by a
    // shift that keeps both regions and their guards in x (a large call has little room: the
    // 4-PE run of 2026-11-27 drew windows past the buffer).
    let most_shift = total
        .saturating_sub(1)
        .min((BUF_BYTES / size).saturating_sub(total + 2 * GUARD + 1));
    let (in_place, shift) = match kind {
        Kind::AllReduce if rng.chance(25) => (true, 0),
        Kind::AllReduce if rng.chance(2) && most_shift >= 1 => (false, rng.range(1, most_shift)),
        Kind::Broadcast if rng.chance(20) => (true, 0),
        Kind::Broadcast if rng.chance(2) && most_shift >= 1 => (false, rng.range(1, most_shift)),
        // Reduce-scatter, all-gather and all-to-all have no in-place form: refused.
        Kind::ReduceScatter | Kind::AllGather | Kind::AllToAll if rng.chance(3) => (true, 0),
        _ => (false, 0),
    };
    let exec = draw_exec(rng, !(kind == Kind::AllReduce && in_place));
    // The all-to-all-v layout, drawn for every PE alike: counts, send displacements packed with
    // gaps, receive displacements packed with gaps (the gaps keep their poison).
    let mut a2av: Option<A2avLayout> = None;
    if kind == Kind::AllToAllV {
        let per = (total / (n * n)).max(1);
        let counts: Vec<Vec<usize>> = (0..n)
            .map(|_| {
                (0..n)
                    .map(|_| match rng.below(4) {
                        0 => 0,
                        1 => rng.range(1, 9),
                        _ => rng.range(0, per),
                    })
                    .collect()
            })
            .collect();
        let mut displs = |row: &dyn Fn(usize) -> usize| -> Vec<usize> {
            let mut at = rng.range(0, 3);
            (0..n)
                .map(|q| {
                    let d = at;
                    at += row(q) + rng.range(0, 5);
                    d
                })
                .collect()
        };
        let sd: Vec<Vec<usize>> = (0..n).map(|p| displs(&|q| counts[p][q])).collect();
        let rd: Vec<Vec<usize>> = (0..n).map(|q| displs(&|p| counts[p][q])).collect();
        a2av = Some((counts, sd, rd));
    }
    let layout = match &a2av {
        Some((counts, sd, rd)) => {
            let sc = counts[me].clone();
            let rc: Vec<usize> = (0..n).map(|p| counts[p][me]).collect();
            match cx.comm.all_to_all_layout(&sc, &sd[me], &rc, &rd[me]) {
                Ok(l) => {
                    slen = l.src_len();
                    dlen = l.dst_len();
                    // Now and then a destination one short of the layout's need: refused.
                    if dlen > 0 && rng.chance(2) {
                        dlen -= 1;
                    }
                    Some(l)
                }
                Err(e) => return Err(format!("call {c}: all-to-all-v layout refused: {e}")),
            }
        }
        None => None,
    };
    // Offsets in elements; the regions and guards stay inside the buffers.
    let room = |len: usize| (BUF_BYTES / size).saturating_sub(len + GUARD + 1);
    let (soff, doff, in_x) = if in_place {
        // For the movement collectives, "in place" means dst and src share x (refused).
        let len = slen.max(dlen);
        let off = draw_offset(rng).min(room(len));
        (off, off, true)
    } else if shift > 0 {
        let off = draw_offset(rng).min(room(total + shift));
        (off, off + shift, true)
    } else {
        (
            draw_offset(rng).min(room(slen)),
            draw_offset(rng).min(room(dlen)),
            false,
        )
    };
    let desc = format!(
        "call {c}: {:?} of {} ({} B each), op {op:?}, algorithm {alg:?}, root {root}, src {slen} \
         at element {soff}, dst {dlen} at element {doff}{}, {exec:?}",
        kind,
        T::NAME,
        size,
        if in_place {
            " (in place)"
        } else if shift > 0 {
            " (overlapping)"
        } else {
            ""
        }
    );
    *CURRENT.lock().unwrap() = desc.clone();
    // Inputs: element i of PE q's source.
    let bases: Vec<u64> = (0..n).map(|q| stream_of(seed, c, q, INPUT)).collect();
    let input = |q: usize, i: usize| T::gen(at(bases[q], i), op, n);
    let xbase = cx.x.as_device_ptr();
    let ybase = cx.y.as_device_ptr();
    let sptr = xbase + (soff * size) as u64;
    let dptr = if in_x { xbase } else { ybase } + (doff * size) as u64;
    let src = Span::<T> {
        ptr: sptr,
        len: slen,
        _t: std::marker::PhantomData,
    };
    let mut dst = Span::<T> {
        ptr: dptr,
        len: dlen,
        _t: std::marker::PhantomData,
    };
    // The windows and what goes into them: x holds the source (guards around it) and, when
    // the operands share x, the destination too (poison where the source is not).
    let guards = stream_of(seed, c, me, GUARDS);
    let poison = stream_of(seed, c, me, POISON);
    let xw = if in_x {
        Window {
            lo: window(soff, slen).lo.min(window(doff, dlen).lo),
            hi: window(soff, slen).hi.max(window(doff, dlen).hi),
        }
    } else {
        window(soff, slen)
    };
    let xdata: Vec<T> = (xw.lo..xw.hi)
        .map(|e| {
            if e >= soff && e < soff + slen {
                input(me, e - soff)
            } else if in_x && e >= doff && e < doff + dlen {
                T::any(at(poison, e))
            } else {
                T::any(at(guards, e))
            }
        })
        .collect();
    let yw = window(doff, dlen);
    let ydata: Vec<T> = if in_x {
        Vec::new()
    } else {
        (yw.lo..yw.hi).map(|e| T::any(at(poison, e))).collect()
    };
    write_window(&mut cx.x, xw, &xdata).map_err(|e| format!("{desc}: {e}"))?;
    if !in_x {
        write_window(&mut cx.y, yw, &ydata).map_err(|e| format!("{desc}: {e}"))?;
    }
    // What the API must answer (src/coll's checks, in their order).
    let sbytes = slen * size;
    let dbytes = dlen * size;
    let one_shot_max = if n == 2 {
        coll::ONE_SHOT_MAX_BYTES_2PE
    } else {
        coll::ONE_SHOT_MAX_BYTES
    };
    let bitwise_float = !T::INT && matches!(op, ReduceOp::And | ReduceOp::Or | ReduceOp::Xor);
    let side_stream = exec != Exec::Context;
    let graph = matches!(exec, Exec::Graph(_));
    let p2p = cx.p2p;
    let ll_max = cx.ll_max;
    // The low-latency scratch's regions this GPU's calls use (a block each).
    let regions = ll_max / coll::LL_BYTES_PER_BLOCK;
    let expect: Expect = match kind {
        Kind::AllReduce => {
            let same = dptr == sptr;
            // Over several nodes: the hierarchical algorithm where the groups split the data.
            let hier_fits = cx.hier.is_some_and(|g| slen.is_multiple_of(g));
            let eff = match alg {
                Algorithm::Auto if p2p && sbytes <= ll_max => Algorithm::LowLatency,
                Algorithm::Auto if !p2p && hier_fits => Algorithm::Hierarchical,
                Algorithm::Auto if !p2p => Algorithm::Nvshmem,
                Algorithm::Auto if sbytes <= one_shot_max && !same => Algorithm::OneShot,
                Algorithm::Auto => Algorithm::TwoShot,
                a => a,
            };
            let ov = dptr < sptr + sbytes as u64 && sptr < dptr + sbytes as u64;
            if bitwise_float
                || (eff == Algorithm::LowLatency && sbytes > ll_max)
                || (eff == Algorithm::Hierarchical && !hier_fits)
                || (ov && !(same && eff != Algorithm::OneShot))
            {
                Err(())
            } else if slen == 0 {
                Ok(Some(eff))
            } else if matches!(eff, Algorithm::Nvshmem | Algorithm::Hierarchical) {
                if graph {
                    Err(())
                } else {
                    Ok(Some(eff))
                }
            } else if !p2p {
                Err(())
            } else {
                Ok(Some(eff))
            }
        }
        Kind::Broadcast => {
            // The direct form up to its size (smaller ones past 2 PEs), then the relay while a
            // block's regions hold its share in one protocol call.
            let ll_fits = util::ll_moves(ll_max, n, LlForm::Broadcast, sbytes);
            let direct = ll_fits && (n == 2 || sbytes < coll::BROADCAST_RELAY_MIN_BYTES);
            let relay = n > 2
                && sbytes <= coll::BROADCAST_RELAY_MAX_BYTES
                && sbytes <= (n - 1) * coll::LL_REGION_BYTES * regions;
            let eff = match alg {
                Algorithm::Auto if p2p && direct => Algorithm::LowLatency,
                Algorithm::Auto if p2p && relay => Algorithm::TwoShot,
                Algorithm::Auto if !p2p => Algorithm::Nvshmem,
                Algorithm::Auto if sbytes <= one_shot_max => Algorithm::OneShot,
                Algorithm::Auto => Algorithm::TwoShot,
                a => a,
            };
            if root >= n
                || (dptr != sptr && overlap(dptr, sbytes, sptr, sbytes))
                || (eff == Algorithm::LowLatency && !ll_fits)
                || (eff == Algorithm::Nvshmem && graph)
                || (eff != Algorithm::Nvshmem && !p2p)
            {
                Err(())
            } else {
                Ok(Some(eff))
            }
        }
        Kind::ReduceScatter => {
            // Off NVLink: NVSHMEM's reduce-scatter, eagerly only.
            if !slen.is_multiple_of(n)
                || dlen != slen / n
                || bitwise_float
                || overlap(dptr, dbytes, sptr, sbytes)
                || (!p2p && graph)
            {
                Err(())
            } else {
                Ok(None)
            }
        }
        Kind::AllGather | Kind::AllToAll => {
            let gather = kind == Kind::AllGather;
            // The all-gather's limit is on a PE's data (staged once a rank), the all-to-all's
            // on a chunk (staged both ways).
            let ll_fits = if gather {
                util::ll_moves(ll_max, n, LlForm::Gather, sbytes)
            } else {
                util::ll_moves(ll_max, n, LlForm::AllToAll, sbytes / n)
            };
            // Off NVLink: NVSHMEM's fcollect / alltoall (both hierarchical over nodes),
            // eagerly only.
            let eff = match alg {
                Algorithm::Auto if !p2p && cx.hier.is_some() => Algorithm::Hierarchical,
                Algorithm::Auto if !p2p => Algorithm::Nvshmem,
                Algorithm::Auto if ll_fits => Algorithm::LowLatency,
                Algorithm::Auto if dbytes.max(sbytes) <= coll::MOVE_PULL_MAX_BYTES => {
                    Algorithm::OneShot
                }
                Algorithm::Auto => Algorithm::TwoShot,
                a => a,
            };
            let lengths_bad = if gather {
                !dlen.is_multiple_of(n) || slen != dlen / n
            } else {
                dlen != slen || !slen.is_multiple_of(n)
            };
            let by_nvshmem = matches!(eff, Algorithm::Nvshmem | Algorithm::Hierarchical);
            if lengths_bad
                || overlap(dptr, dbytes, sptr, sbytes)
                || (eff == Algorithm::LowLatency && !ll_fits)
                || (by_nvshmem && graph)
                || (!by_nvshmem && !p2p)
            {
                Err(())
            } else {
                Ok(Some(eff))
            }
        }
        _ => {
            let l = layout.as_ref().unwrap();
            // What the call touches is the layout's reach from each start (its check of
            // overlap is on those, not on the spans' lengths).
            if slen < l.src_len()
                || dlen < l.dst_len()
                || overlap(dptr, l.dst_len() * size, sptr, l.src_len() * size)
                || (!p2p && graph)
            {
                Err(())
            } else {
                Ok(None)
            }
        }
    };
    if cx.p.barrier_all().is_err() {
        return Err(format!("{desc}: barrier before the call failed"));
    }
    let comm = &mut cx.comm;
    let got = execute(cx.p, &cx.side, exec, |s| match kind {
        Kind::AllReduce if in_place => comm.all_reduce_in_place(&mut dst, op, alg.on(s)).map(Some),
        Kind::AllReduce => comm.all_reduce(&mut dst, &src, op, alg.on(s)).map(Some),
        Kind::Broadcast => comm.broadcast(&mut dst, &src, root, alg.on(s)).map(Some),
        Kind::ReduceScatter => comm
            .reduce_scatter(&mut dst, &src, op, Algorithm::Auto.on(s))
            .map(|_| None),
        Kind::AllGather => comm.all_gather(&mut dst, &src, alg.on(s)).map(Some),
        Kind::AllToAll => comm.all_to_all(&mut dst, &src, alg.on(s)).map(Some),
        _ => comm
            .all_to_all_v(
                &mut dst,
                &src,
                layout.as_ref().unwrap(),
                Algorithm::Auto.on(s),
            )
            .map(|_| None),
    });
    let settled = cx.p.barrier_all();
    drop(layout);
    let got = got.map_err(|e| format!("{desc}: {e}"))?;
    settled.map_err(|e| format!("{desc}: barrier after the call failed: {e}"))?;
    if side_stream {
        cx.counts[SIDE] += 1;
    }
    if matches!(exec, Exec::Graph(_)) {
        cx.counts[GRAPHS] += 1;
    }
    let refused = match (&expect, &got) {
        (Err(()), Err(_)) => true,
        (Err(()), Ok(a)) => return Err(format!("{desc}: accepted (ran {a:?}); expected an Err")),
        (Ok(_), Err(e)) => return Err(format!("{desc}: refused: {e}")),
        (Ok(want), Ok(ran)) => {
            if want != ran {
                return Err(format!("{desc}: ran {ran:?}, expected {want:?}"));
            }
            false
        }
    };
    // The expected contents of the windows: what was written, with the destination replaced
    // by the reference unless the call was refused.
    let mut want_x = xdata;
    let mut want_y = ydata;
    if !refused {
        let reference: Vec<T> = match kind {
            Kind::AllReduce => (0..dlen)
                .map(|i| (1..n).fold(input(0, i), |a, q| T::fold(op, a, input(q, i))))
                .collect(),
            Kind::Broadcast => (0..dlen).map(|i| input(root, i)).collect(),
            Kind::ReduceScatter => (0..dlen)
                .map(|j| {
                    let i = me * dlen + j;
                    (1..n).fold(input(0, i), |a, q| T::fold(op, a, input(q, i)))
                })
                .collect(),
            Kind::AllGather => (0..dlen).map(|i| input(i / slen, i % slen)).collect(),
            Kind::AllToAll => {
                let m = slen / n;
                (0..dlen).map(|i| input(i / m, me * m + i % m)).collect()
            }
            _ => {
                // Poison where nothing is received, each sender's segment where it is.
                let (counts, sd, rd) = a2av.as_ref().unwrap();
                let mut w: Vec<T> = (doff..doff + dlen)
                    .map(|e| {
                        if in_x {
                            want_x[e - xw.lo]
                        } else {
                            want_y[e - yw.lo]
                        }
                    })
                    .collect();
                for q in 0..n {
                    for k in 0..counts[q][me] {
                        w[rd[me][q] + k] = input(q, sd[q][me] + k);
                    }
                }
                w
            }
        };
        let (buf, lo) = if in_x {
            (&mut want_x, xw.lo)
        } else {
            (&mut want_y, yw.lo)
        };
        buf[doff - lo..doff - lo + dlen].copy_from_slice(&reference);
    } else {
        cx.counts[REFUSALS] += 1;
    }
    let got_x: Vec<T> = read_window(&cx.x, xw)?;
    let region = if in_x {
        (doff, doff + dlen)
    } else {
        (soff, soff + slen)
    };
    compare(
        &format!("{desc}: {}", if in_x { "buffer" } else { "source" }),
        &got_x,
        &want_x,
        xw.lo,
        region,
    )?;
    if !in_x {
        let got_y: Vec<T> = read_window(&cx.y, yw)?;
        compare(
            &format!("{desc}: destination"),
            &got_y,
            &want_y,
            yw.lo,
            (doff, doff + dlen),
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// pgas::ops

/// -1, 0 or 1 from a hash: every partial sum of the GEMMs below is a small integer, exact in
/// bf16 (at most 256 in magnitude) and in f32 in any order.
fn tri(h: u64) -> f32 {
    (h % 3) as f32 - 1.0
}

/// A small positive dimension, odd ones included; `mult` divides it.
fn dim(rng: &mut Rng, mult: usize, max: usize) -> usize {
    rng.range(1, max / mult) * mult
}

/// All-gather + matmul (cuBLAS path) at a random shape: C (M x N) = allgather_rows(A) Btᵀ, K at
/// most 256 so |C| <= 256 is exact in bf16. Now and then a zero dimension: refused on every PE.
fn ag_matmul(cx: &mut Ctx, rng: &mut Rng, c: u64) -> Verdict {
    let (p, n_pes, me, seed) = (cx.p, cx.n, cx.me, cx.seed);
    let mut mp = if rng.chance(50) {
        rng.range(1, 16)
    } else {
        dim(rng, 8, 128)
    };
    let n = if rng.chance(50) {
        rng.range(1, 40)
    } else {
        dim(rng, 8, 256)
    };
    let k = if rng.chance(50) {
        rng.range(1, 40)
    } else {
        dim(rng, 8, 256)
    };
    let refuse = rng.chance(5);
    if refuse {
        mp = 0;
    }
    let desc = format!(
        "call {c}: all_gather_matmul shard rows {mp}, N {n}, K {k} on {n_pes} PEs{}",
        if refuse { " (refused)" } else { "" }
    );
    *CURRENT.lock().unwrap() = desc.clone();
    let a_of = |q: usize| stream_of(seed, c, q, INPUT);
    let bt_base = stream_of(seed, c, me, GUARDS);
    let plan = AllGatherMatmul::new(p, (mp, n, k));
    let mut plan = match (plan, refuse) {
        (Err(_), true) => {
            cx.counts[REFUSALS] += 1;
            return Ok(());
        }
        (Ok(_), true) => return Err(format!("{desc}: accepted; expected an Err")),
        (Err(e), false) => return Err(format!("{desc}: refused: {e}")),
        (Ok(plan), false) => plan,
    };
    let m = mp * n_pes;
    let s = p.stream();
    let run = (|| -> pgas::Result<(Vec<bf16>, Vec<bf16>)> {
        let shard: Vec<bf16> = (0..mp * k)
            .map(|i| bf16::from_f32(tri(at(a_of(me), i))))
            .collect();
        let bt: Vec<bf16> = (0..n * k)
            .map(|i| bf16::from_f32(tri(at(bt_base, i))))
            .collect();
        let shard = s.clone_htod(&shard).map_err(pgas::Error::cuda("upload"))?;
        let bt = s.clone_htod(&bt).map_err(pgas::Error::cuda("upload"))?;
        let mut out = s
            .clone_htod(&vec![bf16::from_f32(-777.0); m * n])
            .map_err(pgas::Error::cuda("upload"))?;
        plan.run(&mut out, &shard, &bt)?;
        read_twice(p, s, &out)
    })();
    let settled = p.barrier_all();
    let desc = format!("{desc}, {:?}", plan.gemm_path());
    drop(plan);
    let (got, late) = run.map_err(|e| format!("{desc}: {e}"))?;
    settled.map_err(|e| format!("{desc}: barrier: {e}"))?;
    let desc = late_note(desc, &got, &late);
    let bt: Vec<f32> = (0..n * k).map(|i| tri(at(bt_base, i))).collect();
    let mut want = vec![bf16::ZERO; m * n];
    for r in 0..m {
        let (q, lr) = (r / mp, r % mp);
        let row: Vec<f32> = (0..k).map(|x| tri(at(a_of(q), lr * k + x))).collect();
        for col in 0..n {
            let v: f32 = (0..k).map(|x| row[x] * bt[col * k + x]).sum();
            want[r * n + col] = bf16::from_f32(v);
        }
    }
    compare(&desc, &got, &want, 0, (0, m * n))
}

/// Matmul + reduce-scatter at a random shape: out (M/P x N) = this PE's rows of sum over PEs of
/// A Btᵀ, with P x K/P at most 256 so every partial and the sum are exact in bf16. Now and then
/// a shape that does not divide or a chunk count that does not divide M / P: refused.
fn matmul_rs(cx: &mut Ctx, rng: &mut Rng, c: u64) -> Verdict {
    let (p, pes, me, seed) = (cx.p, cx.n, cx.me, cx.seed);
    let mp = if rng.chance(50) {
        rng.range(1, 40)
    } else {
        dim(rng, 16, 512)
    };
    let mut m = mp * pes;
    let mut n = dim(rng, 8, 256);
    let mut kl = dim(rng, 8, (256 / pes).max(8));
    let divisors: Vec<usize> = (1..=mp.min(8)).filter(|d| mp.is_multiple_of(*d)).collect();
    let mut splits = if rng.chance(50) {
        None
    } else {
        Some(divisors[rng.below(divisors.len())])
    };
    let refuse = rng.chance(8);
    if refuse {
        match rng.below(4) {
            0 => n += rng.range(1, 7),
            1 => kl += rng.range(1, 7),
            2 if pes > 1 => m += 1,
            _ => splits = (mp + 1..).find(|s| !mp.is_multiple_of(*s)),
        }
    }
    let desc = format!(
        "call {c}: matmul_reduce_scatter M {m}, N {n}, K/P {kl}, chunks {splits:?} on {pes} PEs{}",
        if refuse { " (refused)" } else { "" }
    );
    *CURRENT.lock().unwrap() = desc.clone();
    let plan = MatmulReduceScatter::with_splits(p, (m, n, kl), splits);
    let mut plan = match (plan, refuse) {
        (Err(_), true) => {
            cx.counts[REFUSALS] += 1;
            return Ok(());
        }
        (Ok(_), true) => return Err(format!("{desc}: accepted; expected an Err")),
        (Err(e), false) => return Err(format!("{desc}: refused: {e}")),
        (Ok(plan), false) => plan,
    };
    let a_of = |q: usize| stream_of(seed, c, q, INPUT);
    let b_of = |q: usize| stream_of(seed, c, q, GUARDS);
    let s = p.stream().clone();
    let run = (|| -> pgas::Result<(Vec<bf16>, Vec<bf16>)> {
        let a: Vec<bf16> = (0..m * kl)
            .map(|i| bf16::from_f32(tri(at(a_of(me), i))))
            .collect();
        let bt: Vec<bf16> = (0..n * kl)
            .map(|i| bf16::from_f32(tri(at(b_of(me), i))))
            .collect();
        let a = s.clone_htod(&a).map_err(pgas::Error::cuda("upload"))?;
        let bt = s.clone_htod(&bt).map_err(pgas::Error::cuda("upload"))?;
        let mut out = s
            .clone_htod(&vec![bf16::from_f32(-777.0); mp * n])
            .map_err(pgas::Error::cuda("upload"))?;
        plan.run(p, &s, &mut out, &a, &bt)?;
        read_twice(p, &s, &out)
    })();
    let settled = p.barrier_all();
    let desc = format!("{desc}, {:?}, {} chunk(s)", plan.gemm_path(), plan.splits());
    drop(plan);
    let (got, late) = run.map_err(|e| format!("{desc}: {e}"))?;
    settled.map_err(|e| format!("{desc}: barrier: {e}"))?;
    let desc = late_note(desc, &got, &late);
    let mut want = vec![0f32; mp * n];
    for q in 0..pes {
        let bt: Vec<f32> = (0..n * kl).map(|i| tri(at(b_of(q), i))).collect();
        for r in 0..mp {
            let row = me * mp + r;
            let a: Vec<f32> = (0..kl).map(|x| tri(at(a_of(q), row * kl + x))).collect();
            for col in 0..n {
                // Each PE's partial is rounded to bf16 (exact: at most K/P in magnitude).
                want[r * n + col] += (0..kl).map(|x| a[x] * bt[col * kl + x]).sum::<f32>();
            }
        }
    }
    let want: Vec<bf16> = want.into_iter().map(bf16::from_f32).collect();
    compare(&desc, &got, &want, 0, (0, mp * n))
}

/// MoE dispatch + combine at a random configuration (top-k 1 or 4, the prewarmed kernels),
/// checked by `moe.rs`'s check against `pgas::ops::moe::reference` (the combine within one bf16
/// step; everything else exactly).
fn moe(cx: &mut Ctx, rng: &mut Rng, c: u64) -> Verdict {
    let (p, n) = (cx.p, cx.n);
    let cfg = MoeConfig {
        max_tokens: rng.log_uniform(1, 300),
        hidden: 8 * rng.log_uniform(1, 160),
        top_k: if rng.chance(50) { 1 } else { 4 },
        experts_per_pe: rng.range(1, 8),
    };
    let empty = rng.chance(20).then(|| rng.below(n));
    let rseed = rng.next() % 1_000_000;
    let desc = format!("call {c}: MoE {cfg:?}, routing seed {rseed}, empty PE {empty:?}");
    *CURRENT.lock().unwrap() = desc.clone();
    // Off NVLink too: rows move by NVSHMEM's RMA there.
    let mut m = MoeDispatcher::new(p, cfg).map_err(|e| format!("{desc}: refused: {e}"))?;
    let outcome = (|| -> util::CaseResult {
        let mut r = crate::moe::round(p, &cfg, rseed, empty)?;
        crate::moe::run_round(&mut m, &mut r, p.my_pe())?;
        crate::moe::check(p, &mut m, &cfg, &r, &desc)
    })();
    let settled = util::settle(p);
    drop(m);
    outcome.map_err(|e| format!("{desc}: {e}"))?;
    settled.map_err(|e| format!("{desc}: settle: {e}"))
}
