//! The host side of [`super::kernel::gemm_bf16_sm90`]: which tile, ring depth and cluster a
//! shape gets, the checks before a launch, and the launch itself.

use super::kernel::{gemm_bf16_sm90, gemm_splitk_finish, BK, BM, THREADS};
use super::shape::{self, size_error, tile_error};
use crate::e4m3;
use crate::kernel::Variant;
use crate::prelude::*;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};

/// The comptime choices of one GEMM specialization, and its grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmConfig {
    /// Slots of the shared-memory ring.
    pub stages: u32,
    /// Columns of C per block: 64, 128 or 256.
    pub bn: u32,
    /// Blocks per cluster along M (1 or 2), which share Bt's tile by multicast.
    pub cluster: u32,
    /// Clusters in the grid: `None` for as many as can be resident at once (persistent),
    /// `Some(n)` for `n` (one per cluster tile reproduces a non-persistent launch).
    pub clusters: Option<u32>,
    /// Parts each tile's K steps are cut into (split-K; 1 for none), dividing them: a C of few
    /// tiles (decode-sized M) then still gives every multiprocessor work. [`STREAM_K`] (0):
    /// the grid's clusters share all the tiles' K steps evenly instead, a contiguous run each,
    /// so no wave of units is left part-full. Other than 1 the parts' f32 sums meet in a
    /// workspace, so only the calls on `CudaSlice`s take it ([`gemm_bf16_with`],
    /// [`gemm_fp8_with`]).
    pub splits: u32,
}

/// [`GemmConfig::splits`] for stream-K.
pub const STREAM_K: u32 = 0;

impl GemmConfig {
    /// The specialization for `m x n x k` on a GPU with `sms` multiprocessors:
    /// [`GemmConfig::whole_k`]'s, except at most 64 rows (a decode step's), which take 256-wide
    /// tiles with K split in the fewest parts (2, 4 or 8) that give nearly every multiprocessor
    /// a unit, or stream-K where those parts would leave a last wave of units less than 90%
    /// full. The rule follows what `benches/gemm_shapes.rs` measured (`docs/gemm.md`,
    /// "Split-K" and its stream-K paragraph): splitting paid at M = 64 and lost at M = 128.
    pub fn for_shape(m: usize, n: usize, k: usize, sms: usize) -> GemmConfig {
        let whole = GemmConfig::whole_k(m, n, sms);
        let ksteps = k / BK;
        let wide = m.div_ceil(BM) * (n / 256);
        let split = [2u32, 4, 8]
            .into_iter()
            .find(|&s| ksteps.is_multiple_of(s as usize) && busy(wide * s as usize, sms))
            .map(|s| {
                if whole_waves(wide * s as usize, sms) {
                    s
                } else {
                    STREAM_K
                }
            });
        match split {
            Some(splits) if m <= 64 && whole.bn < 256 && n.is_multiple_of(256) => GemmConfig {
                stages: (192 * 1024 / slot_bytes(256)) as u32,
                bn: 256,
                splits,
                ..whole
            },
            _ => whole,
        }
    }

    /// The specialization for `m x n` with every K step in one unit (no split-K): the widest
    /// tile that still gives nearly every multiprocessor (90%) a tile, as deep a ring as fits
    /// 192 KiB, and clusters of 2 where M has an even number of 128-row tiles (the last one may
    /// be partial). What the fused operations take (they store C's chunks themselves) and the
    /// calls on device addresses, which have no split-K workspace.
    pub fn whole_k(m: usize, n: usize, sms: usize) -> GemmConfig {
        let tiles = |bn: usize| m.div_ceil(BM) * (n / bn);
        // A wider tile is worth a few idle multiprocessors: 128-wide tiles run far slower than
        // 256-wide ones (`docs/gemm.md` has the figure).
        let bn = [256, 128]
            .into_iter()
            .find(|&bn| n.is_multiple_of(bn) && busy(tiles(bn), sms))
            .unwrap_or(64);
        GemmConfig {
            stages: (192 * 1024 / slot_bytes(bn as u32)) as u32,
            bn: bn as u32,
            cluster: if m.div_ceil(BM).is_multiple_of(2) {
                2
            } else {
                1
            },
            clusters: None,
            splits: 1,
        }
    }

    /// The specialization for a grouped GEMM of `m` rows (all groups') by `n` on `sms`
    /// multiprocessors: [`GemmConfig::whole_k`]'s without clusters, since the blocks of a
    /// cluster share Bt's tile and neighbouring row tiles may belong to different groups.
    pub fn for_grouped(m: usize, n: usize, sms: usize) -> GemmConfig {
        GemmConfig {
            cluster: 1,
            ..GemmConfig::whole_k(m, n, sms)
        }
    }

    /// Dynamic shared memory a block needs: the ring, the epilogue's four 64 x 64 tiles and
    /// two mbarriers a slot.
    pub fn shared_bytes(&self) -> u32 {
        self.stages * (slot_bytes(self.bn) as u32 + 16) + EPILOGUE_BYTES
    }

    /// The launch of one cluster of this specialization: its blocks, their threads and shared
    /// memory, and the cluster's shape.
    fn cluster_launch(&self) -> LaunchConfig {
        LaunchConfig::blocks(self.cluster, THREADS)
            .with_shared_mem(self.shared_bytes())
            .with_cluster((self.cluster, 1, 1))
    }

    /// The kernel's comptime values for this specialization (ring, tile width, cluster, then
    /// how it takes C's rows and whether A and Bt are FP8), as `pgas::launch::prewarm` takes
    /// them.
    pub fn comptime(&self, rows: Chunking, fp8: bool) -> [i128; 8] {
        [
            self.stages as i128,
            self.bn as i128,
            self.cluster as i128,
            (rows == Chunking::Gather) as i128,
            (rows == Chunking::Scatter) as i128,
            fp8 as i128,
            (rows == Chunking::Grouped) as i128,
            (rows == Chunking::Half) as i128,
        ]
    }
}

/// Whether `units` of work give nearly every one of `sms` multiprocessors one: 90% of them.
fn busy(units: usize, sms: usize) -> bool {
    units * 10 >= sms * 9
}

/// Whether `units` of work fill their waves on `sms` multiprocessors (the last one 90% full or
/// more), as [`busy`] asks of the first.
fn whole_waves(units: usize, sms: usize) -> bool {
    busy(units - (units - 1) / sms * sms, sms)
}

/// How a launch takes C's rows: the kernel's `gather` and `scatter` specializations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunking {
    /// All of C from A, in the order that shares L2 best.
    Whole,
    /// A's rows in chunks, one a PE, each waited for as it lands (the all-gather + GEMM).
    Gather,
    /// C's rows in chunks, each announced as it is finished (the GEMM + reduce-scatter).
    Scatter,
    /// Each 128-row tile with the Bt of its group (the grouped GEMM, [`super::gemm_grouped`]).
    Grouped,
    /// As `Whole`, for M of at most 64 rows (decode-sized): the kernel's `half`
    /// specialization, whose second multiplying warpgroup idles. A `Whole` launch takes it
    /// itself when M fits.
    Half,
}

/// The epilogue's shared memory: two 64 x 64 bf16 tiles for each multiplying warpgroup.
const EPILOGUE_BYTES: u32 = 4 * 64 * 64 * 2;

/// Bytes of one ring slot: A's 128 x 64 tile and Bt's `bn` x 64.
fn slot_bytes(bn: u32) -> usize {
    (BM + bn as usize) * BK * 2
}

/// Why `(m, n, k)` cannot run, if it cannot: M may be any size (the copy engine reads zeros
/// past it and stores nothing there), but N is whole 64-column tiles and K whole 64-element
/// steps, which the kernel has no edge handling for.
pub fn shape_error(m: usize, n: usize, k: usize) -> Option<String> {
    let note = " (any M; wider N tiles where they divide)";
    tile_error("the sm_90a GEMM", (m, n, k), (1, 64, BK), note)
}

fn refuse<T>(reason: String) -> crate::Result<T> {
    shape::refuse("gemm_bf16_sm90", reason)
}

/// `C = A Btᵀ` (`A` m x k, `Bt` n x k, `C` m x n, row-major bf16, f32 accumulate) on the pgas
/// stream with the specialization [`GemmConfig::for_shape`] picks; `checked` runs the variant
/// that checks every index. Needs sm_90a (H100, H200).
pub fn gemm_bf16(
    pgas: &Pgas, c: &mut CudaSlice<bf16>, a: &CudaSlice<bf16>, bt: &CudaSlice<bf16>,
    (m, n, k): (usize, usize, usize), checked: bool,
) -> crate::Result<()> {
    let cfg = GemmConfig::for_shape(m, n, k, pgas.sm_count()?);
    gemm_bf16_with(pgas, c, a, bt, (m, n, k), cfg, checked)
}

/// [`gemm_bf16`] with the specialization given. Refuses a shape that is not whole tiles,
/// buffers of the wrong size, a tile width, ring or cluster the kernel does not take, before
/// anything launches.
pub fn gemm_bf16_with(
    pgas: &Pgas, c: &mut CudaSlice<bf16>, a: &CudaSlice<bf16>, bt: &CudaSlice<bf16>,
    (m, n, k): (usize, usize, usize), cfg: GemmConfig, checked: bool,
) -> crate::Result<()> {
    check_sizes((a.len(), bt.len(), c.len()), (m, n, k))?;
    check(cfg, (m, n, k))?;
    let stream = pgas.stream();
    let a_map = TensorMap::tiled_2d_ragged(stream, a, a_tile(m, k))?;
    let b_map = TensorMap::tiled_2d(stream, bt, b_tile(n, k, cfg))?;
    launch_into(pgas, c, (&a_map, &b_map), (m, n, k), cfg, false, checked)
}

/// A launch that does not gather, on `stream`: the maps of C, A and Bt (and split-K's
/// workspace, when `cfg` splits), the unused `landed` word, the launch.
#[allow(clippy::too_many_arguments)]
fn launch_local<'t>(
    pgas: &Pgas, stream: &CudaStream,
    (c_map, a_map, b_map): (
        &mut TensorMap<'t, bf16>,
        &TensorMap<'t, bf16>,
        &TensorMap<'t, bf16>,
    ),
    w: Option<&mut TensorMap<'static, f32>>, (m, n, k): (usize, usize, usize), cfg: GemmConfig,
    fp8: bool, checked: bool,
) -> crate::Result<()> {
    let maps = Maps {
        c: c_map,
        a: a_map,
        b: b_map,
        gathered: a_map,
        w,
    };
    launch(
        pgas,
        stream,
        maps,
        Words::default(),
        (m, n, k),
        (Chunking::Whole, (0, 0, 1)),
        cfg,
        fp8,
        checked,
    )
}

/// [`launch_local`] on the pgas stream, into `c`. With split-K, the parts add into this
/// context's workspace (left zeroed by the call before), then [`gemm_splitk_finish`] rounds it
/// into `c` and zeroes it.
fn launch_into(
    pgas: &Pgas, c: &mut CudaSlice<bf16>,
    (a_map, b_map): (&TensorMap<'_, bf16>, &TensorMap<'_, bf16>), (m, n, k): (usize, usize, usize),
    cfg: GemmConfig, fp8: bool, checked: bool,
) -> crate::Result<()> {
    let stream = pgas.stream();
    if cfg.splits == 1 {
        let mut c_map = TensorMap::tiled_2d_ragged_mut(stream, c, c_tile(m, n))?;
        let maps = (&mut c_map, a_map, b_map);
        return launch_local(pgas, stream, maps, None, (m, n, k), cfg, fp8, checked);
    }
    let mut spaces = WORKSPACES.lock().unwrap_or_else(|e| e.into_inner());
    let space = workspace(&mut spaces, pgas, m * n)?;
    // The finish kernel leaves the workspace zeroed for the next call, so it is zeroed here only
    // when a call before got its GEMM enqueued but not its finish.
    if space.dirty {
        stream
            .memset_zeros(&mut space.buf)
            .map_err(crate::Error::cuda("zeroing the split-K workspace"))?;
        space.dirty = false;
    }
    let w = &mut space.buf;
    {
        let (wp, _w) = w.device_ptr_mut(stream);
        // SAFETY: the workspace holds at least m x n f32 (`workspace`) and outlives the launch
        // (it is kept in WORKSPACES, freed on the stream that uses it).
        let mut w_map = unsafe { TensorMap::from_device_ptr_ragged(wp, m * n, w_tile(m, n))? };
        let mut c_map = TensorMap::tiled_2d_ragged_mut(stream, c, c_tile(m, n))?;
        let maps = (&mut c_map, a_map, b_map);
        launch_local(
            pgas,
            stream,
            maps,
            Some(&mut w_map),
            (m, n, k),
            cfg,
            fp8,
            checked,
        )?;
    }
    space.dirty = true;
    let len = m * n;
    let finish = LaunchConfig::blocks(len.div_ceil(256) as u32, 256);
    // SAFETY: unchecked, `len` is C's length (checked by the callers) and the workspace's at
    // least, so every index the kernel forms is in bounds.
    unsafe { gemm_splitk_finish::launch_checked_if_on(pgas, stream, finish, checked, c, w, len) }?;
    space.dirty = false;
    Ok(())
}

/// A context's split-K workspace: f32 sums that the finish kernel rounds into C and zeroes.
struct Workspace {
    buf: CudaSlice<f32>,
    /// Whether `buf` may hold sums: a call got its GEMM enqueued but not its finish.
    dirty: bool,
}

/// This context's split-K workspace, at least `len` f32 (grown, never shrunk), made zeroed.
fn workspace<'w>(
    all: &'w mut Vec<(usize, Workspace)>, pgas: &Pgas, len: usize,
) -> crate::Result<&'w mut Workspace> {
    let zeroed = |len| -> crate::Result<Workspace> {
        Ok(Workspace {
            buf: pgas.stream().alloc_zeros::<f32>(len)?,
            dirty: false,
        })
    };
    let w = of_context(all, pgas, || zeroed(len))?;
    if w.buf.len() < len {
        *w = zeroed(len)?;
    }
    Ok(w)
}

/// This CUDA context's entry of `all` (keyed by the context handle's address), made by `make`
/// if it is not there yet: what the GEMM keeps once a context ([`UNUSED`], [`WORKSPACES`]).
fn of_context<'a, T>(
    all: &'a mut Vec<(usize, T)>, pgas: &Pgas, make: impl FnOnce() -> crate::Result<T>,
) -> crate::Result<&'a mut T> {
    let ctx = pgas.cuda().cu_ctx() as usize;
    let i = match all.iter().position(|(c, _)| *c == ctx) {
        Some(i) => i,
        None => {
            all.push((ctx, make()?));
            all.len() - 1
        }
    };
    Ok(&mut all[i].1)
}

/// Split-K workspaces by CUDA context: see [`workspace`].
static WORKSPACES: std::sync::Mutex<Vec<(usize, Workspace)>> = std::sync::Mutex::new(Vec::new());

/// An element type the Hopper GEMM multiplies: bf16, or FP8 [`e4m3`] (unscaled), whose K the
/// kernel and its maps count in pairs (see `fp8_pairs`). Sealed: the kernel has multipliers
/// for these two only.
pub trait Operand: cudarc::driver::DeviceRepr + sealed::Sealed {
    /// Whether the kernel runs its FP8 multipliers (`wgmma_m64n{bn}k32`).
    const FP8: bool;
}

impl Operand for bf16 {
    const FP8: bool = false;
}

impl Operand for e4m3 {
    const FP8: bool = true;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::bf16 {}
    impl Sealed for crate::e4m3 {}
}

/// K in the kernel's columns for a GEMM of depth `k`: `k` for bf16, its pairs when `fp8`
/// (refused unless whole FP8 tiles).
pub(crate) fn kernel_k(fp8: bool, k: usize) -> crate::Result<usize> {
    if fp8 {
        fp8_pairs(k)
    } else {
        Ok(k)
    }
}

/// Why [`gemm_raw`] refuses an `m x n x k` GEMM (`k` in values, FP8 ones when `fp8`), or
/// `None`: what a caller that checks before calling asks (the Python module's `out=` GEMM).
pub fn raw_shape_error(m: usize, n: usize, k: usize, fp8: bool) -> Option<String> {
    match kernel_k(fp8, k) {
        Ok(k) => shape_error(m, n, k),
        Err(e) => Some(e.to_string()),
    }
}

/// K in the kernel's columns for an FP8 GEMM of depth `k`: the kernel and its maps count K in
/// pairs of FP8 values (two bytes, one "bf16" column), so the copy engine moves the same 128-byte
/// rows. Refuses a `k` that is not whole FP8 tiles.
fn fp8_pairs(k: usize) -> crate::Result<usize> {
    if k == 0 || !k.is_multiple_of(2 * BK) {
        return refuse(format!(
            "K = {k} is not a positive multiple of {} (FP8 tiles are 128 values of K)",
            2 * BK
        ));
    }
    Ok(k / 2)
}

/// `C = A Btᵀ` on `stream` over device addresses, with the specialization
/// [`GemmConfig::for_shape`] picks without split-K: `A` (m x k) and `Bt` (n x k) row-major, bf16, or `e4m3`
/// when `fp8` (K then a multiple of 128), `C` (m x n) bf16, f32 accumulate. What a caller
/// holding raw addresses runs (the Python module, on torch tensors). Refuses a shape that is
/// not whole tiles, before anything launches. Needs sm_90a (H100, H200).
///
/// # Safety
/// `c`, `a` and `b` are addresses on this PE's GPU of `m x n` bf16 and `m x k` and `n x k`
/// elements, 16-byte aligned, that stay allocated until `stream` has passed the launch, and
/// nothing else writes them meanwhile.
pub unsafe fn gemm_raw(
    pgas: &Pgas, stream: &CudaStream, (c, a, b): (CUdeviceptr, CUdeviceptr, CUdeviceptr),
    (m, n, k): (usize, usize, usize), fp8: bool,
) -> crate::Result<()> {
    let cfg = GemmConfig::whole_k(m, n, pgas.sm_count()?);
    let k = kernel_k(fp8, k)?;
    check(cfg, (m, n, k))?;
    // SAFETY: the caller's contract; in FP8 the `k` pairs are `2k` bytes a row, as bf16 columns.
    unsafe { gemm_raw_with(pgas, stream, (c, a, b), (m, n, k), cfg, fp8) }
}

/// `C = A Btᵀ` on `stream` over device addresses, with `cfg` (checked by the caller against the
/// shape with [`check`]; `k` in bf16 columns, FP8 pairs when `fp8`): what [`gemm_raw`] and
/// `pgas::ops` (per shard or chunk) run.
///
/// # Safety
/// `c`, `a` and `b` name `m x n`, `m x k` and `n x k` bf16 elements (columns) that stay
/// allocated until `stream` has passed the launch, and nothing else writes them meanwhile.
pub(crate) unsafe fn gemm_raw_with(
    pgas: &Pgas, stream: &CudaStream, (c, a, b): (CUdeviceptr, CUdeviceptr, CUdeviceptr),
    (m, n, k): (usize, usize, usize), cfg: GemmConfig, fp8: bool,
) -> crate::Result<()> {
    // SAFETY: the caller's contract; the kernel writes only C, through its map.
    let (mut c_map, a_map, b_map) = unsafe {
        (
            TensorMap::from_device_ptr_ragged(c, m * n, c_tile(m, n))?,
            TensorMap::from_device_ptr_ragged(a, m * k, a_tile(m, k))?,
            TensorMap::from_device_ptr(b, n * k, b_tile(n, k, cfg))?,
        )
    };
    let maps = (&mut c_map, &a_map, &b_map);
    launch_local(pgas, stream, maps, None, (m, n, k), cfg, fp8, false)
}

/// Refuses buffers that do not hold `m x k`, `n x k` and `m x n` elements.
fn check_sizes(lens: (usize, usize, usize), (m, n, k): (usize, usize, usize)) -> crate::Result<()> {
    match size_error(lens, (m, n, k), (n, k)) {
        Some(why) => refuse(why),
        None => Ok(()),
    }
}

/// `C = A Btᵀ` in FP8: `A` (m x k) and `Bt` (n x k) of `e4m3`, row-major (K-major), `C` (m x n)
/// bf16, f32 accumulate, no scaling, with the specialization [`GemmConfig::for_shape`] picks;
/// K a multiple of 128. The same kernel as [`gemm_bf16`], its multipliers on
/// `wgmma_m64n{bn}k32`.
pub fn gemm_fp8(
    pgas: &Pgas, c: &mut CudaSlice<bf16>, a: &CudaSlice<e4m3>, bt: &CudaSlice<e4m3>,
    (m, n, k): (usize, usize, usize), checked: bool,
) -> crate::Result<()> {
    // FP8's K in the kernel's steps: pairs of values (see `fp8_pairs`).
    let cfg = GemmConfig::for_shape(m, n, k / 2, pgas.sm_count()?);
    gemm_fp8_with(pgas, c, a, bt, (m, n, k), cfg, checked)
}

/// [`gemm_fp8`] with the specialization given.
pub fn gemm_fp8_with(
    pgas: &Pgas, c: &mut CudaSlice<bf16>, a: &CudaSlice<e4m3>, bt: &CudaSlice<e4m3>,
    (m, n, k): (usize, usize, usize), cfg: GemmConfig, checked: bool,
) -> crate::Result<()> {
    check_sizes((a.len(), bt.len(), c.len()), (m, n, k))?;
    let kp = fp8_pairs(k)?;
    check(cfg, (m, n, kp))?;
    with_operand_maps(pgas.stream(), (a, bt), (m, n, kp), cfg, |a_map, b_map| {
        launch_into(pgas, c, (a_map, b_map), (m, n, kp), cfg, true, checked)
    })
}

/// Runs `f` with the maps of A (`m` rows) and Bt (`rows_b` rows) of `kk` columns in the
/// kernel's terms (bf16 columns, or pairs of FP8 values: 128-byte tile rows either way), both
/// borrowed on `stream` until `f` returns. Refuses slices of another size (as the callers did).
pub(crate) fn with_operand_maps<T: Operand, R>(
    stream: &CudaStream, (a, bt): (&CudaSlice<T>, &CudaSlice<T>),
    (m, rows_b, kk): (usize, usize, usize), cfg: GemmConfig,
    f: impl FnOnce(&TensorMap<'_, bf16>, &TensorMap<'_, bf16>) -> crate::Result<R>,
) -> crate::Result<R> {
    // Two-byte columns in each slice: the maps' sizes, which their tiles must match.
    let columns = |len: usize| len * std::mem::size_of::<T>() / 2;
    let (pa, _ra) = a.device_ptr(stream);
    let (pb, _rb) = bt.device_ptr(stream);
    // SAFETY: each map covers the columns its slice holds (a tile of another size is refused),
    // and the slices live, borrowed, until `f` returns; the kernel only reads them.
    let (a_map, b_map) = unsafe {
        (
            TensorMap::<bf16>::from_device_ptr_ragged(pa, columns(a.len()), a_tile(m, kk))?,
            TensorMap::<bf16>::from_device_ptr(pb, columns(bt.len()), b_tile(rows_b, kk, cfg))?,
        )
    };
    f(&a_map, &b_map)
}

/// Refuses a shape that is not whole tiles, or a tile width, cluster or ring the kernel does
/// not take for it.
pub(crate) fn check(cfg: GemmConfig, (m, n, k): (usize, usize, usize)) -> crate::Result<()> {
    if let Some(why) = shape_error(m, n, k) {
        return refuse(why);
    }
    let bn = cfg.bn as usize;
    if ![64, 128, 256].contains(&bn) || !n.is_multiple_of(bn) {
        return refuse(format!("tile width {bn}: 64, 128 or 256, dividing N = {n}"));
    }
    if ![1, 2].contains(&cfg.cluster) || !m.div_ceil(BM).is_multiple_of(cfg.cluster as usize) {
        return refuse(format!(
            "cluster of {}: 1 or 2 blocks, dividing M's {} tiles of {BM} rows",
            cfg.cluster,
            m.div_ceil(BM)
        ));
    }
    let ksteps = k / BK;
    if cfg.splits != STREAM_K && !ksteps.is_multiple_of(cfg.splits as usize) {
        return refuse(format!(
            "split-K in {} parts: a divisor of K's {ksteps} steps of {BK}, or STREAM_K",
            cfg.splits
        ));
    }
    if cfg.stages < 2 || cfg.shared_bytes() > 227 * 1024 {
        return refuse(format!(
            "{} stages of {} bytes: at least 2, within Hopper's 227 KiB of shared memory",
            cfg.stages,
            slot_bytes(cfg.bn)
        ));
    }
    Ok(())
}

/// The copy-engine tiles of C (64 x 64, stored by the epilogue), A (128 x 64) and Bt (each
/// block's share of `bn` rows x 64), all with the 128-byte swizzle.
pub(crate) fn c_tile(m: usize, n: usize) -> Tile2d {
    swizzled(m, n, 64, 64)
}

/// Split-K's workspace (f32, m x n): tiles of 64 rows x 32 columns, 128 bytes a row.
fn w_tile(m: usize, n: usize) -> Tile2d {
    swizzled(m, n, 64, 32)
}

/// See [`c_tile`].
pub(crate) fn a_tile(m: usize, k: usize) -> Tile2d {
    swizzled(m, k, BM, 64)
}

/// See [`c_tile`].
pub(crate) fn b_tile(n: usize, k: usize, cfg: GemmConfig) -> Tile2d {
    swizzled(n, k, (cfg.bn / cfg.cluster) as usize, 64)
}

/// A `rows x cols` tensor's tile of `box_rows x box_cols` with the 128-byte swizzle `wgmma`
/// reads (the GEMM's and the attention's maps).
pub(crate) fn swizzled(rows: usize, cols: usize, box_rows: usize, box_cols: usize) -> Tile2d {
    Tile2d {
        rows,
        cols,
        box_rows,
        box_cols,
        swizzle: Swizzle::B128,
    }
}

/// The tensor maps of one launch: C (written), A (this PE's rows), Bt, and the gathered rows
/// (A again when not gathering).
pub(crate) struct Maps<'m, 'a> {
    pub c: &'m mut TensorMap<'a, bf16>,
    pub a: &'m TensorMap<'a, bf16>,
    pub b: &'m TensorMap<'a, bf16>,
    pub gathered: &'m TensorMap<'a, bf16>,
    /// Split-K's workspace (a map of raw memory the GEMM keeps, hence `'static`); `None` for
    /// a launch that does not split.
    pub w: Option<&'m mut TensorMap<'static, f32>>,
}

/// The clusters of a persistent grid for `m x n` (as many as can be resident on this PE's SMs,
/// at most one a cluster tile): the occupancy query compiles and loads the specialization if it
/// is not yet.
/// A plan that launches often asks once and keeps the answer in [`GemmConfig::clusters`].
pub(crate) fn persistent_clusters(
    pgas: &Pgas, cfg: GemmConfig, (m, n): (usize, usize), (rows, fp8): (Chunking, bool),
    checked: bool,
) -> crate::Result<u32> {
    let variant = if checked {
        Variant::Checked
    } else {
        Variant::Plain
    };
    let launch = cfg.cluster_launch();
    // Work units: each cluster tile's K steps in `splits` parts; stream-K shares every
    // cluster tile's K steps between as many clusters as are resident.
    let tiles = (m.div_ceil(BM * cfg.cluster as usize) * (n / cfg.bn as usize)) as u32;
    let units = if cfg.splits == STREAM_K {
        u32::MAX
    } else {
        tiles * cfg.splits
    };
    // The answer depends on the specialization and the GPU only, and the query (a JIT lookup
    // and cuOccupancyMaxActiveClusters) cost tens of microseconds a call: asked once.
    let key = (pgas.cuda().ordinal(), cfg.comptime(rows, fp8), checked);
    let mut cache = RESIDENT.lock().unwrap_or_else(|e| e.into_inner());
    let resident = match cache.iter().find(|(k, _)| *k == key) {
        Some(&(_, r)) => r,
        None => {
            let r = crate::launch::max_active_clusters(
                pgas,
                &gemm_bf16_sm90::SPEC,
                variant,
                &key.1,
                launch,
            )?;
            // Where PEs share the GPU under CUDA MPS, this process runs on its share of the SMs
            // (`sm_count`) while the occupancy query answers for the whole GPU: the grid takes
            // one cluster a share's SMs can hold (docs/runtime.md, "Several ranks on one GPU").
            let r = r.min((pgas.sm_count()? as u32 / cfg.cluster).max(1));
            cache.push((key, r));
            r
        }
    };
    Ok(resident.min(units))
}

/// The word tables of one launch beyond its matrices, each `None` where the launch does not
/// read it (a launch then passes [`Unused`]'s, since the kernel takes a buffer of the type).
#[derive(Default)]
pub(crate) struct Words<'w> {
    /// Gathering or scattering: the landed (or finished) words and the call's epoch.
    pub landed: Option<(&'w mut CudaSlice<u64>, u64)>,
    /// Grouped: the group of each 128-row tile.
    pub group_of: Option<&'w CudaSlice<i32>>,
}

/// The word tables and the workspace map of a launch that does not read them, one set a CUDA
/// context in [`UNUSED`], made once: an allocation (or a map's encoding) a call cost host time
/// before every launch.
///
/// They carry no cudarc events: every stream launches with them, and a launch captured into a
/// CUDA graph must not wait on an event another stream recorded outside the capture (the
/// driver fails the capture with `CUDA_ERROR_STREAM_CAPTURE_ISOLATION`). No launch writes them.
struct Unused {
    landed: CudaSlice<u64>,
    group_of: CudaSlice<i32>,
    /// One workspace tile (64 x 32 f32), which `w_map` maps: the map a launch that does not
    /// split passes.
    _w: CudaSlice<f32>,
    w_map: TensorMap<'static, f32>,
}

impl Unused {
    fn new(pgas: &Pgas) -> crate::Result<Unused> {
        let cuda = pgas.cuda();
        let stream = pgas.stream();
        let tracking = cuda.is_event_tracking();
        // SAFETY: the words are made without events and finished (synchronized) before any
        // stream uses them; nothing frees them while the process runs, and no kernel writes
        // them.
        let words = unsafe {
            cuda.disable_event_tracking();
            let words = (
                stream.alloc_zeros::<u64>(1),
                stream.alloc_zeros::<i32>(1),
                stream.alloc_zeros::<f32>(64 * 32),
            );
            if tracking {
                cuda.enable_event_tracking();
            }
            words
        };
        let (landed, group_of, w) = (words.0?, words.1?, words.2?);
        stream
            .synchronize()
            .map_err(crate::Error::cuda("making the GEMM's unused words"))?;
        let ptr = w.device_ptr(stream).0;
        // SAFETY: the tile lives beside its map for as long as the process (UNUSED never drops
        // an entry), and no launch writes it (one that does not split never touches it).
        let w_map = unsafe { TensorMap::from_device_ptr_ragged(ptr, 64 * 32, w_tile(64, 32))? };
        Ok(Unused {
            landed,
            group_of,
            _w: w,
            w_map,
        })
    }
}

/// See [`Unused`]: by CUDA context.
static UNUSED: std::sync::Mutex<Vec<(usize, Unused)>> = std::sync::Mutex::new(Vec::new());

/// Resident clusters by (device, comptime values, checked): [`persistent_clusters`]' answers.
#[allow(clippy::type_complexity)]
static RESIDENT: std::sync::Mutex<Vec<((usize, [i128; 8], bool), u32)>> =
    std::sync::Mutex::new(Vec::new());

/// Launches the kernel on `stream` over a persistent grid. The `landed` words and their
/// epoch, and `(mp, me, pieces)` serve a chunked launch (`rows`): gathering, rows per PE, this
/// PE and the pieces of K a chunk lands in (`landed` holds at least `pieces` words a PE,
/// piece-major, and `pieces` divides `k / 64`); scattering, rows per chunk, the first chunk
/// and 1 (`landed` holds a word a chunk, the chunk a multiple of the cluster's rows dividing
/// M). A grouped launch takes `group_of`, a group for each 128-row tile, without clusters.
/// Anything else is refused. `fp8` takes A and Bt as `e4m3` (the maps and `k` counting pairs
/// of them). The shape and `cfg` were checked by the caller; a launch that is not chunked
/// passes `(0, 0, 1)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch(
    pgas: &Pgas, stream: &CudaStream, maps: Maps<'_, '_>, words: Words<'_>,
    (m, n, k): (usize, usize, usize), (rows, (mp, me, pieces)): (Chunking, (usize, usize, usize)),
    cfg: GemmConfig, fp8: bool, checked: bool,
) -> crate::Result<()> {
    let rows = match rows {
        Chunking::Whole if m <= 64 => Chunking::Half,
        rows => rows,
    };
    let whole = matches!(rows, Chunking::Whole | Chunking::Half);
    let ksteps = k / BK;
    if pieces == 0 || !ksteps.is_multiple_of(pieces) || (rows != Chunking::Gather && pieces != 1) {
        return refuse(format!(
            "{pieces} pieces a chunk: a divisor of K's {ksteps} steps of {BK}, 1 unless gathering"
        ));
    }
    let unit = BM * cfg.cluster as usize;
    let chunked = matches!(rows, Chunking::Gather | Chunking::Scatter);
    if chunked && (mp == 0 || !mp.is_multiple_of(unit) || !m.is_multiple_of(mp) || me >= m / mp) {
        return refuse(format!(
            "chunks of {mp} rows from chunk {me}: a multiple of {unit} (the cluster's rows) \
             dividing M = {m}, starting at one of its chunks"
        ));
    }
    let mut unused = UNUSED.lock().unwrap_or_else(|e| e.into_inner());
    let unused = of_context(&mut unused, pgas, || Unused::new(pgas))?;
    let (landed, epoch) = match words.landed {
        Some((landed, epoch)) if chunked => {
            if landed.len() < pieces * (m / mp) {
                return refuse(format!(
                    "{} landed words for {pieces} pieces of {} chunks",
                    landed.len(),
                    m / mp
                ));
            }
            (landed, epoch)
        }
        None if chunked => return refuse(format!("a {rows:?} launch without its landed words")),
        _ => (&mut unused.landed, 0),
    };
    let group_of = match words.group_of {
        Some(g) if rows == Chunking::Grouped => {
            if cfg.cluster != 1 || g.len() < m.div_ceil(BM) {
                return refuse(format!(
                    "a grouped launch takes clusters of 1 (not {}) and a group for each of its \
                     {} row tiles ({} given)",
                    cfg.cluster,
                    m.div_ceil(BM),
                    g.len()
                ));
            }
            g
        }
        None if rows == Chunking::Grouped => {
            return refuse("a grouped launch without its groups".to_string())
        }
        _ => &unused.group_of,
    };
    let clusters = match cfg.clusters {
        Some(c) => c,
        None => persistent_clusters(pgas, cfg, (m, n), (rows, fp8), checked)?,
    };
    let launch = LaunchConfig {
        grid: (clusters * cfg.cluster, 1, 1),
        ..cfg.cluster_launch()
    };
    let (stages, bn, cluster) = (cfg.stages, cfg.bn, cfg.cluster);
    let (gather, scatter) = (rows == Chunking::Gather, rows == Chunking::Scatter);
    let (grouped, half) = (rows == Chunking::Grouped, rows == Chunking::Half);
    let Maps {
        c,
        a,
        b,
        gathered,
        w,
    } = maps;
    let w = match w {
        Some(w) if cfg.splits != 1 && whole => w,
        None if cfg.splits == 1 => &mut unused.w_map,
        _ => {
            return refuse(format!(
                "split-K in {} parts takes its workspace, and only when C is stored whole \
                 (not {rows:?})",
                cfg.splits
            ))
        }
    };
    let splits = cfg.splits as usize;
    // SAFETY: unchecked only where N and K are whole tiles and every buffer has exactly its
    // matrix's size, so every index the kernel forms is in bounds (rows past M are the copy
    // engine's, which reads zeros there and stores nothing); when gathering, `landed` has
    // `pieces` words a PE and `pieces` divides `k / 64`; grouped, `group_of` has a word for
    // each row tile (all checked above).
    unsafe {
        gemm_bf16_sm90::launch_checked_if_on(
            pgas, stream, launch, checked, c, a, b, gathered, w, landed, group_of, epoch, m, n, k,
            mp, me, pieces, splits, stages, bn, cluster, gather, scatter, fp8, grouped, half,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::GemmConfig;

    /// What `gemm_raw` refuses: K of FP8 in whole 128-value tiles, bf16's in 64, any M but 0.
    #[test]
    fn raw_shape_error_is_gemm_raws_rule() {
        use super::raw_shape_error;
        assert!(raw_shape_error(5, 64, 192, false).is_none());
        assert!(raw_shape_error(5, 64, 192, true).is_some());
        assert!(raw_shape_error(5, 64, 256, true).is_none());
        assert!(raw_shape_error(0, 64, 64, false).is_some());
        assert!(raw_shape_error(5, 96, 64, false).is_some());
    }

    /// (bn, cluster, splits) that `for_shape` picks on an H200's 132 multiprocessors.
    fn picked(m: usize, n: usize, k: usize) -> (u32, u32, u32) {
        let c = GemmConfig::for_shape(m, n, k, 132);
        (c.bn, c.cluster, c.splits)
    }

    #[test]
    fn decode_sized_m_splits_k_over_wide_tiles_and_nothing_else_does() {
        assert_eq!(picked(64, 8192, 8192), (256, 1, 4));
        // 112 tiles in 2 parts: 224 units, a second wave of 92 on 132 multiprocessors.
        assert_eq!(picked(64, 28672, 8192), (256, 1, super::STREAM_K));
        assert_eq!(picked(1, 8192, 28672), (256, 1, 4));
        // K of 3 steps: no split divides it.
        assert_eq!(picked(64, 8192, 192), (64, 1, 1));
        assert_eq!(picked(128, 8192, 8192), (64, 1, 1));
        assert_eq!(picked(8192, 8192, 8192), (256, 2, 1));
        assert_eq!(picked(256, 28672, 8192), (256, 2, 1));
        assert_eq!(GemmConfig::for_grouped(64, 8192, 132).splits, 1);
    }
}
