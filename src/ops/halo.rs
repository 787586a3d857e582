//! Halo exchange for a 2-D field split into slabs of rows across the PEs: [`Halo2d`] owns the
//! symmetric field (two planes, each with a halo row above and below the PE's rows), the
//! signals the halos arrive with and the flags a persistent kernel chains its blocks with, and
//! exchanges the halo rows on a stream ([`Halo2d::exchange_on`]) for a user's own stencil kernel.
//!
//! ```text
//! plane p of PE q, at element p * plane_len():     row 0           top halo: the last row of PE q - 1
//!                                                  rows 1..=rows   PE q's own rows
//!                                                  row rows + 1    bottom halo: the first row of PE q + 1
//! ```
//!
//! The PEs form a ring (periodic in y; one PE is its own neighbour). Iteration `e` (counted
//! since [`Halo2d::new`]) reads plane `e % 2` and writes plane `(e + 1) % 2`.
//!
//! # The protocol (shared with fused kernels written against it)
//! Halos arrive with the iteration number as their signal (waits are `>=`, nothing is reset), and
//! two planes suffice with no barrier: `docs/ops.md`, "The protocol", says how and why.

use cudarc::driver::CudaStream;

use crate::prelude::*;
use crate::{Error, Pgas, Result, SymTensor};

/// Flags a [`Halo2d`] holds for persistent kernels: at most this many blocks (also capped at
/// the SM count: see [`Halo2d::resident_blocks`]).
pub const MAX_BLOCKS: usize = 1024;

/// Threads per block of the exchange kernel.
const EXCHANGE_THREADS: u32 = 256;

/// Sends this PE's first row to the bottom halo of the PE above and its last row to the top
/// halo of the PE below (block 0 and block 1), each with `value` in the receiver's signal, then
/// waits until both of this PE's own halos arrived with `value`.
#[pgas_kernel]
pub fn halo_rows(
    field: &mut SymTensor<f32>,
    sig: &mut SymTensor<u64>,
    nx: usize,
    first: usize,
    last: usize,
    up_dst: usize,
    down_dst: usize,
    value: u64,
    up: i32,
    down: i32,
) {
    // Block 0 sends up, block 1 down; each then waits for the halo coming the other way
    // (the receiver's `sig[1]` is for a row from below, `sig[0]` for one from above).
    let up_block = block_idx_x() == 0;
    let dst = if up_block { up_dst } else { down_dst };
    let src = if up_block { first } else { last };
    let pe = if up_block { up } else { down };
    let sent = if up_block { 1 } else { 0 };
    put_signal_nbi_block(
        &mut field[dst..dst + nx],
        &field[src..src + nx],
        &mut sig[sent],
        value,
        SignalOp::Set,
        pe,
    );
    if thread_idx_x() == 0 {
        signal_wait_until(&sig[1 - sent], Cmp::Ge, value);
    }
}

/// What every PE declared to [`Halo2d::new`], checked once all of them are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Declared {
    pub nx: u64,
    pub rows: u64,
    pub sms: u64,
}

/// The layout every PE derives from the same [`Declared`] list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub nx: usize,
    pub rows: usize,
    /// The PE above (whose last row is this PE's top halo) and the PE below.
    pub up: usize,
    pub down: usize,
    /// Rows of the PE above (its bottom halo is its row `up_rows + 1`).
    pub up_rows: usize,
    /// Elements per plane: `(largest rows + 2) * nx`, the same on every PE (symmetric).
    pub plane: usize,
    /// Blocks a persistent kernel may use on every PE: the fewest SMs, rows and [`MAX_BLOCKS`].
    pub resident_blocks: usize,
}

/// Bytes of symmetric memory a [`Halo2d`] allocates besides the field: two signals and the flags.
const STATE_BYTES: usize = (2 + MAX_BLOCKS) * 8;

/// Checks what the PEs declared and lays the field out. Every PE runs it on the same list, so
/// every PE takes the same branch: bad input is an `Err` on all of them, before anything is
/// allocated or launched.
pub(crate) fn plan(all: &[Declared], me: usize, heap: usize) -> Result<Plan> {
    let n = all.len();
    let list = |f: &dyn Fn(&Declared) -> u64| {
        all.iter()
            .enumerate()
            .map(|(pe, d)| format!("PE {pe}: {}", f(d)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if all.windows(2).any(|w| w[0].nx != w[1].nx) {
        return Err(Error::InvalidConfig {
            name: "Halo2d row length nx",
            value: list(&|d| d.nx),
            reason: "every PE must pass the same nx: a halo row is a neighbour's whole row. Fix: \
                     split the domain by rows only, with the same nx on every PE"
                .to_owned(),
        });
    }
    if all[0].nx == 0 {
        return Err(Error::InvalidConfig {
            name: "Halo2d row length nx",
            value: "0".to_owned(),
            reason: "a row must hold at least one element. Fix: pass nx >= 1".to_owned(),
        });
    }
    if all.iter().any(|d| d.rows < 2) {
        return Err(Error::InvalidConfig {
            name: "Halo2d rows per PE",
            value: list(&|d| d.rows),
            reason: "each PE's slab must hold at least 2 rows, one halo width at each side: its \
                     first row goes up and its last row down, and they must differ. Fix: give \
                     every PE at least 2 rows (use fewer PEs for a small domain)"
                .to_owned(),
        });
    }
    let nx = all[0].nx;
    let max_rows = all.iter().map(|d| d.rows).max().unwrap_or(0);
    let too_big = || Error::InvalidConfig {
        name: "Halo2d size",
        value: format!("nx {nx}, up to {max_rows} rows"),
        reason: "the field's size overflows. Fix: use a smaller domain per PE".to_owned(),
    };
    let plane = max_rows
        .checked_add(2)
        .and_then(|r| r.checked_mul(nx))
        .and_then(|p| usize::try_from(p).ok())
        .ok_or_else(too_big)?;
    let bytes = plane
        .checked_mul(2 * std::mem::size_of::<f32>())
        .and_then(|b| b.checked_add(STATE_BYTES))
        .ok_or_else(too_big)?;
    if bytes > heap {
        return Err(Error::HeapExhausted {
            requested: bytes,
            heap,
            in_use: " (a Halo2d holds two planes of (rows + 2) x nx f32 plus its signals and \
                     flags, sized by the PE with the most rows)"
                .into(),
        });
    }
    let up = (me + n - 1) % n;
    let fewest = all.iter().map(|d| d.sms.min(d.rows)).min().unwrap_or(1);
    Ok(Plan {
        nx: nx as usize,
        rows: all[me].rows as usize,
        up,
        down: (me + 1) % n,
        up_rows: all[up].rows as usize,
        plane,
        resident_blocks: (fewest as usize).clamp(1, MAX_BLOCKS),
    })
}

/// A 2-D `f32` field split into slabs of rows, one per PE in PE order, with its halo rows and
/// their signals (see the [module docs](self) for the layout and the protocol).
///
/// Made collectively by [`Halo2d::new`]; then on each PE either
/// - [`Halo2d::exchange_on`], the user's stencil kernel from plane [`Halo2d::current`] into
///   [`Halo2d::next`], and [`Halo2d::advance`]`(1)`, per iteration; or
/// - a persistent kernel written against the protocol that runs many iterations in one launch
///   (`examples/jacobi2d.rs`), given [`Halo2d::parts_mut`], then [`Halo2d::advance`]`(iters)`.
///
/// Every PE runs the same number of iterations, in the same order of calls (a PE that stops
/// early leaves its neighbours waiting for its halos, as with NCCL's send and receive). The
/// iteration count is kept on the host and passed to the kernels, so a launch captured in a CUDA
/// graph would replay the same count: run it eagerly. Dropping it frees the symmetric buffers
/// collectively: synchronize the streams its iterations ran on first, on every PE.
pub struct Halo2d {
    pgas: Pgas,
    plan: Plan,
    /// Iterations run since `new` (what the next iteration reads: plane `epoch % 2`).
    epoch: u64,
    /// Whether any halo was sent: the interior may be written only before.
    started: bool,
    field: SymTensor<f32>,
    sig: SymTensor<u64>,
    flags: SymTensor<u64>,
}

crate::debug::debug_fields!(|h: Halo2d| nx: h.plan.nx, rows: h.plan.rows, up: h.plan.up,
    down: h.plan.down, epoch: h.epoch);

/// The symmetric buffers of a [`Halo2d`], for a kernel written against its protocol.
pub struct HaloParts<'a> {
    /// Two planes of `(rows + 2) * nx` elements, [`Halo2d::plane_len`] apart.
    pub field: &'a mut SymTensor<f32>,
    /// `sig[0]`: the top halo's arrival; `sig[1]`: the bottom halo's.
    pub sig: &'a mut SymTensor<u64>,
    /// `flags[b]`: iterations finished by block `b` of a persistent kernel ([`MAX_BLOCKS`]).
    pub flags: &'a mut SymTensor<u64>,
}

impl Halo2d {
    /// A zeroed field of `rows` rows of `nx` elements on this PE, in a ring with the others.
    /// Collective: every PE calls it, with the same `nx` (`rows` may differ between PEs).
    ///
    /// The PEs first exchange what they were given, so these are an `Err` on every PE before
    /// anything is allocated: `nx` that differs between PEs or is 0, a PE with fewer than 2
    /// rows, a field larger than the symmetric heap.
    pub fn new(pgas: &Pgas, nx: usize, rows: usize) -> Result<Halo2d> {
        let sms = pgas.sm_count()?;
        let all = gather(
            pgas,
            Declared {
                nx: nx as u64,
                rows: rows as u64,
                sms: sms as u64,
            },
        )?;
        let plan = plan(&all, pgas.my_pe(), pgas.heap_size())?;
        let field = pgas.alloc::<f32>(2 * plan.plane)?;
        let sig = pgas.alloc::<u64>(2)?;
        let flags = pgas.alloc::<u64>(MAX_BLOCKS)?;
        // Every PE's signals are zero before any PE sends.
        pgas.barrier_all()?;
        Ok(Halo2d {
            pgas: pgas.clone(),
            plan,
            epoch: 0,
            started: false,
            field,
            sig,
            flags,
        })
    }

    /// The context it was made with.
    pub fn pgas(&self) -> &Pgas {
        &self.pgas
    }

    /// Elements per row.
    pub fn nx(&self) -> usize {
        self.plan.nx
    }

    /// This PE's rows (without halos).
    pub fn rows(&self) -> usize {
        self.plan.rows
    }

    /// The PE above (whose last row is this PE's top halo).
    pub fn up(&self) -> usize {
        self.plan.up
    }

    /// The PE below (whose first row is this PE's bottom halo).
    pub fn down(&self) -> usize {
        self.plan.down
    }

    /// The row of the PE above that holds its bottom halo (its rows plus one): where this PE's
    /// first row goes.
    pub fn up_halo_row(&self) -> usize {
        self.plan.up_rows + 1
    }

    /// Elements from plane 0 to plane 1 of the field.
    pub fn plane_len(&self) -> usize {
        self.plan.plane
    }

    /// Iterations run so far (the sum of [`Halo2d::advance`]'s).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Offset of the plane the next iteration reads (the current field, halo row 0 first).
    pub fn current(&self) -> usize {
        (self.epoch % 2) as usize * self.plan.plane
    }

    /// Offset of the plane the next iteration writes.
    pub fn next(&self) -> usize {
        ((self.epoch + 1) % 2) as usize * self.plan.plane
    }

    /// The most blocks a persistent kernel on this field may launch so that all of them are
    /// resident at once, one per SM (they wait for each other), on every PE alike: the fewest
    /// SMs of any PE's GPU, capped at the fewest rows (a block owns at least one row) and at
    /// [`MAX_BLOCKS`]. It assumes the kernel fits one block per SM and has the GPU to itself.
    pub fn resident_blocks(&self) -> usize {
        self.plan.resident_blocks
    }

    /// The buffers, for a kernel written against the protocol (see the module docs).
    pub fn parts_mut(&mut self) -> HaloParts<'_> {
        HaloParts {
            field: &mut self.field,
            sig: &mut self.sig,
            flags: &mut self.flags,
        }
    }

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

/// Every PE's [`Declared`], in PE order (collective).
fn gather(pgas: &Pgas, mine: Declared) -> Result<Vec<Declared>> {
    let v = super::agree::gather_words(pgas, &[mine.nx, mine.rows, mine.sms])?;
    Ok(v.chunks(3)
        .map(|c| Declared {
            nx: c[0],
            rows: c[1],
            sms: c[2],
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(nx: u64, rows: u64) -> Declared {
        Declared { nx, rows, sms: 132 }
    }

    const HEAP: usize = 1 << 30;

    #[test]
    fn plans_uneven_slabs_in_a_ring() {
        let all = [d(64, 10), d(64, 12), d(64, 7)];
        let p = plan(&all, 0, HEAP).unwrap();
        assert_eq!((p.nx, p.rows, p.up_rows), (64, 10, 7));
        assert_eq!((p.up, p.down), (2, 1));
        assert_eq!(p.plane, 14 * 64);
        assert_eq!(p.resident_blocks, 7);
        let p = plan(&all, 2, HEAP).unwrap();
        assert_eq!((p.rows, p.up_rows), (7, 12));
        assert_eq!((p.up, p.down), (1, 0));
        // One PE is its own neighbour.
        let p = plan(&[d(8, 5)], 0, HEAP).unwrap();
        assert_eq!((p.rows, p.up_rows, p.plane), (5, 5, 56));
        assert_eq!((p.up, p.down), (0, 0));
    }

    #[test]
    fn resident_blocks_is_the_fewest_sms_and_rows() {
        let all = [
            Declared {
                nx: 4,
                rows: 4096,
                sms: 132,
            },
            Declared {
                nx: 4,
                rows: 4096,
                sms: 66,
            },
        ];
        assert_eq!(plan(&all, 1, HEAP).unwrap().resident_blocks, 66);
    }

    /// Asserts that PE `me` refuses `all` with a message that says each of `parts`.
    fn assert_refused(all: &[Declared], me: usize, parts: &[&str]) {
        let msg = plan(all, me, HEAP).unwrap_err().to_string();
        assert!(parts.iter().all(|p| msg.contains(p)), "{msg}");
    }

    #[test]
    fn differing_nx_names_every_pe() {
        assert_refused(
            &[d(64, 10), d(32, 10)],
            1,
            &["PE 0: 64, PE 1: 32", "same nx"],
        );
        assert_refused(&[d(0, 10)], 0, &["nx >= 1"]);
    }

    #[test]
    fn a_slab_thinner_than_two_halos_is_refused() {
        assert_refused(&[d(64, 10), d(64, 1)], 0, &["PE 1: 1", "at least 2 rows"]);
    }

    #[test]
    fn a_field_over_the_heap_is_refused_with_both_sizes() {
        // Two planes of (1024 + 2) x 1024 f32: 8 MiB and some.
        let e = plan(&[d(1024, 1024)], 0, 8 << 20).unwrap_err();
        match &e {
            Error::HeapExhausted {
                requested, heap, ..
            } => {
                assert_eq!(*requested, 2 * 1026 * 1024 * 4 + STATE_BYTES);
                assert_eq!(*heap, 8 << 20);
            }
            other => panic!("{other}"),
        }
        assert!(e.to_string().contains("heap_size"), "{e}");
        let e = plan(&[d(u64::MAX / 2, 4)], 0, HEAP).unwrap_err();
        assert!(e.to_string().contains("overflows"), "{e}");
    }
}
