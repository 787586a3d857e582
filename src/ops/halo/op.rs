//! [`Halo2d`]'s calls: the interior written and read, an exchange of the halo rows, and the
//! iterations a fused kernel ran.

use cudarc::driver::CudaStream;

use super::kernels::halo_rows;
use super::Halo2d;
use crate::prelude::*;
use crate::{Error, Result};

/// Threads per block of the exchange kernel.
const EXCHANGE_THREADS: u32 = 256;

impl Halo2d {
    /// Writes this PE's rows of the current plane (`rows * nx` values, row-major) on the pgas
    /// stream, returning when done. Only before the first exchange or iteration: after that the
    /// neighbours hold halos of the old values (make a new `Halo2d` to start over).
    pub fn write_interior(&mut self, rows: &[f32]) -> Result<()> {
        if self.started {
            return Err(Error::InvalidConfig {
                name: "Halo2d::write_interior",
                value: format!("after {} iterations", self.epoch),
                reason: "the neighbours already received halos of the old field. Fix: write \
                         the field before the first exchange, or make a new Halo2d"
                    .to_owned(),
            });
        }
        let n = self.plan.rows * self.plan.nx;
        if rows.len() != n {
            return Err(Error::LengthMismatch {
                what: "the rows given to Halo2d::write_interior (rows * nx)",
                got: rows.len(),
                expected: n,
            });
        }
        let start = self.current() + self.plan.nx;
        self.field.view_mut(start..start + n)?.copy_from(rows)
    }

    /// This PE's rows of the current plane, read on the pgas stream (synchronize the stream the
    /// iterations ran on first).
    pub fn read_interior(&self) -> Result<Vec<f32>> {
        let start = self.current() + self.plan.nx;
        self.field
            .view(start..start + self.plan.rows * self.plan.nx)?
            .to_vec()
    }

    /// Enqueues on `stream` the exchange of the current plane's halo rows: this PE's first row
    /// into the bottom halo of the PE above, its last row into the top halo of the PE below,
    /// each with a signal, then a wait until both of this PE's halos arrived. The stencil
    /// launched after it on `stream` reads [`Halo2d::current`] with its halos; then call
    /// [`Halo2d::advance`]`(1)`. Every PE calls it once per iteration.
    pub fn exchange_on(&mut self, stream: &CudaStream) -> Result<()> {
        let (nx, rows, cur) = (self.plan.nx, self.plan.rows, self.current());
        self.started = true;
        // SAFETY: every range is within the field: a plane holds (largest rows + 2) * nx
        // elements and the rows named are at most rows + 1 of the PE that owns them; `up` and
        // `down` are PEs of the world.
        unsafe {
            halo_rows::launch_unchecked_on(
                &self.pgas,
                stream,
                LaunchConfig::blocks(2, EXCHANGE_THREADS),
                &mut self.field,
                &mut self.sig,
                nx,
                cur + nx,
                cur + rows * nx,
                cur + (self.plan.up_rows + 1) * nx,
                cur,
                self.epoch + 1,
                self.plan.up as i32,
                self.plan.down as i32,
            )
        }
    }

    /// Records that `iters` iterations ran (each wrote [`Halo2d::next`] from
    /// [`Halo2d::current`], which then swap).
    pub fn advance(&mut self, iters: u64) {
        self.epoch += iters;
        self.started = true;
    }
}
