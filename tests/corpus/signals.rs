//! Signalled puts, signal operations, point-to-point waits and ordering.
use pgas::prelude::*;

#[pgas_kernel]
fn signalled_puts(dst: &mut SymTensor<f64>, src: &CudaSlice<f64>, sig: &mut SymTensor<u64>, pe: i32) {
    let n = dst.len() / 6;
    put_signal(&mut dst[0..n], &src[0..n], &mut sig[0], 1, SignalOp::Set, pe);
    put_signal_nbi(&mut dst[n..2 * n], &src[n..2 * n], &mut sig[1], 1, SignalOp::Add, pe);
    put_signal_warp(&mut dst[2 * n..3 * n], &src[2 * n..3 * n], &mut sig[2], 2, SignalOp::Set, pe);
    put_signal_block(&mut dst[3 * n..4 * n], &src[3 * n..4 * n], &mut sig[3], 3, SignalOp::Add, pe);
    put_signal_nbi_warp(&mut dst[4 * n..5 * n], &src[4 * n..5 * n], &mut sig[4], 4, SignalOp::Set, pe);
    put_signal_nbi_block(&mut dst[5 * n..], &src[5 * n..], &mut sig[5], 5, SignalOp::Add, pe);
    fence();
    quiet();
}

#[pgas_kernel]
fn signal_ops(sig: &mut SymTensor<u64>, flags: &SymTensor<i32>, out: &mut CudaSlice<u64>) {
    let next = (my_pe() + 1) % n_pes();
    signal_op(&mut sig[0], 7, SignalOp::Set, next);
    signal_op(&mut sig[1], 1, SignalOp::Add, next);
    let seen = signal_wait_until(&sig[0], Cmp::Ge, 7);
    let now = signal_fetch(&sig[1]);
    wait_until(&flags[0], Cmp::Ne, 0);
    let ready = test(&flags[1], Cmp::Gt, 10);
    if ready || test(&flags[2], Cmp::Le, -1) || test(&flags[3], Cmp::Lt, 5) || test(&flags[4], Cmp::Eq, 1) {
        out[0] = seen + now;
    }
}

#[pgas_kernel]
fn wait_types(a: &SymTensor<i16>, b: &SymTensor<u16>, c: &SymTensor<u32>, d: &SymTensor<i64>, e: &SymTensor<usize>, f: &SymTensor<isize>, g: &SymTensor<u64>) {
    wait_until(&a[0], Cmp::Eq, 1);
    wait_until(&b[0], Cmp::Eq, 1);
    wait_until(&c[0], Cmp::Eq, 1);
    wait_until(&d[0], Cmp::Eq, 1);
    wait_until(&e[0], Cmp::Eq, 1);
    wait_until(&f[0], Cmp::Eq, 1);
    wait_until(&g[0], Cmp::Ge, 1);
}
