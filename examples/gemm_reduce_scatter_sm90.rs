//! GEMM + reduce-scatter fused in one pgas kernel (a row-parallel linear layer, PyTorch async-TP's
//! `fused_matmul_reduce_scatter`), on Hopper's tensor cores: every PE `p` holds `A_p` (M x K/P,
//! its slice of the inner dimension) and `Bt_p` (N x K/P, the weights stored transposed), both
//! row-major `bf16`; PE `p` ends with rows `[p M/P, (p + 1) M/P)` of `sum_q A_q Bt_qᵀ` (`bf16`,
//! accumulated in `f32`).
//!
//! The GEMM is `examples/gemm_bf16_sm90.rs`'s (TMA into a ring of shared memory, a feeding
//! warpgroup and two `wgmma` warpgroups, 128 x 256 tiles); what changes is the order of the tiles
//! and the epilogue:
//!
//! - block `b` computes a tile of the rows owned by PE `me + 1 + b / tiles_per_owner` (mod P):
//!   the tiles of the next PE first, this PE's own rows last. PE `q` computes PE `p`'s tiles in
//!   round `p - q - 1` (mod P), so when a PE reaches its own tiles the others have mostly sent
//!   their parts of them;
//! - the accumulators go through shared memory (`f32`, padded rows) so that each thread moves
//!   whole 16-byte vectors; a tile of another PE is rounded to `bf16` and stored straight into
//!   that PE's staging buffer (`staging.peer(owner)`, NVLink stores, one slot a source PE), then
//!   `threadfence_system` and one signal a tile (`arrive`, set to the call's epoch);
//! - a tile of this PE's own rows waits for the `P - 1` signals of that tile and adds the staged
//!   parts to its own `f32` partial in the epilogue, then writes `bf16` to `out`, and acknowledges
//!   (`ack` on each source, set to the epoch): the source's next call waits for that
//!   acknowledgement before it overwrites the slot.
//!
//! Signals hold the number of the call (the epoch), and waits are `>=`: repeated calls need no
//! reset. Nothing else synchronizes the PEs, so the kernel is an ordinary (not cooperative)
//! launch: the blocks that wait (own tiles, launched last) wait only for blocks of other PEs that
//! never wait on this call.
//!
//! Checks: every PE compares its rows with the host at small sizes (several calls in a row, both
//! tile widths), then times 8192 x 8192 x 8192 (K split over the PEs) and spot-checks it. Bad
//! input is an `Err` on every PE before anything launches: shapes that do not divide among the PEs
//! or into tiles, shapes that differ between PEs, a heap too small for the staging buffer.
//!
//! ```text
//! pgas-run -n 2 -- target/release/examples/gemm_reduce_scatter_sm90
//! ```
//!
//! `benches/gemm_rs.rs` times it beside cuBLAS + NCCL and `pgas::ops::matmul_reduce_scatter`.

use pgas::cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use pgas::kernel::Variant;
use pgas::launch::Prewarm;
use pgas::prelude::*;

/// Rows per tile, the K step and the widest tile.
pub const BM: usize = 128;
pub const BK: usize = 64;
pub const BN: usize = 256;
/// Threads per block: a feeding warpgroup and two multiplying ones.
pub const THREADS: u32 = 384;
/// Slots of the shared-memory ring.
pub const STAGES: u32 = 4;
/// `f32` padding of each staged row in shared memory: rows 8 words apart start in different
/// banks, and rows stay 16-byte aligned.
const PAD: usize = 8;

#[pgas_kernel(max_threads = 384)]
#[allow(clippy::too_many_arguments)]
pub fn gemm_rs_sm90(
    out: &mut CudaSlice<bf16>,
    staging: &mut SymTensor<bf16>,
    arrive: &mut SymTensor<u64>,
    ack: &mut SymTensor<u64>,
    a_map: &TensorMap<bf16>,
    b_map: &TensorMap<bf16>,
    m: usize,
    n: usize,
    k: usize,
    epoch: u64,
    #[comptime] stages: u32,
    #[comptime] bn: u32,
) {
    let smem = dyn_shared::<bf16>();
    let bars = dyn_shared::<u64>();
    let stile = dyn_shared::<f32>();
    let s = stages as usize;
    let bw = bn as usize;
    let slot = 8192 + bw * 64;
    let full0 = s * slot / 4;
    let empty0 = full0 + s;

    // Which tile: owners in the order me + 1, me + 2, ..., me; within an owner's rows, blocks go
    // down 8 tile rows before moving right (rows of A and Bt shared in L2).
    let me = my_pe() as usize;
    let np = n_pes() as usize;
    let mp = m / np;
    let tiles_m = mp / 128;
    let tiles_n = n / bw;
    let per_owner = tiles_m * tiles_n;
    let pid = block_idx_x() as usize;
    let owner = (me + 1 + pid / per_owner) % np;
    let lt = pid % per_owner;
    let group = 8 * tiles_n;
    let first_m = (lt / group) * 8;
    let group_m = min(tiles_m - first_m, 8);
    // Rows within the owner's M / P rows.
    let lrow0 = (first_m + (lt % group) % group_m) * 128;
    let row0 = owner * mp + lrow0;
    let col0 = ((lt % group) / group_m) * bw;

    let t = thread_idx_x() as usize;
    let wg = t / 128;
    let ktiles = k / 64;

    if t == 0 {
        for i in 0..s {
            mbarrier_init(&mut bars[full0 + i], 1);
            mbarrier_init(&mut bars[empty0 + i], 8);
        }
    }
    sync_threads();

    let mut acc = frag_c::<f32, 32>();
    if wg == 0 {
        if t == 0 {
            for kt in 0..ktiles {
                let st = kt % s;
                if kt >= s {
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
        let arows = (wg - 1) * 4096;
        let lane = lane_id() as usize;
        for kt in 0..ktiles {
            let st = kt % s;
            mbarrier_wait(&bars[full0 + st], ((kt / s) % 2) as u32);
            let base = st * slot;
            wgmma_fence();
            for ks in 0..4 {
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
            wgmma_wait(1);
            if kt > 0 && lane == 0 {
                mbarrier_arrive(&mut bars[empty0 + (kt - 1) % s]);
            }
        }
        wgmma_wait(0);
    }
    // Every copy has landed and every wgmma has read its operands: the ring is free for the
    // f32 tile.
    sync_threads();

    let ld = bw + 8;
    if wg > 0 {
        let lane = lane_id() as usize;
        let w = (t % 128) / 32;
        let r = (wg - 1) * 64 + w * 16 + lane / 4;
        for ni in 0..bw / 8 {
            for j in 0..4 {
                let col = ni * 8 + (lane % 4) * 2 + j % 2;
                stile[idx2(r + (j / 2) * 8, col, ld)] = acc[ni][j];
            }
        }
    }
    // Slot of source PE `src` on owner `o`: (src - o - 1) mod P, one of P - 1, of M/P x N each.
    let part = mp * n;
    if t == 0 {
        if owner == me {
            // This PE's tile: wait for every other PE's part of it.
            for d in 1..np {
                let src = (me + d) % np;
                signal_wait_until(&arrive[src * per_owner + lt], Cmp::Ge, epoch);
            }
            // Acquire, at system scope: the parts were written by other GPUs.
            threadfence_system();
        } else if epoch > 1 {
            // The owner's acknowledgement that it read this slot in the previous call.
            signal_wait_until(&ack[owner * per_owner + lt], Cmp::Ge, epoch - 1);
        }
    }
    sync_threads();

    // 16-byte vectors of 8 elements, consecutive threads along a row: whole 128-byte lines.
    let vpr = bw / 8;
    let units = 128 * vpr;
    // A `bf16` vector to fill: every lane is overwritten before it is stored.
    let blank = load_vec16(&smem[0]);
    // The owner's staging buffer (this PE's own for its own tiles, where it is not written) and
    // this PE's slot there: (me - owner - 1) mod P.
    let dst = staging.peer(owner as i32);
    let slot0 = ((me + np - owner - 1) % np) * part;
    let mut u = t;
    while u < units {
        let r = u / vpr;
        let c = (u % vpr) * 8;
        let mut x0 = load_vec16(&stile[idx2(r, c, ld)]);
        let mut x1 = load_vec16(&stile[idx2(r, c + 4, ld)]);
        let gi = (lrow0 + r) * n + col0 + c;
        if owner == me {
            // The other PEs' parts, added in f32 (each was rounded to bf16 once, on its way).
            for d in 1..np {
                let y = load_vec16(&staging[(d - 1) * part + gi]);
                for j in 0..4 {
                    x0 = vec16_set(x0, j, vec16_get(x0, j) + vec16_get(y, j) as f32);
                    x1 = vec16_set(x1, j, vec16_get(x1, j) + vec16_get(y, j + 4) as f32);
                }
            }
        }
        let mut v = blank;
        for j in 0..4 {
            v = vec16_set(v, j, vec16_get(x0, j) as bf16);
            v = vec16_set(v, j + 4, vec16_get(x1, j) as bf16);
        }
        if owner == me {
            store_vec16(&mut out[gi], v);
        } else {
            store_vec16(&mut dst[slot0 + gi], v);
        }
        u += 384;
    }
    if owner == me {
        // Release the slots: this thread's reads are done before the block's acknowledgement
        // lets another GPU overwrite them.
        threadfence_system();
        sync_threads();
        if t == 0 {
            for d in 1..np {
                let src = (me + d) % np;
                signal_op(
                    &mut ack[me * per_owner + lt],
                    epoch,
                    SignalOp::Set,
                    src as i32,
                );
            }
        }
    } else {
        // Release: this thread's NVLink stores before the block's signal.
        threadfence_system();
        sync_threads();
        if t == 0 {
            signal_op(
                &mut arrive[me * per_owner + lt],
                epoch,
                SignalOp::Set,
                owner as i32,
            );
        }
    }
}

/// Shared memory per block: the ring and its mbarriers, or the `f32` tile that reuses it in the
/// epilogue, whichever is larger.
pub fn shared_bytes(stages: u32, bn: usize) -> u32 {
    let ring = stages as usize * ((BM + bn) * BK * 2 + 16);
    ring.max(BM * (bn + PAD) * 4) as u32
}

/// Why `(m, n, k_local)` cannot run on `pes` PEs, if it cannot: each PE's M / P rows must be
/// whole 128-row tiles, N whole 128-wide tiles and the local K whole 64-wide steps.
pub fn shape_error(m: usize, n: usize, k_local: usize, pes: usize) -> Option<String> {
    let mut bad = Vec::new();
    if m == 0 || !m.is_multiple_of(BM * pes) {
        bad.push(format!(
            "M = {m} is not a positive multiple of {BM} x {pes} PEs (each PE's M / P rows must be whole {BM}-row tiles)"
        ));
    }
    for (name, v, t) in [("N", n, 128), ("K / P", k_local, BK)] {
        if v == 0 || v % t != 0 {
            bad.push(format!("{name} = {v} is not a positive multiple of {t}"));
        }
    }
    (!bad.is_empty()).then(|| format!("gemm_rs_sm90: {}", bad.join("; ")))
}

/// The tile width: 256 where N divides and that gives at least one tile per SM, else 128.
pub fn tile_n(m: usize, n: usize, sms: usize) -> usize {
    if !n.is_multiple_of(BN) || (m / BM) * (n / BN) < sms {
        128
    } else {
        BN
    }
}

/// Symmetric bytes a [`GemmRs`] of this shape takes on each PE: the staging slots (`P - 1`
/// parts of M / P x N `bf16`) and two signal words a tile.
pub fn heap_bytes(m: usize, n: usize, pes: usize) -> usize {
    let tiles = (m / BM) * (n / 128);
    (pes - 1).max(1) * (m / pes) * n * 2 + 2 * tiles * 8
}

/// One GEMM + reduce-scatter shape and its symmetric buffers, reused call after call: the
/// staging slots where other PEs' partial tiles land, the per-tile signals and the call counter
/// (the epoch the signals carry).
pub struct GemmRs {
    m: usize,
    n: usize,
    k: usize,
    bn: usize,
    staging: SymTensor<bf16>,
    arrive: SymTensor<u64>,
    ack: SymTensor<u64>,
    epoch: u64,
}

/// An `Err` from this example, naming it.
fn refuse<T>(reason: String) -> pgas::Result<T> {
    Err(pgas::Error::Launch {
        kernel: "gemm_rs_sm90".into(),
        reason,
    })
}

impl GemmRs {
    /// Checks the shape on every PE and allocates the buffers. Collective: every PE calls it with
    /// its own `(m, n, k_local)`; a shape that does not divide, shapes that differ between PEs,
    /// or a symmetric heap too small are the same `Err` on every PE, before anything is
    /// allocated or launched. `bn` picks the tile width (128 or 256; `None`: [`tile_n`]).
    pub fn new(
        pgas: &Pgas,
        (m, n, k_local): (usize, usize, usize),
        bn: Option<usize>,
    ) -> pgas::Result<Self> {
        let pes = pgas.n_pes();
        let sms = pgas.sm_count()?;
        let bn = bn.unwrap_or_else(|| tile_n(m / pes, n, sms));
        // The same shape on every PE first: then the checks below decide alike on every PE.
        pgas::ops::agree(
            pgas,
            "gemm_rs_sm90",
            &[
                ("M", m as u64),
                ("N", n as u64),
                ("K / P", k_local as u64),
                ("tile width", bn as u64),
                ("symmetric heap bytes", pgas.heap_size() as u64),
            ],
        )?;
        if let Some(why) = shape_error(m, n, k_local, pes) {
            return refuse(why);
        }
        if (bn != 128 && bn != BN) || n % bn != 0 {
            return refuse(format!("tile width {bn}: 128 or 256, dividing N = {n}"));
        }
        let need = heap_bytes(m, n, pes);
        if need > pgas.heap_size() {
            return refuse(format!(
                "the staging buffers need {need} bytes of symmetric heap per PE, the heap has {}. \
                 Fix: a larger heap (pgas::builder().heap_size(..) or NVSHMEM_SYMMETRIC_SIZE)",
                pgas.heap_size()
            ));
        }
        let tiles = (m / BM) * (n / bn);
        let staging = pgas.alloc::<bf16>((pes - 1).max(1) * (m / pes) * n)?;
        let arrive = pgas.alloc::<u64>(tiles)?;
        let ack = pgas.alloc::<u64>(tiles)?;
        // Every PE must reach every other by NVLink stores; agreed, so all refuse together.
        let unreachable =
            (0..pes).find(|&pe| !matches!(pgas.peer_reachable(&staging, pe), Ok(true)));
        pgas::ops::agree(
            pgas,
            "gemm_rs_sm90",
            &[(
                "every peer reachable by NVLink stores",
                unreachable.is_none() as u64,
            )],
        )?;
        if let Some(pe) = unreachable {
            return refuse(format!(
                "PE {pe} is not reachable by NVLink loads and stores from PE {}: the kernel \
                 stores its partial tiles straight into the owner's memory",
                pgas.my_pe()
            ));
        }
        Ok(GemmRs {
            m,
            n,
            k: k_local,
            bn,
            staging,
            arrive,
            ack,
            epoch: 0,
        })
    }

    /// `out` (M / P x N) = this PE's rows of `sum over PEs of A Btᵀ`, with `a` (M x K / P) and
    /// `bt` (N x K / P) this PE's slices; on the pgas stream. Collective: every PE calls it, in
    /// the same order as its other `run`s. Buffers of the wrong size are refused before launching.
    pub fn run(
        &mut self,
        pgas: &Pgas,
        out: &mut CudaSlice<bf16>,
        a: &CudaSlice<bf16>,
        bt: &CudaSlice<bf16>,
        checked: bool,
    ) -> pgas::Result<()> {
        let (m, n, k, bn) = (self.m, self.n, self.k, self.bn);
        let pes = pgas.n_pes();
        if a.len() != m * k || bt.len() != n * k || out.len() != m / pes * n {
            return refuse(format!(
                "buffer sizes {} / {} / {} do not match A {m} x {k}, Bt {n} x {k}, out {} x {n}",
                a.len(),
                bt.len(),
                out.len(),
                m / pes
            ));
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
        let cfg = LaunchConfig::blocks(blocks, THREADS).with_shared_mem(shared_bytes(STAGES, bn));
        self.epoch += 1;
        let (epoch, bn) = (self.epoch, bn as u32);
        let (st, ar, ak) = (&mut self.staging, &mut self.arrive, &mut self.ack);
        if checked {
            gemm_rs_sm90::launch(
                pgas, cfg, out, st, ar, ak, &a_map, &b_map, m, n, k, epoch, STAGES, bn,
            )
        } else {
            // SAFETY: the shape is whole tiles on every PE (agreed in `new`), every buffer has
            // its matrix's size, and the staging and signal buffers were sized for this shape.
            unsafe {
                gemm_rs_sm90::launch_unchecked(
                    pgas, cfg, out, st, ar, ak, &a_map, &b_map, m, n, k, epoch, STAGES, bn,
                )
            }
        }
    }
}

/// A reproducible value in [-1, 1), rounded to bf16.
pub fn value(i: usize, salt: u64) -> bf16 {
    let mut x = (i as u64 ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_add(salt);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    bf16::from_f32((x >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
}

/// PE `pe`'s inputs of call `call`: `A_pe` (m x k) and `Bt_pe` (n x k).
pub fn inputs(pe: usize, call: u64, (m, n, k): (usize, usize, usize)) -> (Vec<bf16>, Vec<bf16>) {
    let salt = 1000 * call + 2 * pe as u64;
    (
        (0..m * k).map(|i| value(i, salt + 1)).collect(),
        (0..n * k).map(|i| value(i, salt + 2)).collect(),
    )
}

/// Element (`row`, `col`) of `sum over PEs of A_pe Bt_peᵀ` on the host, in f64.
pub fn host_sum(all: &[(Vec<bf16>, Vec<bf16>)], k: usize, row: usize, col: usize) -> f64 {
    all.iter()
        .map(|(a, bt)| {
            (0..k)
                .map(|x| a[row * k + x].to_f64() * bt[col * k + x].to_f64())
                .sum::<f64>()
        })
        .sum()
}

/// The worst error of `got` (this PE's rows) at `points` relative to the tolerance (bf16
/// rounding of the output and of each partial sum on its way; > 1 fails), and where.
pub fn compare(
    got: &[bf16],
    all: &[(Vec<bf16>, Vec<bf16>)],
    (me, mp, n, k): (usize, usize, usize, usize),
    points: impl Iterator<Item = (usize, usize)>,
) -> (f64, usize, usize, f64, f64) {
    let mut worst = (0.0, 0, 0, 0.0, 0.0);
    let scale = (k as f64).sqrt() * all.len() as f64;
    for (r, col) in points {
        let want = host_sum(all, k, me * mp + r, col);
        let g = got[r * n + col].to_f64();
        let err = (g - want).abs() / (want.abs() / 64.0 + scale / 256.0 + 1e-2);
        if err.is_nan() || err > worst.0 {
            worst = (err, me * mp + r, col, g, want);
        }
    }
    worst
}

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let me = pgas.my_pe();
    let pes = pgas.n_pes();
    let stream = pgas.stream().clone();
    let major = pgas
        .cuda()
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    if major != 9 {
        println!(
            "PE {me}: skipped: needs compute capability 9.0 (sm_90a), this GPU is {major}.x, ok"
        );
        return Ok(());
    }
    let fail = |what: String| -> ! {
        eprintln!("PE {me}: {what}");
        std::process::exit(1)
    };
    let t = std::time::Instant::now();
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
            spec: &gemm_rs_sm90::SPEC,
            variant,
            comptime,
        }),
    )?;
    let compile_s = t.elapsed().as_secs_f64();

    // Bad input: an Err on every PE, before anything launches.
    match GemmRs::new(&pgas, (100 * pes, 512, 256), None) {
        Err(e) if e.to_string().contains("is not a positive multiple of 128") => {}
        other => fail(format!(
            "M = {} was not refused: {:?}",
            100 * pes,
            other.err()
        )),
    }
    let k_here = if me == 0 { 256 } else { 320 };
    match GemmRs::new(&pgas, (256 * pes, 512, k_here), None) {
        Err(e) if pes > 1 && e.to_string().contains("K / P: PE 0 256, PE 1 320") => {}
        Ok(_) if pes == 1 => {}
        other => fail(format!(
            "differing K / P was not refused: {:?}",
            other.err()
        )),
    }
    let huge = (1 << 20) * pes;
    match GemmRs::new(&pgas, (huge, 65536, 64), None) {
        Err(e) if e.to_string().contains("symmetric heap") => {}
        other => fail(format!(
            "a staging buffer over the heap was not refused: {:?}",
            other.err()
        )),
    }

    // Correctness: every PE's rows against the host, three calls in a row on one GemmRs (the
    // epochs; new inputs each call), with both tile widths; K / P = 320 wraps the 4-slot ring.
    for ((mp, n, k), bn) in [((256, 512, 320), 256), ((384, 256, 128), 128)] {
        let m = mp * pes;
        let mut op = GemmRs::new(&pgas, (m, n, k), Some(bn))?;
        let mut out = stream.alloc_zeros::<bf16>(mp * n)?;
        for call in 0..3 {
            let all: Vec<_> = (0..pes).map(|pe| inputs(pe, call, (m, n, k))).collect();
            let a = stream.clone_htod(&all[me].0)?;
            let bt = stream.clone_htod(&all[me].1)?;
            op.run(&pgas, &mut out, &a, &bt, true)?;
            let got = stream.clone_dtoh(&out)?;
            let every = (0..mp).flat_map(|r| (0..n).map(move |c| (r, c)));
            let (err, row, col, g, want) = compare(&got, &all, (me, mp, n, k), every);
            if err.is_nan() || err > 1.0 {
                fail(format!(
                    "row {row}, column {col} = {g} but the host says {want} ({m} x {n} x {k} a PE, {bn}-wide tiles, call {call})"
                ));
            }
        }
    }

    // Speed: 8192 x 8192 x 8192, K split over the PEs, the plain variant, spot-checked.
    let (m, n, k) = (8192, 8192, 8192 / pes);
    let all: Vec<_> = (0..pes).map(|pe| inputs(pe, 7, (m, n, k))).collect();
    let a = stream.clone_htod(&all[me].0)?;
    let bt = stream.clone_htod(&all[me].1)?;
    let mut out = stream.alloc_zeros::<bf16>(m / pes * n)?;
    let mut op = GemmRs::new(&pgas, (m, n, k), None)?;
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut us = Vec::new();
    for rep in 0..12 {
        pgas.barrier_all()?;
        let start = stream.record_event(flags)?;
        op.run(&pgas, &mut out, &a, &bt, false)?;
        let end = stream.record_event(flags)?;
        end.synchronize()?;
        if rep >= 2 {
            us.push(start.elapsed_ms(&end)? as f64 * 1e3);
        }
    }
    us.sort_by(f64::total_cmp);
    let median = us[us.len() / 2];
    let got = stream.clone_dtoh(&out)?;
    let points = (0..256).map(|i| ((i * 977 + 13) % (m / pes), (i * 613 + 101) % n));
    let (err, row, col, g, want) = compare(&got, &all, (me, m / pes, n, k), points);
    if err.is_nan() || err > 1.0 {
        fail(format!(
            "row {row}, column {col} = {g} but the host says {want} (8192^3, plain)"
        ));
    }
    println!(
        "PE {me}/{pes}: GEMM + reduce-scatter matches the host (256 and 384 rows a PE, both tile widths, 3 calls each, \
         every element; 8192^3 at 256 points); 8192 x 8192 x 8192 (K / P = {k}) in {median:.0} us \
         (median of 10, plain); bad shapes refused on every PE; JIT compile {compile_s:.1} s, ok"
    );
    Ok(())
}
