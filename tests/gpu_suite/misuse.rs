//! Runtime misuse on real PEs (the rows of `docs/faults.md` that need a GPU): each call must
//! return its `pgas::Error` variant with a message that names the fix, leave the process and
//! NVSHMEM usable (each case ends with a correct operation), and never abort. Every check here
//! fails the same way on every PE, so no PE is left waiting in a collective another PE skipped.

use crate::runner::{case, Case};
use crate::util::{self, ensure, CaseResult};
use pgas::cudarc::driver::CudaContext;
use pgas::kernel::KernelSpec;
use pgas::prelude::*;
use pgas::Error;

pub const CASES: &[Case] = &[
    case("misuse/init_twice", init_twice),
    case("misuse/pe_out_of_range", pe_out_of_range),
    case("misuse/views_and_lengths", views_and_lengths),
    case("misuse/heap_exhausted", heap_exhausted),
    case("misuse/alloc_size_mismatch", alloc_size_mismatch),
    case("misuse/collective_arguments", collective_arguments),
    case("misuse/split_outside_the_team", split_outside_the_team),
    case("misuse/launch_geometry", launch_geometry),
    case("misuse/stream_of_another_gpu", stream_of_another_gpu),
    case("misuse/buffer_of_another_gpu", buffer_of_another_gpu),
    case("misuse/region_outside_the_heap", region_outside_the_heap),
    case("misuse/region_not_live", region_not_live),
    case("misuse/team_used_after_destroy", team_used_after_destroy),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[
    &misuse_touch::SPEC,
    &misuse_local::SPEC,
    &misuse_team_size::SPEC,
];

#[pgas_kernel]
fn misuse_touch(out: &mut SymTensor<u32>) {
    let i = global_thread_idx();
    if i < out.len() {
        out[i] = i as u32 + 1;
    }
}

#[pgas_kernel]
fn misuse_local(x: &mut CudaSlice<f32>) {
    let i = global_thread_idx();
    if i < x.len() {
        x[i] = 2.0;
    }
}

#[pgas_kernel]
fn misuse_team_size(out: &mut SymTensor<i32>, team: Team) {
    if global_thread_idx() == 0 {
        out[0] = team_n_pes(team);
    }
}

/// `r` must be an `Err` that `want` accepts, whose message holds every part of `fix`.
fn expect_err<T>(
    what: &str, r: Result<T, Error>, want: impl Fn(&Error) -> bool, fix: &[&str],
) -> CaseResult {
    let e = match r {
        Ok(_) => return Err(format!("{what}: accepted, expected an error").into()),
        Err(e) => e,
    };
    let msg = e.to_string();
    ensure(want(&e), || format!("{what}: wrong error: {msg}"))?;
    for part in fix {
        ensure(msg.contains(part), || {
            format!("{what}: the message lacks {part:?}: {msg}")
        })?;
    }
    Ok(())
}

/// A put around the ring and its check: NVSHMEM still works after the refused calls.
fn ring_still_works(p: &Pgas, len: usize) -> CaseResult {
    let me = util::me(p) as u32;
    let src = p.alloc_from(&vec![me + 100; len])?;
    let dst = p.alloc::<u32>(len)?;
    p.barrier_all()?;
    p.put(&dst, &src, util::next(p))?;
    util::settle(p)?;
    let from = util::prev(p) as u32 + 100;
    util::check_eq(
        "a put after the refused calls",
        &dst.to_vec()?,
        &vec![from; len],
    )
}

fn init_twice(_p: &Pgas) -> CaseResult {
    let fix = ["already initialized", "Clone the existing `Pgas` handle"];
    expect_err(
        "pgas::init() with a handle alive",
        pgas::init(),
        |e| matches!(e, Error::AlreadyInitialized),
        &fix,
    )?;
    expect_err(
        "builder().heap_size(..).init() with a handle alive",
        pgas::builder().heap_size(1 << 20).init(),
        |e| matches!(e, Error::AlreadyInitialized),
        &fix,
    )
}

fn pe_out_of_range(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let t = p.alloc::<f32>(4)?;
    let u = p.alloc::<f32>(4)?;
    let fix = ["does not exist", "Fix: pass a PE below `pgas.n_pes()`"];
    let bad = |pe: usize| move |e: &Error| matches!(e, Error::InvalidPe { pe: got, n_pes } if *got == pe && *n_pes == n);
    expect_err("put to PE n_pes", p.put(&t, &u, n), bad(n), &fix)?;
    expect_err(
        "get from PE n_pes + 5",
        p.get(&t, &u, n + 5),
        bad(n + 5),
        &fix,
    )?;
    expect_err(
        "broadcast from root n_pes",
        p.broadcast(Team::WORLD, &t, &u, n),
        bad(n),
        &fix,
    )?;
    ring_still_works(p, 4)
}

fn views_and_lengths(p: &Pgas) -> CaseResult {
    let mut t = p.alloc::<u32>(16)?;
    let u = p.alloc::<u32>(16)?;
    expect_err(
        "view 0..17 of 16",
        t.view(0..17),
        |e| {
            matches!(
                e,
                Error::OutOfRange {
                    start: 0,
                    end: 17,
                    len: 16
                }
            )
        },
        &["Fix: keep the range within 0..16"],
    )?;
    expect_err(
        "view 5..5",
        t.view_mut(5..5),
        |e| matches!(e, Error::EmptyView { start: 5, end: 5 }),
        &["Fix: use a range with start < end"],
    )?;
    let fix = ["length mismatch", "Fix: pass buffers of matching lengths"];
    expect_err(
        "copy_from 3 elements into 16",
        t.copy_from(&[1, 2, 3]),
        |e| {
            matches!(
                e,
                Error::LengthMismatch {
                    got: 3,
                    expected: 16,
                    ..
                }
            )
        },
        &fix,
    )?;
    let head = u.view(0..4)?;
    expect_err(
        "put 16 elements into a view of 4",
        p.put(&head, &t, util::next(p)),
        |e| {
            matches!(
                e,
                Error::LengthMismatch {
                    got: 16,
                    expected: 4,
                    ..
                }
            )
        },
        &fix,
    )?;
    // The right view of the same tensor works.
    let mut v = t.view_mut(4..8)?;
    v.copy_from(&[7, 8, 9, 10])?;
    util::check_eq(
        "view 4..8 after the refusals",
        &t.to_vec()?[4..8],
        &[7, 8, 9, 10],
    )
}

fn heap_exhausted(p: &Pgas) -> CaseResult {
    expect_err(
        "alloc of heap_size + 1 bytes",
        p.alloc::<u8>(p.heap_size() + 1),
        |e| matches!(e, Error::HeapExhausted { .. }),
        &[
            "does not fit",
            "PgasBuilder::heap_size",
            "NVSHMEM_SYMMETRIC_SIZE",
        ],
    )?;
    expect_err(
        "alloc of 0 elements",
        p.alloc::<u8>(0),
        |e| matches!(e, Error::EmptyAllocation),
        &["Fix: allocate at least one element"],
    )?;
    ring_still_works(p, 1024)
}

/// Fills the symmetric heap except for a hole of `hole` bytes: the hole is allocated first and
/// dropped last, so it is one free range. Every PE makes the same calls, so every PE's heap
/// fills the same way and each refusal comes on every PE.
fn fill_heap_but(p: &Pgas, hole: usize) -> Result<Vec<SymTensor<u8>>, Error> {
    let hole = p.alloc::<u8>(hole)?;
    let mut fill = Vec::new();
    let mut size = (p.heap_size() / 2).next_power_of_two();
    while size >= 4096 {
        match p.alloc::<u8>(size) {
            Ok(t) => fill.push(t),
            Err(Error::HeapExhausted { .. }) => size /= 2,
            Err(e) => return Err(e),
        }
    }
    drop(hole);
    Ok(fill)
}

/// `gpu_suite --heap-exhaustion`: [`heap_exhausted_midway`], in a process of its own (it fills
/// the heap; where NVSHMEM, not pgas, meets the end of the heap, NVSHMEM 3.4.5 ends the process,
/// which must not take the rest of the suite with it).
pub const HEAP_EXHAUSTION: Case = case("misuse/heap_exhausted_midway", heap_exhausted_midway);

/// A set-up that runs out of heap part of the way through (its first allocations fit in the
/// hole, a later one does not): `HeapExhausted` on every PE, and what it had allocated is freed
/// (the hole can be allocated again whole); once the heap is free again the same set-up works.
fn heap_exhausted_midway(p: &Pgas) -> CaseResult {
    use pgas::coll::{Algorithm, Comm};
    use pgas::ops::moe::{MoeConfig, MoeDispatcher};
    let n = util::npes(p);
    let cfg = MoeConfig {
        max_tokens: 256,
        hidden: 1024,
        top_k: 2,
        experts_per_pe: 2,
    };
    // Comm::new's first four buffers take a few KiB, its low-latency scratch 256 KiB or more;
    // the dispatcher's receive rows take about half its bytes and its combine rows the rest.
    let comm_hole = 64 << 10;
    let moe_hole = (cfg.symmetric_bytes(n) / 2).next_multiple_of(4096);
    for (what, hole) in [("Comm::new", comm_hole), ("MoeDispatcher::new", moe_hole)] {
        let fill = fill_heap_but(p, hole)?;
        let made = if what == "Comm::new" {
            Comm::new(p, Team::WORLD).map(drop)
        } else {
            MoeDispatcher::new(p, cfg).map(drop)
        };
        expect_err(
            &format!("{what} with a {hole}-byte hole in a full heap"),
            made,
            |e| matches!(e, Error::HeapExhausted { .. }),
            &["PgasBuilder::heap_size"],
        )?;
        // Nothing it allocated before failing is still held: the hole is whole again.
        let again = p.alloc::<u8>(hole).map_err(|e| {
            format!("{what} leaked part of the hole after failing: allocating it again: {e}")
        })?;
        drop(again);
        drop(fill);
    }
    // With the heap free, both set-ups work, and the communicator reduces correctly.
    let mut comm = Comm::new(p, Team::WORLD)?;
    let src = p.alloc_from(&[1.0f32; 1000])?;
    let mut dst = p.alloc::<f32>(1000)?;
    comm.all_reduce(&mut dst, &src, ReduceOp::Sum, Algorithm::Auto)?;
    util::settle(p)?;
    util::check_eq(
        "all-reduce after the refusals",
        &dst.to_vec()?,
        &vec![n as f32; 1000],
    )?;
    drop(MoeDispatcher::new(p, cfg)?);
    ring_still_works(p, 64)
}

fn alloc_size_mismatch(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    if n < 2 {
        println!(
            "gpu_suite[pe {me}]: misuse/alloc_size_mismatch needs 2 PEs to mismatch; on 1 PE it \
             checks that the allocations around it work"
        );
        return ring_still_works(p, 10);
    }
    // Each PE asks for a different length: every PE must get the error, with every PE's size.
    let want: Vec<u64> = (0..n).map(|pe| 4 * (10 + pe as u64)).collect();
    expect_err(
        "alloc of 10 + my_pe elements",
        p.alloc::<u32>(10 + me),
        |e| matches!(e, Error::AllocMismatch { sizes } if *sizes == want),
        &[
            "sizes differ across PEs",
            "PE 0 asked for 40 bytes",
            "Fix: call alloc with the same length",
        ],
    )?;
    // Nothing was allocated, so the heaps are still in step: symmetric addresses still match.
    ring_still_works(p, 10)
}

fn collective_arguments(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let src = p.alloc::<f32>(4)?;
    let dst = p.alloc::<f32>(4)?;
    let long = p.alloc::<f32>(4 * n + 1)?;
    expect_err(
        "fcollect into 4 * n_pes + 1 elements",
        p.fcollect(Team::WORLD, &long, &src),
        |e| matches!(e, Error::LengthMismatch { .. }),
        &["Fix: pass buffers of matching lengths"],
    )?;
    expect_err(
        "bitwise-and reduction of f32",
        p.reduce(Team::WORLD, ReduceOp::And, &dst, &src),
        |e| {
            matches!(
                e,
                Error::InvalidConfig {
                    name: "reduce operator",
                    ..
                }
            )
        },
        &["Fix: use Sum, Prod, Min or Max"],
    )?;
    expect_err(
        "reduce of 4 into 4 * n_pes + 1",
        p.reduce(Team::WORLD, ReduceOp::Sum, &long, &src),
        |e| matches!(e, Error::LengthMismatch { .. }),
        &["Fix:"],
    )?;
    let apart = |e: &Error| {
        matches!(
            e,
            Error::InvalidConfig {
                name: "collective buffers",
                ..
            }
        )
    };
    expect_err(
        "reduce in place",
        p.reduce(Team::WORLD, ReduceOp::Sum, &dst, &dst),
        apart,
        &["in place", "Fix: pass a separate destination"],
    )?;
    // The source is the destination's last 4 elements.
    expect_err(
        "fcollect with the source inside the destination",
        p.fcollect(
            Team::WORLD,
            &long.view(0..4 * n)?,
            &long.view(4 * n - 3..4 * n + 1)?,
        ),
        apart,
        &["overlapping", "Fix: pass a separate destination"],
    )?;
    ring_still_works(p, 4)
}

fn split_outside_the_team(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let fix = [
        "Team::split_strided",
        "Fix: pick start + stride * (size - 1) <",
    ];
    let bad = |e: &Error| {
        matches!(
            e,
            Error::InvalidConfig {
                name: "Team::split_strided",
                ..
            }
        )
    };
    expect_err(
        "split of n_pes + 1 PEs",
        Team::WORLD.split_strided(p, 0, 1, n + 1),
        bad,
        &fix,
    )?;
    expect_err(
        "split with stride 0",
        Team::WORLD.split_strided(p, 0, 0, 1),
        bad,
        &fix,
    )?;
    ring_still_works(p, 4)
}

fn launch_geometry(p: &Pgas) -> CaseResult {
    let mut out = p.alloc::<u32>(64)?;
    let bad = |e: &Error| matches!(e, Error::Launch { .. });
    expect_err(
        "a grid of 0 blocks",
        misuse_touch::launch(p, LaunchConfig::blocks(0, 64), &mut out),
        bad,
        &["Fix: make every dimension at least 1"],
    )?;
    expect_err(
        "blocks of 2048 threads",
        misuse_touch::launch(p, LaunchConfig::blocks(1, 2048), &mut out),
        bad,
        &["Fix: use at most 1024 threads per block"],
    )?;
    misuse_touch::launch(p, LaunchConfig::blocks(1, 64), &mut out)?;
    p.stream().synchronize()?;
    let want: Vec<u32> = (1..=64).collect();
    util::check_eq("the launch after the refusals", &out.to_vec()?, &want)
}

/// Another GPU's context, or `None` (with a note) when only one GPU is visible.
fn other_gpu(p: &Pgas) -> Result<Option<std::sync::Arc<CudaContext>>, Error> {
    let count = pgas::gpu_count()?;
    if count < 2 {
        println!(
            "gpu_suite[pe {}]: 1 GPU visible, so there is no other GPU's context to misuse; \
             checking that the right one works",
            util::me(p)
        );
        return Ok(None);
    }
    let other = (p.device_ordinal() + 1) % count;
    let ctx = CudaContext::new(other)?;
    // Creating a context makes it current on this thread; pgas binds its own for every call,
    // and the checks below go through pgas.
    p.cuda().bind_to_thread()?;
    Ok(Some(ctx))
}

fn stream_of_another_gpu(p: &Pgas) -> CaseResult {
    let mut out = p.alloc::<u32>(64)?;
    if let Some(ctx) = other_gpu(p)? {
        let stream = ctx.new_stream()?;
        p.cuda().bind_to_thread()?;
        expect_err(
            "a launch on another GPU's stream",
            misuse_touch::launch_on(p, &stream, LaunchConfig::blocks(1, 64), &mut out),
            |e| matches!(e, Error::Launch { .. }),
            &[
                &format!("another CUDA context (GPU {})", ctx.ordinal()),
                "Fix: launch on `pgas.stream()`",
            ],
        )?;
    }
    let mine = p.cuda().new_stream()?;
    misuse_touch::launch_on(p, &mine, LaunchConfig::blocks(1, 64), &mut out)?;
    mine.synchronize()?;
    let want: Vec<u32> = (1..=64).collect();
    util::check_eq(
        "a launch on a stream of this context",
        &out.to_vec()?,
        &want,
    )
}

fn buffer_of_another_gpu(p: &Pgas) -> CaseResult {
    if let Some(ctx) = other_gpu(p)? {
        let mut theirs = ctx.default_stream().alloc_zeros::<f32>(32)?;
        p.cuda().bind_to_thread()?;
        expect_err(
            "a CudaSlice of another GPU as a kernel argument",
            misuse_local::launch(p, LaunchConfig::blocks(1, 32), &mut theirs),
            |e| matches!(e, Error::Launch { .. }),
            &[
                &format!("belongs to GPU {}'s CUDA context", ctx.ordinal()),
                "Fix: allocate it on this GPU",
            ],
        )?;
    }
    let mut mine = p.stream().alloc_zeros::<f32>(32)?;
    misuse_local::launch(p, LaunchConfig::blocks(1, 32), &mut mine)?;
    let got = p.stream().clone_dtoh(&mine)?;
    util::check_eq("a CudaSlice of this GPU", &got, &[2.0f32; 32])
}

/// A region by address and length that breaks `SymRegion`'s contract on purpose: the memory it
/// names is a plain CUDA allocation, or runs past the heap's end. Only the cases below make one,
/// and only to check that the host calls refuse it before NVSHMEM or a kernel dereferences it.
struct Outside(u64, usize);

// SAFETY: deliberately broken (see above); every call it is passed to must refuse it, which is
// what `region_outside_the_heap` checks, so nothing ever reads or writes through it.
unsafe impl<T> SymRegion<T> for Outside {
    fn as_device_ptr(&self) -> u64 {
        self.0
    }
    fn len(&self) -> usize {
        self.1
    }
}

/// Host RMA, signals, atomics, collectives and a checked kernel launch each refuse a region that
/// is not wholly inside the symmetric heap (a plain cudarc allocation; a region that starts in a
/// real tensor and runs past the heap's end) with `NotSymmetric`, where before they handed the
/// address to NVSHMEM (`put` returned `Ok(())`).
fn region_outside_the_heap(p: &Pgas) -> CaseResult {
    use pgas::cudarc::driver::DevicePtr;
    let t = p.alloc::<u32>(64)?;
    let plain = p.stream().alloc_zeros::<u32>(64)?;
    let plain_ptr = {
        let (ptr, _guard) = plain.device_ptr(p.stream());
        ptr
    };
    let outside = Outside(plain_ptr, 64);
    // Starts at a real tensor, ends 16 TiB on: past the heap whatever its size or reservation.
    let past_end = Outside(t.as_device_ptr(), 1 << 42);
    let fix = [
        "is not inside NVSHMEM's symmetric heap",
        "Fix: pass a SymTensor",
    ];
    let not_sym = |what: &'static str| move |e: &Error| matches!(e, Error::NotSymmetric { what: w, .. } if *w == what);
    let me = util::me(p);
    expect_err(
        "put into a plain allocation",
        p.put(&outside, &t, me),
        not_sym("the destination"),
        &fix,
    )?;
    expect_err(
        "put from a plain allocation",
        p.put(&t, &outside, util::next(p)),
        not_sym("the source"),
        &fix,
    )?;
    expect_err(
        "get into a plain allocation",
        p.get(&outside, &t, util::next(p)),
        not_sym("the destination"),
        &fix,
    )?;
    expect_err(
        "get_nbi from a region past the heap's end",
        p.get_nbi::<u32>(&past_end, &past_end, util::next(p)),
        not_sym("the destination"),
        &fix,
    )?;
    expect_err(
        "put_signal with a plain allocation as the signal",
        p.put_signal(&t, &t, &Outside(plain_ptr, 1), 0, 1, SignalOp::Set, me),
        not_sym("the signal region"),
        &fix,
    )?;
    expect_err(
        "signal_op on a plain allocation",
        p.signal_op(&Outside(plain_ptr, 8), 0, 1, SignalOp::Add, me),
        not_sym("the signal region"),
        &fix,
    )?;
    expect_err(
        "atomic_fetch of a plain allocation",
        p.atomic_fetch::<u32>(&outside, 0, util::next(p)),
        not_sym("the atomic's target"),
        &fix,
    )?;
    expect_err(
        "atomic_add on a region past the heap's end",
        p.atomic_add::<u32>(&past_end, 1, 1, util::next(p)),
        not_sym("the atomic's target"),
        &fix,
    )?;
    expect_err(
        "broadcast into a plain allocation",
        p.broadcast::<u32>(Team::WORLD, &outside, &t, 0),
        not_sym("the destination"),
        &fix,
    )?;
    expect_err(
        "reduce from a plain allocation",
        p.reduce::<u32>(Team::WORLD, ReduceOp::Sum, &t, &outside),
        not_sym("the source"),
        &fix,
    )?;
    expect_err(
        "peer_reachable of a plain allocation",
        p.peer_reachable::<u32>(&outside, me),
        not_sym("the region"),
        &fix,
    )?;
    // The kernel would store to the plain allocation through NVSHMEM's view.
    expect_err(
        "a kernel launched on a plain allocation as a symmetric argument",
        launch_touching(p, Outside(plain_ptr, 64)),
        not_sym("a symmetric kernel argument"),
        &fix,
    )?;
    drop(plain);
    ring_still_works(p, 4)
}

/// `misuse_touch` launched (checked) with `region` as its symmetric argument, through
/// hand-built arguments: the generated launcher takes only a `&mut SymTensor`.
fn launch_touching(p: &Pgas, mut region: Outside) -> pgas::Result<()> {
    let mut args = pgas::__private::KernelArgs::new();
    args.push_sym_mut::<u32, _>(&mut region);
    pgas::__private::launch(
        p,
        &misuse_touch::SPEC,
        pgas::kernel::Variant::Plain,
        &[],
        LaunchConfig::blocks(1, 64),
        None,
        &mut args,
    )
}

/// A region inside the symmetric heap that is not one live allocation: over a freed tensor
/// (before, a `get` from it returned `Ok`), straddling two tensors, running past the end of one.
/// Host RMA, signals, atomics, a collective and a checked launch each refuse it with `NotLive`,
/// naming the address ranges it overlaps, and leave every buffer as it was.
fn region_not_live(p: &Pgas) -> CaseResult {
    let me = util::me(p);
    let mut a = p.alloc::<u32>(64)?;
    let b = p.alloc::<u32>(64)?;
    // Freed last, so that no allocation of this case reuses its address.
    let freed_ptr = {
        let gone = p.alloc::<u32>(64)?;
        gone.as_device_ptr()
    }; // freed here, collectively
    let pattern: Vec<u32> = (0..64).map(|i| 7 * i + me as u32).collect();
    a.copy_from(&pattern)?;
    p.barrier_all()?;
    let (pa, pb) = (a.as_device_ptr(), b.as_device_ptr());
    let freed = Outside(freed_ptr, 64);
    // The last 16 elements of the lower tensor and the first 16 of the higher.
    let (lo, hi) = if pa < pb { (pa, pb) } else { (pb, pa) };
    let straddle = Outside(lo + 48 * 4, ((hi - lo) / 4) as usize - 48 + 16);
    let past_end = Outside(pa + 32 * 4, 64);
    let fix = [
        "is not inside one live symmetric allocation",
        "Fix: pass a live SymTensor",
    ];
    let not_live = |what: &'static str, names: String| {
        move |e: &Error| {
            matches!(e, Error::NotLive { what: w, .. } if *w == what)
                && e.to_string().contains(&names)
        }
    };
    let nothing = "no live symmetric allocation".to_string();
    let lower = format!("{lo:#x}..");
    let of_a = format!("{pa:#x}..");
    expect_err(
        "get from a freed tensor",
        p.get(&a, &freed, util::next(p)),
        not_live("the source", nothing.clone()),
        &fix,
    )?;
    expect_err(
        "put into a freed tensor",
        p.put(&freed, &a, util::next(p)),
        not_live("the destination", nothing.clone()),
        &fix,
    )?;
    expect_err(
        "get into a region straddling two tensors",
        p.get::<u32>(&straddle, &straddle, me),
        not_live("the destination", lower.clone()),
        &fix,
    )?;
    expect_err(
        "put_nbi from a region past a tensor's end",
        p.put_nbi::<u32>(&b, &past_end, util::next(p)),
        not_live("the source", of_a.clone()),
        &fix,
    )?;
    expect_err(
        "signal_op on a freed tensor",
        p.signal_op(&Outside(freed_ptr, 8), 0, 1, SignalOp::Add, me),
        not_live("the signal region", nothing.clone()),
        &fix,
    )?;
    expect_err(
        "atomic_add on a freed tensor",
        p.atomic_add::<u32>(&freed, 0, 1, util::next(p)),
        not_live("the atomic's target", nothing.clone()),
        &fix,
    )?;
    expect_err(
        "broadcast into a region straddling two tensors",
        p.broadcast::<u32>(Team::WORLD, &straddle, &straddle, 0),
        not_live("the destination", lower),
        &fix,
    )?;
    expect_err(
        "a kernel launched on a freed tensor as a symmetric argument",
        launch_touching(p, Outside(freed_ptr, 64)),
        not_live("a symmetric kernel argument", nothing),
        &fix,
    )?;
    p.barrier_all()?;
    util::check_eq("the refused calls left a as it was", &a.to_vec()?, &pattern)?;
    util::check_eq("and b", &b.to_vec()?, &[0u32; 64])?;
    ring_still_works(p, 4)
}

/// Every use of a split team after `Team::destroy` is `TeamDestroyed` (before, the first one,
/// `barrier`, died with SIGSEGV inside NVSHMEM); a second split works, also when NVSHMEM gives it
/// the old team's number, and the old handle stays refused. Collective over all PEs (the team is
/// the world, split off).
fn team_used_after_destroy(p: &Pgas) -> CaseResult {
    use pgas::coll::{Algorithm, Comm};
    let n = util::npes(p);
    let old = Team::WORLD
        .split_strided(p, 0, 1, n)?
        .ok_or("every PE is in a split of the whole world")?;
    // A communicator made while the team lived, used after it died.
    let mut comm = Comm::new(p, old)?;
    let src = p.alloc::<f32>(16)?;
    let mut dst = p.alloc::<f32>(16)?;
    let mut out = p.alloc::<i32>(1)?;
    old.barrier(p)?;
    old.destroy(p)?;
    let fix = [
        "was destroyed",
        "Fix: use a team only until it is destroyed",
    ];
    let gone = |e: &Error| matches!(e, Error::TeamDestroyed { team, .. } if *team == old.raw());
    expect_err("barrier", old.barrier(p), gone, &fix)?;
    expect_err("my_pe", old.my_pe(p), gone, &fix)?;
    expect_err("n_pes", old.n_pes(p), gone, &fix)?;
    expect_err(
        "translate_pe",
        old.translate_pe(p, 0, Team::WORLD),
        gone,
        &fix,
    )?;
    expect_err(
        "translate_pe into it",
        Team::WORLD.translate_pe(p, 0, old),
        gone,
        &fix,
    )?;
    expect_err("config", old.config(p), gone, &fix)?;
    expect_err("split_strided", old.split_strided(p, 0, 1, 1), gone, &fix)?;
    let none = TeamConfig::default();
    expect_err("split_2d", old.split_2d(p, 1, &none, &none), gone, &fix)?;
    expect_err("a second destroy", old.destroy(p), gone, &fix)?;
    expect_err("ensure_live", old.ensure_live(p), gone, &fix)?;
    expect_err(
        "reduce over it",
        p.reduce(old, ReduceOp::Sum, &dst, &src),
        gone,
        &fix,
    )?;
    expect_err(
        "broadcast over it",
        p.broadcast(old, &dst, &src, 0),
        gone,
        &fix,
    )?;
    expect_err("Comm::new over it", Comm::new(p, old), gone, &fix)?;
    for alg in [Algorithm::Nvshmem, Algorithm::OneShot] {
        expect_err(
            &format!("a Comm made before the destroy, {alg:?}"),
            comm.all_reduce(&mut dst, &src, ReduceOp::Sum, alg),
            gone,
            &fix,
        )?;
    }
    expect_err(
        "a kernel launched with it",
        misuse_team_size::launch(p, LaunchConfig::blocks(1, 32), &mut out, old),
        gone,
        &fix,
    )?;
    // A new split: it works, and the stale handle does not name it even if the number is reused.
    let new = Team::WORLD
        .split_strided(p, 0, 1, n)?
        .ok_or("every PE is in a split of the whole world")?;
    ensure(new != old, || {
        format!("the new team {new} equals the old handle")
    })?;
    ensure(new.n_pes(p)? == n, || "the new team's size".into())?;
    new.barrier(p)?;
    misuse_team_size::launch(p, LaunchConfig::blocks(1, 32), &mut out, new)?;
    util::settle(p)?;
    util::check_eq(
        "team_n_pes of the new team in a kernel",
        &out.to_vec()?,
        &[n as i32],
    )?;
    expect_err(
        "barrier of the old handle after a new split",
        old.barrier(p),
        gone,
        &fix,
    )?;
    expect_err(
        "n_pes of the old handle after a new split",
        old.n_pes(p),
        gone,
        &fix,
    )?;
    println!(
        "gpu_suite[pe {}]: the new split got NVSHMEM handle {} (the destroyed one had {})",
        util::me(p),
        new.raw(),
        old.raw()
    );
    new.destroy(p)?;
    drop(comm);
    ring_still_works(p, 4)
}
