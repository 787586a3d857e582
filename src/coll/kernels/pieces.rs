//! The pieces the collective kernels share, each a `#[pgas_device]` function: the flag
//! protocol's handshakes (`docs/coll.md`, "Synchronization"), the arithmetic of the 16-byte data
//! path ("Data path") and the walks over it: a block's copies between shared memory and a
//! buffer (`block_copy`), the grid's copy of one view into another (`copy_run`), into every PE
//! (`spread`) and its reduction over the PEs (`reduce_run`, from `reduce_pair` and
//! `reduce_one`), each over one owner's share (`share_start`). The copies take their buffers as
//! views (`&CudaSlice`: this PE's buffer, a peer's view or shared memory), so one function
//! serves every direction. Each takes the block's and thread's place from the grid itself.

use crate::prelude::*;

/// What every collective kernel takes for its handshakes (`enter`, `leave`): the team's PEs in
/// rank order (`pes[r]`, `n` of them), this PE's rank `me`, the flags the blocks signal and wait
/// on (`sig`) and each block's count of calls (`epochs`).
#[pgas_params]
pub struct Handshake {
    pes: &SymTensor<i32>,
    sig: &mut SymTensor<u64>,
    epochs: &mut SymTensor<u64>,
    n: u32,
    me: u32,
}

/// Entry handshake of this block's next call: signal "entered call `e`" (`2e - 1`) to every
/// peer and wait for theirs; returns `e`.
#[pgas_device]
pub fn enter(hs: Handshake) -> u64 {
    let e = hs.epochs[block_idx_x() as usize] + 1;
    signal_peers(hs.sig, hs.pes, hs.n, hs.me as usize, 2 * e - 1, false, true);
    sync_threads();
    e
}

/// Leave handshake of call `e`: signal `2e` to every peer, wait for theirs, and record `e` as
/// this block's last call. `after_puts`: the call stored into peers, so a release fence goes
/// before the signal and an acquire fence after the wait.
#[pgas_device]
pub fn leave(hs: Handshake, e: u64, after_puts: bool) {
    if after_puts {
        // Release: this thread's peer stores before the block's signal.
        threadfence_system();
    }
    sync_threads();
    signal_peers(
        hs.sig,
        hs.pes,
        hs.n,
        hs.me as usize,
        2 * e,
        false,
        after_puts,
    );
    sync_threads();
    if thread_idx_x() == 0 {
        hs.epochs[block_idx_x() as usize] = e;
    }
}

/// The pushed kernels' hand-off of value `sv`: after the block barrier, the threads that
/// signal fence for the whole block (a release fence is cumulative: it orders every store the
/// barrier ordered before it), signal every rank, wait for every rank's and acquire. One fence
/// a rank instead of one a thread.
#[pgas_device]
pub fn push_signal(sig: &mut SymTensor<u64>, pes: &SymTensor<i32>, n: u32, mine: usize, sv: u64) {
    sync_threads();
    signal_peers(sig, pes, n, mine, sv, true, true);
    sync_threads();
}

/// The flag protocol's exchange of value `sv` by block `b`: thread `t < n` signals `sv` into
/// word `b n + me` of team rank `t`'s `sig` and waits until word `b n + t` of this PE's is at
/// least `sv`, rank `t`'s signal; with a system fence before the signal (`release`) and after
/// the wait (`acquire`).
#[pgas_device]
pub fn signal_peers(
    sig: &mut SymTensor<u64>, pes: &SymTensor<i32>, n: u32, me: usize, sv: u64, release: bool,
    acquire: bool,
) {
    let blk = block_idx_x() as usize;
    let t = thread_idx_x() as usize;
    let nn = n as usize;
    if t < nn {
        if release {
            threadfence_system();
        }
        signal_op(&mut sig[blk * nn + me], sv, SignalOp::Set, pes[t]);
        signal_wait_until(&sig[blk * nn + t], Cmp::Ge, sv);
        if acquire {
            threadfence_system();
        }
    }
}

/// The byte offset modulo 16 of element `i` of a buffer of `T` whose element 0 sits at byte
/// offset `b` modulo 16.
#[pgas_device]
pub fn mod16<T: Elem>(b: u32, i: usize) -> usize {
    (b as usize + i * (16 / T::LANES)) % 16
}

/// The 16-byte data path's head: of a run of `cnt` elements from element `so` of a buffer at
/// byte offset `sb` modulo 16, those before its first 16-byte boundary (all of them where it has
/// none). The path copies them one at a time, then whole vectors from the boundary, then one at
/// a time again past the last vector.
#[pgas_device]
pub fn run_head<T: Elem>(sb: u32, so: usize, cnt: usize) -> usize {
    min((16 - mod16::<T>(sb, so)) % 16 / (16 / T::LANES), cnt)
}

/// The whole 16-byte vectors past the head of that run when it pairs with element `ro` of a
/// buffer at byte offset `db` modulo 16: none unless both sit at the same offset modulo 16,
/// every element then going one at a time.
#[pgas_device]
pub fn run_vectors<T: Elem>(sb: u32, so: usize, db: u32, ro: usize, cnt: usize) -> usize {
    if mod16::<T>(sb, so) == mod16::<T>(db, ro) {
        (cnt - run_head::<T>(sb, so, cnt)) / T::LANES
    } else {
        0
    }
}

/// The element that step `q` of the data path's scalar pass takes: the `h` of the head, then
/// those from `vend`, the end of the last vector.
#[pgas_device]
pub fn scalar_at(q: usize, h: usize, vend: usize) -> usize {
    if q < h {
        q
    } else {
        vend + q - h
    }
}

/// `w` elements of `T` rounded up to whole 16-byte vectors: the stride of the windows the
/// low-latency kernels stage side by side in shared memory, so each starts on a boundary.
#[pgas_device]
pub fn whole_vectors<T: Elem>(w: usize) -> usize {
    (w + T::LANES - 1) / T::LANES * T::LANES
}

/// The threads of the grid: the stride of its loops.
#[pgas_device]
pub fn grid_threads() -> usize {
    (grid_dim_x() * block_dim_x()) as usize
}

/// Where share `j` of `total` items starts, split among `parts` owners in shares of
/// `total / parts` rounded up (so the last may be short or empty; `total` past the last):
/// share `j` is `share_start(.., j)..share_start(.., j + 1)`.
#[pgas_device]
pub fn share_start(total: usize, parts: u32, j: u32) -> usize {
    let size = (total + parts as usize - 1) / parts as usize;
    min(j as usize * size, total)
}

/// The low-latency kernels' copies between shared memory and a buffer, by the block, one vector
/// a thread: `cnt` elements from `src[so..]` into `dst[ro..]` (`sb`, `db`: the byte offsets
/// modulo 16 of the two views' element 0; 0 for the dynamic shared memory, 128-byte aligned).
/// In 16-byte vectors where both ends share their offset modulo 16. No division by a run-time
/// value: a 64-bit one is a long instruction sequence, and with one per element the copy out
/// cost more than the exchange.
#[pgas_device]
pub fn block_copy<T: Elem>(
    dst: &mut CudaSlice<T>, ro: usize, db: u32, src: &CudaSlice<T>, so: usize, sb: u32, cnt: usize,
) {
    let t = thread_idx_x() as usize;
    let bd = block_dim_x() as usize;
    let h = run_head::<T>(sb, so, cnt);
    let nv = run_vectors::<T>(sb, so, db, ro, cnt);
    let mut v = t;
    while v < nv {
        let i = h + v * T::LANES;
        store_vec16(&mut dst[ro + i], load_vec16(&src[so + i]));
        v += bd;
    }
    copy_scalars::<T>(dst, ro, src, so, h, nv, cnt, t, bd);
}

/// The data path's scalar pass over a run of `cnt` elements (head `h`, then `nv` vectors): the
/// elements the vectors leave, from `src[so..]` into `dst[ro..]` one at a time, by the threads
/// `first, first + stride, ..`.
#[pgas_device]
pub fn copy_scalars<T: Elem>(
    dst: &mut CudaSlice<T>, ro: usize, src: &CudaSlice<T>, so: usize, h: usize, nv: usize,
    cnt: usize, first: usize, stride: usize,
) {
    let vend = h + nv * T::LANES;
    let mut q = first;
    while q < cnt - nv * T::LANES {
        let i = scalar_at(q, h, vend);
        dst[ro + i] = src[so + i];
        q += stride;
    }
}

/// Where the second of a thread's two vectors in a step starts, the first being vector `v` at
/// element `i0`: vector `v + gap`, or `i0` again where that is not below `end`. Two vectors a
/// step keep two 16-byte loads in flight; past the end the second slot repeats the first (the
/// same value loaded and stored twice), so the loop needs no tail of its own.
#[pgas_device]
pub fn second_of_pair<T: Elem>(i0: usize, v: usize, gap: usize, end: usize) -> usize {
    if v + gap < end {
        i0 + gap * T::LANES
    } else {
        i0
    }
}

/// The 16-byte vectors at `i0` and `i1` of `src` reduced by `op` over every PE (this PE's, then
/// peers `me + 1, me + 2, ..`, so the results keep their bits), stored at `d0` and `d1` of:
/// `dst` on this PE (`to` 0), `dst` on every PE (1, the two-shot's stores) or the dynamic
/// shared memory (2). A round
/// takes up to three peers, every load of it issued before the first is used: a peer load is
/// an NVLink round trip, and one peer after the other paid `n - 1` of them a step.
#[pgas_device]
pub fn reduce_pair<T: Elem>(
    dst: &mut SymTensor<T>, d0: usize, d1: usize, to: u32, src: &SymTensor<T>, i0: usize,
    i1: usize, pes: &SymTensor<i32>, n: u32, me: u32, op: ReduceOp,
) {
    let nn = n as usize;
    let mut x0 = load_vec16(&src[i0]);
    let mut x1 = load_vec16(&src[i1]);
    let mut k = 1;
    while k < nn {
        let p0 = src.peer(pes[(me as usize + k) % nn]);
        let a0 = load_vec16(&p0[i0]);
        let a1 = load_vec16(&p0[i1]);
        // (A missing peer's pair repeats `a`, unused: no address is looked up.)
        let mut b0 = a0;
        let mut b1 = a1;
        if k + 1 < nn {
            let p1 = src.peer(pes[(me as usize + k + 1) % nn]);
            b0 = load_vec16(&p1[i0]);
            b1 = load_vec16(&p1[i1]);
        }
        let mut c0 = a0;
        let mut c1 = a1;
        if k + 2 < nn {
            let p2 = src.peer(pes[(me as usize + k + 2) % nn]);
            c0 = load_vec16(&p2[i0]);
            c1 = load_vec16(&p2[i1]);
        }
        for u in 0..3 {
            if k + u < nn {
                let y0 = if u == 0 {
                    a0
                } else if u == 1 {
                    b0
                } else {
                    c0
                };
                let y1 = if u == 0 {
                    a1
                } else if u == 1 {
                    b1
                } else {
                    c1
                };
                for j in 0..T::LANES {
                    let r = combine(op, vec16_get(x0, j) as T::Acc, vec16_get(y0, j) as T::Acc);
                    x0 = vec16_set(x0, j, r as T);
                    let r = combine(op, vec16_get(x1, j) as T::Acc, vec16_get(y1, j) as T::Acc);
                    x1 = vec16_set(x1, j, r as T);
                }
            }
        }
        k += 3;
    }
    if to == 2 {
        let g = dyn_shared::<T>();
        store_vec16(&mut g[d0], x0);
        store_vec16(&mut g[d1], x1);
    } else if to == 1 {
        for k in 0..nn {
            let p = dst.peer(pes[(me as usize + k) % nn]);
            store_vec16(&mut p[d0], x0);
            store_vec16(&mut p[d1], x1);
        }
    } else {
        store_vec16(&mut dst[d0], x0);
        store_vec16(&mut dst[d1], x1);
    }
}

/// Element `i` of `src` reduced by `op` over every PE, in the order of `reduce_pair`.
#[pgas_device]
pub fn reduce_one<T: Elem>(
    src: &SymTensor<T>, i: usize, pes: &SymTensor<i32>, n: u32, me: u32, op: ReduceOp,
) -> T::Acc {
    let nn = n as usize;
    let mut a = src[i] as T::Acc;
    let mut k = 1;
    while k < nn {
        let b0 = src.peer(pes[(me as usize + k) % nn])[i] as T::Acc;
        let b1 = if k + 1 < nn {
            src.peer(pes[(me as usize + k + 1) % nn])[i] as T::Acc
        } else {
            b0
        };
        let b2 = if k + 2 < nn {
            src.peer(pes[(me as usize + k + 2) % nn])[i] as T::Acc
        } else {
            b0
        };
        for u in 0..3 {
            if k + u < nn {
                let b = if u == 0 {
                    b0
                } else if u == 1 {
                    b1
                } else {
                    b2
                };
                a = combine(op, a, b);
            }
        }
        k += 3;
    }
    a
}

/// Copy of `cnt` elements from `src[so..]` to `dst[ro..]` by the grid (`sb`, `db`: the byte
/// offsets modulo 16 of the two views' element 0), either of them a peer's view: 16-byte vectors
/// from the first boundary of the source when both ends sit at the same offset modulo 16, one
/// element at a time before it, past the last vector, and throughout otherwise; two vectors a
/// thread a step.
#[pgas_device]
pub fn copy_run<T: Elem>(
    dst: &mut CudaSlice<T>, ro: usize, db: u32, src: &CudaSlice<T>, so: usize, sb: u32, cnt: usize,
) {
    let stride = grid_threads();
    let gt = global_thread_idx();
    let h = run_head::<T>(sb, so, cnt);
    let nv = run_vectors::<T>(sb, so, db, ro, cnt);
    let mut v = gt;
    while v < nv {
        let i0 = h + v * T::LANES;
        let i1 = second_of_pair::<T>(i0, v, stride, nv);
        let x0 = load_vec16(&src[so + i0]);
        let x1 = load_vec16(&src[so + i1]);
        store_vec16(&mut dst[ro + i0], x0);
        store_vec16(&mut dst[ro + i1], x1);
        v += 2 * stride;
    }
    copy_scalars::<T>(dst, ro, src, so, h, nv, cnt, gt, stride);
}

/// Element `i` of `dst` on every team rank but `skip` (`n`: none) set to `x`, this PE's first,
/// then ranks `me + 1, me + 2, ..`.
#[pgas_device]
pub fn store_everywhere<T: Elem>(
    dst: &mut SymTensor<T>, i: usize, x: T, pes: &SymTensor<i32>, n: u32, me: u32, skip: u32,
) {
    let nn = n as usize;
    for k in 0..nn {
        let r = (me as usize + k) % nn;
        if r != skip as usize {
            dst.peer(pes[r])[i] = x;
        }
    }
}

/// Share `part` of `parts` (of the vectors, then of the elements they leave) of `src` (a
/// view: this PE's buffer or a peer's, at byte offset `sb` modulo 16) stored from element `at`
/// on into `dst` (at `db`) on every team rank but `skip` (`n`: none), this PE's first; by the
/// grid, two vectors a thread a step, each loaded once for all the ranks.
#[pgas_device]
pub fn spread<T: Elem>(
    dst: &mut SymTensor<T>, at: usize, db: u32, src: &CudaSlice<T>, sb: u32, part: u32, parts: u32,
    pes: &SymTensor<i32>, n: u32, me: u32, skip: u32,
) {
    let nn = n as usize;
    let len = src.len();
    let stride = grid_threads();
    let gt = global_thread_idx();
    let h = run_head::<T>(sb, 0, len);
    let nv = run_vectors::<T>(sb, 0, db, at, len);
    let vhi = share_start(nv, parts, part + 1);
    let mut v = share_start(nv, parts, part) + gt;
    while v < vhi {
        let i0 = h + v * T::LANES;
        let i1 = second_of_pair::<T>(i0, v, stride, vhi);
        let x0 = load_vec16(&src[i0]);
        let x1 = load_vec16(&src[i1]);
        for k in 0..nn {
            let r = (me as usize + k) % nn;
            if r != skip as usize {
                let p = dst.peer(pes[r]);
                store_vec16(&mut p[at + i0], x0);
                store_vec16(&mut p[at + i1], x1);
            }
        }
        v += 2 * stride;
    }
    let ns = len - nv * T::LANES;
    let shi = share_start(ns, parts, part + 1);
    let mut q = share_start(ns, parts, part) + gt;
    while q < shi {
        let i = scalar_at(q, h, h + nv * T::LANES);
        store_everywhere::<T>(dst, at + i, src[i], pes, n, me, skip);
        q += stride;
    }
}

/// Share `part` of `parts` (of the vectors, then of the elements they leave) of the run of
/// `dst.len()` elements of `src` from element `so`, reduced by `op` over every PE into `dst`:
/// this PE's (`everywhere` false) or every PE's, this PE's first. `sb`, `db`: the byte offsets
/// modulo 16 of `src` and `dst`. By the grid, two vectors a thread a step (`reduce_pair`), so
/// that two 16-byte loads of each peer are in flight.
#[pgas_device]
pub fn reduce_run<T: Elem>(
    dst: &mut SymTensor<T>, db: u32, src: &SymTensor<T>, so: usize, sb: u32, part: u32, parts: u32,
    everywhere: bool, pes: &SymTensor<i32>, n: u32, me: u32, op: ReduceOp,
) {
    let len = dst.len();
    let stride = grid_threads();
    let gt = global_thread_idx();
    let h = run_head::<T>(sb, so, len);
    let nv = run_vectors::<T>(sb, so, db, 0, len);
    let to = if everywhere { 1 } else { 0 };
    let vhi = share_start(nv, parts, part + 1);
    let mut v = share_start(nv, parts, part) + gt;
    while v < vhi {
        let i0 = h + v * T::LANES;
        let i1 = second_of_pair::<T>(i0, v, stride, vhi);
        reduce_pair::<T>(dst, i0, i1, to, src, so + i0, so + i1, pes, n, me, op);
        v += 2 * stride;
    }
    let ns = len - nv * T::LANES;
    let shi = share_start(ns, parts, part + 1);
    let mut q = share_start(ns, parts, part) + gt;
    while q < shi {
        let i = scalar_at(q, h, h + nv * T::LANES);
        let r = reduce_one::<T>(src, so + i, pes, n, me, op) as T;
        if everywhere {
            store_everywhere::<T>(dst, i, r, pes, n, me, n);
        } else {
            dst[i] = r;
        }
        q += stride;
    }
}
