//! The in-memory cache's key: which kernel, variant and comptime values a loaded function is.

use std::hash::{Hash, Hasher};

use crate::kernel::{Variant, MAX_COMPTIME};

/// Which kernel a cached function belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum KernelId {
    /// A `#[pgas_kernel]`, by its unique CUDA base name.
    Spec(&'static str),
    /// A [`crate::jit::RawKernel`], by its process-unique id.
    Raw(u64),
}

/// In-memory cache key: a kernel, a variant and its comptime values.
#[derive(Clone, Copy, Debug, Eq)]
pub(crate) struct FnKey {
    id: KernelId,
    variant: Variant,
    comptime: [i128; MAX_COMPTIME],
    n: u8,
}

impl FnKey {
    /// `None` when there are more comptime values than [`MAX_COMPTIME`].
    pub(crate) fn new(id: KernelId, variant: Variant, comptime: &[i128]) -> Option<FnKey> {
        let mut values = [0; MAX_COMPTIME];
        values.get_mut(..comptime.len())?.copy_from_slice(comptime);
        Some(FnKey {
            id,
            variant,
            comptime: values,
            n: comptime.len() as u8,
        })
    }
}

impl PartialEq for FnKey {
    fn eq(&self, o: &FnKey) -> bool {
        self.id == o.id
            && self.variant == o.variant
            && self.comptime[..self.n as usize] == o.comptime[..o.n as usize]
    }
}

impl Hash for FnKey {
    // Only the used comptime slots: this runs on every launch.
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.id.hash(h);
        self.variant.hash(h);
        self.comptime[..self.n as usize].hash(h);
    }
}
