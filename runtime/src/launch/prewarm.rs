//! Compiling kernels ahead of their first launch, many at once.

use crate::context::pgas::Pgas;
use crate::error::{Error, Result};
use crate::jit::source::{spec_source, Source};
use crate::jit::state::{FnKey, KernelId, Want};
use crate::kernel::{KernelSpec, Variant};
use crate::launch_cause::LaunchCause;

/// One specialization to compile ahead of time.
#[derive(Clone, Copy, Debug)]
pub struct Prewarm<'a> {
    /// The kernel (`my_kernel::SPEC` of a `#[pgas_kernel] fn my_kernel`).
    pub spec: &'static KernelSpec,
    /// Which variant to compile (plain or checked).
    pub variant: Variant,
    /// Comptime values in declaration order.
    pub comptime: &'a [i128],
}

/// Compiles (or loads from the disk cache) and loads every kernel in `kernels`, so their first
/// launches are cache hits. The kernels not cached yet are compiled as one NVRTC program per
/// prelude and loaded as one module each; a build of several kernels prints a line per batch.
///
/// Every kernel that can be built is loaded; when some cannot, the error is
/// [`Error::Kernels`], one entry per failing kernel (its Rust name and, for a compile error, its
/// Rust line), or the one failure when just one kernel fails.
pub fn prewarm(pgas: &Pgas, kernels: &[Prewarm<'_>]) -> Result<()> {
    // A kernel listed twice is built once (twice in one NVRTC program would be a duplicate
    // symbol).
    let mut keys: Vec<FnKey> = Vec::with_capacity(kernels.len());
    let mut unique: Vec<&Prewarm<'_>> = Vec::with_capacity(kernels.len());
    for k in kernels {
        let key = key(k)?;
        if !keys.contains(&key) {
            keys.push(key);
            unique.push(k);
        }
    }
    let sources: Vec<Box<dyn Fn() -> Source + '_>> = unique
        .into_iter()
        .map(|k| {
            Box::new(move || spec_source(k.spec, k.variant, k.comptime)) as Box<dyn Fn() -> Source>
        })
        .collect();
    let wants: Vec<Want<'_>> = keys
        .iter()
        .zip(&sources)
        .map(|(&key, source)| Want {
            key,
            source: &**source,
        })
        .collect();
    let target = pgas.jit_target();
    let mut failures: Vec<Error> = target
        .jit
        .build(&target, &wants)?
        .into_iter()
        .filter_map(|r| r.err())
        .collect();
    match failures.len() {
        0 => Ok(()),
        1 => Err(failures.remove(0)),
        _ => Err(Error::Kernels { failures }),
    }
}

/// Waits until every kernel this context loaded from a quick build runs its full build.
///
/// A kernel that calls one of NVSHMEM's device collectives (`reduce_block`, `broadcast_warp`,
/// ...) spends a quarter minute in a full compile, so its first launch (or [`prewarm`]) loads a
/// quick build in seconds, whose collective runs slower, and the full build compiles in the
/// background; the next launch after it is ready uses it (docs/jit.md, "Tiers"). Call this
/// before timing such a kernel or capturing it in a CUDA graph, which would keep the quick
/// build. Returns how many full builds it put in place of quick ones: at once, 0, when nothing
/// is compiling; `PGAS_JIT_TIERS=off` makes every build full from the start. A full build that
/// fails leaves the quick one in place and prints one warning line; this never fails a program
/// that runs. Called while [`Pgas::stream`] is being captured it waits but swaps nothing in (a
/// module cannot load then); the next launch outside capture does.
pub fn finish_compiles(pgas: &Pgas) -> usize {
    let target = pgas.jit_target();
    target.jit.finish_compiles(&target, pgas.stream())
}

/// The cache key of one prewarm entry, checking its comptime count.
fn key(k: &Prewarm<'_>) -> Result<FnKey> {
    let expected = k.spec.comptime_names().count();
    FnKey::new(KernelId::Spec(k.spec.cuda_name), k.variant, k.comptime)
        .filter(|_| k.comptime.len() == expected)
        .ok_or_else(|| {
            let got = k.comptime.len();
            let cause = LaunchCause::PrewarmComptimeCount { expected, got };
            Error::launch(k.spec.rust_name, cause)
        })
}
