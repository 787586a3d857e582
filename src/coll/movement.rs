//! Broadcast and all-to-all: the collectives that only move data. Their kernels, and
//! all-gather's, exist per element size (instances for `u8` .. `u64`), not per type, so a call
//! passes its buffers as unsigned integers of the element's width.

use cudarc::driver::CudaStream;

use super::comm::{
    check_chunks, reached_by, refuse_capture, Algorithm, Comm, LlShape, BROADCAST_RELAY_MIN_BYTES,
    LL_BYTES_PER_BLOCK, LL_GATHER_MAX_BYTES, LL_REGION_BYTES, LL_SHARED_MAX_BYTES,
    MOVE_PULL_MAX_BYTES,
};
use super::elem::AllReduceElem;
use super::options::Options;
use super::region::{check_apart, check_same_len, offsets16, Region};
use super::specs::move_kernels;
use crate::{Error, Result, SymRegion};

impl Comm {
    /// Broadcast: every member's `dst` gets team rank `root`'s `src`, by `how`'s algorithm on
    /// its stream ([`Options`]; capturable once prewarmed). Returns the algorithm used. Every
    /// member passes the same symmetric `src` (only the root's is read) and a
    /// `dst` of the same length; `dst` may be `src` (in place: the root then copies nothing).
    /// [`Algorithm::OneShot`]: every PE loads the root's `src` over NVLink;
    /// [`Algorithm::TwoShot`]: on more than 2 PEs up to [`super::BROADCAST_RELAY_MAX_BYTES`],
    /// the relay over the low-latency lines (`team_broadcast_relay_block`: the root sends each
    /// other rank a chunk, which passes it on; no handshake); above, and on 2 PEs, each rank but
    /// the root (every rank on 2 PEs) loads its chunk of the root's `src` and stores that into
    /// every other PE's `dst` (`dst` must be symmetric); either way the root's links carry one
    /// copy instead of `n - 1`; [`Algorithm::Nvshmem`]: `nvshmemx_<type>_broadcast_on_stream`;
    /// [`Algorithm::LowLatency`] (up to [`super::LL_GATHER_MAX_BYTES`]): the root's data over
    /// the low-latency lines straight into the peers' `dst` (`team_broadcast_block`), one
    /// crossing and no handshake; [`Algorithm::Auto`]: low latency where it fits (on more than 2
    /// PEs below [`super::BROADCAST_RELAY_MIN_BYTES`]), then the relay, else as for
    /// [`Comm::all_reduce`] by size. When it completes on a PE, no peer reads the root's `src`
    /// or writes this PE's `dst` any more.
    ///
    /// Errors, before anything is launched: a PE that is not in the team, a `root` that is not
    /// a team rank, `dst` and `src` of different lengths or overlapping without being the same
    /// buffer, `src` (and for the handshaking two-shot `dst`) not in the symmetric heap where
    /// peers load or store it, a peer-to-peer algorithm when a peer is not reachable, NVSHMEM's
    /// algorithm on a stream of another GPU.
    pub fn broadcast<'s, T: AllReduceElem>(
        &mut self, dst: &mut impl SymRegion<T>, src: &impl SymRegion<T>, root: usize,
        how: impl Into<Options<'s>>,
    ) -> Result<Algorithm> {
        self.on_stream(how, |c, stream, algorithm| {
            c.broadcast_from(stream, dst, src, root, algorithm)
        })
    }

    /// [`Comm::broadcast`] by `algorithm` on `stream`.
    fn broadcast_from<T: AllReduceElem>(
        &mut self, stream: &CudaStream, dst: &mut impl SymRegion<T>, src: &impl SymRegion<T>,
        root: usize, algorithm: Algorithm,
    ) -> Result<Algorithm> {
        let rank = self.member()?;
        let (algorithm, relay) = self.broadcast_algorithm(dst, src, root, algorithm)?;
        let size = std::mem::size_of::<T>();
        let bytes = src.len() * size;
        let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
        if algorithm == Algorithm::Nvshmem {
            refuse_capture(stream, "NVSHMEM's broadcast")?;
            self.pgas
                .broadcast_on(stream, self.team, &*dst, src, root)?;
            return Ok(algorithm);
        }
        self.check_p2p("broadcast")?;
        let low_latency = algorithm == Algorithm::LowLatency;
        if low_latency || (algorithm == Algorithm::TwoShot && relay) {
            if bytes == 0 {
                return Ok(algorithm);
            }
            let spec = move_kernels::<T>().low_latency_broadcast;
            let src = Region::of(src);
            let mut shape = LlShape::new(src.len(), 1, 0);
            if !low_latency {
                // The relay's block sends a region's lines to each other rank.
                shape.block_max = LL_REGION_BYTES * (self.n - 1);
            }
            let scalars = [root as u32, u32::from(!low_latency)];
            self.launch_ll(stream, (spec, &[]), dst, &src, &scalars, shape)?;
            return Ok(algorithm);
        }
        self.check_symmetric("the broadcast source (peers load the root's)", s, bytes)?;
        if algorithm == Algorithm::TwoShot {
            self.check_symmetric(
                "the two-shot broadcast destination (peers store into it)",
                d,
                bytes,
            )?;
        }
        if src.is_empty() {
            return Ok(algorithm);
        }
        let k = move_kernels::<T>();
        let src = Region::of(src);
        let [sb, db] = offsets16(s, d);
        if algorithm == Algorithm::OneShot {
            // The root's whole `src` pulled (`pull_chunks` from rank `root` only); the root in
            // place has nothing to copy.
            let count = u32::from(d != s || rank != root);
            let scalars = [sb, db, 0, root as u32, count];
            self.launch_moving(stream, k.pull_chunks, dst, &src, bytes, &scalars)?;
        } else {
            // The shares' owners: every rank but the root past 2 PEs (see the kernel).
            let owners = if self.n > 2 { self.n - 1 } else { self.n };
            let scalars = [root as u32, u32::from(d != s), sb, db];
            let spec = k.broadcast_two_shot;
            self.launch_moving(stream, spec, dst, &src, bytes.div_ceil(owners), &scalars)?;
        }
        Ok(algorithm)
    }

    /// `algorithm` for a broadcast of `src` from `root`, `Auto` resolved, and whether the
    /// relay fits, after the checks every PE makes alike (the root, the lengths, the buffers'
    /// overlap, the algorithm's limits).
    fn broadcast_algorithm<T: AllReduceElem>(
        &self, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, root: usize, algorithm: Algorithm,
    ) -> Result<(Algorithm, bool)> {
        if root >= self.n {
            return Err(Error::InvalidConfig {
                name: "broadcast root",
                value: format!("{root}"),
                reason: format!(
                    "the root is a rank of the communicator's team, which has {} PEs; pass \
                     0..{}",
                    self.n, self.n
                ),
            });
        }
        check_same_len("the broadcast destination (the source's length)", dst, src)?;
        let size = std::mem::size_of::<T>();
        let bytes = src.len() * size;
        let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
        if d != s {
            check_apart("broadcast", d, bytes, s, bytes)?;
        }
        // The root's data straight into the peers' lines: nothing staged in shared memory.
        let ll_fits = self.n > 1 && self.ll_fits(bytes, 1, 0);
        let relay = self.relay_fits(bytes);
        let algorithm = match algorithm {
            Algorithm::Auto
                if self.peers_reachable()
                    && ll_fits
                    && (self.n == 2 || bytes < BROADCAST_RELAY_MIN_BYTES) =>
            {
                Algorithm::LowLatency
            }
            Algorithm::Auto if self.peers_reachable() && relay => Algorithm::TwoShot,
            // Broadcast has no hierarchical form: NVSHMEM's over the whole team.
            Algorithm::Auto => match self.auto_pass(bytes, false) {
                Algorithm::Hierarchical => Algorithm::Nvshmem,
                a => a,
            },
            Algorithm::Hierarchical => {
                return Err(Error::InvalidConfig {
                    name: "algorithm",
                    value: "Hierarchical".into(),
                    reason: "the hierarchical algorithm is an all-reduce's; broadcast takes \
                             Algorithm::Auto, LowLatency, OneShot, TwoShot or Nvshmem"
                        .into(),
                })
            }
            Algorithm::LowLatency if !ll_fits => {
                return Err(Error::InvalidConfig {
                    name: "algorithm",
                    value: format!("LowLatency for {bytes} bytes on {} PEs", self.n),
                    reason: format!(
                        "the low-latency broadcast takes at most LL_GATHER_MAX_BYTES \
                         ({LL_GATHER_MAX_BYTES}; less on a GPU of fewer SMs: \
                         Comm::low_latency_max_bytes) bytes, on more than one PE; use \
                         Algorithm::Auto, OneShot, TwoShot or Nvshmem"
                    ),
                })
            }
            a => a,
        };
        Ok((algorithm, relay))
    }

    /// All-to-all: chunk `q` of team rank `r`'s `src` (elements `q * m ..`,
    /// `m = src.len() / n`) lands as chunk `r` of rank `q`'s `dst`, by `how`'s algorithm on its
    /// stream ([`Options`]; capturable once prewarmed, but for NVSHMEM's). Returns the
    /// algorithm used.
    /// [`Algorithm::LowLatency`] (up to [`super::LL_GATHER_MAX_BYTES`] a chunk, `src.len() / n`,
    /// on 2 to 16 PEs and smaller chunks on more; 1 MiB of `src` on 4 PEs):
    /// chunk `q` of `src` over the low-latency lines to rank `q` only, straight into `dst` (a
    /// block stages `LL_BYTES_PER_BLOCK / n` of each chunk where the chunks need several), one crossing and
    /// no handshake; [`Algorithm::OneShot`]: each PE loads its chunk of every
    /// peer's `src` into its `dst` (the pulling form: `src` must be in the symmetric heap);
    /// [`Algorithm::TwoShot`]: each PE stores its chunks into the peers' `dst` (the pushing
    /// form: `dst` must be in the symmetric heap); [`Algorithm::Nvshmem`]: NVSHMEM's
    /// `alltoall` on `stream` (eager only); [`Algorithm::Auto`]: low latency where it fits,
    /// the pulling form up to [`super::MOVE_PULL_MAX_BYTES`], the pushing form above, and
    /// NVSHMEM's where a member is not load/store reachable (over a `Team::WORLD` spread over
    /// nodes, [`Comm::hierarchy`], the hierarchical one, returned as
    /// [`Algorithm::Hierarchical`]: this node's chunks by peer memory, the others by NVSHMEM's
    /// puts between two world barriers; eager only). Every form runs the handshakes of
    /// `docs/coll.md` ("Synchronization") or the low-latency protocol, so when it completes on
    /// a PE every peer's chunk has arrived in its `dst` and no peer reads its `src` any more.
    ///
    /// Errors, before anything is launched: a PE that is not in the team, `dst` and `src` of
    /// different lengths, a length that is not a multiple of the team size, `dst` and `src`
    /// overlapping (no in-place form), the buffer the peers reach (`src` when pulling, `dst`
    /// otherwise) not in the symmetric heap, low latency past its size or on one PE,
    /// [`Algorithm::Hierarchical`], a peer-to-peer algorithm when a peer is not reachable, and
    /// NVSHMEM's during a capture or on a stream of another GPU.
    pub fn all_to_all<'s, T: AllReduceElem>(
        &mut self, dst: &mut impl SymRegion<T>, src: &impl SymRegion<T>,
        how: impl Into<Options<'s>>,
    ) -> Result<Algorithm> {
        self.on_stream(how, |c, stream, algorithm| {
            c.exchange(stream, dst, src, algorithm)
        })
    }

    /// [`Comm::all_to_all`] by `algorithm` on `stream`.
    fn exchange<T: AllReduceElem>(
        &mut self, stream: &CudaStream, dst: &mut impl SymRegion<T>, src: &impl SymRegion<T>,
        algorithm: Algorithm,
    ) -> Result<Algorithm> {
        self.member()?;
        let n = self.n;
        check_same_len("the all-to-all destination (the source's length)", dst, src)?;
        check_chunks("all-to-all buffers", src.len(), n, None)?;
        let bytes = src.len() * std::mem::size_of::<T>();
        let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
        if !self.p2p && algorithm == Algorithm::Auto && self.hier.is_some() {
            // Across nodes: this node's chunks by peer memory, the rest by NVSHMEM's puts.
            check_apart("all-to-all", d, bytes, s, bytes)?;
            for (what, at) in [("destination", d), ("source", s)] {
                self.check_symmetric(&format!("the all-to-all {what} (NVSHMEM puts)"), at, bytes)?;
            }
            if let Some(h) = self.hier.as_mut() {
                h.all_to_all(stream, &*dst, src)?;
            }
            return Ok(Algorithm::Hierarchical);
        }
        // A block's share of each chunk staged both ways: limited by a chunk, what each rank's
        // lines to a peer carry, as the reduce-scatter.
        let ll = n > 1 && self.ll_fits(bytes / n, n, 2 * n);
        let algorithm = self.movement_algorithm(
            "all-to-all",
            algorithm,
            (
                ll,
                bytes / n,
                "a chunk (the source's length over the team's PEs)",
            ),
            bytes,
        )?;
        if algorithm == Algorithm::Nvshmem {
            check_apart("all-to-all", d, bytes, s, bytes)?;
            // NVSHMEM's alltoall, which its proxy carries where a peer is off NVLink.
            refuse_capture(stream, "NVSHMEM's all-to-all")?;
            self.pgas.alltoall_on(stream, self.team, &*dst, src)?;
            return Ok(algorithm);
        }
        self.check_movement("all-to-all", &*dst, src, reached_by(algorithm))?;
        if src.is_empty() {
            return Ok(algorithm);
        }
        let offsets = offsets16(s, d);
        let k = move_kernels::<T>();
        let src = Region::of(src);
        match algorithm {
            Algorithm::LowLatency => {
                // Latency-bound: chunk `q` of `src` over the low-latency lines to rank `q`.
                let scalars = [n as u32, offsets[0], offsets[1]];
                let spec = k.low_latency_all_to_all;
                let shape = LlShape::new(src.len() / n, n, 2 * n);
                self.launch_ll(stream, (spec, &[]), dst, &src, &scalars, shape)?
            }
            _ => {
                // One-shot pulls chunk `me` of every peer's `src` (`pull_chunks`' `personal`,
                // every rank), two-shot pushes this PE's chunks into the peers' `dst`.
                let pull = [offsets[0], offsets[1], 1, 0, n as u32];
                let (spec, scalars) = if algorithm == Algorithm::OneShot {
                    (k.pull_chunks, &pull[..])
                } else {
                    (k.all_to_all, &offsets[..])
                };
                self.launch_moving(stream, spec, dst, &src, bytes, scalars)?
            }
        }
        Ok(algorithm)
    }

    /// The algorithm an all-gather or all-to-all (`what`) takes for `algorithm`: `ll_fits`
    /// whether the low-latency form takes the call (`ll_bytes` of each `per`, for the refusal),
    /// `largest` the bytes of its larger buffer (the size [`Algorithm::Auto`] chooses by). An
    /// `Err` for low latency where it does not fit and for [`Algorithm::Hierarchical`] (the
    /// hierarchical all-gather is `Auto`'s choice over a `Team::WORLD` that spans nodes, taken
    /// before this).
    pub(super) fn movement_algorithm(
        &self, what: &str, algorithm: Algorithm, (ll_fits, ll_bytes, per): (bool, usize, &str),
        largest: usize,
    ) -> Result<Algorithm> {
        match algorithm {
            Algorithm::Auto if !self.p2p => Ok(Algorithm::Nvshmem),
            Algorithm::Auto if ll_fits => Ok(Algorithm::LowLatency),
            Algorithm::Auto if largest <= MOVE_PULL_MAX_BYTES => Ok(Algorithm::OneShot),
            Algorithm::Auto => Ok(Algorithm::TwoShot),
            Algorithm::LowLatency if !ll_fits => Err(Error::InvalidConfig {
                name: "algorithm",
                value: format!("LowLatency for {ll_bytes} bytes {per} on {} PEs", self.n),
                reason: format!(
                    "the low-latency {what} takes at most LL_GATHER_MAX_BYTES \
                     ({LL_GATHER_MAX_BYTES}; less on a GPU of fewer SMs: \
                     Comm::low_latency_max_bytes) bytes {per}, staged within \
                     LL_SHARED_MAX_BYTES ({LL_SHARED_MAX_BYTES}) of shared memory (a block's \
                     share, up to LL_BYTES_PER_BLOCK ({LL_BYTES_PER_BLOCK}) over the team's \
                     PEs, for each PE), on more than one PE; use Algorithm::Auto, OneShot \
                     (pull), TwoShot (push) or Nvshmem"
                ),
            }),
            Algorithm::Hierarchical => Err(Error::InvalidConfig {
                name: "algorithm",
                value: "Hierarchical".into(),
                reason: format!(
                    "the {what} takes Algorithm::Auto (hierarchical by itself where the team \
                     spans nodes), LowLatency, OneShot (pull), TwoShot (push) or Nvshmem"
                ),
            }),
            a => Ok(a),
        }
    }
}
