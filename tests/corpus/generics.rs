//! Generic kernels and device functions (`<T: Float>`, `T::Acc`, `T::LANES`: one instance a
//! type), and a reduction chosen when the kernel is compiled (`#[comptime] op: ReduceOp`,
//! `combine`, a team collective by that reduction).
use pgas::prelude::*;

/// `x[i]` combined with `y[i]` by `op`, computed in `T::Acc`.
#[pgas_device]
fn combine_at<T: Float>(x: &SymTensor<T>, y: &SymTensor<T>, i: usize, op: ReduceOp) -> T {
    combine(op, x[i] as T::Acc, y[i] as T::Acc) as T
}

/// `dst = x op y` element by element (a 16-byte vector a thread, the tail element by element),
/// then `dst`'s first 64 elements all-reduced by `op` with the same block of every team PE.
#[pgas_kernel(max_threads = 256)]
fn combine_vectors<T: Float>(
    team: Team,
    dst: &mut SymTensor<T>,
    x: &SymTensor<T>,
    y: &SymTensor<T>,
    scratch: &mut SymTensor<u64>,
    #[comptime] op: ReduceOp,
) {
    let i = global_thread_idx() * T::LANES;
    if i + T::LANES <= dst.len() {
        let a = load_vec16(&x[i]);
        let b = load_vec16(&y[i]);
        let mut r = a;
        for j in 0..T::LANES {
            let c = combine(op, vec16_get(a, j) as T::Acc, vec16_get(b, j) as T::Acc);
            r = vec16_set(r, j, c as T);
        }
        store_vec16(&mut dst[i], r);
    } else {
        let mut k = i;
        while k < dst.len() {
            dst[k] = combine_at::<T>(x, y, k, op);
            k += 1;
        }
    }
    sync_threads();
    let n = min(64, dst.len());
    team_all_reduce_block(team, &mut dst[0..n], &x[0..n], &mut scratch[0], op);
}

/// The larger of two integers by a literal reduction, for each unsigned size.
#[pgas_kernel]
fn larger<T: Unsigned>(dst: &mut CudaSlice<T>, a: T, b: T) {
    let i = global_thread_idx();
    if i < dst.len() {
        dst[i] = combine(ReduceOp::Max, a, b) | combine(ReduceOp::Xor, a, a);
    }
}
