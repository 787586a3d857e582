//! The stencil kernels of [`pgas::ops::jacobi`](super): the sweep's forms as device functions,
//! the unfused step ([`jacobi_step`]) and the fused persistent kernel in each block size
//! (`fused_kernel!`).

use crate::prelude::*;

/// Computes rows `ra..rb` of the plane at `dst` from the plane at `src` (which holds the rows
/// above and below them), with every thread of the block, in the [`Sweep::Rolled`] form. A work
/// item is 4 columns (one 16-byte vector) of up to 8 rows: the thread walks down them keeping the
/// rows above, at and below in registers, so each row is loaded once per item, and loads the
/// next row before computing this one (two rows in flight). A small band takes fewer rows per
/// item, so that every thread of the block has one. Consecutive threads take consecutive columns
/// (coalesced). Columns wrap around (periodic in x); `nx` is a multiple of 4.
#[pgas_device]
fn sweep_rolled(
    field: &mut SymTensor<f32>, src: usize, dst: usize, nx: usize, ra: usize, rb: usize,
) {
    let nv = nx / 4;
    let threads = block_dim_x() as usize;
    let per_item = max(1, min(8, (rb - ra) * nv / threads));
    let items = (rb - ra + per_item - 1) / per_item * nv;
    let mut item = thread_idx_x() as usize;
    while item < items {
        let j = (item % nv) * 4;
        let r0 = ra + (item / nv) * per_item;
        let r1 = min(r0 + per_item, rb);
        let jl = if j == 0 { nx - 1 } else { j - 1 };
        let jr = if j + 4 == nx { 0 } else { j + 4 };
        let mut up = load_vec16(&field[src + (r0 - 1) * nx + j]);
        let mut mid = load_vec16(&field[src + r0 * nx + j]);
        let mut dn = load_vec16(&field[src + (r0 + 1) * nx + j]);
        let mut left = field[src + r0 * nx + jl];
        let mut right = field[src + r0 * nx + jr];
        for r in r0..r1 {
            let mut dn_next = dn;
            let mut left_next = left;
            let mut right_next = right;
            if r + 1 < r1 {
                let next = src + (r + 1) * nx;
                dn_next = load_vec16(&field[next + nx + j]);
                left_next = field[next + jl];
                right_next = field[next + jr];
            }
            let out = stencil_vec(up, mid, dn, left, right);
            store_vec16(&mut field[dst + r * nx + j], out);
            up = mid;
            mid = dn;
            dn = dn_next;
            left = left_next;
            right = right_next;
        }
        item += threads;
    }
}

/// Rows `ra..rb` of the plane at `dst` from the plane at `src`, as [`sweep_rolled`] computes
/// them, in the [`Sweep::Batched`] form, `depth` rows a batch (1 to [`MAX_DEPTH`]): a work item
/// is a 4-column strip as tall as the band divided among the block's threads allows (the whole
/// band when the block has a thread for every strip of it), walked in batches. A batch first
/// loads all its rows below and its edge columns, then computes and stores its rows: `depth`
/// 16-byte loads in flight per thread where the rolled form has one. A tall strip also reads
/// the rows above and below it (read again by the neighbouring strips, long after, so from
/// DRAM) once per band rather than once per 8 rows.
///
/// The batch loops run to [`MAX_DEPTH`] with the rows past `depth` skipped, so every index into
/// the rows held is a constant once they are unrolled and the rows stay in registers whatever
/// `depth` is (a comptime value of the kernel: the skipped rows compile away).
#[pgas_device]
fn sweep_batched(
    field: &mut SymTensor<f32>, src: usize, dst: usize, nx: usize, ra: usize, rb: usize,
    depth: usize,
) {
    let nv = nx / 4;
    let threads = block_dim_x() as usize;
    let per_item = max(1, (rb - ra) * nv / threads);
    let items = (rb - ra + per_item - 1) / per_item * nv;
    let mut item = thread_idx_x() as usize;
    // Offsets from a row's vector (wrapping differences): its edge columns and the same vector
    // in the output plane. With one running offset, few 64-bit indices stay live beside the
    // rows held, which keeps a batch of 4 within 64 registers.
    let dd = dst - src;
    while item < items {
        let j = (item % nv) * 4;
        let r0 = ra + (item / nv) * per_item;
        let n = min(per_item, rb - r0);
        let dl = if j == 0 { nx - 1 } else { j - 1 } - j;
        let dr = if j + 4 == nx { 0 } else { j + 4 } - j;
        // The batch's first row; w[k] holds the row k - 1 below it (the two rows above the
        // batch carry over from the one before).
        let mut at = src + r0 * nx + j;
        let mut w = [load_vec16(&field[at - nx]); 10];
        w[1] = load_vec16(&field[at]);
        let mut left = [0.0f32; 8];
        let mut right = [0.0f32; 8];
        let mut done = 0;
        while done < n {
            for k in 0..8 {
                // Past the item's last row the loads would leave the plane: skipped.
                if k < depth && done + k < n {
                    let row = at + k * nx;
                    w[k + 2] = load_vec16(&field[row + nx]);
                    left[k] = field[row + dl];
                    right[k] = field[row + dr];
                }
            }
            for k in 0..8 {
                if k < depth && done + k < n {
                    let out = stencil_vec(w[k], w[k + 1], w[k + 2], left[k], right[k]);
                    store_vec16(&mut field[at + k * nx + dd], out);
                }
            }
            // The batch's last row and the one below it are the next batch's rows above and
            // at its first row (a loop so that the indices are constants).
            for k in 0..8 {
                if k + 1 == depth {
                    w[0] = w[k + 1];
                    w[1] = w[k + 2];
                }
            }
            at += depth * nx;
            done += depth;
        }
        item += threads;
    }
}

/// The stencil over the four cells of row vector `mid` (columns `j..j + 4`), from the rows above
/// and below it and the cells left and right of it.
#[pgas_device]
fn stencil_vec(
    up: Vec16<f32>, mid: Vec16<f32>, dn: Vec16<f32>, left: f32, right: f32,
) -> Vec16<f32> {
    let m0 = vec16_get(mid, 0);
    let m1 = vec16_get(mid, 1);
    let m2 = vec16_get(mid, 2);
    let m3 = vec16_get(mid, 3);
    let mut o = vec16_set(
        mid,
        0,
        cell(m0, vec16_get(up, 0), vec16_get(dn, 0), left, m1),
    );
    o = vec16_set(o, 1, cell(m1, vec16_get(up, 1), vec16_get(dn, 1), m0, m2));
    o = vec16_set(o, 2, cell(m2, vec16_get(up, 2), vec16_get(dn, 2), m1, m3));
    vec16_set(
        o,
        3,
        cell(m3, vec16_get(up, 3), vec16_get(dn, 3), m2, right),
    )
}

/// The stencil at one cell: `u / 2 + ((up + down) + (left + right)) / 8`, in this order of
/// `f32` operations (the host's, [`host_jacobi`]); scaling by powers of two is exact.
#[pgas_device]
fn cell(mid: f32, up: f32, dn: f32, left: f32, right: f32) -> f32 {
    0.5 * mid + 0.125 * ((up + dn) + (left + right))
}

/// Rows `ra..rb` (none when `rb <= ra`); `depth`: the [`Sweep`] form (0: rolled, else batched
/// with `depth` rows a batch; [`Sweep::depth`]).
#[pgas_device]
fn sweep(
    field: &mut SymTensor<f32>, src: usize, dst: usize, nx: usize, ra: usize, rb: usize,
    depth: usize,
) {
    if rb > ra {
        if depth > 0 {
            sweep_batched(field, src, dst, nx, ra, rb, depth);
        } else {
            sweep_rolled(field, src, dst, nx, ra, rb);
        }
    }
}

/// One iteration over this PE's rows, plane `src` (halos in place) to plane `dst`; block `b`
/// of `nb` takes rows `1 + b * rows / nb ..`; `depth`: the [`Sweep`](super::Sweep) form ([`Sweep::depth`](super::Sweep::depth)).
#[pgas_kernel(max_threads = 1024)]
pub fn jacobi_step(
    field: &mut SymTensor<f32>, src: usize, dst: usize, nx: usize, rows: usize,
    #[comptime] depth: usize,
) {
    let b = block_idx_x() as usize;
    let nb = grid_dim_x() as usize;
    sweep(
        field,
        src,
        dst,
        nx,
        1 + b * rows / nb,
        1 + (b + 1) * rows / nb,
        depth,
    );
}

/// Sends the edge rows of the plane at `p`, each with its signal set to `value`: with `top`
/// (the first band), row 1 into halo row `up_halo` of PE `up`, signalling its `sig[1]`; with
/// `bottom` (the last band), row `rows` into halo row 0 of PE `down`, signalling its `sig[0]`.
/// Non-blocking puts of the whole block.
#[pgas_device]
fn send_edge_rows(
    field: &mut SymTensor<f32>, sig: &mut SymTensor<u64>, p: usize, nx: usize, rows: usize,
    up_halo: usize, up: i32, down: i32, value: u64, top: bool, bottom: bool,
) {
    if top {
        put_signal_nbi_block(
            &mut field[p + up_halo * nx..p + (up_halo + 1) * nx],
            &field[p + nx..p + 2 * nx],
            &mut sig[1],
            value,
            SignalOp::Set,
            up,
        );
    }
    if bottom {
        put_signal_nbi_block(
            &mut field[p..p + nx],
            &field[p + rows * nx..p + (rows + 1) * nx],
            &mut sig[0],
            value,
            SignalOp::Set,
            down,
        );
    }
}

/// Defines a fused kernel `$name` with the block bound `$threads`: iterations
/// `base .. base + iters` in one launch (see the module docs and `pgas::ops::halo`'s protocol).
/// The two fused kernels are this code under two register budgets. Every block must be
/// resident: they wait for each other. `depth`: the [`Sweep`] form. The flag of block `b` holds
/// the iterations whose band it has written (the neighbouring bands read its first and last
/// rows).
macro_rules! fused_kernel {
    ($(#[$doc:meta])* $name:ident, $threads:tt) => {
        $(#[$doc])*
        #[pgas_kernel(max_threads = $threads)]
        pub fn $name(
            field: &mut SymTensor<f32>,
            sig: &mut SymTensor<u64>,
            flags: &mut SymTensor<u64>,
            nx: usize,
            rows: usize,
            plane: usize,
            up_halo: usize,
            up: i32,
            down: i32,
            base: u64,
            iters: u32,
            #[comptime] depth: usize,
        ) {
            let b = block_idx_x() as usize;
            let nb = grid_dim_x() as usize;
            let top = b == 0;
            let bottom = b == nb - 1;
            let ra = 1 + b * rows / nb;
            let rb = 1 + (b + 1) * rows / nb;
            // The rows of the band that are not a PE edge (those go first, then out).
            let lo = if top { ra + 1 } else { ra };
            let hi = if bottom { rb - 1 } else { rb };
            let first = thread_idx_x() == 0;
            if first {
                // Earlier launches (or unfused iterations) finished `base` iterations.
                atomic_exch_local(&mut flags[b], base);
            }
            // The current plane's edge rows have not been sent yet (the protocol's rule between
            // calls).
            let p0 = (base % 2) as usize * plane;
            let first_sent = base + 1;
            send_edge_rows(
                field, sig, p0, nx, rows, up_halo, up, down, first_sent, top, bottom,
            );
            for k in 0..iters {
                let e = base + k as u64;
                let src = (e % 2) as usize * plane;
                let dst = ((e + 1) % 2) as usize * plane;
                // Wait until the rows around the band hold iteration e (and, for the neighbouring
                // bands, until they no longer read iteration e - 1, which this one overwrites).
                if first {
                    if top {
                        signal_wait_until(&sig[0], Cmp::Ge, e + 1);
                    } else {
                        wait_until(&flags[b - 1], Cmp::Ge, e);
                    }
                    if bottom {
                        signal_wait_until(&sig[1], Cmp::Ge, e + 1);
                    } else {
                        wait_until(&flags[b + 1], Cmp::Ge, e);
                    }
                    // Acquire: later loads see what the neighbours wrote before signalling.
                    threadfence();
                }
                sync_threads();
                let send = k + 1 < iters;
                if top {
                    sweep(field, src, dst, nx, 1, 2, depth);
                }
                if bottom {
                    sweep(field, src, dst, nx, rows, rows + 1, depth);
                }
                if (top || bottom) && send {
                    sync_threads();
                }
                // The edge rows just computed (iteration e + 1, so signalled with e + 2).
                let sent = e + 2;
                let send_up = top && send;
                let send_down = bottom && send;
                send_edge_rows(
                    field, sig, dst, nx, rows, up_halo, up, down, sent, send_up, send_down,
                );
                sweep(field, src, dst, nx, lo, hi, depth);
                sync_threads();
                if first {
                    // Release: the band's rows before the flag that announces them.
                    threadfence();
                    atomic_exch_local(&mut flags[b], e + 1);
                }
            }
        }
    };
}

fused_kernel!(
    /// The fused kernel in blocks of 1024 threads: at most 64 registers a thread (a 64K-register
    /// SM holds one such block).
    jacobi_fused,
    1024
);

fused_kernel!(
    /// The fused kernel in blocks of 512 threads: up to 128 registers a thread, room for a batch
    /// of 8 rows with nothing spilled (still one block an SM: see [`Fused::threads`](super::Fused::threads)).
    jacobi_fused_512,
    512
);
