//! Thread-block clusters (sm_90a): launches with `LaunchConfig::with_cluster`, distributed
//! shared memory (`cluster_peer` reads and writes ordered by `cluster_sync`), arrivals on a peer
//! block's mbarrier (`mbarrier_arrive_cluster`), one copy-engine load into every block of a
//! cluster (`tma_load_2d_multicast`), `stmatrix_x4` of accumulator fragments, `pgas::gemm` over
//! its tile widths, rings and clusters (plain and checked, against an f64 host product), and
//! the host's refusals of clusters and shapes that cannot run. Each kernel case runs the plain
//! and the checked variant. On a GPU below compute capability 9.0 the kernel cases check that
//! the launch is refused instead.

use crate::kernels::cluster::{cluster_multicast_tile, cluster_tma_store_tiles, named_turns};
use crate::runner::{case, Case};
use crate::util::{check_eq, ensure, CaseResult};
use pgas::gemm::reference::value;
use pgas::gemm::{gemm_bf16, gemm_bf16_sm90, gemm_bf16_with, Chunking, GemmConfig};
use pgas::kernel::{KernelSpec, Variant};
use pgas::launch::Prewarm;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case("cluster/dsmem_peer_reads_writes_x2", dsmem_x2_case),
    case("cluster/dsmem_peer_reads_writes_x4", dsmem_x4_case),
    case("cluster/mbarrier_arrive_cluster_x2_x4", arrive_cluster_case),
    case("cluster/tma_load_2d_multicast_x2", multicast_case),
    case("cluster/stmatrix_x4_bf16_f16", stmatrix_case),
    case("cluster/gemm_bf16_256x512x1024_configs", gemm_small_case),
    case("cluster/gemm_bf16_128x8192x8192_configs", gemm_big_case),
    case("cluster/refuses_bad_clusters_and_shapes", bad_input_case),
    case("cluster/tma_store_and_reduce_add_f32", tma_store_case),
    case("cluster/named_barriers_take_turns", named_turns_case),
    case("cluster/gemm_fp8_e4m3_256x512x1024", gemm_fp8_case),
];

/// None: compiled at first launch (sm_90a), so a suite on an older GPU still prewarms the rest.
pub const KERNELS: &[&KernelSpec] = &[];

/// Threads of the distributed-shared-memory kernel's blocks (and elements of its array).
const DSMEM_THREADS: usize = 256;

/// Each block fills its shared array with `rank * 1000 + t`, reads the next block's (rank + 1
/// mod n) through `cluster_peer` into `out[block]`, writes what it read plus 1 back into the
/// next block's array, and after another `cluster_sync` copies its own array (now written by
/// the previous block) into `out[blocks + block]`. `ids[block]` records the cluster queries.
#[pgas_kernel(max_threads = 256)]
fn dsmem_exchange(out: &mut CudaSlice<u32>, ids: &mut CudaSlice<u32>) {
    let s = shared_array::<u32, 256>();
    let t = thread_idx_x() as usize;
    let rank = cluster_ctarank();
    let n = cluster_nctarank();
    let block = block_idx_x() as usize;
    let blocks = grid_dim_x() as usize;
    s[t] = rank * 1000 + t as u32;
    if t == 0 {
        ids[block * 4] = rank;
        ids[block * 4 + 1] = n;
        ids[block * 4 + 2] = cluster_id_x();
        ids[block * 4 + 3] = cluster_count_x();
    }
    cluster_sync();
    let next = s.cluster_peer((rank + 1) % n);
    let got = next[t];
    // Every block's reads of `next` are done before anyone overwrites it.
    cluster_arrive();
    out[block * 256 + t] = got;
    cluster_wait();
    next[t] = got + 1;
    cluster_sync();
    out[(blocks + block) * 256 + t] = s[t];
}

/// Two rounds of remote arrivals: thread 0 of block `r` arrives on the mbarrier of every
/// block of rank `r` or above, so block `r` waits for `r + 1` arrivals a phase; a local arrival
/// in place of a remote one would leave some block's phase incomplete (a trap after ~2^35
/// cycles) and over-complete another's. `out[block]` is `rank + 1` after phase 0, and
/// `out[blocks + block]` after phase 1.
#[pgas_kernel]
fn arrive_cluster(out: &mut CudaSlice<u32>) {
    let bars = shared_array::<u64, 1>();
    let t = thread_idx_x();
    let rank = cluster_ctarank();
    let n = cluster_nctarank();
    let block = block_idx_x() as usize;
    let blocks = grid_dim_x() as usize;
    if t == 0 {
        mbarrier_init(&mut bars[0], rank + 1);
    }
    cluster_sync();
    if t == 0 {
        for r in rank..n {
            mbarrier_arrive_cluster(&mut bars[0], r);
        }
    }
    mbarrier_wait(&bars[0], 0);
    if t == 0 {
        out[block] = rank + 1;
    }
    // Every block's phase 0 is complete before anyone arrives for phase 1.
    cluster_sync();
    if t == 0 {
        for r in rank..n {
            mbarrier_arrive_cluster(&mut bars[0], r);
        }
    }
    mbarrier_wait(&bars[0], 1);
    if t == 0 {
        out[blocks + block] = rank + 1;
    }
    // No block leaves while a peer may still arrive on its mbarrier.
    cluster_sync();
}

/// Each of 4 warps fills 4 accumulator fragments from `x` as `frag_c` lays them out (lane `l`,
/// fragment `i`, register `j`: row `l / 4 + 8 (j / 2)`, column `8 i + 2 (l % 4) + j % 2` of
/// the warp's 16 x 32 block of `x`), stores them as two 16 x 16 tiles with `stmatrix_x4`
/// (row-major at `(2 w + h) * 256`), and copies the tiles out.
#[pgas_kernel(max_threads = 128)]
fn stmatrix_bf16(out: &mut CudaSlice<bf16>, x: &CudaSlice<f32>) {
    let smem = dyn_shared::<bf16>();
    let t = thread_idx_x() as usize;
    let lane = lane_id() as usize;
    let w = t / 32;
    let mut acc = frag_c::<f32, 4>();
    for i in 0..4 {
        for j in 0..4 {
            let row = lane / 4 + (j / 2) * 8;
            let col = i * 8 + (lane % 4) * 2 + j % 2;
            acc[i][j] = x[w * 512 + row * 32 + col];
        }
    }
    for h in 0..2 {
        let base = (w * 2 + h) * 256;
        stmatrix_x4(
            &mut smem[base + (lane % 16) * 16 + 8 * (lane / 16)],
            &acc[h * 2],
        );
    }
    sync_warp();
    for i in 0..16 {
        out[w * 512 + i * 32 + lane] = smem[w * 512 + i * 32 + lane];
    }
}

/// [`stmatrix_bf16`] into an `f16` tile.
#[pgas_kernel(max_threads = 128)]
fn stmatrix_f16(out: &mut CudaSlice<f16>, x: &CudaSlice<f32>) {
    let smem = dyn_shared::<f16>();
    let t = thread_idx_x() as usize;
    let lane = lane_id() as usize;
    let w = t / 32;
    let mut acc = frag_c::<f32, 4>();
    for i in 0..4 {
        for j in 0..4 {
            let row = lane / 4 + (j / 2) * 8;
            let col = i * 8 + (lane % 4) * 2 + j % 2;
            acc[i][j] = x[w * 512 + row * 32 + col];
        }
    }
    for h in 0..2 {
        let base = (w * 2 + h) * 256;
        stmatrix_x4(
            &mut smem[base + (lane % 16) * 16 + 8 * (lane / 16)],
            &acc[h * 2],
        );
    }
    sync_warp();
    for i in 0..16 {
        out[w * 512 + i * 32 + lane] = smem[w * 512 + i * 32 + lane];
    }
}

/// Whether this GPU has sm_90a's instructions (and clusters); below it, that `launch` is
/// refused instead.
fn sm90_or_refused(p: &Pgas, launch: impl FnOnce() -> pgas::Result<()>) -> Result<bool, String> {
    let major = crate::util::compute_major(p).map_err(|e| e.to_string())?;
    if major == 9 {
        return Ok(true);
    }
    match launch() {
        Err(e) if e.to_string().contains("compiled for sm_90a") => Ok(false),
        other => Err(format!(
            "a cluster kernel on compute capability {major}.x: {other:?}"
        )),
    }
}

const VARIANTS: [(&str, bool); 2] = [("plain", false), ("checked", true)];

/// `tma_store_2d` and `tma_reduce_add_2d` of a tile (into zeros and into ones), both variants;
/// and a map built from a read-only tensor refused for a `&mut TensorMap` parameter.
fn tma_store_case(p: &Pgas) -> CaseResult {
    let s = p.stream();
    let tile = Tile2d {
        rows: 32,
        cols: 32,
        box_rows: 32,
        box_cols: 32,
        swizzle: Swizzle::None,
    };
    let want: Vec<f32> = (0..1024).map(|i| i as f32).collect();
    let cfg = LaunchConfig::blocks(1, 256).with_shared_mem(4096);
    for (variant, checked) in VARIANTS {
        let mut out = s.alloc_zeros::<f32>(1024)?;
        let mut sum = s.clone_htod(&vec![1.0f32; 1024])?;
        let mut flags = s.clone_htod(&[7u64])?;
        let mut out_map = TensorMap::tiled_2d_mut(s, &mut out, tile)?;
        let mut sum_map = TensorMap::tiled_2d_mut(s, &mut sum, tile)?;
        let mut run = || {
            if checked {
                cluster_tma_store_tiles::launch(p, cfg, &mut out_map, &mut sum_map, &mut flags, 7)
            } else {
                // SAFETY: one 32 x 32 tile of 32 x 32 tensors, flags of one word.
                unsafe {
                    cluster_tma_store_tiles::launch_unchecked(
                        p,
                        cfg,
                        &mut out_map,
                        &mut sum_map,
                        &mut flags,
                        7,
                    )
                }
            }
        };
        // Below sm_90 only the refusal is checked; on Hopper the kernel runs once here.
        if !sm90_or_refused(p, &mut run)? {
            return Ok(());
        }
        run()?;
        let added: Vec<f32> = want.iter().map(|v| v + 1.0).collect();
        check_eq(
            &format!("{variant}: the stored tile"),
            &s.clone_dtoh(&out)?,
            &want,
        )?;
        check_eq(
            &format!("{variant}: ones plus the added tile"),
            &s.clone_dtoh(&sum)?,
            &added,
        )?;
    }
    let out = s.alloc_zeros::<f32>(1024)?;
    let mut sum = s.alloc_zeros::<f32>(1024)?;
    let mut flags = s.clone_htod(&[7u64])?;
    let mut read_only = TensorMap::tiled_2d(s, &out, tile)?;
    let mut sum_map = TensorMap::tiled_2d_mut(s, &mut sum, tile)?;
    refused(
        "a tensor map of a read-only tensor as a `&mut TensorMap`",
        cluster_tma_store_tiles::launch(p, cfg, &mut read_only, &mut sum_map, &mut flags, 7),
        &["`out`", "built from a read-only tensor", "tiled_2d_mut"],
    )
}

fn named_turns_case(p: &Pgas) -> CaseResult {
    let s = p.stream();
    let mut out = s.alloc_zeros::<u32>(17)?;
    let want: Vec<u32> = std::iter::once(16).chain((0..16).map(|i| i % 2)).collect();
    for (variant, checked) in VARIANTS {
        s.memset_zeros(&mut out)?;
        let cfg = LaunchConfig::blocks(1, 256);
        if checked {
            named_turns::launch(p, cfg, &mut out)?;
        } else {
            // SAFETY: 17 elements, written at indices below 17.
            unsafe { named_turns::launch_unchecked(p, cfg, &mut out)? };
        }
        s.synchronize()?;
        check_eq(
            &format!("{variant}: two warpgroups (warpgroup_id) alternate through arrive_named / sync_named"),
            &s.clone_dtoh(&out)?,
            &want,
        )?;
    }
    Ok(())
}

fn dsmem_case(p: &Pgas, n: u32) -> CaseResult {
    const BLOCKS: u32 = 8;
    let s = p.stream();
    let cfg = LaunchConfig::blocks(BLOCKS, DSMEM_THREADS as u32).with_cluster((n, 1, 1));
    let blocks = BLOCKS as usize;
    let mut out = s.alloc_zeros::<u32>(2 * blocks * DSMEM_THREADS)?;
    let mut ids = s.alloc_zeros::<u32>(4 * blocks)?;
    if !sm90_or_refused(p, || dsmem_exchange::launch(p, cfg, &mut out, &mut ids))? {
        return Ok(());
    }
    let n = n as usize;
    let mut want = vec![0u32; 2 * blocks * DSMEM_THREADS];
    let mut want_ids = vec![0u32; 4 * blocks];
    for b in 0..blocks {
        let r = b % n;
        for t in 0..DSMEM_THREADS {
            want[b * DSMEM_THREADS + t] = (((r + 1) % n) * 1000 + t) as u32;
            want[(blocks + b) * DSMEM_THREADS + t] = (r * 1000 + t + 1) as u32;
        }
        want_ids[b * 4..b * 4 + 4].copy_from_slice(&[
            r as u32,
            n as u32,
            (b / n) as u32,
            (blocks / n) as u32,
        ]);
    }
    for (variant, checked) in VARIANTS {
        s.memset_zeros(&mut out)?;
        s.memset_zeros(&mut ids)?;
        if checked {
            dsmem_exchange::launch(p, cfg, &mut out, &mut ids)?;
        } else {
            // SAFETY: every index is below 2 * 8 * 256 (out) or 4 * 8 (ids), and the blocks
            // are 256 threads, the shared array's length.
            unsafe { dsmem_exchange::launch_unchecked(p, cfg, &mut out, &mut ids)? };
        }
        s.synchronize()?;
        check_eq(
            &format!("clusters of {n}, {variant}: ctarank, nctarank, cluster_id_x, cluster_count_x per block"),
            &s.clone_dtoh(&ids)?,
            &want_ids,
        )?;
        check_eq(
            &format!("clusters of {n}, {variant}: the next block's array read through cluster_peer, then this block's after the previous one wrote it"),
            &s.clone_dtoh(&out)?,
            &want,
        )?;
    }
    Ok(())
}

fn dsmem_x2_case(p: &Pgas) -> CaseResult {
    dsmem_case(p, 2)
}

fn dsmem_x4_case(p: &Pgas) -> CaseResult {
    dsmem_case(p, 4)
}

fn arrive_cluster_case(p: &Pgas) -> CaseResult {
    const BLOCKS: u32 = 8;
    let s = p.stream();
    let blocks = BLOCKS as usize;
    let mut out = s.alloc_zeros::<u32>(2 * blocks)?;
    let first = LaunchConfig::blocks(BLOCKS, 64).with_cluster((2, 1, 1));
    if !sm90_or_refused(p, || arrive_cluster::launch(p, first, &mut out))? {
        return Ok(());
    }
    for n in [2u32, 4] {
        let cfg = LaunchConfig::blocks(BLOCKS, 64).with_cluster((n, 1, 1));
        let want: Vec<u32> = (0..2 * blocks)
            .map(|b| (b % n as usize) as u32 + 1)
            .collect();
        for (variant, checked) in VARIANTS {
            s.memset_zeros(&mut out)?;
            if checked {
                arrive_cluster::launch(p, cfg, &mut out)?;
            } else {
                // SAFETY: indices below 2 * 8, ranks below the cluster's size.
                unsafe { arrive_cluster::launch_unchecked(p, cfg, &mut out)? };
            }
            s.synchronize()?;
            check_eq(
                &format!("clusters of {n}, {variant}: both phases of every block's mbarrier completed by its peers' arrivals"),
                &s.clone_dtoh(&out)?,
                &want,
            )?;
        }
    }
    Ok(())
}

fn multicast_case(p: &Pgas) -> CaseResult {
    const BLOCKS: usize = 8;
    let rows = BLOCKS / 2 * 64;
    let s = p.stream();
    // Distinct finite bf16 bit patterns: a copy compares exactly.
    let host: Vec<bf16> = (0..rows * 64)
        .map(|i| bf16::from_bits(0x3000 + i as u16))
        .collect();
    let src = s.clone_htod(&host)?;
    let map = TensorMap::tiled_2d(
        s,
        &src,
        Tile2d {
            rows,
            cols: 64,
            box_rows: 64,
            box_cols: 64,
            swizzle: Swizzle::None,
        },
    )?;
    let mut out = s.alloc_zeros::<bf16>(BLOCKS * 4096)?;
    let cfg = LaunchConfig::blocks(BLOCKS as u32, 128)
        .with_shared_mem(8192 + 8)
        .with_cluster((2, 1, 1));
    if !sm90_or_refused(p, || cluster_multicast_tile::launch(p, cfg, &mut out, &map))? {
        return Ok(());
    }
    // Block b holds its cluster's tile: rows 64 (b / 2).. of the tensor.
    let want: Vec<bf16> = (0..BLOCKS)
        .flat_map(|b| host[(b / 2) * 4096..(b / 2 + 1) * 4096].to_vec())
        .collect();
    for (variant, checked) in VARIANTS {
        s.memset_zeros(&mut out)?;
        if checked {
            cluster_multicast_tile::launch(p, cfg, &mut out, &map)?;
        } else {
            // SAFETY: indices below 8 * 4096 (out) and 8192 / 2 (the tile); 128 threads.
            unsafe { cluster_multicast_tile::launch_unchecked(p, cfg, &mut out, &map)? };
        }
        s.synchronize()?;
        let got = s.clone_dtoh(&out)?;
        let wrong: Vec<usize> = (0..BLOCKS)
            .filter(|&b| got[b * 4096..(b + 1) * 4096] != want[b * 4096..(b + 1) * 4096])
            .collect();
        ensure(wrong.is_empty(), || {
            format!(
                "{variant}: blocks {wrong:?} (rank = block % 2) do not hold their cluster's tile after one multicast load with mask 0b11"
            )
        })?;
    }
    Ok(())
}

fn stmatrix_case(p: &Pgas) -> CaseResult {
    let s = p.stream();
    // Small integers: exact in f32, bf16 and f16.
    let x: Vec<f32> = (0..4 * 512)
        .map(|i| ((i * 37 + 11) % 255) as f32 - 127.0)
        .collect();
    let dx = s.clone_htod(&x)?;
    // Tile h of warp w is columns 16 h.. of the warp's 16 x 32 block, row-major.
    let mut want = vec![0f32; 4 * 512];
    for w in 0..4 {
        for h in 0..2 {
            for r in 0..16 {
                for c in 0..16 {
                    want[(w * 2 + h) * 256 + r * 16 + c] = x[w * 512 + r * 32 + h * 16 + c];
                }
            }
        }
    }
    let cfg = LaunchConfig::blocks(1, 128).with_shared_mem(4 * 512 * 2);
    let mut ob = s.alloc_zeros::<bf16>(4 * 512)?;
    let mut oh = s.alloc_zeros::<f16>(4 * 512)?;
    if !sm90_or_refused(p, || stmatrix_bf16::launch(p, cfg, &mut ob, &dx))? {
        return Ok(());
    }
    for (variant, checked) in VARIANTS {
        s.memset_zeros(&mut ob)?;
        s.memset_zeros(&mut oh)?;
        if checked {
            stmatrix_bf16::launch(p, cfg, &mut ob, &dx)?;
            stmatrix_f16::launch(p, cfg, &mut oh, &dx)?;
        } else {
            // SAFETY: indices below 4 * 512 everywhere; 128 threads, 4 KiB of shared memory.
            unsafe {
                stmatrix_bf16::launch_unchecked(p, cfg, &mut ob, &dx)?;
                stmatrix_f16::launch_unchecked(p, cfg, &mut oh, &dx)?;
            }
        }
        s.synchronize()?;
        let gb: Vec<f32> = s.clone_dtoh(&ob)?.iter().map(|v| v.to_f32()).collect();
        check_eq(
            &format!("{variant}: bf16 tiles stored by stmatrix_x4"),
            &gb,
            &want,
        )?;
        let gh: Vec<f32> = s.clone_dtoh(&oh)?.iter().map(|v| v.to_f32()).collect();
        check_eq(
            &format!("{variant}: f16 tiles stored by stmatrix_x4"),
            &gh,
            &want,
        )?;
    }
    Ok(())
}

/// `(bn, cluster, stages)` as a config with as many clusters as fit.
pub(crate) fn config((bn, cluster, stages): (u32, u32, u32)) -> GemmConfig {
    GemmConfig {
        stages,
        bn,
        cluster,
        clusters: None,
        splits: 1,
    }
}

fn config_name(c: &GemmConfig) -> String {
    format!("bn {} cluster {} stages {}", c.bn, c.cluster, c.stages)
}

fn variant_of(checked: bool) -> Variant {
    if checked {
        Variant::Checked
    } else {
        Variant::Plain
    }
}

/// Compiles every specialization the GEMM cases launch as one prewarm (in parallel where the
/// JIT has helper processes), so a case's time is not a string of NVRTC compiles.
fn prewarm_gemm(p: &Pgas, runs: &[(GemmConfig, bool)]) -> pgas::Result<()> {
    let comptime: Vec<[i128; 8]> = runs
        .iter()
        .map(|(c, _)| c.comptime(Chunking::Whole, false))
        .collect();
    let list: Vec<Prewarm<'_>> = runs
        .iter()
        .zip(&comptime)
        .map(|((_, checked), ct)| Prewarm {
            spec: &gemm_bf16_sm90::SPEC,
            variant: variant_of(*checked),
            comptime: ct,
        })
        .collect();
    pgas::launch::prewarm(p, &list)
}

/// The host product `A Btᵀ` in f64 at `points`.
pub(crate) fn host_points(
    a: &[bf16], bt: &[bf16], k: usize, points: &[(usize, usize)],
) -> Vec<f64> {
    points
        .iter()
        .map(|&(row, col)| {
            (0..k)
                .map(|x| a[row * k + x].to_f64() * bt[col * k + x].to_f64())
                .sum()
        })
        .collect()
}

/// The points of `got` off by more than `|want| / 128 + 1e-2` (bf16 rounding of the output
/// plus f32 summation order): how many, and the worst as (row, col, got, want).
pub(crate) fn off_points(
    got: &[bf16], n: usize, points: &[(usize, usize)], want: &[f64],
) -> (usize, Option<(usize, usize, f64, f64)>) {
    let mut bad = 0;
    let mut worst: Option<(f64, (usize, usize, f64, f64))> = None;
    for (&(row, col), &w) in points.iter().zip(want) {
        let g = got[row * n + col].to_f64();
        let r = (g - w).abs() / (w.abs() / 128.0 + 1e-2);
        if r.is_nan() || r > 1.0 {
            bad += 1;
            if worst.is_none_or(|(x, _)| r.is_nan() || r > x) {
                worst = Some((r, (row, col, g, w)));
            }
        }
    }
    (bad, worst.map(|(_, w)| w))
}

/// Runs `runs` (configs, each plain or checked) at `(m, n, k)` on reproducible inputs and compares
/// `points` with the host; returns every failing run by name (not only the first).
fn gemm_runs(
    p: &Pgas, (m, n, k): (usize, usize, usize), runs: &[(GemmConfig, bool)],
    points: &[(usize, usize)],
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let s = p.stream();
    let a_host: Vec<bf16> = (0..m * k).map(|i| value(i, 1)).collect();
    let b_host: Vec<bf16> = (0..n * k).map(|i| value(i, 100)).collect();
    let (a, bt) = (s.clone_htod(&a_host)?, s.clone_htod(&b_host)?);
    let want = host_points(&a_host, &b_host, k, points);
    let mut c = s.alloc_zeros::<bf16>(m * n)?;
    let mut failed = Vec::new();
    for &(cfg, checked) in runs {
        let name = format!(
            "{m}x{n}x{k} {} {}",
            config_name(&cfg),
            if checked { "checked" } else { "plain" }
        );
        s.memset_zeros(&mut c)?;
        if let Err(e) = gemm_bf16_with(p, &mut c, &a, &bt, (m, n, k), cfg, checked) {
            failed.push(format!("{name}: Err: {e}"));
            continue;
        }
        s.synchronize()?;
        let got = s.clone_dtoh(&c)?;
        let (bad, worst) = off_points(&got, n, points, &want);
        if let Some((row, col, g, want)) = worst {
            failed.push(format!(
                "{name}: {bad} of {} points off; worst C[{row}][{col}] = {g}, host {want:.4}",
                points.len()
            ));
        }
    }
    Ok(failed)
}

/// The GEMM on a GPU below 9.0: refused (its kernel is sm_90a) rather than run.
/// `pgas::gemm::gemm_fp8_with` (e4m3 in, bf16 out) at every element against the host, over
/// tile widths and clusters, plain and checked; K not a multiple of 128 refused.
fn gemm_fp8_case(p: &Pgas) -> CaseResult {
    if !gemm_sm90_or_refused(p)? {
        return Ok(());
    }
    let s = p.stream();
    let (m, n, k) = (256, 512, 1024);
    let q = |i: usize, salt: u64| pgas::e4m3::from_f32(value(i, salt).to_f32());
    let a_host: Vec<pgas::e4m3> = (0..m * k).map(|i| q(i, 31)).collect();
    let b_host: Vec<pgas::e4m3> = (0..n * k).map(|i| q(i, 32)).collect();
    let (a, bt) = (s.clone_htod(&a_host)?, s.clone_htod(&b_host)?);
    // FP8 wgmma accumulates in the tensor cores' own precision (as cuBLASLt's fast
    // accumulation), not exact f32: each element may be off by its bf16 rounding plus 2^-8 of
    // the largest |C| (a few of the 131072 elements exceeded 1e-2 absolute).
    let want: Vec<f64> = (0..m * n)
        .map(|i| {
            let (row, col) = (i / n, i % n);
            (0..k)
                .map(|x| a_host[row * k + x].to_f64() * b_host[col * k + x].to_f64())
                .sum()
        })
        .collect();
    let scale = want.iter().fold(0.0f64, |a, w| a.max(w.abs()));
    let mut failed = Vec::new();
    // The last with K split in 2 parts (split-K's f32 workspace).
    let split = GemmConfig {
        splits: 2,
        ..config((256, 1, 4))
    };
    for cfg in [
        config((256, 2, 4)),
        config((128, 1, 6)),
        config((64, 1, 3)),
        split,
    ] {
        for checked in [false, true] {
            let mut c = s.alloc_zeros::<bf16>(m * n)?;
            pgas::gemm::gemm_fp8_with(p, &mut c, &a, &bt, (m, n, k), cfg, checked)?;
            let got = s.clone_dtoh(&c)?;
            let bad = got
                .iter()
                .zip(&want)
                // NaN counts as off.
                .filter(|(g, w)| {
                    let off = (g.to_f64() - **w).abs();
                    off.is_nan() || off > w.abs() / 128.0 + scale / 256.0
                })
                .count();
            if bad > 0 {
                failed.push(format!("{cfg:?} checked={checked}: {bad} elements off"));
            }
        }
    }
    ensure(failed.is_empty(), || {
        format!("FP8 GEMM: {}", failed.join("; "))
    })?;
    let mut c = s.alloc_zeros::<bf16>(m * n)?;
    let a64 = s.alloc_zeros::<pgas::e4m3>(m * 64)?;
    let b64 = s.alloc_zeros::<pgas::e4m3>(n * 64)?;
    refused(
        "an FP8 GEMM with K = 64",
        pgas::gemm::gemm_fp8(p, &mut c, &a64, &b64, (m, n, 64), false),
        &["K = 64 is not a positive multiple of 128"],
    )
}

pub(crate) fn gemm_sm90_or_refused(p: &Pgas) -> Result<bool, String> {
    sm90_or_refused(p, || {
        let s = p.stream();
        let a = s.alloc_zeros::<bf16>(128 * 64)?;
        let bt = s.alloc_zeros::<bf16>(64 * 64)?;
        let mut c = s.alloc_zeros::<bf16>(128 * 64)?;
        gemm_bf16_with(p, &mut c, &a, &bt, (128, 64, 64), config((64, 1, 3)), false)
    })
}

fn gemm_small_case(p: &Pgas) -> CaseResult {
    if !gemm_sm90_or_refused(p)? {
        return Ok(());
    }
    let (m, n, k) = (256, 512, 1024);
    let runs: Vec<(GemmConfig, bool)> = [
        (256, 2, 4),
        (256, 1, 4),
        (128, 2, 6),
        (64, 1, 8),
        (64, 1, 3),
    ]
    .into_iter()
    .flat_map(|t| [(config(t), false), (config(t), true)])
    .collect();
    prewarm_gemm(p, &runs)?;
    let all: Vec<(usize, usize)> = (0..m).flat_map(|r| (0..n).map(move |c| (r, c))).collect();
    let failed = gemm_runs(p, (m, n, k), &runs, &all)?;
    ensure(failed.is_empty(), || {
        format!(
            "{} of {} GEMM runs differ from the host at every element:\n  {}",
            failed.len(),
            runs.len(),
            failed.join("\n  ")
        )
    })
}

fn gemm_big_case(p: &Pgas) -> CaseResult {
    if !gemm_sm90_or_refused(p)? {
        return Ok(());
    }
    let (m, n, k) = (128, 8192, 8192);
    // Known (683c214, H100): bn 64 with 8 stages gave a wrong product at this shape.
    let runs: Vec<(GemmConfig, bool)> = [(64, 1, 8), (64, 1, 3), (128, 1, 6), (256, 1, 4)]
        .into_iter()
        .map(|t| (config(t), false))
        .collect();
    prewarm_gemm(p, &runs)?;
    // 2048 points: every row 16 times, and 2048 distinct columns spread over all 8192.
    let points: Vec<(usize, usize)> = (0..2048)
        .map(|i| ((i * 977 + 13) % m, (i * 613 + 101) % n))
        .collect();
    let failed = gemm_runs(p, (m, n, k), &runs, &points)?;
    ensure(failed.is_empty(), || {
        format!(
            "{} of {} GEMM runs differ from the host (2048 points):\n  {}",
            failed.len(),
            runs.len(),
            failed.join("\n  ")
        )
    })
}

/// Asserts `r` is an `Err` whose message contains every one of `says`.
pub(crate) fn refused<T>(what: &str, r: pgas::Result<T>, says: &[&str]) -> CaseResult {
    match r {
        Ok(_) => Err(format!("{what} was accepted").into()),
        Err(e) => {
            let msg = e.to_string();
            ensure(says.iter().all(|s| msg.contains(s)), || {
                format!("{what}: the error does not say {says:?}: {msg}")
            })
        }
    }
}

fn bad_input_case(p: &Pgas) -> CaseResult {
    let s = p.stream();
    let mut out = s.alloc_zeros::<u32>(2 * 8 * DSMEM_THREADS)?;
    let mut ids = s.alloc_zeros::<u32>(4 * 8)?;
    // Checked before anything compiles: the same Err on every GPU.
    let three = LaunchConfig::blocks(3, DSMEM_THREADS as u32).with_cluster((2, 1, 1));
    refused(
        "a grid of 3 blocks in clusters of 2",
        dsmem_exchange::launch(p, three, &mut out, &mut ids),
        &[
            "dsmem_exchange",
            "cluster (2, 1, 1) does not divide grid (3, 1, 1)",
        ],
    )?;
    let sixteen = LaunchConfig::blocks(32, DSMEM_THREADS as u32).with_cluster((16, 1, 1));
    refused(
        "a cluster of 16 blocks",
        dsmem_exchange::launch(p, sixteen, &mut out, &mut ids),
        &["dsmem_exchange", "has 16 blocks; a cluster has at most 8"],
    )?;
    refused(
        "max_active_clusters of a cluster of 16 blocks",
        pgas::launch::max_active_clusters(p, &dsmem_exchange::SPEC, Variant::Plain, &[], sixteen),
        &["at most 8"],
    )?;
    // Shapes and configurations the GEMM refuses before it launches (M may be any size).
    let mut c = s.alloc_zeros::<bf16>(512 * 500)?;
    let a = s.alloc_zeros::<bf16>(512 * 512)?;
    let bt = s.alloc_zeros::<bf16>(500 * 512)?;
    refused(
        "a 512 x 500 x 512 GEMM",
        gemm_bf16(p, &mut c, &a, &bt, (512, 500, 512), false),
        &["gemm_bf16_sm90", "N = 500 is not a positive multiple of 64"],
    )?;
    let bt = s.alloc_zeros::<bf16>(512 * 512)?;
    let mut c = s.alloc_zeros::<bf16>(128 * 512)?;
    let a = s.alloc_zeros::<bf16>(128 * 512)?;
    refused(
        "clusters of 2 over one 128-row tile",
        gemm_bf16_with(
            p,
            &mut c,
            &a,
            &bt,
            (128, 512, 512),
            config((128, 2, 4)),
            false,
        ),
        &["cluster of 2: 1 or 2 blocks, dividing M's 1 tiles"],
    )?;
    refused(
        "a 96-wide tile",
        gemm_bf16_with(
            p,
            &mut c,
            &a,
            &bt,
            (128, 512, 512),
            config((96, 1, 4)),
            false,
        ),
        &["tile width 96"],
    )?;
    refused(
        "a ring over 227 KiB",
        gemm_bf16_with(
            p,
            &mut c,
            &a,
            &bt,
            (128, 512, 512),
            config((256, 1, 8)),
            false,
        ),
        &["8 stages", "227 KiB"],
    )?;
    Ok(())
}
