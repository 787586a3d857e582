//! How one collective call runs ([`Options`]): the stream it is ordered on and the algorithm.
//! Every collective of a [`Comm`] takes them as its last argument, in one call form.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::comm::{Algorithm, Comm};
use crate::{Error, Pgas, Result};

/// The options of a collective call. An [`Algorithm`] converts into them (on the context's
/// stream), and [`Algorithm::on`] names a stream too:
///
/// ```no_run
/// # use pgas::coll::{Algorithm, Comm};
/// # use pgas::prelude::*;
/// # fn f(comm: &mut Comm, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, stream: &pgas::cudarc::driver::CudaStream) -> pgas::Result<()> {
/// comm.all_reduce(dst, src, ReduceOp::Sum, Algorithm::Auto)?; // the context's stream
/// comm.all_reduce(dst, src, ReduceOp::Sum, Algorithm::OneShot.on(stream))?;
/// # Ok(())
/// # }
/// ```
///
/// On its own stream a call is ordered after the work already there and not waited for on the
/// host, so it can be captured into a CUDA graph once its kernel has run or been prewarmed
/// ([`prewarm`](super::prewarm)); on the context's stream too, which is one stream like any
/// other.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options<'s> {
    /// The stream the call is ordered on; `None`: the context's ([`crate::Pgas::stream`]).
    pub stream: Option<&'s CudaStream>,
    /// The algorithm ([`Algorithm::Auto`] by default: each collective's choice by size and
    /// reach, which its documentation gives).
    pub algorithm: Algorithm,
}

impl From<Algorithm> for Options<'_> {
    fn from(algorithm: Algorithm) -> Self {
        Options {
            stream: None,
            algorithm,
        }
    }
}

impl Algorithm {
    /// This algorithm on `stream`: the [`Options`] of a call ordered on it.
    pub fn on(self, stream: &CudaStream) -> Options<'_> {
        Options {
            stream: Some(stream),
            algorithm: self,
        }
    }
}

impl Options<'_> {
    /// [`Error::InvalidConfig`] unless the algorithm is [`Algorithm::Auto`], for a collective
    /// (`what`) that chooses its own.
    pub(super) fn auto_only(&self, what: &'static str) -> Result<()> {
        if self.algorithm == Algorithm::Auto {
            return Ok(());
        }
        Err(Error::InvalidConfig {
            name: what,
            value: format!("Algorithm::{:?}", self.algorithm),
            reason: "this collective chooses its algorithm itself (its documentation says how); \
                     pass Algorithm::Auto"
                .to_owned(),
        })
    }
}

impl<'s> Options<'s> {
    /// The stream the call runs on: the one given, or `pgas`'s, cloned into `own` only then, so
    /// that the returned stream borrows neither `pgas` nor its owner (whose launches take
    /// `&mut self`).
    pub(crate) fn stream_or<'a>(
        self, pgas: &Pgas, own: &'a mut Option<Arc<CudaStream>>,
    ) -> &'a CudaStream
    where
        's: 'a,
    {
        match self.stream {
            Some(stream) => stream,
            None => own.insert(pgas.stream().clone()),
        }
    }
}

impl Comm {
    /// Runs `call` on the stream of `how` (its own, or the context's) with its algorithm.
    pub(super) fn on_stream<'s, R>(
        &mut self, how: impl Into<Options<'s>>,
        call: impl FnOnce(&mut Comm, &CudaStream, Algorithm) -> Result<R>,
    ) -> Result<R> {
        let how = how.into();
        let mut own = None;
        let stream = how.stream_or(&self.pgas, &mut own);
        call(self, stream, how.algorithm)
    }
}
