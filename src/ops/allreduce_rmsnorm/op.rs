//! [`AllReduceRmsNorm`]'s calls: the checks of a call and the launches of the kernels (the plan
//! is `plan.rs`).

use cudarc::driver::CudaStream;
use pgas_runtime::kernel::Variant;
use pgas_runtime::launch::KernelArgs;

use super::kernels::{allreduce_add_rmsnorm, allreduce_add_rmsnorm_ll};
use super::plan::{LlScratch, LL_MAX_SHARED_BYTES, LOCAL, ONE_SHOT, THREADS, TWO_SHOT};
use super::AllReduceRmsNorm;
use crate::coll::{Algorithm, Options};
use crate::prelude::*;
use crate::{Error, Result, SymRegion, SymTensor, Team};

/// A call's buffers as the kernels take them: the input (`x`, or rows already reduced), the
/// residual, the weight and the output.
type Rows<'a> = (
    &'a dyn SymRegion<bf16>,
    &'a mut dyn SymRegion<bf16>,
    &'a dyn SymRegion<bf16>,
    &'a mut dyn SymRegion<bf16>,
);

impl AllReduceRmsNorm {
    /// Enqueues one call on `how`'s stream ([`Options`]; the context's, [`Pgas::stream`], by
    /// default) by `how`'s algorithm: `residual = bf16(sum over PEs of x + residual)` and
    /// `out = RMSNorm(residual) * weight`, on every PE, for `x.len() / hidden` tokens. Not
    /// waited for on the host. When it completes on a PE, that PE's `residual` and `out` hold
    /// the results and no peer reads its `x` or writes its buffers any more. Returns the
    /// algorithm used.
    ///
    /// The algorithms: `Auto` ([`AllReduceRmsNorm::algorithm_for`]'s choice), `OneShot`,
    /// `TwoShot` or `LowLatency` (where [`AllReduceRmsNorm::low_latency_available`]: no entry
    /// or leave handshake, each PE's rows sent as LL lines into every peer's scratch; see
    /// [`allreduce_add_rmsnorm_ll`]). `Nvshmem` is an `Err`. Every PE must pass the same.
    ///
    /// Errors, on the calling PE before anything is enqueued: `x` not a whole number of rows or
    /// more than `max_tokens` of them; `residual` or `out` of another length than `x`, `weight`
    /// not `hidden` long; a buffer not 16-byte aligned or not in the symmetric heap; buffers
    /// that overlap. Token counts that differ between PEs cannot be seen here: they are the
    /// caller's contract, as in NCCL.
    pub fn run<'s>(
        &mut self, x: &impl SymRegion<bf16>, residual: &mut impl SymRegion<bf16>,
        weight: &impl SymRegion<bf16>, out: &mut impl SymRegion<bf16>, how: impl Into<Options<'s>>,
    ) -> Result<Algorithm> {
        let how: Options<'s> = how.into();
        let algorithm = how.algorithm;
        let mut own = None;
        let stream = how.stream_or(&self.pgas, &mut own);
        let tokens = self.check_call("x", x, &*residual, weight, &*out)?;
        if let Some(mut reduced) = self.off_node.take() {
            // Taken for the call (the norm kernel's launch borrows `self`), then put back.
            let result = self.run_off_node(
                stream,
                &mut reduced,
                tokens,
                (x, residual, weight, out),
                algorithm,
            );
            self.off_node = Some(reduced);
            return result;
        }
        let algorithm = self.fused_algorithm(algorithm, tokens)?;
        self.check_reachable(x, &*residual, weight, &*out)?;
        if tokens == 0 {
            return Ok(algorithm);
        }
        let low_latency = algorithm == Algorithm::LowLatency;
        if let Some(mut ll) = self.ll_scratch.take_if(|_| low_latency) {
            // Taken for the launch (which borrows `self`), then put back.
            let launched =
                self.launch_low_latency(stream, &mut ll, (x, residual, weight, out), tokens);
            self.ll_scratch = Some(ll);
            return launched.map(|()| algorithm);
        }
        let (mode, rows) = if algorithm == Algorithm::TwoShot {
            (TWO_SHOT, tokens.div_ceil(self.n))
        } else {
            (ONE_SHOT, tokens)
        };
        let blocks = rows.clamp(1, self.max_blocks) as u32;
        self.launch_fused(stream, (x, residual, weight, out), tokens, blocks, mode)?;
        Ok(algorithm)
    }

    /// Launches [`allreduce_add_rmsnorm_ll`] for `tokens` rows, with the LL scratch, barrier
    /// words and partial sums `ll` (the operation's, taken for the call).
    fn launch_low_latency(
        &self, stream: &CudaStream, (scratch, sync, partial): &mut LlScratch,
        (x, residual, weight, out): Rows<'_>, tokens: usize,
    ) -> Result<()> {
        let n = self.n;
        let slices = self.ll_slices(tokens);
        let mut args = KernelArgs::new();
        args.push_team(Team::WORLD)
            .push_sym(x)
            .push_sym_mut(residual)
            .push_sym(weight)
            .push_sym_mut(out)
            .push_sym_mut(scratch)
            .push_sym_mut(sync)
            .push_sym_mut(partial)
            .push_scalar(self.ll_region as u32)
            .push_scalar(tokens as u32)
            .push_scalar(self.hidden as u32)
            .push_scalar(slices as u32)
            .push_scalar(self.eps);
        // Groups of `slices` blocks, a row at a time each.
        let groups = tokens.clamp(1, self.ll_blocks / slices);
        let blocks = (groups * slices) as u32;
        let shared = (n * self.hidden / slices * 2) as u32;
        pgas_runtime::launch::launch(
            &self.pgas,
            &allreduce_add_rmsnorm_ll::SPEC,
            Variant::Plain,
            &[n as i128],
            LaunchConfig::blocks(blocks, THREADS).with_shared_mem(shared),
            Some(stream),
            &mut args,
        )
    }

    /// Launches [`allreduce_add_rmsnorm`] in `mode` for `tokens` rows of `input`, in `blocks`
    /// blocks: one-shot and two-shot as this PE's team rank, over the team; [`LOCAL`]
    /// (exchanging nothing, so no peer needs to be reachable) as the lone PE of a team of one.
    fn launch_fused(
        &mut self, stream: &CudaStream, (input, residual, weight, out): Rows<'_>, tokens: usize,
        blocks: u32, mode: i128,
    ) -> Result<()> {
        let (n, me, flags) = if mode == LOCAL {
            (1, 0, self.comm.local_flags()?.1)
        } else {
            let (me, flags) = self.comm.kernel_flags("AllReduceRmsNorm")?;
            (self.n, me, flags)
        };
        let mut args = KernelArgs::new();
        args.push_sym(input)
            .push_sym_mut(residual)
            .push_sym(weight)
            .push_sym_mut(out)
            .push_sym(flags.pes)
            .push_sym_mut(flags.sig)
            .push_sym_mut(flags.epochs)
            .push_scalar(me as u32)
            .push_scalar(tokens as u32)
            .push_scalar(self.hidden as u32)
            .push_scalar(self.eps);
        pgas_runtime::launch::launch(
            &self.pgas,
            &allreduce_add_rmsnorm::SPEC,
            Variant::Plain,
            &[n as i128, mode],
            LaunchConfig::blocks(blocks, THREADS),
            Some(stream),
            &mut args,
        )
    }

    /// `algorithm` for a fused call of `tokens` rows, `Auto` resolved; an algorithm the kernel
    /// has no form of, or low latency where its rows do not fit a block's shared memory, is an
    /// `Err`.
    fn fused_algorithm(&self, algorithm: Algorithm, tokens: usize) -> Result<Algorithm> {
        Ok(match algorithm {
            Algorithm::Auto => self.algorithm_for(tokens),
            a @ (Algorithm::OneShot | Algorithm::TwoShot) => a,
            Algorithm::LowLatency if self.ll_scratch.is_some() => Algorithm::LowLatency,
            Algorithm::LowLatency => {
                return Err(Error::InvalidConfig {
                    name: "AllReduceRmsNorm algorithm",
                    value: format!(
                        "LowLatency with {} PEs x hidden {} x 2 bytes of rows",
                        self.n, self.hidden
                    ),
                    reason: format!(
                        "the low-latency form gathers every PE's row into a block's shared \
                         memory, at most LL_MAX_SHARED_BYTES ({LL_MAX_SHARED_BYTES}). Fix: pass \
                         Algorithm::Auto, OneShot or TwoShot"
                    ),
                });
            }
            other => {
                return Err(Error::InvalidConfig {
                    name: "AllReduceRmsNorm algorithm",
                    value: format!("{other:?}"),
                    reason: "the fused kernel has one-shot, two-shot and low-latency forms only. \
                             Fix: pass Algorithm::Auto, OneShot, TwoShot or LowLatency"
                        .into(),
                });
            }
        })
    }

    /// `Ok` when every buffer of a fused call is in NVSHMEM's symmetric heap, where peers reach
    /// it.
    fn check_reachable(
        &self, x: &impl SymRegion<bf16>, residual: &impl SymRegion<bf16>,
        weight: &impl SymRegion<bf16>, out: &impl SymRegion<bf16>,
    ) -> Result<()> {
        for (what, ptr, len) in [
            ("x (peers load it)", x.as_device_ptr(), x.len()),
            (
                "residual (peers store into it, two-shot)",
                residual.as_device_ptr(),
                residual.len(),
            ),
            ("out", out.as_device_ptr(), out.len()),
            ("weight", weight.as_device_ptr(), weight.len()),
        ] {
            if !self.pgas.in_symmetric_heap(ptr, len * 2) {
                return Err(Error::InvalidConfig {
                    name: "AllReduceRmsNorm buffer",
                    value: format!("{what} at {ptr:#x} ({} bytes)", len * 2),
                    reason: "it is not inside NVSHMEM's symmetric heap, so peers cannot reach \
                             it. Fix: allocate it with Pgas::alloc (or take a view of such a \
                             tensor)"
                        .into(),
                });
            }
        }
        Ok(())
    }

    /// The off-node form of [`AllReduceRmsNorm::run`]: `pgas::coll`'s all-reduce of `x`
    /// into the operation's buffer (the algorithm [`Comm`]'s `Auto` takes where some peer is
    /// off NVLink: NVSHMEM's, or the hierarchical one), then the norm kernel on it. The sum is
    /// rounded to `bf16` before the residual is added, so the residual can differ from the
    /// fused kernel's (which adds in `f32`) by one `bf16` step. Returns the all-reduce's
    /// algorithm.
    fn run_off_node<X, R, W, O>(
        &mut self, stream: &CudaStream, reduced: &mut SymTensor<bf16>, tokens: usize,
        (x, residual, weight, out): (&X, &mut R, &W, &mut O), algorithm: Algorithm,
    ) -> Result<Algorithm>
    where
        X: SymRegion<bf16>,
        R: SymRegion<bf16>,
        W: SymRegion<bf16>,
        O: SymRegion<bf16>,
    {
        if algorithm != Algorithm::Auto {
            return Err(Error::InvalidConfig {
                name: "AllReduceRmsNorm algorithm",
                value: format!("{algorithm:?} with a peer off NVLink"),
                reason: "some PE is not load/store reachable, so the fused kernel's forms \
                         cannot run; the operation all-reduces with pgas::coll and then \
                         normalizes. Fix: pass Algorithm::Auto"
                    .into(),
            });
        }
        if tokens == 0 {
            return Ok(Algorithm::Auto);
        }
        let mut sum = reduced.view_mut(0..tokens * self.hidden)?;
        let used = self
            .comm
            .all_reduce(&mut sum, x, ReduceOp::Sum, Algorithm::Auto.on(stream))?;
        self.add_rms_norm_on(stream, &sum, residual, weight, out)?;
        Ok(used)
    }

    /// The unfused second half, for an input that is already all-reduced (by NCCL, or
    /// [`Comm::all_reduce`](crate::coll::Comm::all_reduce)): `residual = bf16(reduced +
    /// residual)` and `out = RMSNorm(residual) * weight`, on this PE only (no exchange, no flags: any PE may
    /// call it alone), with the same arithmetic as the fused kernel (the same kernel, without
    /// its exchange). Same buffer rules as [`AllReduceRmsNorm::run`], but none needs to be
    /// reachable by peers.
    pub fn add_rms_norm_on(
        &mut self, stream: &CudaStream, reduced: &impl SymRegion<bf16>,
        residual: &mut impl SymRegion<bf16>, weight: &impl SymRegion<bf16>,
        out: &mut impl SymRegion<bf16>,
    ) -> Result<()> {
        let tokens = self.check_call("reduced", reduced, &*residual, weight, &*out)?;
        if tokens == 0 {
            return Ok(());
        }
        // No residency needed (no block waits for another): one block a row. The LOCAL form
        // exchanges nothing, so its flags need no reachable peer (the off-node form runs it).
        let blocks = tokens.min(65535) as u32;
        self.launch_fused(
            stream,
            (reduced, residual, weight, out),
            tokens,
            blocks,
            LOCAL,
        )
    }

    /// The per-call checks of the buffers' lengths, alignment and overlap; returns the tokens.
    fn check_call(
        &self, input: &'static str, x: &impl SymRegion<bf16>, residual: &impl SymRegion<bf16>,
        weight: &impl SymRegion<bf16>, out: &impl SymRegion<bf16>,
    ) -> Result<usize> {
        let h = self.hidden;
        if !x.len().is_multiple_of(h) {
            return Err(Error::InvalidConfig {
                name: "AllReduceRmsNorm input",
                value: format!("{input}: {} elements", x.len()),
                reason: format!(
                    "the input holds whole rows of hidden = {h} elements. Fix: pass tokens x \
                     {h} elements"
                ),
            });
        }
        let tokens = x.len() / h;
        if tokens > self.max_tokens {
            return Err(Error::InvalidConfig {
                name: "AllReduceRmsNorm tokens",
                value: format!("{tokens} tokens"),
                reason: format!(
                    "the operation was made for at most {} tokens a call. Fix: make it with a \
                     larger max_tokens, or split the call",
                    self.max_tokens
                ),
            });
        }
        crate::ops::lengths::exactly(&[
            ("the residual (the input's length)", residual.len(), x.len()),
            ("out (the input's length)", out.len(), x.len()),
            ("weight (hidden)", weight.len(), h),
        ])?;
        let bufs = [
            (input, x.as_device_ptr(), x.len() * 2),
            ("residual", residual.as_device_ptr(), residual.len() * 2),
            ("weight", weight.as_device_ptr(), weight.len() * 2),
            ("out", out.as_device_ptr(), out.len() * 2),
        ];
        for &(what, ptr, _) in &bufs {
            if ptr % 16 != 0 {
                return Err(Error::InvalidConfig {
                    name: "AllReduceRmsNorm buffer",
                    value: format!("{what} at {ptr:#x}"),
                    reason: "rows move as 16-byte vectors, so every buffer must start at a \
                             16-byte boundary. Fix: pass whole tensors or views that start at a \
                             multiple of 8 elements"
                        .into(),
                });
            }
        }
        for (i, &(a, pa, la)) in bufs.iter().enumerate() {
            for &(b, pb, lb) in &bufs[i + 1..] {
                if la > 0 && lb > 0 && pa < pb + lb as u64 && pb < pa + la as u64 {
                    return Err(Error::InvalidConfig {
                        name: "AllReduceRmsNorm buffers",
                        value: format!("{a} at {pa:#x} ({la} bytes), {b} at {pb:#x} ({lb} bytes)"),
                        reason: format!(
                            "{a} and {b} overlap; the kernel reads some while it writes others. \
                             Fix: pass four separate buffers"
                        ),
                    });
                }
            }
        }
        Ok(tokens)
    }
}
