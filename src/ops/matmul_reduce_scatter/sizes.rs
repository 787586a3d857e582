//! The shapes a plan takes, its chunks per owner and the symmetric heap it needs.

/// Rows of one chunk the split aims for: big enough for cuBLAS to run near its peak, small
/// enough that the first copy starts early and the last reduction is short.
pub const CHUNK_ROWS: usize = 1024;
/// Most chunks per owner.
pub const MAX_SPLITS: usize = 4;
/// Why `(m, n, k_local)` cannot run on `pes` PEs, if it cannot: M must split into `pes` equal
/// parts, N and K / P must be multiples of 8 (16-byte rows, for the copies and for cuBLAS).
pub fn shape_error(m: usize, n: usize, k_local: usize, pes: usize) -> Option<String> {
    let mut bad = Vec::new();
    if m == 0 || !m.is_multiple_of(pes) {
        bad.push(format!(
            "M = {m} is not a positive multiple of the {pes} PEs (each PE gets M / P rows)"
        ));
    }
    for (name, v) in [("N", n), ("K / P", k_local)] {
        if v == 0 || !v.is_multiple_of(8) {
            bad.push(format!(
                "{name} = {v} is not a positive multiple of 8 (rows of 16 bytes)"
            ));
        }
    }
    (!bad.is_empty()).then(|| bad.join("; "))
}

/// Chunks per owner for M / P = `rows`: about [`CHUNK_ROWS`] rows each, at most [`MAX_SPLITS`],
/// a divisor of `rows`.
pub fn splits_for(rows: usize) -> usize {
    let want = (rows / CHUNK_ROWS).clamp(1, MAX_SPLITS);
    (1..=want)
        .rev()
        .find(|s| rows.is_multiple_of(*s))
        .unwrap_or(1)
}

/// Symmetric heap bytes a [`MatmulReduceScatter`](super::MatmulReduceScatter) of this shape takes on each PE: `P - 1` staging
/// slots of M / P x N `bf16` and three signal words per chunk (arrival, acknowledgement, and
/// the one kernel's word).
pub fn heap_bytes(m: usize, n: usize, pes: usize) -> usize {
    heap_need(m, n, pes, splits_for(m / pes.max(1)))
}

/// [`heap_bytes`] with `splits` chunks per owner.
pub(super) fn heap_need(m: usize, n: usize, pes: usize, splits: usize) -> usize {
    (pes.max(2) - 1) * (m / pes.max(1)) * n * 2 + 3 * pes * splits * 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_that_do_not_divide_are_named() {
        assert!(shape_error(8192, 8192, 2048, 4).is_none());
        let e = shape_error(8190, 8192, 2048, 4).unwrap();
        assert!(e.contains("M = 8190") && e.contains("4 PEs"), "{e}");
        let e = shape_error(8192, 8191, 2044, 4).unwrap();
        assert!(e.contains("N = 8191") && e.contains("K / P = 2044"), "{e}");
        assert!(shape_error(0, 8, 8, 1).unwrap().contains("M = 0"));
    }

    #[test]
    fn chunks_are_about_1024_rows_and_divide_the_rows() {
        assert_eq!(splits_for(2048), 2);
        assert_eq!(splits_for(4096), 4);
        assert_eq!(splits_for(16384), 4);
        assert_eq!(splits_for(512), 1);
        assert_eq!(splits_for(3072), 3);
        // 3000 rows: 2 divides it.
        assert_eq!(splits_for(3000), 2);
    }

    #[test]
    fn the_heap_need_counts_p_minus_1_slots() {
        // 4 PEs at 8192 x 8192: 3 slots of 2048 x 8192 bf16, 3 x 8 words.
        assert_eq!(heap_bytes(8192, 8192, 4), 3 * 2048 * 8192 * 2 + 3 * 8 * 8);
        // One PE keeps one slot (never used; symmetric buffers are never empty).
        assert_eq!(heap_bytes(1024, 1024, 1), 1024 * 1024 * 2 + 3 * 8);
    }
}
