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
    /// Set for a reader that keeps a small buffer: the rate follows each message.
    spread: Option<Spread>,
}

/// How a [`Pacer::spreading`] pacer picks each message's rate.
#[derive(Debug, Clone)]
struct Spread {
    fast: f64,
    safe: f64,
    whole: usize,
    last_message: Option<Instant>,
    /// Seconds between messages, a moving average.
    interval: Option<f64>,
}

/// The share of the publishing period a large message's datagrams are spread over.
const SPREAD_SHARE: f64 = 0.5;

impl Pacer {
    /// At most `burst_bytes` at once, then `rate_bytes_per_sec` on average.
    pub fn new(rate_bytes_per_sec: u64, burst_bytes: usize) -> Pacer {
        let burst = burst_bytes.max(1) as f64;
        Pacer {
            rate: Some(rate_bytes_per_sec.max(1) as f64),
            burst,
            tokens: burst,
            last: None,
            spread: None,
        }
    }

    /// Toward a reader with a small socket buffer that reads a datagram per call (a roscpp
    /// subscriber): a message of up to `whole` bytes leaves at `fast` bytes per second
    /// (the `burst` covers most of it); a larger one is spread over half the publishing
    /// period, measured from the messages themselves ([`message`](Self::message)), but
    /// never slower than `safe`, a rate the reader keeps up with: spreading further would
    /// only delay it. Before the period is known, larger messages go at `safe`.
    pub fn spreading(fast: u64, safe: u64, burst_bytes: usize, whole: usize) -> Pacer {
        let mut pacer = Pacer::new(fast, burst_bytes);
        let fast = fast.max(1) as f64;
        pacer.spread = Some(Spread {
            fast,
            safe: (safe.max(1) as f64).min(fast),
            whole,
            last_message: None,
            interval: None,
        });
        pacer
    }

    /// A message of `bytes` starts at `now`: a spreading pacer takes its rate for it (a
    /// plain one does nothing). Called once per message, before its datagrams reserve.
    pub fn message(&mut self, now: Instant, bytes: usize) {
        let Some(rate) = self.rate else { return };
        let Some(spread) = &mut self.spread else {
            return;
        };
        if let Some(last) = spread.last_message {
            let dt = now.saturating_duration_since(last).as_secs_f64();
            spread.interval = Some(match spread.interval {
                None => dt,
                Some(avg) => avg + (dt - avg) / 8.0,
            });
        }
        spread.last_message = Some(now);
        let next = if bytes <= spread.whole {
            spread.fast
        } else {
            match spread.interval {
                Some(interval) if interval > 0.0 => {
                    (bytes as f64 / (SPREAD_SHARE * interval)).clamp(spread.safe, spread.fast)
                }
                _ => spread.safe,
            }
        };
        if next != rate {
            // What the bucket holds was earned at the old rate.
            self.refill(now, rate);
            self.rate = Some(next);
        }
    }

    /// From `now` on, `rate_bytes_per_sec` with bursts of at most `burst_bytes` (a link's
    /// governor moving the rate). What the bucket holds was earned at the old rate, and a
    /// smaller burst takes away what is above it.
    pub fn set_rate(&mut self, now: Instant, rate_bytes_per_sec: f64, burst_bytes: usize) {
        if let Some(rate) = self.rate {
            self.refill(now, rate);
        }
        self.rate = Some(rate_bytes_per_sec.max(1.0));
        self.burst = burst_bytes.max(1) as f64;
        self.tokens = self.tokens.min(self.burst);
        self.spread = None;
    }

    /// Nothing leaves for `silence` from `now` on (what the bucket held is spent too), then
    /// the rate as before: a governed link letting its path's queue drain.
    pub fn pause(&mut self, now: Instant, silence: Duration) {
        let Some(rate) = self.rate else { return };
        self.refill(now, rate);
        self.tokens = self.tokens.min(0.0) - rate * silence.as_secs_f64();
    }

    /// The rate, bytes per second (`None`: unpaced).
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// No pacing: every datagram may leave at once.
    pub fn unlimited() -> Pacer {
        Pacer {
            rate: None,
            burst: 0.0,
            tokens: 0.0,
            last: None,
            spread: None,
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
    fn a_spreading_pacer_spreads_large_messages_over_half_their_period() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // 250 MB/s for messages up to 128 KiB, at least 40 MB/s for larger ones.
        let mut p = Pacer::spreading(250_000_000, 40_000_000, 96 << 10, 128 << 10);
        // 1 MB before the period is known: the safe rate.
        p.message(t0, 1_000_000);
        assert_eq!(p.rate, Some(40e6));
        // Small messages: the fast rate, whatever the period.
        p.message(t0 + ms(10), 100_000);
        assert_eq!(p.rate, Some(250e6));
        // 1 MB every 10 ms: 1 MB over 5 ms, 200 MB/s.
        let mut p = Pacer::spreading(250_000_000, 40_000_000, 96 << 10, 128 << 10);
        for i in 0..50 {
            p.message(t0 + ms(10 * i), 1_000_000);
        }
        let rate = p.rate.unwrap();
        assert!((rate - 200e6).abs() < 1e6, "{rate}");
        // 1 MB at 1 Hz: never slower than the safe rate.
        let mut p = Pacer::spreading(250_000_000, 40_000_000, 96 << 10, 128 << 10);
        for i in 0..5 {
            p.message(t0 + Duration::from_secs(i), 1_000_000);
        }
        assert_eq!(p.rate, Some(40e6));
        // 1 MB every 1 ms: no faster than the fast rate.
        for i in 0..100 {
            p.message(t0 + Duration::from_secs(5) + ms(i), 1_000_000);
        }
        assert_eq!(p.rate, Some(250e6));
        // A plain pacer keeps its rate.
        let mut plain = Pacer::new(1_000_000, 3000);
        plain.message(t0, 1_000_000);
        assert_eq!(plain.rate, Some(1e6));
    }

    #[test]
    fn unlimited_never_waits() {
        let t0 = Instant::now();
        let mut p = Pacer::unlimited();
        assert!((0..1000).all(|_| p.reserve(t0, 65000) == t0));
    }
}
