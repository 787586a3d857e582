//! The unique-id bootstrap, shared by the single-PE, `pgas-run` and MPI bootstraps: rank 0 creates
//! NVSHMEM's unique id, some channel hands its bytes to the other ranks, every rank initializes.

use super::rendezvous;
use crate::error::Result;
use crate::ffi;
use crate::nvshmem::Nvshmem;

/// The unique-id bootstrap: rank 0 creates the id, `exchange` hands it to the others (on rank 0
/// it sends, elsewhere it fills `id` in), then every rank initializes with it.
pub(crate) fn init(
    nv: &Nvshmem,
    rank: usize,
    size: usize,
    exchange: impl FnOnce(&mut ffi::nvshmemx_uniqueid_t) -> Result<()>,
) -> Result<()> {
    let hint = "Check that every rank runs the same program and that NVSHMEM_DEBUG=INFO shows no \
                network error (NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME picks the interface)";
    let mut id = ffi::empty_uniqueid();
    if rank == 0 {
        // SAFETY: `id` is a versioned unique id (empty_uniqueid) NVSHMEM writes into; callable
        // before init.
        let status = unsafe { nv.raw().nvshmemx_get_uniqueid(&mut id) };
        Nvshmem::check(status, "nvshmemx_get_uniqueid", hint)?;
    }
    exchange(&mut id)?;
    let mut attr = ffi::init_attr();
    // SAFETY: `id` and `attr` are live, versioned NVSHMEM structs; NVSHMEM copies the id into
    // `attr`, which outlives the init call below that reads it.
    let status = unsafe {
        nv.raw()
            .nvshmemx_set_attr_uniqueid_args(rank as i32, size as i32, &id, &mut attr)
    };
    Nvshmem::check(status, "nvshmemx_set_attr_uniqueid_args", hint)?;
    let flags = ffi::flags::NVSHMEMX_INIT_WITH_UNIQUEID as u32;
    // SAFETY: `attr` was filled by nvshmemx_set_attr_uniqueid_args; once per process, as above.
    let status = unsafe { nv.raw().nvshmemx_hostlib_init_attr(flags, &mut attr) };
    Nvshmem::check(status, "nvshmemx_hostlib_init_attr (unique id)", hint)?;
    Ok(())
}

/// The bytes of a unique id, for sending.
pub(crate) fn to_bytes(id: &ffi::nvshmemx_uniqueid_t) -> [u8; rendezvous::ID_LEN] {
    // SAFETY: nvshmemx_uniqueid_t is a 128-byte plain C struct (checked by the bindgen layout
    // test), so its bytes are ID_LEN initialized bytes.
    unsafe { std::mem::transmute_copy(id) }
}

/// A unique id from received bytes.
pub(crate) fn from_bytes(bytes: &[u8; rendezvous::ID_LEN]) -> ffi::nvshmemx_uniqueid_t {
    // SAFETY: ID_LEN bytes are the size of nvshmemx_uniqueid_t, a plain C struct of integers
    // and bytes for which every bit pattern is a value.
    unsafe { std::mem::transmute_copy(bytes) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_round_trips_through_bytes() {
        let mut id = ffi::empty_uniqueid();
        id.internal[7] = 42;
        let back = from_bytes(&to_bytes(&id));
        assert_eq!(back.version, id.version);
        assert_eq!(back.internal[7], 42);
    }
}
