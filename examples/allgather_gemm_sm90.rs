//! All-gather fused with a bf16 GEMM on Hopper, written in pgas: the column-parallel linear layer
//! of tensor parallelism (PyTorch async-TP's `fused_all_gather_matmul`). Every PE holds a row
//! shard `A_p` (M/P x K) and `Bt` (N x K, B stored transposed, like a linear layer's weight); every
//! PE computes all of `C = allgather_rows(A) · Btᵀ` (M x N), all bf16, row-major, accumulated in
//! f32. No all-gather runs before the GEMM: one kernel does both.
//!
//! - **Communication blocks** (the grid's first `comm` blocks, so the block scheduler starts them
//!   first): each pushes its piece of every chunk of this PE's shard into the gathered buffer of
//!   each peer (`put_signal_block`, stores over NVLink), adding 1 to the chunk's signal there. The
//!   peers are served in the order they consume this shard (PE `me - 1` first). Before writing
//!   into a peer, a block waits for that peer's `ready` signal of this call (its epoch): the peer
//!   sends it when its kernel starts, i.e. after its previous call's GEMM, which read that buffer,
//!   has finished.
//! - **GEMM blocks**: the TMA + `wgmma` GEMM of `examples/gemm_bf16_sm90.rs` (128 x 256 tiles,
//!   a feeding warpgroup and two multiplying ones), with the tile rows taken in the order
//!   `me, me + 1, ...`: the local shard's tiles start at once (read from the shard itself), and
//!   the feeder of a tile of peer `q`'s rows first waits until every piece of its chunk has
//!   arrived (`signal_wait_until(arrived[q][chunk] >= epoch * comm)`), then loads it by TMA from
//!   the gathered buffer.
//!
//! The signals only grow (`ready` is set to the call's epoch, `arrived` counts pieces), so
//! repeated calls need no reset. A plan ([`Plan::new`], collective) allocates the symmetric
//! buffers and checks on every PE that all PEs agree on the shapes, before anything launches.
//!
//! ```text
//! pgas-run -n 2 -- target/release/examples/allgather_gemm_sm90
//! ```
//!
//! `benches/ag_gemm.rs` times it against cuBLAS + NCCL and `pgas::ops::AllGatherMatmul`.

use pgas::cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use pgas::kernel::Variant;
use pgas::launch::Prewarm;
use pgas::prelude::*;

/// Rows and columns of `C` per GEMM block, and the K step.
pub const BM: usize = 128;
pub const BN: usize = 256;
pub const BK: usize = 64;
/// Threads per block: a feeding warpgroup and two multiplying ones (the communication blocks
/// use all of them for their copies).
pub const THREADS: u32 = 384;
/// Slots of the shared-memory ring.
pub const STAGES: u32 = 4;
/// Communication blocks (SMs that push this PE's shard while the others multiply).
pub const COMM_BLOCKS: usize = 8;

#[pgas_kernel(max_threads = 384)]
pub fn allgather_gemm_sm90(
    c: &mut CudaSlice<bf16>,
    shard: &CudaSlice<bf16>,
    gathered: &mut SymTensor<bf16>,
    ready: &mut SymTensor<u64>,
    arrived: &mut SymTensor<u64>,
    shard_map: &TensorMap<bf16>,
    gathered_map: &TensorMap<bf16>,
    b_map: &TensorMap<bf16>,
    mp: usize,
    n: usize,
    k: usize,
    comm: usize,
    chunk_rows: usize,
    epoch: u64,
    #[comptime] stages: u32,
    #[comptime] bn: u32,
) {
    let me = my_pe() as usize;
    let np = n_pes() as usize;
    let pid = block_idx_x() as usize;
    let t = thread_idx_x() as usize;
    let chunks = mp / chunk_rows;
    if pid < comm {
        // Tell every peer that this PE's previous GEMM is over: they may overwrite its
        // gathered buffer.
        if pid == 0 && t == 0 {
            for j in 1..np {
                signal_op(&mut ready[me], epoch, SignalOp::Set, ((me + j) % np) as i32);
            }
        }
        let shard_len = mp * k;
        let piece = chunk_rows * k / comm;
        for j in 1..np {
            let peer = (me + np - j) % np;
            if t == 0 {
                signal_wait_until(&ready[peer], Cmp::Ge, epoch);
            }
            sync_threads();
            for ch in 0..chunks {
                let src0 = (ch * comm + pid) * piece;
                let dst0 = me * shard_len + src0;
                put_signal_block(
                    &mut gathered[dst0..dst0 + piece],
                    &shard[src0..src0 + piece],
                    &mut arrived[me * chunks + ch],
                    1,
                    SignalOp::Add,
                    peer as i32,
                );
            }
        }
    } else {
        // The ring of examples/gemm_bf16_sm90.rs: slot s holds A's 128 x 64 tile, then Bt's
        // bn x 64 tile; the `full` and `empty` mbarriers follow the ring.
        let smem = dyn_shared::<bf16>();
        let bars = dyn_shared::<u64>();
        let s = stages as usize;
        let bw = bn as usize;
        let slot = 8192 + bw * 64;
        let full0 = s * slot / 4;
        let empty0 = full0 + s;

        // Which tile: blocks go down 8 tile rows before moving right (L2 reuse of A and Bt),
        // over tile rows counted from this PE's shard (`me`, then `me + 1`, ...).
        let m = mp * np;
        let tiles_m = m / 128;
        let tiles_n = n / bw;
        let tid = pid - comm;
        let group = 8 * tiles_n;
        let first_m = (tid / group) * 8;
        let group_m = min(tiles_m - first_m, 8);
        let per_shard = mp / 128;
        let tile_row = (first_m + (tid % group) % group_m + me * per_shard) % tiles_m;
        let row0 = tile_row * 128;
        let col0 = ((tid % group) / group_m) * bw;
        let owner = tile_row / per_shard;
        let local_row = row0 - owner * mp;

        let wg = t / 128;
        let ktiles = k / 64;

        if t == 0 {
            for i in 0..s {
                mbarrier_init(&mut bars[full0 + i], 1);
                mbarrier_init(&mut bars[empty0 + i], 8);
            }
        }
        sync_threads();

        if wg == 0 {
            if t == 0 {
                if owner != me {
                    // Every piece of this tile's chunk has arrived (the pieces' signals are
                    // delivered after their data). TMA reads global memory through L2, where
                    // the peers' stores landed, after this acquire in program order.
                    let ch = local_row / chunk_rows;
                    signal_wait_until(&arrived[owner * chunks + ch], Cmp::Ge, epoch * comm as u64);
                }
                for kt in 0..ktiles {
                    let st = kt % s;
                    if kt >= s {
                        mbarrier_wait(&bars[empty0 + st], ((kt / s + 1) % 2) as u32);
                    }
                    mbarrier_arrive_expect_tx(&mut bars[full0 + st], (slot * 2) as u32);
                    let k0 = (kt * 64) as i32;
                    if owner == me {
                        tma_load_2d(
                            &mut smem[st * slot],
                            shard_map,
                            &mut bars[full0 + st],
                            k0,
                            local_row as i32,
                        );
                    } else {
                        tma_load_2d(
                            &mut smem[st * slot],
                            gathered_map,
                            &mut bars[full0 + st],
                            k0,
                            row0 as i32,
                        );
                    }
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
}

/// Shared memory per block: the ring and its 2 mbarriers a slot.
pub fn shared_bytes(stages: u32, bn: usize) -> u32 {
    (stages as usize * ((BM + bn) * BK * 2 + 16)) as u32
}

/// Why a shard of `mp` rows, `n` and `k` on `n_pes` PEs cannot run, if it cannot: the kernel
/// has no edge handling.
pub fn shape_error(mp: usize, n: usize, k: usize, comm: usize) -> Option<String> {
    let mut bad: Vec<String> = [("M / P", mp, BM), ("N", n, 128), ("K", k, BK)]
        .iter()
        .filter(|(_, v, t)| *v == 0 || v % t != 0)
        .map(|(name, v, t)| format!("{name} = {v} is not a positive multiple of {t}"))
        .collect();
    if !(1..=64).contains(&comm) || !comm.is_power_of_two() {
        bad.push(format!(
            "{comm} communication blocks: 1 to 64, a power of two"
        ));
    }
    (!bad.is_empty()).then(|| {
        format!(
            "allgather_gemm_sm90 takes whole {BM} x 128 x {BK} tiles of each PE's shard: {}",
            bad.join(", ")
        )
    })
}

/// Rows per signalled chunk: 256 where the shard divides, else one tile row. Finer chunks let
/// the first remote tiles start sooner; each costs one signal per communication block.
pub fn chunk_rows(mp: usize) -> usize {
    if mp.is_multiple_of(256) {
        256
    } else {
        BM
    }
}

/// The symmetric buffers and signals of one shape, and the call count (the signals' epoch).
pub struct Plan {
    mp: usize,
    n: usize,
    k: usize,
    bn: usize,
    comm: usize,
    stages: u32,
    gathered: SymTensor<bf16>,
    ready: SymTensor<u64>,
    arrived: SymTensor<u64>,
    epoch: u64,
}

impl Plan {
    /// A plan for shards of `mp` rows, `n` and `k`, with `comm` communication blocks and a ring
    /// of `stages` slots. Collective: every PE checks its shape locally, then all PEs compare
    /// their arguments (`pgas::ops::agree`), then the symmetric buffers are allocated (a
    /// symmetric heap too small for M x K bf16 is `Error::HeapExhausted` on every PE); a bad or
    /// mismatched shape is an `Err` on every PE before anything launches.
    pub fn new(
        pgas: &Pgas,
        (mp, n, k): (usize, usize, usize),
        comm: usize,
        stages: u32,
    ) -> pgas::Result<Plan> {
        let np = pgas.n_pes();
        let comm = if np == 1 { 0 } else { comm };
        // Every PE agrees first, so a local error below is the same on every PE.
        pgas::ops::agree(
            pgas,
            "allgather_gemm_sm90 shapes",
            &[
                ("M / P", mp as u64),
                ("N", n as u64),
                ("K", k as u64),
                ("communication blocks", comm as u64),
                ("stages", stages as u64),
            ],
        )?;
        let refuse = |reason: String| pgas::Error::Launch {
            kernel: "allgather_gemm_sm90".into(),
            reason,
        };
        if let Some(why) = shape_error(mp, n, k, comm.max(1)) {
            return Err(refuse(why));
        }
        if !(2..=4).contains(&stages) {
            return Err(refuse(format!(
                "stages = {stages}: the ring needs 2 to 4 slots of 48 KiB"
            )));
        }
        let sms = pgas.sm_count()?;
        let m = mp * np;
        // 128-wide tiles where 256-wide ones leave SMs idle (skinny M), as the GEMM example.
        let bn = if !n.is_multiple_of(BN) || (m / BM) * (n / BN) < sms {
            128
        } else {
            BN
        };
        let chunks = mp / chunk_rows(mp);
        Ok(Plan {
            mp,
            n,
            k,
            bn,
            comm,
            stages,
            gathered: pgas.alloc::<bf16>(m * k)?,
            ready: pgas.alloc::<u64>(np)?,
            arrived: pgas.alloc::<u64>(np * chunks)?,
            epoch: 0,
        })
    }

    /// `C = allgather_rows(A) · Btᵀ` on the pgas stream: `shard` is this PE's M/P x K rows,
    /// `bt` N x K and `c` M x N. Collective (every PE calls it with its plan). `checked` picks
    /// the variant with bounds checks.
    pub fn run(
        &mut self,
        pgas: &Pgas,
        c: &mut CudaSlice<bf16>,
        shard: &CudaSlice<bf16>,
        bt: &CudaSlice<bf16>,
        checked: bool,
    ) -> pgas::Result<()> {
        let (mp, n, k) = (self.mp, self.n, self.k);
        let m = mp * pgas.n_pes();
        if shard.len() != mp * k || bt.len() != n * k || c.len() != m * n {
            return Err(pgas::Error::Launch {
                kernel: "allgather_gemm_sm90".into(),
                reason: format!(
                    "buffer sizes {} / {} / {} do not match the plan's {mp} x {k}, {n} x {k}, \
                     {m} x {n}",
                    shard.len(),
                    bt.len(),
                    c.len()
                ),
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
        let shard_map = TensorMap::tiled_2d(stream, shard, tile(mp, BM))?;
        // SAFETY: the gathered buffer lives as long as the plan; the kernel reads (TMA) only the
        // chunks whose signals say the peers' puts into them are complete, and no call writes
        // a chunk that the previous call may still read (the `ready` handshake).
        let gathered_map = unsafe {
            TensorMap::from_device_ptr(
                self.gathered.as_device_ptr(),
                self.gathered.len(),
                tile(m, BM),
            )?
        };
        let b_map = TensorMap::tiled_2d(stream, bt, tile(n, self.bn))?;
        let blocks = (self.comm + (m / BM) * (n / self.bn)) as u32;
        let cfg = LaunchConfig::blocks(blocks, THREADS)
            .with_shared_mem(shared_bytes(self.stages, self.bn));
        self.epoch += 1;
        let (comm, rows, epoch) = (self.comm, chunk_rows(mp), self.epoch);
        let (stages, bn) = (self.stages, self.bn as u32);
        let (g, r, a) = (&mut self.gathered, &mut self.ready, &mut self.arrived);
        if checked {
            allgather_gemm_sm90::launch(
                pgas,
                cfg,
                c,
                shard,
                g,
                r,
                a,
                &shard_map,
                &gathered_map,
                &b_map,
                mp,
                n,
                k,
                comm,
                rows,
                epoch,
                stages,
                bn,
            )
        } else {
            // SAFETY: the plan's shape is whole tiles and every buffer has exactly its matrix's
            // size (checked above), so every index the kernel forms is in bounds.
            unsafe {
                allgather_gemm_sm90::launch_unchecked(
                    pgas,
                    cfg,
                    c,
                    shard,
                    g,
                    r,
                    a,
                    &shard_map,
                    &gathered_map,
                    &b_map,
                    mp,
                    n,
                    k,
                    comm,
                    rows,
                    epoch,
                    stages,
                    bn,
                )
            }
        }
    }

    /// The kernel specializations this plan launches (for `pgas::launch::prewarm`).
    pub fn comptime(&self) -> [i128; 2] {
        [self.stages as i128, self.bn as i128]
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

/// Element `i` of the full A (M x K, all shards): every PE can build any PE's shard.
pub fn a_value(i: usize) -> bf16 {
    value(i, 11)
}

/// Element `i` of Bt (N x K).
pub fn bt_value(i: usize) -> bf16 {
    value(i, 12)
}

/// The worst error of `got` (M x N) against the host product at `points`, relative to the
/// tolerance (bf16 output rounding plus f32 order; > 1 fails), with where.
pub fn check(
    got: &[bf16],
    (n, k): (usize, usize),
    points: impl Iterator<Item = (usize, usize)>,
) -> (f64, usize, usize, f64, f64) {
    let mut worst = (0.0, 0, 0, 0.0, 0.0);
    for (row, col) in points {
        let want: f64 = (0..k)
            .map(|x| a_value(row * k + x).to_f64() * bt_value(col * k + x).to_f64())
            .sum();
        let g = got[row * n + col].to_f64();
        let r = (g - want).abs() / (want.abs() / 128.0 + 1e-2);
        if r.is_nan() || r > worst.0 {
            worst = (r, row, col, g, want);
        }
    }
    worst
}

/// This PE's shard and Bt on the device, for a shard of `mp` rows.
pub fn inputs(
    pgas: &Pgas,
    (mp, n, k): (usize, usize, usize),
) -> pgas::Result<(CudaSlice<bf16>, CudaSlice<bf16>)> {
    let me = pgas.my_pe();
    let shard: Vec<bf16> = (0..mp * k).map(|i| a_value(me * mp * k + i)).collect();
    let bt: Vec<bf16> = (0..n * k).map(bt_value).collect();
    let stream = pgas.stream();
    Ok((stream.clone_htod(&shard)?, stream.clone_htod(&bt)?))
}

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let (me, np) = (pgas.my_pe(), pgas.n_pes());
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

    // A shard that is not whole tiles is an Err on every PE, before anything launches.
    match Plan::new(&pgas, (100, 256, 256), COMM_BLOCKS, STAGES) {
        Err(e)
            if e.to_string()
                .contains("M / P = 100 is not a positive multiple of 128") => {}
        other => {
            eprintln!(
                "PE {me}: a shard of 100 rows was not refused as expected: {:?}",
                other.err()
            );
            std::process::exit(1);
        }
    }

    // Correctness: the checked variant against the host at every element, three calls in a row
    // on one plan (the epochs), K of 1024 so the ring wraps. Shapes this small take 128-wide
    // tiles (too few 256-wide ones for the SMs); the 256-wide path is the 8192^3 run below,
    // spot-checked.
    for (mp, n, k) in [(256, 512, 1024), (384, 256, 512)] {
        let (shard, bt) = inputs(&pgas, (mp, n, k))?;
        let mut plan = Plan::new(&pgas, (mp, n, k), COMM_BLOCKS, STAGES)?;
        let m = mp * np;
        for call in 0..3 {
            let mut c = stream.alloc_zeros::<bf16>(m * n)?;
            plan.run(&pgas, &mut c, &shard, &bt, true)?;
            let got = stream.clone_dtoh(&c)?;
            let all = (0..m).flat_map(|r| (0..n).map(move |col| (r, col)));
            let (ratio, row, col, g, want) = check(&got, (n, k), all);
            if ratio.is_nan() || ratio > 1.0 {
                eprintln!(
                    "PE {me}: C[{row}][{col}] = {g} but the host says {want} ({m} x {n} x {k}, \
                     call {call}, checked)"
                );
                std::process::exit(1);
            }
        }
    }

    // Speed: 8192 x 8192 x 8192 split over the PEs (a shard of 8192 / P rows), plain variant,
    // spot-checked.
    let (m, n, k) = (8192, 8192, 8192);
    let mp = m / np;
    let (shard, bt) = inputs(&pgas, (mp, n, k))?;
    let mut plan = Plan::new(&pgas, (mp, n, k), COMM_BLOCKS, STAGES)?;
    pgas::launch::prewarm(
        &pgas,
        &[Prewarm {
            spec: &allgather_gemm_sm90::SPEC,
            variant: Variant::Plain,
            comptime: &plan.comptime(),
        }],
    )?;
    let mut c = stream.alloc_zeros::<bf16>(m * n)?;
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut ms = Vec::new();
    for rep in 0..12 {
        let start = stream.record_event(flags)?;
        plan.run(&pgas, &mut c, &shard, &bt, false)?;
        let end = stream.record_event(flags)?;
        end.synchronize()?;
        if rep >= 2 {
            ms.push(start.elapsed_ms(&end)? as f64);
        }
    }
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    let got = stream.clone_dtoh(&c)?;
    let points = (0..256).map(|i| ((i * 977 + 13) % m, (i * 613 + 101) % n));
    let (ratio, row, col, g, want) = check(&got, (n, k), points);
    if ratio.is_nan() || ratio > 1.0 {
        eprintln!("PE {me}: C[{row}][{col}] = {g} but the host says {want} (8192^3, plain)");
        std::process::exit(1);
    }
    let tflops = 2.0 * (m * n * k) as f64 / (median * 1e-3) / 1e12;
    println!(
        "PE {me}/{np}: all-gather + GEMM (put_signal_block + TMA/wgmma in one kernel) matches \
         the host (every element at two shapes, three calls each; 8192^3 at 256 points); 8192^3 \
         in {median:.3} ms = {tflops:.1} TFLOP/s per PE (median of 10, plain), ok"
    );
    Ok(())
}
