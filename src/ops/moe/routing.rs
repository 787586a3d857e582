//! One PE's top-k routing ([`Routing`]), checked against the dispatcher's sizes, and what a
//! dispatch delivered ([`RecvCounts`]).

use super::config::MoeConfig;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, SyncOnDrop};

/// One PE's top-k routing for one call, checked against every PE's by
/// [`MoeDispatcher::route`](super::MoeDispatcher::route) and kept on the GPU.
pub struct Routing {
    pub(super) tokens: usize,
    pub(super) idx: CudaSlice<i32>,
    pub(super) weights: CudaSlice<f32>,
    /// `idx`'s and `weights`' device addresses, taken once when routed: a dispatch on the
    /// stream they were copied and will be freed on passes them as they are, with none of
    /// cudarc's event waits and records (see [`Routing::pointers`]).
    pub(super) raw: (u64, u64),
    /// Which `route` call made it: combine must use the routing of the last dispatch.
    pub(super) id: u64,
}

crate::debug::debug_fields!(|r: Routing| tokens: r.tokens, id: r.id);

impl Routing {
    /// Tokens routed on this PE.
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// `idx`'s and `weights`' addresses for kernels on `stream`. On `home`, the stream the
    /// routing was copied on (its buffers are freed there too, after what it queued), stream
    /// order alone keeps them valid and written, so the addresses go as they are; on another
    /// stream, cudarc's guards (the stream waits for the copy, and the buffers' free for the
    /// kernels), which the caller holds until it has launched.
    pub(super) fn pointers<'a>(
        &'a self, stream: &'a CudaStream, home: &CudaStream,
    ) -> ((u64, u64), Option<(SyncOnDrop<'a>, SyncOnDrop<'a>)>) {
        if stream.cu_stream() == home.cu_stream() {
            return (self.raw, None);
        }
        let (i, gi) = self.idx.device_ptr(stream);
        let (w, gw) = self.weights.device_ptr(stream);
        ((i, w), Some((gi, gw)))
    }
}

/// What arrived on this PE in the last dispatch ([`MoeDispatcher::recv_counts`](super::MoeDispatcher::recv_counts)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvCounts {
    /// Rows from each source PE (they sit in PE order from row 0 of
    /// [`MoeDispatcher::recv_x`](super::MoeDispatcher::recv_x)).
    pub rows_from: Vec<usize>,
    /// Rows received in all.
    pub rows: usize,
    /// Pairs of each local expert.
    pub per_expert: Vec<usize>,
    /// Where each local expert's pairs start in [`MoeDispatcher::expert_rows`](super::MoeDispatcher::expert_rows) (and in the
    /// combine input), `experts_per_pe + 1` entries; the last is [`RecvCounts::pairs`].
    pub expert_offsets: Vec<usize>,
    /// Pairs received in all: the rows of combine's input.
    pub pairs: usize,
}

/// The first thing wrong with one PE's routing, as a sentence.
pub(super) fn check_routing(
    cfg: &MoeConfig, n: usize, idx: &[i32], weights: &[f32],
) -> std::result::Result<(), String> {
    let k = cfg.top_k;
    let experts = (n * cfg.experts_per_pe) as i32;
    if idx.len() != weights.len() {
        return Err(format!(
            "topk_idx has {} entries and topk_weights {}: they must match (tokens * top_k)",
            idx.len(),
            weights.len()
        ));
    }
    if !idx.len().is_multiple_of(k) {
        return Err(format!(
            "topk_idx has {} entries, not a multiple of top_k = {k}",
            idx.len()
        ));
    }
    let tokens = idx.len() / k;
    if tokens > cfg.max_tokens {
        return Err(format!(
            "{tokens} tokens, more than the dispatcher's max_tokens = {}",
            cfg.max_tokens
        ));
    }
    for t in 0..tokens {
        let ids = &idx[t * k..(t + 1) * k];
        for (j, &id) in ids.iter().enumerate() {
            if id < -1 || id >= experts {
                return Err(format!(
                    "token {t} slot {j}: expert id {id} is out of range: ids are 0..{experts} \
                     ({n} PEs x {} experts), or -1 for an unused slot",
                    cfg.experts_per_pe
                ));
            }
            if id >= 0 && ids[..j].contains(&id) {
                return Err(format!(
                    "token {t} slot {j}: expert {id} is already slot {} of the token: a token \
                     goes to each expert at most once",
                    ids.iter().position(|&x| x == id).unwrap_or(0)
                ));
            }
            if !weights[t * k + j].is_finite() {
                return Err(format!(
                    "token {t} slot {j}: weight {} is not finite",
                    weights[t * k + j]
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::config::TEST_CONFIG;
    use super::*;

    #[test]
    fn routing_errors_name_the_token_and_slot() {
        let c = TEST_CONFIG;
        assert_eq!(check_routing(&c, 2, &[0, 5, -1, 2], &[1.0; 4]), Ok(()));
        let e = check_routing(&c, 2, &[0, 6], &[1.0; 2]).unwrap_err();
        assert!(
            e.contains("token 0 slot 1: expert id 6 is out of range: ids are 0..6"),
            "{e}"
        );
        let e = check_routing(&c, 2, &[1, -2], &[1.0; 2]).unwrap_err();
        assert!(e.contains("expert id -2"), "{e}");
        let e = check_routing(&c, 2, &[0, 1, 3, 3], &[1.0; 4]).unwrap_err();
        assert!(
            e.contains("token 1 slot 1: expert 3 is already slot 0"),
            "{e}"
        );
        let e = check_routing(&c, 2, &[0, 1, 2], &[1.0; 3]).unwrap_err();
        assert!(e.contains("not a multiple of top_k = 2"), "{e}");
        let e = check_routing(&c, 2, &[0, 1], &[1.0]).unwrap_err();
        assert!(e.contains("must match"), "{e}");
        let e = check_routing(&c, 2, &[0; 10].map(|_| -1), &[1.0; 10]).unwrap_err();
        assert!(
            e.contains("5 tokens, more than the dispatcher's max_tokens = 4"),
            "{e}"
        );
        let e = check_routing(&c, 2, &[0, 1], &[1.0, f32::NAN]).unwrap_err();
        assert!(e.contains("weight NaN is not finite"), "{e}");
    }
}
