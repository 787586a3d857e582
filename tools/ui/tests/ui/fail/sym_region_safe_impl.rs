// A `SymRegion` hands its pointer to NVSHMEM and to kernels on every PE, so implementing it is a
// promise that the pointer names live symmetric memory: the trait is `unsafe`, and an
// implementation without `unsafe impl` (here, a region over a plain CUDA allocation that
// `Pgas::put` would otherwise have accepted) does not compile.

use pgas::SymRegion;

struct Plain(u64, usize);

impl SymRegion<f32> for Plain {
    fn as_device_ptr(&self) -> u64 {
        self.0
    }
    fn len(&self) -> usize {
        self.1
    }
}

fn main() -> pgas::Result<()> {
    let pgas = pgas::init()?;
    let src = pgas.alloc::<f32>(4)?;
    pgas.put(&Plain(0x7f00_0000_0000, 4), &src, 0)
}
