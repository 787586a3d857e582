//! Every specialization `pgas::coll` can launch (`coll::prewarm_all`: each algorithm, element
//! type and reduction), compiled by NVRTC for sm_90 as the JIT would, as one program per prelude:
//! no errors, no warnings. Link-time (the JIT's default: NVRTC to LTO-IR, nvJitLink against the
//! NVSHMEM library), every specialization, in one program per CPU; inline (`PGAS_JIT_LTO=off`, against NVSHMEM's headers),
//! each kernel and type with its first reduction. The reductions of a kernel differ only in the
//! comptime code `op`, which the front end checks the same way whatever its value (every branch
//! is in the text); what differs after it, the code each value leaves, the link-time compile
//! makes for every one. So the inline compile checks what the headers change, the front end, in
//! a fifth of the time.

use pgas_codegen::{batch, Prelude};

#[test]
fn every_collective_specialization_compiles_without_warnings() {
    let tc = crate::toolchain();
    let list = pgas::coll::prewarm_all();
    // 8 integer types x 7 ops + 4 float types x 4 ops for each of low-latency, one-shot (the
    // reduce-scatter too), two-shot (its three forms) and low-latency reduce-scatter, and two
    // all-gathers (pushing: two-shot's half; low-latency), three broadcasts (one-shot,
    // two-shot, low-latency), two all-to-alls (pushing, low-latency), the pulling all-gather
    // and all-to-all (one kernel) and all-to-all-v of each element size (1, 2, 4, 8 bytes).
    assert_eq!(list.len(), 6 * (8 * 7 + 4 * 4) + 4 * 9);
    // (source, kernel name) of every specialization, and of each kernel's first reduction (code
    // 0, Sum) with every moving kernel.
    let mut all: Vec<(String, String)> = Vec::new();
    let mut first_ops: Vec<(String, String)> = Vec::new();
    for k in &list {
        let spec = crate::p2p_source(k, k.variant);
        if k.comptime.iter().all(|&code| code == 0) {
            first_ops.push(spec.clone());
        }
        all.push(spec);
    }
    let program = |specs: &[(String, String)]| {
        let refs: Vec<&str> = specs.iter().map(|(src, _)| src.as_str()).collect();
        batch(Prelude::P2p.text(), &refs).expect("sources start with their prelude")
    };
    // The link-time compile in one program per CPU: most of its time is nvJitLink's, which
    // runs in parallel (NVRTC's part does not: one compile at a time in a process, docs/jit.md).
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let parts: Vec<&[(String, String)]> = all.chunks(all.len().div_ceil(cpus)).collect();
    let inline_program = program(&first_ops);
    let linked_programs: Vec<String> = parts.iter().map(|p| program(p)).collect();
    // The inline one at once, with `--Ofast-compile=max`, as tests/nvrtc/corpus.rs compiles: it
    // changes the optimization, not what the front end accepts or warns about.
    let mut options = tc.options((9, 0), &inline_program);
    options.push("--Ofast-compile=max".to_owned());
    let (inline, linked) = std::thread::scope(|s| {
        let inline = s.spawn(|| tc.compile_with(&inline_program, "pgas_coll", (9, 0), &options));
        let linked: Vec<_> = linked_programs
            .iter()
            .map(|p| s.spawn(|| tc.compile_program(None, p, "pgas_coll_linked", (9, 0))))
            .collect();
        let linked: Vec<_> = linked
            .into_iter()
            .map(|h| h.join().expect("a link-time compile's thread"))
            .collect();
        (inline.join().expect("the inline compile's thread"), linked)
    });
    assert!(tc.linker().is_some(), "scripts/deps.sh installs nvJitLink");
    let inline = inline.unwrap_or_else(|e| panic!("NVRTC rejected the collectives: {e}"));
    let mut images = vec![("inline", inline, &first_ops[..])];
    for (out, part) in linked.into_iter().zip(parts) {
        let out =
            out.unwrap_or_else(|e| panic!("the link-time compile of the collectives failed: {e}"));
        images.push(("linked", out, part));
    }
    for (what, out, specs) in &images {
        assert_eq!(out.warnings().count(), 0, "{what}: warnings:\n{}", out.log);
        let has = |name: &str| out.cubin.windows(name.len()).any(|w| w == name.as_bytes());
        let missing: Vec<&str> = specs
            .iter()
            .map(|(_, name)| name.as_str())
            .filter(|name| !has(name))
            .collect();
        assert!(
            missing.is_empty(),
            "{what}: missing from the image: {missing:?}"
        );
    }
    assert_eq!(
        first_ops.len(),
        6 * 12 + 4 * 9,
        "one of each kernel and type"
    );
}

/// Every collective kernel (each type's first reduction), compiled inline at full optimization
/// as the JIT's `PGAS_JIT_LTO=off` would: ptxas spills at most `MAX_SPILL` bytes in any. On
/// 2026-12-02, before (a460016, the kernels pasted by `macro_rules!`) and after they became
/// generic kernels, the same 13 instances spilled 4-32 bytes (`low_latency_broadcast` of 1 and
/// 2 bytes the most) and the rest none. Registers and spills are printed
/// (`cargo test --test nvrtc coll:: -- --nocapture`), to compare commits.
#[test]
fn no_collective_kernel_spills_more_than_it_did() {
    const MAX_SPILL: u32 = 32;
    let tc = crate::toolchain();
    let mut specs = Vec::new();
    for k in pgas::coll::prewarm_all() {
        if k.comptime.iter().all(|&code| code == 0) {
            specs.push((k.spec.rust_name, crate::p2p_source(&k, k.variant)));
        }
    }
    let refs: Vec<&str> = specs.iter().map(|(_, (src, _))| src.as_str()).collect();
    let program = batch(Prelude::P2p.text(), &refs).expect("sources start with their prelude");
    let mut options = tc.options((9, 0), &program);
    options.push("--ptxas-options=-v".to_owned());
    let out = tc
        .compile_with(&program, "pgas_coll_regs", (9, 0), &options)
        .unwrap_or_else(|e| panic!("NVRTC rejected the collectives: {e}"));
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
