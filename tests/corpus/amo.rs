//! Every remote atomic, on the types NVSHMEM provides it for.
use pgas::prelude::*;

#[pgas_kernel]
fn amo_u64(x: &mut SymTensor<u64>, out: &mut CudaSlice<u64>) {
    let pe = (my_pe() + 1) % n_pes();
    let a = atomic_fetch(&x[0], pe);
    atomic_set(&mut x[1], a + 1, pe);
    let b = atomic_swap(&mut x[2], 5, pe);
    let c = atomic_compare_swap(&mut x[3], b, 9, pe);
    atomic_inc(&mut x[4], pe);
    let d = atomic_fetch_inc(&mut x[5], pe);
    atomic_add(&mut x[6], 3, pe);
    let e = atomic_fetch_add(&mut x[7], 4, pe);
    atomic_and(&mut x[8], 0xff, pe);
    let f = atomic_fetch_and(&mut x[9], 0xf0, pe);
    atomic_or(&mut x[10], 1, pe);
    let g = atomic_fetch_or(&mut x[11], 2, pe);
    atomic_xor(&mut x[12], 3, pe);
    let h = atomic_fetch_xor(&mut x[13], 4, pe);
    out[0] = a + b + c + d + e + f + g + h;
}

#[pgas_kernel]
fn amo_mixed(i: &mut SymTensor<i32>, f: &mut SymTensor<f32>, d: &mut SymTensor<f64>, s: &mut SymTensor<usize>, l: &mut SymTensor<i64>, u: &mut SymTensor<u32>) {
    let pe = 0;
    let old = atomic_fetch_add(&mut i[0], -1, pe);
    atomic_set(&mut f[0], 1.5, pe);
    let fv = atomic_swap(&mut f[1], 2.5, pe);
    let dv = atomic_fetch(&d[0], pe);
    let dw = atomic_swap(&mut d[2], -0.25, pe);
    atomic_set(&mut d[1], dv + dw + fv as f64, pe);
    atomic_inc(&mut s[0], pe);
    let prev = atomic_compare_swap(&mut l[0], 0, old as i64, pe);
    atomic_fetch_xor(&mut u[0], prev as u32, pe);
    atomic_and(&mut i[1], 6, pe);
}
