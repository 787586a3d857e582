//! `pgas::ops::jacobi`: a 2-D Jacobi smoother on a torus with its halo exchange fused in, the
//! production form of `examples/halo_exchange.rs`. Each PE owns a slab of whole rows
//! ([`Halo2d`]); one persistent kernel ([`Method::Fused`]) runs every iteration, its edge rows
//! computed and sent first, its blocks chained by their neighbours' flags and the halo signals
//! instead of a grid-wide barrier (`docs/ops.md`, "The protocol"). [`Method::Unfused`] launches
//! the same sweep once per iteration after [`Halo2d::exchange_on`] (the baseline). The stencil,
//! `u' = u / 2 + ((up + down) + (left + right)) / 8` in `f32`, scales by powers of two, so the
//! result equals the host's ([`host_jacobi`]) bit for bit. Both kernels come in forms with the
//! same values ([`Sweep`], [`Fused::threads`]); [`Method::FusedAs`] and [`Method::Unfused`]
//! take any, which `benches/halo.rs` times side by side ([`FORMS`]).

use cudarc::driver::CudaStream;

use super::halo::Halo2d;
use crate::prelude::*;
use crate::{Error, Result};

/// Computes rows `ra..rb` of the plane at `dst` from the plane at `src` (which holds the rows
/// above and below them), with every thread of the block, in the [`Sweep::Rolled`] form. A work
/// item is 4 columns (one 16-byte vector) of up to 8 rows: the thread walks down them keeping the
/// rows above, at and below in registers, so each row is loaded once per item, and loads the
/// next row before computing this one (two rows in flight). A small band takes fewer rows per
/// item, so that every thread of the block has one. Consecutive threads take consecutive columns
/// (coalesced). Columns wrap around (periodic in x); `nx` is a multiple of 4.
#[pgas_device]
fn sweep_rolled(
    field: &mut SymTensor<f32>,
    src: usize,
    dst: usize,
    nx: usize,
    ra: usize,
    rb: usize,
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
            let m0 = vec16_get(mid, 0);
            let m1 = vec16_get(mid, 1);
            let m2 = vec16_get(mid, 2);
            let m3 = vec16_get(mid, 3);
            let mut out = vec16_set(
                mid,
                0,
                cell(m0, vec16_get(up, 0), vec16_get(dn, 0), left, m1),
            );
            out = vec16_set(out, 1, cell(m1, vec16_get(up, 1), vec16_get(dn, 1), m0, m2));
            out = vec16_set(out, 2, cell(m2, vec16_get(up, 2), vec16_get(dn, 2), m1, m3));
            out = vec16_set(
                out,
                3,
                cell(m3, vec16_get(up, 3), vec16_get(dn, 3), m2, right),
            );
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
    field: &mut SymTensor<f32>,
    src: usize,
    dst: usize,
    nx: usize,
    ra: usize,
    rb: usize,
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
                    let up = w[k];
                    let mid = w[k + 1];
                    let dn = w[k + 2];
                    let m0 = vec16_get(mid, 0);
                    let m1 = vec16_get(mid, 1);
                    let m2 = vec16_get(mid, 2);
                    let m3 = vec16_get(mid, 3);
                    let mut out = vec16_set(
                        mid,
                        0,
                        cell(m0, vec16_get(up, 0), vec16_get(dn, 0), left[k], m1),
                    );
                    out = vec16_set(out, 1, cell(m1, vec16_get(up, 1), vec16_get(dn, 1), m0, m2));
                    out = vec16_set(out, 2, cell(m2, vec16_get(up, 2), vec16_get(dn, 2), m1, m3));
                    out = vec16_set(
                        out,
                        3,
                        cell(m3, vec16_get(up, 3), vec16_get(dn, 3), m2, right[k]),
                    );
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
    field: &mut SymTensor<f32>,
    src: usize,
    dst: usize,
    nx: usize,
    ra: usize,
    rb: usize,
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
/// of `nb` takes rows `1 + b * rows / nb ..`; `depth`: the [`Sweep`] form ([`Sweep::depth`]).
#[pgas_kernel(max_threads = 1024)]
pub fn jacobi_step(
    field: &mut SymTensor<f32>,
    src: usize,
    dst: usize,
    nx: usize,
    rows: usize,
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
    field: &mut SymTensor<f32>,
    sig: &mut SymTensor<u64>,
    p: usize,
    nx: usize,
    rows: usize,
    up_halo: usize,
    up: i32,
    down: i32,
    value: u64,
    top: bool,
    bottom: bool,
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
    /// of 8 rows with nothing spilled (still one block an SM: see [`Fused::threads`]).
    jacobi_fused_512,
    512
);

/// Threads per block of the unfused stencil kernel ([`jacobi_step`]) and of the fused kernel's
/// 1024-thread forms.
pub const THREADS: u32 = 1024;

/// The deepest batch [`Sweep::Batched`] takes: the rows a batch holds are an array of
/// `MAX_DEPTH + 2` vectors.
pub const MAX_DEPTH: usize = 8;

/// How the stencil kernels walk a band of rows (both kernels take it; `benches/halo.rs` times
/// each). Every form computes the same values bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sweep {
    /// A thread walks 4 columns of up to 8 rows with the next row's loads in flight: one
    /// 16-byte load ahead of use per thread (the form of the first measurements).
    /// Best while the field fits L2 (its short items spread a small band over every thread).
    Rolled,
    /// A thread walks 4 columns of as many rows as the band divided among the block's threads
    /// gives it, loading `depth` rows (1 to [`MAX_DEPTH`]) at once before computing them:
    /// `depth` 16-byte loads in flight per thread, the memory parallelism a DRAM-bound sweep
    /// needs with one block an SM. `depth` costs registers: 4 is what a 1024-thread block's 64
    /// registers a thread hold; 8 needs a 512-thread block's budget ([`Fused::threads`]).
    Batched {
        /// Rows loaded at once per thread.
        depth: usize,
    },
}

impl Default for Sweep {
    /// [`Sweep::Batched`] 4 deep: the unfused kernel's form ([`Method::Unfused`]).
    fn default() -> Sweep {
        Sweep::Batched { depth: 4 }
    }
}

impl Sweep {
    /// The kernels' comptime `depth`: 0 for [`Sweep::Rolled`], else the batch depth. An `Err`
    /// for a batch depth outside 1 to [`MAX_DEPTH`].
    pub fn depth(self) -> Result<usize> {
        match self {
            Sweep::Rolled => Ok(0),
            Sweep::Batched { depth } if (1..=MAX_DEPTH).contains(&depth) => Ok(depth),
            Sweep::Batched { depth } => Err(Error::InvalidConfig {
                name: "jacobi Sweep::Batched depth",
                value: depth.to_string(),
                reason: format!(
                    "a batch holds its rows in registers, 1 to {MAX_DEPTH} of them. Fix: pass \
                     a depth from 1 to {MAX_DEPTH} (4 for 1024-thread blocks, 8 for 512)"
                ),
            }),
        }
    }
}

/// The form of the fused kernel ([`Method::FusedAs`]); [`Fused::for_size`] is what
/// [`Method::Fused`] runs. Every form computes the same values bit for bit, and every form is one
/// block an SM, so [`Halo2d::resident_blocks`] holds for all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fused {
    /// How each block walks its band.
    pub sweep: Sweep,
    /// Threads per block: 1024 ([`jacobi_fused`], at most 64 registers a thread) or 512
    /// ([`jacobi_fused_512`], up to 128: the batched forms there use 97 and 126, ptxas at
    /// sm_90, so such a block is alone on its SM: half the warps, each with twice the registers
    /// for rows in flight). Either way one block an SM is always resident (64K registers), which
    /// is all [`Halo2d::resident_blocks`] assumes.
    pub threads: u32,
}

/// The fused forms `benches/halo.rs` times side by side (and the GPU suite checks), the kernel
/// of the first measurements ([`Fused::FIRST`]) first.
pub const FORMS: [Fused; 5] = [
    Fused::FIRST,
    Fused {
        sweep: Sweep::Batched { depth: 2 },
        threads: 1024,
    },
    Fused {
        sweep: Sweep::Batched { depth: 4 },
        threads: 1024,
    },
    Fused {
        sweep: Sweep::Batched { depth: 4 },
        threads: 512,
    },
    Fused {
        sweep: Sweep::Batched { depth: 8 },
        threads: 512,
    },
];

impl Fused {
    /// The kernel as first measured: [`Sweep::Rolled`] in 1024-thread blocks.
    pub const FIRST: Fused = Fused {
        sweep: Sweep::Rolled,
        threads: 1024,
    };

    /// The form [`Method::Fused`] runs for a slab of `rows` rows of `nx` values, from the
    /// measurements in `docs/ops.md` (2 x H100, every form in one job), the fastest form at
    /// each size: up to a plane of 4 MiB (N <= 1024), batched 4 deep in 512-thread blocks; up
    /// to 16 MiB (N <= 2048), 8 deep in 512-thread blocks; above, where the planes outgrow the
    /// 50 MB L2, batched 2 deep in 1024-thread blocks (at N = 4096, 8192 and 16384; at 16384
    /// it beat the unfused sweep, which the first kernel did not).
    pub fn for_size(nx: usize, rows: usize) -> Fused {
        let plane = nx.saturating_mul(rows).saturating_mul(4);
        if plane <= 4 << 20 {
            Fused {
                sweep: Sweep::Batched { depth: 4 },
                threads: 512,
            }
        } else if plane <= 16 << 20 {
            Fused {
                sweep: Sweep::Batched { depth: 8 },
                threads: 512,
            }
        } else {
            Fused {
                sweep: Sweep::Batched { depth: 2 },
                threads: 1024,
            }
        }
    }
}

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

/// How [`run`] iterates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Every iteration in one launch ([`jacobi_fused`] or [`jacobi_fused_512`]), in the form
    /// [`Fused::for_size`] picks for this PE's slab.
    Fused,
    /// The same in the form given (each form is its own specialization, compiled on first
    /// use); an `Err` for a form no kernel has (threads other than 512 or 1024, a batch depth
    /// outside 1 to [`MAX_DEPTH`]).
    FusedAs(Fused),
    /// Per iteration, `Halo2d::exchange_on` and one [`jacobi_step`] launch, the stencil walking
    /// its rows as the sweep says ([`Sweep::default`]: batched, 4 deep).
    Unfused(Sweep),
}

/// Runs `iters` iterations by `method` on `stream`, with `blocks` blocks a launch (`checked`:
/// the bounds-checked variants). The fused kernel's blocks wait for each other, so there
/// `blocks` is at most [`Halo2d::resident_blocks`], which is the same on every PE: a grid that
/// cannot be resident is an `Err` on every PE before any launch.
pub fn run(
    halo: &mut Halo2d,
    stream: &CudaStream,
    method: Method,
    iters: u32,
    blocks: usize,
    checked: bool,
) -> Result<()> {
    check_vector_rows(halo)?;
    let call = Call {
        iters,
        blocks,
        checked,
    };
    match method {
        Method::Fused => fused(halo, stream, call, Fused::for_size(halo.nx(), halo.rows())),
        Method::FusedAs(form) => fused(halo, stream, call, form),
        Method::Unfused(sweep) => unfused(halo, stream, call, sweep),
    }
}

/// What [`run`] was asked for beside the method.
#[derive(Clone, Copy)]
struct Call {
    iters: u32,
    blocks: usize,
    checked: bool,
}

/// [`Method::FusedAs`] `form`.
fn fused(halo: &mut Halo2d, stream: &CudaStream, call: Call, form: Fused) -> Result<()> {
    let Call { iters, blocks, .. } = call;
    let depth = form.sweep.depth()?;
    if form.threads != 512 && form.threads != THREADS {
        return Err(Error::InvalidConfig {
            name: "jacobi Fused::threads",
            value: form.threads.to_string(),
            reason: "the fused kernel comes in blocks of 1024 threads (jacobi_fused) and 512 \
                     (jacobi_fused_512). Fix: pass threads 1024 or 512"
                .to_owned(),
        });
    }
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
    let cfg = LaunchConfig::blocks(blocks as u32, form.threads);
    let pgas = halo.pgas().clone();
    let p = halo.parts_mut();
    // The two kernels take the same arguments; one launch site per kernel and variant.
    macro_rules! launch {
        ($kernel:ident, $launch:ident) => {
            $kernel::$launch(
                &pgas, stream, cfg, p.field, p.sig, p.flags, nx, rows, plane, up_halo, up, down,
                base, iters, depth,
            )
        };
    }
    match (form.threads == THREADS, call.checked) {
        (true, true) => launch!(jacobi_fused, launch_on)?,
        (false, true) => launch!(jacobi_fused_512, launch_on)?,
        // SAFETY: the same launch the checked variant runs without traps in the GPU suite
        // (every form); every index stays within the planes Halo2d laid out.
        (true, false) => unsafe { launch!(jacobi_fused, launch_unchecked_on)? },
        // SAFETY: as the arm above, for the 512-thread kernel (the same code).
        (false, false) => unsafe { launch!(jacobi_fused_512, launch_unchecked_on)? },
    }
    halo.advance(iters as u64);
    Ok(())
}

/// Launches one [`jacobi_step`] over this PE's rows, from plane `src` to plane `dst`, with
/// `blocks` blocks (at least one, at most one per row), walking the rows as `sweep` says (an
/// `Err` for a batch depth outside 1 to [`MAX_DEPTH`]).
#[allow(clippy::too_many_arguments)]
pub fn launch_step(
    pgas: &Pgas,
    stream: &CudaStream,
    field: &mut SymTensor<f32>,
    (src, dst): (usize, usize),
    (nx, rows): (usize, usize),
    blocks: usize,
    sweep: Sweep,
    checked: bool,
) -> Result<()> {
    let cfg = LaunchConfig::blocks(blocks.clamp(1, rows) as u32, THREADS);
    let depth = sweep.depth()?;
    // SAFETY: unchecked only as in `fused`: rows 0..=rows + 1 of both planes are in the
    // field.
    unsafe {
        jacobi_step::launch_checked_if_on(
            pgas, stream, cfg, checked, field, src, dst, nx, rows, depth,
        )
    }
}

/// [`Method::Unfused`] `sweep`.
fn unfused(halo: &mut Halo2d, stream: &CudaStream, call: Call, sweep: Sweep) -> Result<()> {
    let Call {
        iters,
        blocks,
        checked,
    } = call;
    let (nx, rows) = (halo.nx(), halo.rows());
    for _ in 0..iters {
        halo.exchange_on(stream)?;
        let planes = (halo.current(), halo.next());
        let pgas = halo.pgas().clone();
        let field = halo.parts_mut().field;
        launch_step(
            &pgas,
            stream,
            field,
            planes,
            (nx, rows),
            blocks,
            sweep,
            checked,
        )?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_size_picks_the_measured_best_and_a_listed_form() {
        let pick = |n: usize| Fused::for_size(n, n);
        let form = |depth, threads| Fused {
            sweep: Sweep::Batched { depth },
            threads,
        };
        assert_eq!(pick(1024), form(4, 512));
        assert_eq!(pick(2048), form(8, 512));
        assert_eq!(
            (pick(4096), pick(8192), pick(16384)),
            (form(2, THREADS), form(2, THREADS), form(2, THREADS))
        );
        // benches/halo.rs reports the pick's time from the forms it ran.
        for n in [4, 1024, 2048, 4096, 8192, 16384, 1 << 20] {
            assert!(FORMS.contains(&pick(n)), "{n}");
        }
    }

    #[test]
    fn every_listed_form_has_a_kernel_and_bad_depths_name_the_fix() {
        for f in FORMS {
            assert!(f.sweep.depth().is_ok(), "{f:?}");
            assert!(f.threads == THREADS || f.threads == 512, "{f:?}");
        }
        assert_eq!(Sweep::Rolled.depth().unwrap(), 0);
        for depth in [0, MAX_DEPTH + 1] {
            let e = Sweep::Batched { depth }.depth().unwrap_err();
            assert!(
                e.to_string().contains("Fix: pass a depth from 1 to 8"),
                "{e}"
            );
        }
    }
}
