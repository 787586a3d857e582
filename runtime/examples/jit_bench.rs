//! JIT figures on one GPU (issue 4, item 7): cold compile of a typical NVSHMEM kernel, disk-cache
//! load, in-memory hit, and the host cost of one launch against a bare `cuLaunchKernel` of the
//! same function. NVSHMEM is not initialized (`launch::Bare`), so the kernels here only include
//! NVSHMEM's headers.
//!
//! `cargo run --release -p pgas-runtime --example jit_bench`

use std::time::{Duration, Instant};

use cudarc::driver::result;
use pgas_runtime::launch::{Bare, KernelArgs, LaunchConfig, RawKernel};

/// A typical kernel: a put-with-signal to the next PE and a wait.
const TYPICAL: &str = r#"extern "C" __global__ void ring(float* dst, unsigned long long n, const float* src,
                                unsigned long long m, unsigned long long* sig) {
    int peer = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
    nvshmemx_float_put_signal_nbi_block(dst, src, n, sig, 1, NVSHMEM_SIGNAL_SET, peer);
    nvshmem_signal_wait_until(sig, NVSHMEM_CMP_EQ, 1);
}"#;

const EMPTY: &str = r#"extern "C" __global__ void empty(float* x, unsigned long long n, int v) {}"#;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cache = std::env::temp_dir().join(format!("pgas-bench-cache-{}", std::process::id()));
    std::env::set_var("PGAS_CACHE_DIR", &cache);

    // Toolchain discovery and NVRTC loading are once per process; do them before timing.
    let warm = Bare::new(0)?;
    warm.prewarm_raw(&RawKernel::from_source(EMPTY, "empty"))?;

    let mut cold = Vec::new();
    let mut disk = Vec::new();
    for i in 0..3 {
        // A distinct source each round, so the compile is really cold.
        let src = format!("{TYPICAL}\n// round {i}\n");
        let dev = Bare::new(0)?;
        let t = Instant::now();
        dev.prewarm_raw(&RawKernel::from_source(&src, "ring"))?;
        cold.push(t.elapsed());
        let dev = Bare::new(0)?;
        let t = Instant::now();
        dev.prewarm_raw(&RawKernel::from_source(&src, "ring"))?;
        disk.push(t.elapsed());
    }
    println!(
        "cold compile (typical NVSHMEM kernel): median {:?} of {cold:?}",
        median(cold.clone())
    );
    println!(
        "disk-cache load (new JIT state):       median {:?} of {disk:?}",
        median(disk.clone())
    );

    let dev = Bare::new(0)?;
    let stream = dev.stream().clone();
    let k = RawKernel::from_source(EMPTY, "empty");
    dev.prewarm_raw(&k)?;
    let f = dev.function_handle(&k)?;
    let mut x = stream.alloc_zeros::<f32>(1024)?;
    let cfg = LaunchConfig::blocks(1, 32);
    const BATCH: usize = 500;
    const ROUNDS: usize = 200;

    // pgas launch: argument packing (with cudarc's stream-ordering guard), cache hit, launch.
    let mut ours = Vec::new();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        for _ in 0..BATCH {
            let mut args = KernelArgs::new();
            args.push_local_mut(&mut x).push_scalar(7i32);
            // SAFETY: the arguments (pointer and length of `x`, an int) match `empty`'s
            // parameters, and `empty` touches no memory.
            unsafe { dev.launch_raw(&k, cfg, &mut args)? };
        }
        ours.push(t.elapsed() / BATCH as u32);
        stream.synchronize()?;
    }

    // Bare cuLaunchKernel of the same function with prepared parameters.
    let (ptr, _guard) = cudarc::driver::DevicePtr::device_ptr(&x, &stream);
    let (mut p0, mut p1, mut p2) = (ptr, 1024u64, 7i32);
    let mut params = [
        (&mut p0 as *mut u64).cast(),
        (&mut p1 as *mut u64).cast(),
        (&mut p2 as *mut i32).cast(),
    ];
    let mut bare = Vec::new();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        for _ in 0..BATCH {
            // SAFETY: `params` points at three live locals of `empty`'s parameter types, and
            // `f` was loaded in the stream's context.
            unsafe {
                result::launch_kernel(f, cfg.grid, cfg.block, 0, stream.cu_stream(), &mut params)
            }?;
        }
        bare.push(t.elapsed() / BATCH as u32);
        stream.synchronize()?;
    }
    let (o, b) = (median(ours), median(bare));
    println!(
        "launch host cost: pgas {o:?}, bare cuLaunchKernel {b:?}, overhead {:?}",
        o.saturating_sub(b)
    );
    std::fs::remove_dir_all(cache).ok();
    Ok(())
}
