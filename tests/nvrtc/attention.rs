//! Every specialization `pgas::attention` launches (head dims 64, 128 and 256, causal and not,
//! with the keys per tile and ring slots `AttentionConfig::for_shape` picks), plain and
//! checked, compiled by NVRTC for sm_90a as the JIT would, as one program: no errors, no
//! warnings, and the plain variants spill no register (their accumulators live in registers,
//! the reason the kernel is fast; `cargo test --test nvrtc attention -- --nocapture` prints
//! ptxas's counts) nor have their `wgmma`s serialized, fenced or waited for by ptxas.

use pgas::attention::{attention_fwd_sm90, AttentionConfig, WIDE_KEYS};
use pgas::kernel::Variant;
use pgas_codegen::{batch, specialize, Prelude};

#[test]
fn every_attention_specialization_compiles_without_spills() {
    let tc = crate::toolchain();
    let spec = &attention_fwd_sm90::SPEC;
    let mut sources = Vec::new();
    let mut names = Vec::new();
    for d in [64usize, 128, 256] {
        // Short and long key ranges: head dim 128 without a mask has a wider tile for long ones.
        // FP8 has one tile; its causal build has every branch of the unmasked one.
        let fp8 = AttentionConfig::for_fp8(d);
        let cfgs = [(false, 128), (false, WIDE_KEYS), (true, WIDE_KEYS)]
            .map(|(causal, keys)| (causal, AttentionConfig::for_shape(d, causal, keys)));
        for (causal, cfg) in cfgs.into_iter().chain([(true, fp8)]) {
            let values = cfg.comptime(d, causal);
            for variant in [Variant::Plain, Variant::Checked] {
                let pairs: Vec<(&str, i128)> = spec.comptime_names().zip(values).collect();
                let (src, name) = specialize(
                    spec.source(variant),
                    spec.cuda_name,
                    variant.as_str(),
                    &pairs,
                );
                // Head dims 64 and 256 pick one tile whatever the keys: compile it once.
                if names.iter().any(|(n, _, _)| *n == name) {
                    continue;
                }
                sources.push(src);
                let kind = if cfg.fp8 { "FP8" } else { "bf16" };
                names.push((
                    name,
                    variant,
                    format!("{kind} d {d}, causal {causal}, {} keys a tile", cfg.bn),
                ));
            }
        }
    }
    let prelude = Prelude::of_source(&sources[0]).expect("a pgas kernel source");
    let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
    let program = batch(prelude.text(), &refs).expect("sources start with their prelude");
    let out = crate::compile_clean(
        &tc,
        &program,
        "pgas_attention",
        "the attention kernels",
        true,
    );
    let mut bad = Vec::new();
    for (name, variant, what) in &names {
        let (regs, spill) = crate::ptxas_report(&out.log, name);
        println!("{what} {variant:?}: {regs} registers, {spill} bytes spilled");
        if *variant == Variant::Plain && spill > 0 {
            bad.push(format!("{what}: {spill} bytes spilled"));
        }
        // ptxas serializes every wgmma of a kernel whose register use it cannot order (C7513 to
        // C7515, C7520), or fences or waits where the kernel does not (C7517, C7519): the plain
        // variants must keep their matmuls asynchronous and overlapped as written.
        if *variant == Variant::Plain {
            for l in out.log.lines() {
                if l.contains("(C75") && l.contains(name.as_str()) {
                    bad.push(format!("{what}: {}", l.trim()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("; "));
}

/// A kernel that calls no NVSHMEM (the attention kernel) compiles through the JIT's path without
/// NVSHMEM's headers or library, and its machine code holds no NVSHMEM device state, so the JIT
/// loads it without `nvshmemx_cumodule_init`; a kernel that calls NVSHMEM (a collective's, by
/// peer stores) keeps the state the JIT readies, compiled inline and linked alike. With
/// `-- --nocapture` it prints the attention kernel's compile time both ways (`docs/jit.md`).
#[test]
fn only_kernels_that_call_nvshmem_carry_its_device_state() {
    use pgas_runtime::jit::LinkTime;
    let state = b"nvshmemi_device_state_d";
    let holds = |cubin: &[u8]| cubin.windows(state.len()).any(|w| w == state);
    let spec = &attention_fwd_sm90::SPEC;
    let cfg = AttentionConfig::for_shape(128, true, 4096);
    let values = cfg.comptime(128, true);
    let pairs: Vec<(&str, i128)> = spec.comptime_names().zip(values).collect();
    let (src, name) = specialize(spec.source(Variant::Plain), spec.cuda_name, "plain", &pairs);
    assert!(!pgas_codegen::nvcall::calls_nvshmem(&src));
    let coll = pgas::coll::prewarm_all();
    let (peer_src, peer_name) = crate::p2p_source(&coll[0], coll[0].variant);
    assert!(pgas_codegen::nvcall::calls_nvshmem(&peer_src));
    for link in [LinkTime::Off, LinkTime::PointToPoint] {
        let tc = crate::toolchain().with_link_time(link);
        let t = std::time::Instant::now();
        let free = tc.compile_program(None, &src, &name, (9, 0)).unwrap();
        println!(
            "{link:?}: the attention kernel (d 128, causal) compiled in {:.2} s",
            t.elapsed().as_secs_f64()
        );
        assert!(
            !holds(&free.cubin),
            "{link:?}: the attention kernel's CUBIN holds NVSHMEM's state"
        );
        let peer = tc
            .compile_program(None, &peer_src, &peer_name, (9, 0))
            .unwrap();
        assert!(
            holds(&peer.cubin),
            "{link:?}: {peer_name}'s CUBIN lacks NVSHMEM's state"
        );
    }
    // What the JIT did before: the same source against NVSHMEM's headers (timing only, no
    // assertion on it: `-- --nocapture` prints both).
    let t = std::time::Instant::now();
    let inline = crate::toolchain()
        .compile_cubin(&src, &name, (9, 0))
        .unwrap();
    println!("with NVSHMEM's headers: {:.2} s", t.elapsed().as_secs_f64());
    assert!(
        holds(&inline.cubin),
        "the inline compile keeps NVSHMEM's state"
    );
}
