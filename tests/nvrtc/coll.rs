//! Every specialization `pgas::coll` can launch (`coll::prewarm_all`: each algorithm, element
//! type and reduction), compiled by NVRTC for sm_90 as the JIT would: no errors, no warnings.
//! Link-time (the JIT's default: NVRTC to LTO-IR, nvJitLink against the NVSHMEM library, here at
//! `-O0`), every specialization, in one program per CPU; inline (`PGAS_JIT_LTO=off`, against NVSHMEM's
//! headers), each kernel and type with its first reduction, once, at full optimization with
//! ptxas's report (the spill check reads it). The reductions of a kernel differ only in the
//! comptime code `op`, which the front end checks the same way whatever its value (every branch
//! is in the text); what differs after it, the code each value leaves, the link-time compile
//! makes for every one. So the inline compile checks what the headers change, the front end, in
//! a fifth of the time.

use pgas_codegen::{batch, Prelude};

/// (source, kernel name) of each kernel and type with its first reduction (every comptime code
/// 0), as the inline compile takes them, with the kernel's Rust name.
fn first_ops() -> Vec<(&'static str, (String, String))> {
    pgas::coll::prewarm_all()
        .into_iter()
        .filter(|k| k.comptime.iter().all(|&code| code == 0))
        .map(|k| (k.spec.rust_name, crate::p2p_source(&k, k.variant)))
        .collect()
}

/// Asserts that `cubin` holds every kernel of `names`.
fn assert_all_in(what: &str, cubin: &[u8], names: impl Iterator<Item = String>) {
    let has = |name: &str| cubin.windows(name.len()).any(|w| w == name.as_bytes());
    let missing: Vec<String> = names.filter(|name| !has(name)).collect();
    assert!(
        missing.is_empty(),
        "{what}: missing from the image: {missing:?}"
    );
}

#[test]
fn every_collective_specialization_links_without_warnings() {
    // Linked at `-O0` (as the corpus's link test): the check is that each links, without
    // warnings, into an image holding it; the optimized link is the GPU suite's, which prewarms
    // every specialization. It halves the test's time (CONTRIBUTING.md, "The CPU tests and the gates").
    let tc = crate::toolchain().with_unoptimized_link();
    let list = pgas::coll::prewarm_all();
    // 8 integer types x 7 ops + 4 float types x 4 ops for each of low-latency, one-shot (the
    // reduce-scatter too), two-shot (its three forms) and low-latency reduce-scatter, and two
    // all-gathers (pushing: two-shot's half; low-latency), two broadcasts (two-shot,
    // low-latency), two all-to-alls (pushing, low-latency), the pulling all-gather, all-to-all
    // and broadcast (one kernel) and all-to-all-v of each element size (1, 2, 4, 8 bytes).
    assert_eq!(list.len(), 6 * (8 * 7 + 4 * 4) + 4 * 8);
    let all: Vec<(String, String)> = list
        .iter()
        .map(|k| crate::p2p_source(k, k.variant))
        .collect();
    // In one program per CPU: most of the link-time compile is nvJitLink's, which runs in
    // parallel (NVRTC's part does not: one compile at a time in a process, docs/jit.md).
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let parts: Vec<&[(String, String)]> = all.chunks(all.len().div_ceil(cpus)).collect();
    let programs: Vec<String> = parts
        .iter()
        .map(|specs| {
            let refs: Vec<&str> = specs.iter().map(|(src, _)| src.as_str()).collect();
            batch(Prelude::P2p.text(), &refs).expect("sources start with their prelude")
        })
        .collect();
    let outs: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = programs
            .iter()
            .map(|p| s.spawn(|| tc.compile_program(None, p, "pgas_coll_linked", (9, 0))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a link-time compile's thread"))
            .collect()
    });
    assert!(tc.linker().is_some(), "scripts/deps.sh installs nvJitLink");
    for (out, part) in outs.into_iter().zip(parts) {
        let out =
            out.unwrap_or_else(|e| panic!("the link-time compile of the collectives failed: {e}"));
        assert_eq!(out.warnings().count(), 0, "linked: warnings:\n{}", out.log);
        assert_all_in(
            "linked",
            &out.cubin,
            part.iter().map(|(_, name)| name.clone()),
        );
    }
}

/// Every collective kernel (each type's first reduction), compiled inline at full optimization
/// as the JIT's `PGAS_JIT_LTO=off` would: no warnings, every kernel in the image, and ptxas
/// spills at most `MAX_SPILL` bytes in any. On
/// 2026-12-02, before (a460016, the kernels pasted by `macro_rules!`) and after they became
/// generic kernels, the same 13 instances spilled 4-32 bytes (`low_latency_broadcast` of 1 and
/// 2 bytes the most) and the rest none. Registers and spills are printed
/// (`cargo test --test nvrtc coll:: -- --nocapture`), to compare commits.
#[test]
fn every_collective_kernel_compiles_inline_without_warnings_or_spills() {
    const MAX_SPILL: u32 = 32;
    let tc = crate::toolchain();
    let specs = first_ops();
    assert_eq!(specs.len(), 6 * 12 + 4 * 8, "one of each kernel and type");
    let refs: Vec<&str> = specs.iter().map(|(_, (src, _))| src.as_str()).collect();
    let program = batch(Prelude::P2p.text(), &refs).expect("sources start with their prelude");
    let out = crate::compile_clean(&tc, &program, "pgas_coll_inline", "the collectives", true);
    assert_all_in(
        "inline",
        &out.cubin,
        specs.iter().map(|(_, (_, name))| name.clone()),
    );
    let mut spilled = Vec::new();
    for (rust_name, (_, symbol)) in &specs {
        let (regs, spill) = crate::ptxas_report(&out.log, symbol);
        println!("{rust_name}: {regs} registers, {spill} bytes spilled");
        if spill > MAX_SPILL {
            spilled.push(format!("{rust_name}: {spill} bytes"));
        }
    }
    assert!(
        spilled.is_empty(),
        "spills over {MAX_SPILL} bytes: {spilled:?}"
    );
}
