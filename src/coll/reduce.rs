//! The reducing collectives of a [`Comm`]: all-reduce (by each algorithm, also in place),
//! reduce-scatter, and all-gather (two-shot's halves as kernels of their own).

use super::comm::{
    check_chunks, reached_by, refuse_capture, Algorithm, Between, Comm, LlShape, LL_MAX_BYTES,
    PUSH_MAX_BYTES, PUSH_MIN_BYTES,
};
use super::elem::{check_op, op_code, AllReduceElem};
use super::options::Options;
use super::region::{check_apart, check_same_len, offsets16, Reached, Region};
use super::specs::move_kernels;
use cudarc::driver::CudaStream;

use crate::{Error, ReduceOp, Result, SymRegion};

impl Comm {
    /// Element-wise reduction of every member's `src` into every member's `dst`, by `how`'s
    /// algorithm on its stream ([`Options`]). Returns the algorithm used. When it completes on
    /// a PE, no peer reads that PE's `src` any more.
    ///
    /// Errors, before anything is launched: a PE that is not in the team, `dst` and `src` of
    /// different lengths, a bitwise op on a float type, one-shot in place (or overlapping
    /// buffers), a peer-to-peer algorithm when a peer is not reachable, NVSHMEM's algorithm on
    /// another stream. Lengths, types and ops that differ between PEs cannot be seen here:
    /// they are the caller's contract, as in NCCL.
    pub fn all_reduce<'s, T: AllReduceElem>(
        &mut self, dst: &mut impl SymRegion<T>, src: &impl SymRegion<T>, op: ReduceOp,
        how: impl Into<Options<'s>>,
    ) -> Result<Algorithm> {
        let src = Region::<T>::of(src);
        self.on_stream(how, |c, stream, algorithm| {
            c.reduce_into(stream, dst, &src, op, algorithm)
        })
    }

    /// All-reduce of `x` into itself (two-shot, low latency or NVSHMEM's: one-shot cannot run
    /// in place), as [`Comm::all_reduce`].
    pub fn all_reduce_in_place<'s, T: AllReduceElem>(
        &mut self, x: &mut impl SymRegion<T>, op: ReduceOp, how: impl Into<Options<'s>>,
    ) -> Result<Algorithm> {
        let src = Region::<T>::of(&*x);
        self.on_stream(how, |c, stream, algorithm| {
            c.reduce_into(stream, x, &src, op, algorithm)
        })
    }

    /// An all-reduce of `src` into `dst` (`algorithm` resolved and launched); the in-place
    /// forms pass `dst` as `src`.
    fn reduce_into<T: AllReduceElem>(
        &mut self, stream: &CudaStream, dst: &mut impl SymRegion<T>, src: &Region<T>, op: ReduceOp,
        algorithm: Algorithm,
    ) -> Result<Algorithm> {
        let algorithm = self.all_reduce_algorithm(dst, src, op, algorithm)?;
        if src.is_empty() {
            return Ok(algorithm);
        }
        let bytes = src.len() * std::mem::size_of::<T>();
        let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
        let in_place = d == s;
        let spec = match algorithm {
            Algorithm::Hierarchical => {
                if let Some(h) = self.hier.as_mut() {
                    h.all_reduce(stream, dst, src, op, &mut self.scratch)?;
                }
                return Ok(algorithm);
            }
            Algorithm::Nvshmem => {
                refuse_capture(stream, "NVSHMEM's reduction")?;
                if in_place {
                    // NVSHMEM's on-stream reduction in place gave each value reduced twice on 4
                    // PEs (the differential test): reduce into the scratch, copy back.
                    let (tmp, _) = self.scratch.regions::<T>(stream, src.len(), 0)?;
                    self.pgas.reduce_on(stream, self.team, op, &tmp, src)?;
                    self.pgas.put_on(stream, &*dst, &tmp, self.pgas.my_pe())?;
                } else {
                    self.pgas.reduce_on(stream, self.team, op, &*dst, src)?;
                }
                return Ok(algorithm);
            }
            _ if !self.p2p => {
                return Err(Error::InvalidConfig {
                    name: "algorithm",
                    value: format!("{algorithm:?}"),
                    reason: "a PE of the team is not load/store reachable from this one (no \
                             NVLink or peer access); use Algorithm::Nvshmem or Auto"
                        .to_owned(),
                })
            }
            Algorithm::LowLatency => {
                let src = Region::of(src);
                let shape = LlShape::new(src.len(), 1, 0);
                let spec = T::KERNELS.low_latency;
                self.launch_ll(stream, (spec, op_code(op)), dst, &src, &[], shape)?;
                return Ok(algorithm);
            }
            Algorithm::OneShot => T::KERNELS.one_shot,
            _ if self.two_shot_variant(stream, dst, src, op)? => return Ok(algorithm),
            _ => T::KERNELS.two_shot,
        };
        // The 16-byte data path's offsets (see `kernels/`); one-shot reduces the whole of `src`
        // (its `chunk` 0), two-shot takes no `chunk`.
        let [sb, db] = offsets16(s, d);
        let scalars = [sb, db, 0];
        let (work, scalars) = if algorithm == Algorithm::OneShot {
            (bytes, &scalars[..])
        } else {
            (bytes.div_ceil(self.n), &scalars[..2])
        };
        self.launch_p2p(
            stream,
            spec,
            op_code(op),
            dst,
            src,
            Between::Nothing,
            work,
            scalars,
        )?;
        Ok(algorithm)
    }

    /// `algorithm` for an all-reduce of `src` into `dst`, `Auto` resolved, after the checks
    /// every PE makes alike (membership, lengths, the reduction, the buffers' overlap, the
    /// algorithm's limits).
    fn all_reduce_algorithm<T: AllReduceElem>(
        &self, dst: &impl SymRegion<T>, src: &Region<T>, op: ReduceOp, algorithm: Algorithm,
    ) -> Result<Algorithm> {
        self.member()?;
        check_same_len("the all-reduce destination (the source's length)", dst, src)?;
        check_op::<T>(op)?;
        let bytes = src.len() * std::mem::size_of::<T>();
        let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
        let in_place = d == s;
        let overlap = d < s + bytes as u64 && s < d + bytes as u64;
        let divides = self
            .hier
            .as_ref()
            .is_some_and(|h| src.len().is_multiple_of(h.group()));
        let algorithm = match algorithm {
            Algorithm::Auto => match self.auto_algorithm(bytes, in_place) {
                // A length the groups do not split: NVSHMEM's over the whole team.
                Algorithm::Hierarchical if !divides => Algorithm::Nvshmem,
                a => a,
            },
            Algorithm::Hierarchical if !divides => {
                return Err(Error::InvalidConfig {
                    name: "algorithm",
                    value: format!("Hierarchical for {} elements", src.len()),
                    reason: match self.hierarchy() {
                        Some(g) => format!(
                            "the hierarchical all-reduce splits the data over the {g} PEs of a                              node, so the length must be a multiple of {g}; use Algorithm::Auto                              or Nvshmem"
                        ),
                        None => "this communicator's team does not span several nodes (it must                                  be Team::WORLD with groups of consecutive PEs reachable only                                  inside their group); use Algorithm::Auto"
                            .to_owned(),
                    },
                });
            }
            a => a,
        };
        let ll_max = self.low_latency_max_bytes();
        if algorithm == Algorithm::LowLatency && bytes > ll_max {
            return Err(Error::InvalidConfig {
                name: "algorithm",
                value: format!("LowLatency for {bytes} bytes"),
                reason: format!(
                    "the low-latency all-reduce takes at most {ll_max} bytes on this GPU \
                     (LL_MAX_BYTES, {LL_MAX_BYTES}, or less on a GPU of fewer SMs: \
                     Comm::low_latency_max_bytes); use Algorithm::Auto, OneShot or TwoShot"
                ),
            });
        }
        if overlap && !(in_place && algorithm != Algorithm::OneShot) {
            return Err(Error::InvalidConfig {
                name: "all-reduce buffers",
                value: format!("{algorithm:?} with dst {d:#x}, src {s:#x} ({bytes} bytes)"),
                reason: if in_place {
                    "one-shot reads every peer's input while peers write their outputs, so it \
                     cannot run in place; use Algorithm::TwoShot (or Auto)"
                        .to_owned()
                } else {
                    "dst and src overlap without being the same buffer; pass the same buffer \
                     (in place) or two apart"
                        .to_owned()
                },
            });
        }
        Ok(algorithm)
    }

    /// The two-shot all-reduce's faster forms, where they apply: the pushed two-shot (large,
    /// aligned, over every PE) or the low-latency two-shot (a chunk fits the low-latency
    /// scratch). `false`: neither applies, and the plain two-shot runs.
    fn two_shot_variant<T: AllReduceElem>(
        &mut self, stream: &CudaStream, dst: &mut impl SymRegion<T>, src: &Region<T>, op: ReduceOp,
    ) -> Result<bool> {
        let bytes = src.len() * std::mem::size_of::<T>();
        let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
        let size = std::mem::size_of::<T>();
        let m = src.len().div_ceil(self.n).next_multiple_of(16 / size);
        let aligned = s % 16 == 0 && d % 16 == 0;
        // The pushed two-shot from PUSH_MIN_BYTES where both buffers start on 16-byte
        // boundaries (and, during a graph capture, its stage needs not grow), in
        // kernels of at most PUSH_MAX_BYTES.
        if aligned && self.n > 1 && self.all_pes && bytes >= PUSH_MIN_BYTES {
            let piece = PUSH_MAX_BYTES / size;
            let most = src
                .len()
                .min(piece)
                .div_ceil(self.n)
                .next_multiple_of(16 / size);
            if let Some(stage) = self.push_stage.region::<T>(stream, self.n * most)? {
                let dst = Region::of(&*dst);
                for lo in (0..src.len()).step_by(piece) {
                    let len = piece.min(src.len() - lo);
                    let m = len.div_ceil(self.n).next_multiple_of(16 / size);
                    self.launch_p2p(
                        stream,
                        T::KERNELS.two_shot_push,
                        op_code(op),
                        &mut Region::within(&dst, lo, len),
                        &Region::within(src, lo, len),
                        Between::Stage(Region::within(&stage, 0, self.n * m)),
                        len * size,
                        &[m as u32],
                    )?;
                }
                return Ok(true);
            }
        }
        // The low-latency two-shot where a chunk fits the low-latency scratch, both
        // buffers start on 16-byte boundaries and every PE's share of a block fits its
        // shared memory: no leave handshake, no peer stores to fence.
        if aligned && self.ll_fits(m * size, self.n, self.n + 1) {
            let src = Region::of(src);
            let shape = LlShape {
                flags: true,
                ..LlShape::new(m, self.n, self.n + 1)
            };
            let spec: (_, &[i128]) = (T::KERNELS.two_shot_ll, op_code(op));
            self.launch_ll(stream, spec, dst, &src, &[m as u32], shape)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Reduce-scatter: team rank `r`'s `dst` gets the element-wise reduction of chunk `r` of
    /// every member's `src` (elements `r * dst.len()` to `(r + 1) * dst.len()`), so
    /// `src.len() == n * dst.len()`, on `how`'s stream ([`Options`]; the algorithm is the
    /// call's own, so [`Algorithm::Auto`]). Returns the algorithm used. Two-shot's first half: each rank loads its chunk
    /// from every peer's `src` over NVLink and reduces it into its own `dst`, with the same flag
    /// protocol, so when it completes on a PE no peer reads that PE's `src` any more. Up to
    /// [`Comm::low_latency_max_bytes`] a chunk (`dst`'s bytes) it takes the low-latency protocol
    /// instead: chunk `q` of `src` over the lines to rank `q` only, which reduces what it
    /// receives in rank order (a block stages at most `LL_BYTES_PER_BLOCK` of each chunk; one
    /// crossing, no handshake). Where a member is not load/store
    /// reachable, NVSHMEM's reduce-scatter on the stream carries it instead, or, over a
    /// `Team::WORLD` spread across nodes ([`Comm::hierarchy`]), NVSHMEM's across nodes and
    /// the peer-to-peer one inside the node (eager only).
    ///
    /// Errors, before anything is launched: a PE that is not in the team, an algorithm other
    /// than `Auto`, a `src` length that is not a multiple of the team size or not
    /// `n * dst.len()`, a bitwise op on a float type, `dst` and `src` overlapping (no in-place
    /// form yet), `src` not in the symmetric heap.
    pub fn reduce_scatter<'s, T: AllReduceElem>(
        &mut self, dst: &mut impl SymRegion<T>, src: &impl SymRegion<T>, op: ReduceOp,
        how: impl Into<Options<'s>>,
    ) -> Result<Algorithm> {
        let how = how.into();
        how.auto_only("reduce-scatter algorithm")?;
        self.on_stream(how, |c, stream, _| c.scatter_into(stream, dst, src, op))
    }

    /// [`Comm::reduce_scatter`] on `stream`.
    fn scatter_into<T: AllReduceElem>(
        &mut self, stream: &CudaStream, dst: &mut impl SymRegion<T>, src: &impl SymRegion<T>,
        op: ReduceOp,
    ) -> Result<Algorithm> {
        self.member()?;
        let n = self.n;
        check_chunks(
            "reduce-scatter source",
            src.len(),
            n,
            Some((
                "the reduce-scatter destination (the source's length / the team's PEs)",
                dst.len(),
            )),
        )?;
        check_op::<T>(op)?;
        if !self.p2p {
            // A peer off NVLink: NVSHMEM's reduce-scatter, which its proxy carries.
            let size = std::mem::size_of::<T>();
            let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
            check_apart("reduce-scatter", d, dst.len() * size, s, src.len() * size)?;
            if let Some(h) = self.hier.as_mut() {
                h.reduce_scatter(stream, dst, src, op, &mut self.scratch)?;
                return Ok(Algorithm::Hierarchical);
            }
            refuse_capture(stream, "NVSHMEM's reduce-scatter")?;
            self.pgas
                .reduce_scatter_on(stream, self.team, op, &*dst, src)?;
            return Ok(Algorithm::Nvshmem);
        }
        self.check_movement("reduce-scatter", &*dst, src, Reached::Source)?;
        let size = std::mem::size_of::<T>();
        let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
        if dst.is_empty() {
            return Ok(Algorithm::TwoShot);
        }
        // Limited by a chunk, what each rank's lines to a peer carry, and by the shared memory
        // that stages `n + 1` shares: up to there it beats the handshaking form (`docs/coll.md`).
        if n > 1 && self.ll_fits(dst.len() * size, n, n + 1) {
            // Latency-bound: chunk `q` of `src` over the low-latency lines to rank `q`.
            let src = Region::<T>::of(src);
            let [sb, db] = offsets16(s, d);
            let scalars = [n as u32, sb, db];
            let shape = LlShape::new(dst.len(), n, n + 1);
            self.launch_ll(
                stream,
                (T::KERNELS.low_latency_reduce_scatter, op_code(op)),
                dst,
                &src,
                &scalars,
                shape,
            )?;
            return Ok(Algorithm::LowLatency);
        }
        let work = dst.len() * size;
        let src = Region::<T>::of(src);
        let [sb, db] = offsets16(s, d);
        // The one-shot kernel over chunk `rank` of `src` (its `chunk` 1).
        self.launch_p2p(
            stream,
            T::KERNELS.one_shot,
            op_code(op),
            dst,
            &src,
            Between::Nothing,
            work,
            &[sb, db, 1],
        )?;
        Ok(Algorithm::TwoShot)
    }

    /// All-gather: every member's `dst` gets every member's `src`, concatenated in team rank
    /// order (rank `r`'s at elements `r * src.len()` on), so `dst.len() == n * src.len()`, by
    /// `how`'s algorithm on its stream ([`Options`]; capturable once prewarmed, but for
    /// NVSHMEM's and the hierarchical form). Returns the algorithm used. When it completes on a
    /// PE every peer's chunk has arrived in its `dst` and no peer writes it any more. [`Algorithm::LowLatency`] (up to [`super::LL_GATHER_MAX_BYTES`] a PE on 2 to 32
    /// PEs): a block per `LL_BYTES_PER_BLOCK / n` of a PE's data; each rank's data with the call's flag in
    /// 16-byte lines into every peer's scratch, gathered into shared memory by the PE that
    /// polls them and copied into `dst`: one NVLink crossing, no handshake.
    /// [`Algorithm::OneShot`]: each PE loads every peer's `src` into its own `dst` (the
    /// pulling form: `src` must be in the symmetric heap; no peer stores, so no release fence
    /// before the leave signal). [`Algorithm::TwoShot`]: each rank stores its `src` into its
    /// chunk of every peer's `dst` (two-shot's second half, the pushing form: `dst` must be in
    /// the symmetric heap). [`Algorithm::Nvshmem`]: NVSHMEM's `fcollect` on `stream` (eager
    /// only). [`Algorithm::Auto`]: low latency where it fits, the pulling form while `dst`
    /// holds at most [`super::MOVE_PULL_MAX_BYTES`], the pushing form above; where a member is
    /// not load/store reachable ([`Comm::peers_reachable`] false: another node, no peer
    /// access, or `PGAS_PEER_ACCESS`), NVSHMEM's `fcollect`, or, over a `Team::WORLD` spread
    /// across nodes ([`Comm::hierarchy`]), the peer-to-peer all-gather inside the node and
    /// NVSHMEM's across nodes (eager only; returned as [`Algorithm::Hierarchical`]).
    ///
    /// Errors, before anything is launched: a PE that is not in the team, a `dst` length that
    /// is not a multiple of the team size or not `n * src.len()`, `dst` and `src` overlapping
    /// (no in-place form yet), the buffer the peers reach (`src` when pulling, `dst`
    /// otherwise) not in the symmetric heap, low latency past its size or on one PE,
    /// [`Algorithm::Hierarchical`] asked for, a peer-to-peer algorithm when a peer is not
    /// reachable, and NVSHMEM's during a capture or on a stream of another GPU.
    pub fn all_gather<'s, T: AllReduceElem>(
        &mut self, dst: &mut impl SymRegion<T>, src: &impl SymRegion<T>,
        how: impl Into<Options<'s>>,
    ) -> Result<Algorithm> {
        self.on_stream(how, |c, stream, algorithm| {
            c.gather_into(stream, dst, src, algorithm)
        })
    }

    /// [`Comm::all_gather`] by `algorithm` on `stream`.
    fn gather_into<T: AllReduceElem>(
        &mut self, stream: &CudaStream, dst: &mut impl SymRegion<T>, src: &impl SymRegion<T>,
        algorithm: Algorithm,
    ) -> Result<Algorithm> {
        self.member()?;
        let n = self.n;
        check_chunks(
            "all-gather destination",
            dst.len(),
            n,
            Some((
                "the all-gather source (the destination's length / the team's PEs)",
                src.len(),
            )),
        )?;
        let size = std::mem::size_of::<T>();
        let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
        let (sbytes, dbytes) = (src.len() * size, dst.len() * size);
        if !self.p2p && algorithm == Algorithm::Auto {
            if let Some(h) = self.hier.as_mut() {
                check_apart("all-gather", d, dbytes, s, sbytes)?;
                h.all_gather(stream, dst, src, &mut self.scratch)?;
                return Ok(Algorithm::Hierarchical);
            }
        }
        // Every PE's share of a block staged in its shared memory.
        let ll = self.n > 1 && self.ll_fits(sbytes, self.n, self.n);
        let algorithm =
            self.movement_algorithm("all-gather", algorithm, (ll, sbytes, "a PE"), dbytes)?;
        if algorithm == Algorithm::Nvshmem {
            // NVSHMEM's fcollect, which its proxy carries where a peer is off NVLink.
            check_apart("all-gather", d, dbytes, s, sbytes)?;
            refuse_capture(stream, "NVSHMEM's all-gather (fcollect)")?;
            self.pgas.fcollect_on(stream, self.team, &*dst, src)?;
            return Ok(algorithm);
        }
        self.check_movement("all-gather", &*dst, src, reached_by(algorithm))?;
        if src.is_empty() {
            return Ok(algorithm);
        }
        let k = move_kernels::<T>();
        let len = src.len();
        let src = Region::<T>::of(src);
        let offsets = offsets16(s, d);
        match algorithm {
            Algorithm::LowLatency => {
                // Latency-bound: the low-latency protocol, no handshake.
                let scalars = [n as u32, offsets[1]];
                let spec = k.low_latency_gather;
                let shape = LlShape::new(len, n, n);
                self.launch_ll(stream, (spec, &[]), dst, &src, &scalars, shape)?
            }
            Algorithm::OneShot => {
                // Every rank's whole `src` (`pull_chunks`' `personal` 0, every rank). Each PE
                // loads the whole of `dst`: the grid grows with it.
                let scalars = [offsets[0], offsets[1], 0, 0, n as u32];
                self.launch_moving(stream, k.pull_chunks, dst, &src, dbytes, &scalars)?
            }
            _ => self.launch_moving(stream, k.all_gather, dst, &src, sbytes, &offsets)?,
        }
        Ok(algorithm)
    }
}
