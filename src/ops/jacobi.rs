//! `pgas::ops::jacobi`: a 2-D Jacobi smoother with its halo exchange fused in, the production
//! form of `examples/halo_exchange.rs`. The domain is periodic in both directions (a torus); each
//! PE owns a slab of whole rows ([`Halo2d`]: two planes with a halo row above and below), and
//! one persistent kernel ([`run_fused`]) runs every iteration with no host involvement between
//! them: the blocks with the PE's edge rows compute and send them first, and blocks wait only for
//! their neighbours' flags and the halo signals, not for a grid-wide barrier (`docs/ops.md`, "The
//! protocol" and the fused kernel after it).
//!
//! The stencil is `u' = u / 2 + ((up + down) + (left + right)) / 8` in `f32`: scaling by powers
//! of two is exact, so the GPU's result equals the host's ([`host_jacobi`]) bit for bit however
//! the compiler contracts it. The same sweep is also launched once per iteration after
//! [`Halo2d::exchange_on`] ([`run_unfused`]: the unfused form, and `benches/halo.rs`'s
//! baseline). `examples/jacobi2d.rs` checks both against the host; `benches/halo.rs` times them
//! and the GPU suite (`tests/gpu_suite/halo.rs`) runs them on every PE count.

use cudarc::driver::CudaStream;

use super::halo::Halo2d;
use crate::prelude::*;
use crate::{Error, Result};

/// Computes rows `ra..rb` of the plane at `dst` from the plane at `src` (which holds the rows
/// above and below them), with every thread of the block. A work item is 4 columns (one 16-byte
/// vector) of up to 8 rows: the thread walks down them keeping the rows above, at and below in
/// registers, so each row is loaded once per item, and loads the next row before computing this
/// one (two rows in flight). A small band takes fewer rows per item, so that every thread of the
/// block has one. Consecutive threads take consecutive columns (coalesced). Columns wrap around
/// (periodic in x); `nx` is a multiple of 4.
#[pgas_device]
fn sweep(field: &mut SymTensor<f32>, src: usize, dst: usize, nx: usize, ra: usize, rb: usize) {
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
            let m0 = vec16_get(mid, 0);
            let m1 = vec16_get(mid, 1);
            let m2 = vec16_get(mid, 2);
            let m3 = vec16_get(mid, 3);
            let vert0 = vec16_get(up, 0) + vec16_get(dn, 0);
            let vert1 = vec16_get(up, 1) + vec16_get(dn, 1);
            let vert2 = vec16_get(up, 2) + vec16_get(dn, 2);
            let vert3 = vec16_get(up, 3) + vec16_get(dn, 3);
            let mut out = vec16_set(mid, 0, 0.5 * m0 + 0.125 * (vert0 + (left + m1)));
            out = vec16_set(out, 1, 0.5 * m1 + 0.125 * (vert1 + (m0 + m2)));
            out = vec16_set(out, 2, 0.5 * m2 + 0.125 * (vert2 + (m1 + m3)));
            out = vec16_set(out, 3, 0.5 * m3 + 0.125 * (vert3 + (m2 + right)));
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

/// One iteration over this PE's rows, plane `src` (halos in place) to plane `dst`; block `b`
/// of `nb` takes rows `1 + b * rows / nb ..`.
#[pgas_kernel(max_threads = 1024)]
pub fn jacobi_step(field: &mut SymTensor<f32>, src: usize, dst: usize, nx: usize, rows: usize) {
    let b = block_idx_x() as usize;
    let nb = grid_dim_x() as usize;
    sweep(
        field,
        src,
        dst,
        nx,
        1 + b * rows / nb,
        1 + (b + 1) * rows / nb,
    );
}

/// Iterations `base .. base + iters` in one launch (see the module docs and
/// `pgas::ops::halo`'s protocol). Every block must be resident: they wait for each other.
#[pgas_kernel(max_threads = 1024)]
pub fn jacobi_fused(
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
    // The current plane's edge rows have not been sent yet (the protocol's rule between calls).
    let p0 = (base % 2) as usize * plane;
    if top {
        put_signal_nbi_block(
            &mut field[p0 + up_halo * nx..p0 + (up_halo + 1) * nx],
            &field[p0 + nx..p0 + 2 * nx],
            &mut sig[1],
            base + 1,
            SignalOp::Set,
            up,
        );
    }
    if bottom {
        put_signal_nbi_block(
            &mut field[p0..p0 + nx],
            &field[p0 + rows * nx..p0 + (rows + 1) * nx],
            &mut sig[0],
            base + 1,
            SignalOp::Set,
            down,
        );
    }
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
            sweep(field, src, dst, nx, 1, 2);
            if send {
                sync_threads();
                put_signal_nbi_block(
                    &mut field[dst + up_halo * nx..dst + (up_halo + 1) * nx],
                    &field[dst + nx..dst + 2 * nx],
                    &mut sig[1],
                    e + 2,
                    SignalOp::Set,
                    up,
                );
            }
        }
        if bottom {
            sweep(field, src, dst, nx, rows, rows + 1);
            if send {
                sync_threads();
                put_signal_nbi_block(
                    &mut field[dst..dst + nx],
                    &field[dst + rows * nx..dst + (rows + 1) * nx],
                    &mut sig[0],
                    e + 2,
                    SignalOp::Set,
                    down,
                );
            }
        }
        sweep(field, src, dst, nx, lo, hi);
        sync_threads();
        if first {
            // Release: the band's rows before the flag that announces them.
            threadfence();
            atomic_exch_local(&mut flags[b], e + 1);
        }
    }
}

/// Threads per block of both stencil kernels.
pub const THREADS: u32 = 1024;

/// The stencil's 16-byte vectors need whole vectors per row. `nx` is the same on every PE
/// (`Halo2d::new` checked it), so this is an `Err` on every PE alike.
fn check_vector_rows(halo: &Halo2d) -> Result<()> {
    if !halo.nx().is_multiple_of(4) {
        return Err(Error::InvalidConfig {
            name: "jacobi2d row length nx",
            value: halo.nx().to_string(),
            reason: "the stencil moves 16-byte vectors of 4 f32, so nx must be a multiple of 4. \
                     Fix: pad the rows to a multiple of 4"
                .to_owned(),
        });
    }
    Ok(())
}

/// Runs `iters` iterations in one launch of `blocks` blocks on `stream` (`checked`: the
/// bounds-checked variant). `blocks` is at most [`Halo2d::resident_blocks`], which is the same
/// on every PE, so a grid that cannot be resident is an `Err` on every PE before any launch.
pub fn run_fused(
    halo: &mut Halo2d,
    stream: &CudaStream,
    iters: u32,
    blocks: usize,
    checked: bool,
) -> Result<()> {
    check_vector_rows(halo)?;
    if blocks == 0 || blocks > halo.resident_blocks() {
        return Err(Error::InvalidConfig {
            name: "jacobi_fused blocks",
            value: blocks.to_string(),
            reason: format!(
                "the fused kernel's blocks wait for each other, so all must be resident at once: \
                 at most {} here (one per SM of the smallest GPU, at most one per row). Fix: \
                 launch between 1 and Halo2d::resident_blocks() blocks",
                halo.resident_blocks()
            ),
        });
    }
    if iters == 0 {
        return Ok(());
    }
    let (nx, rows, plane, up_halo) = (halo.nx(), halo.rows(), halo.plane_len(), halo.up_halo_row());
    let (up, down, base) = (halo.up() as i32, halo.down() as i32, halo.epoch());
    let cfg = LaunchConfig::blocks(blocks as u32, THREADS);
    let pgas = halo.pgas().clone();
    let p = halo.parts_mut();
    if checked {
        jacobi_fused::launch_on(
            &pgas, stream, cfg, p.field, p.sig, p.flags, nx, rows, plane, up_halo, up, down, base,
            iters,
        )?;
    } else {
        // SAFETY: the same launch the checked variant runs without traps in the self-check;
        // every index stays within the planes Halo2d laid out.
        unsafe {
            jacobi_fused::launch_unchecked_on(
                &pgas, stream, cfg, p.field, p.sig, p.flags, nx, rows, plane, up_halo, up, down,
                base, iters,
            )?;
        }
    }
    halo.advance(iters as u64);
    Ok(())
}

/// Launches one [`jacobi_step`] over this PE's rows, from plane `src` to plane `dst`, with one
/// block per `rows_per_block` rows (at least one).
pub fn launch_step(
    pgas: &Pgas,
    stream: &CudaStream,
    field: &mut SymTensor<f32>,
    (src, dst): (usize, usize),
    (nx, rows): (usize, usize),
    blocks: usize,
    checked: bool,
) -> Result<()> {
    let cfg = LaunchConfig::blocks(blocks.clamp(1, rows) as u32, THREADS);
    if checked {
        jacobi_step::launch_on(pgas, stream, cfg, field, src, dst, nx, rows)
    } else {
        // SAFETY: as in `run_fused`: rows 0..=rows + 1 of both planes are in the field.
        unsafe { jacobi_step::launch_unchecked_on(pgas, stream, cfg, field, src, dst, nx, rows) }
    }
}

/// Runs `iters` iterations unfused: per iteration, `Halo2d::exchange_on` and one
/// [`jacobi_step`] launch of `blocks` blocks.
pub fn run_unfused(
    halo: &mut Halo2d,
    stream: &CudaStream,
    iters: u32,
    blocks: usize,
    checked: bool,
) -> Result<()> {
    check_vector_rows(halo)?;
    let (nx, rows) = (halo.nx(), halo.rows());
    for _ in 0..iters {
        halo.exchange_on(stream)?;
        let planes = (halo.current(), halo.next());
        let pgas = halo.pgas().clone();
        let field = halo.parts_mut().field;
        launch_step(&pgas, stream, field, planes, (nx, rows), blocks, checked)?;
        halo.advance(1);
    }
    Ok(())
}

/// The initial field at global row `r`, column `c`: a ramp plus a checkerboard of 32 x 32
/// tiles, exact in `f32`.
pub fn initial(r: usize, c: usize) -> f32 {
    ((r * 7 + c * 13) % 64) as f32 / 64.0 + ((r / 32 + c / 32) % 2) as f32
}

/// The rows of the whole domain owned by each PE, `rows[pe]`, as global row offsets.
pub fn row_starts(rows: &[usize]) -> Vec<usize> {
    rows.iter()
        .scan(0, |acc, &r| {
            let start = *acc;
            *acc += r;
            Some(start)
        })
        .collect()
}

/// `iters` iterations of the same smoother on the host over the whole periodic domain
/// (`u.len() / nx` rows), in the same `f32` operations.
pub fn host_jacobi(u: &[f32], nx: usize, iters: usize) -> Vec<f32> {
    let ny = u.len() / nx;
    let mut a = u.to_vec();
    let mut b = vec![0.0f32; a.len()];
    for _ in 0..iters {
        for r in 0..ny {
            let (ru, rd) = ((r + ny - 1) % ny, (r + 1) % ny);
            for c in 0..nx {
                let (cl, cr) = ((c + nx - 1) % nx, (c + 1) % nx);
                let vert = a[ru * nx + c] + a[rd * nx + c];
                let horiz = a[r * nx + cl] + a[r * nx + cr];
                b[r * nx + c] = 0.5 * a[r * nx + c] + 0.125 * (vert + horiz);
            }
        }
        std::mem::swap(&mut a, &mut b);
    }
    a
}
