//! Helpers shared by the cases: who is who among the PEs, a common end point, and comparisons
//! that say which element differed and how.

use pgas::prelude::*;
use std::fmt::Debug;

pub type CaseResult = Result<(), Box<dyn std::error::Error>>;

/// Whether a CUDA driver and at least one GPU are there.
pub fn gpu_present() -> bool {
    pgas::gpu_count().is_ok_and(|n| n > 0)
}

pub fn me(p: &Pgas) -> usize {
    p.my_pe()
}

pub fn npes(p: &Pgas) -> usize {
    p.n_pes()
}

/// The PE this one sends to: the next in the ring (itself when alone).
pub fn next(p: &Pgas) -> usize {
    (me(p) + 1) % npes(p)
}

/// The PE that sends to this one.
pub fn prev(p: &Pgas) -> usize {
    (me(p) + npes(p) - 1) % npes(p)
}

pub fn device_name(p: &Pgas) -> String {
    p.cuda()
        .name()
        .unwrap_or_else(|e| format!("(name unknown: {e})"))
}

/// Waits for this PE's work, then for every PE: the point where results may be read back.
pub fn settle(p: &Pgas) -> CaseResult {
    p.stream().synchronize()?;
    p.barrier_all()?;
    Ok(())
}

/// Exact comparison; names the first differing index and how many differ.
pub fn check_eq<T: PartialEq + Debug>(what: &str, got: &[T], want: &[T]) -> CaseResult {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    let bad: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{what}: {} of {} elements differ; first at [{i}]: got {:?}, expected {:?}",
            bad.len(),
            got.len(),
            got[i],
            want[i]
        )
        .into()),
    }
}

/// Comparison within a relative tolerance (absolute near zero). NaN never passes.
pub fn check_close(what: &str, got: &[f64], want: &[f64], rel: f64) -> CaseResult {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    for i in 0..got.len() {
        let tol = rel * want[i].abs().max(1.0);
        if got[i].is_nan() || (got[i] - want[i]).abs() > tol {
            return Err(format!(
                "{what}[{i}]: got {}, expected {} (tolerance {tol:e})",
                got[i], want[i]
            )
            .into());
        }
    }
    Ok(())
}

/// Fails with `msg` unless `cond`.
pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> CaseResult {
    if cond {
        Ok(())
    } else {
        Err(msg().into())
    }
}

/// Sorted copy, to compare sets of values that arrive in any order (atomics).
pub fn sorted<T: Ord + Clone>(v: &[T]) -> Vec<T> {
    let mut s = v.to_vec();
    s.sort();
    s
}
