//! The checked variant's traps, one per process (a trap kills the CUDA context):
//! `gpu_suite --expect-trap oob` indexes one past the end of a buffer, `--expect-trap local-oob`
//! one past the end of a local array (the report names the array), `--expect-trap bad-pe`
//! targets PE `n_pes()`, `--expect-trap partial-warp` runs a tensor-core kernel with a block
//! that is not whole warps (both variants trap at entry, naming the kernel's `fn` line), and
//! `--expect-trap divergent-mma` reaches `mma_sync` from half a warp, `--expect-trap
//! cluster-rank` arrives on the mbarrier of a block outside its cluster of 2 and `--expect-trap
//! multicast-mask` multicasts to one (sm_90; elsewhere they say they are skipped), `--expect-trap
//! ll-scratch` gives `team_all_reduce_block` a scratch too short. The checked launch must print the Rust file and line of the offending
//! statement before trapping; scripts/gpu-suite.sh checks that the output names
//! `tests/gpu_suite/traps.rs:LINE` with the line announced here. The announcement spells the
//! location differently (`file ..., line N`) so that it can never satisfy that check itself.

use crate::util;
use pgas::prelude::*;
use std::process::ExitCode;

#[pgas_kernel]
fn trap_oob(x: &mut SymTensor<u32>, i: usize) {
    x[i] = 7;
}
/// The line of `x[i] = 7` above.
const OOB_LINE: u32 = line!() - 3;

#[pgas_kernel]
fn trap_bad_pe(x: &mut SymTensor<u32>, pe: i32) {
    p(&mut x[0], 7, pe);
}
/// The line of `p(...)` above.
const BAD_PE_LINE: u32 = line!() - 3;

#[pgas_kernel]
fn trap_partial_warp(c: &mut CudaSlice<f32>) {
    let mut acc = frag_c::<f32, 1>();
    let a = frag_a::<bf16, 1>();
    let b = frag_b::<bf16, 1>();
    mma_sync(&mut acc[0], &a[0], &b[0]);
    c[thread_idx_x() as usize] = acc[0][0];
}
/// The line of `fn trap_partial_warp` above.
const PARTIAL_WARP_LINE: u32 = line!() - 8;

#[pgas_kernel]
fn trap_divergent_mma(c: &mut CudaSlice<f32>) {
    let mut acc = frag_c::<f32, 1>();
    let a = frag_a::<bf16, 1>();
    let b = frag_b::<bf16, 1>();
    if lane_id() < 16 {
        mma_sync(&mut acc[0], &a[0], &b[0]);
    }
    c[thread_idx_x() as usize] = acc[0][0];
}
/// The line of `mma_sync(...)` above.
const DIVERGENT_LINE: u32 = line!() - 5;

#[pgas_kernel]
fn trap_cluster_rank(c: &mut CudaSlice<f32>) {
    let bars = shared_array::<u64, 1>();
    if thread_idx_x() == 0 {
        mbarrier_init(&mut bars[0], 1);
    }
    cluster_sync();
    if thread_idx_x() == 0 {
        mbarrier_arrive_cluster(&mut bars[0], cluster_nctarank());
    }
    cluster_sync();
    c[thread_idx_x() as usize] = 1.0;
}
/// The line of `mbarrier_arrive_cluster(...)` above.
const CLUSTER_RANK_LINE: u32 = line!() - 6;

#[pgas_kernel]
fn trap_multicast_mask(c: &mut CudaSlice<f32>, map: &TensorMap<f32>) {
    let smem = dyn_shared::<f32>();
    let bars = dyn_shared::<u64>();
    if thread_idx_x() == 0 {
        mbarrier_init(&mut bars[512], 1);
    }
    cluster_sync();
    if thread_idx_x() == 0 {
        mbarrier_arrive_expect_tx(&mut bars[512], 4096);
        tma_load_2d_multicast(&mut smem[0], map, &mut bars[512], 0, 0, 4);
    }
    cluster_sync();
    c[thread_idx_x() as usize] = smem[0];
}
/// The line of `tma_load_2d_multicast(...)` above (a mask naming block 2 of a cluster of 2).
const MULTICAST_MASK_LINE: u32 = line!() - 6;

#[pgas_kernel]
fn trap_ll_scratch(t: Team, a: &mut SymTensor<u32>, b: &SymTensor<u32>, s: &mut SymTensor<u64>) {
    team_all_reduce_block(t, &mut a[0..16], &b[0..16], &mut s[0], ReduceOp::Sum);
}
/// The line of `team_all_reduce_block(...)` above (16 elements need 34 words on one PE; the
/// scratch has 8).
const LL_SCRATCH_LINE: u32 = line!() - 4;

#[pgas_kernel]
fn trap_local_oob(x: &mut SymTensor<u32>, i: usize) {
    let mut acc = [0u32; 4];
    acc[i] = 7;
    x[0] = acc[0];
}
/// The line of `acc[i] = 7` above (a local array of 4, index 4).
const LOCAL_OOB_LINE: u32 = line!() - 4;

pub fn run(which: &str) -> ExitCode {
    let line = match which {
        "oob" => OOB_LINE,
        "local-oob" => LOCAL_OOB_LINE,
        "bad-pe" => BAD_PE_LINE,
        "partial-warp" => PARTIAL_WARP_LINE,
        "divergent-mma" => DIVERGENT_LINE,
        "cluster-rank" => CLUSTER_RANK_LINE,
        "multicast-mask" => MULTICAST_MASK_LINE,
        "ll-scratch" => LL_SCRATCH_LINE,
        other => {
            println!("gpu_suite: --expect-trap takes `oob`, `local-oob`, `bad-pe`, `partial-warp`, `divergent-mma`, `cluster-rank`, `multicast-mask` or `ll-scratch`, not `{other}`");
            return ExitCode::from(2);
        }
    };
    println!(
        "expect-trap {which}: the report must name file {}, line {line}",
        file!()
    );
    // Nothing that touches NVSHMEM may be dropped after the trap (freeing symmetric memory or
    // finalizing on a dead context can abort the process), so every value lives until `exit`.
    let pgas = match pgas::init() {
        Ok(p) => p,
        Err(e) => {
            println!("expect-trap {which}: FAIL: pgas::init failed: {e}");
            std::process::exit(1)
        }
    };
    let mut x = match pgas
        .alloc::<u32>(16)
        .and_then(|mut x| x.fill(0).map(|()| x))
    {
        Ok(x) => x,
        Err(e) => {
            println!("expect-trap {which}: FAIL: allocation failed: {e}");
            std::process::exit(1)
        }
    };
    let outcome = (|| -> Result<(), Box<dyn std::error::Error>> {
        match which {
            "oob" => trap_oob::launch(&pgas, LaunchConfig::blocks(1, 1), &mut x, 16)?,
            "local-oob" => trap_local_oob::launch(&pgas, LaunchConfig::blocks(1, 1), &mut x, 4)?,
            "bad-pe" => {
                let bad = util::npes(&pgas) as i32;
                trap_bad_pe::launch(&pgas, LaunchConfig::blocks(1, 1), &mut x, bad)?;
            }
            "ll-scratch" => {
                // Leaked: nothing may be dropped after the trap.
                let b = Box::leak(Box::new(pgas.alloc::<u32>(16)?));
                let scratch = Box::leak(Box::new(pgas.alloc::<u64>(8)?));
                let cfg = LaunchConfig::blocks(1, 32);
                trap_ll_scratch::launch(&pgas, cfg, Team::WORLD, &mut x, b, scratch)?;
            }
            _ => {
                // Leaked: nothing may be dropped after the trap.
                let c = Box::leak(Box::new(pgas.stream().alloc_zeros::<f32>(64)?));
                if which == "partial-warp" {
                    // The plain variant: the guard is there without the checks too.
                    // SAFETY: 48 threads index c (64 elements) by thread index.
                    unsafe {
                        trap_partial_warp::launch_unchecked(&pgas, LaunchConfig::blocks(1, 48), c)?
                    };
                } else if which == "cluster-rank" || which == "multicast-mask" {
                    let major = crate::util::compute_major(&pgas)?;
                    if major < 9 {
                        println!("expect-trap {which}: skipped: clusters need sm_90, this GPU is {major}.x");
                        std::process::exit(0);
                    }
                    let cfg = LaunchConfig::blocks(2, 32).with_cluster((2, 1, 1));
                    if which == "cluster-rank" {
                        trap_cluster_rank::launch(&pgas, cfg, c)?;
                    } else {
                        let t = Box::leak(Box::new(pgas.stream().alloc_zeros::<f32>(1024)?));
                        let tile = Tile2d {
                            rows: 32,
                            cols: 32,
                            box_rows: 32,
                            box_cols: 32,
                            swizzle: Swizzle::None,
                        };
                        let map = TensorMap::tiled_2d(pgas.stream(), t, tile)?;
                        let cfg = cfg.with_shared_mem(4096 + 8);
                        trap_multicast_mask::launch(&pgas, cfg, c, &map)?;
                    }
                } else {
                    trap_divergent_mma::launch(&pgas, LaunchConfig::blocks(1, 32), c)?;
                }
            }
        }
        pgas.stream().synchronize()?;
        Ok(())
    })();
    // Exit at once, without destructors: after a trap the context is dead.
    match outcome {
        Err(e) => {
            println!("expect-trap {which}: the launch failed as expected: {e}");
            std::process::exit(0)
        }
        Ok(()) => {
            println!("expect-trap {which}: FAIL: the checked kernel completed without trapping");
            std::process::exit(1)
        }
    }
}
