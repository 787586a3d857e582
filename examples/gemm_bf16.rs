//! A bf16 GEMM on the tensor cores, written in pgas: `C = A B` with `A` (M x K), `B` (K x N)
//! and `C` (M x N) row-major `bf16`, accumulated in `f32`. It is the sm_80-portable recipe
//! (Ampere and Hopper alike; no `wgmma`):
//!
//! - each block computes a 128 x 128 tile of `C` with 4 warps, each warp a 64 x 64 sub-tile:
//!   4 x 8 accumulators of `mma.sync.m16n8k16` (`frag_c::<f32, 32>()`), in registers;
//! - the K dimension advances 32 at a time through a ring of `stages` tiles of `A` and `B` in
//!   dynamic shared memory (16 KiB a stage), filled by `cp.async` while the tensor cores work on
//!   the tile before: `stages - 1` tiles are always in flight;
//! - `ldmatrix` moves each warp's operands from shared memory into fragments (`.trans` for `B`,
//!   which is stored K-major); both tiles are stored XOR-swizzled in 16-byte chunks, so the 8 rows
//!   an `ldmatrix` phase reads fall on different banks;
//! - the epilogue converts to `bf16` through shared memory and stores 16 bytes a lane.
//!
//! Every PE runs its own GEMMs (one process per GPU): a checked launch on 512^3 compared with the
//! host, then the plain variant timed at 4096^3 (spot-checked against the host). Shapes that do
//! not divide into tiles are refused on the host, before any launch.
//!
//! ```text
//! pgas-run -n 2 -- target/release/examples/gemm_bf16
//! ```
//!
//! `benches/gemm.rs` times the same kernel against cuBLAS.

use pgas::cudarc::driver::sys::CUevent_flags;
use pgas::kernel::Variant;
use pgas::launch::Prewarm;
use pgas::prelude::*;
use std::time::Instant;

/// Rows and columns of `C` per block, and the K step.
pub const BM: usize = 128;
pub const BN: usize = 128;
pub const BK: usize = 32;
/// Threads per block: 4 warps in a 2 x 2 grid of 64 x 64 warp tiles.
pub const THREADS: u32 = 128;
/// Shared-memory tiles in flight (a comptime parameter: each value is its own specialization).
pub const STAGES: u32 = 4;

#[pgas_kernel(max_threads = 128)]
pub fn gemm_bf16(
    c: &mut CudaSlice<bf16>,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    m: usize,
    n: usize,
    k: usize,
    #[comptime] stages: u32,
) {
    // Stage s holds A's 128 x 32 tile at s * 8192 and B's 32 x 128 tile 4096 elements later.
    let smem = dyn_shared::<bf16>();
    let s = stages as usize;

    // Which tile of C: blocks go down 8 tile rows before moving right, so the blocks running
    // together share rows of A and columns of B in L2.
    let tiles_m = m / 128;
    let tiles_n = n / 128;
    let pid = block_idx_x() as usize;
    let group = 8 * tiles_n;
    let first_m = (pid / group) * 8;
    let group_m = min(tiles_m - first_m, 8);
    let row0 = (first_m + (pid % group) % group_m) * 128;
    let col0 = ((pid % group) / group_m) * 128;

    let t = thread_idx_x() as usize;
    let lane = lane_id() as usize;
    let warp = warp_id() as usize;
    let wm = (warp / 2) * 64;
    let wn = (warp % 2) * 64;
    let ktiles = k / 32;

    let mut acc = frag_c::<f32, 32>();
    let mut fa = frag_a::<bf16, 4>();
    let mut fb = frag_b::<bf16, 8>();

    // Prologue: start copying the first `stages - 1` k-tiles.
    for kt in 0..s - 1 {
        if kt < ktiles {
            let base = kt * 8192;
            let k0 = kt * 32;
            for i in 0..4 {
                // 512 chunks of 16 bytes per tile; each thread copies 4 of A and 4 of B.
                let q = t + i * 128;
                let ar = q / 4;
                let ac = q % 4;
                cp_async_16(
                    &mut smem[base + ar * 32 + (ac ^ ((ar / 2) % 4)) * 8],
                    &a[idx2(row0 + ar, k0 + ac * 8, k)],
                );
                let br = q / 16;
                let bc = q % 16;
                cp_async_16(
                    &mut smem[base + 4096 + br * 128 + (bc ^ (br % 8)) * 8],
                    &b[idx2(k0 + br, col0 + bc * 8, n)],
                );
            }
        }
        cp_async_commit();
    }

    for kt in 0..ktiles {
        // k-tile kt has landed (at most stages - 2 younger groups still in flight), and after
        // the barrier every thread is done with k-tile kt - 1, whose stage is refilled next.
        cp_async_wait(stages - 2);
        sync_threads();
        let next = kt + s - 1;
        if next < ktiles {
            let base = (next % s) * 8192;
            let k0 = next * 32;
            for i in 0..4 {
                let q = t + i * 128;
                let ar = q / 4;
                let ac = q % 4;
                cp_async_16(
                    &mut smem[base + ar * 32 + (ac ^ ((ar / 2) % 4)) * 8],
                    &a[idx2(row0 + ar, k0 + ac * 8, k)],
                );
                let br = q / 16;
                let bc = q % 16;
                cp_async_16(
                    &mut smem[base + 4096 + br * 128 + (bc ^ (br % 8)) * 8],
                    &b[idx2(k0 + br, col0 + bc * 8, n)],
                );
            }
        }
        cp_async_commit();

        let base = (kt % s) * 8192;
        for ks in 0..2 {
            // A: four 16 x 16 fragments down the warp's 64 rows; lane l gives row l % 16 and
            // the 8-column half l / 16 of the k-step (chunk ks * 2 + l / 16, swizzled).
            for mi in 0..4 {
                let r = wm + mi * 16 + lane % 16;
                let ch = ks * 2 + lane / 16;
                ldmatrix_x4(&mut fa[mi], &smem[base + r * 32 + (ch ^ ((r / 2) % 4)) * 8]);
            }
            // B: eight 16 x 8 fragments across the warp's 64 columns, two per ldmatrix.
            for p in 0..4 {
                let kr = ks * 16 + lane % 16;
                let ch = (wn + p * 16) / 8 + lane / 16;
                ldmatrix_x4_trans(
                    &mut fb[p * 2],
                    &mut fb[p * 2 + 1],
                    &smem[base + 4096 + kr * 128 + (ch ^ (kr % 8)) * 8],
                );
            }
            for mi in 0..4 {
                for ni in 0..8 {
                    mma_sync(&mut acc[mi * 8 + ni], &fa[mi], &fb[ni]);
                }
            }
        }
    }

    // Epilogue: the C tile goes through shared memory (rows of 136 so that the lanes' 4-byte
    // writes spread over the banks), then out in 16-byte stores along C's rows.
    cp_async_wait(0);
    sync_threads();
    for mi in 0..4 {
        for ni in 0..8 {
            for j in 0..4 {
                // Lane l holds rows l / 4 and l / 4 + 8, columns 2 * (l % 4) and the next.
                let r = wm + mi * 16 + lane / 4 + (j / 2) * 8;
                let col = wn + ni * 8 + (lane % 4) * 2 + j % 2;
                smem[r * 136 + col] = acc[mi * 8 + ni][j] as bf16;
            }
        }
    }
    sync_threads();
    for i in 0..16 {
        let q = t + i * 128;
        let r = q / 16;
        let ch = q % 16;
        let v = load_vec16(&smem[r * 136 + ch * 8]);
        store_vec16(&mut c[idx2(row0 + r, col0 + ch * 8, n)], v);
    }
}

/// Shared memory per block: the stages, or the staged C tile (128 rows of 136) if larger.
pub fn shared_bytes(stages: u32) -> u32 {
    let ring = stages as usize * (BM * BK + BK * BN) * 2;
    ring.max(BM * 136 * 2) as u32
}

/// Why `(m, n, k)` cannot run, if it cannot: the kernel has no edge handling, so every
/// dimension must be a whole number of tiles.
pub fn shape_error(m: usize, n: usize, k: usize) -> Option<String> {
    let bad: Vec<String> = [("M", m, BM), ("N", n, BN), ("K", k, BK)]
        .iter()
        .filter(|(_, v, t)| *v == 0 || v % t != 0)
        .map(|(name, v, t)| format!("{name} = {v} is not a positive multiple of {t}"))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "gemm_bf16 takes whole {BM} x {BN} x {BK} tiles: {}",
            bad.join(", ")
        )
    })
}

/// `C = A B` on the pgas stream; `checked` picks the variant. Refuses shapes that do not divide
/// into tiles and buffers of the wrong size, before launching.
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    pgas: &Pgas,
    c: &mut CudaSlice<bf16>,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    (m, n, k): (usize, usize, usize),
    stages: u32,
    checked: bool,
) -> pgas::Result<()> {
    let refuse = |reason: String| {
        Err(pgas::Error::Launch {
            kernel: "gemm_bf16".into(),
            reason,
        })
    };
    if let Some(why) = shape_error(m, n, k) {
        return refuse(why);
    }
    if stages < 2 {
        return refuse(format!("stages = {stages}: the pipeline needs at least 2"));
    }
    if a.len() != m * k || b.len() != k * n || c.len() != m * n {
        return refuse(format!(
            "buffer sizes {} / {} / {} do not match {m} x {k}, {k} x {n}, {m} x {n}",
            a.len(),
            b.len(),
            c.len()
        ));
    }
    let blocks = ((m / BM) * (n / BN)) as u32;
    let cfg = LaunchConfig::blocks(blocks, THREADS).with_shared_mem(shared_bytes(stages));
    if checked {
        gemm_bf16::launch(pgas, cfg, c, a, b, m, n, k, stages)
    } else {
        // SAFETY: the shape is whole tiles and every buffer has exactly its matrix's size, so
        // every index the kernel forms is in bounds.
        unsafe { gemm_bf16::launch_unchecked(pgas, cfg, c, a, b, m, n, k, stages) }
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

/// One element of `A B` on the host, in f64.
fn host_dot(a: &[bf16], b: &[bf16], n: usize, k: usize, row: usize, col: usize) -> f64 {
    (0..k)
        .map(|x| a[row * k + x].to_f64() * b[x * n + col].to_f64())
        .sum()
}

/// The bound on |got - want| for a bf16 result: the output's rounding (2^-8 relative) plus a
/// little for f32 accumulation order.
fn tolerance(want: f64) -> f64 {
    want.abs() / 128.0 + 1e-2
}

/// Compares `got` with the host product at `points` (row, col); returns the worst error
/// relative to the tolerance (> 1 fails) and where.
fn compare(
    got: &[bf16],
    a: &[bf16],
    b: &[bf16],
    (n, k): (usize, usize),
    points: impl Iterator<Item = (usize, usize)>,
) -> (f64, usize, usize, f64, f64) {
    let mut worst = (0.0, 0, 0, 0.0, 0.0);
    for (row, col) in points {
        let want = host_dot(a, b, n, k, row, col);
        let g = got[row * n + col].to_f64();
        let r = (g - want).abs() / tolerance(want);
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

    // The JIT compiles each variant once per machine (then the disk cache serves it): record
    // what it costs for a kernel of this size.
    let t = Instant::now();
    let comptime = [STAGES as i128];
    pgas::launch::prewarm(
        &pgas,
        &[Variant::Checked, Variant::Plain].map(|variant| Prewarm {
            spec: &gemm_bf16::SPEC,
            variant,
            comptime: &comptime,
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

    // Correctness: the checked variant at 512^3 against the host, every element.
    let (m, n, k) = (512, 512, 512);
    let a_host: Vec<bf16> = (0..m * k).map(|i| value(i, 1 + me as u64)).collect();
    let b_host: Vec<bf16> = (0..k * n).map(|i| value(i, 100 + me as u64)).collect();
    let a = stream.clone_htod(&a_host)?;
    let b = stream.clone_htod(&b_host)?;
    let mut c = stream.alloc_zeros::<bf16>(m * n)?;
    gemm(&pgas, &mut c, &a, &b, (m, n, k), STAGES, true)?;
    let got = stream.clone_dtoh(&c)?;
    let all = (0..m).flat_map(|r| (0..n).map(move |col| (r, col)));
    let (ratio, row, col, g, want) = compare(&got, &a_host, &b_host, (n, k), all);
    if ratio.is_nan() || ratio > 1.0 {
        eprintln!(
            "PE {me}: C[{row}][{col}] = {g} but the host says {want} (512^3, checked variant)"
        );
        std::process::exit(1);
    }

    // Speed: the plain variant at 4096^3, spot-checked.
    let (m, n, k) = (4096, 4096, 4096);
    let a_host: Vec<bf16> = (0..m * k).map(|i| value(i, 7)).collect();
    let b_host: Vec<bf16> = (0..k * n).map(|i| value(i, 8)).collect();
    let a = stream.clone_htod(&a_host)?;
    let b = stream.clone_htod(&b_host)?;
    let mut c = stream.alloc_zeros::<bf16>(m * n)?;
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut ms = Vec::new();
    for rep in 0..12 {
        let start = stream.record_event(flags)?;
        gemm(&pgas, &mut c, &a, &b, (m, n, k), STAGES, false)?;
        let end = stream.record_event(flags)?;
        end.synchronize()?;
        if rep >= 2 {
            ms.push(start.elapsed_ms(&end)? as f64);
        }
    }
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    let got = stream.clone_dtoh(&c)?;
    // 512 points spread over every tile row and column.
    let points = (0..512).map(|i| ((i * 977 + 13) % m, (i * 613 + 101) % n));
    let (ratio, row, col, g, want) = compare(&got, &a_host, &b_host, (n, k), points);
    if ratio.is_nan() || ratio > 1.0 {
        eprintln!("PE {me}: C[{row}][{col}] = {g} but the host says {want} (4096^3, plain)");
        std::process::exit(1);
    }
    let tflops = 2.0 * (m * n * k) as f64 / (median * 1e-3) / 1e12;
    println!(
        "PE {me}: bf16 GEMM matches the host (512^3 every element, 4096^3 at 512 points); \
         4096^3 in {median:.3} ms = {tflops:.1} TFLOP/s (median of 10, plain, {STAGES} stages); \
         JIT compile of both variants {compile_s:.1} s, ok"
    );
    Ok(())
}
