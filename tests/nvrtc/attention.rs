//! Every specialization `pgas::attention` launches (head dims 64, 128 and 256, causal and not,
//! with the keys per tile and ring slots `AttentionConfig::for_head_dim` picks), plain and
//! checked, compiled by NVRTC for sm_90a as the JIT would, as one program: no errors, no
//! warnings, and the plain variants spill no register (their accumulators live in registers,
//! the reason the kernel is fast; `cargo test --test nvrtc attention -- --nocapture` prints
//! ptxas's counts) nor have their `wgmma`s serialized by ptxas.

use pgas::attention::{attention_fwd_sm90, AttentionConfig};
use pgas::kernel::Variant;
use pgas_codegen::{batch, specialize, Prelude};

#[test]
fn every_attention_specialization_compiles_without_spills() {
    let tc = crate::toolchain();
    let spec = &attention_fwd_sm90::SPEC;
    let mut sources = Vec::new();
    let mut names = Vec::new();
    for d in [64usize, 128, 256] {
        let cfg = AttentionConfig::for_head_dim(d);
        for causal in [false, true] {
            let values = [
                d as i128,
                cfg.bn as i128,
                cfg.stages as i128,
                causal as i128,
            ];
            for variant in [Variant::Plain, Variant::Checked] {
                let pairs: Vec<(&str, i128)> = spec.comptime_names().zip(values).collect();
                let (src, name) = specialize(
                    spec.source(variant),
                    spec.cuda_name,
                    variant.as_str(),
                    &pairs,
                );
                sources.push(src);
                names.push((name, variant, format!("d {d}, causal {causal}")));
            }
        }
    }
    let prelude = Prelude::of_source(&sources[0]).expect("a pgas kernel source");
    let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
    let program = batch(prelude.text(), &refs).expect("sources start with their prelude");
    let mut options = tc.options((9, 0), &program);
    options.push("--ptxas-options=-v".to_owned());
    let out = tc
        .compile_with(&program, "pgas_attention", (9, 0), &options)
        .unwrap_or_else(|e| panic!("NVRTC rejected the attention kernels: {e}"));
    assert_eq!(out.warnings().count(), 0, "warnings:\n{}", out.log);
    let mut bad = Vec::new();
    for (name, variant, what) in &names {
        let (regs, spill) = crate::ptxas_report(&out.log, name);
        println!("{what} {variant:?}: {regs} registers, {spill} bytes spilled");
        if *variant == Variant::Plain && spill > 0 {
            bad.push(format!("{what}: {spill} bytes spilled"));
        }
        // ptxas serializes every wgmma of a kernel whose register use it cannot order (C7520):
        // the plain variants must keep them asynchronous.
        if *variant == Variant::Plain
            && out
                .log
                .lines()
                .any(|l| l.contains("C7520") && l.contains(name.as_str()))
        {
            bad.push(format!("{what}: ptxas serializes its wgmma (C7520)"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("; "));
}
