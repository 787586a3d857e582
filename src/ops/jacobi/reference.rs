//! The host's side of [`pgas::ops::jacobi`](super)'s checks: the initial field, where each PE's
//! rows start, and the same iterations computed on the host, bit for bit.

/// The initial field at global row `r`, column `c`: a ramp plus a checkerboard of 32 x 32
/// tiles, exact in `f32`.
pub fn initial(r: usize, c: usize) -> f32 {
    ((r * 7 + c * 13) % 64) as f32 / 64.0 + ((r / 32 + c / 32) % 2) as f32
}

/// The rows of the whole domain owned by each PE, `rows[pe]`, as global row offsets.
pub fn row_starts(rows: &[usize]) -> Vec<usize> {
    rows.iter()
        .scan(0, |acc, &r| {
            let start = *acc;
            *acc += r;
            Some(start)
        })
        .collect()
}

/// `iters` iterations of the same smoother on the host over the whole periodic domain
/// (`u.len() / nx` rows), in the same `f32` operations.
pub fn host_jacobi(u: &[f32], nx: usize, iters: usize) -> Vec<f32> {
    let ny = u.len() / nx;
    let mut a = u.to_vec();
    let mut b = vec![0.0f32; a.len()];
    for _ in 0..iters {
        for r in 0..ny {
            let (ru, rd) = ((r + ny - 1) % ny, (r + 1) % ny);
            for c in 0..nx {
                let (cl, cr) = ((c + nx - 1) % nx, (c + 1) % nx);
                let vert = a[ru * nx + c] + a[rd * nx + c];
                let horiz = a[r * nx + cl] + a[r * nx + cr];
                b[r * nx + c] = 0.5 * a[r * nx + c] + 0.125 * (vert + horiz);
            }
        }
        std::mem::swap(&mut a, &mut b);
    }
    a
}
