//! The address ranges of the symmetric memory that is live on this PE: pgas's allocations, the
//! buffers registered with NVSHMEM, and imported tensors that lie outside both. A host call
//! checks its regions against them, so a region over a freed tensor, one that straddles two
//! allocations or one that runs past the end of one is an `Err` rather than NVSHMEM reading or
//! writing memory nobody owns (the symmetric heap itself is one address range, so the heap check
//! alone cannot see any of these).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// What a live span is, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// A `Pgas::alloc` (`nvshmem_calloc`).
    Allocation,
    /// A buffer registered with `nvshmemx_buffer_register_symmetric`.
    Registered,
    /// A DLPack tensor imported from memory pgas did not allocate.
    Imported,
}

impl SpanKind {
    fn name(self) -> &'static str {
        match self {
            SpanKind::Allocation => "allocation",
            SpanKind::Registered => "registered buffer",
            SpanKind::Imported => "imported tensor",
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Span {
    end: u64,
    kind: SpanKind,
}

/// Live spans by start address. Spans never overlap: allocations and registrations come from
/// disjoint memory, and an import is tracked only where no span covers it yet.
#[derive(Debug, Default)]
pub struct LiveSpans {
    spans: Mutex<BTreeMap<u64, Span>>,
}

impl LiveSpans {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Span>> {
        // Every critical section is one insert, remove or lookup: nothing is left half done.
        self.spans.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `bytes` at `start` as live.
    pub fn track(&self, start: u64, bytes: usize, kind: SpanKind) {
        let end = start.saturating_add(bytes as u64);
        self.lock().insert(start, Span { end, kind });
    }

    /// Records `bytes` at `start` as live unless a live span already holds all of it; returns
    /// whether it was recorded (then [`LiveSpans::untrack`] it when it dies).
    pub fn track_unless_covered(&self, start: u64, bytes: usize, kind: SpanKind) -> bool {
        let mut spans = self.lock();
        if covering(&spans, start, bytes as u64).is_some() {
            return false;
        }
        let end = start.saturating_add(bytes as u64);
        spans.insert(start, Span { end, kind });
        true
    }

    /// Forgets the span that starts at `start`.
    pub fn untrack(&self, start: u64) {
        self.lock().remove(&start);
    }

    /// Number of live spans.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no span is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `Ok` when the `bytes` bytes at `start` lie inside one live span (an empty region
    /// addresses nothing and passes); else what the region overlaps, for the error.
    pub fn check(&self, start: u64, bytes: u64) -> Result<(), String> {
        if bytes == 0 {
            return Ok(());
        }
        let spans = self.lock();
        if covering(&spans, start, bytes).is_some() {
            return Ok(());
        }
        let end = start.saturating_add(bytes);
        // The span that starts before the region and every span that starts inside it.
        let before = spans.range(..start).next_back();
        let overlaps: Vec<String> = before
            .into_iter()
            .chain(spans.range(start..end))
            .filter(|(&s, span)| s < end && span.end > start)
            .map(|(&s, span)| {
                format!(
                    "the {} at {s:#x}..{:#x} ({} bytes)",
                    span.kind.name(),
                    span.end,
                    span.end - s
                )
            })
            .collect();
        Err(match overlaps.len() {
            0 => "no live symmetric allocation (freed memory, or heap memory pgas did not \
                  allocate)"
                .to_string(),
            1 => format!("only part of {}, and runs past its end", overlaps[0]),
            _ => format!("{} allocations: {}", overlaps.len(), overlaps.join(" and ")),
        })
    }
}

/// The span holding all of `start..start + bytes`, if one does: spans are disjoint, so it can
/// only be the last one starting at or before `start`.
fn covering(spans: &BTreeMap<u64, Span>, start: u64, bytes: u64) -> Option<SpanKind> {
    let (_, span) = spans.range(..=start).next_back()?;
    let end = start.checked_add(bytes)?;
    (end <= span.end).then_some(span.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_must_lie_in_one_live_span() {
        let live = LiveSpans::default();
        live.track(0x1000, 0x100, SpanKind::Allocation);
        live.track(0x1100, 0x100, SpanKind::Allocation);
        assert!(live.check(0x1000, 0x100).is_ok());
        assert!(live.check(0x1180, 0x80).is_ok());
        assert!(
            live.check(0x5000, 0).is_ok(),
            "empty regions address nothing"
        );

        let straddle = live.check(0x10c0, 0x80).unwrap_err();
        assert!(
            straddle.contains("2 allocations")
                && straddle.contains("0x1000..0x1100")
                && straddle.contains("0x1100..0x1200"),
            "{straddle}"
        );
        let past = live.check(0x1180, 0x100).unwrap_err();
        assert!(
            past.contains("runs past its end") && past.contains("0x1100..0x1200"),
            "{past}"
        );

        live.untrack(0x1000);
        let freed = live.check(0x1000, 0x10).unwrap_err();
        assert!(freed.contains("no live symmetric allocation"), "{freed}");
        assert_eq!(live.len(), 1);
    }

    #[test]
    fn imports_are_tracked_only_outside_live_spans() {
        let live = LiveSpans::default();
        live.track(0x1000, 0x1000, SpanKind::Allocation);
        assert!(!live.track_unless_covered(0x1400, 0x100, SpanKind::Imported));
        assert!(live.track_unless_covered(0x4000, 0x100, SpanKind::Imported));
        assert!(live.check(0x4000, 0x100).is_ok());
        let e = live.check(0x4080, 0x100).unwrap_err();
        assert!(e.contains("imported tensor"), "{e}");
        assert!(live.check(u64::MAX - 4, 16).is_err(), "no overflow");
    }
}
