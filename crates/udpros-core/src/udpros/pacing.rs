//! Spacing a large message's datagrams: a token bucket that tells the driver when each
//! datagram may leave. A 1 MB message sent in one burst overflows the receiver's socket
//! buffer (roscpp loses all of them at 20 Hz on loopback); sent at a bounded rate it
//! arrives whole. The policy lives here; the sleeping is the driver's.

use std::time::{Duration, Instant};

/// A token bucket that says when each datagram may leave, so a large message reaches the
/// receiver at a rate its socket buffer absorbs instead of as one burst.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// Bytes per second; `None` sends everything at once.
    rate: Option<f64>,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl Pacer {
    /// At most `burst_bytes` at once, then `rate_bytes_per_sec` on average.
    pub fn new(rate_bytes_per_sec: u64, burst_bytes: usize) -> Pacer {
        let burst = burst_bytes.max(1) as f64;
        Pacer {
            rate: Some(rate_bytes_per_sec.max(1) as f64),
            burst,
            tokens: burst,
            last: None,
        }
    }

    /// No pacing: every datagram may leave at once.
    pub fn unlimited() -> Pacer {
        Pacer {
            rate: None,
            burst: 0.0,
            tokens: 0.0,
            last: None,
        }
    }

    /// Reserves `len` bytes only if they may be sent at `now`; false leaves the budget as
    /// it was. For a sender that would rather hand the bytes to someone who can wait.
    pub fn try_reserve(&mut self, now: Instant, len: usize) -> bool {
        let Some(rate) = self.rate else { return true };
        self.refill(now, rate);
        if self.tokens < len as f64 {
            return false;
        }
        self.tokens -= len as f64;
        true
    }

    fn refill(&mut self, now: Instant, rate: f64) {
        if let Some(last) = self.last {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + elapsed * rate).min(self.burst);
        }
        self.last = Some(now);
    }

    /// Reserves `len` bytes and returns when they may be sent: `now` while within the budget,
    /// later once the budget is spent. Calls must come with non-decreasing `now`.
    pub fn reserve(&mut self, now: Instant, len: usize) -> Instant {
        let Some(rate) = self.rate else { return now };
        self.refill(now, rate);
        self.tokens -= len as f64;
        if self.tokens >= 0.0 {
            now
        } else {
            now + Duration::from_nanos((-self.tokens * 1e9 / rate).ceil() as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn try_reserve_takes_only_what_the_budget_has_now() {
        let t0 = Instant::now();
        let mut p = Pacer::new(1_000_000, 3000);
        assert!(p.try_reserve(t0, 2000));
        assert!(!p.try_reserve(t0, 1500), "1000 bytes left");
        assert!(p.try_reserve(t0, 1000));
        assert_eq!(
            p.reserve(t0, 1000) - t0,
            Duration::from_millis(1),
            "in debt after"
        );
        assert!(!p.try_reserve(t0 + Duration::from_millis(1), 1));
        assert!(p.try_reserve(t0 + Duration::from_millis(2), 1000));
        assert!(Pacer::unlimited().try_reserve(t0, usize::MAX));
    }

    #[test]
    fn sends_a_burst_then_spaces_the_rest_at_the_rate() {
        let t0 = Instant::now();
        let mut p = Pacer::new(1_000_000, 3000); // 1 MB/s, 3000-byte burst
        assert_eq!(p.reserve(t0, 1500), t0);
        assert_eq!(p.reserve(t0, 1500), t0);
        let third = p.reserve(t0, 1500);
        assert_eq!(third - t0, Duration::from_micros(1500));
        let fourth = p.reserve(t0, 1500);
        assert_eq!(fourth - t0, Duration::from_micros(3000));
        // After idling, the bucket refills to the burst, not beyond.
        let later = t0 + Duration::from_secs(1);
        assert_eq!(p.reserve(later, 3000), later);
        assert!(p.reserve(later, 1) > later);
    }

    #[test]
    fn unlimited_never_waits() {
        let t0 = Instant::now();
        let mut p = Pacer::unlimited();
        assert!((0..1000).all(|_| p.reserve(t0, 65000) == t0));
    }
}
