//! NVSHMEM4Py parity (issue 24): the host calls on a stream of the program's (`*_on`,
//! `signal_wait_until_on_stream`), reduce-scatter, the host collectives on every element type,
//! the predefined teams (`NODE`, `SHARED`, `SAME_MYPE_NODE`), `sync_all`, device barriers and
//! collectives over a split team, and the refusal of a stream of another GPU. Every case runs on
//! any number of PEs (one included); each wait has its partner on every PE.

use std::fmt::Debug;

use crate::runner::{case, Case};
use crate::util::{self, check_eq, CaseResult};
use pgas::cudarc::driver::CudaStream;
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("host_streams/rma_signals_on_stream", rma_on_stream),
    case("host_collectives/every_type", |p| every_type(p, false)),
    case("host_streams/collectives_every_type_on_stream", |p| {
        every_type(p, true)
    }),
    case("host_streams/reduce_scatter_ops", reduce_scatter_ops),
    case("teams/node_shared_same_mype_node", predefined_teams),
    case("teams/sync_all_after_quiet", sync_all),
    case("teams/peer_views_match_team_shared", peers_and_shared),
    case("teams/split_team_device_collectives", split_team_device),
    case("misuse/host_call_on_stream_of_another_gpu", foreign_stream),
    case("multicast/multimem_and_host_write", multimem),
    case("teams/team_init_unique_id", team_init_all),
    case("misuse/team_init_inconsistent", team_init_misuse),
    // Last: registrations map memory into NVSHMEM's heap (the newest calls, see main.rs).
    case("external/register_foreign_vmm", register_foreign),
    case("misuse/register_not_vmm_or_sizes_differ", register_misuse),
    // Some PEs outside every team: refused before NVSHMEM (see the case).
    case("teams/team_init_even_pes", team_init_evens),
];

pub const KERNELS: &[&KernelSpec] = &[&split_team_coll::SPEC];

/// Elements per PE.
const L: usize = 48;

/// A stream of this context other than the pgas stream.
fn own_stream(p: &Pgas) -> Result<std::sync::Arc<CudaStream>, Box<dyn std::error::Error>> {
    Ok(p.cuda().new_stream()?)
}

/// Every RMA, signal and ordering call in its `_on` form on a stream of the case's: a put with
/// signal to the next PE, waited for on the stream (not the host) by the next PE; `put_on`,
/// `put_nbi_on`, `get_on`, `get_nbi_on`; `signal_op_on` waited for on the stream; `quiet_on`,
/// `barrier_all_on`, `sync_all_on`, `Team::barrier_on` / `sync_on`.
fn rma_on_stream(p: &Pgas) -> CaseResult {
    let (me, next, prev) = (util::me(p), util::next(p), util::prev(p));
    let s = own_stream(p)?;
    let vals = |pe: usize, k: u32| {
        (0..L as u32)
            .map(|i| pe as u32 * 1000 + k * 100 + i)
            .collect::<Vec<_>>()
    };
    let src = p.alloc_from(&vals(me, 0))?;
    let src2 = p.alloc_from(&vals(me, 1))?;
    let (a, b, c) = (p.alloc::<u32>(L)?, p.alloc::<u32>(L)?, p.alloc::<u32>(L)?);
    let (g, gn) = (p.alloc::<u32>(L)?, p.alloc::<u32>(L)?);
    let sig = p.alloc::<u64>(2)?;
    p.barrier_all()?;
    p.put_signal_on(&s, &a, &src, &sig, 0, 1, SignalOp::Set, next)?;
    p.signal_wait_until_on_stream(&s, &sig, 0, Cmp::Eq, 1)?;
    // Work after the wait on the same stream sees the signal's data.
    p.put_nbi_on(&s, &b, &src2, next)?;
    p.put_signal_nbi_on(&s, &c, &src, &sig, 1, 3, SignalOp::Add, next)?;
    p.signal_op_on(&s, &sig, 1, 4, SignalOp::Add, next)?;
    p.signal_wait_until_on_stream(&s, &sig, 1, Cmp::Ge, 7)?;
    p.get_on(&s, &g, &src, next)?;
    p.get_nbi_on(&s, &gn, &src2, prev)?;
    p.quiet_on(&s)?;
    p.barrier_all_on(&s)?;
    Team::WORLD.barrier_on(p, &s)?;
    Team::WORLD.sync_on(p, &s)?;
    p.sync_all_on(&s)?;
    s.synchronize()?;
    p.barrier_all()?;
    check_eq(
        "put_signal_on from the previous PE",
        &a.to_vec()?,
        &vals(prev, 0),
    )?;
    check_eq(
        "put_nbi_on from the previous PE",
        &b.to_vec()?,
        &vals(prev, 1),
    )?;
    check_eq(
        "put_signal_nbi_on from the previous PE",
        &c.to_vec()?,
        &vals(prev, 0),
    )?;
    check_eq("get_on of the next PE", &g.to_vec()?, &vals(next, 0))?;
    check_eq(
        "get_nbi_on of the previous PE",
        &gn.to_vec()?,
        &vals(prev, 1),
    )?;
    check_eq(
        "signal words",
        &[p.signal_fetch(&sig, 0)?, p.signal_fetch(&sig, 1)?],
        &[1, 7],
    )
}

/// A small number as each element type (exact in all twelve: below 128, and bf16's 8 bits of
/// mantissa hold every integer to 256).
trait Elem: pgas::CollectiveElem + Copy + PartialEq + Debug {
    fn of(v: u8) -> Self;
}

macro_rules! elem_int {
    ($($t:ty),*) => {$(impl Elem for $t { fn of(v: u8) -> Self { v as $t } })*};
}
elem_int!(i8, i16, i32, i64, u8, u16, u32, u64);
impl Elem for f32 {
    fn of(v: u8) -> Self {
        v.into()
    }
}
impl Elem for f64 {
    fn of(v: u8) -> Self {
        v.into()
    }
}
impl Elem for f16 {
    fn of(v: u8) -> Self {
        f16::from_f32(v.into())
    }
}
impl Elem for bf16 {
    fn of(v: u8) -> Self {
        bf16::from_f32(v.into())
    }
}

/// broadcast, fcollect, alltoall and reduce-scatter (Sum) of `T` over WORLD, on the pgas stream
/// (`on_stream` false: the plain calls) or on a stream of the case's (the `_on` calls).
fn one_type<T: Elem>(p: &Pgas, on_stream: bool) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let ty = std::any::type_name::<T>();
    let s = own_stream(p)?;
    // Values below 128 for up to 8 PEs; the reduce-scatter sums n of them below 16.
    let v = |x: usize| T::of((x % 100) as u8);
    let root = n - 1;
    let bsrc = p.alloc_from(&(0..L).map(|i| v(me * 10 + i)).collect::<Vec<_>>())?;
    let bdst = p.alloc::<T>(L)?;
    let fsrc = p.alloc_from(&(0..L).map(|i| v(me * 7 + i)).collect::<Vec<_>>())?;
    let fdst = p.alloc::<T>(L * n)?;
    let block = |from: usize, to: usize, i: usize| v(from * 11 + to * 3 + i);
    let asrc = p.alloc_from(
        &(0..n)
            .flat_map(|j| (0..L).map(move |i| block(me, j, i)))
            .collect::<Vec<_>>(),
    )?;
    let adst = p.alloc::<T>(L * n)?;
    let rval = |pe: usize, j: usize, i: usize| ((pe + j + i) % 16) as u8;
    let rsrc = p.alloc_from(
        &(0..n)
            .flat_map(|j| (0..L).map(move |i| T::of(rval(me, j, i))))
            .collect::<Vec<_>>(),
    )?;
    let rdst = p.alloc::<T>(L)?;
    p.barrier_all()?;
    if on_stream {
        p.broadcast_on(&s, Team::WORLD, &bdst, &bsrc, root)?;
        p.fcollect_on(&s, Team::WORLD, &fdst, &fsrc)?;
        p.alltoall_on(&s, Team::WORLD, &adst, &asrc)?;
        p.reduce_scatter_on(&s, Team::WORLD, ReduceOp::Sum, &rdst, &rsrc)?;
        s.synchronize()?;
    } else {
        p.broadcast(Team::WORLD, &bdst, &bsrc, root)?;
        p.fcollect(Team::WORLD, &fdst, &fsrc)?;
        p.alltoall(Team::WORLD, &adst, &asrc)?;
        p.reduce_scatter(Team::WORLD, ReduceOp::Sum, &rdst, &rsrc)?;
    }
    util::settle(p)?;
    let want_b: Vec<T> = (0..L).map(|i| v(root * 10 + i)).collect();
    check_eq(&format!("broadcast {ty}"), &bdst.to_vec()?, &want_b)?;
    let want_f: Vec<T> = (0..n)
        .flat_map(|pe| (0..L).map(move |i| v(pe * 7 + i)))
        .collect();
    check_eq(&format!("fcollect {ty}"), &fdst.to_vec()?, &want_f)?;
    let want_a: Vec<T> = (0..n)
        .flat_map(|from| (0..L).map(move |i| block(from, me, i)))
        .collect();
    check_eq(&format!("alltoall {ty}"), &adst.to_vec()?, &want_a)?;
    let want_r: Vec<T> = (0..L)
        .map(|i| T::of((0..n).map(|pe| rval(pe, me, i)).sum()))
        .collect();
    check_eq(
        &format!("reduce_scatter Sum {ty}"),
        &rdst.to_vec()?,
        &want_r,
    )
}

fn every_type(p: &Pgas, on_stream: bool) -> CaseResult {
    // Every type runs (each has its collective calls on every PE) before any error returns.
    let results = [
        one_type::<f32>(p, on_stream),
        one_type::<f64>(p, on_stream),
        one_type::<f16>(p, on_stream),
        one_type::<bf16>(p, on_stream),
        one_type::<i8>(p, on_stream),
        one_type::<i16>(p, on_stream),
        one_type::<i32>(p, on_stream),
        one_type::<i64>(p, on_stream),
        one_type::<u8>(p, on_stream),
        one_type::<u16>(p, on_stream),
        one_type::<u32>(p, on_stream),
        one_type::<u64>(p, on_stream),
    ];
    let errs: Vec<String> = results
        .into_iter()
        .filter_map(|r| r.err().map(|e| e.to_string()))
        .collect();
    util::ensure(errs.is_empty(), || errs.join("; "))
}

/// reduce-scatter with Max, Min and Xor (i32) and Prod (f64), on a stream of the case's, and
/// its shape misuse.
fn reduce_scatter_ops(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let s = own_stream(p)?;
    let ival = |pe: usize, j: usize, i: usize| ((pe * 5 + j * 3 + i) % 13) as i32 - 6;
    let isrc = p.alloc_from(
        &(0..n)
            .flat_map(|j| (0..L).map(move |i| ival(me, j, i)))
            .collect::<Vec<_>>(),
    )?;
    let fsrc = p.alloc_from(
        &(0..n)
            .flat_map(|j| (0..L).map(move |i| ((me + j + i) % 3) as f64 + 0.5))
            .collect::<Vec<_>>(),
    )?;
    let mut errs = Vec::new();
    type Fold = fn(i32, i32) -> i32;
    for (op, f) in [
        (ReduceOp::Max, i32::max as Fold),
        (ReduceOp::Min, i32::min as Fold),
        (ReduceOp::Xor, (|a, b| a ^ b) as Fold),
    ] {
        let d = p.alloc::<i32>(L)?;
        p.barrier_all()?;
        p.reduce_scatter_on(&s, Team::WORLD, op, &d, &isrc)?;
        s.synchronize()?;
        util::settle(p)?;
        let want: Vec<i32> = (0..L)
            .map(|i| (1..n).fold(ival(0, me, i), |a, pe| f(a, ival(pe, me, i))))
            .collect();
        if let Err(e) = check_eq(&format!("reduce_scatter {op:?} i32"), &d.to_vec()?, &want) {
            errs.push(e.to_string());
        }
    }
    let d = p.alloc::<f64>(L)?;
    p.barrier_all()?;
    p.reduce_scatter_on(&s, Team::WORLD, ReduceOp::Prod, &d, &fsrc)?;
    s.synchronize()?;
    util::settle(p)?;
    let want: Vec<f64> = (0..L)
        .map(|i| (0..n).map(|pe| ((pe + me + i) % 3) as f64 + 0.5).product())
        .collect();
    if let Err(e) = check_eq("reduce_scatter Prod f64", &d.to_vec()?, &want) {
        errs.push(e.to_string());
    }
    // Shape and operator misuse: refused before NVSHMEM sees them, alike on every PE (on one
    // PE the shape fits, and the same buffer twice is refused as in place).
    match p.reduce_scatter(Team::WORLD, ReduceOp::Sum, &d, &d) {
        Err(e) if n > 1 && e.to_string().contains("destination length x team size") => {}
        Err(e) if n == 1 && e.to_string().contains("in place") => {}
        other => errs.push(format!("reduce_scatter with src as long as dst: {other:?}")),
    }
    match p.reduce_scatter(Team::WORLD, ReduceOp::Xor, &d, &fsrc) {
        Err(e) if e.to_string().contains("integer type") => {}
        other => errs.push(format!("reduce_scatter Xor on f64: {other:?}")),
    }
    util::settle(p)?;
    util::ensure(errs.is_empty(), || errs.join("; "))
}

/// One predefined team: its members (in WORLD numbers, through translate_pe), this PE's place
/// in it, a reduce and an fcollect over it against those members, its barrier and sync (host
/// and on a stream).
fn team_check(p: &Pgas, team: Team) -> CaseResult {
    let me = util::me(p);
    let s = own_stream(p)?;
    let tn = team.n_pes(p)?;
    let members: Vec<usize> = (0..tn)
        .map(|k| {
            team.translate_pe(p, k, Team::WORLD)?
                .ok_or(pgas::Error::InvalidPe { pe: k, n_pes: tn })
        })
        .collect::<pgas::Result<_>>()?;
    let mine = team.my_pe(p)?;
    util::ensure(mine.is_some_and(|k| members.get(k) == Some(&me)), || {
        format!("{team}: this PE {me} is {mine:?} of members {members:?}")
    })?;
    let src = p.alloc_from(&[me as i64 + 1; 4])?;
    let red = p.alloc::<i64>(4)?;
    let all = p.alloc::<i64>(4 * tn)?;
    team.barrier(p)?;
    p.reduce(team, ReduceOp::Sum, &red, &src)?;
    // Collectives over one team must not run on two streams at once (they share the team's
    // synchronization words), so the pgas stream's reduction finishes before the next starts.
    p.stream().synchronize()?;
    p.fcollect_on(&s, team, &all, &src)?;
    team.sync_on(p, &s)?;
    s.synchronize()?;
    team.sync(p)?;
    util::settle(p)?;
    let sum: i64 = members.iter().map(|&w| w as i64 + 1).sum();
    check_eq(
        &format!("reduce Sum over {team}"),
        &red.to_vec()?,
        &[sum; 4],
    )?;
    let want: Vec<i64> = members.iter().flat_map(|&w| [w as i64 + 1; 4]).collect();
    check_eq(&format!("fcollect over {team}"), &all.to_vec()?, &want)
}

/// NODE and SHARED hold every PE on one node (the test machines); SAME_MYPE_NODE one PE per
/// node. Each is checked against its own membership, so the case holds on several nodes too.
fn predefined_teams(p: &Pgas) -> CaseResult {
    let n = util::npes(p);
    let results = [
        team_check(p, Team::NODE),
        team_check(p, Team::SHARED),
        team_check(p, Team::SAME_MYPE_NODE),
    ];
    let mut errs: Vec<String> = results
        .into_iter()
        .filter_map(|r| r.err().map(|e| e.to_string()))
        .collect();
    let (node, same) = (Team::NODE.n_pes(p)?, Team::SAME_MYPE_NODE.n_pes(p)?);
    if node * same != n {
        errs.push(format!("NODE has {node} PEs and SAME_MYPE_NODE {same}: their product should be the {n} PEs of the job"));
    }
    match Team::NODE.destroy(p) {
        Err(e) if e.to_string().contains("predefined") => {}
        other => errs.push(format!("destroying Team::NODE: {other:?}")),
    }
    util::ensure(errs.is_empty(), || errs.join("; "))
}

/// `sync_all` orders what `quiet` completed: each PE puts to the next, quiets, syncs all; the
/// data is then there.
fn sync_all(p: &Pgas) -> CaseResult {
    let (me, next, prev) = (util::me(p), util::next(p), util::prev(p));
    let src = p.alloc_from(&[me as u32 + 10; L])?;
    let dst = p.alloc::<u32>(L)?;
    p.barrier_all()?;
    p.put(&dst, &src, next)?;
    p.quiet()?;
    p.sync_all()?;
    check_eq(
        "after quiet + sync_all",
        &dst.to_vec()?,
        &[prev as u32 + 10; L],
    )
}

/// Device barriers and collectives over a team split off WORLD.
#[pgas_kernel]
fn split_team_coll(
    team: Team, ag: &mut SymTensor<i64>, ag_src: &SymTensor<i64>, red: &mut SymTensor<i64>,
    red_src: &SymTensor<i64>,
) {
    barrier_block(team);
    all_gather_block(team, ag, ag_src);
    reduce_block(team, red, red_src, ReduceOp::Sum);
    team_sync_block(team);
    barrier_block(team);
}

/// The even PEs (PE 0 alone on one PE) run a kernel of team barriers, an all-gather and a
/// reduction over their team; the odd PEs launch nothing and must keep their buffers.
fn split_team_device(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let evens = n.div_ceil(2);
    let team = Team::WORLD.split_strided(p, 0, 2, evens)?;
    let src = p.alloc_from(&(0..L).map(|i| (me * 1000 + i) as i64).collect::<Vec<_>>())?;
    let mut ag = p.alloc_from(&vec![-1i64; L * evens])?;
    let mut red = p.alloc_from(&vec![-1i64; L])?;
    p.barrier_all()?;
    let launched = match team {
        Some(t) => {
            let r = split_team_coll::launch(
                p,
                LaunchConfig::blocks(1, 128),
                t,
                &mut ag,
                &src,
                &mut red,
                &src,
            );
            p.stream().synchronize()?;
            t.destroy(p)?;
            r
        }
        None if me % 2 == 1 => Ok(()),
        None => return Err(format!("even PE {me} is not in the even team").into()),
    };
    util::settle(p)?;
    launched?;
    let (want_ag, want_red): (Vec<i64>, Vec<i64>) = if me % 2 == 0 {
        (
            (0..n)
                .step_by(2)
                .flat_map(|pe| (0..L).map(move |i| (pe * 1000 + i) as i64))
                .collect(),
            (0..L)
                .map(|i| (0..n).step_by(2).map(|pe| (pe * 1000 + i) as i64).sum())
                .collect(),
        )
    } else {
        (vec![-1; L * evens], vec![-1; L])
    };
    check_eq(
        "all_gather_block over the even PEs",
        &ag.to_vec()?,
        &want_ag,
    )?;
    check_eq(
        "reduce_block Sum over the even PEs",
        &red.to_vec()?,
        &want_red,
    )
}

/// A stream of another GPU's context is refused by every `_on` call with the fix, before
/// NVSHMEM sees it. Needs a second visible GPU; with one, the case says so and checks the pgas
/// stream is accepted.
fn foreign_stream(p: &Pgas) -> CaseResult {
    let t = p.alloc::<u32>(L)?;
    let sig = p.alloc::<u64>(1)?;
    p.barrier_all()?;
    let count = pgas::gpu_count()?;
    if count < 2 {
        println!("gpu_suite[pe {}]: misuse/host_call_on_stream_of_another_gpu: one GPU visible, the refusal is not exercised", util::me(p));
        p.put_on(p.stream(), &t, &t, util::me(p))?;
        return Ok(());
    }
    let gpu = (p.device_ordinal() + 1) % count;
    let ctx = pgas::cudarc::driver::CudaContext::new(gpu)?;
    let s = ctx.new_stream()?;
    p.cuda().bind_to_thread()?;
    let me = util::me(p);
    let mut errs = Vec::new();
    let mut expect = |what: &str, r: pgas::Result<()>| match r {
        Err(e) if e.to_string().contains("pgas.cuda().new_stream()") => {}
        other => errs.push(format!("{what} on GPU {gpu}'s stream: {other:?}")),
    };
    expect("put_on", p.put_on(&s, &t, &t, me));
    expect(
        "signal_wait_until_on_stream",
        p.signal_wait_until_on_stream(&s, &sig, 0, Cmp::Eq, 0),
    );
    expect("barrier_all_on", p.barrier_all_on(&s));
    expect(
        "fcollect_on",
        p.fcollect_on(&s, Team::SAME_MYPE_NODE, &t, &t),
    );
    expect("Team::sync_on", Team::WORLD.sync_on(p, &s));
    util::ensure(errs.is_empty(), || errs.join("; "))
}

/// Whether this run has NVSHMEM's static heap, where no buffer can be registered.
fn static_heap() -> bool {
    std::env::var("NVSHMEM_DISABLE_CUDA_VMM").is_ok_and(|v| v.trim() == "1")
}

/// VMM memory registered by address, as another library's buffer would be (the owner goes in
/// as the keep-alive): RMA between PEs through it, then unregistered by the drop.
fn register_foreign(p: &Pgas) -> CaseResult {
    let me = util::me(p) as u32;
    let buf = p.vmm_alloc(1)?;
    let (ptr, size) = (buf.device_ptr(), buf.size());
    // SAFETY: `buf` maps `size` bytes at `ptr` and is the keep-alive, so it outlives the tensor.
    let registered = unsafe { p.register_external::<u32>(ptr, size, buf) };
    if static_heap() {
        return match registered {
            Err(e) if e.to_string().contains("NVSHMEM_DISABLE_CUDA_VMM") => Ok(()),
            other => Err(format!(
                "registration with a static heap: {:?}",
                other.map(|t| t.len())
            )
            .into()),
        };
    }
    let mut t = registered?;
    util::ensure(t.len() == size / 4, || {
        format!("{} elements for {size} bytes", t.len())
    })?;
    let words = |pe: u32| (0..L as u32).map(|i| pe * 1000 + i + 7).collect::<Vec<_>>();
    t.view_mut(0..L)?.copy_from(&words(me))?;
    t.view_mut(L..2 * L)?.fill(0)?;
    p.barrier_all()?;
    p.put(&t.view(L..2 * L)?, &t.view(0..L)?, util::next(p))?;
    util::settle(p)?;
    let got = t.view(L..2 * L)?.to_vec()?;
    drop(t);
    p.barrier_all()?;
    check_eq(
        "foreign VMM buffer: words put by the previous PE",
        &got,
        &words(util::prev(p) as u32),
    )
}

/// Expects an `Err` whose message holds `needle`.
fn expect_err<T>(errs: &mut Vec<String>, what: &str, r: pgas::Result<T>, needle: &str) {
    match r {
        Err(e) if e.to_string().contains(needle) => {}
        Err(e) => errs.push(format!(
            "{what}: the error does not mention {needle:?}: {e}"
        )),
        Ok(_) => errs.push(format!("{what}: expected an error, got Ok")),
    }
}

/// Registration refused on every PE, never a hang: memory of `cudaMalloc` (cudarc's
/// `alloc_zeros`) everywhere, a pointer into the middle of a VMM allocation everywhere; with
/// several PEs, `cudaMalloc` memory on PE 0 only (the others are told PE 0 refused), and a
/// larger buffer on PE 0 than elsewhere.
fn register_misuse(p: &Pgas) -> CaseResult {
    use pgas::cudarc::driver::DevicePtr;
    let (me, n) = (util::me(p), util::npes(p));
    if static_heap() {
        println!("gpu_suite[pe {me}]: misuse/register_not_vmm_or_sizes_differ: static heap, not exercised");
        return Ok(());
    }
    let g = p.vmm_alloc(1)?.size();
    let mut errs = Vec::new();
    let plain = p.stream().alloc_zeros::<u8>(g)?;
    let ptr = plain.device_ptr(p.stream()).0;
    // SAFETY: refused before NVSHMEM sees it (the case checks that); `plain` is the keep-alive.
    let r = unsafe { p.register_external::<u8>(ptr, g, plain) };
    expect_err(
        &mut errs,
        "cudaMalloc memory on every PE",
        r,
        "not CUDA VMM memory",
    );
    // The second granule of a two-granule VMM allocation: NVSHMEM would map the first.
    let two = p.vmm_alloc(2 * g)?;
    let inside = two.device_ptr() + g as u64;
    // SAFETY: refused before NVSHMEM sees it; `two` is the keep-alive.
    let r = unsafe { p.register_external::<u8>(inside, g, two) };
    expect_err(
        &mut errs,
        "a pointer inside a VMM allocation",
        r,
        "into its VMM allocation",
    );
    if n > 1 {
        let r = if me == 0 {
            let plain = p.stream().alloc_zeros::<u8>(g)?;
            let ptr = plain.device_ptr(p.stream()).0;
            // SAFETY: as above.
            unsafe { p.register_external::<u8>(ptr, g, plain) }
        } else {
            p.register_symmetric::<u8>(p.vmm_alloc(g)?)
        };
        let needle = if me == 0 {
            "not CUDA VMM memory"
        } else {
            "PE(s) [0] could not register"
        };
        expect_err(&mut errs, "cudaMalloc memory on PE 0 only", r, needle);
        let mine = p.vmm_alloc(if me == 0 { 2 * g } else { g })?;
        let r = p.register_symmetric::<u8>(mine);
        expect_err(&mut errs, "a larger buffer on PE 0", r, "the sizes differ");
    }
    p.barrier_all()?;
    util::ensure(errs.is_empty(), || errs.join("; "))
}

/// A team id made on `root` and broadcast to every PE (through a host broadcast).
fn shared_team_id(p: &Pgas, root: usize) -> Result<pgas::TeamUniqueId, Box<dyn std::error::Error>> {
    let mine = if util::me(p) == root {
        pgas::TeamUniqueId::new(p)?.to_u64()
    } else {
        0
    };
    let src = p.alloc_from(&[mine])?;
    let dst = p.alloc::<u64>(1)?;
    p.broadcast(Team::WORLD, &dst, &src, root)?;
    util::settle(p)?;
    Ok(pgas::TeamUniqueId::from_u64(dst.to_vec()?[0]))
}

/// Checks a team made by team_init whose member `k` is world PE `world(k)`: sizes, numbers,
/// translation, a reduction over it; then destroys it.
fn check_init_team(p: &Pgas, t: Team, size: usize, world: impl Fn(usize) -> usize) -> CaseResult {
    let me = util::me(p);
    let mut errs = Vec::new();
    if t.n_pes(p)? != size {
        errs.push(format!("team of {} PEs, expected {size}", t.n_pes(p)?));
    }
    let mine = t.my_pe(p)?;
    if mine.map(&world) != Some(me) {
        errs.push(format!("this PE {me} is {mine:?} in the team"));
    }
    for k in 0..size {
        let w = t.translate_pe(p, k, Team::WORLD)?;
        if w != Some(world(k)) {
            errs.push(format!(
                "team PE {k} translates to {w:?}, expected {}",
                world(k)
            ));
        }
    }
    let src = p.alloc_from(&[me as u64 + 1; 8])?;
    let dst = p.alloc::<u64>(8)?;
    t.barrier(p)?;
    let r = p.reduce(t, ReduceOp::Sum, &dst, &src);
    p.stream().synchronize()?;
    t.sync(p)?;
    t.destroy(p)?;
    r?;
    let sum: u64 = (0..size).map(|k| world(k) as u64 + 1).sum();
    if let Err(e) = check_eq("reduce Sum over the team", &dst.to_vec()?, &[sum; 8]) {
        errs.push(e.to_string());
    }
    util::ensure(errs.is_empty(), || errs.join("; "))
}

/// Every PE joins a team made from PE 0's id, numbered backwards (PE `me` is member `n-1-me`),
/// with a config (two contexts).
fn team_init_all(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let id = shared_team_id(p, 0)?;
    let member = pgas::TeamMember {
        id,
        index: n - 1 - me,
        n_pes: n,
    };
    let config = TeamConfig {
        num_contexts: Some(2),
    };
    let t = p
        .team_init(Some(member), &config)?
        .ok_or("team_init returned no team on a member")?;
    let got = t.config(p)?;
    let checked = check_init_team(p, t, n, |k| n - 1 - k);
    util::settle(p)?;
    checked?;
    util::ensure(got.num_contexts == Some(2), || {
        format!("the team's config is {got:?}")
    })
}

/// What the PEs pass disagrees: refused on every PE, before NVSHMEM, with the PEs and the fix.
fn team_init_misuse(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let id = shared_team_id(p, n - 1)?;
    let mut errs = Vec::new();
    let cfg = TeamConfig::default();
    let m = |index, n_pes| Some(pgas::TeamMember { id, index, n_pes });
    // One PE more than join.
    expect_err(
        &mut errs,
        "a size above the members",
        p.team_init(m(me, n + 1), &cfg),
        "joined it",
    );
    // Every member claims number 0.
    if n > 1 {
        expect_err(
            &mut errs,
            "the same index everywhere",
            p.team_init(m(0, n), &cfg),
            "its own index",
        );
        expect_err(
            &mut errs,
            "sizes that differ",
            p.team_init(m(me, n + me % 2), &cfg),
            "different sizes",
        );
    }
    // An id that is not one (NVSHMEM's invalid id).
    let bad = Some(pgas::TeamMember {
        id: pgas::TeamUniqueId::from_u64(u64::MAX),
        index: me,
        n_pes: n,
    });
    expect_err(
        &mut errs,
        "the invalid id",
        p.team_init(bad, &cfg),
        "invalid team id",
    );
    util::settle(p)?;
    util::ensure(errs.is_empty(), || errs.join("; "))
}

/// The even PEs offer a team id while the odd PEs pass `None`: one PE makes its team; on more,
/// every PE gets the refusal (the odd PEs would leave NVSHMEM's team_init waiting).
fn team_init_evens(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let evens = n.div_ceil(2);
    let id = shared_team_id(p, 0)?;
    let member = (me % 2 == 0).then_some(pgas::TeamMember {
        id,
        index: me / 2,
        n_pes: evens,
    });
    let t = p.team_init(member, &TeamConfig::default());
    util::settle(p)?;
    if n == 1 {
        // The one PE is the whole team.
        return check_init_team(p, t?.ok_or("PE 0 got no team")?, evens, |k| 2 * k);
    }
    // The odd PEs join no team: refused on every PE, before NVSHMEM (whose team_init did not
    // return on the members then; docs/runtime.md).
    let e = t
        .err()
        .ok_or("team_init with the odd PEs outside every team was accepted")?;
    util::ensure(e.to_string().contains("join no team"), || {
        format!("unclear refusal: {e}")
    })
}

/// Device access through WORLD's multicast address, where NVLink SHARP gives one, by the kernel
/// language's multicast rows (`kernels/multimem.rs`): the last PE stores through it (every PE's
/// copy changes), every PE adds its number + 1 through it, every PE reads the sum over all
/// copies with `multimem_ld_add`, the integer min / max / sum and a 64-bit store and add, and PE
/// 0 writes every copy from the host (`MulticastView::copy_from`). Where multicast is off
/// (`NVSHMEM_DISABLE_NVLS=1` on the test machines) it says it is skipped; `host_api/multicast_view`
/// checks the reason given there, and CI compiles the kernels (`tests/nvrtc/corpus.rs`).
fn multimem(p: &Pgas) -> CaseResult {
    use crate::kernels::multimem::{multimem_add, multimem_int, multimem_store, multimem_sum};
    let (me, n) = (util::me(p), util::npes(p));
    let mut t = p.alloc::<f32>(L)?;
    // Every PE's answer, so that all take the same branch (multicast is per team, but a PE
    // could differ in what NVSHMEM mapped for it).
    let here = t.multicast(Team::WORLD).is_ok();
    let mine = p.alloc_from(&[u32::from(here)])?;
    let all = p.alloc::<u32>(n)?;
    p.fcollect(Team::WORLD, &all, &mine)?;
    util::settle(p)?;
    let all = all.to_vec()?;
    if all.contains(&0) {
        println!(
            "gpu_suite[pe {me}]: multicast/multimem_and_host_write: skipped, no multicast \
             address for Team::WORLD on PE(s) {:?} (NVSHMEM_DISABLE_NVLS={})",
            (0..n).filter(|&pe| all[pe] == 0).collect::<Vec<_>>(),
            std::env::var("NVSHMEM_DISABLE_NVLS").unwrap_or_default()
        );
        return Ok(());
    }
    let s = p.stream();
    let cfg = LaunchConfig::blocks(1, L as u32);
    let (base, writer) = (100.0f32, n - 1);
    let mut ok = s.alloc_zeros::<u32>(1)?;
    if me == writer {
        multimem_store::launch(p, cfg, &mut t, &mut ok, Team::WORLD, base)?;
    }
    util::settle(p)?;
    let stored: Vec<f32> = (0..L).map(|i| base + i as f32).collect();
    let mut errs = Vec::new();
    if me == writer && s.clone_dtoh(&ok)? != [1] {
        errs.push("has_multicast was false in the kernel, true on the host".to_string());
    }
    if let Err(e) = check_eq(
        "this PE's copy after the multicast store",
        &t.to_vec()?,
        &stored,
    ) {
        errs.push(e.to_string());
    }
    multimem_add::launch(p, cfg, &mut t, Team::WORLD, me as f32 + 1.0)?;
    util::settle(p)?;
    let added = (n * (n + 1) / 2) as f32;
    let after: Vec<f32> = stored.iter().map(|v| v + added).collect();
    if let Err(e) = check_eq(
        "this PE's copy after every PE's multicast add",
        &t.to_vec()?,
        &after,
    ) {
        errs.push(e.to_string());
    }
    let mut sum = s.alloc_zeros::<f32>(L)?;
    multimem_sum::launch(p, cfg, &t, &mut sum, Team::WORLD)?;
    s.synchronize()?;
    let sums: Vec<f32> = after.iter().map(|v| v * n as f32).collect();
    if let Err(e) = check_eq(
        "multimem_ld_add over the copies",
        &s.clone_dtoh(&sum)?,
        &sums,
    ) {
        errs.push(e.to_string());
    }
    // Integers: PE `q` holds `(i + 1) * (q + 1)` minus 3 (some negative).
    let x = p.alloc_from(
        &(0..L)
            .map(|i| ((i + 1) * (me + 1)) as i32 - 3)
            .collect::<Vec<_>>(),
    )?;
    let mut y = p.alloc::<u64>(L)?;
    let mut out = s.alloc_zeros::<i32>(3 * L)?;
    util::settle(p)?;
    multimem_int::launch(p, cfg, &x, &mut y, &mut out, Team::WORLD, 7)?;
    util::settle(p)?;
    let want: Vec<i32> = (0..L)
        .flat_map(|i| {
            let v = |q: usize| ((i + 1) * (q + 1)) as i32 - 3;
            let all: Vec<i32> = (0..n).map(v).collect();
            let (lo, hi) = (*all.iter().min().unwrap(), *all.iter().max().unwrap());
            [lo, hi, all.iter().sum()]
        })
        .collect();
    if let Err(e) = check_eq(
        "multimem_ld_min / max / add on i32",
        &s.clone_dtoh(&out)?,
        &want,
    ) {
        errs.push(e.to_string());
    }
    if let Err(e) = check_eq(
        "PE 0's u64 multimem_st then multimem_red_add",
        &y.to_vec()?,
        &[14u64; L],
    ) {
        errs.push(e.to_string());
    }
    // The host write through the view: the first PE writes new values into every copy.
    let written: Vec<f32> = (0..L).map(|i| -(i as f32) - 0.5).collect();
    if me == 0 {
        t.multicast(Team::WORLD)?.copy_from(&written)?;
    }
    util::settle(p)?;
    if let Err(e) = check_eq(
        "this PE's copy after PE 0's MulticastView::copy_from",
        &t.to_vec()?,
        &written,
    ) {
        errs.push(e.to_string());
    }
    util::ensure(errs.is_empty(), || errs.join("; "))
}

/// A peer view exists exactly for the PEs of `Team::SHARED` (NVSHMEM's team of the PEs this one
/// can load from and store to), and every PE, in the NVLink domain or outside it, is reached by
/// RMA: a put to each PE lands. On one node (the test machines) every PE is in SHARED; across
/// nodes the PEs outside the domain take the `None` branch.
fn peers_and_shared(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    let t = p.alloc_from(&[me as u32 + 1; 4])?;
    let inbox = p.alloc::<u32>(4 * n)?;
    p.barrier_all()?;
    let mut errs = Vec::new();
    let mut outside = 0;
    for pe in 0..n {
        let shared = Team::WORLD.translate_pe(p, pe, Team::SHARED)?.is_some();
        match (t.peer(pe)?, shared) {
            (Some(v), true) => {
                if let Err(e) = check_eq(
                    &format!("PE {pe}'s values through its peer view"),
                    &v.to_vec()?,
                    &[pe as u32 + 1; 4],
                ) {
                    errs.push(e.to_string());
                }
            }
            (None, false) => outside += 1,
            (view, _) => errs.push(format!(
                "PE {pe}: peer view {} but {} Team::SHARED",
                if view.is_some() { "exists" } else { "missing" },
                if shared { "in" } else { "not in" }
            )),
        }
        // My slot of every PE's inbox, over RMA whatever the transport.
        p.put(&inbox.view(4 * me..4 * me + 4)?, &t, pe)?;
    }
    util::settle(p)?;
    let want: Vec<u32> = (0..n).flat_map(|pe| [pe as u32 + 1; 4]).collect();
    if let Err(e) = check_eq(
        "every PE's put into this PE's inbox",
        &inbox.to_vec()?,
        &want,
    ) {
        errs.push(e.to_string());
    }
    if outside > 0 {
        println!("gpu_suite[pe {me}]: teams/peer_views_match_team_shared: {outside} PE(s) outside the NVLink domain, reached by RMA only");
    }
    util::ensure(errs.is_empty(), || errs.join("; "))
}
