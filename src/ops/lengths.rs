//! The length checks of the operations' calls: each buffer's length against the one its shape
//! needs, the first that does not fit an [`Error::LengthMismatch`] before anything is enqueued.

use crate::{Error, Result};

/// One buffer of a call: what it is (named in the error), its length, the length it needs.
pub(crate) type Length = (&'static str, usize, usize);

/// [`Error::LengthMismatch`] for the first buffer whose length is not exactly the one it needs.
pub(crate) fn exactly(buffers: &[Length]) -> Result<()> {
    first_misfit(buffers, |got, needed| got != needed)
}

/// [`Error::LengthMismatch`] for the first buffer shorter than it needs.
pub(crate) fn at_least(buffers: &[Length]) -> Result<()> {
    first_misfit(buffers, |got, needed| got < needed)
}

/// The error for the first buffer whose length and needed length `misfit`.
fn first_misfit(buffers: &[Length], misfit: impl Fn(usize, usize) -> bool) -> Result<()> {
    match buffers
        .iter()
        .find(|&&(_, got, needed)| misfit(got, needed))
    {
        Some(&(what, got, expected)) => Err(Error::LengthMismatch {
            what,
            got,
            expected,
        }),
        None => Ok(()),
    }
}
