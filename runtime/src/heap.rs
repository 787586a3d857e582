//! Symmetric heap size: parsing and formatting `NVSHMEM_SYMMETRIC_SIZE`, and the size check
//! done before an allocation.

use crate::error::{Error, Result};

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
            in_use: "",
        })?;
    if requested > heap {
        return Err(Error::HeapExhausted {
            requested,
            heap,
            in_use: "",
        });
    }
    Ok(requested)
}

#[cfg(test)]
mod tests {
    use super::*;

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
