//! The data-movement kernels (all-gather and all-to-all by peer stores, by peer loads and by the
//! low-latency protocol, broadcast, all-to-all-v), one module per element size, from one
//! template (see the parent module).

/// The data-movement kernels (all-gather, broadcast, all-to-all), one module per element size: they only
/// copy, so every element type of that size shares them (the host passes its buffers as
/// unsigned integers of the same width). `$w` is the elements in 16 bytes, `$s` the bytes of
/// one. The stores to every PE and the handshakes are the reducing kernels' (pasted by
/// `with_shared_pieces!`).
macro_rules! move_kernels {
    ($($m:ident: $t:ident, $w:literal, $s:literal;)*) => {$(
        with_shared_pieces!($w $s; move_kernels!(@kernels $m $t $w $s
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
            // `copy_segment` turned around for the pulling kernels: `cnt` elements from
            // `p[so..]` (a peer's view of `src`) into this PE's `dst[ro..]`.
            pull_segment: [
                let smis = (sb as usize + so * $s) % 16;
                let dmis = (db as usize + ro * $s) % 16;
                let h = min((16 - smis) % 16 / $s, cnt);
                let nv = if smis == dmis { (cnt - h) / $w } else { 0 };
                let vend = h + nv * $w;
                let mut v = gt;
                while v < nv {
                    let i0 = h + v * $w;
                    let i1 = if v + stride < nv { i0 + stride * $w } else { i0 };
                    let x0 = load_vec16(&p[so + i0]);
                    let x1 = load_vec16(&p[so + i1]);
                    store_vec16(&mut dst[ro + i0], x0);
                    store_vec16(&mut dst[ro + i1], x1);
                    v += 2 * stride;
                }
                let ns = h + (cnt - vend);
                let mut q = gt;
                while q < ns {
                    let i = if q < h { q } else { vend + q - h };
                    dst[ro + i] = p[so + i];
                    q += stride;
                }
            ]
        ));
    )*};
    (@kernels $m:ident $t:ident $w:literal $s:literal
        copy_segment: [$($copy_segment:tt)*]
        pull_segment: [$($pull_segment:tt)*]
        smem_copy: [$($smem_copy:tt)*]
        smem_fill: [$($smem_fill:tt)*]
        put_pair: [$($put_pair:tt)*]
        put_one: [$($put_one:tt)*]
        enter: [$($enter:tt)*]
        leave: [$($leave:tt)*]
        leave_after_puts: [$($leave_after_puts:tt)*]
    ) => {
        #[doc = concat!("Data-movement kernels for ", stringify!($s), "-byte elements.")]
        pub mod $m {
            use crate::prelude::*;

            /// Low-latency all-gather: block `b` takes elements `lo..hi` (`per_block` from
            /// `b * per_block`) of every team PE's `src` into shared memory (the launch's dynamic
            /// shared memory, `n` times `per_block` elements) with `team_all_gather_block` over
            /// region `b` of the communicator's low-latency scratch (`region` words each; the
            /// protocol of `low_latency`, which shares the regions' call counters), then stores
            /// rank `r`'s into chunk `r` of `dst` (`db`: `dst`'s byte offset modulo 16). One
            /// NVLink crossing and no handshake. Safe in place (`src` being this rank's chunk of
            /// `dst`: what lands there is what it held).
            #[pgas_kernel(max_threads = 512)]
            pub fn low_latency_gather(
                team: Team,
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                scratch: &mut SymTensor<u64>,
                n: u32,
                db: u32,
                region: u32,
                per_block: u32,
            ) {
                let blk = block_idx_x() as usize;
                let len = src.len();
                let lo = min(blk * per_block as usize, len);
                let w = min(lo + per_block as usize, len) - lo;
                let g = dyn_shared::<$t>();
                team_all_gather_block(team, &mut g[0..n as usize * w], &src[lo..lo + w], &mut scratch[blk * region as usize]);
                for r in 0..n as usize {
                    let gs = r * w;
                    let ds = r * len + lo;
                    let cnt = w;
                    $($smem_copy)*
                }
            }

            /// Low-latency all-to-all: block `b` stages elements `lo..lo + w` (`per_block` from
            /// `b * per_block`) of each of `src`'s `n` chunks (`m` = `len / n` elements each) in
            /// shared memory (`sb`: `src`'s byte offset modulo 16), chunk `q`'s at `q * wr` (`w`
            /// rounded up to 16 bytes), sends chunk `q`'s to team rank `q` with
            /// `team_all_to_all_block` over region `b` of the low-latency scratch (`region`
            /// words each; the protocol of `low_latency`, which shares the regions' call
            /// counters), and stores what rank `r` sent into chunk `r` of `dst` (`db`: `dst`'s
            /// byte offset modulo 16). Each element crosses NVLink once, to the PE it is for;
            /// one crossing and no handshake. Dynamic shared memory: `2 n wr` elements.
            #[pgas_kernel(max_threads = 512)]
            pub fn low_latency_all_to_all(
                team: Team,
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                scratch: &mut SymTensor<u64>,
                n: u32,
                sb: u32,
                db: u32,
                region: u32,
                per_block: u32,
            ) {
                let blk = block_idx_x() as usize;
                let nn = n as usize;
                let m = src.len() / nn;
                let lo = min(blk * per_block as usize, m);
                let w = min(lo + per_block as usize, m) - lo;
                if w == m {
                    // One block takes every chunk whole: they are contiguous already, and the
                    // staging would only add a pass before the send (measurably slower at 8 B).
                    team_all_to_all_block(team, &mut dst[0..nn * m], &src[0..nn * m], &mut scratch[blk * region as usize]);
                    return;
                }
                let wr = (w * $s + 15) / 16 * 16 / $s;
                let g = dyn_shared::<$t>();
                for q in 0..nn {
                    let ss = q * m + lo;
                    let gs = q * wr;
                    let cnt = w;
                    $($smem_fill)*
                }
                team_all_to_all_block(team, &mut g[nn * wr..2 * nn * wr], &g[0..nn * wr], &mut scratch[blk * region as usize]);
                for r in 0..nn {
                    let gs = nn * wr + r * wr;
                    let ds = r * m + lo;
                    let cnt = w;
                    $($smem_copy)*
                }
            }

            /// Low-latency broadcast: block `b` takes elements `lo..hi` (`per_block` from
            /// `b * per_block`) of team rank `root`'s `src` into every PE's `dst` over region `b`
            /// of the low-latency scratch (`region` words each; the protocol of `low_latency`,
            /// which shares the regions' call counters): with `team_broadcast_block`
            /// (`relay == 0`: the root's lines to every peer, one crossing) or
            /// `team_broadcast_relay_block` (a chunk to each other rank, which passes it on: two
            /// crossings, one copy over the root's links). No handshake, no staging in shared
            /// memory. (Until issue 25's third round this gathered every PE's share, `n` times
            /// the lines, and kept the root's.) Safe in place.
            #[pgas_kernel(max_threads = 512)]
            pub fn low_latency_broadcast(
                team: Team,
                dst: &mut SymTensor<$t>,
                src: &SymTensor<$t>,
                scratch: &mut SymTensor<u64>,
                root: u32,
                relay: u32,
                region: u32,
                per_block: u32,
            ) {
                let blk = block_idx_x() as usize;
                let len = src.len();
                let lo = min(blk * per_block as usize, len);
                let hi = min(lo + per_block as usize, len);
                let at = blk * region as usize;
                if relay != 0 {
                    team_broadcast_relay_block(team, &mut dst[lo..hi], &src[lo..hi], &mut scratch[at], root as i32);
                } else {
                    team_broadcast_block(team, &mut dst[lo..hi], &src[lo..hi], &mut scratch[at], root as i32);
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

            /// Broadcast, two-shot (scatter, then all-gather): the chunk owners (every rank on
            /// 2 PEs; on more, every rank but the root) each load their chunk of the root's
            /// `src` and store it into every PE's `dst` but the root's, whose `dst` the root
            /// copies itself (`copy`: `dst` is not `src`). So the root's links carry one copy
            /// of the data in all (they carried `2 (n - 1) / n` copies when the root owned a
            /// chunk too: 1.5 on 4 PEs) and the owners' SMs share the stores. On 2 PEs both
            /// ranks own a half, the root storing its own into the peer. Safe in place (only
            /// the owner of a chunk reads it from the root's `src`, and no one stores into the
            /// root's `dst` but the root or, on 2 PEs, the owner of the chunk, with what it
            /// read).
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
                copy: u32,
                head: u32,
                vec: u32,
            ) {
                let blk = block_idx_x() as usize;
                let t = thread_idx_x() as usize;
                let nn = n as usize;
                $($enter)*
                let len = dst.len();
                let h = min(head as usize, len);
                let nv = if vec != 0 { (len - h) / $w } else { 0 };
                let vend = h + nv * $w;
                let ns = h + (len - vend);
                let stride = (grid_dim_x() * block_dim_x()) as usize;
                let gt = blk * block_dim_x() as usize + t;
                // The root owns no chunk where more than one other rank can.
                let apart = nn > 2;
                let rt = root as usize;
                if apart && me == root {
                    if copy != 0 {
                        let mut v = gt;
                        while v < nv {
                            let i0 = h + v * $w;
                            let x0 = load_vec16(&src[i0]);
                            store_vec16(&mut dst[i0], x0);
                            v += stride;
                        }
                        let mut q = gt;
                        while q < ns {
                            let i = if q < h { q } else { vend + q - h };
                            dst[i] = src[i];
                            q += stride;
                        }
                    }
                } else {
                    let owners = if apart { nn - 1 } else { nn };
                    let j = if apart && me > root { me as usize - 1 } else { me as usize };
                    let rs = src.peer(pes[rt]);
                    let vchunk = (nv + owners - 1) / owners;
                    let vlo = min(j * vchunk, nv);
                    let vhi = min(vlo + vchunk, nv);
                    let mut v = vlo + gt;
                    while v < vhi {
                        let i0 = h + v * $w;
                        let i1 = if v + stride < vhi { i0 + stride * $w } else { i0 };
                        let x0 = load_vec16(&rs[i0]);
                        let x1 = load_vec16(&rs[i1]);
                        for k in 0..nn {
                            let r = (me as usize + k) % nn;
                            if !apart || r != rt {
                                let p = dst.peer(pes[r]);
                                store_vec16(&mut p[i0], x0);
                                store_vec16(&mut p[i1], x1);
                            }
                        }
                        v += 2 * stride;
                    }
                    let schunk = (ns + owners - 1) / owners;
                    let slo = min(j * schunk, ns);
                    let shi = min(slo + schunk, ns);
                    let mut q = slo + gt;
                    while q < shi {
                        let i = if q < h { q } else { vend + q - h };
                        let x = rs[i];
                        for k in 0..nn {
                            let r = (me as usize + k) % nn;
                            if !apart || r != rt {
                                dst.peer(pes[r])[i] = x;
                            }
                        }
                        q += stride;
                    }
                }
                $($leave_after_puts)*
            }

            /// All-gather by peer loads (the pulling form, `Algorithm::OneShot`): this PE loads
            /// every team rank `r`'s `src` into chunk `r` of its own `dst` (its own `src`
            /// included). No peer stores, so the leave needs no release fence (the pushing
            /// `all_gather` waits in `threadfence_system` for its NVLink stores to land before
            /// it signals); the entry says each peer's `src` is ready, the leave that no PE
            /// reads it any more. Each warp starts at another rank (`gt / 32`), so that this PE
            /// loads from every peer, and copies its own chunk, at once. `sb`, `db`: the byte
            /// offsets of `src` and `dst` modulo 16 (the same on every PE).
            #[pgas_kernel(max_threads = 512)]
            pub fn all_gather_pull(
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
                let len = src.len();
                let stride = (grid_dim_x() * block_dim_x()) as usize;
                let gt = blk * block_dim_x() as usize + t;
                for k in 0..nn {
                    let r = (gt / 32 + k) % nn;
                    let p = src.peer(pes[r]);
                    let so = 0usize;
                    let ro = r * len;
                    let cnt = len;
                    $($pull_segment)*
                }
                $($leave)*
            }

            /// All-to-all by peer loads (the pulling form, `Algorithm::OneShot`): this PE loads
            /// chunk `me` of every team rank `r`'s `src` (`m = src.len() / n` elements from
            /// `me * m`) into chunk `r` of its own `dst`. As `all_gather_pull`: no release fence
            /// before the leave, and warps start at different ranks.
            #[pgas_kernel(max_threads = 512)]
            pub fn all_to_all_pull(
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
                for k in 0..nn {
                    let r = (gt / 32 + k) % nn;
                    let p = src.peer(pes[r]);
                    let so = me as usize * m;
                    let ro = r * m;
                    let cnt = m;
                    $($pull_segment)*
                }
                $($leave)*
            }

            /// All-to-all: chunk `q` of team rank `r`'s `src` (`m = src.len() / n` elements from
            /// `q * m`) lands as chunk `r` of rank `q`'s `dst`, by peer stores. Each warp takes
            /// the ranks in its own order (from `me + 1 + gt / 32`), so that the copy of this
            /// rank's own chunk (local memory) runs beside the stores to the peers instead of
            /// after them (until issue 27 every thread went `me + 1, me + 2, ..`, and the local
            /// copy came last, alone), and the PEs spread over the links. `sb`, `db`: the
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
                    let qr = (me as usize + gt / 32 + k) % nn;
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
