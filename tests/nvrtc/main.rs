//! Every kernel the project generates, compiled by NVRTC (and linked by nvJitLink) for sm_90 as
//! the runtime's JIT would: no errors, no warnings. Needs no GPU; needs NVRTC, nvJitLink and the
//! headers (`PGAS_CUDA_HOME`, `PGAS_NVSHMEM_HOME`; `scripts/deps.sh` installs them).
//!
//! One test binary, so that its tests run side by side: each is mostly one single-threaded
//! NVRTC program, and as separate binaries they ran one after the other.
//! - [`corpus`]: the corpus, the gallery and the library's kernel folders; the link-time path.
//! - [`coll`]: every specialization `pgas::coll` can launch.
//! - [`moe`], [`jacobi`]: the fused operations whose launches need more than sample values.
//! - [`multimem`]: the runtime's own multicast write.
//! - [`attention`]: every specialization `pgas::attention` launches, with ptxas's spill counts.
//! - [`allreduce_rmsnorm`]: the fused all-reduce + RMSNorm's kernels.
//!
//! `PGAS_NVRTC_CUBIN_DIR=DIR` keeps each inline program's machine code as `DIR/<program>.cubin`:
//! `scripts/studies/sass_same.py` compares two such folders kernel by kernel (a restructuring
//! that should not change the code, checked without a GPU), `scripts/studies/sass_loop.py`
//! counts a kernel's main-loop instructions.

mod allreduce_rmsnorm;
mod attention;
mod coll;
mod corpus;
mod jacobi;
mod moe;
mod multimem;

use pgas::kernel::Variant;
use pgas::launch::Prewarm;
use pgas_codegen::{batch, specialize, Prelude};
use pgas_runtime::jit::{Compiled, Toolchain};

/// The toolchain the JIT would discover, or a panic that says which variables to set.
fn toolchain() -> Toolchain {
    Toolchain::discover().unwrap_or_else(|e| panic!("set PGAS_CUDA_HOME / PGAS_NVSHMEM_HOME: {e}"))
}

/// `k` in `variant` as the JIT compiles it: (source, kernel name). The library's launch lists
/// hold point-to-point kernels only (no NVSHMEM collective templates, so they compile fast): a
/// panic names one that needs a heavier prelude.
fn p2p_source(k: &Prewarm<'_>, variant: Variant) -> (String, String) {
    let pairs: Vec<(&str, i128)> = k
        .spec
        .comptime_names()
        .zip(k.comptime.iter().copied())
        .collect();
    let spec = specialize(
        k.spec.source(variant),
        k.spec.cuda_name,
        variant.as_str(),
        &pairs,
    );
    assert_eq!(
        Prelude::of_source(&spec.0),
        Some(Prelude::P2p),
        "{}: a heavier prelude than the point-to-point one",
        spec.1
    );
    spec
}

/// `program` compiled by NVRTC as one program `name` for sm_90 with the JIT's options (and
/// ptxas's register and spill report where `report`): its output, which must carry no warning,
/// kept where `PGAS_NVRTC_CUBIN_DIR` says. `what` names the kernels in a rejection's panic.
fn compile_clean(tc: &Toolchain, program: &str, name: &str, what: &str, report: bool) -> Compiled {
    let mut options = tc.options((9, 0), program);
    if report {
        options.push("--ptxas-options=-v".to_owned());
    }
    let out = tc
        .compile_with(program, name, (9, 0), &options)
        .unwrap_or_else(|e| panic!("NVRTC rejected {what}: {e}"));
    // ptxas's `-v` report is `info` lines: `warnings` counts only real warnings.
    assert_eq!(out.warnings().count(), 0, "{what}: warnings:\n{}", out.log);
    keep_cubin(name, &out.cubin);
    out
}

/// `sources`, each starting with the point-to-point prelude, as one program (see
/// [`compile_clean`]).
fn compile_p2p(
    tc: &Toolchain, sources: &[String], name: &str, what: &str, report: bool,
) -> Compiled {
    let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
    let program = batch(Prelude::P2p.text(), &refs).expect("sources start with their prelude");
    compile_clean(tc, &program, name, what, report)
}

/// Keeps `cubin`, the machine code of program `name`, where `PGAS_NVRTC_CUBIN_DIR` says (see
/// the module doc).
fn keep_cubin(name: &str, cubin: &[u8]) {
    if let Some(dir) = std::env::var_os("PGAS_NVRTC_CUBIN_DIR") {
        let path = std::path::Path::new(&dir).join(format!("{name}.cubin"));
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&path, cubin))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// ptxas's report for `kernel` in `log`: (registers, bytes of spill stores).
pub(crate) fn ptxas_report(log: &str, kernel: &str) -> (u32, u32) {
    let mut lines = log
        .lines()
        .skip_while(|l| !l.contains(&format!("entry function '{kernel}'")));
    let mut regs = None;
    let mut spill = None;
    for l in lines.by_ref().take(4) {
        if let Some(i) = l.find("bytes spill stores") {
            let n = l[..i].split_whitespace().last().unwrap_or("");
            spill = n.parse().ok();
        }
        if let Some(i) = l.find("Used ") {
            regs = l[i + 5..]
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok());
        }
    }
    match (regs, spill) {
        (Some(r), Some(s)) => (r, s),
        _ => panic!("no ptxas report for {kernel} in:\n{log}"),
    }
}
