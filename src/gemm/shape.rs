//! What the GEMMs refuse before launching, in one place for both kernels (the sm_90a GEMM of
//! `plan.rs` and the teaching GEMM of `mma_sync.rs`): a shape that is not whole tiles, buffers
//! that do not hold the operands, as the launch error of the kernel that refuses.

/// Why `(m, n, k)` is not whole `(tm, tn, tk)` tiles, if it is not (the kernels have no edge
/// handling): "`what` takes whole `tm` x `tn` x `tk` tiles`note`: M = .. is not a positive
/// multiple of ..".
pub(crate) fn tile_error(
    what: &str, (m, n, k): (usize, usize, usize), (tm, tn, tk): (usize, usize, usize), note: &str,
) -> Option<String> {
    let bad: Vec<String> = [("M", m, tm), ("N", n, tn), ("K", k, tk)]
        .iter()
        .filter(|(_, v, t)| *v == 0 || v % t != 0)
        .map(|(name, v, t)| format!("{name} = {v} is not a positive multiple of {t}"))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "{what} takes whole {tm} x {tn} x {tk} tiles{note}: {}",
            bad.join(", ")
        )
    })
}

/// Why buffers of `lens` (A, B, C) do not hold an `m x k` A, a B of `b` (rows, columns) and an
/// `m x n` C, if they do not.
pub(crate) fn size_error(
    (a, b_len, c): (usize, usize, usize), (m, n, k): (usize, usize, usize), b: (usize, usize),
) -> Option<String> {
    (a != m * k || b_len != b.0 * b.1 || c != m * n).then(|| {
        format!(
            "buffer sizes {a} / {b_len} / {c} do not match {m} x {k}, {} x {}, {m} x {n}",
            b.0, b.1
        )
    })
}

/// The launch error of `kernel` refusing to run, for `reason`.
pub(crate) fn refuse<T>(kernel: &'static str, reason: String) -> crate::Result<T> {
    Err(crate::Error::launch(
        kernel,
        crate::LaunchCause::Unsupported(reason),
    ))
}

#[cfg(test)]
mod tests {
    use super::{size_error, tile_error};

    #[test]
    fn a_shape_off_the_tiles_names_each_bad_dimension() {
        assert_eq!(tile_error("g", (256, 128, 64), (128, 64, 64), ""), None);
        let e = tile_error("g", (0, 100, 64), (128, 64, 64), " (note)").unwrap();
        assert_eq!(
            e,
            "g takes whole 128 x 64 x 64 tiles (note): M = 0 is not a positive multiple of 128, \
             N = 100 is not a positive multiple of 64"
        );
    }

    #[test]
    fn buffers_are_checked_against_each_operand() {
        assert_eq!(size_error((8 * 4, 4 * 2, 8 * 2), (8, 2, 4), (4, 2)), None);
        // B given as n x k (the sm_90a GEMM's Bt) and as k x n (the teaching GEMM's B).
        let e = size_error((32, 8, 15), (8, 2, 4), (2, 4)).unwrap();
        assert_eq!(
            e,
            "buffer sizes 32 / 8 / 15 do not match 8 x 4, 2 x 4, 8 x 2"
        );
    }
}
