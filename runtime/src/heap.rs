//! Symmetric heap size: parsing and formatting `NVSHMEM_SYMMETRIC_SIZE`, the size check done
//! before an allocation, and the ledger of pgas's allocations that keeps them within the heap.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};

mod live;
pub use live::{LiveSpans, SpanKind};

/// NVSHMEM's default symmetric heap size (1 GiB) when `NVSHMEM_SYMMETRIC_SIZE` is unset.
pub const DEFAULT_HEAP_SIZE: usize = 1 << 30;

/// The environment variable NVSHMEM reads the heap size from.
pub const HEAP_SIZE_VAR: &str = "NVSHMEM_SYMMETRIC_SIZE";

/// Parses a heap size as NVSHMEM accepts it: bytes, optionally with a binary suffix
/// `k`/`K`, `m`/`M`, `g`/`G`, `t`/`T` (`512M`, `1.5G`, `1073741824`).
pub fn parse_size(text: &str) -> Result<usize> {
    let invalid = |reason: &str| Error::InvalidConfig {
        name: HEAP_SIZE_VAR,
        value: text.to_string(),
        reason: format!("{reason}; give bytes with an optional k, M, G or T suffix, e.g. 4G"),
    };
    let t = text.trim();
    let (number, shift) = match t.char_indices().last() {
        None => return Err(invalid("empty")),
        Some((i, c)) => match c.to_ascii_lowercase() {
            'k' => (&t[..i], 10),
            'm' => (&t[..i], 20),
            'g' => (&t[..i], 30),
            't' => (&t[..i], 40),
            _ => (t, 0),
        },
    };
    let value: f64 = number.trim().parse().map_err(|_| invalid("not a number"))?;
    let bytes = value * (1u64 << shift) as f64;
    // NaN fails the range check too.
    if !(1.0..=usize::MAX as f64).contains(&bytes) {
        return Err(invalid("out of range"));
    }
    Ok(bytes as usize)
}

/// Formats a size for messages: `1073741824 (1 GiB)`.
pub fn format_size(bytes: usize) -> String {
    const UNITS: [(&str, u32); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in UNITS {
        if bytes >= 1 << shift {
            let v = bytes as f64 / (1u64 << shift) as f64;
            return format!("{bytes} bytes ({} {unit})", trim_float(v));
        }
    }
    format!("{bytes} bytes")
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Bytes of `len` elements of `elem_size` bytes, checked against the heap before asking NVSHMEM
/// (so an impossible request gets a message naming both sizes instead of NVSHMEM's log).
pub fn check_alloc(len: usize, elem_size: usize, heap: usize) -> Result<usize> {
    if len == 0 {
        return Err(Error::EmptyAllocation);
    }
    let requested = len
        .checked_mul(elem_size.max(1))
        .ok_or(Error::HeapExhausted {
            requested: usize::MAX,
            heap,
            in_use: String::new(),
        })?;
    if requested > heap {
        return Err(Error::HeapExhausted {
            requested,
            heap,
            in_use: String::new(),
        });
    }
    Ok(requested)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_refuses_past_the_usable_heap_and_releases() {
        let heap = 1 << 30;
        assert_eq!(usable(heap), heap - (64 << 20));
        assert_eq!(usable(1 << 20), (1 << 20) - (1 << 16));
        let l = Ledger::default();
        assert_eq!(l.charge(1, heap).unwrap(), GRAIN);
        let big = l.charge(usable(heap) - GRAIN, heap).unwrap();
        let e = l.charge(1, heap).unwrap_err().to_string();
        assert!(e.contains(&format!("take {} bytes", usable(heap))), "{e}");
        assert!(e.contains("PgasBuilder::heap_size"), "{e}");
        l.release(big);
        assert_eq!(l.used(), GRAIN);
        assert!(l.charge(1 << 20, heap).is_ok());
        assert!(l.charge(usize::MAX, heap).is_err(), "no overflow");
    }

    #[test]
    fn parses_nvshmem_size_syntax() {
        assert_eq!(parse_size("1073741824").unwrap(), 1 << 30);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("4g").unwrap(), 4 << 30);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        for bad in ["", "G", "abc", "-1G", "0", "1X"] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(
                e.contains("NVSHMEM_SYMMETRIC_SIZE") && e.contains("4G"),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn formats_sizes() {
        assert_eq!(format_size(1 << 30), "1073741824 bytes (1 GiB)");
        assert_eq!(format_size(3 << 29), "1610612736 bytes (1.5 GiB)");
        assert_eq!(format_size(100), "100 bytes");
    }

    #[test]
    fn allocation_over_the_heap_names_both_sizes_and_the_fix() {
        assert_eq!(check_alloc(256, 4, 1024).unwrap(), 1024);
        let e = check_alloc(257, 4, 1024).unwrap_err().to_string();
        assert!(e.contains("1028 bytes") && e.contains("1024 bytes"), "{e}");
        assert!(
            e.contains("PgasBuilder::heap_size") && e.contains("NVSHMEM_SYMMETRIC_SIZE"),
            "{e}"
        );
        assert!(matches!(
            check_alloc(usize::MAX, 8, 1024),
            Err(Error::HeapExhausted { .. })
        ));
        assert!(matches!(
            check_alloc(0, 4, 1024),
            Err(Error::EmptyAllocation)
        ));
    }
}

/// What one allocation of `bytes` is charged in the [`Ledger`]: NVSHMEM's allocator aligns
/// allocations to 512 bytes.
pub const GRAIN: usize = 512;

/// The part of a heap of `heap` bytes pgas lets its allocations take: all but a sixteenth, at
/// most 64 MiB, left to NVSHMEM's own allocations and its allocator's fragmentation.
pub fn usable(heap: usize) -> usize {
    heap - (heap / 16).min(64 << 20)
}

/// The bytes of pgas's live symmetric allocations on this PE. NVSHMEM 3.4.5 with its default
/// CUDA VMM heap does not return null when the heap cannot grow: it ends the process
/// (docs/faults.md, "Every fault tried"). So pgas refuses, before calling NVSHMEM, an
/// allocation that would take its ledger past [`usable`]. Every PE makes the same allocations,
/// so every PE's ledger gives the same verdict.
#[derive(Debug, Default)]
pub struct Ledger {
    used: AtomicUsize,
}

impl Ledger {
    /// Charges an allocation of `bytes` against a heap of `heap` bytes and returns the charge
    /// (to [`Ledger::release`] when it is freed), or [`Error::HeapExhausted`] naming what is in
    /// use.
    pub fn charge(&self, bytes: usize, heap: usize) -> Result<usize> {
        let charge = bytes.div_ceil(GRAIN).saturating_mul(GRAIN);
        let limit = usable(heap);
        self.used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(charge).filter(|&total| total <= limit)
            })
            .map(|_| charge)
            .map_err(|used| Error::HeapExhausted {
                requested: bytes,
                heap,
                in_use: format!(
                    ", of which pgas's live symmetric allocations take {used} bytes and it keeps \
                     {} for NVSHMEM itself (NVSHMEM 3.4.5 ends the process when its heap cannot \
                     grow, so pgas refuses first; drop tensors no longer needed)",
                    heap - limit
                ),
            })
    }

    /// Returns a charge [`Ledger::charge`] made.
    pub fn release(&self, charge: usize) {
        self.used.fetch_sub(charge, Ordering::SeqCst);
    }

    /// Bytes charged now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }
}
