//! Peers' copies of symmetric tensors as addresses of this process, for the operations that
//! move data by copy engine or stream memory operations between mapped buffers.

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::DeviceRepr;

use crate::{Error, Pgas, Result, SymTensor};

/// `t`'s address on every PE (NVLink-mapped), by PE; 0 where it is not mapped here (callers
/// refuse those first, with [`crate::Pgas::first_unreachable`]).
pub(super) fn addresses<T: DeviceRepr>(t: &SymTensor<T>, n_pes: usize) -> Result<Vec<CUdeviceptr>> {
    (0..n_pes)
        .map(|pe| Ok(t.peer(pe)?.map_or(0, |v| v.as_device_ptr())))
        .collect()
}

/// The most PEs that run on one GPU (compared by the device's UUID, gathered from every PE): 1
/// where each PE has its own. Collective.
pub(super) fn most_on_one_gpu(pgas: &Pgas) -> Result<usize> {
    if pgas.n_pes() < 2 {
        return Ok(1);
    }
    let uuid = pgas
        .cuda()
        .uuid()
        .map_err(Error::cuda("reading the GPU's UUID"))?;
    let bytes: Vec<u8> = uuid.bytes.iter().map(|&b| b as u8).collect();
    let words = [
        u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default()),
        u64::from_le_bytes(bytes[8..].try_into().unwrap_or_default()),
    ];
    Ok(most_alike(&super::agree::gather_words(pgas, &words)?))
}

/// The largest number of equal UUIDs (two words each) in `uuids`; 1 for none.
fn most_alike(uuids: &[u64]) -> usize {
    let gpus: Vec<&[u64]> = uuids.chunks(2).collect();
    gpus.iter()
        .map(|g| gpus.iter().filter(|h| h == &g).count())
        .max()
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::most_alike;

    #[test]
    fn pes_on_one_gpu_are_counted_by_uuid() {
        assert_eq!(most_alike(&[]), 1);
        assert_eq!(most_alike(&[1, 2]), 1);
        // Four PEs on two GPUs, two each; then three of four on one.
        assert_eq!(most_alike(&[1, 2, 3, 4, 1, 2, 3, 4]), 2);
        assert_eq!(most_alike(&[7, 7, 7, 8, 7, 7, 7, 7]), 3);
        // The second word tells GPUs apart too.
        assert_eq!(most_alike(&[1, 2, 1, 3]), 1);
    }
}
