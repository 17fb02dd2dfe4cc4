//! What a link sends when it cannot carry everything published: the newest messages whole,
//! and none that would reach the subscriber older than a bound.
//!
//! A TCPROS link on a narrow radio otherwise holds seconds of images: the kernel's send
//! buffer fills, the link's queue fills behind it, and every message arrives as late as the
//! queue is long (11 s at 4 Mbit/s in bench S10). With the kernel's share bounded
//! (`TCP_NOTSENT_LOWAT` on the socket), what is late is decided here, where the messages
//! still are: each time the link takes its queue, [`Freshness::drop_stale`] drops the oldest
//! of them so that every message it keeps arrives within the bound, at the
//! rate the link was seen to drain. The newest message is always kept (a late image beats
//! none), and nothing is cut: a message is dropped before its first byte or sent whole.
//!
//! The drain rate comes from the link's own writes ([`Freshness::drained`]): a write that
//! had to wait for the path took as long as the path needed for it. A link that never
//! waited has no rate, and only messages that already waited longer than the bound are
//! dropped. Pure: the driver passes `now` and the durations it measured.

use std::time::{Duration, Instant};

/// The freshness bound by default: long enough that a link with room never drops (a
/// momentary stall of the subscriber costs nothing), short enough that an image on a
/// 4 Mbit/s radio is well under a second old when it arrives.
pub const DEFAULT_FRESHNESS: Duration = Duration::from_millis(500);

/// Writes smaller than this say nothing of the path's rate: the kernel takes them whole
/// into its buffer, however narrow the path.
pub const MIN_RATE_SAMPLE_BYTES: usize = 16 << 10;

/// A write shorter than this did not wait for the path: it is counted as this long, so
/// that a wide path's samples are large but finite.
pub const MIN_RATE_SAMPLE_TIME: Duration = Duration::from_millis(1);

/// The weight of a new sample in the drain rate: a rate step is followed within a few
/// messages, one slow write (a preempted thread) moves it by a quarter.
const RATE_GAIN: f64 = 0.25;

/// One link's freshness rule: its bound, the rate its path drains at, what it dropped.
#[derive(Debug, Clone)]
pub struct Freshness {
    bound: Duration,
    /// Bytes per second, once a write large enough to tell was made.
    rate: Option<f64>,
    stale: u64,
}

impl Freshness {
    /// A rule that keeps what arrives within `bound` of being published.
    pub fn new(bound: Duration) -> Freshness {
        Freshness {
            bound,
            rate: None,
            stale: 0,
        }
    }

    /// The bound it keeps messages within.
    pub fn bound(&self) -> Duration {
        self.bound
    }

    /// The rate the link's path drained at, in bytes per second, once known.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// Messages dropped as stale so far.
    pub fn stale(&self) -> u64 {
        self.stale
    }

    /// A write of `bytes` took `took`, from its start until the kernel had taken its last
    /// byte (with the kernel's unsent share bounded, that is how long the path needed).
    pub fn drained(&mut self, bytes: usize, took: Duration) {
        if bytes < MIN_RATE_SAMPLE_BYTES {
            return;
        }
        let sample = bytes as f64 / took.max(MIN_RATE_SAMPLE_TIME).as_secs_f64();
        self.rate = Some(match self.rate {
            Some(rate) => rate + RATE_GAIN * (sample - rate),
            None => sample,
        });
    }

    /// Drops from `queued` (oldest first) the messages that would arrive older than the
    /// bound: a message's wait so far plus the time that `ahead` (bytes already on their
    /// way: the kernel's unsent and unacknowledged data) and the kept messages up to and
    /// including it take at the drain rate. `of` gives a message's queueing time (`None`: it never
    /// goes stale, as for a publisher that waited for room to lose nothing) and its size.
    /// The newest is always kept, the rest keep their order. Returns how many were
    /// dropped (added to [`stale`](Self::stale)).
    pub fn drop_stale<T>(
        &mut self,
        now: Instant,
        ahead: usize,
        queued: &mut Vec<T>,
        of: impl Fn(&T) -> (Option<Instant>, usize),
    ) -> usize {
        let Some(last) = queued.len().checked_sub(1) else {
            return 0;
        };
        let bound = self.bound.as_secs_f64();
        let send_time = |bytes: usize| self.rate.map_or(0.0, |rate| bytes as f64 / rate);
        let behind = send_time(ahead);
        // The latest arrival age among the messages kept so far: each message put in
        // front of them delays them all by its own send time.
        let mut worst = match of(&queued[last]) {
            (Some(at), bytes) => age(now, at) + behind + send_time(bytes),
            (None, bytes) => behind + send_time(bytes),
        };
        let mut keep_from = last;
        while keep_from > 0 {
            let (at, bytes) = of(&queued[keep_from - 1]);
            let own = send_time(bytes);
            let candidate = match at {
                Some(at) => (worst + own).max(age(now, at) + behind + own),
                // Never stale: kept, whatever it costs the others.
                None => worst + own,
            };
            if at.is_some() && candidate > bound {
                break;
            }
            worst = candidate;
            keep_from -= 1;
        }
        // Older ones waited longer still: all stale, but for those that never go stale.
        let before = queued.len();
        let mut index = 0;
        queued.retain(|message| {
            let keep = index >= keep_from || of(message).0.is_none();
            index += 1;
            keep
        });
        let dropped = before - queued.len();
        self.stale += dropped as u64;
        dropped
    }
}

/// The most a link holds its newest message back for a fresher one, as a share of the
/// time the message takes to send at the link's rate: what it may cost the link's
/// throughput. An image of 0.22 s at 3.6 Mbit/s published every 0.1 s is held when the
/// next is due within 45 ms: one then arrives at most 0.28 s old instead of 0.32, for
/// about a twentieth of the images (bench S10, 4 Mbit/s, one node under a 3.6 Mbit/s
/// budget: age p99 0.33 → 0.28-0.29 s, 86 → 82 of 200 whole; at a quarter, 0.26 s and
/// 79 of 200).
pub const HOLD_SHARE: f64 = 0.2;

/// The weight of a new interval in [`Cadence`]'s period.
const PERIOD_GAIN: f64 = 0.125;

/// A link's publishing period, learned from the moments its messages were published, and
/// the rule that holds the newest message back for a fresher one due soon.
///
/// On a link narrower than what is published, a message leaves only when the one before
/// it is through, so it starts up to a period old and arrives that much later than it
/// could: when the next message is due within a small share of the time this one takes
/// to send ([`HOLD_SHARE`]), waiting for it and sending it instead delivers a fresher one
/// for a little throughput. The hold ends when a newer message comes or at a deadline
/// shortly after it was due, whichever is first; a message that was held once is then
/// sent (its successor is overdue: the publisher may have stopped). Pure: the driver
/// passes the publishing moments it saw and `now`.
#[derive(Debug, Clone, Default)]
pub struct Cadence {
    last: Option<Instant>,
    /// Seconds between messages, a moving average.
    period: Option<f64>,
}

impl Cadence {
    /// A cadence that knows nothing yet.
    pub fn new() -> Cadence {
        Cadence::default()
    }

    /// A message was published at `at` (in publishing order; an earlier moment than the
    /// last is taken as the same moment).
    pub fn published(&mut self, at: Instant) {
        if let Some(last) = self.last {
            let interval = at.saturating_duration_since(last).as_secs_f64();
            self.period = Some(match self.period {
                Some(period) => period + PERIOD_GAIN * (interval - period),
                None => interval,
            });
        }
        self.last = Some(self.last.map_or(at, |last| last.max(at)));
    }

    /// The publishing period, once two messages were seen.
    pub fn period(&self) -> Option<Duration> {
        self.period.map(Duration::from_secs_f64)
    }

    /// Whether to hold back the newest message, published at `newest`, that would start
    /// to leave at `start` (now, or when a budget shared with other links gives it its
    /// turn) and take `send_time`: `Some(deadline)` to wait until a newer message comes or
    /// `deadline` passes, then judge again; `None` to send it.
    pub fn hold(
        &self,
        now: Instant,
        start: Instant,
        newest: Instant,
        send_time: Duration,
    ) -> Option<Instant> {
        let period = Duration::try_from_secs_f64(self.period?).ok()?;
        let due = newest.checked_add(period)?;
        let allowance = send_time.mul_f64(HOLD_SHARE);
        if due <= now || due > start.max(now) + allowance {
            return None;
        }
        // A successor a little late is still worth the wait; a publisher that stopped
        // costs at most this much more.
        due.checked_add(allowance.min(period / 8))
    }
}

fn age(now: Instant, at: Instant) -> f64 {
    now.saturating_duration_since(at).as_secs_f64()
}

#[cfg(test)]
mod tests {
    mod cadence {
        use super::super::*;
        use proptest::prelude::*;

        const MS: Duration = Duration::from_millis(1);

        fn every(period: Duration, count: u32, t0: Instant) -> Cadence {
            let mut cadence = Cadence::new();
            for i in 0..count {
                cadence.published(t0 + period * i);
            }
            cadence
        }

        /// 100 kB images at 10 Hz over 3.6 Mbit/s (0.22 s each): the newest is held when
        /// its successor is due within 44 ms of the link being free, until a little after
        /// it is due; not when it is due later, nor once it is overdue.
        #[test]
        fn holds_only_for_a_successor_due_soon() {
            let t0 = Instant::now();
            let cadence = every(100 * MS, 20, t0);
            assert_eq!(cadence.period(), Some(100 * MS));
            let newest = t0 + 1900 * MS;
            let send = 220 * MS;
            // Free 60 ms after it was published: the next is due in 40 ms.
            let now = newest + 60 * MS;
            let deadline = cadence.hold(now, now, newest, send).expect("held");
            assert!(deadline > newest + 100 * MS && deadline <= newest + 113 * MS);
            // Free 30 ms after: due in 70 ms, more than a fifth of its send time.
            let now = newest + 30 * MS;
            assert_eq!(cadence.hold(now, now, newest, send), None);
            // ... unless the budget gives it its turn only 30 ms later.
            assert!(cadence.hold(now, now + 30 * MS, newest, send).is_some());
            // Overdue: the publisher may have stopped.
            let now = newest + 101 * MS;
            assert_eq!(cadence.hold(now, now, newest, send), None);
            // A link with room (1 ms per image) holds for nothing.
            let now = newest + 60 * MS;
            assert_eq!(cadence.hold(now, now, newest, MS), None);
        }

        #[test]
        fn knows_nothing_from_one_message_and_bears_disorder() {
            let t0 = Instant::now() + Duration::from_secs(10);
            let mut cadence = Cadence::new();
            cadence.published(t0);
            assert_eq!(cadence.period(), None);
            assert_eq!(cadence.hold(t0, t0, t0, Duration::from_secs(1)), None);
            cadence.published(t0 - Duration::from_secs(5));
            assert_eq!(cadence.period(), Some(Duration::ZERO));
            // A burst of messages at one moment: nothing is due later, nothing held.
            let now = t0 + MS;
            assert_eq!(cadence.hold(now, now, t0, Duration::from_secs(1)), None);
        }

        proptest! {
            /// Whatever the publishing moments, a hold ends within the share of the send
            /// time plus an eighth of the period after the successor is due, never holds
            /// an overdue message, and never panics.
            #[test]
            fn a_hold_is_bounded(
                gaps in proptest::collection::vec(0u64..2_000_000, 0..40),
                newest_back in 0u64..3_000_000,
                start_after in 0u64..500_000,
                send_us in 0u64..5_000_000,
            ) {
                let t0 = Instant::now() + Duration::from_secs(100);
                let mut cadence = Cadence::new();
                let mut at = t0;
                for gap in gaps {
                    at += Duration::from_micros(gap);
                    cadence.published(at);
                }
                let now = at + Duration::from_micros(newest_back);
                let newest = at;
                let start = now + Duration::from_micros(start_after);
                let send = Duration::from_micros(send_us);
                if let Some(deadline) = cadence.hold(now, start, newest, send) {
                    let period = cadence.period().unwrap();
                    let due = newest + period;
                    prop_assert!(due > now);
                    prop_assert!(deadline <= start + send.mul_f64(HOLD_SHARE) * 2);
                    prop_assert!(deadline <= due + period / 8 + Duration::from_nanos(1));
                }
            }
        }
    }

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Messages queued `ago` milliseconds before `now`, each `bytes` long.
    fn queue(now: Instant, ago: &[u64], bytes: usize) -> Vec<(Option<Instant>, usize)> {
        ago.iter()
            .map(|&ms| (Some(now - Duration::from_millis(ms)), bytes))
            .collect()
    }

    /// How many `rule` drops of `queued`.
    fn stale(rule: &mut Freshness, now: Instant, queued: &[(Option<Instant>, usize)]) -> usize {
        rule.drop_stale(now, 0, &mut queued.to_vec(), |q| *q)
    }

    #[test]
    fn without_a_rate_only_what_already_waited_past_the_bound_goes() {
        let now = Instant::now() + Duration::from_secs(10);
        let mut rule = Freshness::new(500 * MS);
        let q = queue(now, &[900, 600, 400, 100, 0], 100_000);
        assert_eq!(stale(&mut rule, now, &q), 2);
        assert_eq!(rule.stale(), 2);
    }

    #[test]
    fn at_the_drain_rate_it_keeps_the_newest_that_arrive_in_time() {
        let now = Instant::now() + Duration::from_secs(10);
        let mut rule = Freshness::new(500 * MS);
        // 4 Mbit/s: a 100 kB image takes 200 ms.
        rule.drained(100_000, 200 * MS);
        assert_eq!(rule.rate(), Some(500_000.0));
        // Waiting 300, 200, 100 and 0 ms: the newest arrives at 200 ms, the one before it
        // at 100 + 400, the one before at 200 + 600: only two fit.
        let q = queue(now, &[300, 200, 100, 0], 100_000);
        assert_eq!(stale(&mut rule, now, &q), 2);
    }

    #[test]
    fn what_the_kernel_still_holds_delays_everything_kept() {
        let now = Instant::now() + Duration::from_secs(10);
        let mut rule = Freshness::new(500 * MS);
        rule.drained(100_000, 200 * MS);
        // Waiting 100 and 0 ms behind 150 kB the kernel has not delivered yet (300 ms):
        // the newest arrives at 500 ms, the one before it would at 700.
        let q = queue(now, &[100, 0], 100_000);
        assert_eq!(rule.drop_stale(now, 150_000, &mut q.clone(), |m| *m), 1);
        assert_eq!(stale(&mut rule, now, &q), 0, "with nothing ahead both fit");
    }

    #[test]
    fn the_newest_is_kept_however_late() {
        let now = Instant::now() + Duration::from_secs(10);
        let mut rule = Freshness::new(100 * MS);
        rule.drained(100_000, Duration::from_secs(2));
        let q = queue(now, &[5_000, 3_000], 100_000);
        assert_eq!(stale(&mut rule, now, &q), 1);
        let q = queue(now, &[5_000], 100_000);
        assert_eq!(stale(&mut rule, now, &q), 0);
        assert_eq!(stale(&mut rule, now, &[]), 0);
        assert_eq!(rule.stale(), 1);
    }

    #[test]
    fn a_link_with_room_drops_nothing() {
        let now = Instant::now() + Duration::from_secs(10);
        let mut rule = Freshness::new(DEFAULT_FRESHNESS);
        // A gigabit: a 100 kB write waits no time at all.
        rule.drained(100_000, Duration::ZERO);
        let burst = queue(now, &[3, 2, 2, 1, 1, 0], 100_000);
        assert_eq!(stale(&mut rule, now, &burst), 0);
        let many = queue(now, &[0; 1000], 1_000);
        assert_eq!(stale(&mut rule, now, &many), 0);
    }

    #[test]
    fn messages_that_must_not_be_lost_stay_and_delay_the_rest() {
        let now = Instant::now() + Duration::from_secs(10);
        let mut rule = Freshness::new(500 * MS);
        rule.drained(100_000, 200 * MS);
        let q = vec![
            (Some(now - 600 * MS), 100_000),
            (None, 100_000),
            (Some(now), 100_000),
        ];
        // The oldest is stale; the one that waits for room is never dropped.
        assert_eq!(stale(&mut rule, now, &q), 1);
        let q = vec![(None, 100_000), (None, 100_000), (Some(now), 100_000)];
        assert_eq!(stale(&mut rule, now, &q), 0);
    }

    #[test]
    fn small_writes_say_nothing_and_the_rate_follows_a_step() {
        let mut rule = Freshness::new(DEFAULT_FRESHNESS);
        rule.drained(MIN_RATE_SAMPLE_BYTES - 1, Duration::from_secs(1));
        assert_eq!(
            rule.rate(),
            None,
            "a small write is taken whole, however narrow"
        );
        rule.drained(100_000, 200 * MS); // 4 Mbit/s
        for _ in 0..12 {
            rule.drained(100_000, 40 * MS); // 20 Mbit/s
        }
        let rate = rule.rate().unwrap();
        assert!((2_300_000.0..=2_500_000.0).contains(&rate), "{rate}");
    }

    proptest::proptest! {
        /// Whatever the queue and the rate: the newest stays, nothing that waited for room
        /// is dropped, and every other message kept arrives within the bound at the rate
        /// (unless a message that never goes stale is sent before it).
        #[test]
        fn what_is_kept_arrives_in_time(
            waits in proptest::collection::vec((0u64..2_000, 1usize..200_000, proptest::bool::weighted(0.9)), 0..40),
            rate in proptest::option::of(10_000.0f64..1e9),
            bound_ms in 1u64..2_000,
            ahead in 0usize..300_000,
        ) {
            let now = Instant::now() + Duration::from_secs(10);
            let mut waits = waits;
            waits.sort_by_key(|w| std::cmp::Reverse(w.0)); // oldest first
            let q: Vec<(Option<Instant>, usize)> = waits
                .iter()
                .map(|&(ms, bytes, stales)| (stales.then(|| now - Duration::from_millis(ms)), bytes))
                .collect();
            let mut rule = Freshness::new(Duration::from_millis(bound_ms));
            rule.rate = rate;
            let mut kept = q.clone();
            let dropped = rule.drop_stale(now, ahead, &mut kept, |m| *m);
            proptest::prop_assert_eq!(dropped, q.len() - kept.len());
            proptest::prop_assert!(q.is_empty() || kept.last() == q.last(), "the newest stays");
            let never_stale = |v: &[(Option<Instant>, usize)]| v.iter().filter(|m| m.0.is_none()).count();
            proptest::prop_assert_eq!(never_stale(&q), never_stale(&kept));
            let (mut ahead, mut behind_one_kept_anyway) = (rate.map_or(0.0, |r| ahead as f64 / r), false);
            for (i, (at, bytes)) in kept.iter().enumerate() {
                ahead += rate.map_or(0.0, |r| *bytes as f64 / r);
                behind_one_kept_anyway |= at.is_none();
                if let (Some(at), false, false) = (at, i + 1 == kept.len(), behind_one_kept_anyway) {
                    let arrival = age(now, *at) + ahead;
                    proptest::prop_assert!(arrival <= Duration::from_millis(bound_ms).as_secs_f64() + 1e-9, "{}: {}", i, arrival);
                }
            }
        }
    }
}
