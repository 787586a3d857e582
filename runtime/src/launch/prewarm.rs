//! Compiling kernels ahead of their first launch, several at once.

use crate::context::pgas::Pgas;
use crate::error::{Error, Result};
use crate::jit::source::spec_source;
use crate::jit::state::{FnKey, KernelId};
use crate::kernel::{KernelSpec, Variant};

/// One specialization to compile ahead of time.
#[derive(Clone, Copy, Debug)]
pub struct Prewarm<'a> {
    pub spec: &'static KernelSpec,
    pub variant: Variant,
    /// Comptime values in declaration order.
    pub comptime: &'a [i128],
}

/// Compiles (or loads from the disk cache) and loads every kernel in `kernels`, up to one per
/// CPU core at a time, so their first launches are cache hits. Returns the first error.
pub fn prewarm(pgas: &Pgas, kernels: &[Prewarm<'_>]) -> Result<()> {
    let target = pgas.jit_target();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(kernels.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(k) = kernels.get(i) else {
                            return Ok(());
                        };
                        let expected = k.spec.comptime_names().count();
                        let key =
                            FnKey::new(KernelId::Spec(k.spec.cuda_name), k.variant, k.comptime)
                                .filter(|_| k.comptime.len() == expected)
                                .ok_or_else(|| Error::Launch {
                                    kernel: k.spec.rust_name.to_owned(),
                                    reason: format!(
                                        "expected {expected} comptime values, got {}",
                                        k.comptime.len()
                                    ),
                                })?;
                        target.jit.get_or_build(&target, key, &|| {
                            spec_source(k.spec, k.variant, k.comptime)
                        })?;
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    results.into_iter().collect()
}
