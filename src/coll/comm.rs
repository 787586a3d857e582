//! The communicator ([`Comm`]): a team and the symmetric flags, counters and scratch its
//! collectives synchronize with; the algorithms and their size limits; the checks and the
//! peer-to-peer launch every collective shares.

use super::region::{check_apart, LocalTable, Reached, Region};
use super::scratch::{capturing, Scratch};
use cudarc::driver::CudaStream;
use pgas_runtime::kernel::{KernelSpec, Variant};
use pgas_runtime::launch::KernelArgs;

use crate::{Error, LaunchConfig, Pgas, Result, SymRegion, SymTensor, Team};

/// How [`Comm::all_reduce`] reduces (and [`Comm::broadcast`], [`Comm::all_gather`] and
/// [`Comm::all_to_all`] move data): part of a call's [`Options`](super::Options).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// All-reduce: low latency up to [`LL_MAX_BYTES`] (also in place), one-shot up to
    /// [`ONE_SHOT_MAX_BYTES`] ([`ONE_SHOT_MAX_BYTES_2PE`] in a team of two), two-shot above (in
    /// place: two-shot); NVSHMEM's own when some peer is not load/store reachable. Broadcast:
    /// the same with low latency where it fits. All-gather and all-to-all: low latency up to
    /// [`LL_GATHER_MAX_BYTES`] a PE, pulling (`OneShot`) up to [`MOVE_PULL_MAX_BYTES`],
    /// pushing (`TwoShot`) above; NVSHMEM's (or the hierarchical all-gather) off NVLink.
    #[default]
    Auto,
    /// Up to [`LL_MAX_BYTES`] (all-reduce) or [`LL_GATHER_MAX_BYTES`] a PE (the others): every
    /// PE stores its data into every peer's scratch with the call's flag beside each 4 bytes,
    /// and polls its own (the LL protocol of `team_all_reduce_block`): one NVLink crossing, no
    /// handshake, no fence. The all-reduce's also in place.
    LowLatency,
    /// Every PE reads every peer's input and reduces (needs `dst` and `src` apart). All-gather
    /// and all-to-all: every PE loads its part of every peer's `src` into its own `dst` (the
    /// pulling form).
    OneShot,
    /// Reduce-scatter by peer loads, all-gather by peer stores (also in place); an all-reduce
    /// of [`PUSH_MIN_BYTES`] or more by peer stores both ways (the pushed two-shot). All-gather
    /// and all-to-all: every PE stores its `src` into the peers' `dst` (the pushing form).
    TwoShot,
    /// NVSHMEM's on-stream reduction (`nvshmemx_<type>_<op>_reduce_on_stream`), on any stream
    /// of the context's GPU.
    Nvshmem,
    /// All-reduce over a `Team::WORLD` that spans several nodes (groups of consecutive PEs
    /// reachable only inside their group): reduce-scatter by peer loads inside the node,
    /// NVSHMEM's all-reduce of the chunk across nodes, all-gather by peer stores inside the node
    /// ([`Comm::hierarchy`]); what [`Algorithm::Auto`] takes there when the length is a multiple
    /// of the group size. Eager only.
    Hierarchical,
}

/// [`Algorithm::Auto`] takes one-shot up to this many bytes: one-shot's single pass wins while
/// latency dominates, two-shot's smaller traffic above.
pub const ONE_SHOT_MAX_BYTES: usize = 256 << 10;

/// The largest all-reduce [`Algorithm::LowLatency`] takes (and [`Algorithm::Auto`] gives it):
/// its scratch holds this much per call (twice over, per peer, in 16-byte lines of 8 data
/// bytes), in [`LL_MAX_BYTES`] / [`LL_BYTES_PER_BLOCK`] (128) regions, one a block. On a GPU
/// with fewer SMs than that, [`Comm::low_latency_max_bytes`] is less: the blocks of a call wait
/// for their namesakes on the peers, so all must be resident. At this size it was still faster
/// than one-shot and than NCCL on 2 and 4 PEs (`docs/coll.md` has the figures).
pub const LL_MAX_BYTES: usize = 256 << 10;

/// Data bytes of a chunk each block of a low-latency kernel handles at most (one 8-byte line a
/// thread). Small blocks spread a call over many SMs, which the latency-bound sizes want
/// (`docs/coll.md`).
pub const LL_BYTES_PER_BLOCK: usize = 2 << 10;

/// The largest `src` (bytes a PE) that [`Comm::all_gather`], [`Comm::reduce_scatter`],
/// [`Comm::all_to_all`] and [`Comm::broadcast`] move with the low-latency protocol (fewer on a
/// GPU of fewer SMs, as [`LL_MAX_BYTES`]): each block takes at most [`LL_BYTES_PER_BLOCK`] of
/// each chunk, over its own region of the low-latency scratch, as the all-reduce's.
pub const LL_GATHER_MAX_BYTES: usize = LL_MAX_BYTES;

/// Most dynamic shared memory a block of a low-latency all-gather, all-to-all or broadcast
/// takes (its gathered copy of every PE's share, up to the team's PEs times
/// [`LL_BYTES_PER_BLOCK`]), so teams of up to 32 PEs use the protocol; a launch opts in above
/// 48 KiB (Hopper allows 227 KiB).
pub const LL_SHARED_MAX_BYTES: usize = 64 << 10;

/// Up to this many bytes on more than 2 PEs, [`Comm::broadcast`]'s [`Algorithm::TwoShot`] is
/// the relay over the low-latency lines (`team_broadcast_relay_block`: the root sends each other
/// rank a chunk, which passes it on; two crossings, no handshake), a block taking up to `n - 1`
/// times a region's 4 KiB; above (or where that does not fit), the handshaking two-shot. Up to
/// this size the relay beat both the root's lines to every peer and the handshaking two-shot;
/// past it, split into protocol calls, it lost to the two-shot. On 2 PEs the root's lines in
/// such calls lost to the one-shot from 1 MiB, so the relay is for larger teams
/// (`docs/coll.md`, "The broadcast (third round)", has the figures).
pub const BROADCAST_RELAY_MAX_BYTES: usize = 1 << 20;

/// From this many bytes on more than 2 PEs, [`Algorithm::Auto`] takes the relay
/// ([`BROADCAST_RELAY_MAX_BYTES`]) for a broadcast instead of the low-latency form, whose root
/// sends every peer a copy: the two cross between these sizes (`docs/coll.md`).
pub const BROADCAST_RELAY_MIN_BYTES: usize = 128 << 10;

/// [`Algorithm::Auto`] takes the pulling all-gather and all-to-all (`Algorithm::OneShot`, peer
/// loads) above the low-latency sizes while their larger buffer holds at most this many bytes,
/// and the pushing forms (`Algorithm::TwoShot`, peer stores) above. Pulling has no peer stores
/// to fence before the leave signal, where the pushing all-gather waited longer than the
/// reduce-scatter's peer loads of as many bytes took. Above a few MiB the copy dominates and the
/// pushing forms already beat NCCL, so they keep those sizes (`docs/coll.md`, "Pulling and
/// pushing", has the figures). The limit itself is a judgement, not a measurement:
/// `benches/coll.rs` runs both forms at every size.
pub const MOVE_PULL_MAX_BYTES: usize = 4 << 20;

/// [`ONE_SHOT_MAX_BYTES`] in a team of two PEs. One-shot moves `n - 1` times the data over
/// NVLink, two-shot `2 (n - 1) / n` times: the same for two PEs, so one-shot's single pass (one
/// flag round trip less a call, no peer stores) keeps winning past the latency-bound sizes
/// (`docs/coll.md`, `Algorithm::Auto`, has the figure).
pub const ONE_SHOT_MAX_BYTES_2PE: usize = 8 << 20;

/// From this many bytes [`Algorithm::TwoShot`] (and so [`Algorithm::Auto`] above the one-shot
/// sizes) runs an all-reduce as the pushed two-shot, where `dst` and `src` start on 16-byte
/// boundaries and the team is every PE: each rank stores chunk `q` of its data into a stage on
/// rank `q`, which reduces it from local memory and stores the result into every PE's `dst`,
/// so both crossings are peer stores and no handshake comes before the data moves. It has the
/// larger fixed cost and the higher bandwidth: below this size the handshaking two-shot is
/// faster, above it the pushed one beats it and NCCL (`docs/coll.md`, "The pushed two-shot",
/// has the figures).
pub const PUSH_MIN_BYTES: usize = 16 << 20;

/// The pushed two-shot ([`PUSH_MIN_BYTES`]) reduces at most this many bytes a kernel: larger
/// all-reduces run as several kernels of this size, one after the other, so its stage (as
/// large as one kernel's data, allocated collectively by the first call that needs it) stays
/// at this size.
pub const PUSH_MAX_BYTES: usize = 64 << 20;

/// Most blocks a collective grid has (also capped at the GPU's SM count, so that every block is
/// resident: blocks wait for their namesakes on other PEs). Above the SM count of current GPUs
/// (132 on H100 and H200), so the SM count is the cap there and large messages use every SM.
pub const MAX_BLOCKS: usize = 256;

/// Threads per block of the collective kernels.
pub(super) const THREADS: u32 = 512;

/// Bytes of work per block before the grid grows: small messages take one block (one flag round
/// trip), large ones spread over the SMs. One step of a block is 512 threads x two 16-byte
/// vectors, so below the SM cap a thread's second slot rarely repeats its first (see
/// `kernels/`).
pub(super) const BYTES_PER_BLOCK: usize = 16 << 10;

/// A communicator: a team plus the symmetric flags and call counters its collectives
/// synchronize with. Create one per team (collectively) and reuse it; calls on one `Comm` must
/// be ordered (one stream at a time, which `&mut self` enforces on the host), and every member
/// of the team makes the same calls in the same order, with the same lengths, types and ops.
pub struct Comm {
    pub(super) pgas: Pgas,
    pub(super) team: Team,
    /// This PE's number in the team, `None` when it is not a member.
    pub(super) rank: Option<usize>,
    pub(super) n: usize,
    /// Whether every member is load/store reachable from this PE.
    pub(super) p2p: bool,
    pub(super) max_blocks: usize,
    /// Team rank -> world PE (the first `n` entries).
    pub(super) pes: SymTensor<i32>,
    /// `sig[b * n + r]`: block `b` of team rank `r` entered (`2e - 1`) or left (`2e`) call `e`.
    pub(super) sig: SymTensor<u64>,
    /// Calls each block took part in.
    pub(super) epochs: SymTensor<u64>,
    /// Scratch of the host-side exchanges ([`Comm::all_to_all_layout`]): `world` gathered rows
    /// of `row_words(world)` words, then this PE's own row.
    pub(super) agree: SymTensor<u64>,
    /// Tells this communicator's [`AllToAllLayout`](super::AllToAllLayout)s from others' (unique in the process).
    pub(super) id: u64,
    /// The low-latency all-reduce's scratch: one region of `ll_region(world)` words per block.
    pub(super) ll_scratch: SymTensor<u64>,
    /// Where the team is `Team::WORLD` spread over several nodes: the communicators of each
    /// level (`hier.rs`).
    pub(super) hier: Option<Box<Hier>>,
    /// The intermediate results of the composed paths (`scratch.rs`).
    pub(super) scratch: Scratch,
    /// Whether the team is every PE: only then may a call allocate (NVSHMEM's allocation is
    /// collective over every PE), so only then does the pushed two-shot, whose stage grows, run.
    pub(super) all_pes: bool,
    /// The pushed two-shot's stage (`n` slots of a chunk): its own, since its kernel stores
    /// into a peer's stage without a handshake, which only this kernel's protocol orders.
    pub(super) push_stage: Scratch,
}

/// The two levels of a communicator whose team spans several nodes (`hier.rs`, which holds
/// its methods: the type lives here because a `Comm` holds one and it holds `Comm`s, and a file
/// that imported the other's would make an import loop).
pub(super) struct Hier {
    pub(super) pgas: Pgas,
    /// This PE's group: every member load/store reachable.
    pub(super) node: Comm,
    /// The PEs with this PE's place in the other groups: none reachable.
    pub(super) cross: Comm,
    /// PEs a group.
    pub(super) g: usize,
}

/// Words one member contributes to an all-to-all-v layout exchange (`layout.rs`; `Comm::new`
/// sizes the exchange's scratch by it): a status (0: the slices had the team's length), then its
/// send counts, send displacements, receive counts and receive displacements, `n` of each.
pub(super) fn row_words(n: usize) -> usize {
    1 + 4 * n
}

/// Regions of the low-latency scratch: one per block of the largest call.
const LL_REGIONS: usize = LL_MAX_BYTES / LL_BYTES_PER_BLOCK;

/// Data bytes of each sender's lines in one block's region of the low-latency scratch: twice
/// what a block of the other kernels sends, for the broadcast's relay, whose block takes this
/// for each rank but the root (up to 1 MiB in one call of 128 blocks on 4 PEs: far faster
/// than regions of 2 KiB, two calls a block; `docs/coll.md`).
pub const LL_REGION_BYTES: usize = 2 * LL_BYTES_PER_BLOCK;

/// Words of one block's region of the low-latency scratch in a team of `n` (the most any
/// element type needs: lines of 8 bytes).
pub(super) fn ll_region(n: usize) -> usize {
    device_scratch_len::<u64>(n, LL_REGION_BYTES / 8)
}

/// The `u64` words of symmetric scratch one block's `team_all_reduce_block` or
/// `team_all_gather_block` of `len` elements of `T` needs in a team of `n_pes`: its call counter
/// and two sets of 16-byte lines (8 data bytes each) from every PE, in groups of 32 lines (a
/// warp's, so that its stores to a peer are whole 128-byte writes). Allocate a multiple for
/// several blocks (each calls with its own `&mut scratch[b * words]`), zeroed (as
/// `Pgas::alloc` is), once; reuse it for every later call with at most `len` elements.
pub fn device_scratch_len<T>(n_pes: usize, len: usize) -> usize {
    // At least one line: a call of 0 elements exchanges one (see `LL_SUPPORT`).
    let lines = (len * std::mem::size_of::<T>()).div_ceil(8).max(1);
    2 + 4 * n_pes * lines.next_multiple_of(32)
}

/// The next [`Comm`]'s `id`.
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

crate::debug::debug_fields!(|c: Comm| team: c.team, rank: c.rank, n: c.n, p2p: c.p2p,
    hierarchy: c.hierarchy());

impl Comm {
    /// A communicator over `team`. Collective over **all** PEs (it allocates symmetric memory),
    /// members or not: a PE outside the team passes `None` (what
    /// [`Team::split_strided`] returned it) and gets a `Comm` whose calls are errors.
    pub fn new(pgas: &Pgas, team: impl Into<Option<Team>>) -> Result<Comm> {
        let world = pgas.n_pes();
        let team = team.into();
        let over_world = team == Some(Team::WORLD);
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
        let agree = pgas.alloc::<u64>((world + 1) * row_words(world))?;
        let ll_scratch = pgas.alloc::<u64>(LL_REGIONS * ll_region(world))?;
        let p2p = pgas
            .first_unreachable(&sig, table[..n].iter().map(|&pe| pe as usize))?
            .is_none();
        let sms = pgas.sm_count()?;
        // Every PE passed WORLD (or none did), so all or none take part in this.
        let hier = if over_world {
            Hier::new(pgas, &sig)?.map(Box::new)
        } else {
            None
        };
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
            hier,
            scratch: Scratch::new(pgas),
            all_pes: n == world,
            push_stage: Scratch::new(pgas),
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
    /// [`Algorithm::Nvshmem`] and [`Algorithm::Hierarchical`] work, and [`Algorithm::Auto`]
    /// takes one of them).
    pub fn peers_reachable(&self) -> bool {
        self.p2p
    }

    /// The PEs a node has where this communicator runs the hierarchical algorithms (its team
    /// is `Team::WORLD`, spread over groups of that many consecutive PEs, each reachable only
    /// inside its group: several nodes, or `PGAS_PEER_ACCESS=nodes:N`), else `None`.
    pub fn hierarchy(&self) -> Option<usize> {
        self.hier.as_ref().map(|h| h.group())
    }

    /// The most bytes a chunk (an all-reduce's data, a PE's part of a gather) the low-latency
    /// kernels take on this GPU: [`LL_MAX_BYTES`], or [`LL_BYTES_PER_BLOCK`] times the SM count
    /// where that is less, so that every block of a call is resident (each waits for its
    /// namesakes on the peers).
    pub fn low_latency_max_bytes(&self) -> usize {
        LL_BYTES_PER_BLOCK * LL_REGIONS.min(self.max_blocks)
    }

    /// Whether a low-latency kernel takes `chunks` chunks of `chunk` bytes, staging `copies` of
    /// a block's share of one in its shared memory: the chunk within
    /// [`Comm::low_latency_max_bytes`] (the scratch's regions, the SMs) and the staging within
    /// [`LL_SHARED_MAX_BYTES`] (a block's share as [`Comm::launch_ll`] cuts it, at most the
    /// chunk).
    pub(super) fn ll_fits(&self, chunk: usize, chunks: usize, copies: usize) -> bool {
        let share = self.ll_share(chunk, chunks, LL_BYTES_PER_BLOCK);
        chunk <= self.low_latency_max_bytes()
            && copies * share.min(chunk.next_multiple_of(16)) <= LL_SHARED_MAX_BYTES
    }

    /// The bytes of a chunk of `chunk` bytes each block of a low-latency kernel takes: whole
    /// 16-byte vectors (so each chunk's share starts aligned in shared memory), `block_max`
    /// over the chunks, more where the regions of the scratch (or the SMs) run out.
    fn ll_share(&self, chunk: usize, chunks: usize, block_max: usize) -> usize {
        let regions = LL_REGIONS.min(self.max_blocks);
        (block_max / chunks / 16 * 16).max(chunk.div_ceil(regions).next_multiple_of(16))
    }

    /// Whether the broadcast's relay takes `bytes`: within [`BROADCAST_RELAY_MAX_BYTES`], on more
    /// than 2 PEs, and within one protocol call of each block (`n - 1` regions' data a block,
    /// one block a region, no more blocks than SMs).
    pub(super) fn relay_fits(&self, bytes: usize) -> bool {
        self.n > 2
            && bytes <= BROADCAST_RELAY_MAX_BYTES
            && bytes <= (self.n - 1) * LL_REGION_BYTES * LL_REGIONS.min(self.max_blocks)
    }

    /// The algorithm [`Algorithm::Auto`] takes for an all-reduce of `bytes` bytes (`in_place`:
    /// `dst` is `src`).
    pub fn auto_algorithm(&self, bytes: usize, in_place: bool) -> Algorithm {
        if self.p2p && bytes <= self.low_latency_max_bytes() {
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
        if !self.p2p && self.hier.is_some() {
            Algorithm::Hierarchical
        } else if !self.p2p {
            Algorithm::Nvshmem
        } else if bytes <= one_shot_max && !in_place {
            Algorithm::OneShot
        } else {
            Algorithm::TwoShot
        }
    }

    /// This PE's team rank, or the error a non-member's call gets.
    /// Also refuses a call after the team was destroyed ([`Team::destroy`]): the kernels use
    /// the world PE numbers gathered at `new`, but the communicator is over that team, and the
    /// Nvshmem and low-latency algorithms hand it to NVSHMEM.
    pub(super) fn member(&self) -> Result<usize> {
        self.team.ensure_live(&self.pgas)?;
        self.rank.ok_or_else(|| Error::InvalidConfig {
            name: "team",
            value: format!("{}", self.team.raw()),
            reason: format!(
                "PE {} is not a member of this communicator's team; only members call its \
                 collectives. A communicator made with no team (`Comm::new(pgas, None)`, what \
                 a PE outside a split passes) has no member: make it over `Team::WORLD` for \
                 every PE",
                self.pgas.my_pe()
            ),
        })
    }

    /// The error of a peer-to-peer collective when some peer is not load/store reachable.
    pub(super) fn check_p2p(&self, what: &str) -> Result<()> {
        if self.p2p {
            return Ok(());
        }
        Err(Error::InvalidConfig {
            name: "team",
            value: format!("{}", self.team.raw()),
            reason: format!(
                "a PE of the team is not load/store reachable from this one (no NVLink or peer \
                 access, or PGAS_PEER_ACCESS), and this form of pgas's {what} works only by peer \
                 loads and stores. Fix: pass Algorithm::Auto, which takes NVSHMEM's collective \
                 (or the hierarchical one across nodes) there"
            ),
        })
    }

    /// An `Err` unless `bytes` bytes at `ptr` lie in the symmetric heap (a `SymRegion` of one's
    /// own can name any address).
    pub(super) fn check_symmetric(&self, what: &str, ptr: u64, bytes: usize) -> Result<()> {
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
    pub(super) fn check_movement<T>(
        &self, what: &str, dst: &impl SymRegion<T>, src: &impl SymRegion<T>, reached: Reached,
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

    /// This PE's team rank and the communicator's flags, for the kernel of a fused operation
    /// that synchronizes with the same protocol as these collectives (`docs/coll.md`,
    /// "Synchronization"; `ops::allreduce_rmsnorm`): its calls then count on the same call
    /// counters, so they mix with this communicator's collectives on one stream. `Err` for a
    /// non-member or where a peer is not load/store reachable (`what` names the operation).
    pub(crate) fn kernel_flags(&mut self, what: &str) -> Result<(usize, KernelFlags<'_>)> {
        self.check_p2p(what)?;
        self.local_flags()
    }

    /// [`Comm::kernel_flags`] for a kernel form that takes the flags but exchanges nothing (a
    /// fused operation's local half): no peer needs to be reachable. `Err` for a non-member.
    pub(crate) fn local_flags(&mut self) -> Result<(usize, KernelFlags<'_>)> {
        let rank = self.member()?;
        Ok((
            rank,
            KernelFlags {
                pes: &self.pes,
                sig: &mut self.sig,
                epochs: &mut self.epochs,
            },
        ))
    }

    /// Launches a low-latency kernel of `kernels/` (`spec` with its comptime values; arguments
    /// the team, `dst`, `src`, the low-latency scratch, then `scalars`, then the scratch's
    /// region stride and the elements a block takes) over `shape.len` elements a PE: one block
    /// per `shape.block_max` ([`LL_BYTES_PER_BLOCK`] but for the broadcast's relay) over
    /// `shape.chunks` chunks (more per block where the GPU has fewer SMs than the scratch has
    /// regions), each block over its own region of the scratch
    /// and with `shape.copies` times its elements of dynamic shared memory. Called by members
    /// only, on teams whose every PE is load/store reachable, with `len` at most
    /// [`Comm::low_latency_max_bytes`] of `T` a chunk.
    pub(super) fn launch_ll<T>(
        &mut self, stream: &CudaStream, (spec, comptime): (&'static KernelSpec, &[i128]),
        dst: &mut impl SymRegion<T>, src: &Region<T>, scalars: &[u32], shape: LlShape,
    ) -> Result<()> {
        let size = std::mem::size_of::<T>();
        let bytes = self.ll_share(shape.len * size, shape.chunks, shape.block_max);
        let per_block = bytes / size;
        let blocks = shape.len.div_ceil(per_block).max(1);
        // At most one block per region of the scratch.
        debug_assert!(blocks <= LL_REGIONS.min(self.max_blocks) && bytes <= shape.block_max);
        // Every low-latency kernel strides the scratch by the same region, whatever its blocks
        // take: block `b` of each shares region `b`'s call counter, which must sit at the same
        // word for all of them (a smaller stride put the personal kernels' counters among the
        // all-reduce's lines: the two hung when mixed).
        let region = ll_region(self.n);
        let shared = shape.copies * (shape.len.min(per_block) * size).next_multiple_of(16);
        let mut args = KernelArgs::new();
        args.push_team(self.team)
            .push_sym_mut(dst)
            .push_sym(src)
            .push_sym_mut(&mut self.ll_scratch);
        if shape.flags {
            let rank = self.member()?;
            self.push_flags(&mut args, rank);
        }
        for &v in scalars {
            args.push_scalar(v);
        }
        args.push_scalar(region as u32)
            .push_scalar(per_block as u32);
        let cfg = LaunchConfig::blocks(blocks as u32, THREADS).with_shared_mem(shared as u32);
        self.launch_plain(stream, (spec, comptime), cfg, &mut args)
    }

    /// Launches a peer-to-peer collective kernel of `kernels/` (arguments `dst`, `src`, the
    /// buffer `between` names if any, the rank table, the flags, the team size, this PE's
    /// rank, then `scalars`) with a grid of one block per [`BYTES_PER_BLOCK`] of `work` (the
    /// bytes each PE handles: the same on every PE for the same call) up to the SM count. Called
    /// by members only (after [`Comm::member`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch_p2p<T>(
        &mut self, stream: &CudaStream, spec: &'static KernelSpec, comptime: &[i128],
        dst: &mut impl SymRegion<T>, src: &Region<T>, between: Between<'_, T>, work: usize,
        scalars: &[u32],
    ) -> Result<()> {
        let rank = self.member()?;
        let blocks = work.div_ceil(BYTES_PER_BLOCK).clamp(1, self.max_blocks) as u32;
        let mut args = KernelArgs::new();
        args.push_sym_mut(dst).push_sym(src);
        match between {
            Between::Nothing => {}
            Between::Table(table) => {
                // SAFETY: the layout that owns the table outlives this call, and the kernel
                // reads the table on this PE only (see `all_to_all_v` in `kernels/`).
                unsafe { args.push_local_as_sym::<u64>(table.ptr, table.len) };
            }
            Between::Stage(mut stage) => {
                args.push_sym_mut(&mut stage);
            }
        }
        self.push_flags(&mut args, rank);
        for &v in scalars {
            args.push_scalar(v);
        }
        let cfg = LaunchConfig::blocks(blocks, THREADS);
        self.launch_plain(stream, (spec, comptime), cfg, &mut args)
    }

    /// [`Comm::launch_p2p`] of a data-movement kernel: no comptime values, nothing between
    /// `src` and the rank table.
    pub(super) fn launch_moving<T>(
        &mut self, stream: &CudaStream, spec: &'static KernelSpec, dst: &mut impl SymRegion<T>,
        src: &Region<T>, work: usize, scalars: &[u32],
    ) -> Result<()> {
        self.launch_p2p(stream, spec, &[], dst, src, Between::Nothing, work, scalars)
    }

    /// Pushes the flag protocol's arguments of team rank `rank` (this PE): the rank table,
    /// `sig`, `epochs`, the team size and the rank.
    fn push_flags(&mut self, args: &mut KernelArgs<'_>, rank: usize) {
        args.push_sym(&self.pes)
            .push_sym_mut(&mut self.sig)
            .push_sym_mut(&mut self.epochs)
            .push_scalar(self.n as u32)
            .push_scalar(rank as u32);
    }

    /// Launches the plain variant of `spec` (with its comptime values) on `stream` with `args`.
    fn launch_plain(
        &self, stream: &CudaStream, (spec, comptime): (&'static KernelSpec, &[i128]),
        cfg: LaunchConfig, args: &mut KernelArgs<'_>,
    ) -> Result<()> {
        pgas_runtime::launch::launch(
            &self.pgas,
            spec,
            Variant::Plain,
            comptime,
            cfg,
            Some(stream),
            args,
        )
    }
}

/// The buffer a peer-to-peer kernel takes between `src` and the rank table
/// ([`Comm::launch_p2p`]).
pub(super) enum Between<'a, T> {
    Nothing,
    /// The all-to-all-v layout's table (this PE's memory).
    Table(&'a LocalTable),
    /// The pushed two-shot's stage (`Comm::push_stage`).
    Stage(Region<T>),
}

/// How a low-latency kernel's data splits over its blocks ([`Comm::launch_ll`]).
pub(super) struct LlShape {
    /// Elements a PE (a chunk's, for the personal kernels), split over the blocks.
    pub len: usize,
    /// Chunks a block takes its share of: 1 for the all-reduce and the broadcast (the root's
    /// lines, nothing staged); the team's PEs for the all-gather (every PE's share lands in the
    /// block's shared memory) and the personal kernels (the all-to-all and reduce-scatter stage
    /// chunk `q` for rank `q`), so that what a block stages stays within `block_max` (the
    /// all-gather ran faster with `n` chunks a block than with one: `docs/coll.md`).
    pub chunks: usize,
    /// Dynamic shared memory, in blocks' shares (each a block's elements of a chunk, rounded
    /// up to 16 bytes): none for the all-reduce and the broadcast, the team's PEs for the
    /// all-gather, `2 n` for the all-to-all's staging both ways, `n + 1` for the
    /// reduce-scatter's (and the two-shot's).
    pub copies: usize,
    /// Whether the kernel also takes the entry handshake's flags after the scratch (the rank
    /// table, `sig`, `epochs`, the team size and this PE's rank: the low-latency two-shot).
    pub flags: bool,
    /// The bytes of a chunk a block takes, and more only where the regions run out:
    /// [`LL_BYTES_PER_BLOCK`], but for the broadcast's relay, whose block takes a region's
    /// lines for each rank but the root ([`Comm::relay_fits`]; fewer, fuller blocks ran a
    /// little faster).
    pub block_max: usize,
}

impl LlShape {
    /// The usual shape: `len` elements of each of `chunks` chunks, `copies` shares of dynamic
    /// shared memory, no flags, at most [`LL_BYTES_PER_BLOCK`] of a chunk a block.
    pub(super) fn new(len: usize, chunks: usize, copies: usize) -> LlShape {
        LlShape {
            len,
            chunks,
            copies,
            flags: false,
            block_max: LL_BYTES_PER_BLOCK,
        }
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

/// `Err` unless the buffer `what` (`len` elements) splits into one chunk per PE of a team of
/// `n`, and `chunk`, the other buffer of the call where it is one chunk (its name and length),
/// is `len / n` elements: a reduce-scatter's source and destination, an all-gather's
/// destination and source, all-to-all's buffers.
pub(super) fn check_chunks(
    what: &'static str, len: usize, n: usize, chunk: Option<(&'static str, usize)>,
) -> Result<()> {
    if !len.is_multiple_of(n) {
        return Err(Error::InvalidConfig {
            name: what,
            value: format!("{len} elements"),
            reason: format!(
                "it holds one chunk per PE of the team, so its length must be a multiple of \
                 the team's {n} PEs"
            ),
        });
    }
    match chunk {
        Some((chunk_what, got)) if got != len / n => Err(Error::LengthMismatch {
            what: chunk_what,
            got,
            expected: len / n,
        }),
        _ => Ok(()),
    }
}

/// The buffer of an all-gather or all-to-all by `algorithm` that the peers reach
/// ([`Comm::check_movement`]): `src` where one-shot pulls, `dst` where the others push.
pub(super) fn reached_by(algorithm: Algorithm) -> Reached {
    if algorithm == Algorithm::OneShot {
        Reached::Source
    } else {
        Reached::Destination
    }
}

/// An `Err` when `stream` is being captured into a CUDA graph: the NVSHMEM paths run eagerly
/// only (their capture is not tested here).
pub(super) fn refuse_capture(stream: &CudaStream, what: &str) -> Result<()> {
    if !capturing(stream)? {
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

#[cfg(test)]
mod tests {
    #[test]
    fn device_scratch_has_a_line_even_for_no_data() {
        // Counter words, then two sets of lines (two words each) from each of 4 PEs in groups
        // of 32: one group for 0 elements too (a call of no data still exchanges a line), 2
        // for 33 lines.
        assert_eq!(super::device_scratch_len::<u8>(4, 0), 2 + 4 * 4 * 32);
        assert_eq!(super::device_scratch_len::<u8>(4, 8), 2 + 4 * 4 * 32);
        assert_eq!(super::device_scratch_len::<u8>(4, 256), 2 + 4 * 4 * 32);
        assert_eq!(super::device_scratch_len::<u8>(4, 257), 2 + 4 * 4 * 64);
    }
}
