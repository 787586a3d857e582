//! The calls of [`pgas::ops::jacobi`](super): [`run`] (fused or unfused, a form or the measured
//! best) and one unfused step ([`launch_step`]).

use cudarc::driver::CudaStream;

use super::kernels::*;
use super::plan::{check_vector_rows, Fused, Method, Sweep, THREADS};
use crate::ops::halo::Halo2d;
use crate::prelude::*;
use crate::{Error, Result};

/// Runs `iters` iterations by `method` on `stream`, with `blocks` blocks a launch (`checked`:
/// the bounds-checked variants). The fused kernel's blocks wait for each other, so there
/// `blocks` is at most [`Halo2d::resident_blocks`], which is the same on every PE: a grid that
/// cannot be resident is an `Err` on every PE before any launch.
pub fn run(
    halo: &mut Halo2d, stream: &CudaStream, method: Method, iters: u32, blocks: usize,
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
/// `Err` for a batch depth outside 1 to [`MAX_DEPTH`](super::MAX_DEPTH)).
#[allow(clippy::too_many_arguments)]
pub fn launch_step(
    pgas: &Pgas, stream: &CudaStream, field: &mut SymTensor<f32>, (src, dst): (usize, usize),
    (nx, rows): (usize, usize), blocks: usize, sweep: Sweep, checked: bool,
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
