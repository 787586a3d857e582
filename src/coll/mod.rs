//! Collectives written in pgas: all-reduce, reduce-scatter and all-gather over a [`Team`] from
//! peer loads and stores over NVLink, synchronized with NVSHMEM signals instead of barriers,
//! called from the host on a stream (and so capturable into a CUDA graph).
//!
//! ```no_run
//! use pgas::coll::{Algorithm, Comm};
//! use pgas::prelude::*;
//!
//! # fn main() -> pgas::Result<()> {
//! let pgas = pgas::init()?;
//! let mut comm = Comm::new(&pgas, Team::WORLD)?; // collective over all PEs
//! let src = pgas.alloc_from(&vec![1.0f32; 1 << 20])?;
//! let mut dst = pgas.alloc::<f32>(1 << 20)?;
//! comm.all_reduce(&mut dst, &src, ReduceOp::Sum, Algorithm::Auto)?;
//! # Ok(())
//! # }
//! ```
//!
//! Algorithms ([`Algorithm`]): *one-shot* (each PE loads all peers' inputs and reduces: the
//! fewest steps, for small messages), *two-shot* (reduce-scatter by peer loads, then all-gather by
//! peer stores: a fraction of the traffic, for large ones), or *NVSHMEM's own*
//! (`nvshmemx_<type>_<op>_reduce_on_stream`, the fallback where peers are not load/store
//! reachable). [`Algorithm::Auto`] chooses by size. [`Comm::reduce_scatter`] and
//! [`Comm::all_gather`] are two-shot's halves as kernels of their own (peer-to-peer only). The
//! kernels and their flag protocol are in [`kernels`].

pub mod kernels;
mod layout;
mod movement;

pub use layout::AllToAllLayout;

use cudarc::driver::CudaStream;
use pgas_runtime::kernel::{KernelSpec, Variant};
use pgas_runtime::launch::{KernelArgs, Prewarm};
use pgas_runtime::CollectiveElem;

use crate::{Error, LaunchConfig, Pgas, ReduceOp, Result, SymRegion, SymTensor, Team};

/// How [`Comm::all_reduce`] reduces (and [`Comm::broadcast`] moves data: one-shot, two-shot,
/// NVSHMEM's or `Auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// All-reduce: low latency up to [`LL_MAX_BYTES`] (also in place), one-shot up to
    /// [`ONE_SHOT_MAX_BYTES`] ([`ONE_SHOT_MAX_BYTES_2PE`] in a team of two), two-shot above (in
    /// place: two-shot); NVSHMEM's own when some peer is not load/store reachable. Broadcast:
    /// the same without low latency.
    Auto,
    /// All-reduce only, up to [`LL_MAX_BYTES`]: every PE stores its data into every peer's
    /// scratch with the call's flag beside each 4 bytes, and polls its own (the LL protocol of
    /// `team_all_reduce_block`): one NVLink crossing, no handshake, no fence. Also in place.
    LowLatency,
    /// Every PE reads every peer's input and reduces (needs `dst` and `src` apart).
    OneShot,
    /// Reduce-scatter by peer loads, all-gather by peer stores (also in place).
    TwoShot,
    /// NVSHMEM's on-stream reduction (`nvshmemx_<type>_<op>_reduce_on_stream`), on any stream
    /// of the context's GPU.
    Nvshmem,
}

/// [`Algorithm::Auto`] takes one-shot up to this many bytes: one-shot's single pass wins while
/// latency dominates, two-shot's smaller traffic above.
pub const ONE_SHOT_MAX_BYTES: usize = 256 << 10;

/// The largest all-reduce [`Algorithm::LowLatency`] takes (and [`Algorithm::Auto`] gives it):
/// its scratch holds this much per call (twice over, per peer, in 16-byte lines of 8 data
/// bytes). Above, the data sent twice over (each 8 bytes in a 16-byte line) costs more than the
/// handshakes it saves.
pub const LL_MAX_BYTES: usize = 64 << 10;

/// Data bytes each block of a low-latency all-reduce handles (two 8-byte lines a thread).
const LL_BYTES_PER_BLOCK: usize = 8 << 10;

/// The largest `src` (bytes a PE) that [`Comm::all_gather`], [`Comm::reduce_scatter`],
/// [`Comm::all_to_all`] and [`Comm::broadcast`] move with the low-latency protocol: one block over
/// one region of the low-latency scratch, which holds 8 KiB.
pub const LL_GATHER_MAX_BYTES: usize = LL_BYTES_PER_BLOCK;

/// Most dynamic shared memory a low-latency all-to-all or broadcast takes (its gathered copy of
/// every PE's data: the team's PEs times the bytes a PE), within what a launch gets without
/// opting in to more.
pub const LL_SHARED_MAX_BYTES: usize = 48 << 10;

/// [`ONE_SHOT_MAX_BYTES`] in a team of two PEs. One-shot moves `n - 1` times the data over
/// NVLink, two-shot `2 (n - 1) / n` times: the same for two PEs, so one-shot's single pass (one
/// flag round trip less a call, no peer stores) keeps winning past the latency-bound sizes
/// (measured with the one-element data path: 27 us against 36 us at 1 MiB on 2 x H200).
pub const ONE_SHOT_MAX_BYTES_2PE: usize = 8 << 20;

/// Most blocks a collective grid has (also capped at the GPU's SM count, so that every block is
/// resident: blocks wait for their namesakes on other PEs). Above the SM count of current GPUs
/// (132 on H100 and H200), so the SM count is the cap there and large messages use every SM.
pub const MAX_BLOCKS: usize = 256;

/// Threads per block of the collective kernels.
const THREADS: u32 = 512;

/// Bytes of work per block before the grid grows: small messages take one block (one flag round
/// trip), large ones spread over the SMs. One step of a block is 512 threads x two 16-byte
/// vectors, so below the SM cap a thread's second slot rarely repeats its first (see
/// `kernels.rs`).
const BYTES_PER_BLOCK: usize = 16 << 10;

/// Element types of [`Comm::all_reduce`], [`Comm::reduce_scatter`] and [`Comm::all_gather`]: the
/// 16-bit floats (reduced in `f32`), `f32`, `f64` and the 8- to 64-bit integers (wrapping, as
/// NVSHMEM's). Sealed.
pub trait AllReduceElem: CollectiveElem {
    #[doc(hidden)]
    const LOW_LATENCY: &'static KernelSpec;
    #[doc(hidden)]
    const ONE_SHOT: &'static KernelSpec;
    #[doc(hidden)]
    const TWO_SHOT: &'static KernelSpec;
    #[doc(hidden)]
    const REDUCE_SCATTER: &'static KernelSpec;
    #[doc(hidden)]
    const LOW_LATENCY_REDUCE_SCATTER: &'static KernelSpec;
    /// Whether the bitwise reductions exist for the type (integers).
    #[doc(hidden)]
    const BITS: bool;
}

macro_rules! elem {
    ($($t:ty => $m:ident, $bits:literal;)*) => {$(
        impl AllReduceElem for $t {
            const LOW_LATENCY: &'static KernelSpec = &kernels::$m::low_latency::SPEC;
            const ONE_SHOT: &'static KernelSpec = &kernels::$m::one_shot::SPEC;
            const TWO_SHOT: &'static KernelSpec = &kernels::$m::two_shot::SPEC;
            const REDUCE_SCATTER: &'static KernelSpec = &kernels::$m::reduce_scatter::SPEC;
            const LOW_LATENCY_REDUCE_SCATTER: &'static KernelSpec =
                &kernels::$m::low_latency_reduce_scatter::SPEC;
            const BITS: bool = $bits;
        }
    )*};
}

elem! {
    f32 => f32_, false;
    f64 => f64_, false;
    half::f16 => f16_, false;
    half::bf16 => bf16_, false;
    i8 => i8_, true;
    i16 => i16_, true;
    i32 => i32_, true;
    i64 => i64_, true;
    u8 => u8_, true;
    u16 => u16_, true;
    u32 => u32_, true;
    u64 => u64_, true;
}

/// The comptime code of each reduction in the kernels (see `kernels.rs`).
const OP_CODES: [[i128; 1]; 7] = [[0], [1], [2], [3], [4], [5], [6]];

fn op_code(op: ReduceOp) -> &'static [i128; 1] {
    &OP_CODES[match op {
        ReduceOp::Sum => 0,
        ReduceOp::Prod => 1,
        ReduceOp::Min => 2,
        ReduceOp::Max => 3,
        ReduceOp::And => 4,
        ReduceOp::Or => 5,
        ReduceOp::Xor => 6,
    }]
}

/// A communicator: a team plus the symmetric flags and call counters its collectives
/// synchronize with. Create one per team (collectively) and reuse it; calls on one `Comm` must
/// be ordered (one stream at a time, which `&mut self` enforces on the host), and every member
/// of the team makes the same calls in the same order, with the same lengths, types and ops.
pub struct Comm {
    pgas: Pgas,
    team: Team,
    /// This PE's number in the team, `None` when it is not a member.
    rank: Option<usize>,
    n: usize,
    /// Whether every member is load/store reachable from this PE.
    p2p: bool,
    max_blocks: usize,
    /// Team rank -> world PE (the first `n` entries).
    pes: SymTensor<i32>,
    /// `sig[b * n + r]`: block `b` of team rank `r` entered (`2e - 1`) or left (`2e`) call `e`.
    sig: SymTensor<u64>,
    /// Calls each block took part in.
    epochs: SymTensor<u64>,
    /// Scratch of the host-side exchanges ([`Comm::all_to_all_layout`]): `world` gathered rows
    /// of `layout::row_words(world)` words, then this PE's own row.
    agree: SymTensor<u64>,
    /// Tells this communicator's [`AllToAllLayout`]s from others' (unique in the process).
    id: u64,
    /// The low-latency all-reduce's scratch: one region of `ll_region(world)` words per block.
    ll_scratch: SymTensor<u64>,
}

/// Words of one block's region of the low-latency scratch in a team of `n` (the most any
/// element type needs: lines of 8 bytes).
fn ll_region(n: usize) -> usize {
    device_scratch_len::<u64>(n, LL_BYTES_PER_BLOCK / 8)
}

/// The `u64` words of symmetric scratch one block's `team_all_reduce_block` or
/// `team_all_gather_block` of `len` elements of `T` needs in a team of `n_pes`: its call counter
/// and two sets of 16-byte lines (8 data bytes each) from every PE. Allocate a multiple for
/// several blocks (each calls with its own `&mut scratch[b * words]`), zeroed (as
/// `Pgas::alloc` is), once; reuse it for every later call with at most `len` elements.
pub fn device_scratch_len<T>(n_pes: usize, len: usize) -> usize {
    // At least one line: a call of 0 elements exchanges one (see `LL_SUPPORT`).
    2 + 4 * n_pes * (len * std::mem::size_of::<T>()).div_ceil(8).max(1)
}

/// The next [`Comm`]'s `id`.
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("team", &self.team)
            .field("rank", &self.rank)
            .field("n", &self.n)
            .field("p2p", &self.p2p)
            .finish()
    }
}

impl Comm {
    /// A communicator over `team`. Collective over **all** PEs (it allocates symmetric memory),
    /// members or not: a PE outside the team passes `None` (what
    /// [`Team::split_strided`] returned it) and gets a `Comm` whose calls are errors.
    pub fn new(pgas: &Pgas, team: impl Into<Option<Team>>) -> Result<Comm> {
        let world = pgas.n_pes();
        let team = team.into();
        let (team, rank, n) = match team {
            // A destroyed team is an error here, on every PE that holds it.
            Some(t) => match (t.my_pe(pgas)?, t.n_pes(pgas)?) {
                (Some(r), n) if n > 0 => (t, Some(r), n),
                _ => (t, None, 0),
            },
            None => (Team::WORLD, None, 0),
        };
        let mut table = vec![0i32; world];
        for (r, slot) in table.iter_mut().enumerate().take(n) {
            *slot =
                team.translate_pe(pgas, r, Team::WORLD)?
                    .ok_or_else(|| Error::InvalidConfig {
                        name: "team",
                        value: format!("{}", team.raw()),
                        reason: format!("its PE {r} has no number in the world team"),
                    })? as i32;
        }
        let pes = pgas.alloc_from(&table)?;
        let sig = pgas.alloc::<u64>(MAX_BLOCKS * world)?;
        let epochs = pgas.alloc::<u64>(MAX_BLOCKS)?;
        let agree = pgas.alloc::<u64>((world + 1) * layout::row_words(world))?;
        let ll_scratch = pgas.alloc::<u64>(LL_MAX_BYTES / LL_BYTES_PER_BLOCK * ll_region(world))?;
        let p2p = pgas
            .first_unreachable(&sig, table[..n].iter().map(|&pe| pe as usize))?
            .is_none();
        let sms = pgas.sm_count()?;
        Ok(Comm {
            pgas: pgas.clone(),
            team,
            rank,
            n,
            p2p,
            max_blocks: MAX_BLOCKS.min(sms),
            pes,
            sig,
            epochs,
            agree,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            ll_scratch,
        })
    }

    /// This PE's number in the team (`None` when it is not a member).
    pub fn rank(&self) -> Option<usize> {
        self.rank
    }

    /// Number of PEs in the team (0 on a PE that is not a member).
    pub fn n_pes(&self) -> usize {
        self.n
    }

    /// Whether every member's memory is load/store reachable from this PE (else only
    /// [`Algorithm::Nvshmem`] works, and [`Algorithm::Auto`] takes it).
    pub fn peers_reachable(&self) -> bool {
        self.p2p
    }

    /// The algorithm [`Algorithm::Auto`] takes for an all-reduce of `bytes` bytes (`in_place`:
    /// `dst` is `src`).
    pub fn auto_algorithm(&self, bytes: usize, in_place: bool) -> Algorithm {
        if self.p2p && bytes <= LL_MAX_BYTES {
            Algorithm::LowLatency
        } else {
            self.auto_pass(bytes, in_place)
        }
    }

    /// [`Algorithm::Auto`] without the low-latency all-reduce (and broadcast's choice): NVSHMEM's
    /// when a peer is not reachable, one-shot up to the one-shot limit of the team's size when
    /// not in place, two-shot above.
    pub(crate) fn auto_pass(&self, bytes: usize, in_place: bool) -> Algorithm {
        let one_shot_max = if self.n == 2 {
            ONE_SHOT_MAX_BYTES_2PE
        } else {
            ONE_SHOT_MAX_BYTES
        };
        if !self.p2p {
            Algorithm::Nvshmem
        } else if bytes <= one_shot_max && !in_place {
            Algorithm::OneShot
        } else {
            Algorithm::TwoShot
        }
    }

    /// Element-wise reduction of every member's `src` into every member's `dst`, on the
    /// context's stream. Returns the algorithm used. See [`Comm::all_reduce_on`].
    pub fn all_reduce<T: AllReduceElem>(
        &mut self,
        dst: &mut impl SymRegion<T>,
        src: &impl SymRegion<T>,
        op: ReduceOp,
        algorithm: Algorithm,
    ) -> Result<Algorithm> {
        let stream = self.pgas.stream().clone();
        self.all_reduce_on(&stream, dst, src, op, algorithm)
    }

    /// [`Comm::all_reduce`] on `stream`: ordered after the work already on it, and not waited
    /// for on the host (so it can be captured into a CUDA graph once its kernel has run or
    /// been prewarmed: [`prewarm`]). When it completes on a PE, no peer reads that PE's `src`
    /// any more.
    ///
    /// Errors, before anything is launched: a PE that is not in the team, `dst` and `src` of
    /// different lengths, a bitwise op on a float type, one-shot in place (or overlapping
    /// buffers), a peer-to-peer algorithm when a peer is not reachable, NVSHMEM's algorithm on
    /// another stream. Lengths, types and ops that differ between PEs cannot be seen here:
    /// they are the caller's contract, as in NCCL.
    pub fn all_reduce_on<T: AllReduceElem>(
        &mut self,
        stream: &CudaStream,
        dst: &mut impl SymRegion<T>,
        src: &impl SymRegion<T>,
        op: ReduceOp,
        algorithm: Algorithm,
    ) -> Result<Algorithm> {
        let src = Region::<T>::of(src);
        self.reduce_into(stream, dst, &src, op, algorithm)
    }

    /// All-reduce of `x` into itself, on the context's stream (two-shot or NVSHMEM's: one-shot
    /// cannot run in place).
    pub fn all_reduce_in_place<T: AllReduceElem>(
        &mut self,
        x: &mut impl SymRegion<T>,
        op: ReduceOp,
        algorithm: Algorithm,
    ) -> Result<Algorithm> {
        let stream = self.pgas.stream().clone();
        self.all_reduce_in_place_on(&stream, x, op, algorithm)
    }

    /// [`Comm::all_reduce_in_place`] on `stream`.
    pub fn all_reduce_in_place_on<T: AllReduceElem>(
        &mut self,
        stream: &CudaStream,
        x: &mut impl SymRegion<T>,
        op: ReduceOp,
        algorithm: Algorithm,
    ) -> Result<Algorithm> {
        let src = Region::<T>::of(&*x);
        self.reduce_into(stream, x, &src, op, algorithm)
    }

    fn reduce_into<T: AllReduceElem>(
        &mut self,
        stream: &CudaStream,
        dst: &mut impl SymRegion<T>,
        src: &Region<T>,
        op: ReduceOp,
        algorithm: Algorithm,
    ) -> Result<Algorithm> {
        self.member()?;
        if dst.len() != src.len() {
            return Err(Error::LengthMismatch {
                what: "the all-reduce destination (the source's length)",
                got: dst.len(),
                expected: src.len(),
            });
        }
        check_op::<T>(op)?;
        let bytes = src.len() * std::mem::size_of::<T>();
        let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
        let in_place = d == s;
        let overlap = d < s + bytes as u64 && s < d + bytes as u64;
        let algorithm = match algorithm {
            Algorithm::Auto => self.auto_algorithm(bytes, in_place),
            a => a,
        };
        if algorithm == Algorithm::LowLatency && bytes > LL_MAX_BYTES {
            return Err(Error::InvalidConfig {
                name: "algorithm",
                value: format!("LowLatency for {bytes} bytes"),
                reason: format!(
                    "the low-latency all-reduce takes at most LL_MAX_BYTES ({LL_MAX_BYTES}) \
                     bytes; use Algorithm::Auto, OneShot or TwoShot"
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
        if src.is_empty() {
            return Ok(algorithm);
        }
        let spec = match algorithm {
            Algorithm::Nvshmem => {
                refuse_capture(stream, "NVSHMEM's reduction")?;
                self.pgas.reduce_on(stream, self.team, op, &*dst, src)?;
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
                let per_block = LL_BYTES_PER_BLOCK / std::mem::size_of::<T>();
                let blocks = src.len().div_ceil(per_block) as u32;
                let region = device_scratch_len::<T>(self.n, per_block) as u32;
                let mut args = KernelArgs::new();
                args.push_team(self.team)
                    .push_sym_mut(dst)
                    .push_sym(src)
                    .push_sym_mut(&mut self.ll_scratch)
                    .push_scalar(region)
                    .push_scalar(per_block as u32);
                pgas_runtime::launch::launch(
                    &self.pgas,
                    T::LOW_LATENCY,
                    Variant::Plain,
                    op_code(op),
                    LaunchConfig::blocks(blocks, THREADS),
                    Some(stream),
                    &mut args,
                )?;
                return Ok(algorithm);
            }
            Algorithm::OneShot => T::ONE_SHOT,
            _ => T::TWO_SHOT,
        };
        let work = if algorithm == Algorithm::OneShot {
            bytes
        } else {
            bytes.div_ceil(self.n)
        };
        // The 16-byte data path (see `kernels.rs`) walks `src`, paired with `dst`.
        let (head, vec) = vector_start(s, d, std::mem::size_of::<T>(), src.len());
        self.launch_p2p(
            stream,
            spec,
            op_code(op),
            dst,
            src,
            None,
            work,
            &[head, vec],
        )?;
        Ok(algorithm)
    }

    /// Reduce-scatter on the context's stream: team rank `r`'s `dst` gets the element-wise
    /// reduction of chunk `r` of every member's `src` (elements `r * dst.len()` to
    /// `(r + 1) * dst.len()`), so `src.len() == n * dst.len()`. See [`Comm::reduce_scatter_on`].
    pub fn reduce_scatter<T: AllReduceElem>(
        &mut self,
        dst: &mut impl SymRegion<T>,
        src: &impl SymRegion<T>,
        op: ReduceOp,
    ) -> Result<()> {
        let stream = self.pgas.stream().clone();
        self.reduce_scatter_on(&stream, dst, src, op)
    }

    /// [`Comm::reduce_scatter`] on `stream` (not waited for on the host; capturable once
    /// prewarmed, as [`Comm::all_reduce_on`]). Two-shot's first half: each rank loads its chunk
    /// from every peer's `src` over NVLink and reduces it into its own `dst`, with the same flag
    /// protocol, so when it completes on a PE no peer reads that PE's `src` any more. Up to
    /// [`LL_GATHER_MAX_BYTES`] of `src` it takes the low-latency protocol instead: all of `src`
    /// all-reduced over the lines into shared memory, this rank's chunk copied out (one
    /// crossing, no handshake). Where a member is not load/store reachable, NVSHMEM's
    /// reduce-scatter on `stream` carries it instead.
    ///
    /// Errors, before anything is launched: a PE that is not in the team, a `src` length that
    /// is not a multiple of the team size or not `n * dst.len()`, a bitwise op on a float
    /// type, `dst` and `src` overlapping (no in-place form yet), `src` not in the symmetric
    /// heap.
    pub fn reduce_scatter_on<T: AllReduceElem>(
        &mut self,
        stream: &CudaStream,
        dst: &mut impl SymRegion<T>,
        src: &impl SymRegion<T>,
        op: ReduceOp,
    ) -> Result<()> {
        let rank = self.member()?;
        let n = self.n;
        if !src.len().is_multiple_of(n) {
            return Err(Error::InvalidConfig {
                name: "reduce-scatter source",
                value: format!("{} elements", src.len()),
                reason: format!(
                    "the source is split into one chunk per PE of the team, so its length must \
                     be a multiple of the team's {n} PEs"
                ),
            });
        }
        if dst.len() != src.len() / n {
            return Err(Error::LengthMismatch {
                what: "the reduce-scatter destination (the source's length / the team's PEs)",
                got: dst.len(),
                expected: src.len() / n,
            });
        }
        check_op::<T>(op)?;
        if !self.p2p {
            // A peer off NVLink: NVSHMEM's reduce-scatter, which its proxy carries.
            let size = std::mem::size_of::<T>();
            let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
            check_apart("reduce-scatter", d, dst.len() * size, s, src.len() * size)?;
            refuse_capture(stream, "NVSHMEM's reduce-scatter")?;
            return self
                .pgas
                .reduce_scatter_on(stream, self.team, op, &*dst, src);
        }
        self.check_movement("reduce-scatter", &*dst, src, Reached::Source)?;
        let size = std::mem::size_of::<T>();
        let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
        if dst.is_empty() {
            return Ok(());
        }
        let bytes = src.len() * size;
        if n > 1 && bytes <= LL_GATHER_MAX_BYTES {
            // Latency-bound: all of `src` all-reduced over the low-latency lines, one block.
            let src = Region::<T>::of(src);
            return self.launch_ll(
                stream,
                (T::LOW_LATENCY_REDUCE_SCATTER, op_code(op)),
                dst,
                &src,
                &[rank as u32],
                bytes,
            );
        }
        // The vector path starts at this rank's chunk of `src` (see `kernels.rs`).
        let chunk = s + (rank * dst.len() * size) as u64;
        let (head, vec) = vector_start(chunk, d, size, dst.len());
        let work = dst.len() * size;
        let src = Region::<T>::of(src);
        self.launch_p2p(
            stream,
            T::REDUCE_SCATTER,
            op_code(op),
            dst,
            &src,
            None,
            work,
            &[head, vec],
        )
    }

    /// All-gather on the context's stream: every member's `dst` gets every member's `src`,
    /// concatenated in team rank order (rank `r`'s at elements `r * src.len()` on), so
    /// `dst.len() == n * src.len()`. See [`Comm::all_gather_on`].
    pub fn all_gather<T: AllReduceElem>(
        &mut self,
        dst: &mut impl SymRegion<T>,
        src: &impl SymRegion<T>,
    ) -> Result<()> {
        let stream = self.pgas.stream().clone();
        self.all_gather_on(&stream, dst, src)
    }

    /// [`Comm::all_gather`] on `stream` (not waited for on the host; capturable once
    /// prewarmed). Two-shot's second half: each rank stores its `src` into its chunk of every
    /// peer's `dst` over NVLink, with the same flag protocol, so when it completes on a PE every
    /// peer's chunk has arrived in its `dst` and no peer writes it any more. Up to
    /// [`LL_GATHER_MAX_BYTES`] a PE it takes the low-latency protocol instead (one block; each
    /// rank's data with the call's flag in 16-byte lines into every peer's scratch, then copied
    /// into `dst` by the PE that polls them: one NVLink crossing, no handshake).
    ///
    /// Where a member is not load/store reachable ([`Comm::peers_reachable`] false: another
    /// node, no peer access, or `PGAS_PEER_ACCESS`), NVSHMEM's `fcollect` on `stream` carries
    /// it instead.
    ///
    /// Errors, before anything is launched: a PE that is not in the team, a `dst` length that
    /// is not a multiple of the team size or not `n * src.len()`, `dst` and `src` overlapping
    /// (no in-place form yet), `dst` not in the symmetric heap, and off NVLink a `stream` of
    /// another GPU.
    pub fn all_gather_on<T: AllReduceElem>(
        &mut self,
        stream: &CudaStream,
        dst: &mut impl SymRegion<T>,
        src: &impl SymRegion<T>,
    ) -> Result<()> {
        let rank = self.member()?;
        let n = self.n;
        if !dst.len().is_multiple_of(n) {
            return Err(Error::InvalidConfig {
                name: "all-gather destination",
                value: format!("{} elements", dst.len()),
                reason: format!(
                    "the destination holds one chunk per PE of the team, so its length must be \
                     a multiple of the team's {n} PEs"
                ),
            });
        }
        if src.len() != dst.len() / n {
            return Err(Error::LengthMismatch {
                what: "the all-gather source (the destination's length / the team's PEs)",
                got: src.len(),
                expected: dst.len() / n,
            });
        }
        if !self.p2p {
            // A peer off NVLink: NVSHMEM's fcollect, which its proxy carries.
            let size = std::mem::size_of::<T>();
            let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
            check_apart("all-gather", d, dst.len() * size, s, src.len() * size)?;
            refuse_capture(stream, "NVSHMEM's all-gather (fcollect)")?;
            return self.pgas.fcollect_on(stream, self.team, &*dst, src);
        }
        self.check_movement("all-gather", &*dst, src, Reached::Destination)?;
        let size = std::mem::size_of::<T>();
        let (d, s) = (dst.as_device_ptr(), src.as_device_ptr());
        if src.is_empty() {
            return Ok(());
        }
        if self.n > 1 && src.len() * size <= LL_GATHER_MAX_BYTES {
            // Latency-bound: the low-latency protocol, one block, no handshake.
            let src = Region::<T>::of(src);
            let spec = movement::move_kernels::<T>().low_latency_gather;
            return self.launch_ll(stream, (spec, &[]), dst, &src, &[], 0);
        }
        // The vector path starts at `src`'s first 16-byte boundary; this rank's chunk of `dst`
        // must sit at the same offset (see `kernels.rs`).
        let chunk = d + (rank * src.len() * size) as u64;
        let (head, vec) = vector_start(s, chunk, size, src.len());
        let work = src.len() * size;
        let src = Region::<T>::of(src);
        self.launch_p2p(
            stream,
            movement::move_kernels::<T>().all_gather,
            &[],
            dst,
            &src,
            None,
            work,
            &[head, vec],
        )
    }

    /// This PE's team rank and the communicator's flags, for the kernel of a fused operation
    /// that synchronizes with the same protocol as these collectives (`docs/coll.md`,
    /// "Synchronization"; `ops::allreduce_rmsnorm`): its calls then count on the same call
    /// counters, so they mix with this communicator's collectives on one stream. `Err` for a
    /// non-member or where a peer is not load/store reachable (`what` names the operation).
    pub(crate) fn kernel_flags(&mut self, what: &str) -> Result<(usize, KernelFlags<'_>)> {
        let rank = self.member()?;
        self.check_p2p(what)?;
        Ok((
            rank,
            KernelFlags {
                pes: &self.pes,
                sig: &mut self.sig,
                epochs: &mut self.epochs,
            },
        ))
    }

    /// This PE's team rank, or the error a non-member's call gets.
    /// Also refuses a call after the team was destroyed ([`Team::destroy`]): the kernels use
    /// the world PE numbers gathered at `new`, but the communicator is over that team, and the
    /// Nvshmem and low-latency algorithms hand it to NVSHMEM.
    fn member(&self) -> Result<usize> {
        self.team.ensure_live(&self.pgas)?;
        self.rank.ok_or_else(|| Error::InvalidConfig {
            name: "team",
            value: format!("{}", self.team.raw()),
            reason: format!(
                "PE {} is not a member of this communicator's team; only members call its \
                 collectives",
                self.pgas.my_pe()
            ),
        })
    }

    /// The error of a peer-to-peer collective when some peer is not load/store reachable.
    fn check_p2p(&self, what: &str) -> Result<()> {
        if self.p2p {
            return Ok(());
        }
        Err(Error::InvalidConfig {
            name: "team",
            value: format!("{}", self.team.raw()),
            reason: format!(
                "a PE of the team is not load/store reachable from this one (no NVLink or peer \
                 access), and pgas's {what} works only by peer loads and stores (no NVSHMEM \
                 fallback yet)"
            ),
        })
    }

    /// An `Err` unless `bytes` bytes at `ptr` lie in the symmetric heap (a `SymRegion` of one's
    /// own can name any address).
    fn check_symmetric(&self, what: &str, ptr: u64, bytes: usize) -> Result<()> {
        if self.pgas.in_symmetric_heap(ptr, bytes) {
            return Ok(());
        }
        Err(Error::InvalidConfig {
            name: "buffer",
            value: format!("{ptr:#x} ({bytes} bytes)"),
            reason: format!(
                "{what} is not inside NVSHMEM's symmetric heap, so peers cannot reach it; \
                 allocate it with Pgas::alloc (or take a view of such a tensor)"
            ),
        })
    }

    /// The checks of a peer-to-peer data movement before it launches: `dst` and `src` apart,
    /// every member load/store reachable, and the buffer the peers reach into (`reached`) in the
    /// symmetric heap.
    fn check_movement<T>(
        &self,
        what: &str,
        dst: &impl SymRegion<T>,
        src: &impl SymRegion<T>,
        reached: Reached,
    ) -> Result<()> {
        let size = std::mem::size_of::<T>();
        let (d, dbytes) = (dst.as_device_ptr(), dst.len() * size);
        let (s, sbytes) = (src.as_device_ptr(), src.len() * size);
        check_apart(what, d, dbytes, s, sbytes)?;
        self.check_p2p(what)?;
        match reached {
            Reached::Source => {
                self.check_symmetric(&format!("the {what} source (peers load it)"), s, sbytes)
            }
            Reached::Destination => self.check_symmetric(
                &format!("the {what} destination (peers store into it)"),
                d,
                dbytes,
            ),
        }
    }

    /// Launches a low-latency kernel of `kernels.rs` (`spec` with its comptime values; arguments
    /// the team, `dst`, `src`, the low-latency scratch, then `scalars`) as one block with
    /// `shared` bytes of dynamic shared memory. Called by members only, on teams whose every PE
    /// is load/store reachable.
    fn launch_ll<T>(
        &mut self,
        stream: &CudaStream,
        (spec, comptime): (&'static KernelSpec, &[i128]),
        dst: &mut impl SymRegion<T>,
        src: &Region<T>,
        scalars: &[u32],
        shared: usize,
    ) -> Result<()> {
        let mut args = KernelArgs::new();
        args.push_team(self.team)
            .push_sym_mut(dst)
            .push_sym(src)
            .push_sym_mut(&mut self.ll_scratch);
        for &v in scalars {
            args.push_scalar(v);
        }
        pgas_runtime::launch::launch(
            &self.pgas,
            spec,
            Variant::Plain,
            comptime,
            LaunchConfig::blocks(1, THREADS).with_shared_mem(shared.next_multiple_of(16) as u32),
            Some(stream),
            &mut args,
        )
    }

    /// Launches a peer-to-peer collective kernel of `kernels.rs` (arguments `dst`, `src`, the
    /// all-to-all-v `table` where given, the rank table, the flags, the team size, this PE's
    /// rank, then `scalars`) with a grid of one block per [`BYTES_PER_BLOCK`] of `work` (the
    /// bytes each PE handles: the same on every PE for the same call) up to the SM count. Called
    /// by members only (after [`Comm::member`]).
    #[allow(clippy::too_many_arguments)]
    fn launch_p2p<T>(
        &mut self,
        stream: &CudaStream,
        spec: &'static KernelSpec,
        comptime: &[i128],
        dst: &mut impl SymRegion<T>,
        src: &Region<T>,
        table: Option<&LocalTable>,
        work: usize,
        scalars: &[u32],
    ) -> Result<()> {
        let rank = self.member()?;
        let blocks = work.div_ceil(BYTES_PER_BLOCK).clamp(1, self.max_blocks) as u32;
        let mut args = KernelArgs::new();
        args.push_sym_mut(dst).push_sym(src);
        if let Some(table) = table {
            // SAFETY: the layout that owns the table outlives this call, and the kernel reads
            // the table on this PE only (see `all_to_all_v` in `kernels.rs`).
            unsafe { args.push_local_as_sym::<u64>(table.ptr, table.len) };
        }
        args.push_sym(&self.pes)
            .push_sym_mut(&mut self.sig)
            .push_sym_mut(&mut self.epochs)
            .push_scalar(self.n as u32)
            .push_scalar(rank as u32);
        for &v in scalars {
            args.push_scalar(v);
        }
        pgas_runtime::launch::launch(
            &self.pgas,
            spec,
            Variant::Plain,
            comptime,
            LaunchConfig::blocks(blocks, THREADS),
            Some(stream),
            &mut args,
        )
    }
}

/// A [`Comm`]'s flags as a kernel takes them ([`Comm::kernel_flags`]): the rank table, the
/// entry/leave signals (`sig[b * n + r]`, [`MAX_BLOCKS`] blocks) and each block's call counter.
pub(crate) struct KernelFlags<'a> {
    /// Team rank -> world PE.
    pub pes: &'a SymTensor<i32>,
    /// `sig[b * n + r]`: block `b` of team rank `r` entered (`2e - 1`) or left (`2e`) call `e`.
    pub sig: &'a mut SymTensor<u64>,
    /// Calls each block took part in.
    pub epochs: &'a mut SymTensor<u64>,
}

/// Which buffer of a data movement the peers load from or store into.
#[derive(Clone, Copy)]
enum Reached {
    Source,
    Destination,
}

/// An `Err` for a bitwise reduction on a float type.
fn check_op<T: AllReduceElem>(op: ReduceOp) -> Result<()> {
    if !T::BITS && matches!(op, ReduceOp::And | ReduceOp::Or | ReduceOp::Xor) {
        return Err(Error::InvalidConfig {
            name: "reduction",
            value: format!("{op:?} on {}", std::any::type_name::<T>()),
            reason: "bitwise reductions exist for integer types only; use Sum, Prod, Min or Max"
                .to_owned(),
        });
    }
    Ok(())
}

/// An `Err` when `dst` and `src` share a byte (reduce-scatter and all-gather have no in-place
/// form yet).
/// An `Err` when `stream` is being captured into a CUDA graph: the NVSHMEM paths run eagerly
/// only (their capture is not tested here).
fn refuse_capture(stream: &CudaStream, what: &str) -> Result<()> {
    let status = stream.capture_status().map_err(Error::cuda(
        "querying the stream's CUDA-graph capture status",
    ))?;
    if status == cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
        return Ok(());
    }
    Err(Error::InvalidConfig {
        name: "stream",
        value: "a stream being captured into a CUDA graph".into(),
        reason: format!(
            "{what} runs eagerly only in pgas (its graph capture is untested). Fix: call it \
             outside capture, or use a peer-to-peer algorithm, which captures"
        ),
    })
}

fn check_apart(what: &str, d: u64, dbytes: usize, s: u64, sbytes: usize) -> Result<()> {
    if dbytes > 0 && sbytes > 0 && d < s + sbytes as u64 && s < d + dbytes as u64 {
        return Err(Error::InvalidConfig {
            name: "buffers",
            value: format!("dst {d:#x} ({dbytes} bytes), src {s:#x} ({sbytes} bytes)"),
            reason: format!(
                "the {what} destination and source overlap; pass two buffers apart (there is no \
                 in-place {what} yet)"
            ),
        });
    }
    Ok(())
}

/// Every specialization the collectives of element type `T` can launch (low-latency,
/// one-shot, two-shot and reduce-scatter with each reduction the type has, and the all-gather,
/// broadcast and all-to-all kernels of `T`'s size), for
/// [`pgas_runtime::launch::prewarm`]: compile them up front, in one NVRTC program, so that no
/// call compiles (and a graph capture can include any of them).
pub fn prewarm_list<T: AllReduceElem>() -> Vec<Prewarm<'static>> {
    let mut list = reducing::<T>();
    list.extend(moving::<T>());
    list
}

/// [`prewarm_list`] for every element type, each specialization once: the reducing kernels of
/// each type, the data-movement kernels of each element size (types of one size share them).
pub fn prewarm_all() -> Vec<Prewarm<'static>> {
    [
        reducing::<f32>(),
        reducing::<f64>(),
        reducing::<half::f16>(),
        reducing::<half::bf16>(),
        reducing::<i8>(),
        reducing::<i16>(),
        reducing::<i32>(),
        reducing::<i64>(),
        reducing::<u8>(),
        reducing::<u16>(),
        reducing::<u32>(),
        reducing::<u64>(),
    ]
    .into_iter()
    .flatten()
    .chain(moving::<u8>())
    .chain(moving::<u16>())
    .chain(moving::<u32>())
    .chain(moving::<u64>())
    .collect()
}

/// The reducing kernels of `T` (low-latency, one-shot, two-shot, reduce-scatter), each with
/// every reduction the type has.
fn reducing<T: AllReduceElem>() -> Vec<Prewarm<'static>> {
    let ops = if T::BITS { 7 } else { 4 };
    [
        T::LOW_LATENCY,
        T::ONE_SHOT,
        T::TWO_SHOT,
        T::REDUCE_SCATTER,
        T::LOW_LATENCY_REDUCE_SCATTER,
    ]
    .into_iter()
    .flat_map(|spec| {
        OP_CODES[..ops].iter().map(move |c| Prewarm {
            spec,
            variant: Variant::Plain,
            comptime: c,
        })
    })
    .collect()
}

/// The data-movement kernels of `T`'s size: no reduction, so no comptime code.
fn moving<T>() -> impl Iterator<Item = Prewarm<'static>> {
    movement::move_specs::<T>().into_iter().map(|spec| Prewarm {
        spec,
        variant: Variant::Plain,
        comptime: &[],
    })
}

/// Compiles (or loads from the disk cache) every collective kernel of element type `T`.
pub fn prewarm<T: AllReduceElem>(pgas: &Pgas) -> Result<()> {
    pgas_runtime::launch::prewarm(pgas, &prewarm_list::<T>())
}

/// A buffer of this PE's device memory by address and length, which a kernel reads on this PE
/// only (the all-to-all-v layout's table): not symmetric, so not a [`SymRegion`].
struct LocalTable {
    ptr: u64,
    len: usize,
}

/// A symmetric region by address and length: lets one buffer be both operands of an in-place
/// call (the borrow checker forbids `&mut x` and `&x` at once).
struct Region<T> {
    ptr: u64,
    len: usize,
    /// [`SymRegion::extent`] of the region it was made from.
    extent: usize,
    _elem: std::marker::PhantomData<T>,
}

impl<T> Region<T> {
    fn of(r: &impl SymRegion<T>) -> Region<T> {
        Region {
            ptr: r.as_device_ptr(),
            len: r.len(),
            extent: r.extent(),
            _elem: std::marker::PhantomData,
        }
    }

    /// The first `len` elements of `r`'s extent (past `r.len()` where `len` is larger), or
    /// `None` where the extent is shorter.
    fn reaching(r: &impl SymRegion<T>, len: usize) -> Option<Region<T>> {
        (len <= r.extent()).then(|| Region {
            ptr: r.as_device_ptr(),
            len,
            extent: r.extent(),
            _elem: std::marker::PhantomData,
        })
    }
}

// SAFETY: a `Region` is made only by `Region::of` or `Region::reaching` from a live region the
// caller borrows for the whole call it is used in, within that region's extent, so it names
// that region's symmetric memory while it is used.
unsafe impl<T> SymRegion<T> for Region<T> {
    fn as_device_ptr(&self) -> u64 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn extent(&self) -> usize {
        self.extent
    }
}

/// The kernels' 16-byte data path for a walk over `len` elements of `size` bytes that starts at
/// address `start` and pairs with address `other`: `head`, the elements before `start`'s first
/// 16-byte boundary (done one at a time), and `vec`, whether `other` sits at the same offset
/// modulo 16 (else every element goes one at a time). Elements are aligned to their size, so the
/// distance to the boundary is whole elements.
fn vector_start(start: u64, other: u64, size: usize, len: usize) -> (u32, u32) {
    let head = ((16 - start % 16) % 16 / size as u64).min(len as u64) as u32;
    (head, u32::from(other % 16 == start % 16))
}

#[cfg(test)]
mod tests {
    use super::vector_start;

    #[test]
    fn device_scratch_has_a_line_even_for_no_data() {
        // Counter words, then two sets of lines (two words each) from each of 4 PEs: one line
        // for 0 elements too (a call of no data still exchanges one), 2 for 9 bytes.
        assert_eq!(super::device_scratch_len::<u8>(4, 0), 2 + 4 * 4);
        assert_eq!(super::device_scratch_len::<u8>(4, 8), 2 + 4 * 4);
        assert_eq!(super::device_scratch_len::<u8>(4, 9), 2 + 4 * 4 * 2);
    }

    #[test]
    fn the_vector_path_starts_at_the_first_16_byte_boundary() {
        // bf16 at 4 bytes past a boundary: 6 elements before the next one.
        assert_eq!(vector_start(0x1004, 0x2004, 2, 100), (6, 1));
        // Fewer elements than that: all of them one at a time.
        assert_eq!(vector_start(0x1004, 0x2004, 2, 3), (3, 1));
        // Aligned start; a partner at another offset takes no vectors.
        assert_eq!(vector_start(0x1000, 0x2008, 4, 100), (0, 0));
    }
}
