//! The JIT on a GPU, without NVSHMEM (through `launch::Bare`): compile, load, specialize, launch,
//! cooperative launch and its grid check, and the in-memory/disk caches.
//!
//! Needs a GPU: run with `cargo test -p pgas-runtime --test jit_gpu -- --ignored`.

use std::sync::Arc;

use pgas_runtime::kernel::{KernelSpec, ParamKind, ParamSpec, Variant};
use pgas_runtime::launch::{Bare, KernelArgs, LaunchConfig, RawKernel};
use pgas_runtime::Error;

const SCALE_SRC: &str = concat!(
    "#include <cuda/std/type_traits>\n",
    "extern \"C\" __global__ void PGAS_KERNEL_NAME(float* x, unsigned long long n, float s) {\n",
    "    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n",
    "    if (i < n) x[i] = x[i] * s * PGAS_CT_k;\n",
    "}\n"
);

static SCALE: KernelSpec = KernelSpec {
    rust_name: "scale",
    cuda_name: "pgas_scale_test",
    file: file!(),
    line: line!(),
    plain_source: SCALE_SRC,
    checked_source: SCALE_SRC,
    params: &[
        ParamSpec {
            name: "x",
            kind: ParamKind::Local {
                elem: "f32",
                mutable: true,
            },
        },
        ParamSpec {
            name: "k",
            kind: ParamKind::Comptime("i32"),
        },
        ParamSpec {
            name: "s",
            kind: ParamKind::Scalar("f32"),
        },
    ],
    collective: false,
    max_threads: None,
};

/// A GPU, with the disk cache in a directory of this test process (one value for every test:
/// the environment is shared by the tests' threads).
fn gpu() -> Bare {
    static CACHE: std::sync::Once = std::sync::Once::new();
    CACHE.call_once(|| {
        let dir = std::env::temp_dir().join(format!("pgas-gpu-cache-{}", std::process::id()));
        std::env::set_var("PGAS_CACHE_DIR", dir);
    });
    Bare::new(0).expect("a GPU")
}

#[test]
#[ignore = "needs a GPU"]
fn spec_kernel_specializes_on_comptime_values() {
    let dev = gpu();
    let stream = dev.stream().clone();
    let mut x = stream.clone_htod(&vec![1.0f32; 1000]).unwrap();
    let cfg = LaunchConfig::blocks(4, 256);
    dev.launch(
        &SCALE,
        Variant::Checked,
        &[3],
        cfg,
        KernelArgs::new().push_local_mut(&mut x).push_scalar(2.0f32),
    )
    .unwrap();
    dev.launch(
        &SCALE,
        Variant::Plain,
        &[5],
        cfg,
        KernelArgs::new().push_local_mut(&mut x).push_scalar(1.0f32),
    )
    .unwrap();
    let out = stream.clone_dtoh(&x).unwrap();
    assert!(out.iter().all(|&v| v == 30.0), "{:?}", &out[..4]);

    // Wrong arguments never reach the GPU.
    let err = dev
        .launch(
            &SCALE,
            Variant::Checked,
            &[],
            cfg,
            KernelArgs::new().push_local_mut(&mut x).push_scalar(1.0f32),
        )
        .unwrap_err();
    assert!(err.to_string().contains("comptime"), "{err}");
    let err = dev
        .launch(
            &SCALE,
            Variant::Checked,
            &[1],
            cfg,
            KernelArgs::new().push_local_mut(&mut x),
        )
        .unwrap_err();
    assert!(err.to_string().contains("expected 2 arguments"), "{err}");
}

#[test]
#[ignore = "needs a GPU"]
fn raw_kernel_with_nvshmem_prelude_runs_and_hits_caches() {
    let src = r#"extern "C" __global__ void twice(float* x, unsigned long long n) {
        unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
        if (i < n) x[i] *= 2.0f;
    }"#;
    let k = RawKernel::from_source(src, "twice");
    let dev = gpu();
    let stream = dev.stream().clone();
    let mut x = stream.clone_htod(&[1.0f32, 2.0, 3.0]).unwrap();
    let t = std::time::Instant::now();
    // SAFETY: `x`'s pointer and length are twice's parameters; it writes only x[..n].
    unsafe {
        dev.launch_raw(
            &k,
            LaunchConfig::blocks(1, 32),
            KernelArgs::new().push_local_mut(&mut x),
        )
    }
    .unwrap();
    let cold = t.elapsed();
    let t = std::time::Instant::now();
    // SAFETY: as above.
    unsafe {
        dev.launch_raw(
            &k,
            LaunchConfig::blocks(1, 32),
            KernelArgs::new().push_local_mut(&mut x),
        )
    }
    .unwrap();
    let hot = t.elapsed();
    assert_eq!(stream.clone_dtoh(&x).unwrap(), vec![4.0, 8.0, 12.0]);

    // A fresh JIT state (as a new process would have) loads from the disk cache.
    let dev2 = gpu();
    let t = std::time::Instant::now();
    dev2.prewarm_raw(&RawKernel::from_source(src, "twice"))
        .unwrap();
    let disk = t.elapsed();
    println!("cold {cold:?}, disk hit {disk:?}, memory hit + launch {hot:?}");
    assert!(disk < cold / 4, "disk {disk:?} vs cold {cold:?}");
}

#[test]
#[ignore = "needs a GPU"]
fn collective_launch_checks_the_grid() {
    let src = r#"#include <cooperative_groups.h>
    extern "C" __global__ void gsync(unsigned int* c) {
        atomicAdd(c, 1u);
        cooperative_groups::this_grid().sync();
        if (threadIdx.x == 0 && blockIdx.x == 0) c[1] = c[0];
    }"#;
    let k = RawKernel::from_source(src, "gsync").collective(true);
    let dev = gpu();
    let stream = dev.stream().clone();
    let mut c = stream.alloc_zeros::<u32>(2).unwrap();
    // SAFETY: `c`'s pointer is gsync's parameter; this grid is refused before any launch.
    let err = unsafe {
        dev.launch_raw(
            &k,
            LaunchConfig::blocks(1_000_000, 1024),
            KernelArgs::new().push_local_mut(&mut c),
        )
    }
    .unwrap_err();
    let Error::CollectiveGrid { max, requested, .. } = err else {
        panic!("{err}")
    };
    assert_eq!(requested, 1_000_000);
    assert!(max > 0 && max < 1_000_000);
    let blocks = max as u32;
    // SAFETY: `c`'s pointer is gsync's parameter; the kernel writes c[0] and c[1], both in `c`.
    unsafe {
        dev.launch_raw(
            &k,
            LaunchConfig::blocks(blocks, 1024),
            KernelArgs::new().push_local_mut(&mut c),
        )
    }
    .unwrap();
    let out = stream.clone_dtoh(&c).unwrap();
    assert_eq!(
        out[1],
        blocks * 1024,
        "all blocks arrived before the grid sync"
    );
}

#[test]
#[ignore = "needs a GPU"]
fn plain_launch_of_a_block_that_does_not_fit_is_diagnosed() {
    // A compiled bound below the block, and more shared memory than any GPU gives a block: both
    // come back as the diagnosis, before cuLaunchKernel.
    let src = r#"extern "C" __global__ void __launch_bounds__(128) bounded(float* x, unsigned long long n) {
        unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
        if (i < n) x[i] = 1.0f;
    }"#;
    let k = RawKernel::from_source(src, "bounded");
    let dev = gpu();
    let stream = dev.stream().clone();
    let mut x = stream.alloc_zeros::<f32>(512).unwrap();
    // SAFETY: `x`'s pointer and length are bounded's parameters; this block is refused before launch.
    let err = unsafe {
        dev.launch_raw(
            &k,
            LaunchConfig::blocks(1, 512),
            KernelArgs::new().push_local_mut(&mut x),
        )
    }
    .unwrap_err();
    let msg = err.to_string();
    let Error::BlockDoesNotFit {
        threads: 512,
        collective: false,
        max_threads: 128,
        ..
    } = err
    else {
        panic!("{msg}")
    };
    assert!(msg.contains("`__launch_bounds__(128)`"), "{msg}");
    // SAFETY: as above; refused before launch too.
    let err = unsafe {
        dev.launch_raw(
            &k,
            LaunchConfig::blocks(4, 128).with_shared_mem(1 << 20),
            KernelArgs::new().push_local_mut(&mut x),
        )
    }
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, Error::BlockDoesNotFit { max_threads: 0, .. }),
        "{msg}"
    );
    assert!(
        msg.contains("1048576 bytes of dynamic shared memory"),
        "{msg}"
    );
    // Within the limits it runs.
    // SAFETY: `x`'s pointer and length are bounded's parameters; it writes only x[..n].
    unsafe {
        dev.launch_raw(
            &k,
            LaunchConfig::blocks(4, 128),
            KernelArgs::new().push_local_mut(&mut x),
        )
    }
    .unwrap();
    assert_eq!(stream.clone_dtoh(&x).unwrap(), vec![1.0f32; 512]);
}

#[test]
#[ignore = "needs a GPU"]
fn concurrent_first_launches_compile_once_and_all_run() {
    let dev = Arc::new(gpu());
    std::thread::scope(|s| {
        for t in 0..8 {
            // Every thread asks for the same specialization at once.
            let dev = dev.clone();
            s.spawn(move || {
                let stream = dev.cuda().new_stream().unwrap();
                let mut x = stream.clone_htod(&vec![1.0f32; 256]).unwrap();
                for _ in 0..10 {
                    // The launch's own stream, not the device's default one.
                    let mut args = KernelArgs::new();
                    args.push_local_mut(&mut x).push_scalar(1.0f32);
                    dev.launch_on(
                        &stream,
                        &SCALE,
                        Variant::Plain,
                        &[2],
                        LaunchConfig::blocks(1, 256),
                        &mut args,
                    )
                    .unwrap();
                }
                let out = stream.clone_dtoh(&x).unwrap();
                let want = 1024.0;
                let wrong: Vec<_> = out
                    .iter()
                    .enumerate()
                    .filter(|(_, &v)| v != want)
                    .take(5)
                    .collect();
                assert!(wrong.is_empty(), "thread {t}: {wrong:?}");
            });
        }
    });
}
