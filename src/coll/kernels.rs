//! The all-reduce kernels, one module per element type (the language has no generics: each type
//! is its own `#[pgas_kernel]`, and the reduction is a `#[comptime]` code, so every (type, op)
//! pair is one small specialization that compiles in about a second with the peer-to-peer
//! prelude: no NVSHMEM collective templates).
//!
//! # The flag protocol
//! Every PE of the team runs the same grid, and block `b` of every PE handles the same elements,
//! so blocks synchronize pairwise with their namesakes, never grid-wide:
//! - `sig[b * n + r]` on PE `q` is written only by block `b` of team rank `r`: `2e - 1` when that
//!   block entered call `e` ("my input is ready"), `2e` when it left it ("I no longer read your
//!   input; my results are in your output"). Values only grow, so a wait is `>=`, and a fast PE
//!   that already moved on to call `e + 1` satisfies a wait for call `e`.
//! - `epochs[b]` on each PE counts the calls block `b` took part in. It lives in device memory
//!   (not a launch argument), so a CUDA graph replaying the launch keeps counting. All PEs launch
//!   the same grid for the same call, so their counters agree.
//!
//! Each block waits at the end until every peer's block has left the call, so when the kernel
//! returns on a PE no peer reads its input any more: the caller may overwrite `src` at once
//! (the race between consecutive calls).
//!
//! Writing the kernels as one `macro_rules!` template per kind of type keeps one text of each
//! algorithm: `$t` is the element type, `$a` the type it is reduced in (`f32` for the 16-bit
//! floats), `$bits` the bitwise reductions where the type has them.

macro_rules! all_reduce_kernels {
    ($($m:ident: $t:ident => $a:ident $(, [$($bits:tt)*])?;)*) => {$(
        #[doc = concat!("All-reduce kernels for `", stringify!($t), "`.")]
        pub mod $m {
            use crate::prelude::*;

            /// One-shot: every PE loads every peer's `src` over NVLink and reduces into its own
            /// `dst`. Latency: one flag round trip each side of one pass over the data.
            #[pgas_kernel(max_threads = 512)]
            pub fn one_shot(
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                pes: &SymTensor<i32>,
                sig: &mut SymTensor<u64>,
                epochs: &mut SymTensor<u64>,
                n: u32,
                me: u32,
                #[comptime] op: u32,
            ) {
                let b = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let nn = n as usize;
                let e = epochs[b] + 1;
                if t < nn {
                    signal_op(&mut sig[b * nn + me as usize], 2 * e - 1, SignalOp::Set, pes[t]);
                    signal_wait_until(&sig[b * nn + t], Cmp::Ge, 2 * e - 1);
                    threadfence_system();
                }
                sync_threads();
                let len = dst.len();
                let stride = (grid_dim_x() * block_dim_x()) as usize;
                let mut i = b * block_dim_x() as usize + t;
                while i < len {
                    let mut acc = src[i] as $a;
                    for k in 1..nn {
                        let v = src.peer(pes[(me as usize + k) % nn])[i] as $a;
                        acc = if op == 1 {
                            acc * v
                        } else if op == 2 {
                            min(acc, v)
                        } else if op == 3 {
                            max(acc, v)
                        } $($($bits)*)? else {
                            acc + v
                        };
                    }
                    dst[i] = acc as $t;
                    i += stride;
                }
                sync_threads();
                if t < nn {
                    signal_op(&mut sig[b * nn + me as usize], 2 * e, SignalOp::Set, pes[t]);
                    signal_wait_until(&sig[b * nn + t], Cmp::Ge, 2 * e);
                }
                sync_threads();
                if t == 0 {
                    epochs[b] = e;
                }
            }

            /// Two-shot: team rank `r` reduces chunk `r` of the data (loads from every peer), then
            /// stores the result into every peer's `dst` (including its own). Each PE moves
            /// `2 (n - 1) / n` of the data over NVLink instead of one-shot's `n - 1`. Safe in
            /// place (`dst` and `src` the same buffer): only rank `r` reads or writes chunk `r`.
            #[pgas_kernel(max_threads = 512)]
            pub fn two_shot(
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                pes: &SymTensor<i32>,
                sig: &mut SymTensor<u64>,
                epochs: &mut SymTensor<u64>,
                n: u32,
                me: u32,
                #[comptime] op: u32,
            ) {
                let b = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let nn = n as usize;
                let e = epochs[b] + 1;
                if t < nn {
                    signal_op(&mut sig[b * nn + me as usize], 2 * e - 1, SignalOp::Set, pes[t]);
                    signal_wait_until(&sig[b * nn + t], Cmp::Ge, 2 * e - 1);
                    threadfence_system();
                }
                sync_threads();
                let len = dst.len();
                let chunk = (len + nn - 1) / nn;
                let lo = min(me as usize * chunk, len);
                let hi = min(lo + chunk, len);
                let stride = (grid_dim_x() * block_dim_x()) as usize;
                let mut i = lo + b * block_dim_x() as usize + t;
                while i < hi {
                    let mut acc = src[i] as $a;
                    for k in 1..nn {
                        let v = src.peer(pes[(me as usize + k) % nn])[i] as $a;
                        acc = if op == 1 {
                            acc * v
                        } else if op == 2 {
                            min(acc, v)
                        } else if op == 3 {
                            max(acc, v)
                        } $($($bits)*)? else {
                            acc + v
                        };
                    }
                    let r = acc as $t;
                    for k in 0..nn {
                        dst.peer(pes[(me as usize + k) % nn])[i] = r;
                    }
                    i += stride;
                }
                // Release: this thread's peer stores before the block's signal.
                threadfence_system();
                sync_threads();
                if t < nn {
                    signal_op(&mut sig[b * nn + me as usize], 2 * e, SignalOp::Set, pes[t]);
                    signal_wait_until(&sig[b * nn + t], Cmp::Ge, 2 * e);
                    threadfence_system();
                }
                sync_threads();
                if t == 0 {
                    epochs[b] = e;
                }
            }
        }
    )*};
}

all_reduce_kernels! {
    f32_: f32 => f32;
    f64_: f64 => f64;
    f16_: f16 => f32;
    bf16_: bf16 => f32;
    i8_: i8 => i8, [else if op == 4 { acc & v } else if op == 5 { acc | v } else if op == 6 { acc ^ v }];
    i16_: i16 => i16, [else if op == 4 { acc & v } else if op == 5 { acc | v } else if op == 6 { acc ^ v }];
    i32_: i32 => i32, [else if op == 4 { acc & v } else if op == 5 { acc | v } else if op == 6 { acc ^ v }];
    i64_: i64 => i64, [else if op == 4 { acc & v } else if op == 5 { acc | v } else if op == 6 { acc ^ v }];
    u8_: u8 => u8, [else if op == 4 { acc & v } else if op == 5 { acc | v } else if op == 6 { acc ^ v }];
    u16_: u16 => u16, [else if op == 4 { acc & v } else if op == 5 { acc | v } else if op == 6 { acc ^ v }];
    u32_: u32 => u32, [else if op == 4 { acc & v } else if op == 5 { acc | v } else if op == 6 { acc ^ v }];
    u64_: u64 => u64, [else if op == 4 { acc & v } else if op == 5 { acc | v } else if op == 6 { acc ^ v }];
}
