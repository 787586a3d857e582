//! How a bounded host wait polls: spinning first, then yielding the CPU, then sleeping for a
//! growing fraction of the time already waited. A sleep on Linux lasts at least the thread's
//! timer slack (50 us by default) whatever it asks for, so a wait that slept between its first
//! polls could not return sooner than that; a wait that is satisfied within tens of
//! microseconds returns within a poll of it, and a long one costs a few wake-ups a millisecond.

use std::time::{Duration, Instant};

/// Polls back to back (with a spin hint) for this long.
const SPIN: Duration = Duration::from_micros(50);
/// Then yields the CPU between polls until this much time has passed.
const YIELD: Duration = Duration::from_millis(2);
/// Then sleeps an eighth of the time waited so far, at most this long, so a wait overshoots
/// what it waited for by at most about 12%.
const MAX_SLEEP: Duration = Duration::from_millis(1);

/// The pause between two polls of one wait.
pub(crate) struct Backoff {
    start: Instant,
}

impl Backoff {
    /// A wait starting now.
    pub(crate) fn new() -> Self {
        Backoff {
            start: Instant::now(),
        }
    }

    /// How long the wait has lasted.
    pub(crate) fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Pauses before the next poll.
    pub(crate) fn pause(&self) {
        match pause_for(self.elapsed()) {
            Pause::Spin => std::hint::spin_loop(),
            Pause::Yield => std::thread::yield_now(),
            Pause::Sleep(d) => std::thread::sleep(d),
        }
    }
}

#[derive(Debug, PartialEq)]
enum Pause {
    Spin,
    Yield,
    Sleep(Duration),
}

/// The pause after `waited`.
fn pause_for(waited: Duration) -> Pause {
    if waited < SPIN {
        Pause::Spin
    } else if waited < YIELD {
        Pause::Yield
    } else {
        Pause::Sleep((waited / 8).min(MAX_SLEEP))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spins_then_yields_then_sleeps_a_bounded_fraction() {
        assert_eq!(pause_for(Duration::ZERO), Pause::Spin);
        assert_eq!(pause_for(Duration::from_micros(49)), Pause::Spin);
        assert_eq!(pause_for(Duration::from_micros(500)), Pause::Yield);
        assert_eq!(
            pause_for(Duration::from_millis(4)),
            Pause::Sleep(Duration::from_micros(500))
        );
        assert_eq!(
            pause_for(Duration::from_secs(10)),
            Pause::Sleep(MAX_SLEEP),
            "a long wait still polls every millisecond"
        );
    }
}
