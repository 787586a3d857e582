//! [`Halo2d`]'s plan: what every PE declared, checked together ([`plan`]), the symmetric field,
//! signals and flags, and what a kernel written against the protocol reads of them; `op.rs`
//! has the exchange.

use super::Halo2d;
use crate::{Error, Pgas, Result, SymTensor};

/// Flags a [`Halo2d`] holds for persistent kernels: at most this many blocks (also capped at
/// the SM count: see [`Halo2d::resident_blocks`]).
pub const MAX_BLOCKS: usize = 1024;

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
}

/// Every PE's [`Declared`], in PE order (collective).
fn gather(pgas: &Pgas, mine: Declared) -> Result<Vec<Declared>> {
    let v = crate::ops::agree::gather_words(pgas, &[mine.nx, mine.rows, mine.sms])?;
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
