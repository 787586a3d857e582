//! Signalled puts at every scope, `signal_op`/`signal_wait_until`/`signal_fetch` with every
//! `SignalOp` and `Cmp`, point-to-point `wait_until`/`test`, and the ordering calls `fence` and
//! `quiet`. Every PE signals the next one and waits for the previous one, so each wait is
//! satisfied by another PE (by itself with one PE). Each receiver copies the data it was
//! signalled about inside the kernel, right after its wait: that copy proves the data had
//! arrived when the signal did, which a check after the kernel could not.

use crate::runner::{case, Case};
use crate::util::{self, check_eq, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("signals/put_signal_thread", ps_thread),
    case("signals/put_signal_warp", ps_warp),
    case("signals/put_signal_block", ps_block),
    case("signals/signal_op_wait_fetch", signal_ops_case),
    case("signals/wait_until_test_fence_quiet", p2p_case),
];

/// The kernels the cases launch checked, compiled ahead of the cases (see `runner::prewarm`).
pub const KERNELS: &[&KernelSpec] = &[
    &put_signal_thread::SPEC,
    &put_signal_warp_kernel::SPEC,
    &put_signal_block_kernel::SPEC,
    &signal_ops::SPEC,
    &p2p::SPEC,
];

const L: usize = 4096;

#[pgas_kernel]
fn put_signal_thread(
    d: &mut SymTensor<u32>, d_nbi: &mut SymTensor<u32>, seen: &mut SymTensor<u32>,
    src: &SymTensor<u32>, sig: &mut SymTensor<u64>, got: &mut SymTensor<u64>, pe: i32,
) {
    put_signal(d, src, &mut sig[0], 1, SignalOp::Set, pe);
    put_signal_nbi(d_nbi, src, &mut sig[1], 5, SignalOp::Add, pe);
    got[0] = signal_wait_until(&sig[0], Cmp::Eq, 1);
    got[1] = signal_wait_until(&sig[1], Cmp::Ge, 5);
    for i in 0..d.len() {
        seen[i] = d[i] ^ d_nbi[i];
    }
}

#[pgas_kernel]
fn put_signal_warp_kernel(
    d: &mut SymTensor<u32>, d_nbi: &mut SymTensor<u32>, seen: &mut SymTensor<u32>,
    src: &SymTensor<u32>, sig: &mut SymTensor<u64>, got: &mut SymTensor<u64>, pe: i32,
) {
    put_signal_warp(d, src, &mut sig[0], 1, SignalOp::Set, pe);
    put_signal_nbi_warp(d_nbi, src, &mut sig[1], 5, SignalOp::Add, pe);
    let a = signal_wait_until(&sig[0], Cmp::Eq, 1);
    let b = signal_wait_until(&sig[1], Cmp::Ge, 5);
    if lane_id() == 0 {
        got[0] = a;
        got[1] = b;
    }
    let mut i = lane_id() as usize;
    while i < d.len() {
        seen[i] = d[i] ^ d_nbi[i];
        i += 32;
    }
}

#[pgas_kernel]
fn put_signal_block_kernel(
    d: &mut SymTensor<u32>, d_nbi: &mut SymTensor<u32>, seen: &mut SymTensor<u32>,
    src: &SymTensor<u32>, sig: &mut SymTensor<u64>, got: &mut SymTensor<u64>, pe: i32,
) {
    put_signal_block(d, src, &mut sig[0], 1, SignalOp::Set, pe);
    put_signal_nbi_block(d_nbi, src, &mut sig[1], 5, SignalOp::Add, pe);
    let t = thread_idx_x() as usize;
    if t == 0 {
        got[0] = signal_wait_until(&sig[0], Cmp::Eq, 1);
        got[1] = signal_wait_until(&sig[1], Cmp::Ge, 5);
    }
    sync_threads();
    for i in (t..d.len()).step_by(256) {
        seen[i] = d[i] ^ d_nbi[i];
    }
}

struct PutSignal {
    d: SymTensor<u32>,
    d_nbi: SymTensor<u32>,
    seen: SymTensor<u32>,
    src: SymTensor<u32>,
    sig: SymTensor<u64>,
    got: SymTensor<u64>,
}

fn src_of(pe: usize) -> Vec<u32> {
    (0..L as u32).map(|i| (pe as u32 + 1) << 24 | i).collect()
}

fn ps_setup(p: &Pgas) -> Result<PutSignal, Box<dyn std::error::Error>> {
    let mut d = p.alloc::<u32>(L)?;
    let mut d_nbi = p.alloc::<u32>(L)?;
    let mut seen = p.alloc::<u32>(L)?;
    let mut sig = p.alloc::<u64>(2)?;
    let mut got = p.alloc::<u64>(2)?;
    d.fill(0xAAAA_AAAA)?;
    d_nbi.fill(0x5555_5555)?;
    seen.fill(0)?;
    sig.fill(0)?;
    got.fill(0)?;
    let src = p.alloc_from(&src_of(util::me(p)))?;
    // No PE may signal another before that one has zeroed its signals.
    p.barrier_all()?;
    Ok(PutSignal {
        d,
        d_nbi,
        seen,
        src,
        sig,
        got,
    })
}

fn ps_check(p: &Pgas, s: &PutSignal, scope: &str) -> CaseResult {
    let want = src_of(util::prev(p));
    check_eq(&format!("put_signal{scope} data"), &s.d.to_vec()?, &want)?;
    check_eq(
        &format!("put_signal_nbi{scope} data"),
        &s.d_nbi.to_vec()?,
        &want,
    )?;
    // Both copies equal at wait time, so their xor seen right after the waits is all zero.
    check_eq(
        &format!("put_signal{scope} data visible at the signal"),
        &s.seen.to_vec()?,
        &vec![0; L],
    )?;
    check_eq(
        &format!("put_signal{scope} signals (Set 1, Add 5)"),
        &s.sig.to_vec()?,
        &[1, 5],
    )?;
    check_eq(
        &format!("signal_wait_until{scope} returns"),
        &s.got.to_vec()?,
        &[1, 5],
    )
}

fn ps_thread(p: &Pgas) -> CaseResult {
    let mut s = ps_setup(p)?;
    let pe = util::next(p) as i32;
    put_signal_thread::launch(
        p,
        LaunchConfig::blocks(1, 1),
        &mut s.d,
        &mut s.d_nbi,
        &mut s.seen,
        &s.src,
        &mut s.sig,
        &mut s.got,
        pe,
    )?;
    util::settle(p)?;
    ps_check(p, &s, "")
}

fn ps_warp(p: &Pgas) -> CaseResult {
    let mut s = ps_setup(p)?;
    let pe = util::next(p) as i32;
    put_signal_warp_kernel::launch(
        p,
        LaunchConfig::blocks(1, 32),
        &mut s.d,
        &mut s.d_nbi,
        &mut s.seen,
        &s.src,
        &mut s.sig,
        &mut s.got,
        pe,
    )?;
    util::settle(p)?;
    ps_check(p, &s, "_warp")
}

fn ps_block(p: &Pgas) -> CaseResult {
    let mut s = ps_setup(p)?;
    let pe = util::next(p) as i32;
    put_signal_block_kernel::launch(
        p,
        LaunchConfig::blocks(1, 256),
        &mut s.d,
        &mut s.d_nbi,
        &mut s.seen,
        &s.src,
        &mut s.sig,
        &mut s.got,
        pe,
    )?;
    util::settle(p)?;
    ps_check(p, &s, "_block")
}

/// `sig[0]`, `sig[1]` are signalled by the previous PE; `sig[2..6]` are preset by the host so
/// that each remaining comparison holds at once and its return value can be checked.
#[pgas_kernel]
fn signal_ops(sig: &mut SymTensor<u64>, got: &mut SymTensor<u64>, pe: i32) {
    signal_op(&mut sig[0], 7, SignalOp::Set, pe);
    signal_op(&mut sig[1], 3, SignalOp::Add, pe);
    signal_op(&mut sig[1], 4, SignalOp::Add, pe);
    got[0] = signal_wait_until(&sig[0], Cmp::Eq, 7);
    got[1] = signal_wait_until(&sig[1], Cmp::Ge, 7);
    got[2] = signal_fetch(&sig[0]);
    got[3] = signal_wait_until(&sig[2], Cmp::Ne, 0);
    got[4] = signal_wait_until(&sig[3], Cmp::Gt, 10);
    got[5] = signal_wait_until(&sig[4], Cmp::Lt, 5);
    got[6] = signal_wait_until(&sig[5], Cmp::Le, 5);
    got[7] = signal_fetch(&sig[1]);
}

fn signal_ops_case(p: &Pgas) -> CaseResult {
    let mut sig = p.alloc_from(&[0u64, 0, 9, 11, 2, 5])?;
    let mut got = p.alloc::<u64>(8)?;
    got.fill(u64::MAX)?;
    p.barrier_all()?;
    signal_ops::launch(
        p,
        LaunchConfig::blocks(1, 1),
        &mut sig,
        &mut got,
        util::next(p) as i32,
    )?;
    util::settle(p)?;
    check_eq(
        "signal_wait_until / signal_fetch results",
        &got.to_vec()?,
        &[7, 7, 7, 9, 11, 2, 5, 7],
    )?;
    check_eq(
        "signals after Set and two Adds",
        &sig.to_vec()?,
        &[7, 7, 9, 11, 2, 5],
    )
}

/// One thread. Data by `p` then `fence` then a flag: the flag's arrival implies the data's.
/// Data by `put_nbi` then `quiet` then a flag, waited for by spinning on `test`. Then `test`
/// and `wait_until` with each `Cmp` on a host-preset value (12 `test` outcomes, true and false).
#[pgas_kernel]
fn p2p(
    flag: &mut SymTensor<i32>, data: &mut SymTensor<f32>, data2: &mut SymTensor<f32>,
    src: &SymTensor<f32>, seen: &mut SymTensor<f32>, tests: &mut SymTensor<u32>, pe: i32,
) {
    let n = data.len();
    for i in 0..n {
        p(&mut data[i], src[i], pe);
    }
    fence();
    p(&mut flag[0], 1, pe);
    put_nbi(data2, src, pe);
    quiet();
    p(&mut flag[1], 2, pe);
    wait_until(&flag[0], Cmp::Eq, 1);
    for i in 0..n {
        seen[i] = data[i];
    }
    while !test(&flag[1], Cmp::Ge, 2) {}
    for i in 0..n {
        seen[n + i] = data2[i];
    }
    tests[0] = test(&flag[2], Cmp::Eq, 5) as u32;
    tests[1] = test(&flag[2], Cmp::Eq, 4) as u32;
    tests[2] = test(&flag[2], Cmp::Ne, 4) as u32;
    tests[3] = test(&flag[2], Cmp::Ne, 5) as u32;
    tests[4] = test(&flag[2], Cmp::Gt, 4) as u32;
    tests[5] = test(&flag[2], Cmp::Gt, 5) as u32;
    tests[6] = test(&flag[2], Cmp::Ge, 5) as u32;
    tests[7] = test(&flag[2], Cmp::Ge, 6) as u32;
    tests[8] = test(&flag[2], Cmp::Lt, 6) as u32;
    tests[9] = test(&flag[2], Cmp::Lt, 5) as u32;
    tests[10] = test(&flag[2], Cmp::Le, 5) as u32;
    tests[11] = test(&flag[2], Cmp::Le, 4) as u32;
    wait_until(&flag[2], Cmp::Ne, 0);
    wait_until(&flag[2], Cmp::Gt, 4);
    wait_until(&flag[2], Cmp::Ge, 5);
    wait_until(&flag[2], Cmp::Lt, 6);
    wait_until(&flag[2], Cmp::Le, 5);
}

fn p2p_case(p: &Pgas) -> CaseResult {
    let n = 256;
    let me = util::me(p);
    let mine: Vec<f32> = (0..n).map(|i| me as f32 * 1000.0 + i as f32).collect();
    let src = p.alloc_from(&mine)?;
    let mut flag = p.alloc_from(&[0i32, 0, 5])?;
    let mut data = p.alloc::<f32>(n)?;
    let mut data2 = p.alloc::<f32>(n)?;
    let mut seen = p.alloc::<f32>(2 * n)?;
    let mut tests = p.alloc::<u32>(12)?;
    data.fill(-1.0)?;
    data2.fill(-2.0)?;
    seen.fill(f32::NAN)?;
    tests.fill(7)?;
    p.barrier_all()?;
    p2p::launch(
        p,
        LaunchConfig::blocks(1, 1),
        &mut flag,
        &mut data,
        &mut data2,
        &src,
        &mut seen,
        &mut tests,
        util::next(p) as i32,
    )?;
    util::settle(p)?;
    let prev: Vec<f32> = (0..n)
        .map(|i| util::prev(p) as f32 * 1000.0 + i as f32)
        .collect();
    let both: Vec<f32> = prev.iter().chain(prev.iter()).copied().collect();
    check_eq(
        "data seen after fence+flag, then after quiet+flag",
        &seen.to_vec()?,
        &both,
    )?;
    check_eq("flags", &flag.to_vec()?, &[1, 2, 5])?;
    let want = [1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0];
    check_eq(
        "test() with Eq Ne Gt Ge Lt Le (true, false)",
        &tests.to_vec()?,
        &want,
    )
}
