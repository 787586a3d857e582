//! Hopper (sm_90a): the copy engine (`tma_load_2d` through host-built `TensorMap`s, from local and
//! peer memory) completing on mbarriers, and warpgroup MMA (`wgmma_m64nNk16`, bf16 and f16;
//! `wgmma_m64nNk32`, e4m3 and e5m2) on 128-byte-swizzled tiles, fed by the copy engine or by
//! thread stores behind `fence_proxy_async`; and the host's refusal of tiles that do not divide
//! the tensor. Inputs are small integers, exact in every operand type, so every product and sum
//! is exact in f32 and the results compare exactly.
//! On a GPU below compute capability 9.0 the cases check that the launch is refused.

use crate::kernels::fp8::{wgmma_acc_e4m3, wgmma_rs_pv_e4m3, wgmma_tile_e4m3};
use crate::kernels::hopper::{
    wgmma_acc_bf16, wgmma_from_thread_stores, wgmma_ktiles_f16, wgmma_rs_pv, wgmma_tile_bf16,
};
use crate::runner::{case, Case};
use crate::util::{self, check_eq, ensure, CaseResult};
use pgas::kernel::KernelSpec;
use pgas::prelude::*;

pub const CASES: &[Case] = &[
    case(
        "hopper/wgmma_m64n64k16_m64n176k16_bf16_tma",
        wgmma_bf16_case,
    ),
    case(
        "hopper/wgmma_m64n128k16_f16_3_ktiles_tma_peer",
        wgmma_f16_peer_case,
    ),
    case(
        "hopper/wgmma_from_thread_stores_fence_proxy",
        thread_stores_case,
    ),
    case("hopper/tensor_map_refuses_bad_tiles", bad_tiles_case),
    case("hopper/wgmma_m64n64k32_e4m3_tma", wgmma_e4m3_case),
    case("hopper/wgmma_m64n256k32_e5m2_2_ktiles_tma", wgmma_e5m2_case),
    case(
        "hopper/wgmma_m64nNk16_rs_registers_times_mn_major",
        wgmma_rs_case,
    ),
    case(
        "hopper/wgmma_m64nNk32_rs_e4m3_registers_times_permuted_k",
        wgmma_rs_e4m3_case,
    ),
    case(
        "hopper/wgmma_acc_bf16_e4m3_writes_over_or_adds",
        wgmma_acc_case,
    ),
];

/// None: compiled at first launch (sm_90a), so a suite on an older GPU still prewarms the rest.
pub const KERNELS: &[&KernelSpec] = &[];

/// One warpgroup, `e5m2`, N = 256: K in `ktiles` tiles of 128 through one slot (A 8 KiB, Bt
/// 32 KiB), the mbarrier's parity alternating.
#[pgas_kernel(max_threads = 128)]
fn wgmma_ktiles_e5m2(
    c: &mut CudaSlice<f32>, a_map: &TensorMap<e5m2>, b_map: &TensorMap<e5m2>,
    #[comptime] ktiles: u32,
) {
    let smem = dyn_shared::<e5m2>();
    let bars = dyn_shared::<u64>();
    let t = thread_idx_x() as usize;
    if t == 0 {
        mbarrier_init(&mut bars[5120], 1);
    }
    sync_threads();
    let mut acc = frag_c::<f32, 32>();
    for kt in 0..ktiles as usize {
        if t == 0 {
            mbarrier_arrive_expect_tx(&mut bars[5120], 40960);
            tma_load_2d(&mut smem[0], a_map, &mut bars[5120], (kt * 128) as i32, 0);
            tma_load_2d(
                &mut smem[8192],
                b_map,
                &mut bars[5120],
                (kt * 128) as i32,
                0,
            );
        }
        mbarrier_wait(&bars[5120], (kt % 2) as u32);
        wgmma_fence();
        for ks in 0..4 {
            wgmma_m64n256k32(&mut acc[0], &smem[ks * 32], &smem[8192 + ks * 32]);
        }
        wgmma_commit();
        wgmma_wait(0);
        sync_threads();
    }
    let lane = lane_id() as usize;
    let r = warp_id() as usize * 16 + lane / 4;
    for ni in 0..32 {
        for j in 0..4 {
            c[idx2(r + (j / 2) * 8, ni * 8 + (lane % 4) * 2 + j % 2, 256)] = acc[ni][j];
        }
    }
}

/// A small integer in -4..=4 (exact in bf16, f16, e4m3 and e5m2, and so are all the sums below).
fn small(i: usize, salt: usize) -> f32 {
    ((i * 7 + salt * 13) % 9) as f32 - 4.0
}

/// Row-major `m x n` = `m x k` times `(n x k)ᵀ`, in f32 on the host.
fn matmul_bt(a: &[f32], bt: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|x| a[i * k + x] * bt[j * k + x]).sum();
        }
    }
    c
}

/// Whether this GPU has sm_90a's instructions; below it, that the launch is refused instead.
fn hopper_or_refused(p: &Pgas, launch: impl FnOnce() -> pgas::Result<()>) -> Result<bool, String> {
    let major = crate::util::compute_major(p).map_err(|e| e.to_string())?;
    if major == 9 {
        return Ok(true);
    }
    match launch() {
        Err(e) if e.to_string().contains("compiled for sm_90a") => Ok(false),
        other => Err(format!(
            "a wgmma kernel on compute capability {major}.x: {other:?}"
        )),
    }
}

fn tile(rows: usize, cols: usize, box_rows: usize) -> Tile2d {
    Tile2d {
        rows,
        cols,
        box_rows,
        box_cols: 64,
        swizzle: Swizzle::B128,
    }
}

fn wgmma_bf16_case(p: &Pgas) -> CaseResult {
    let s = p.stream();
    let bf = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
    for n in [64, 176] {
        let a: Vec<f32> = (0..4096).map(|i| small(i, 1)).collect();
        let bt: Vec<f32> = (0..n * 64).map(|i| small(i, 2)).collect();
        let (da, dbt) = (s.clone_htod(&bf(&a))?, s.clone_htod(&bf(&bt))?);
        let mut dc = s.alloc_zeros::<f32>(64 * n)?;
        let am = TensorMap::tiled_2d(s, &da, tile(64, 64, 64))?;
        let bm = TensorMap::tiled_2d(s, &dbt, tile(n, 64, n))?;
        let cfg = LaunchConfig::blocks(1, 128).with_shared_mem(((4096 + n * 64) * 2 + 8) as u32);
        let nc = n as u32;
        if !hopper_or_refused(p, || wgmma_tile_bf16::launch(p, cfg, &mut dc, &am, &bm, nc))? {
            return Ok(());
        }
        wgmma_tile_bf16::launch(p, cfg, &mut dc, &am, &bm, nc)?;
        util::settle(p)?;
        check_eq(
            &format!("bf16 64x{n}x64 wgmma on TMA tiles"),
            &s.clone_dtoh(&dc)?,
            &matmul_bt(&a, &bt, 64, 64, n),
        )?;
    }
    Ok(())
}

fn wgmma_f16_peer_case(p: &Pgas) -> CaseResult {
    const K: usize = 192;
    let me = util::me(p);
    let peer = util::next(p);
    // A lives in symmetric memory; the copy engine reads the next PE's copy.
    let a_of = |pe: usize| -> Vec<f32> { (0..64 * K).map(|i| small(i, 3 + pe)).collect() };
    let half = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
    let sym = p.alloc_from(&half(&a_of(me)))?;
    p.barrier_all()?;
    let bt: Vec<f32> = (0..128 * K).map(|i| small(i, 5)).collect();
    let s = p.stream();
    let dbt = s.clone_htod(&half(&bt))?;
    let mut dc = s.alloc_zeros::<f32>(64 * 128)?;
    // Not mapped (no P2P path): the Err says what to do, and the case reads this PE's copy.
    let (am, src) = match TensorMap::tiled_2d_peer(p, &sym, peer, tile(64, K, 64)) {
        Ok(m) => (m, peer),
        Err(e) if e.to_string().contains("get_nbi_block") => {
            (TensorMap::tiled_2d_sym(&sym, tile(64, K, 64))?, me)
        }
        Err(e) => return Err(e.into()),
    };
    let bm = TensorMap::tiled_2d(s, &dbt, tile(128, K, 128))?;
    let cfg = LaunchConfig::blocks(1, 128).with_shared_mem(24576 + 8);
    let ktiles = (K / 64) as u32;
    if !hopper_or_refused(p, || {
        wgmma_ktiles_f16::launch(p, cfg, &mut dc, &am, &bm, ktiles)
    })? {
        return Ok(());
    }
    wgmma_ktiles_f16::launch(p, cfg, &mut dc, &am, &bm, ktiles)?;
    util::settle(p)?;
    let got = s.clone_dtoh(&dc)?;
    // The peer may not overwrite its A before this PE's copy engine has read it.
    p.barrier_all()?;
    check_eq(
        &format!("f16 64x128x192 wgmma, 3 TMA k-tiles of PE {src}'s A"),
        &got,
        &matmul_bt(&a_of(src), &bt, 64, K, 128),
    )
}

fn thread_stores_case(p: &Pgas) -> CaseResult {
    let a: Vec<f32> = (0..4096).map(|i| small(i, 6)).collect();
    let bt: Vec<f32> = (0..4096).map(|i| small(i, 7)).collect();
    let s = p.stream();
    let bf = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
    let (da, dbt) = (s.clone_htod(&bf(&a))?, s.clone_htod(&bf(&bt))?);
    let mut dc = s.alloc_zeros::<f32>(4096)?;
    let cfg = LaunchConfig::blocks(1, 256).with_shared_mem(16384 + 8);
    if !hopper_or_refused(p, || {
        wgmma_from_thread_stores::launch(p, cfg, &mut dc, &da, &dbt)
    })? {
        return Ok(());
    }
    wgmma_from_thread_stores::launch(p, cfg, &mut dc, &da, &dbt)?;
    util::settle(p)?;
    check_eq(
        "bf16 64x64x64 wgmma on thread-stored swizzled tiles",
        &s.clone_dtoh(&dc)?,
        &matmul_bt(&a, &bt, 64, 64, 64),
    )
}

/// S = A Btᵀ, then 0.5 + S V with S from registers and V MN-major, for N = 64, 128 and 256. A and Bt
/// hold -1, 0 and 1, so S (|S| <= 64) is exact in bf16 and the products are exact in f32.
fn wgmma_rs_case(p: &Pgas) -> CaseResult {
    let unit = |i: usize, salt: usize| ((i * 5 + salt * 3) % 3) as f32 - 1.0;
    let a: Vec<f32> = (0..4096).map(|i| unit(i, 1)).collect();
    let bt: Vec<f32> = (0..4096).map(|i| unit(i / 3, 2)).collect();
    let sm = matmul_bt(&a, &bt, 64, 64, 64);
    let s = p.stream();
    let bf = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
    let (da, dbt) = (s.clone_htod(&bf(&a))?, s.clone_htod(&bf(&bt))?);
    let am = TensorMap::tiled_2d(s, &da, tile(64, 64, 64))?;
    let bm = TensorMap::tiled_2d(s, &dbt, tile(64, 64, 64))?;
    for n in [64usize, 128, 256] {
        let v: Vec<f32> = (0..64 * n).map(|i| small(i, n)).collect();
        let dv = s.clone_htod(&bf(&v))?;
        let vm = TensorMap::tiled_2d(s, &dv, tile(64, n, 64))?;
        let mut dout = s.alloc_zeros::<f32>(64 * n)?;
        let cfg = LaunchConfig::blocks(1, 128).with_shared_mem(((8192 + n * 64) * 2 + 8) as u32);
        let launch =
            |dout: &mut CudaSlice<f32>| wgmma_rs_pv::launch(p, cfg, dout, &am, &bm, &vm, n as u32);
        if !hopper_or_refused(p, || launch(&mut dout))? {
            return Ok(());
        }
        launch(&mut dout)?;
        util::settle(p)?;
        // O = 0.5 + S V, V row-major 64 x n: (n x 64)ᵀ as matmul_bt takes it.
        let vt: Vec<f32> = (0..n * 64).map(|i| v[(i % 64) * n + i / 64]).collect();
        let want: Vec<f32> = matmul_bt(&sm, &vt, 64, 64, n)
            .iter()
            .map(|x| x + 0.5)
            .collect();
        check_eq(
            &format!("0.5 + S V with S from registers (pack_a), V MN-major, N = {n}"),
            &s.clone_dtoh(&dout)?,
            &want,
        )?;
    }
    Ok(())
}

/// S = A Btᵀ in e4m3, then 0.5 + S V with S from registers (`pack_a_k32`) and V stored
/// transposed with its keys in `pack_a_k32`'s order, for N = 64, 128 and 256. A is a 0/1
/// selection (row r has a 1 at column r), so S = Bt's columns, small integers exact in e4m3, and
/// every product and sum is exact in f32.
fn wgmma_rs_e4m3_case(p: &Pgas) -> CaseResult {
    let a: Vec<f32> = (0..64 * 128)
        .map(|i| f32::from(i % 128 == i / 128))
        .collect();
    let bt: Vec<f32> = (0..64 * 128).map(|i| small(i, 12)).collect();
    let sm = matmul_bt(&a, &bt, 64, 128, 64);
    let s = p.stream();
    let q = |v: &[f32]| v.iter().map(|&x| e4m3::from_f32(x)).collect::<Vec<_>>();
    let (da, dbt) = (s.clone_htod(&q(&a))?, s.clone_htod(&q(&bt))?);
    let am = TensorMap::tiled_2d(s, &da, tile_fp8(64, 128, 64))?;
    let bm = TensorMap::tiled_2d(s, &dbt, tile_fp8(64, 128, 64))?;
    // pack_a_k32's K order: position 4 t + j of each 16 holds column 2 t + [0, 1, 8, 9][j].
    let perm = |k: usize| (k / 16) * 16 + 2 * ((k % 16) / 4) + [0, 1, 8, 9][k % 4];
    for n in [64usize, 128, 256] {
        let v: Vec<f32> = (0..64 * n).map(|i| small(i, n)).collect();
        // Vt: n rows of 128 keys, key position k holding V's row perm(k); keys 64.. are 0.
        let vt: Vec<f32> = (0..n * 128)
            .map(|i| {
                let (row, k) = (i / 128, i % 128);
                if k < 64 {
                    v[perm(k) * n + row]
                } else {
                    0.0
                }
            })
            .collect();
        let dvt = s.clone_htod(&q(&vt))?;
        let vm = TensorMap::tiled_2d(s, &dvt, tile_fp8(n, 128, n))?;
        let mut dout = s.alloc_zeros::<f32>(64 * n)?;
        let cfg = LaunchConfig::blocks(1, 128).with_shared_mem((16384 + n * 128 + 8) as u32);
        let launch = |dout: &mut CudaSlice<f32>| {
            wgmma_rs_pv_e4m3::launch(p, cfg, dout, &am, &bm, &vm, n as u32)
        };
        if !hopper_or_refused(p, || launch(&mut dout))? {
            return Ok(());
        }
        launch(&mut dout)?;
        util::settle(p)?;
        let vcols: Vec<f32> = (0..n * 64).map(|i| v[(i % 64) * n + i / 64]).collect();
        let want: Vec<f32> = matmul_bt(&sm, &vcols, 64, 64, n)
            .iter()
            .map(|x| x + 0.5)
            .collect();
        check_eq(
            &format!("0.5 + S V in e4m3 with S from registers (pack_a_k32), V transposed, N = {n}"),
            &s.clone_dtoh(&dout)?,
            &want,
        )?;
    }
    Ok(())
}

/// The `_acc` forms on accumulators that start at 7: with `add` false the first K step writes
/// A Btᵀ over them, with `add` true it adds; bf16 at N = 64, 128, 176, 256 and e4m3 at N = 64,
/// 128, 256, against the host exactly.
fn wgmma_acc_case(p: &Pgas) -> CaseResult {
    let s = p.stream();
    let bf = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
    let e8 = |v: &[f32]| v.iter().map(|&x| e4m3::from_f32(x)).collect::<Vec<_>>();
    for (n, fp8) in [
        (64, false),
        (128, false),
        (176, false),
        (256, false),
        (64, true),
        (128, true),
        (256, true),
    ] {
        let k = if fp8 { 128 } else { 64 };
        let a: Vec<f32> = (0..64 * k).map(|i| small(i, 3)).collect();
        let bt: Vec<f32> = (0..n * k).map(|i| small(i, 4)).collect();
        let mut dc = s.alloc_zeros::<f32>(64 * n)?;
        let nc = n as u32;
        for add in [false, true] {
            if fp8 {
                let (da, dbt) = (s.clone_htod(&e8(&a))?, s.clone_htod(&e8(&bt))?);
                let am = TensorMap::tiled_2d(s, &da, tile_fp8(64, 128, 64))?;
                let bm = TensorMap::tiled_2d(s, &dbt, tile_fp8(n, 128, n))?;
                let cfg = LaunchConfig::blocks(1, 128).with_shared_mem((8192 + n * 128 + 8) as u32);
                let launch =
                    |dc: &mut CudaSlice<f32>| wgmma_acc_e4m3::launch(p, cfg, dc, &am, &bm, add, nc);
                if !hopper_or_refused(p, || launch(&mut dc))? {
                    return Ok(());
                }
                launch(&mut dc)?;
            } else {
                let (da, dbt) = (s.clone_htod(&bf(&a))?, s.clone_htod(&bf(&bt))?);
                let am = TensorMap::tiled_2d(s, &da, tile(64, 64, 64))?;
                let bm = TensorMap::tiled_2d(s, &dbt, tile(n, 64, n))?;
                let cfg =
                    LaunchConfig::blocks(1, 128).with_shared_mem(((4096 + n * 64) * 2 + 8) as u32);
                let launch =
                    |dc: &mut CudaSlice<f32>| wgmma_acc_bf16::launch(p, cfg, dc, &am, &bm, add, nc);
                if !hopper_or_refused(p, || launch(&mut dc))? {
                    return Ok(());
                }
                launch(&mut dc)?;
            }
            util::settle(p)?;
            let base = if add { 7.0 } else { 0.0 };
            let want: Vec<f32> = matmul_bt(&a, &bt, 64, k, n)
                .iter()
                .map(|x| x + base)
                .collect();
            check_eq(
                &format!(
                    "{} N = {n} _acc with add = {add}",
                    if fp8 { "e4m3" } else { "bf16" }
                ),
                &s.clone_dtoh(&dc)?,
                &want,
            )?;
        }
    }
    Ok(())
}

/// A 128-byte-swizzled tile of 128 FP8 columns (128 bytes a row).
fn tile_fp8(rows: usize, cols: usize, box_rows: usize) -> Tile2d {
    Tile2d {
        rows,
        cols,
        box_rows,
        box_cols: 128,
        swizzle: Swizzle::B128,
    }
}

fn wgmma_e4m3_case(p: &Pgas) -> CaseResult {
    let a: Vec<f32> = (0..64 * 128).map(|i| small(i, 8)).collect();
    let bt: Vec<f32> = (0..64 * 128).map(|i| small(i, 9)).collect();
    let s = p.stream();
    let q = |v: &[f32]| v.iter().map(|&x| e4m3::from_f32(x)).collect::<Vec<_>>();
    let (da, dbt) = (s.clone_htod(&q(&a))?, s.clone_htod(&q(&bt))?);
    let mut dc = s.alloc_zeros::<f32>(64 * 64)?;
    let am = TensorMap::tiled_2d(s, &da, tile_fp8(64, 128, 64))?;
    let bm = TensorMap::tiled_2d(s, &dbt, tile_fp8(64, 128, 64))?;
    let cfg = LaunchConfig::blocks(1, 128).with_shared_mem(16384 + 8);
    if !hopper_or_refused(p, || wgmma_tile_e4m3::launch(p, cfg, &mut dc, &am, &bm))? {
        return Ok(());
    }
    wgmma_tile_e4m3::launch(p, cfg, &mut dc, &am, &bm)?;
    util::settle(p)?;
    check_eq(
        "e4m3 64x64x128 wgmma on TMA tiles",
        &s.clone_dtoh(&dc)?,
        &matmul_bt(&a, &bt, 64, 128, 64),
    )
}

fn wgmma_e5m2_case(p: &Pgas) -> CaseResult {
    const K: usize = 256;
    let a: Vec<f32> = (0..64 * K).map(|i| small(i, 10)).collect();
    let bt: Vec<f32> = (0..256 * K).map(|i| small(i, 11)).collect();
    let s = p.stream();
    let q = |v: &[f32]| v.iter().map(|&x| e5m2::from_f32(x)).collect::<Vec<_>>();
    let (da, dbt) = (s.clone_htod(&q(&a))?, s.clone_htod(&q(&bt))?);
    let mut dc = s.alloc_zeros::<f32>(64 * 256)?;
    let am = TensorMap::tiled_2d(s, &da, tile_fp8(64, K, 64))?;
    let bm = TensorMap::tiled_2d(s, &dbt, tile_fp8(256, K, 256))?;
    let cfg = LaunchConfig::blocks(1, 128).with_shared_mem(40960 + 8);
    let ktiles = (K / 128) as u32;
    if !hopper_or_refused(p, || {
        wgmma_ktiles_e5m2::launch(p, cfg, &mut dc, &am, &bm, ktiles)
    })? {
        return Ok(());
    }
    wgmma_ktiles_e5m2::launch(p, cfg, &mut dc, &am, &bm, ktiles)?;
    util::settle(p)?;
    check_eq(
        "e5m2 64x256x256 wgmma, 2 TMA k-tiles",
        &s.clone_dtoh(&dc)?,
        &matmul_bt(&a, &bt, 64, K, 256),
    )
}

fn bad_tiles_case(p: &Pgas) -> CaseResult {
    let s = p.stream();
    let d = s.alloc_zeros::<bf16>(500 * 64)?;
    let msg = match TensorMap::tiled_2d(s, &d, tile(500, 64, 128)) {
        Ok(_) => return Err("a 128-row tile of a 500-row tensor was accepted".into()),
        Err(e) => e.to_string(),
    };
    ensure(
        msg.contains("box_rows = 128 does not divide the tensor's 500"),
        || format!("the error does not name the rule: {msg}"),
    )?;
    let wide = match TensorMap::tiled_2d(
        s,
        &d,
        Tile2d {
            box_cols: 128,
            box_rows: 125,
            rows: 250,
            cols: 128,
            swizzle: Swizzle::B128,
        },
    ) {
        Ok(_) => return Err("a 256-byte tile row under a 128-byte swizzle was accepted".into()),
        Err(e) => e.to_string(),
    };
    ensure(wide.contains("longer than the 128-byte swizzle"), || {
        format!("the error does not name the swizzle limit: {wide}")
    })
}
