//! Host writes through a team's multicast address: [`MulticastView::copy_from`].
//!
//! A multicast address may be accessed only by `multimem` instructions (PTX: plain loads and
//! stores, and so copies, to one are undefined), so the write is a kernel of `multimem.st`: the
//! host data goes to a local device buffer, and one thread per 4-byte word stores it through the
//! multicast address into every member's copy. It runs on the context's stream and is waited for.

use std::sync::OnceLock;

use super::args::KernelArgs;
use super::config::LaunchConfig;
use super::raw::RawKernel;
use crate::context::memory::check_len;
use crate::context::{CollectiveElem, MulticastView};
use crate::error::{Error, Result};

/// The kernel's name in [`MULTICAST_STORE_SOURCE`].
const NAME: &str = "pgas_multicast_store_b32";

/// The CUDA source of the write: `(multicast address, local words, word count)`. Public for the
/// CI test that compiles it with NVRTC and ptxas (`tests/nvrtc/multimem.rs`), since the test
/// machines, with multicast off, never run it.
#[doc(hidden)]
pub const MULTICAST_STORE_SOURCE: &str = "extern \"C\" __global__ void pgas_multicast_store_b32(
    unsigned long long mc, const unsigned int *src, unsigned long long n) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        asm volatile(\"multimem.st.relaxed.sys.global.b32 [%0], %1;\" :: \"l\"(mc + 4 * i), \"r\"(src[i]) : \"memory\");
    }
}
";

fn kernel() -> &'static RawKernel {
    static KERNEL: OnceLock<RawKernel> = OnceLock::new();
    KERNEL.get_or_init(|| RawKernel::point_to_point(MULTICAST_STORE_SOURCE, NAME))
}

/// The 4-byte words of `bytes` at `addr`, or why they are not whole words.
fn words(bytes: usize, addr: u64) -> Result<usize> {
    if bytes.is_multiple_of(4) && addr.is_multiple_of(4) {
        Ok(bytes / 4)
    } else {
        Err(Error::InvalidConfig {
            name: "MulticastView::copy_from",
            value: format!("{bytes} bytes at {addr:#x}"),
            reason: "a write through a multicast address stores whole 4-byte words (multimem.st). \
                     Fix: write a whole number of words from a 4-byte aligned element (an even \
                     number of 16-bit or a multiple of 4 of 8-bit elements)"
                .to_string(),
        })
    }
}

impl<T: CollectiveElem + Copy> MulticastView<'_, T> {
    /// Writes `src` (as long as the view) into every team member's copy of the tensor through
    /// the multicast address (`multimem.st`, a kernel on the context's stream), and waits for
    /// it. The other members see the data after a barrier, as after a put. The bytes must be
    /// whole 4-byte words; other lengths are an error naming the fix.
    pub fn copy_from(&mut self, src: &[T]) -> Result<()> {
        check_len("the source slice", src.len(), self.len())?;
        let bytes = std::mem::size_of_val(src);
        let n = words(bytes, self.as_device_ptr())?;
        let pgas = self.pgas();
        let stream = pgas.stream();
        pgas.inner.bind()?;
        // SAFETY: `src` is `bytes` bytes of scalars without padding (CollectiveElem is sealed to
        // NVSHMEM's 1- to 8-byte scalar types), whole 4-byte words (checked), and u32 has no
        // invalid bit patterns; the slice lives for the copy, which clone_htod
        // finishes before it returns.
        let as_words: &[u32] = unsafe { std::slice::from_raw_parts(src.as_ptr().cast(), n) };
        let local = stream.clone_htod(as_words)?;
        let threads = 256u32;
        let blocks = n.div_ceil(threads as usize).clamp(1, 1024) as u32;
        // SAFETY: the arguments match pgas_multicast_store_b32(unsigned long long, const
        // unsigned int *, unsigned long long) (`push_local` is the pointer and its length, n),
        // and the multicast address holds the view's `n` words on every member.
        unsafe {
            kernel().launch(
                &pgas,
                LaunchConfig::blocks(blocks, threads),
                KernelArgs::new()
                    .push_scalar(self.as_device_ptr())
                    .push_local(&local),
            )?
        };
        stream
            .synchronize()
            .map_err(Error::cuda("waiting for the multicast write"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multicast_write_is_whole_words() {
        assert_eq!(words(16, 0x1000).unwrap(), 4);
        let e = words(6, 0x1000).unwrap_err().to_string();
        assert!(e.contains("4-byte words") && e.contains("Fix:"), "{e}");
        assert!(words(8, 0x1002).is_err());
    }
}
