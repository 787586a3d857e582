//! The host API beyond launches, grouped as NVSHMEM4Py groups it: memory (shapes, byte buffers,
//! sub-tensors, peer and multicast views, registered VMM buffers), RMA and signals on the pgas
//! stream, host atomics, teams (`split_2d`, `translate_pe`, config, destroy) and interop (cudarc
//! buffers, DLPack). Each case runs on any number of PEs, gathers its mismatches and reports them
//! only after its last collective call (see `runner::Case`), and includes the misuse of its calls
//! that must come back as an `Err` saying what to do.

use std::fmt::Debug;
use std::time::Duration;

use crate::runner::{case, Case};
use crate::util::{self, check_eq, CaseResult};
use pgas::prelude::*;

/// Ordered from the calls pgas already made elsewhere to the ones it never made before this
/// module (registration last), so that a failure deep inside NVSHMEM leaves the most reports.
pub const CASES: &[Case] = &[
    case("host_api/shapes_and_sub_tensors", shapes),
    case("host_api/byte_buffers", byte_buffers),
    case("host_api/cudarc_interop", cudarc_interop),
    case("host_api/dlpack_round_trip", dlpack),
    case("host_api/peer_views", peer_views),
    case("host_api/rma_nbi_and_signals", rma_signals),
    case("host_api/atomics_integer", atomics_integer),
    case("host_api/atomics_float", atomics_float),
    case("host_api/teams_split_2d", teams_2d),
    case("host_api/multicast_view", multicast),
    case("host_api/register_vmm_buffer", register_vmm),
];

/// Elements per PE.
const L: usize = 32;

/// How long a host signal wait may take before the case fails instead of hanging.
const WAIT: Duration = Duration::from_secs(20);

/// Mismatches found so far; reported together when the case's collective calls are done.
#[derive(Default)]
struct Report(Vec<String>);

impl Report {
    fn check(&mut self, r: CaseResult) {
        if let Err(e) = r {
            self.0.push(e.to_string());
        }
    }

    /// Expects `r` to be an `Err` whose message contains every one of `needles`.
    fn expect_err<T: Debug>(&mut self, what: &str, r: pgas::Result<T>, needles: &[&str]) {
        match r {
            Ok(v) => self
                .0
                .push(format!("{what}: expected an error, got Ok({v:?})")),
            Err(e) => {
                let msg = e.to_string();
                if let Some(n) = needles.iter().find(|n| !msg.contains(**n)) {
                    self.0
                        .push(format!("{what}: the error does not mention {n:?}: {msg}"));
                }
            }
        }
    }

    fn ensure(&mut self, cond: bool, msg: impl FnOnce() -> String) {
        if !cond {
            self.0.push(msg());
        }
    }

    fn finish(self) -> CaseResult {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(self.0.join("; ").into())
        }
    }
}

/// A 3-D tensor `[n_pes, 4, 8]`: each PE puts its slab `me` (a sub-tensor) into slab `me` of
/// every PE, so afterwards every PE holds every PE's slab.
fn shapes(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let mut r = Report::default();
    let slab = |pe: usize| (0..32).map(|i| (pe * 100 + i) as f32).collect::<Vec<_>>();
    let mut t = p.alloc_shaped::<f32>(&[n, 4, 8])?;
    r.ensure(t.shape() == [n, 4, 8], || {
        format!("shape {:?}, expected [{n}, 4, 8]", t.shape())
    });
    r.ensure(t.strides() == vec![32, 8, 1] && t.ndim() == 3, || {
        format!("strides {:?}, expected [32, 8, 1]", t.strides())
    });
    t.sub_mut(&[me])?.copy_from(&slab(me))?;
    let row = t.sub(&[me, 2])?;
    r.ensure(row.shape() == [8] && row.start() == me * 32 + 16, || {
        format!(
            "sub(&[{me}, 2]): shape {:?} start {}, expected [8] at {}",
            row.shape(),
            row.start(),
            me * 32 + 16
        )
    });
    r.check(check_eq(
        "row 2 of this PE's slab",
        &row.to_vec()?,
        &slab(me)[16..24],
    ));
    p.barrier_all()?;
    for pe in 0..n {
        let s = t.sub(&[me])?;
        p.put(&s, &s, pe)?;
    }
    util::settle(p)?;
    for pe in 0..n {
        r.check(check_eq(
            &format!("slab {pe} after every PE put its own"),
            &t.sub(&[pe])?.to_vec()?,
            &slab(pe),
        ));
    }
    r.expect_err("sub past the first extent", t.sub(&[n]), &["out of bounds"]);
    r.expect_err(
        "sub with as many indices as dimensions",
        t.sub(&[0, 0, 0]),
        &["leading indices"],
    );
    r.expect_err(
        "a shape with a zero extent",
        p.alloc_shaped::<f32>(&[4, 0]),
        &["at least 1"],
    );
    let flat = t.reshape(&[n * 32])?;
    r.ensure(flat.shape() == [n * 32], || {
        format!("reshape to [{}]: shape {:?}", n * 32, flat.shape())
    });
    r.expect_err(
        "reshape to another element count",
        flat.reshape(&[n * 32 + 1]),
        &["length mismatch"],
    );
    r.finish()
}

/// Untyped bytes: written as bytes, read back as little-endian `u32`s, and a size that is not
/// a whole number of elements refused.
fn byte_buffers(p: &Pgas) -> CaseResult {
    let me = util::me(p) as u32;
    let mut r = Report::default();
    let words: Vec<u32> = (0..L as u32).map(|i| me << 16 | i).collect();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut buf = p.alloc_bytes(bytes.len())?;
    buf.copy_from(&bytes)?;
    let typed = buf.into_typed::<u32>()?;
    r.check(check_eq("bytes read as u32", &typed.to_vec()?, &words));
    let back = typed.into_bytes();
    r.ensure(back.len() == 4 * L, || {
        format!("into_bytes: {} bytes, expected {}", back.len(), 4 * L)
    });
    let odd = p.alloc_bytes(12)?;
    r.expect_err(
        "12 bytes as u64",
        odd.into_typed::<u64>(),
        &["multiple of the element size"],
    );
    p.barrier_all()?;
    r.finish()
}

/// `peer(pe)` for every PE: the mapping reads that PE's values and writes land there. On the
/// test machines (one NVLink node) every PE is mapped.
fn peer_views(p: &Pgas) -> CaseResult {
    let (me, n, next) = (util::me(p), util::npes(p), util::next(p));
    let mut r = Report::default();
    let values = |pe: usize| vec![pe as u32 * 10 + 1; L];
    let t = p.alloc_from(&values(me))?;
    let inbox = p.alloc::<u32>(L)?;
    p.barrier_all()?;
    for pe in 0..n {
        match t.peer(pe)? {
            Some(v) => r.check(check_eq(
                &format!("PE {pe}'s values through its peer view"),
                &v.to_vec()?,
                &values(pe),
            )),
            None => r.ensure(false, || {
                format!("no peer view of PE {pe} (one NVLink node: every PE is mapped)")
            }),
        }
    }
    if let Some(mut v) = inbox.peer(next)? {
        v.copy_from(&values(me))?;
        // The same memory through cudarc: the view is a DevicePtr.
        let via_cudarc = p.stream().clone_dtoh(&v)?;
        r.check(check_eq(
            "peer view read by cudarc",
            &via_cudarc,
            &values(me),
        ));
    }
    r.expect_err("peer of a PE past the last", t.peer(n), &["does not exist"]);
    util::settle(p)?;
    r.check(check_eq(
        "inbox written by the previous PE through its peer view",
        &inbox.to_vec()?,
        &values(util::prev(p)),
    ));
    r.finish()
}

/// The multicast view: absent with a reason when NVLink multicast is off (the test machines set
/// `NVSHMEM_DISABLE_NVLS=1`), an address otherwise.
fn multicast(p: &Pgas) -> CaseResult {
    let mut r = Report::default();
    let t = p.alloc::<f32>(L)?;
    let nvls_off = std::env::var("NVSHMEM_DISABLE_NVLS").is_ok_and(|v| v.trim() == "1");
    match t.multicast(Team::WORLD) {
        Ok(mc) => {
            r.ensure(!nvls_off, || {
                "a multicast view although NVSHMEM_DISABLE_NVLS=1".to_string()
            });
            r.ensure(mc.as_device_ptr() != 0 && mc.len() == L, || {
                format!("multicast view {:#x} of {}", mc.as_device_ptr(), mc.len())
            });
        }
        Err(Error::Unavailable { reason, .. }) => {
            let needle = if nvls_off {
                "NVSHMEM_DISABLE_NVLS=1"
            } else {
                "NVLink SHARP"
            };
            r.ensure(reason.contains(needle), || {
                format!("multicast unavailable, but the reason does not name {needle:?}: {reason}")
            });
        }
        Err(e) => r.ensure(false, || format!("multicast: unexpected error {e}")),
    }
    p.barrier_all()?;
    r.finish()
}

/// A CUDA VMM buffer made by `vmm_alloc`, registered as symmetric memory: its first `L` words
/// are put into the next PE's second `L`, then it is unregistered (dropped).
fn register_vmm(p: &Pgas) -> CaseResult {
    let me = util::me(p) as u32;
    let mut r = Report::default();
    let static_heap = std::env::var("NVSHMEM_DISABLE_CUDA_VMM").is_ok_and(|v| v.trim() == "1");
    let buf = p.vmm_alloc(1)?;
    r.ensure(buf.size() >= 1 << 21, || {
        format!(
            "vmm_alloc(1) gave {} bytes, less than a granule",
            buf.size()
        )
    });
    let registered = p.register_symmetric::<u32>(buf);
    if static_heap {
        r.expect_err(
            "registration with a static heap",
            registered,
            &["NVSHMEM_DISABLE_CUDA_VMM"],
        );
        p.barrier_all()?;
        return r.finish();
    }
    let mut t = registered?;
    let words = |pe: u32| (0..L as u32).map(|i| pe * 1000 + i).collect::<Vec<_>>();
    t.view_mut(0..L)?.copy_from(&words(me))?;
    t.view_mut(L..2 * L)?.fill(u32::MAX)?;
    p.barrier_all()?;
    p.put(&t.view(L..2 * L)?, &t.view(0..L)?, util::next(p))?;
    util::settle(p)?;
    r.check(check_eq(
        "registered buffer: words put by the previous PE",
        &t.view(L..2 * L)?.to_vec()?,
        &words(util::prev(p) as u32),
    ));
    drop(t);
    p.barrier_all()?;
    r.finish()
}

/// `put_nbi` / `get_nbi` + `quiet`, `put_signal` + `signal_wait_until`, `signal_op`,
/// `put_signal_nbi`, `fence`, `signal_fetch`, and their misuse.
fn rma_signals(p: &Pgas) -> CaseResult {
    let (me, n, next, prev) = (util::me(p), util::npes(p), util::next(p), util::prev(p));
    let mut r = Report::default();
    let vals = |pe: usize| vec![pe as i64 * 3 + 1; L];
    let src = p.alloc_from(&vals(me))?;
    let put_dst = p.alloc::<i64>(L)?;
    let get_dst = p.alloc::<i64>(L)?;
    let sig_dst = p.alloc::<i64>(L)?;
    let sig = p.alloc::<u64>(2)?;
    p.barrier_all()?;

    p.put_nbi(&put_dst, &src, next)?;
    p.get_nbi(&get_dst, &src, next)?;
    p.quiet()?;
    p.barrier_all()?;
    r.check(check_eq(
        "put_nbi from the previous PE",
        &put_dst.to_vec()?,
        &vals(prev),
    ));
    r.check(check_eq(
        "get_nbi from the next PE",
        &get_dst.to_vec()?,
        &vals(next),
    ));

    p.put_signal(&sig_dst, &src, &sig, 0, 1, SignalOp::Set, next)?;
    r.check(
        p.signal_wait_until(&sig, 0, Cmp::Eq, 1, WAIT)
            .map_err(Into::into),
    );
    r.check(check_eq("put_signal data", &sig_dst.to_vec()?, &vals(prev)));
    p.barrier_all()?;

    p.signal_op(&sig, 0, 5, SignalOp::Add, next)?;
    p.fence()?;
    p.put_signal_nbi(&sig_dst, &src, &sig, 1, 7, SignalOp::Set, next)?;
    p.quiet()?;
    r.check(
        p.signal_wait_until(&sig, 1, Cmp::Ge, 7, WAIT)
            .map_err(Into::into),
    );
    p.barrier_all()?;
    r.ensure(
        p.signal_fetch(&sig, 0)? == 6 && p.signal_fetch(&sig, 1)? == 7,
        || {
            format!(
                "signals after Set 1, Add 5 and Set 7: {:?}, expected [6, 7]",
                sig.to_vec()
            )
        },
    );

    let short = p.alloc::<i64>(L / 2)?;
    r.expect_err(
        "put to a PE past the last",
        p.put(&put_dst, &src, n),
        &["does not exist"],
    );
    r.expect_err(
        "put_nbi of two lengths",
        p.put_nbi(&short, &src, next),
        &["length mismatch"],
    );
    r.expect_err(
        "signal word past the end",
        p.signal_op(&sig, 2, 1, SignalOp::Set, next),
        &["out of bounds"],
    );
    r.expect_err(
        "a wait that nobody satisfies",
        p.signal_wait_until(&sig, 0, Cmp::Eq, 99, Duration::from_millis(200)),
        &["did not become", "gave up"],
    );
    // The timed-out wait still blocks the pgas stream until the word holds 99, so anything
    // queued behind it would wait too: release it from a second stream (the word's cudarc events
    // were never recorded, so cudarc adds no wait on the blocked stream).
    let side = p.cuda().new_stream()?;
    let mut sig = sig;
    side.memcpy_htod(&[99u64], &mut sig.view_mut(0..1)?.cuda_view_mut())?;
    side.synchronize()?;
    r.check(
        p.signal_wait_until(&sig, 0, Cmp::Eq, 99, WAIT)
            .map_err(Into::into),
    );
    util::settle(p)?;
    r.finish()
}

/// Every integer AMO against PE 0's counters and each PE's neighbour.
fn atomics_integer(p: &Pgas) -> CaseResult {
    let (me, n, next, prev) = (util::me(p), util::npes(p), util::next(p), util::prev(p));
    let mut r = Report::default();
    let counters = p.alloc::<i64>(4)?;
    let olds = p.alloc::<i64>(n)?;
    let cas = p.alloc::<u32>(2)?;
    let mine = p.alloc::<u64>(3)?;
    p.barrier_all()?;

    let old = p.atomic_fetch_add(&counters, 0, 1, 0)?;
    p.atomic_set(&olds, me, old, 0)?;
    p.atomic_add(&counters, 1, me as i64 + 1, 0)?;
    p.atomic_inc(&counters, 2, 0)?;
    p.atomic_or(&counters, 3, 1 << me, 0)?;
    let won = p.atomic_compare_swap(&cas, 0, 0, me as u32 + 1, 0)? == 0;
    if won {
        p.atomic_add(&cas, 1, 1, 0)?;
    }
    p.atomic_set(&mine, 0, 0xF0F0, me)?;
    p.atomic_set(&mine, 1, 100, me)?;
    p.barrier_all()?;

    let n64 = n as i64;
    let got: Vec<i64> = (0..4)
        .map(|i| p.atomic_fetch(&counters, i, 0))
        .collect::<Result<_>>()?;
    r.check(check_eq(
        "PE 0's counters after fetch_add, add, inc and or from every PE",
        &got,
        &[n64, n64 * (n64 + 1) / 2, n64, (1i64 << n) - 1],
    ));
    let olds_got: Vec<i64> = (0..n)
        .map(|i| p.atomic_fetch(&olds, i, 0))
        .collect::<Result<_>>()?;
    r.check(check_eq(
        "the values fetch_add returned, one per PE",
        &util::sorted(&olds_got),
        &(0..n64).collect::<Vec<_>>(),
    ));
    let (winner, wins) = (p.atomic_fetch(&cas, 0, 0)?, p.atomic_fetch(&cas, 1, 0)?);
    r.ensure(wins == 1 && (1..=n as u32).contains(&winner), || {
        format!("compare_swap: {wins} winners, value {winner}; expected 1 winner, value 1..={n}")
    });

    // On the next PE: and, xor, swap, fetch_inc, fetch_or, fetch_and, fetch_xor, in turn.
    let f_and = p.atomic_fetch_and(&mine, 0, 0xFF00, next)?;
    p.barrier_all()?;
    let f_xor = p.atomic_fetch_xor(&mine, 0, 0x0F00, next)?;
    p.barrier_all()?;
    p.atomic_and(&mine, 1, 0x7F, next)?;
    p.barrier_all()?;
    p.atomic_xor(&mine, 1, 0x01, next)?;
    p.barrier_all()?;
    let f_inc = p.atomic_fetch_inc(&mine, 1, next)?;
    p.barrier_all()?;
    let f_or = p.atomic_fetch_or(&mine, 2, 0b101, next)?;
    p.barrier_all()?;
    let swapped = p.atomic_swap(&mine, 2, 42, next)?;
    p.barrier_all()?;
    r.check(check_eq(
        "fetch_and, fetch_xor, fetch_inc, fetch_or, swap returns",
        &[f_and, f_xor, f_inc, f_or, swapped],
        &[0xF0F0, 0xF000, 100 & 0x7F ^ 1, 0, 0b101],
    ));
    let after: Vec<u64> = (0..3)
        .map(|i| p.atomic_fetch(&mine, i, me))
        .collect::<Result<_>>()?;
    r.check(check_eq(
        &format!("this PE's words after PE {prev}'s operations"),
        &after,
        &[0xF000 ^ 0x0F00, (100 & 0x7F ^ 1) + 1, 42],
    ));

    r.expect_err(
        "AMO past the end",
        p.atomic_fetch(&counters, 4, 0),
        &["out of bounds"],
    );
    r.expect_err(
        "AMO on a PE past the last",
        p.atomic_inc(&counters, 0, n),
        &["does not exist"],
    );
    p.barrier_all()?;
    r.finish()
}

/// The floating-point AMOs NVSHMEM has on the host: set, fetch, swap.
fn atomics_float(p: &Pgas) -> CaseResult {
    let (me, next, prev) = (util::me(p), util::next(p), util::prev(p));
    let mut r = Report::default();
    let d = p.alloc::<f64>(1)?;
    let f = p.alloc::<f32>(1)?;
    p.barrier_all()?;
    p.atomic_set(&d, 0, me as f64 + 0.25, next)?;
    p.atomic_set(&f, 0, me as f32 + 0.5, next)?;
    p.barrier_all()?;
    r.check(check_eq(
        "f64 set by the previous PE",
        &[p.atomic_fetch(&d, 0, me)?],
        &[prev as f64 + 0.25],
    ));
    let old = p.atomic_swap(&f, 0, -1.5, me)?;
    r.check(check_eq(
        "f32 swap: old value, then new",
        &[old, p.atomic_fetch(&f, 0, me)?],
        &[prev as f32 + 0.5, -1.5],
    ));
    // NVSHMEM's own double swap returned 0xBFD0000000000000 as a number for -0.25 (issue 23).
    let old = p.atomic_swap(&d, 0, -0.25, me)?;
    let again = p.atomic_swap(&d, 0, 3.5, me)?;
    r.check(check_eq(
        "f64 swap: old values, then the last",
        &[old, again, p.atomic_fetch(&d, 0, me)?],
        &[prev as f64 + 0.25, -0.25, 3.5],
    ));
    p.barrier_all()?;
    r.finish()
}

/// `split_2d` with rows of 2 PEs (1 on one PE): each PE's row and column teams have the
/// expected numbering, `translate_pe` maps back to the world, barriers over both, config, and
/// destroy; plus the misuse of each.
fn teams_2d(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let mut r = Report::default();
    let xrange = n.min(2);
    let (row, col) =
        Team::WORLD.split_2d(p, xrange, &TeamConfig::default(), &TeamConfig::default())?;
    let (rank_in_row, rank_in_col) = (me % xrange, me / xrange);
    let row_size = xrange.min(n - rank_in_col * xrange);
    let col_size = (n - rank_in_row).div_ceil(xrange);
    let (row_pe, row_n) = (row.my_pe(p)?, row.n_pes(p)?);
    r.ensure(row_pe == Some(rank_in_row) && row_n == row_size, || {
        format!("row team: PE {row_pe:?} of {row_n}, expected {rank_in_row} of {row_size}")
    });
    let (col_pe, col_n) = (col.my_pe(p)?, col.n_pes(p)?);
    r.ensure(col_pe == Some(rank_in_col) && col_n == col_size, || {
        format!("column team: PE {col_pe:?} of {col_n}, expected {rank_in_col} of {col_size}")
    });
    match row.translate_pe(p, 0, Team::WORLD) {
        Ok(w) => r.ensure(w == Some(rank_in_col * xrange), || {
            format!(
                "row PE 0 in the world: {w:?}, expected {}",
                rank_in_col * xrange
            )
        }),
        Err(e) => r.ensure(false, || format!("translate_pe: {e}")),
    }
    r.expect_err(
        "translate_pe of a PE past the row",
        row.translate_pe(p, row_size, Team::WORLD),
        &["does not exist"],
    );
    r.check(row.config(p).map(drop).map_err(Into::into));
    row.barrier(p)?;
    col.barrier(p)?;
    p.barrier_all()?;
    row.destroy(p)?;
    col.destroy(p)?;
    r.expect_err(
        "split_2d with rows of 0",
        Team::WORLD.split_2d(p, 0, &TeamConfig::default(), &TeamConfig::default()),
        &["xrange 0"],
    );
    r.expect_err(
        "destroying the world team",
        Team::WORLD.destroy(p),
        &["predefined"],
    );
    p.barrier_all()?;
    r.finish()
}

/// Symmetric tensors as cudarc buffers: copies to and from `CudaSlice`, `CudaView`s of tensors
/// and views, cudarc's own copies taking a tensor, and a tensor made from a slice.
fn cudarc_interop(p: &Pgas) -> CaseResult {
    let me = util::me(p) as f32;
    let mut r = Report::default();
    let stream = p.stream().clone();
    let vals: Vec<f32> = (0..L).map(|i| me * 100.0 + i as f32).collect();
    let mut t = p.alloc_from(&vals)?;

    let copy = t.to_cuda_slice()?;
    r.check(check_eq("to_cuda_slice", &stream.clone_dtoh(&copy)?, &vals));
    let view_vals = stream.clone_dtoh(&t.view(2..6)?.cuda_view())?;
    r.check(check_eq("cuda_view of view(2..6)", &view_vals, &vals[2..6]));

    let twice: Vec<f32> = vals.iter().map(|v| v * 2.0).collect();
    let slice = stream.clone_htod(&twice)?;
    t.copy_from_device(&slice)?;
    r.check(check_eq("copy_from_device", &t.to_vec()?, &twice));

    let mut out = stream.alloc_zeros::<f32>(L)?;
    stream.memcpy_dtod(&t, &mut out)?;
    stream.synchronize()?;
    r.check(check_eq(
        "cudarc memcpy_dtod from the tensor",
        &stream.clone_dtoh(&out)?,
        &twice,
    ));
    stream.memcpy_htod(&vals, &mut t)?;
    stream.synchronize()?;
    r.check(check_eq(
        "cudarc memcpy_htod into the tensor",
        &t.to_vec()?,
        &vals,
    ));
    stream.memcpy_htod(&vals[..4], &mut t.view_mut(8..12)?.cuda_view_mut())?;
    stream.synchronize()?;
    r.check(check_eq(
        "cuda_view_mut of view_mut(8..12)",
        &t.view(8..12)?.to_vec()?,
        &vals[..4],
    ));

    let from_slice = p.alloc_from_device(&slice)?;
    r.check(check_eq("alloc_from_device", &from_slice.to_vec()?, &twice));
    let short = stream.alloc_zeros::<f32>(L - 1)?;
    r.expect_err(
        "copy_from_device of another length",
        t.copy_from_device(&short),
        &["length mismatch"],
    );
    p.barrier_all()?;
    r.finish()
}

/// DLPack: a `[2, L]` tensor exported (metadata checked), imported back as symmetric memory
/// (row 0 put into the next PE's row 1 through it), and the imports that must be refused.
fn dlpack(p: &Pgas) -> CaseResult {
    use pgas::dlpark::ffi::{DLDataType, DLDevice, DLDeviceType};
    let (me, next, prev) = (util::me(p), util::next(p), util::prev(p));
    let mut r = Report::default();
    let rows = |pe: usize| {
        (0..2 * L)
            .map(|i| (pe * 1000 + i) as f32)
            .collect::<Vec<_>>()
    };
    let mut t = p.alloc_shaped::<f32>(&[2, L])?;
    t.copy_from(&rows(me))?;
    let dl = t.into_dlpack()?;
    {
        let v = dl.validate()?;
        r.ensure(v.shape() == [2, L as i64], || {
            format!("DLPack shape {:?}", v.shape())
        });
        r.ensure(v.strides() == Some(&[L as i64, 1][..]), || {
            format!("DLPack strides {:?}", v.strides())
        });
        r.ensure(v.dtype() == DLDataType::F32, || {
            format!("DLPack dtype {:?}", v.dtype())
        });
        let dev = v.device();
        r.ensure(
            dev.device_type == DLDeviceType::CUDA && dev.device_id == p.device_ordinal() as i32,
            || {
                format!(
                    "DLPack device {dev:?}, expected CUDA {}",
                    p.device_ordinal()
                )
            },
        );
    }
    let back = p.from_dlpack::<f32>(dl)?;
    r.ensure(back.shape() == [2, L], || {
        format!("imported shape {:?}", back.shape())
    });
    r.check(check_eq("imported data", &back.to_vec()?, &rows(me)));
    p.barrier_all()?;
    p.put(&back.sub(&[1])?, &back.sub(&[0])?, next)?;
    util::settle(p)?;
    r.check(check_eq(
        "row 1 put through the imported tensor by the previous PE",
        &back.sub(&[1])?.to_vec()?,
        &rows(prev)[..L],
    ));
    drop(back);

    let other = p.alloc::<f32>(L)?.into_dlpack()?;
    r.expect_err(
        "importing f32 data as i32",
        p.from_dlpack::<i32>(other),
        &["dtype", "matching element type"],
    );
    // Ordinary device memory (a cudarc slice) is not symmetric.
    let slice = p.stream().alloc_zeros::<f32>(L)?;
    let ptr = {
        use pgas::cudarc::driver::DevicePtr;
        let (ptr, _sync) = slice.device_ptr(p.stream());
        ptr
    };
    let mut init = pgas::dlpark::metadata::Dynamic::new(vec![L as i64], vec![1i64])
        .initialize(Box::new(slice))?;
    init.set_device(DLDevice::cuda(p.device_ordinal() as i32))
        .set_dtype(DLDataType::F32)
        .set_data(ptr as *mut std::ffi::c_void);
    // SAFETY: the descriptor names the slice it owns.
    let foreign = unsafe { init.finish() };
    r.expect_err(
        "importing ordinary device memory",
        p.from_dlpack::<f32>(foreign),
        &["not inside NVSHMEM's symmetric heap"],
    );
    p.barrier_all()?;
    r.finish()
}
