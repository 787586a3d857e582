//! The reducing kernels (all-reduce low-latency, one-shot and two-shot, reduce-scatter and its
//! low-latency form), one module per element type, from one template (see the parent module).

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
        with_shared_pieces!($w (16 / $w); coll_kernels!(@kernels $m $t $a $w
            // The low-latency all-reduce of this block's elements, by the reduction whose code
            // `op` is (one `if` for each; the comptime `op` leaves one).
            ll_reduce: [
                $(
                    if op == $code {
                        team_all_reduce_block(team, &mut dst[lo..hi], &src[lo..hi], &mut scratch[at], ReduceOp::$name);
                    }
                )*
            ]
            // The low-latency reduce-scatter of the chunks staged in shared memory `g` (`nn`
            // of `wr` elements) into `g[nn * wr..]`.
            ll_reduce_shared: [
                $(
                    if op == $code {
                        team_reduce_scatter_block(team, &mut g[nn * wr..(nn + 1) * wr], &g[0..nn * wr], &mut scratch[blk * region as usize], ReduceOp::$name);
                    }
                )*
            ]
            // The same straight from `src` into `dst` (`m` a chunk), where one block takes
            // every chunk whole.
            ll_reduce_scatter: [
                $(
                    if op == $code {
                        team_reduce_scatter_block(team, &mut dst[0..m], &src[0..nn * m], &mut scratch[blk * region as usize], ReduceOp::$name);
                    }
                )*
            ]
            // Both reduce a round of up to three peers at a time: every load of the round is
            // issued before the first is used. A peer load is an NVLink round trip, and one
            // peer after the other paid `n - 1` of them a step (a large part of the 4-PE
            // reduce-scatter's time at 1 MiB). The peers' values are still folded in
            // the same order, `me + 1, me + 2, ..`, so the results keep their bits.
            reduce_pair: [
                let mut x0 = load_vec16(&src[i0]);
                let mut x1 = load_vec16(&src[i1]);
                let mut k = 1;
                while k < nn {
                    let p0 = src.peer(pes[(me as usize + k) % nn]);
                    let a0 = load_vec16(&p0[i0]);
                    let a1 = load_vec16(&p0[i1]);
                    // (A missing peer's pair repeats `a`, unused: no address is looked up.)
                    let mut b0 = a0;
                    let mut b1 = a1;
                    if k + 1 < nn {
                        let p1 = src.peer(pes[(me as usize + k + 1) % nn]);
                        b0 = load_vec16(&p1[i0]);
                        b1 = load_vec16(&p1[i1]);
                    }
                    let mut c0 = a0;
                    let mut c1 = a1;
                    if k + 2 < nn {
                        let p2 = src.peer(pes[(me as usize + k + 2) % nn]);
                        c0 = load_vec16(&p2[i0]);
                        c1 = load_vec16(&p2[i1]);
                    }
                    for u in 0..3 {
                        if k + u < nn {
                            let y0 = if u == 0 { a0 } else if u == 1 { b0 } else { c0 };
                            let y1 = if u == 0 { a1 } else if u == 1 { b1 } else { c1 };
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
                    }
                    k += 3;
                }
            ]
            reduce_one: [
                let mut a = src[i] as $a;
                let mut k = 1;
                while k < nn {
                    let b0 = src.peer(pes[(me as usize + k) % nn])[i] as $a;
                    let b1 = if k + 1 < nn { src.peer(pes[(me as usize + k + 1) % nn])[i] as $a } else { b0 };
                    let b2 = if k + 2 < nn { src.peer(pes[(me as usize + k + 2) % nn])[i] as $a } else { b0 };
                    for u in 0..3 {
                        if k + u < nn {
                            let b = if u == 0 { b0 } else if u == 1 { b1 } else { b2 };
                            a = $($red)*;
                        }
                    }
                    k += 3;
                }
            ]
            // The pushed two-shot's folds, over local memory: `y` into `x` lane by lane, and
            // `b` into `a`.
            fold_vec: [
                for j in 0..$w {
                    let a = vec16_get(x, j) as $a;
                    let b = vec16_get(y, j) as $a;
                    let r = $($red)*;
                    x = vec16_set(x, j, r as $t);
                }
            ]
            fold_one: [
                a = $($red)*;
            ]
            // The pushed kernels' hand-off of value `sv`: after the block barrier, the threads
            // that signal fence for the whole block (a release fence is cumulative: it orders
            // every store the barrier ordered before it), signal every rank, wait for every
            // rank's and acquire. One fence a rank instead of one a thread.
            push_signal: [
                sync_threads();
                if t < nn {
                    threadfence_system();
                    signal_op(&mut sig[blk * nn + mine], sv, SignalOp::Set, pes[t]);
                    signal_wait_until(&sig[blk * nn + t], Cmp::Ge, sv);
                    threadfence_system();
                }
                sync_threads();
            ]
        ));
    };
    (@kernels $m:ident $t:ident $a:ident $w:literal
        ll_reduce: [$($ll_reduce:tt)*]
        ll_reduce_shared: [$($ll_reduce_shared:tt)*]
        ll_reduce_scatter: [$($ll_reduce_scatter:tt)*]
        reduce_pair: [$($reduce_pair:tt)*]
        reduce_one: [$($reduce_one:tt)*]
        fold_vec: [$($fold_vec:tt)*]
        fold_one: [$($fold_one:tt)*]
        push_signal: [$($push_signal:tt)*]
        smem_copy: [$($smem_copy:tt)*]
        smem_fill: [$($smem_fill:tt)*]
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

            /// Low-latency reduce-scatter: block `b` stages elements `lo..lo + w` (`per_block`
            /// from `b * per_block`) of each of `src`'s chunks (`m` = `dst.len()` elements each)
            /// in shared memory (`sb`: `src`'s byte offset modulo 16), chunk `q`'s at `q * wr`
            /// (`w` rounded up to 16 bytes), sends chunk `q`'s to team rank `q` and reduces what
            /// every rank sent for this PE's chunk with `team_reduce_scatter_block` over region
            /// `b` of `scratch` (`region` words each; it shares the all-reduce's call counters),
            /// and copies the result into `dst` (`db`: `dst`'s byte offset modulo 16). Each
            /// element crosses NVLink once, to the PE that reduces it. Dynamic shared memory:
            /// `(n + 1) wr` elements.
            #[pgas_kernel(max_threads = 512)]
            pub fn low_latency_reduce_scatter(
                team: Team,
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                scratch: &mut SymTensor<u64>,
                n: u32,
                sb: u32,
                db: u32,
                region: u32,
                per_block: u32,
                #[comptime] op: u32,
            ) {
                let blk = block_idx_x() as usize;
                let nn = n as usize;
                let m = dst.len();
                let lo = min(blk * per_block as usize, m);
                let w = min(lo + per_block as usize, m) - lo;
                if w == m {
                    // One block takes every chunk whole: they are contiguous already (see
                    // `low_latency_all_to_all`).
                    $($ll_reduce_scatter)*
                    return;
                }
                let wr = (w * (16 / $w) + 15) / 16 * 16 / (16 / $w);
                let g = dyn_shared::<$t>();
                for q in 0..nn {
                    let ss = q * m + lo;
                    let gs = q * wr;
                    let cnt = w;
                    $($smem_fill)*
                }
                $($ll_reduce_shared)*
                let gs = nn * wr;
                let ds = lo;
                let cnt = w;
                $($smem_copy)*
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

            /// Two-shot by peer stores (the pushed two-shot): rank `r` stores chunk `q` of its
            /// `src` into slot `r` of rank `q`'s `stage` (`n` slots of `m` elements), fences and
            /// signals (`2e - 1`); once every rank's slot has landed it reduces its own chunk from
            /// local memory (its `src`, then the slots of ranks `me + 1, me + 2, ..`, the order of
            /// `two_shot`, so the results keep their bits) and stores the result into every PE's
            /// `dst`; then fences, signals (`2e`) and waits for every rank's. Each element crosses
            /// NVLink twice (`2 (n - 1) / n` of the data a PE, as `two_shot`), each time as a
            /// store, with no handshake before the data moves: `stage` is this kernel's alone, and
            /// a PE that finished the call before saw every peer's blocks signal the end of their
            /// reads of it (any other collective of the communicator waits for each peer to have
            /// started it, so for its kernel before to have ended). `m` (`dst.len() / n` rounded
            /// up to whole vectors) is a multiple of `$w`; `dst`, `src` and `stage` start on
            /// 16-byte boundaries (the launch checks). Safe in place: block `b` of rank `r`
            /// stores chunk `r` into a peer's `dst` only after that peer's block `b` signalled
            /// that it has sent those elements of its `src`, and a block takes the same vectors
            /// on every PE (a grid-stride loop over one grid).
            #[pgas_kernel(max_threads = 512)]
            pub fn two_shot_push(
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                stage: &mut SymTensor<$t>,
                pes: &SymTensor<i32>,
                sig: &mut SymTensor<u64>,
                epochs: &mut SymTensor<u64>,
                n: u32,
                me: u32,
                m: u32,
                #[comptime] op: u32,
            ) {
                let blk = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let nn = n as usize;
                let mine = me as usize;
                let e = epochs[blk] + 1;
                let len = dst.len();
                let mm = m as usize;
                let nv = mm / $w;
                let stride = (grid_dim_x() * block_dim_x()) as usize;
                let gt = blk * block_dim_x() as usize + t;
                // Chunk `q` of `src` into slot `me` of rank `q`'s stage (a partial last vector
                // element by element).
                for k in 1..nn {
                    let q = (mine + k) % nn;
                    let p = stage.peer(pes[q]);
                    let mut v = gt;
                    while v < nv {
                        let j = v * $w;
                        let i = q * mm + j;
                        if i + $w <= len {
                            store_vec16(&mut p[mine * mm + j], load_vec16(&src[i]));
                        } else {
                            let mut s = i;
                            while s < len {
                                p[mine * mm + s - q * mm] = src[s];
                                s += 1;
                            }
                        }
                        v += stride;
                    }
                }
                // Release this block's slots to every rank, then acquire theirs.
                let sv = 2 * e - 1;
                $($push_signal)*
                // This rank's chunk, reduced from local memory and stored into every PE's `dst`.
                let c = mine * mm;
                let mut v = gt;
                while v < nv {
                    let j = v * $w;
                    let i = c + j;
                    if i + $w <= len {
                        let mut x = load_vec16(&src[i]);
                        for k in 1..nn {
                            let y = load_vec16(&stage[((mine + k) % nn) * mm + j]);
                            $($fold_vec)*
                        }
                        for k in 0..nn {
                            store_vec16(&mut dst.peer(pes[(mine + k) % nn])[i], x);
                        }
                    } else {
                        let mut s = i;
                        while s < len {
                            let mut a = src[s] as $a;
                            for k in 1..nn {
                                let b = stage[((mine + k) % nn) * mm + s - c] as $a;
                                $($fold_one)*
                            }
                            let r = a as $t;
                            for k in 0..nn {
                                dst.peer(pes[(mine + k) % nn])[s] = r;
                            }
                            s += 1;
                        }
                    }
                    v += stride;
                }
                let sv = 2 * e;
                $($push_signal)*
                if t == 0 {
                    epochs[blk] = e;
                }
            }

            /// Two-shot for the middle sizes (a chunk of at most
            /// `Comm::low_latency_max_bytes`; `src` and `dst` start on 16-byte boundaries): team
            /// rank `r` reduces its chunk by peer loads after the entry handshake, as `two_shot`,
            /// but sends the result over the low-latency lines (`team_all_gather_block`, region
            /// `b` of the scratch, whose call counters it shares with `low_latency`) instead of
            /// storing it into the peers' `dst`, and has no leave handshake: block `b`'s lines
            /// from a peer say that the peer's block `b` has finished its loads from this PE's
            /// `src`, so when every block is done no peer reads `src` any more. Chunks are `m`
            /// elements (`dst.len() / n` rounded up to 16 bytes; the last may be short or
            /// empty); block `b` takes elements `lo..lo + w` (`per_block` from
            /// `b * per_block`) of each, reduced into shared memory at `n * wr` (`w` rounded up
            /// to 16 bytes) and gathered below it. Safe in place: a PE writes its `dst` only
            /// after every peer's lines, that is after every peer's loads.
            #[pgas_kernel(max_threads = 512)]
            pub fn two_shot_ll(
                team: Team,
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                scratch: &mut SymTensor<u64>,
                pes: &SymTensor<i32>,
                sig: &mut SymTensor<u64>,
                epochs: &mut SymTensor<u64>,
                n: u32,
                me: u32,
                m: u32,
                region: u32,
                per_block: u32,
                #[comptime] op: u32,
            ) {
                let blk = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let nn = n as usize;
                $($enter)*
                let len = dst.len();
                let mm = m as usize;
                let lo = min(blk * per_block as usize, mm);
                let w = min(lo + per_block as usize, mm) - lo;
                let wr = (w + $w - 1) / $w * $w;
                let g = dyn_shared::<$t>();
                // This rank's window of its chunk, reduced over the PEs: whole vectors (a thread
                // takes vector `v` and `v + half`), then the elements past the last one.
                let c = me as usize * mm + lo;
                let valid = if c < len { min(w, len - c) } else { 0 };
                let nv = valid / $w;
                let half = (nv + 1) / 2;
                let mut v = t;
                while v < half {
                    let i0 = c + v * $w;
                    let i1 = if v + half < nv { i0 + half * $w } else { i0 };
                    $($reduce_pair)*
                    store_vec16(&mut g[nn * wr + v * $w], x0);
                    store_vec16(&mut g[nn * wr + (i1 - c)], x1);
                    v += block_dim_x() as usize;
                }
                let mut q = nv * $w + t;
                while q < valid {
                    let i = c + q;
                    $($reduce_one)*
                    g[nn * wr + q] = a as $t;
                    q += block_dim_x() as usize;
                }
                team_all_gather_block(team, &mut g[0..nn * w], &g[nn * wr..nn * wr + w], &mut scratch[blk * region as usize]);
                // `dst` starts on a 16-byte boundary (the launch checks): `smem_copy`'s `db`.
                let db = 0u32;
                for r in 0..nn {
                    let ds = r * mm + lo;
                    if ds < len {
                        let gs = r * w;
                        let cnt = min(w, len - ds);
                        $($smem_copy)*
                    }
                }
                if t == 0 {
                    epochs[blk] = e;
                }
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
