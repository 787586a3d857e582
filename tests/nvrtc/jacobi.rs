//! Every form of `pgas::ops::jacobi`'s kernels (`jacobi::FORMS` of the fused kernel, both block
//! sizes, and the unfused kernel's sweeps), plain and checked, compiled by NVRTC for sm_90 as
//! the JIT would, as one program: no errors, no warnings. ptxas reports each kernel's registers
//! and spills (`--ptxas-options=-v`; `cargo test --test nvrtc jacobi -- --nocapture` prints
//! them): the plain 512-thread forms must spill nothing (their reason to exist: `docs/ops.md`,
//! halo section). Their `max_threads = 512` caps them at 128 registers a thread, so one block
//! fits an SM's 64K registers, which is all `Halo2d::resident_blocks` assumes.

use pgas::kernel::{KernelSpec, Variant};
use pgas::ops::jacobi::{self, Fused, Sweep};
use pgas_codegen::{specialize, Prelude};

/// The kernel a fused form runs.
fn fused_spec(form: Fused) -> &'static KernelSpec {
    if form.threads == jacobi::THREADS {
        &jacobi::jacobi_fused::SPEC
    } else {
        &jacobi::jacobi_fused_512::SPEC
    }
}

#[test]
fn every_jacobi_form_compiles_without_warnings() {
    let tc = crate::toolchain();
    // (spec, depth, what it is)
    let mut kernels: Vec<(&'static KernelSpec, usize, String)> = jacobi::FORMS
        .iter()
        .map(|&f| (fused_spec(f), f.sweep.depth().unwrap(), format!("{f:?}")))
        .collect();
    for sweep in [Sweep::Rolled, Sweep::default()] {
        let depth = sweep.depth().unwrap();
        kernels.push((
            &jacobi::jacobi_step::SPEC,
            depth,
            format!("jacobi_step {sweep:?}"),
        ));
    }
    let mut sources = Vec::new();
    let mut names = Vec::new();
    for (spec, depth, what) in &kernels {
        for variant in [Variant::Plain, Variant::Checked] {
            let pairs: Vec<(&str, i128)> =
                spec.comptime_names().map(|n| (n, *depth as i128)).collect();
            let (src, name) = specialize(
                spec.source(variant),
                spec.cuda_name,
                variant.as_str(),
                &pairs,
            );
            assert_eq!(Prelude::of_source(&src), Some(Prelude::P2p), "{what}");
            sources.push(src);
            names.push((name, variant, what.clone(), *spec));
        }
    }
    let out = crate::compile_p2p(&tc, &sources, "pgas_jacobi", "the Jacobi kernels", true);
    let mut bad = Vec::new();
    for (name, variant, what, spec) in &names {
        let (regs, spill) = crate::ptxas_report(&out.log, name);
        println!("{what} {variant:?}: {regs} registers, {spill} bytes spilled");
        let half = std::ptr::eq(*spec, &jacobi::jacobi_fused_512::SPEC);
        if half && *variant == Variant::Plain && spill > 0 {
            bad.push(format!(
                "{what}: {spill} bytes spilled in 512-thread blocks"
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("; "));
}
