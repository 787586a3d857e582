//! Finding, loading and checking NVSHMEM: [`discover::find`] locates an install,
//! [`Nvshmem::load`] opens its host library and checks its version against the headers, and
//! [`transport`] says what its remote transport needs on this machine.

pub mod discover;
mod loader;
pub mod transport;
pub mod version;

pub use discover::{find, FoundVia, NvshmemInstall};
pub(crate) use loader::load_once;
pub use loader::Nvshmem;
