//! The unique-id bootstrap, shared by the single-PE, `pgas-run` and MPI bootstraps and by
//! programs that hand the id around themselves ([`UniqueId`]): rank 0 creates NVSHMEM's unique
//! id, some channel hands its bytes to the other ranks, every rank initializes.

use std::fmt;

use super::rendezvous;
use crate::error::{Error, Result};
use crate::ffi;
use crate::nvshmem::{self, Nvshmem};

/// NVSHMEM's unique id (`nvshmemx_uniqueid_t`, 128 bytes), for a start-up that the program
/// drives itself: rank 0 makes one with [`UniqueId::new`], sends [`UniqueId::as_bytes`] to the
/// other ranks over any channel (a file, a socket, MPI, a torch.distributed store), each rank
/// rebuilds it with [`UniqueId::from_bytes`] and initializes with
/// `pgas::builder().unique_id(id, rank, n_pes).init()` (see [`crate::PgasBuilder::unique_id`]).
///
/// The id names a socket that rank 0's NVSHMEM listens on, so it is good for one start-up of
/// one job, and the process that made it must be rank 0.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct UniqueId {
    bytes: [u8; rendezvous::ID_LEN],
}

impl UniqueId {
    /// Bytes in an id.
    pub const LEN: usize = rendezvous::ID_LEN;

    /// A fresh id (`nvshmemx_get_uniqueid`), for rank 0 to hand out. Finds and loads NVSHMEM
    /// (as [`crate::init`] does; the later `init` reuses it) and needs no GPU. NVSHMEM may read
    /// its `NVSHMEM_*` variables here, so set them (and the heap size) before.
    pub fn new() -> Result<UniqueId> {
        let (nv, _) = nvshmem::load_once()?;
        let mut id = ffi::empty_uniqueid();
        // SAFETY: `id` is a versioned unique id (empty_uniqueid) NVSHMEM writes into; callable
        // before init.
        let status = unsafe { nv.raw().nvshmemx_get_uniqueid(&mut id) };
        Nvshmem::check(status, "nvshmemx_get_uniqueid", HINT)?;
        Ok(UniqueId {
            bytes: to_bytes(&id),
        })
    }

    /// The id's bytes, to send to the other ranks.
    pub fn as_bytes(&self) -> &[u8; Self::LEN] {
        &self.bytes
    }

    /// An id from the bytes rank 0 sent. Refuses a slice of another length, and an id whose
    /// version word is not the one of the NVSHMEM pgas was built for (bytes of something else,
    /// or of an NVSHMEM with another id layout), with the fix.
    pub fn from_bytes(bytes: &[u8]) -> Result<UniqueId> {
        let bytes: [u8; Self::LEN] = bytes.try_into().map_err(|_| Error::Bootstrap {
            method: "unique id",
            reason: format!(
                "{} bytes were given, a unique id has {}. Fix: send all of \
                 UniqueId::as_bytes() and pass exactly those bytes",
                bytes.len(),
                Self::LEN
            ),
        })?;
        let want = ffi::empty_uniqueid().version;
        let got = from_bytes(&bytes).version;
        if got != want {
            return Err(Error::Bootstrap {
                method: "unique id",
                reason: format!(
                    "the bytes carry version word {got:#x}, NVSHMEM's unique ids {want:#x}: they \
                     are not a UniqueId's bytes, or came from an NVSHMEM with another id layout. \
                     Fix: send UniqueId::as_bytes() unchanged, and run every rank with the same \
                     NVSHMEM (PGAS_NVSHMEM_HOME)"
                ),
            });
        }
        Ok(UniqueId { bytes })
    }

    /// The id in NVSHMEM's form.
    pub(crate) fn to_raw(self) -> ffi::nvshmemx_uniqueid_t {
        from_bytes(&self.bytes)
    }

    /// The bytes of an empty id (version word only), for tests of the checks.
    #[cfg(test)]
    pub(crate) fn empty_bytes() -> [u8; Self::LEN] {
        to_bytes(&ffi::empty_uniqueid())
    }
}

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The bytes are an address and a nonce: a short fingerprint tells ids apart in logs.
        let sum = self
            .bytes
            .iter()
            .fold(0u32, |h, &b| h.rotate_left(5) ^ u32::from(b));
        write!(f, "UniqueId({sum:08x})")
    }
}

/// What [`crate::PgasBuilder::unique_id`] records: the id and this rank's place in the job.
#[derive(Clone, Copy, Debug)]
pub struct UniqueIdArgs {
    /// The id rank 0 made.
    pub id: UniqueId,
    /// This process's rank, in `0..n_pes`.
    pub rank: usize,
    /// The number of ranks.
    pub n_pes: usize,
}

const HINT: &str = "Check that every rank runs the same program and that NVSHMEM_DEBUG=INFO shows \
                    no network error (NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME picks the interface)";

/// The unique-id bootstrap: rank 0 creates the id, `exchange` hands it to the others (on rank 0
/// it sends, elsewhere it fills `id` in), then every rank initializes with it.
pub(crate) fn init(
    nv: &Nvshmem, rank: usize, size: usize,
    exchange: impl FnOnce(&mut ffi::nvshmemx_uniqueid_t) -> Result<()>,
) -> Result<()> {
    let mut id = ffi::empty_uniqueid();
    if rank == 0 {
        // SAFETY: `id` is a versioned unique id (empty_uniqueid) NVSHMEM writes into; callable
        // before init.
        let status = unsafe { nv.raw().nvshmemx_get_uniqueid(&mut id) };
        Nvshmem::check(status, "nvshmemx_get_uniqueid", HINT)?;
    }
    exchange(&mut id)?;
    init_with(nv, rank, size, &id)
}

/// Initializes this rank with an id every rank holds.
pub(crate) fn init_with(
    nv: &Nvshmem, rank: usize, size: usize, id: &ffi::nvshmemx_uniqueid_t,
) -> Result<()> {
    let mut attr = ffi::init_attr();
    // SAFETY: `id` and `attr` are live, versioned NVSHMEM structs; NVSHMEM copies the id into
    // `attr`, which outlives the init call below that reads it.
    let status = unsafe {
        nv.raw()
            .nvshmemx_set_attr_uniqueid_args(rank as i32, size as i32, id, &mut attr)
    };
    Nvshmem::check(status, "nvshmemx_set_attr_uniqueid_args", HINT)?;
    let flags = ffi::flags::NVSHMEMX_INIT_WITH_UNIQUEID as u32;
    // SAFETY: `attr` was filled by nvshmemx_set_attr_uniqueid_args; once per process, as above.
    let status = unsafe { nv.raw().nvshmemx_hostlib_init_attr(flags, &mut attr) };
    Nvshmem::check(status, "nvshmemx_hostlib_init_attr (unique id)", HINT)?;
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

    #[test]
    fn ids_from_bytes_are_checked_for_length_and_version() {
        let bytes = UniqueId::empty_bytes();
        let id = UniqueId::from_bytes(&bytes).unwrap();
        assert_eq!(id.as_bytes(), &bytes);
        assert_eq!(id.to_raw().version, ffi::empty_uniqueid().version);
        let e = UniqueId::from_bytes(&bytes[..64]).unwrap_err().to_string();
        assert!(e.contains("64 bytes") && e.contains("has 128"), "{e}");
        let mut other = bytes;
        other[..4].copy_from_slice(&((1i32 << 16) + 64).to_le_bytes());
        let e = UniqueId::from_bytes(&other).unwrap_err().to_string();
        assert!(
            e.contains("version word 0x10040") && e.contains("same NVSHMEM"),
            "{e}"
        );
    }
}
