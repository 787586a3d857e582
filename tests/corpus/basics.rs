//! The language basics: the README kernel, a map, and every control-flow form.
use pgas::prelude::*;

/// The ring shift from the language spec: each PE sends its buffer to the next one.
#[pgas_kernel]
fn ring_shift(dst: &mut SymTensor<f32>, src: &SymTensor<f32>, sig: &mut SymTensor<u64>) {
    let peer = (my_pe() + 1) % n_pes();
    put_signal_block(dst, src, &mut sig[0], 1, SignalOp::Set, peer);
    signal_wait_until(&sig[0], Cmp::Eq, 1);
}

/// y = a * x + y, with an f32 literal next to f32 values.
#[pgas_kernel]
fn saxpy(x: &SymTensor<f32>, y: &mut SymTensor<f32>, a: f32) {
    let i = global_thread_idx();
    if i < x.len() && i < y.len() {
        y[i] = a * x[i] + y[i] * 2.0;
    }
}

/// Every statement and expression form of the subset.
#[pgas_kernel]
fn control_flow(out: &mut CudaSlice<i32>, data: &SymTensor<f64>, n: u32) {
    let tid = thread_idx_x();
    let mut acc: i32 = 0;
    let mut k = 0;
    let limit = n as i32;
    for i in 0..limit {
        if i % 2 == 0 {
            acc += i;
        } else if i % 3 == 0 {
            acc -= 1;
        } else {
            acc ^= i << 1;
        }
    }
    for j in (0..out.len()).step_by(4) {
        k += 1;
        if j > 64 {
            break;
        }
        if j == 8 {
            continue;
        }
    }
    while k > 0 && !(k == 100 || acc < -5) {
        k -= 1;
    }
    loop {
        acc = acc | 1;
        if acc != 0 {
            break;
        }
    }
    let sign = if acc > 0 { 1 } else { -1 };
    let scaled = if tid < 32 {
        let base = acc * 3;
        base + sign
    } else {
        acc / 2
    };
    let window = &data[0..4];
    let total = {
        let mut s = 0.0;
        for w in 0..window.len() {
            s += window[w];
        }
        s
    };
    let bits = (tid & 0xff) | 0x100u32;
    let t = total as i32 + (bits >> 2) as i32 + 7i32;
    if tid as usize >= out.len() {
        return;
    }
    out[tid as usize] = scaled + t + k;
}
