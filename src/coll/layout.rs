//! All-to-all with per-peer counts (`all_to_all_v`): the layout the members agree on once, on
//! the host, and the calls that use it.
//!
//! The counts and displacements are given on the host: [`Comm::all_to_all_layout`] gathers every
//! member's (one `fcollect` into the communicator's symmetric scratch) and every member checks
//! the same table, so a bad layout is an `Err` on every member alike and none is left waiting
//! in a kernel. The layout then lives on
//! the device (each PE's send offsets, counts and where each peer receives it), so the calls
//! that use it need no host exchange and can be captured into a CUDA graph.

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use super::comm::{refuse_capture, row_words, Algorithm, Between, Comm};
use super::elem::AllReduceElem;
use super::options::Options;
use super::region::{check_apart, offsets16, LocalTable, Reached, Region};
use super::specs::move_kernels;
use crate::{Error, Result, SymRegion, Team};

/// The per-peer counts and displacements of [`Comm::all_to_all_v`], agreed by every member of
/// the communicator's team ([`Comm::all_to_all_layout`]). In elements, whatever the type.
///
/// Its table lives in device memory that the calls' kernels read by address: keep the layout
/// alive until every stream that ran a call with it has passed that call, and for as long as a
/// CUDA graph that captured such a call may be replayed (dropping it frees the table, and a
/// later replay would read freed memory).
pub struct AllToAllLayout {
    /// The communicator it was agreed on (`Comm::id`).
    comm: u64,
    /// For each team rank `q`: this PE's send offset to `q`, the count, and `q`'s receive
    /// offset for this PE, as the kernel reads them (`kernels/`, `all_to_all_v`). Owns the
    /// memory `table_at` names.
    _table: CudaSlice<u64>,
    /// `_table`'s address and length, passed to the kernel as is (see `kernels/`).
    table_at: LocalTable,
    /// The fewest elements any member's source must hold (the largest send offset + count).
    src_len: usize,
    /// The fewest elements any member's destination must hold.
    dst_len: usize,
    /// Elements this PE sends in all (the kernel's grid is sized by the largest, below).
    max_sent: usize,
    /// The same table on the host, by destination: (world PE, send offset, count, receive
    /// offset), for the path by NVSHMEM RMA where some peer is not load/store reachable.
    sends: Vec<Send>,
}

/// One segment of an all-to-all-v call, as the RMA path puts it.
#[derive(Clone, Copy, Debug)]
struct Send {
    pe: usize,
    src_at: usize,
    count: usize,
    dst_at: usize,
}

crate::debug::debug_fields!(|l: AllToAllLayout| comm: l.comm, src_len: l.src_len,
    dst_len: l.dst_len);

impl AllToAllLayout {
    /// The fewest elements each member's source must hold for this layout.
    pub fn src_len(&self) -> usize {
        self.src_len
    }

    /// The fewest elements each member's destination must hold for this layout.
    pub fn dst_len(&self) -> usize {
        self.dst_len
    }
}

impl Comm {
    /// Agrees on an all-to-all-v layout: this PE sends `send_counts[q]` elements from
    /// `src[send_displs[q]..]` to team rank `q`, and receives `recv_counts[p]` elements from rank
    /// `p` into `dst[recv_displs[p]..]`. Collective over the members of the team (each passes
    /// its own counts); it waits on the host for the exchange, so make layouts ahead and reuse
    /// them (the calls that use one are cheap and capturable).
    ///
    /// What must agree across PEs, and is checked on every member with the same verdict: rank
    /// `p`'s `send_counts[q]` equals rank `q`'s `recv_counts[p]`; each member's receive regions
    /// do not overlap; no offset + count overflows. The lengths of the slices (the team size)
    /// are checked too, also on every member. Errors name the PEs and counts involved.
    pub fn all_to_all_layout(
        &mut self, send_counts: &[usize], send_displs: &[usize], recv_counts: &[usize],
        recv_displs: &[usize],
    ) -> Result<AllToAllLayout> {
        let rank = self.member()?;
        let n = self.n;
        let row = row_words(n);
        // A slice of the wrong length is reported through the exchange (status 1), not here
        // alone: the other members would wait in the fcollect for this one.
        let slices = [send_counts, send_displs, recv_counts, recv_displs];
        let lens = slices.map(<[usize]>::len);
        let mut mine = vec![0u64; row];
        if lens.iter().all(|&l| l == n) {
            for (j, v) in slices.iter().flat_map(|s| s.iter()).enumerate() {
                mine[1 + j] = *v as u64;
            }
        } else {
            mine[0] = 1;
        }
        let world = self.pgas.n_pes();
        let rows = if n > 1 {
            // `agree` holds `world` gathered rows, then this PE's own.
            let own_words = world * row_words(world)..world * row_words(world) + row;
            self.agree.view_mut(own_words.clone())?.copy_from(&mine)?;
            let gathered = self.agree.view(0..n * row)?;
            let own = self.agree.view(own_words)?;
            self.pgas.fcollect(self.team, &gathered, &own)?;
            // (On the pgas stream, as the fcollect: it reads the gathered rows.)
            let rows = gathered.to_vec()?;
            // No member's next exchange may write into `agree` before every member has read
            // this one's rows.
            self.team.barrier(&self.pgas)?;
            rows
        } else {
            mine
        };
        check_layout(&rows, n, lens)?;
        let at = |p: usize, what: usize, q: usize| cell(&rows, n, p, what, q) as usize;
        let mut dev = vec![0u64; 3 * n];
        let mut sends = Vec::with_capacity(n);
        for q in 0..n {
            dev[3 * q] = at(rank, 1, q) as u64;
            dev[3 * q + 1] = at(rank, 0, q) as u64;
            dev[3 * q + 2] = at(q, 3, rank) as u64;
            // Rank order from the next rank on, as the kernel walks it (every PE's first puts
            // go to different PEs).
            let r = (rank + 1 + q) % n;
            let pe = self.team.translate_pe(&self.pgas, r, Team::WORLD)?;
            sends.push(Send {
                pe: pe.ok_or_else(|| Error::InvalidConfig {
                    name: "team",
                    value: format!("{}", self.team.raw()),
                    reason: format!("its PE {r} has no number in the world team"),
                })?,
                src_at: at(rank, 1, r),
                count: at(rank, 0, r),
                dst_at: at(r, 3, rank),
            });
        }
        // The most any member sends in all, and the longest source and destination any
        // member's counts and displacements reach.
        let (mut max_sent, mut src_len, mut dst_len) = (0, 0, 0);
        for p in 0..n {
            max_sent = max_sent.max((0..n).map(|q| at(p, 0, q)).sum::<usize>());
            for q in 0..n {
                src_len = src_len.max(at(p, 1, q) + at(p, 0, q));
                dst_len = dst_len.max(at(p, 3, q) + at(p, 2, q));
            }
        }
        let table = self
            .pgas
            .stream()
            .clone_htod(&dev)
            .map_err(Error::cuda("uploading the all-to-all-v layout"))?;
        // The address is taken once, here, outside any capture: cudarc's event tracking then
        // has nothing left to order (the upload is complete).
        let stream = self.pgas.stream();
        let (ptr, guard) = table.device_ptr(stream);
        drop(guard);
        stream
            .synchronize()
            .map_err(Error::cuda("uploading the all-to-all-v layout"))?;
        Ok(AllToAllLayout {
            comm: self.id,
            table_at: LocalTable { ptr, len: 3 * n },
            _table: table,
            src_len,
            dst_len,
            max_sent,
            sends,
        })
    }

    /// All-to-all-v by an agreed `layout`, on `how`'s stream ([`Options`]; the algorithm is
    /// the call's own, so [`Algorithm::Auto`]; capturable once prewarmed). Returns the
    /// algorithm used: `TwoShot` (peer stores) or, where some peer is not load/store
    /// reachable, `Nvshmem` (RMA). Each rank stores its segment for rank `q` into `q`'s `dst` at
    /// the displacement `q` gave, by peer stores with the flag protocol, so when it completes on
    /// a PE every segment it receives has arrived. Elements of `dst` outside the receive regions
    /// are left as they were.
    ///
    /// `src` and `dst` name where the layout's offsets start; their lengths may differ from PE
    /// to PE (each PE's view of what it sends and receives, say), as long as every PE's `src`
    /// and `dst` start at the same element of the same symmetric tensors. What the call
    /// touches is the layout's reach from those starts: [`AllToAllLayout::src_len`] and
    /// [`AllToAllLayout::dst_len`] elements (the largest of any member), which must lie within
    /// the tensors (their [`SymRegion::extent`]): the same verdict on every PE, since it depends
    /// only on the agreed layout and the tensors, never on a PE's own lengths.
    ///
    /// Errors, before anything is launched: a PE that is not in the team, an algorithm other
    /// than `Auto`, a layout agreed on another communicator, a layout that reaches past the end of the tensor `src` or `dst` is
    /// part of, the reaches of `dst` and `src` overlapping, `dst` not in the symmetric heap.
    /// Where some peer is not load/store reachable, the segments go by NVSHMEM RMA instead (see
    /// `all_to_all_v_rma`): `src` must then be symmetric too, and a stream being captured into a
    /// CUDA graph is refused (that path runs eagerly only).
    pub fn all_to_all_v<'s, T: AllReduceElem>(
        &mut self, dst: &mut impl SymRegion<T>, src: &impl SymRegion<T>, layout: &AllToAllLayout,
        how: impl Into<Options<'s>>,
    ) -> Result<Algorithm> {
        let how = how.into();
        how.auto_only("all-to-all-v algorithm")?;
        self.on_stream(how, |c, stream, _| c.exchange_v(stream, dst, src, layout))
    }

    /// [`Comm::all_to_all_v`] on `stream`.
    fn exchange_v<T: AllReduceElem>(
        &mut self, stream: &CudaStream, dst: &mut impl SymRegion<T>, src: &impl SymRegion<T>,
        layout: &AllToAllLayout,
    ) -> Result<Algorithm> {
        self.member()?;
        if layout.comm != self.id {
            return Err(Error::InvalidConfig {
                name: "all-to-all-v layout",
                value: format!(
                    "agreed on communicator {}, used on communicator {}",
                    layout.comm, self.id
                ),
                reason: "a layout belongs to the communicator whose team agreed it and cannot be \
                         used on another communicator; make one with all_to_all_layout on this \
                         communicator"
                    .to_string(),
            });
        }
        let reach = |what: &str, extent: usize, need: usize| Error::InvalidConfig {
            name: "all-to-all-v buffers",
            value: format!("a {what} with {extent} elements to the end of its tensor"),
            reason: format!(
                "the layout's offsets and counts reach element {need} of some member's {what}; \
                 pass a {what} that starts at the same element of a tensor at least that long \
                 on every PE"
            ),
        };
        let src_reach = Region::reaching(src, layout.src_len)
            .ok_or_else(|| reach("source", src.extent(), layout.src_len))?;
        let mut dst_reach = Region::reaching(&*dst, layout.dst_len)
            .ok_or_else(|| reach("destination", dst.extent(), layout.dst_len))?;
        if !self.p2p {
            self.all_to_all_v_rma(stream, &dst_reach, &src_reach, layout)?;
            return Ok(Algorithm::Nvshmem);
        }
        self.check_movement("all-to-all-v", &dst_reach, &src_reach, Reached::Destination)?;
        if layout.max_sent == 0 {
            return Ok(Algorithm::TwoShot);
        }
        let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
        self.launch_p2p(
            stream,
            move_kernels::<T>().all_to_all_v,
            &[],
            &mut dst_reach,
            &src_reach,
            Between::Table(&layout.table_at),
            layout.max_sent * std::mem::size_of::<T>(),
            &offsets16(s, d),
        )?;
        Ok(Algorithm::TwoShot)
    }
}

impl Comm {
    /// [`Comm::all_to_all_v`] where some peer is not load/store reachable: a team barrier
    /// (every member is in the call, so its receive regions are free, as the kernel's entry
    /// flags say), one NVSHMEM put per segment (`nvshmemx_putmem_nbi_on_stream`, which the proxy
    /// carries over the remote transport), then a team barrier, which completes the puts and
    /// tells every receiver that its segments have landed. Eager only (NVSHMEM's `on_stream`
    /// calls are not captured here).
    fn all_to_all_v_rma<T>(
        &mut self, stream: &CudaStream, dst: &Region<T>, src: &Region<T>, layout: &AllToAllLayout,
    ) -> Result<()> {
        let size = std::mem::size_of::<T>();
        check_apart(
            "all-to-all-v",
            dst.as_device_ptr(),
            dst.len() * size,
            src.as_device_ptr(),
            src.len() * size,
        )?;
        self.check_symmetric(
            "the all-to-all-v destination (peers put into it)",
            dst.as_device_ptr(),
            dst.len() * size,
        )?;
        self.check_symmetric(
            "the all-to-all-v source (NVSHMEM puts from it)",
            src.as_device_ptr(),
            src.len() * size,
        )?;
        refuse_capture(
            stream,
            "the all-to-all-v over NVSHMEM RMA (a peer off NVLink)",
        )?;
        self.team.barrier_on(&self.pgas, stream)?;
        for s in layout.sends.iter().filter(|s| s.count > 0) {
            let to = Region::within(dst, s.dst_at, s.count);
            let from = Region::within(src, s.src_at, s.count);
            self.pgas.put_nbi_on(stream, &to, &from, s.pe)?;
        }
        self.team.barrier_on(&self.pgas, stream)
    }
}

/// Word `q` of what `what` (0 send counts, 1 send displacements, 2 receive counts, 3 receive
/// displacements) in team rank `p`'s row of the gathered `rows`.
fn cell(rows: &[u64], n: usize, p: usize, what: usize, q: usize) -> u64 {
    rows[p * row_words(n) + 1 + what * n + q]
}

/// Checks the gathered rows (`n` of [`row_words`] each): every member's
/// slices of the team's length, rank `p`'s send count to `q` equal to `q`'s receive count from
/// `p`, receive regions apart, no offset + count past `usize`. The same rows give the same
/// verdict on every member. `lens`: this PE's slice lengths (for the message).
fn check_layout(rows: &[u64], n: usize, lens: [usize; 4]) -> Result<()> {
    let row = row_words(n);
    let bad = |reason: String| Error::InvalidConfig {
        name: "all-to-all-v layout",
        value: format!("counts and displacements of {n} PEs"),
        reason,
    };
    let short: Vec<usize> = (0..n).filter(|&p| rows[p * row] != 0).collect();
    if !short.is_empty() {
        return Err(bad(format!(
            "team ranks {short:?} passed count or displacement slices that are not one per PE \
             of the team ({n}; this PE passed {lens:?}); pass {n} of each on every PE"
        )));
    }
    let at = |p: usize, what: usize, q: usize| cell(rows, n, p, what, q);
    for p in 0..n {
        for q in 0..n {
            if at(p, 0, q) != at(q, 2, p) {
                return Err(bad(format!(
                    "team rank {p} sends {} elements to rank {q}, but rank {q} expects {} from \
                     rank {p}; send_counts[q] on rank p must equal recv_counts[p] on rank q",
                    at(p, 0, q),
                    at(q, 2, p)
                )));
            }
            for (what, count, displ) in [("send", 0, 1), ("receive", 2, 3)] {
                let end = at(p, count, q).checked_add(at(p, displ, q));
                if end.is_none_or(|e| e > usize::MAX as u64) {
                    return Err(bad(format!(
                        "team rank {p}'s {what} displacement {} + count {} for rank {q} \
                         overflows",
                        at(p, displ, q),
                        at(p, count, q)
                    )));
                }
            }
        }
        // Receive regions of rank `p`, by offset: each must end before the next starts.
        let mut regions: Vec<(u64, u64, usize)> = (0..n)
            .filter(|&q| at(p, 2, q) > 0)
            .map(|q| (at(p, 3, q), at(p, 3, q) + at(p, 2, q), q))
            .collect();
        regions.sort_unstable();
        for w in regions.windows(2) {
            if w[0].1 > w[1].0 {
                return Err(bad(format!(
                    "team rank {p} receives from ranks {} and {} into overlapping elements \
                     ({}..{} and {}..{}); give each sender its own region",
                    w[0].2, w[1].2, w[0].0, w[0].1, w[1].0, w[1].1
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_layout;
    use crate::coll::comm::row_words;

    /// Rows of `n` members from their (send counts, send displs, recv counts, recv displs).
    fn rows(members: &[[Vec<u64>; 4]]) -> Vec<u64> {
        let mut out = Vec::new();
        for m in members {
            out.push(0);
            for s in m {
                out.extend(s);
            }
        }
        out
    }

    #[test]
    fn a_layout_is_checked_across_members() {
        // Rank 0 sends 1 to itself and 2 to rank 1; rank 1 sends 3 to rank 0 and 0 to itself.
        let good = rows(&[
            [vec![1, 2], vec![0, 1], vec![1, 3], vec![0, 1]],
            [vec![3, 0], vec![0, 3], vec![2, 0], vec![0, 2]],
        ]);
        assert_eq!(good.len(), 2 * row_words(2));
        assert!(check_layout(&good, 2, [2; 4]).is_ok());
        // Rank 1 expects 4 from rank 0, which sends 2.
        let mismatch = rows(&[
            [vec![1, 2], vec![0, 1], vec![1, 3], vec![0, 1]],
            [vec![3, 0], vec![0, 3], vec![4, 0], vec![0, 4]],
        ]);
        let e = check_layout(&mismatch, 2, [2; 4]).unwrap_err().to_string();
        assert!(
            e.contains("rank 0 sends 2 elements to rank 1, but rank 1 expects 4"),
            "{e}"
        );
        // Rank 0 receives its own 1 element at 0 and rank 1's 3 at 0 as well.
        let overlap = rows(&[
            [vec![1, 2], vec![0, 1], vec![1, 3], vec![0, 0]],
            [vec![3, 0], vec![0, 3], vec![2, 0], vec![0, 2]],
        ]);
        let e = check_layout(&overlap, 2, [2; 4]).unwrap_err().to_string();
        assert!(e.contains("overlapping"), "{e}");
        // A member whose slices were not one per PE.
        let mut short = good.clone();
        short[row_words(2)] = 1;
        let e = check_layout(&short, 2, [2, 2, 3, 2])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("team ranks [1]") && e.contains("[2, 2, 3, 2]"),
            "{e}"
        );
        // Offset + count past u64.
        let huge = rows(&[
            [vec![1, 2], vec![u64::MAX, 1], vec![1, 3], vec![0, 1]],
            [vec![3, 0], vec![0, 3], vec![2, 0], vec![0, 2]],
        ]);
        let e = check_layout(&huge, 2, [2; 4]).unwrap_err().to_string();
        assert!(e.contains("overflows"), "{e}");
    }
}
