//! A bf16 GEMM on Hopper's tensor cores, written in pgas: `C = A Bᵀ` with `A` (M x K), `Bt`
//! (N x K, B stored transposed: the layout of a linear layer's weights) and `C` (M x N), all
//! row-major `bf16`, accumulated in `f32`. The sm_90a recipe (H100, H200):
//!
//! - each block computes a 128 x 256 tile of `C` with three warpgroups: warpgroup 0 feeds, 1 and 2
//!   multiply (warp specialization); where that gives fewer blocks than the GPU has
//!   multiprocessors (skinny M), 128 x 128 tiles (`wgmma_m64n128k16`), twice the blocks;
//! - the feeder's thread 0 runs the copy engine: per 64-wide K step one `tma_load_2d` of A's
//!   128 x 64 tile and one of Bt's 256 x 64 tile (48 KiB, 128-byte swizzle) into a ring of
//!   `stages` slots of dynamic shared memory, completing on the slot's `full` mbarrier;
//! - each multiplying warpgroup owns 64 rows: per K step four `wgmma_m64n256k16` straight from
//!   shared memory into 128 `f32` accumulators a thread; it waits for the batch before last
//!   (`wgmma_wait(1)`) and then frees that batch's slot on its `empty` mbarrier, so the
//!   tensor cores always have the next batch queued;
//! - the epilogue converts to `bf16` and stores from registers.
//!
//! Every PE runs its own GEMMs (one process per GPU): a checked launch at 512 x 512 x 512 compared
//! with the host at every element, then the plain variant timed at 4096^3 (spot-checked). Shapes
//! that do not divide into tiles are refused on the host (the tensor maps check that too).
//!
//! ```text
//! pgas-run -n 1 -- target/release/examples/gemm_bf16_sm90
//! ```
//!
//! `benches/gemm.rs` times it beside the `mma.sync` kernel and cuBLAS.

use pgas::cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use pgas::kernel::Variant;
use pgas::launch::Prewarm;
use pgas::prelude::*;
use std::time::Instant;

/// Rows and columns of `C` per block, and the K step.
pub const BM: usize = 128;
pub const BN: usize = 256;
pub const BK: usize = 64;
/// Threads per block: a feeding warpgroup and two multiplying ones.
pub const THREADS: u32 = 384;
/// Slots of the shared-memory ring (a comptime parameter: each value is its own
/// specialization); 4 x 48 KiB fits Hopper's 227 KiB.
pub const STAGES: u32 = 4;

#[pgas_kernel(max_threads = 384)]
pub fn gemm_bf16_sm90(
    c: &mut CudaSlice<bf16>,
    a_map: &TensorMap<bf16>,
    b_map: &TensorMap<bf16>,
    m: usize,
    n: usize,
    k: usize,
    #[comptime] stages: u32,
    #[comptime] bn: u32,
) {
    // Slot s holds A's 128 x 64 tile at s * slot and Bt's bn x 64 tile 8192 elements later; the
    // mbarriers follow the ring: `full` (the copy engine landed slot s) then `empty` (both
    // warpgroups are done with it). The ring starts at the shared window's base and slots are
    // multiples of 16 KiB, so every tile is 1024-byte aligned as the 128-byte swizzle needs.
    let smem = dyn_shared::<bf16>();
    let bars = dyn_shared::<u64>();
    let s = stages as usize;
    let bw = bn as usize;
    let slot = 8192 + bw * 64;
    let full0 = s * slot / 4;
    let empty0 = full0 + s;

    // Which tile of C: blocks go down 8 tile rows before moving right, so the blocks running
    // together share rows of A and of Bt in L2.
    let tiles_m = m / 128;
    let tiles_n = n / bw;
    let pid = block_idx_x() as usize;
    let group = 8 * tiles_n;
    let first_m = (pid / group) * 8;
    let group_m = min(tiles_m - first_m, 8);
    let row0 = (first_m + (pid % group) % group_m) * 128;
    let col0 = ((pid % group) / group_m) * bw;

    let t = thread_idx_x() as usize;
    let wg = t / 128;
    let ktiles = k / 64;

    if t == 0 {
        for i in 0..s {
            mbarrier_init(&mut bars[full0 + i], 1);
            // Lane 0 of each of the 8 multiplying warps frees a slot.
            mbarrier_init(&mut bars[empty0 + i], 8);
        }
    }
    sync_threads();

    if wg == 0 {
        if t == 0 {
            for kt in 0..ktiles {
                let st = kt % s;
                if kt >= s {
                    // Wait until k-tile kt - s, the slot's last tenant, has been multiplied.
                    mbarrier_wait(&bars[empty0 + st], ((kt / s + 1) % 2) as u32);
                }
                mbarrier_arrive_expect_tx(&mut bars[full0 + st], (slot * 2) as u32);
                let k0 = (kt * 64) as i32;
                tma_load_2d(
                    &mut smem[st * slot],
                    a_map,
                    &mut bars[full0 + st],
                    k0,
                    row0 as i32,
                );
                tma_load_2d(
                    &mut smem[st * slot + 8192],
                    b_map,
                    &mut bars[full0 + st],
                    k0,
                    col0 as i32,
                );
            }
        }
    } else {
        let mut acc = frag_c::<f32, 32>();
        // This warpgroup's 64 rows of A's tile: 64 rows of 64 elements further.
        let arows = (wg - 1) * 4096;
        let lane = lane_id() as usize;
        for kt in 0..ktiles {
            let st = kt % s;
            mbarrier_wait(&bars[full0 + st], ((kt / s) % 2) as u32);
            let base = st * slot;
            wgmma_fence();
            for ks in 0..4 {
                // `bn` is a comptime value: one branch is compiled.
                if bn == 256 {
                    wgmma_m64n256k16(
                        &mut acc[0],
                        &smem[base + arows + ks * 16],
                        &smem[base + 8192 + ks * 16],
                    );
                } else {
                    wgmma_m64n128k16(
                        &mut acc[0],
                        &smem[base + arows + ks * 16],
                        &smem[base + 8192 + ks * 16],
                    );
                }
            }
            wgmma_commit();
            // The batch of k-tile kt - 1 is done: its slot can be refilled.
            wgmma_wait(1);
            if kt > 0 && lane == 0 {
                mbarrier_arrive(&mut bars[empty0 + (kt - 1) % s]);
            }
        }
        wgmma_wait(0);

        // Warp w of the warpgroup holds rows 16 w.. of its 64; fragment ni columns 8 ni..,
        // laid out as frag_c: lane l at row l / 4 (+ 8), columns 2 (l % 4) and the next.
        let w = (t % 128) / 32;
        let r0 = row0 + (wg - 1) * 64 + w * 16 + lane / 4;
        for ni in 0..bw / 8 {
            for j in 0..4 {
                let col = col0 + ni * 8 + (lane % 4) * 2 + j % 2;
                c[idx2(r0 + (j / 2) * 8, col, n)] = acc[ni][j] as bf16;
            }
        }
    }
}

/// Shared memory per block: the ring and its 2 mbarriers a slot.
pub fn shared_bytes(stages: u32, bn: usize) -> u32 {
    (stages as usize * ((BM + bn) * BK * 2 + 16)) as u32
}

/// The tile width for `m x n`: 256, unless that leaves most of the GPU's `sms` multiprocessors
/// idle (skinny M) and 128-wide tiles fit: twice the blocks, each with half the work.
pub fn tile_n(m: usize, n: usize, sms: usize) -> usize {
    if !n.is_multiple_of(BN) || (m / BM) * (n / BN) < sms {
        128
    } else {
        BN
    }
}

/// Why `(m, n, k)` cannot run, if it cannot: the kernel has no edge handling, so every
/// dimension must be a whole number of tiles.
pub fn shape_error(m: usize, n: usize, k: usize) -> Option<String> {
    let bad: Vec<String> = [("M", m, BM), ("N", n, 128), ("K", k, BK)]
        .iter()
        .filter(|(_, v, t)| *v == 0 || v % t != 0)
        .map(|(name, v, t)| format!("{name} = {v} is not a positive multiple of {t}"))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "gemm_bf16_sm90 takes whole {BM} x 128 x {BK} tiles (N = 256 where it divides): {}",
            bad.join(", ")
        )
    })
}

/// `C = A Btᵀ` on the pgas stream; `checked` picks the variant. Refuses shapes that do not
/// divide into tiles, buffers of the wrong size and ring depths that do not fit, before
/// launching.
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    pgas: &Pgas,
    c: &mut CudaSlice<bf16>,
    a: &CudaSlice<bf16>,
    bt: &CudaSlice<bf16>,
    (m, n, k): (usize, usize, usize),
    stages: u32,
    checked: bool,
) -> pgas::Result<()> {
    let refuse = |reason: String| {
        Err(pgas::Error::Launch {
            kernel: "gemm_bf16_sm90".into(),
            reason,
        })
    };
    if let Some(why) = shape_error(m, n, k) {
        return refuse(why);
    }
    if !(2..=4).contains(&stages) {
        return refuse(format!(
            "stages = {stages}: the ring needs 2 to 4 slots of 48 KiB (Hopper has 227 KiB)"
        ));
    }
    if a.len() != m * k || bt.len() != n * k || c.len() != m * n {
        return refuse(format!(
            "buffer sizes {} / {} / {} do not match {m} x {k}, {n} x {k}, {m} x {n}",
            a.len(),
            bt.len(),
            c.len()
        ));
    }
    let sms = pgas.sm_count()?;
    gemm_tiled(
        pgas,
        c,
        a,
        bt,
        (m, n, k),
        (stages, tile_n(m, n, sms)),
        checked,
    )
}

/// [`gemm`] with the tile width `bn` (128 or 256) given.
#[allow(clippy::too_many_arguments)]
pub fn gemm_tiled(
    pgas: &Pgas,
    c: &mut CudaSlice<bf16>,
    a: &CudaSlice<bf16>,
    bt: &CudaSlice<bf16>,
    (m, n, k): (usize, usize, usize),
    (stages, bn): (u32, usize),
    checked: bool,
) -> pgas::Result<()> {
    if (bn != 128 && bn != BN) || n % bn != 0 {
        return Err(pgas::Error::Launch {
            kernel: "gemm_bf16_sm90".into(),
            reason: format!("tile width {bn}: 128 or 256, dividing N = {n}"),
        });
    }
    let stream = pgas.stream();
    let tile = |rows, box_rows| Tile2d {
        rows,
        cols: k,
        box_rows,
        box_cols: BK,
        swizzle: Swizzle::B128,
    };
    let a_map = TensorMap::tiled_2d(stream, a, tile(m, BM))?;
    let b_map = TensorMap::tiled_2d(stream, bt, tile(n, bn))?;
    let blocks = ((m / BM) * (n / bn)) as u32;
    let cfg = LaunchConfig::blocks(blocks, THREADS).with_shared_mem(shared_bytes(stages, bn));
    let bn = bn as u32;
    if checked {
        gemm_bf16_sm90::launch(pgas, cfg, c, &a_map, &b_map, m, n, k, stages, bn)
    } else {
        // SAFETY: the shape is whole tiles and every buffer has exactly its matrix's size, so
        // every index the kernel forms is in bounds.
        unsafe {
            gemm_bf16_sm90::launch_unchecked(pgas, cfg, c, &a_map, &b_map, m, n, k, stages, bn)
        }
    }
}

/// A reproducible value in [-1, 1), rounded to bf16.
fn value(i: usize, salt: u64) -> bf16 {
    let mut x = (i as u64 ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_add(salt);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    bf16::from_f32((x >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
}

/// One element of `A Btᵀ` on the host, in f64.
pub fn host_dot(a: &[bf16], bt: &[bf16], k: usize, row: usize, col: usize) -> f64 {
    (0..k)
        .map(|x| a[row * k + x].to_f64() * bt[col * k + x].to_f64())
        .sum()
}

/// Compares `got` with the host product at `points`; returns the worst error relative to the
/// tolerance (the output's bf16 rounding plus a little for f32 order; > 1 fails) and where.
pub fn compare(
    got: &[bf16],
    a: &[bf16],
    bt: &[bf16],
    (n, k): (usize, usize),
    points: impl Iterator<Item = (usize, usize)>,
) -> (f64, usize, usize, f64, f64) {
    let mut worst = (0.0, 0, 0, 0.0, 0.0);
    for (row, col) in points {
        let want = host_dot(a, bt, k, row, col);
        let g = got[row * n + col].to_f64();
        let r = (g - want).abs() / (want.abs() / 128.0 + 1e-2);
        if r.is_nan() || r > worst.0 {
            worst = (r, row, col, g, want);
        }
    }
    worst
}

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let me = pgas.my_pe();
    let stream = pgas.stream().clone();
    let major = pgas
        .cuda()
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    if major != 9 {
        // wgmma and sm_90a exist on Hopper alone; examples/gemm_bf16.rs is the portable GEMM.
        println!(
            "PE {me}: skipped: needs compute capability 9.0 (sm_90a), this GPU is {major}.x, ok"
        );
        return Ok(());
    }

    let t = Instant::now();
    let wide = [STAGES as i128, BN as i128];
    let narrow = [STAGES as i128, 128];
    pgas::launch::prewarm(
        &pgas,
        &[
            (Variant::Checked, &wide),
            (Variant::Checked, &narrow),
            (Variant::Plain, &wide),
        ]
        .map(|(variant, comptime)| Prewarm {
            spec: &gemm_bf16_sm90::SPEC,
            variant,
            comptime,
        }),
    )?;
    let compile_s = t.elapsed().as_secs_f64();

    // A shape that does not divide into tiles is an Err before anything launches.
    let mut tiny = stream.alloc_zeros::<bf16>(500 * 512)?;
    let ta = stream.alloc_zeros::<bf16>(500 * 512)?;
    let tb = stream.alloc_zeros::<bf16>(512 * 512)?;
    match gemm(&pgas, &mut tiny, &ta, &tb, (500, 512, 512), STAGES, true) {
        Err(e)
            if e.to_string()
                .contains("M = 500 is not a positive multiple of 128") => {}
        other => {
            eprintln!("PE {me}: a 500 x 512 x 512 GEMM was not refused as expected: {other:?}");
            std::process::exit(1);
        }
    }

    // Correctness: the checked variant at 512^3 (and a K of 1024, so the ring wraps) against the
    // host, every element, with both tile widths.
    for ((m, n, k), bn) in [
        ((512, 512, 512), 256),
        ((512, 512, 512), 128),
        ((256, 512, 1024), 256),
    ] {
        let a_host: Vec<bf16> = (0..m * k).map(|i| value(i, 1 + me as u64)).collect();
        let b_host: Vec<bf16> = (0..n * k).map(|i| value(i, 100 + me as u64)).collect();
        let a = stream.clone_htod(&a_host)?;
        let bt = stream.clone_htod(&b_host)?;
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        gemm_tiled(&pgas, &mut c, &a, &bt, (m, n, k), (STAGES, bn), true)?;
        let got = stream.clone_dtoh(&c)?;
        let all = (0..m).flat_map(|r| (0..n).map(move |col| (r, col)));
        let (ratio, row, col, g, want) = compare(&got, &a_host, &b_host, (n, k), all);
        if ratio.is_nan() || ratio > 1.0 {
            eprintln!(
                "PE {me}: C[{row}][{col}] = {g} but the host says {want} ({m} x {n} x {k}, {bn}-wide tiles, checked)"
            );
            std::process::exit(1);
        }
    }

    // Speed: the plain variant at 4096^3, spot-checked.
    let (m, n, k) = (4096, 4096, 4096);
    let a_host: Vec<bf16> = (0..m * k).map(|i| value(i, 7)).collect();
    let b_host: Vec<bf16> = (0..n * k).map(|i| value(i, 8)).collect();
    let a = stream.clone_htod(&a_host)?;
    let bt = stream.clone_htod(&b_host)?;
    let mut c = stream.alloc_zeros::<bf16>(m * n)?;
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut ms = Vec::new();
    for rep in 0..12 {
        let start = stream.record_event(flags)?;
        gemm(&pgas, &mut c, &a, &bt, (m, n, k), STAGES, false)?;
        let end = stream.record_event(flags)?;
        end.synchronize()?;
        if rep >= 2 {
            ms.push(start.elapsed_ms(&end)? as f64);
        }
    }
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    let got = stream.clone_dtoh(&c)?;
    let points = (0..512).map(|i| ((i * 977 + 13) % m, (i * 613 + 101) % n));
    let (ratio, row, col, g, want) = compare(&got, &a_host, &b_host, (n, k), points);
    if ratio.is_nan() || ratio > 1.0 {
        eprintln!("PE {me}: C[{row}][{col}] = {g} but the host says {want} (4096^3, plain)");
        std::process::exit(1);
    }
    let tflops = 2.0 * (m * n * k) as f64 / (median * 1e-3) / 1e12;
    println!(
        "PE {me}: sm_90a bf16 GEMM (TMA + wgmma) matches the host (512^3 with 256- and 128-wide \
         tiles and 256 x 512 x 1024, every element, 4096^3 at 512 points); 4096^3 in {median:.3} ms = {tflops:.1} TFLOP/s \
         (median of 10, plain, {STAGES} stages); JIT compile of three specializations {compile_s:.1} s, ok"
    );
    Ok(())
}
