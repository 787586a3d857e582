//! NVRTC through the toolchain, with no GPU: what CI runs. Needs NVRTC and the headers, found as
//! `Toolchain::discover` finds them (CI sets `PGAS_CUDA_HOME` and `PGAS_NVSHMEM_HOME`).
//!
//! Each NVRTC compile of a source including `nvshmem.h` costs seconds, so only one test does;
//! the others compile tiny sources without the prelude.

use std::path::PathBuf;

use pgas_runtime::jit::disk::DiskCache;
use pgas_runtime::jit::{Toolchain, PRELUDE};
use pgas_runtime::Error;

fn toolchain() -> Toolchain {
    Toolchain::discover().unwrap_or_else(|e| panic!("set PGAS_CUDA_HOME / PGAS_NVSHMEM_HOME: {e}"))
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pgas-jit-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

const TINY: &str = r#"extern "C" __global__ void tiny(float* x, unsigned long long n) {
    unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.0f;
}
"#;

#[test]
fn nvshmem_kernel_compiles_to_a_clean_cubin() {
    let src = format!(
        "{PRELUDE}{}",
        r#"extern "C" __global__ void ring(float* dst, unsigned long long n, const float* src,
                                    unsigned long long m, unsigned long long* sig) {
    int peer = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
    nvshmemx_float_put_signal_nbi_block(dst, src, n, sig, 1, NVSHMEM_SIGNAL_SET, peer);
    nvshmem_signal_wait_until(sig, NVSHMEM_CMP_EQ, 1);
}
"#
    );
    let out = toolchain().compile_cubin(&src, "ring", (9, 0)).unwrap();
    assert_eq!(&out.cubin[..4], b"\x7fELF");
    assert_eq!(out.warnings().count(), 0, "{}", out.log);
}

#[test]
fn compile_error_names_kernel_rust_line_and_log() {
    let src = "#line 42 \"src/kernels/ring.rs\"\nextern \"C\" __global__ void bad() { undefined_thing(); }\n";
    let err = toolchain()
        .compile_cubin(src, "pgas_ring_abc_checked", (9, 0))
        .unwrap_err();
    match &err {
        Error::Compile {
            kernel,
            location,
            log,
        } => {
            assert_eq!(kernel, "pgas_ring_abc_checked");
            assert_eq!(location.as_deref(), Some("src/kernels/ring.rs:42"));
            assert!(log.contains("undefined_thing"), "{log}");
        }
        other => panic!("expected a compile error, got {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("src/kernels/ring.rs:42") && msg.contains("undefined_thing"),
        "{msg}"
    );
}

#[test]
fn warnings_are_visible_in_the_log() {
    let src = "extern \"C\" __global__ void w() { int unused_variable; }\n";
    let out = toolchain().compile_cubin(src, "w", (9, 0)).unwrap();
    assert!(out.warnings().count() > 0, "log: {:?}", out.log);
}

#[test]
fn unsupported_arch_is_a_clear_error() {
    let err = toolchain().compile_cubin(TINY, "tiny", (1, 0)).unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedArch { arch: (1, 0), .. }),
        "{err}"
    );
    let msg = err.to_string();
    assert!(msg.contains("sm_10") && msg.contains("sm_90"), "{msg}");
}

#[test]
fn missing_nvrtc_or_headers_are_clear_errors() {
    let tc = toolchain();
    let empty = tmpdir("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let nvshmem_root = tc.nvshmem_include().parent().unwrap().to_path_buf();

    let err = Toolchain::from_roots(&empty, &nvshmem_root).unwrap_err();
    assert!(matches!(err, Error::NvrtcMissing { .. }), "{err}");
    assert!(
        err.to_string().contains(&empty.display().to_string()),
        "{err}"
    );

    let err = Toolchain::from_roots(&tc.cuda().root, &empty).unwrap_err();
    assert!(matches!(err, Error::HeadersMissing { .. }), "{err}");
    assert!(
        err.to_string().contains("nvshmem.h") && err.to_string().contains("PGAS_NVSHMEM_HOME"),
        "{err}"
    );
    std::fs::remove_dir_all(empty).unwrap();
}

#[test]
fn disk_cache_hit_corruption_and_dump() {
    let tc = toolchain();
    let dir = tmpdir("cache");
    let dump = tmpdir("dump");
    let cache = DiskCache::open(&dir).unwrap();

    let (first, hit) = tc
        .compile_cached(Some(&cache), Some(&dump), TINY, "tiny", (9, 0))
        .unwrap();
    assert!(!hit);
    let (again, hit) = tc
        .compile_cached(Some(&cache), None, TINY, "tiny", (9, 0))
        .unwrap();
    assert!(hit);
    assert_eq!(first.cubin, again.cubin);
    // Another architecture is another entry.
    let (_, hit) = tc
        .compile_cached(Some(&cache), None, TINY, "tiny", (8, 0))
        .unwrap();
    assert!(!hit);

    // Corrupt every entry: each is detected, dropped and rebuilt.
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
    }
    let (rebuilt, hit) = tc
        .compile_cached(Some(&cache), None, TINY, "tiny", (9, 0))
        .unwrap();
    assert!(!hit);
    assert_eq!(rebuilt.cubin, first.cubin);
    let (_, hit) = tc
        .compile_cached(Some(&cache), None, TINY, "tiny", (9, 0))
        .unwrap();
    assert!(hit);

    assert_eq!(std::fs::read_to_string(dump.join("tiny.cu")).unwrap(), TINY);
    let log = std::fs::read_to_string(dump.join("tiny.log")).unwrap();
    assert!(
        log.contains("-arch=sm_90") && log.contains("-default-device"),
        "{log}"
    );

    // A failed compile is dumped too, with its error.
    let bad = "extern \"C\" __global__ void oops() { nope(); }\n";
    assert!(tc
        .compile_cached(Some(&cache), Some(&dump), bad, "oops", (9, 0))
        .is_err());
    assert!(std::fs::read_to_string(dump.join("oops.log"))
        .unwrap()
        .contains("nope"));
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::remove_dir_all(dump).unwrap();
}

/// A tiny source that uses `wgmma` (sm_90a only), with the marker generated Hopper code carries.
fn wgmma_source() -> String {
    format!(
        "{}\n{}",
        pgas_codegen::SM90A_MARKER,
        r#"extern "C" __global__ void wg() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
"#
    )
}

#[test]
fn sm90a_sources_compile_for_sm90a_and_refuse_other_gpus() {
    let tc = toolchain();
    let src = wgmma_source();
    assert!(tc
        .options((9, 0), &src)
        .contains(&"-arch=sm_90a".to_owned()));
    assert!(tc.options((9, 0), TINY).contains(&"-arch=sm_90".to_owned()));
    // The marker changes the options, so the cache key too.
    assert_ne!(
        tc.cache_key(&src, "wg", (9, 0)),
        tc.cache_key(&src.replace(pgas_codegen::SM90A_MARKER, ""), "wg", (9, 0))
    );
    let out = tc.compile_cubin(&src, "wg", (9, 0)).unwrap();
    assert_eq!(&out.cubin[..4], b"\x7fELF");
    // Without sm_90a, NVRTC's ptxas rejects wgmma: the marker is what makes it compile.
    let plain = src.replace(pgas_codegen::SM90A_MARKER, "");
    assert!(tc.compile_cubin(&plain, "wg", (9, 0)).is_err());
    match tc.compile_cubin(&src, "wg", (8, 0)) {
        Err(e @ Error::NeedsSm90a { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("compute capability 8.0") && msg.contains("mma_sync"),
                "{msg}"
            );
        }
        other => panic!("expected NeedsSm90a on sm_80, got {other:?}"),
    }
}
