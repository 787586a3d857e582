//! The collective kernels (all-reduce one-shot and two-shot, reduce-scatter, all-gather), one
//! module per element type (each type is its own `#[pgas_kernel]`, the reduction a `#[comptime]`
//! code: small specializations of the peer-to-peer prelude, about a second each to compile).
//! The flag protocol and the 16-byte data path are `docs/coll.md`'s "Synchronization" and "Data
//! path". Each algorithm is one `macro_rules!` template per kind of type (`$t` the element, `$a`
//! the type it is reduced in, `$w` the elements in 16 bytes, `$bits` the bitwise reductions):
//! the reducing kernels' in `reducing.rs`, the data-movement kernels' (one per element size) in
//! `moving.rs`, and the pieces both paste (handshakes, reductions over the PEs, stores to every
//! PE) here.
//!
//! [`reduce_scatter`]: f32_::reduce_scatter
//! [`all_gather`]: move32::all_gather

/// Hands the pieces every kind of collective kernel shares to the kernel template `$cb!`,
/// appended to its arguments (`$w`: elements in 16 bytes, `$s`: bytes of one): `smem_copy` /
/// `smem_fill` (the low-latency kernels' copies between shared memory and `dst` / `src`),
/// `put_pair` / `put_one` (the stores of `x0`, `x1` at `i0`, `i1`, or
/// of `r` at `i`, into `dst` on every PE), and the flag protocol's handshakes (see the module
/// doc): `enter` (this block's epoch `e`; signal "entered call `e`" to every peer and wait for
/// theirs), `leave` (after local stores) and `leave_after_puts` (after peer stores: the release
/// fence before the signal, the acquire fence after the wait). Written once for the reducing
/// kernels and the data-movement kernels alike.
macro_rules! with_shared_pieces {
    ($w:literal $s:tt; $cb:ident!($($args:tt)*)) => {
        $cb!($($args)*
            // The low-latency kernels' copy out of shared memory: `cnt` elements from `g[gs..]`
            // (the dynamic shared memory, 128-byte aligned) into `dst[ds..]` (`db`: `dst`'s
            // byte offset modulo 16) by the block, in 16-byte vectors where both ends share
            // their offset modulo 16. No division by a run-time value: a 64-bit one is a long
            // instruction sequence, and with one per element the copy out cost more than the
            // exchange (the 64 KiB all-gather was far slower than the all-reduce of as many
            // lines).
            smem_copy: [
                let gmis = (gs * $s) % 16;
                let dmis = (db as usize + ds * $s) % 16;
                let h = min((16 - dmis) % 16 / $s, cnt);
                let nv = if gmis == dmis { (cnt - h) / $w } else { 0 };
                let vend = h + nv * $w;
                let mut v = thread_idx_x() as usize;
                while v < nv {
                    let i = h + v * $w;
                    let x = load_vec16(&g[gs + i]);
                    store_vec16(&mut dst[ds + i], x);
                    v += block_dim_x() as usize;
                }
                let ns = h + (cnt - vend);
                let mut q = thread_idx_x() as usize;
                while q < ns {
                    let i = if q < h { q } else { vend + q - h };
                    dst[ds + i] = g[gs + i];
                    q += block_dim_x() as usize;
                }
            ]
            // `smem_copy` turned around: `cnt` elements of `src[ss..]` (`sb`: `src`'s byte
            // offset modulo 16) into `g[gs..]`, the personal low-latency kernels' staging of
            // each chunk's window.
            smem_fill: [
                let smis = (sb as usize + ss * $s) % 16;
                let gmis = (gs * $s) % 16;
                let h = min((16 - smis) % 16 / $s, cnt);
                let nv = if gmis == smis { (cnt - h) / $w } else { 0 };
                let vend = h + nv * $w;
                let mut v = thread_idx_x() as usize;
                while v < nv {
                    let i = h + v * $w;
                    let x = load_vec16(&src[ss + i]);
                    store_vec16(&mut g[gs + i], x);
                    v += block_dim_x() as usize;
                }
                let ns = h + (cnt - vend);
                let mut q = thread_idx_x() as usize;
                while q < ns {
                    let i = if q < h { q } else { vend + q - h };
                    g[gs + i] = src[ss + i];
                    q += block_dim_x() as usize;
                }
            ]
            put_pair: [
                for k in 0..nn {
                    let p = dst.peer(pes[(me as usize + k) % nn]);
                    store_vec16(&mut p[i0], x0);
                    store_vec16(&mut p[i1], x1);
                }
            ]
            put_one: [
                for k in 0..nn {
                    dst.peer(pes[(me as usize + k) % nn])[i] = r;
                }
            ]
            enter: [
                let e = epochs[blk] + 1;
                if t < nn {
                    signal_op(&mut sig[blk * nn + me as usize], 2 * e - 1, SignalOp::Set, pes[t]);
                    signal_wait_until(&sig[blk * nn + t], Cmp::Ge, 2 * e - 1);
                    threadfence_system();
                }
                sync_threads();
            ]
            leave: [
                sync_threads();
                if t < nn {
                    signal_op(&mut sig[blk * nn + me as usize], 2 * e, SignalOp::Set, pes[t]);
                    signal_wait_until(&sig[blk * nn + t], Cmp::Ge, 2 * e);
                }
                sync_threads();
                if t == 0 {
                    epochs[blk] = e;
                }
            ]
            leave_after_puts: [
                // Release: this thread's peer stores before the block's signal.
                threadfence_system();
                sync_threads();
                if t < nn {
                    signal_op(&mut sig[blk * nn + me as usize], 2 * e, SignalOp::Set, pes[t]);
                    signal_wait_until(&sig[blk * nn + t], Cmp::Ge, 2 * e);
                    threadfence_system();
                }
                sync_threads();
                if t == 0 {
                    epochs[blk] = e;
                }
            ]
        );
    };
}

mod moving;
mod reducing;

pub use moving::{move16, move32, move64, move8};
pub use reducing::{bf16_, f16_, f32_, f64_, i16_, i32_, i64_, i8_, u16_, u32_, u64_, u8_};
