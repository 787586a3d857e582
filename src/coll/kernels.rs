//! The collective kernels (all-reduce one-shot and two-shot, reduce-scatter, all-gather), one
//! module per element type (the language has no generics: each type is its own
//! `#[pgas_kernel]`, and the reduction is a `#[comptime]` code, so every (type, op) pair is one
//! small specialization that compiles in about a second with the peer-to-peer prelude: no
//! NVSHMEM collective templates).
//!
//! The flag protocol (`sig[b * n + r]` set to `2e - 1` on entering call `e` and `2e` on leaving
//! it, `epochs[b]` counting each block's calls in device memory) and the 16-byte data path
//! (`head`, `vec`) are in `docs/coll.md`, "Synchronization" and "Data path"; `$w` below is the
//! elements of one 16-byte vector.
//!
//! Writing the kernels as one `macro_rules!` template per kind of type keeps one text of each
//! algorithm: `$t` is the element type, `$a` the type it is reduced in (`f32` for the 16-bit
//! floats), `$w` the elements in 16 bytes, `$bits` the bitwise reductions where the type has
//! them; the reduction of `a` and `b` is written once and pasted where values are combined.
//! The pieces several kernels share (the entry and leave handshakes, the reduction of a vector
//! pair or one element over the PEs, the stores to every PE) are also written once, in the
//! template's `@pieces` arm, and pasted by the `@kernels` arm: two-shot is reduce-scatter's
//! loads and all-gather's stores fused over one chunking, and [`reduce_scatter`] /
//! [`all_gather`] are the halves as kernels of their own, on the same flags.
//!
//! All-gather only copies, so it is written with the data-movement kernels (one per element
//! size, `move_kernels!`) and shared by every type of a size.
//!
//! [`reduce_scatter`]: f32_::reduce_scatter
//! [`all_gather`]: move32::all_gather

/// Hands the pieces every kind of collective kernel shares to the kernel template `$cb!`,
/// appended to its arguments: `put_pair` / `put_one` (the stores of `x0`, `x1` at `i0`, `i1`, or
/// of `r` at `i`, into `dst` on every PE), and the flag protocol's handshakes (see the module
/// doc): `enter` (this block's epoch `e`; signal "entered call `e`" to every peer and wait for
/// theirs), `leave` (after local stores) and `leave_after_puts` (after peer stores: the release
/// fence before the signal, the acquire fence after the wait). Written once for the reducing
/// kernels and the data-movement kernels alike.
macro_rules! with_shared_pieces {
    ($cb:ident!($($args:tt)*)) => {
        $cb!($($args)*
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

macro_rules! coll_kernels {
    // A row names its reductions by kind: `float` (Sum Prod Min Max) or `int` (also And Or
    // Xor), with the comptime codes of `op_code` (mod.rs).
    ($($m:ident: $t:ident => $a:ident, $w:literal, $kind:ident;)*) => {$(
        coll_kernels!(@$kind $m $t $a $w);
    )*};
    (@float $m:ident $t:ident $a:ident $w:literal) => {
        coll_kernels!(@ops $m: $t => $a, $w, {0 Sum 1 Prod 2 Min 3 Max};);
    };
    (@int $m:ident $t:ident $a:ident $w:literal) => {
        coll_kernels!(@ops $m: $t => $a, $w, {0 Sum 1 Prod 2 Min 3 Max 4 And 5 Or 6 Xor},
            [else if op == 4 { a & b } else if op == 5 { a | b } else if op == 6 { a ^ b }];);
    };
    (@ops $($m:ident: $t:ident => $a:ident, $w:literal, {$($code:literal $name:ident)*} $(, [$($bits:tt)*])?;)*) => {$(
        // The reduction of `a` and `b` (both `$a`) by the comptime `op`, written once here and
        // pasted where each algorithm combines two values (the scalar path and each vector slot).
        // `$code $name`: the comptime code of each reduction the type has and its `ReduceOp`.
        coll_kernels!(@pieces $m $t $a $w {$($code $name)*} [
            if op == 1 {
                a * b
            } else if op == 2 {
                min(a, b)
            } else if op == 3 {
                max(a, b)
            } $($($bits)*)? else {
                a + b
            }
        ]);
    )*};
    // The pieces only the reducing kernels share, each written once and pasted into every
    // kernel that uses it: the reduction of a vector pair `i0`, `i1` (and of one element `i`)
    // of `src` over every PE into `x0`, `x1` (`a`). The stores to every PE and the handshakes
    // come from `with_shared_pieces!`.
    (@pieces $m:ident $t:ident $a:ident $w:literal {$($code:literal $name:ident)*} [$($red:tt)*]) => {
        with_shared_pieces!(coll_kernels!(@kernels $m $t $a $w
            // The low-latency all-reduce of this block's elements, by the reduction whose code
            // `op` is (one `if` for each; the comptime `op` leaves one).
            ll_reduce: [
                $(
                    if op == $code {
                        team_all_reduce_block(team, &mut dst[lo..hi], &src[lo..hi], &mut scratch[at], ReduceOp::$name);
                    }
                )*
            ]
            // The same of all of `src` into shared memory `g` (the low-latency reduce-scatter).
            ll_reduce_shared: [
                $(
                    if op == $code {
                        team_all_reduce_block(team, &mut g[0..len], src, &mut scratch[0], ReduceOp::$name);
                    }
                )*
            ]
            reduce_pair: [
                let mut x0 = load_vec16(&src[i0]);
                let mut x1 = load_vec16(&src[i1]);
                for k in 1..nn {
                    let p = src.peer(pes[(me as usize + k) % nn]);
                    let y0 = load_vec16(&p[i0]);
                    let y1 = load_vec16(&p[i1]);
                    for j in 0..$w {
                        let a = vec16_get(x0, j) as $a;
                        let b = vec16_get(y0, j) as $a;
                        let r = $($red)*;
                        x0 = vec16_set(x0, j, r as $t);
                        let a = vec16_get(x1, j) as $a;
                        let b = vec16_get(y1, j) as $a;
                        let r = $($red)*;
                        x1 = vec16_set(x1, j, r as $t);
                    }
                }
            ]
            reduce_one: [
                let mut a = src[i] as $a;
                for k in 1..nn {
                    let b = src.peer(pes[(me as usize + k) % nn])[i] as $a;
                    a = $($red)*;
                }
            ]
        ));
    };
    (@kernels $m:ident $t:ident $a:ident $w:literal
        ll_reduce: [$($ll_reduce:tt)*]
        ll_reduce_shared: [$($ll_reduce_shared:tt)*]
        reduce_pair: [$($reduce_pair:tt)*]
        reduce_one: [$($reduce_one:tt)*]
        put_pair: [$($put_pair:tt)*]
        put_one: [$($put_one:tt)*]
        enter: [$($enter:tt)*]
        leave: [$($leave:tt)*]
        leave_after_puts: [$($leave_after_puts:tt)*]
    ) => {
        #[doc = concat!("Collective kernels for `", stringify!($t), "`.")]
        pub mod $m {
            use crate::prelude::*;

            /// Low latency (LL): block `b` all-reduces elements `b * per_block ..` (at most
            /// `per_block` of them) with `team_all_reduce_block` over its own `region` words of
            /// `scratch` (`pgas::coll::device_scratch_len` of `per_block` elements): each PE
            /// stores its data, with the call's flag in every 8-byte word, into every peer's
            /// scratch and polls its own, so a call is one NVLink crossing and no handshake.
            /// Safe in place. The call counters live in `scratch`, not in `epochs`.
            #[pgas_kernel(max_threads = 512)]
            pub fn low_latency(
                team: Team,
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                scratch: &mut SymTensor<u64>,
                region: u32,
                per_block: u32,
                #[comptime] op: u32,
            ) {
                let blk = block_idx_x() as usize;
                let len = dst.len();
                let lo = min(blk * per_block as usize, len);
                let hi = min(lo + per_block as usize, len);
                let at = blk * region as usize;
                $($ll_reduce)*
            }

            /// Low-latency reduce-scatter of at most one low-latency region of `src`: all of
            /// every PE's `src` reduced into shared memory (the launch's dynamic shared memory,
            /// `src.len()` elements) by `team_all_reduce_block` over the first region of
            /// `scratch`, then team rank `me`'s chunk copied into `dst`. It moves all of `src`
            /// to every peer, which pays only where latency dominates.
            #[pgas_kernel(max_threads = 512)]
            pub fn low_latency_reduce_scatter(
                team: Team,
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                scratch: &mut SymTensor<u64>,
                me: u32,
                #[comptime] op: u32,
            ) {
                let g = dyn_shared::<$t>();
                let len = src.len();
                let m = dst.len();
                $($ll_reduce_shared)*
                let c = me as usize * m;
                let mut i = thread_idx_x() as usize;
                while i < m {
                    dst[i] = g[c + i];
                    i += block_dim_x() as usize;
                }
            }

            /// One-shot: every PE loads every peer's `src` over NVLink and reduces into its own
            /// `dst`. Latency: one flag round trip each side of one pass over the data.
            ///
            /// `head` elements are reduced one at a time before the first 16-byte vector when
            /// `vec` is set (then `dst` and `src` share their offset modulo 16 bytes); without
            /// `vec` every element is. See the module doc for the vector layout.
            #[pgas_kernel(max_threads = 512)]
            pub fn one_shot(
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                pes: &SymTensor<i32>,
                sig: &mut SymTensor<u64>,
                epochs: &mut SymTensor<u64>,
                n: u32,
                me: u32,
                head: u32,
                vec: u32,
                #[comptime] op: u32,
            ) {
                let blk = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let nn = n as usize;
                $($enter)*
                let len = dst.len();
                let h = min(head as usize, len);
                let nv = if vec != 0 { (len - h) / $w } else { 0 };
                let vend = h + nv * $w;
                let stride = (grid_dim_x() * block_dim_x()) as usize;
                let gt = blk * block_dim_x() as usize + t;
                // Vectors, two per thread per step so that two 16-byte loads of each peer are
                // in flight; past the end the second slot repeats the first (same value
                // stored twice) rather than branching around a third copy of the reduction.
                let mut v = gt;
                while v < nv {
                    let i0 = h + v * $w;
                    let i1 = if v + stride < nv { i0 + stride * $w } else { i0 };
                    $($reduce_pair)*
                    store_vec16(&mut dst[i0], x0);
                    store_vec16(&mut dst[i1], x1);
                    v += 2 * stride;
                }
                // Scalars: the `h` elements before the first vector, then those past the last.
                let ns = h + (len - vend);
                let mut q = gt;
                while q < ns {
                    let i = if q < h { q } else { vend + q - h };
                    $($reduce_one)*
                    dst[i] = a as $t;
                    q += stride;
                }
                $($leave)*
            }

            /// Two-shot: team rank `r` reduces chunk `r` of the data (loads from every peer), then
            /// stores the result into every peer's `dst` (including its own). Each PE moves
            /// `2 (n - 1) / n` of the data over NVLink instead of one-shot's `n - 1`. Safe in
            /// place (`dst` and `src` the same buffer): only rank `r` reads or writes chunk `r`,
            /// and each thread loads all it reduces before it stores.
            ///
            /// The vectors are chunked by rank, and so are the scalar elements (`head` before
            /// the first vector and the rest past the last; all of them without `vec`). Its two
            /// halves are `reduce_scatter` and `all_gather` (the same pasted pieces), fused.
            #[pgas_kernel(max_threads = 512)]
            pub fn two_shot(
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                pes: &SymTensor<i32>,
                sig: &mut SymTensor<u64>,
                epochs: &mut SymTensor<u64>,
                n: u32,
                me: u32,
                head: u32,
                vec: u32,
                #[comptime] op: u32,
            ) {
                let blk = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let nn = n as usize;
                $($enter)*
                let len = dst.len();
                let h = min(head as usize, len);
                let nv = if vec != 0 { (len - h) / $w } else { 0 };
                let vend = h + nv * $w;
                let stride = (grid_dim_x() * block_dim_x()) as usize;
                let gt = blk * block_dim_x() as usize + t;
                let vchunk = (nv + nn - 1) / nn;
                let vlo = min(me as usize * vchunk, nv);
                let vhi = min(vlo + vchunk, nv);
                // Two vectors per thread per step, as in one-shot (the second slot repeats
                // the first past the end of the chunk).
                let mut v = vlo + gt;
                while v < vhi {
                    let i0 = h + v * $w;
                    let i1 = if v + stride < vhi { i0 + stride * $w } else { i0 };
                    $($reduce_pair)*
                    $($put_pair)*
                    v += 2 * stride;
                }
                let ns = h + (len - vend);
                let schunk = (ns + nn - 1) / nn;
                let slo = min(me as usize * schunk, ns);
                let shi = min(slo + schunk, ns);
                let mut q = slo + gt;
                while q < shi {
                    let i = if q < h { q } else { vend + q - h };
                    $($reduce_one)*
                    let r = a as $t;
                    $($put_one)*
                    q += stride;
                }
                $($leave_after_puts)*
            }

            /// Reduce-scatter (two-shot's first half): team rank `r` reduces chunk `r` of every
            /// PE's `src` (elements `r * dst.len()` on, `dst.len()` of them) by peer loads into
            /// its own `dst`. `head` and `vec` are those of the chunk: the elements before the
            /// chunk's first 16-byte boundary, and whether `dst` shares the chunk's offset
            /// modulo 16 bytes. Each PE moves `(n - 1) / n` of `src` over NVLink.
            #[pgas_kernel(max_threads = 512)]
            pub fn reduce_scatter(
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                pes: &SymTensor<i32>,
                sig: &mut SymTensor<u64>,
                epochs: &mut SymTensor<u64>,
                n: u32,
                me: u32,
                head: u32,
                vec: u32,
                #[comptime] op: u32,
            ) {
                let blk = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let nn = n as usize;
                $($enter)*
                let len = dst.len();
                let c = me as usize * len;
                let h = min(head as usize, len);
                let nv = if vec != 0 { (len - h) / $w } else { 0 };
                let vend = h + nv * $w;
                let stride = (grid_dim_x() * block_dim_x()) as usize;
                let gt = blk * block_dim_x() as usize + t;
                // `i0`, `i1` index `src` (in chunk `me`), `i0 - c`, `i1 - c` index `dst`.
                let mut v = gt;
                while v < nv {
                    let i0 = c + h + v * $w;
                    let i1 = if v + stride < nv { i0 + stride * $w } else { i0 };
                    $($reduce_pair)*
                    store_vec16(&mut dst[i0 - c], x0);
                    store_vec16(&mut dst[i1 - c], x1);
                    v += 2 * stride;
                }
                let ns = h + (len - vend);
                let mut q = gt;
                while q < ns {
                    let j = if q < h { q } else { vend + q - h };
                    let i = c + j;
                    $($reduce_one)*
                    dst[j] = a as $t;
                    q += stride;
                }
                $($leave)*
            }
        }
    };
}

coll_kernels! {
    f32_: f32 => f32, 4, float;
    f64_: f64 => f64, 2, float;
    f16_: f16 => f32, 8, float;
    bf16_: bf16 => f32, 8, float;
    i8_: i8 => i8, 16, int;
    i16_: i16 => i16, 8, int;
    i32_: i32 => i32, 4, int;
    i64_: i64 => i64, 2, int;
    u8_: u8 => u8, 16, int;
    u16_: u16 => u16, 8, int;
    u32_: u32 => u32, 4, int;
    u64_: u64 => u64, 2, int;
}

/// The data-movement kernels (all-gather, broadcast, all-to-all), one module per element size: they only
/// copy, so every element type of that size shares them (the host passes its buffers as
/// unsigned integers of the same width). `$w` is the elements in 16 bytes, `$s` the bytes of
/// one. The stores to every PE and the handshakes are the reducing kernels' (pasted by
/// `with_shared_pieces!`).
macro_rules! move_kernels {
    ($($m:ident: $t:ident, $w:literal, $s:literal;)*) => {$(
        with_shared_pieces!(move_kernels!(@kernels $m $t $w $s
            // Copy of `cnt` elements from `src[so..]` to `dst[ro..]` on the PE `p` is a view of
            // (all-to-all's segments): 16-byte vectors from the first boundary of the source
            // when both ends sit at the same offset modulo 16 bytes (`sb`, `db`: the buffers'
            // own offsets), one element at a time before it, past the last vector, and
            // throughout otherwise. Two vectors a thread a step, as in the reducing kernels.
            copy_segment: [
                let smis = (sb as usize + so * $s) % 16;
                let dmis = (db as usize + ro * $s) % 16;
                let h = min((16 - smis) % 16 / $s, cnt);
                let nv = if smis == dmis { (cnt - h) / $w } else { 0 };
                let vend = h + nv * $w;
                let mut v = gt;
                while v < nv {
                    let i0 = h + v * $w;
                    let i1 = if v + stride < nv { i0 + stride * $w } else { i0 };
                    let x0 = load_vec16(&src[so + i0]);
                    let x1 = load_vec16(&src[so + i1]);
                    store_vec16(&mut p[ro + i0], x0);
                    store_vec16(&mut p[ro + i1], x1);
                    v += 2 * stride;
                }
                let ns = h + (cnt - vend);
                let mut q = gt;
                while q < ns {
                    let i = if q < h { q } else { vend + q - h };
                    p[ro + i] = src[so + i];
                    q += stride;
                }
            ]
        ));
    )*};
    (@kernels $m:ident $t:ident $w:literal $s:literal
        copy_segment: [$($copy_segment:tt)*]
        put_pair: [$($put_pair:tt)*]
        put_one: [$($put_one:tt)*]
        enter: [$($enter:tt)*]
        leave: [$($leave:tt)*]
        leave_after_puts: [$($leave_after_puts:tt)*]
    ) => {
        #[doc = concat!("Data-movement kernels for ", stringify!($s), "-byte elements.")]
        pub mod $m {
            use crate::prelude::*;

            /// Low-latency all-gather of at most one block's worth of data: every team PE's
            /// `src` into chunk `r` of every PE's `dst` with `team_all_gather_block`, over the
            /// first region of the communicator's low-latency scratch (the protocol of
            /// `low_latency`, which shares that region's call counter). One NVLink crossing and
            /// no handshake. Safe in place (`src` being this rank's chunk of `dst`).
            #[pgas_kernel(max_threads = 512)]
            pub fn low_latency_gather(
                team: Team,
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                scratch: &mut SymTensor<u64>,
            ) {
                team_all_gather_block(team, dst, src, &mut scratch[0]);
            }

            /// Low-latency all-to-all of at most one low-latency region of `src`: every PE's
            /// whole `src` gathered into shared memory (the launch's dynamic shared memory, `n`
            /// times `src.len()` elements) by `team_all_gather_block`, then block `me` of rank
            /// `r`'s copy into block `r` of `dst`. It moves all of `src` to every peer, which
            /// pays only where latency dominates.
            #[pgas_kernel(max_threads = 512)]
            pub fn low_latency_all_to_all(
                team: Team,
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                scratch: &mut SymTensor<u64>,
                n: u32,
                me: u32,
            ) {
                let g = dyn_shared::<$t>();
                let len = src.len();
                let nn = n as usize;
                let m = len / nn;
                team_all_gather_block(team, &mut g[0..nn * len], src, &mut scratch[0]);
                let mut i = thread_idx_x() as usize;
                while i < len {
                    dst[i] = g[(i / m) * len + me as usize * m + i % m];
                    i += block_dim_x() as usize;
                }
            }

            /// Low-latency broadcast of at most one low-latency region: every PE's `src`
            /// gathered into shared memory (`n` times `src.len()` elements) by
            /// `team_all_gather_block`, then team rank `root`'s into `dst`. Safe in place.
            #[pgas_kernel(max_threads = 512)]
            pub fn low_latency_broadcast(
                team: Team,
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                scratch: &mut SymTensor<u64>,
                n: u32,
                root: u32,
            ) {
                let g = dyn_shared::<$t>();
                let len = src.len();
                team_all_gather_block(team, &mut g[0..n as usize * len], src, &mut scratch[0]);
                let c = root as usize * len;
                let mut i = thread_idx_x() as usize;
                while i < len {
                    dst[i] = g[c + i];
                    i += block_dim_x() as usize;
                }
            }

            /// All-gather (two-shot's second half): team rank `r` stores its `src` into chunk
            /// `r` of every PE's `dst` (elements `r * src.len()` on), its own included. `head`
            /// and `vec` are those of `src`: the elements before its first 16-byte boundary, and
            /// whether chunk `r` of `dst` shares its offset modulo 16 bytes. Each PE moves
            /// `n - 1` copies of its `src` over NVLink.
            #[pgas_kernel(max_threads = 512)]
            pub fn all_gather(
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                pes: &SymTensor<i32>,
                sig: &mut SymTensor<u64>,
                epochs: &mut SymTensor<u64>,
                n: u32,
                me: u32,
                head: u32,
                vec: u32,
            ) {
                let blk = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let nn = n as usize;
                $($enter)*
                let len = src.len();
                let c = me as usize * len;
                let h = min(head as usize, len);
                let nv = if vec != 0 { (len - h) / $w } else { 0 };
                let vend = h + nv * $w;
                let stride = (grid_dim_x() * block_dim_x()) as usize;
                let gt = blk * block_dim_x() as usize + t;
                // `i0`, `i1` index `dst` (in chunk `me`), `i0 - c`, `i1 - c` index `src`.
                let mut v = gt;
                while v < nv {
                    let i0 = c + h + v * $w;
                    let i1 = if v + stride < nv { i0 + stride * $w } else { i0 };
                    let x0 = load_vec16(&src[i0 - c]);
                    let x1 = load_vec16(&src[i1 - c]);
                    $($put_pair)*
                    v += 2 * stride;
                }
                let ns = h + (len - vend);
                let mut q = gt;
                while q < ns {
                    let j = if q < h { q } else { vend + q - h };
                    let i = c + j;
                    let r = src[j];
                    $($put_one)*
                    q += stride;
                }
                $($leave_after_puts)*
            }

            /// Broadcast, one-shot: every PE loads team rank `root`'s `src` over NVLink into its
            /// own `dst` (`copy == 0` on the root in place: nothing to copy). The root's
            /// outgoing links carry `n - 1` copies. `head` and `vec` as in the reducing kernels
            /// (`src` and `dst` have the same offsets on every PE).
            #[pgas_kernel(max_threads = 512)]
            pub fn broadcast_one_shot(
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                pes: &SymTensor<i32>,
                sig: &mut SymTensor<u64>,
                epochs: &mut SymTensor<u64>,
                n: u32,
                me: u32,
                root: u32,
                copy: u32,
                head: u32,
                vec: u32,
            ) {
                let blk = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let nn = n as usize;
                $($enter)*
                if copy != 0 {
                    let r = src.peer(pes[root as usize]);
                    let len = dst.len();
                    let h = min(head as usize, len);
                    let nv = if vec != 0 { (len - h) / $w } else { 0 };
                    let vend = h + nv * $w;
                    let stride = (grid_dim_x() * block_dim_x()) as usize;
                    let gt = blk * block_dim_x() as usize + t;
                    let mut v = gt;
                    while v < nv {
                        let i0 = h + v * $w;
                        let i1 = if v + stride < nv { i0 + stride * $w } else { i0 };
                        let x0 = load_vec16(&r[i0]);
                        let x1 = load_vec16(&r[i1]);
                        store_vec16(&mut dst[i0], x0);
                        store_vec16(&mut dst[i1], x1);
                        v += 2 * stride;
                    }
                    let ns = h + (len - vend);
                    let mut q = gt;
                    while q < ns {
                        let i = if q < h { q } else { vend + q - h };
                        dst[i] = r[i];
                        q += stride;
                    }
                }
                $($leave)*
            }

            /// Broadcast, two-shot (scatter, then all-gather): team rank `r` loads chunk `r` of
            /// the root's `src` and stores it into every PE's `dst`, so the root's links carry
            /// one copy of the data in all and every PE's SMs share the stores. Safe in place
            /// (only rank `r` reads chunk `r` of the root's `src`; what it stores there is what
            /// it read).
            #[pgas_kernel(max_threads = 512)]
            pub fn broadcast_two_shot(
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                pes: &SymTensor<i32>,
                sig: &mut SymTensor<u64>,
                epochs: &mut SymTensor<u64>,
                n: u32,
                me: u32,
                root: u32,
                head: u32,
                vec: u32,
            ) {
                let blk = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let nn = n as usize;
                $($enter)*
                let rs = src.peer(pes[root as usize]);
                let len = dst.len();
                let h = min(head as usize, len);
                let nv = if vec != 0 { (len - h) / $w } else { 0 };
                let vend = h + nv * $w;
                let stride = (grid_dim_x() * block_dim_x()) as usize;
                let gt = blk * block_dim_x() as usize + t;
                let vchunk = (nv + nn - 1) / nn;
                let vlo = min(me as usize * vchunk, nv);
                let vhi = min(vlo + vchunk, nv);
                let mut v = vlo + gt;
                while v < vhi {
                    let i0 = h + v * $w;
                    let i1 = if v + stride < vhi { i0 + stride * $w } else { i0 };
                    let x0 = load_vec16(&rs[i0]);
                    let x1 = load_vec16(&rs[i1]);
                    $($put_pair)*
                    v += 2 * stride;
                }
                let ns = h + (len - vend);
                let schunk = (ns + nn - 1) / nn;
                let slo = min(me as usize * schunk, ns);
                let shi = min(slo + schunk, ns);
                let mut q = slo + gt;
                while q < shi {
                    let i = if q < h { q } else { vend + q - h };
                    let r = rs[i];
                    $($put_one)*
                    q += stride;
                }
                $($leave_after_puts)*
            }

            /// All-to-all: chunk `q` of team rank `r`'s `src` (`m = src.len() / n` elements from
            /// `q * m`) lands as chunk `r` of rank `q`'s `dst`, by peer stores, peers in the
            /// order `me + 1, me + 2, ..` so that the PEs spread over the links. `sb`, `db`: the
            /// byte offsets of `src` and `dst` modulo 16 (`dst`'s is the same on every PE).
            #[pgas_kernel(max_threads = 512)]
            pub fn all_to_all(
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                pes: &SymTensor<i32>,
                sig: &mut SymTensor<u64>,
                epochs: &mut SymTensor<u64>,
                n: u32,
                me: u32,
                sb: u32,
                db: u32,
            ) {
                let blk = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let nn = n as usize;
                $($enter)*
                let m = src.len() / nn;
                let stride = (grid_dim_x() * block_dim_x()) as usize;
                let gt = blk * block_dim_x() as usize + t;
                for k in 1..nn + 1 {
                    let qr = (me as usize + k) % nn;
                    let p = dst.peer(pes[qr]);
                    let so = qr * m;
                    let ro = me as usize * m;
                    let cnt = m;
                    $($copy_segment)*
                }
                $($leave_after_puts)*
            }

            /// All-to-all with per-peer counts and displacements: for team rank `q`,
            /// `table[3 q]` is the element offset in `src` of what this rank sends `q`,
            /// `table[3 q + 1]` its length and `table[3 q + 2]` the offset in `q`'s `dst` where
            /// it lands (rank `q`'s receive displacement for this rank), all agreed across the
            /// PEs by `Comm::all_to_all_layout` before any launch. Otherwise as [`all_to_all`].
            ///
            /// `table` is local device memory read on this PE only; it is declared as a
            /// symmetric parameter so that the host passes its address as is (a `CudaSlice`
            /// argument would make the launch wait on cudarc's events, which a CUDA graph
            /// capture on another stream refuses).
            #[pgas_kernel(max_threads = 512)]
            pub fn all_to_all_v(
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                table: &SymTensor<u64>,
                pes: &SymTensor<i32>,
                sig: &mut SymTensor<u64>,
                epochs: &mut SymTensor<u64>,
                n: u32,
                me: u32,
                sb: u32,
                db: u32,
            ) {
                let blk = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let nn = n as usize;
                $($enter)*
                let stride = (grid_dim_x() * block_dim_x()) as usize;
                let gt = blk * block_dim_x() as usize + t;
                for k in 1..nn + 1 {
                    let qr = (me as usize + k) % nn;
                    let p = dst.peer(pes[qr]);
                    let so = table[3 * qr] as usize;
                    let cnt = table[3 * qr + 1] as usize;
                    let ro = table[3 * qr + 2] as usize;
                    $($copy_segment)*
                }
                $($leave_after_puts)*
            }
        }
    };
}

move_kernels! {
    move8: u8, 16, 1;
    move16: u16, 8, 2;
    move32: u32, 4, 4;
    move64: u64, 2, 8;
}
