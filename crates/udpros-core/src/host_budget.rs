//! One rate shared by every link of a node to one host, with urgent traffic first.
//!
//! A per-link cap ([`UdpSenderConfig::max_rate`](crate::udpros::UdpSenderConfig::max_rate))
//! bounds one topic; a radio is shared by all of them. A node publishing a camera, a sonar
//! and a control topic to the operator's machine must keep their sum under what the radio
//! carries, and when the camera alone fills that share, the control topic must not wait
//! behind it. A [`HostBudget`] is that share: a token bucket that every link to one host
//! takes from before it sends.
//!
//! Two kinds of traffic take from it ([`Traffic`]). Bulk reserves what it sends (a whole
//! message, so a large one runs the bucket into debt) and starts once the debt before it
//! is repaid: first come, first served, so links that send a message at a time alternate
//! whatever the size of their sends.
//! Urgent traffic (a topic marked so, and any message that fits one datagram) never waits
//! for bulk: it goes at once, and what it takes is waited for by the bulk behind it, so
//! that the sum keeps the rate. Strict priority inside the node. Only when urgent traffic
//! alone exceeds the rate by more than [`URGENT_ALLOWANCE`] of it does it wait too, at the
//! rate (a bucket of its own).
//!
//! Pure: the driver passes `now`, sleeps until the instant it is given, and asks again.

use std::time::{Duration, Instant};

/// Messages of at most this many bytes (the serialized message, its length prefix
/// included) are urgent on every link: one Ethernet datagram's UDP payload less the UDPROS
/// header. On a UDPROS link they are one datagram; the rule is the same over TCPROS.
pub const SMALL_MESSAGE_BYTES: usize = 1472 - crate::udpros::HEADER_LEN;

/// How far ahead of the rate urgent traffic alone may run before it waits too: 50 ms at
/// the budget's rate (at least one datagram). A burst of urgent messages up to this delays
/// the bulk behind it by as long and costs the urgent ones nothing.
pub const URGENT_ALLOWANCE: Duration = Duration::from_millis(50);

/// What the bucket holds at most when nothing is sent: a 2 ms burst at its rate, at least
/// one full datagram, so that an idle budget lets a datagram go at once and never a burst
/// that fills the radio's queue.
pub const HOST_BURST: Duration = Duration::from_millis(2);

/// The smallest burst a budget holds, bytes: one full Ethernet datagram.
const MIN_BURST_BYTES: f64 = 1500.0;

/// Bytes a [`HostBudget`] reserved: when they may leave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reservation {
    /// When they may leave, unless urgent traffic overtook them
    /// ([`HostBudget::overtaken`]).
    pub start: Instant,
    traffic: Traffic,
    /// The budget's urgent bytes spent when the reservation was last looked at.
    urgent_mark: f64,
}

/// Whether a send goes before others that share its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    /// Goes at once within [`URGENT_ALLOWANCE`]; bulk waits behind it.
    Urgent,
    /// Waits until the budget is out of debt.
    Bulk,
}

impl Traffic {
    /// The class of a message of `bytes` on a topic marked urgent or not: urgent if the
    /// topic is, or if the message is small ([`SMALL_MESSAGE_BYTES`]).
    pub fn of_message(urgent_topic: bool, bytes: usize) -> Traffic {
        if urgent_topic || bytes <= SMALL_MESSAGE_BYTES {
            Traffic::Urgent
        } else {
            Traffic::Bulk
        }
    }
}

/// The rate every link of a node to one host shares (see the [module](self)).
#[derive(Debug, Clone)]
pub struct HostBudget {
    /// Bytes per second.
    rate: f64,
    /// The most `tokens` holds.
    burst: f64,
    /// What may be sent now; below zero, the debt the sends since made.
    tokens: f64,
    /// Urgent bytes spent since the budget began: a bulk reservation made before some of
    /// them lets them go first.
    urgent_spent: f64,
    /// The same for urgent sends alone, holding at most [`URGENT_ALLOWANCE`] of the rate.
    urgent_tokens: f64,
    urgent_burst: f64,
    last: Option<Instant>,
}

impl HostBudget {
    /// A budget of `rate_bytes_per_sec` (at least one byte per second).
    pub fn new(rate_bytes_per_sec: f64) -> HostBudget {
        let rate = if rate_bytes_per_sec.is_finite() {
            rate_bytes_per_sec.max(1.0)
        } else {
            f64::MAX
        };
        let burst = (rate * HOST_BURST.as_secs_f64()).max(MIN_BURST_BYTES);
        let urgent_burst = (rate * URGENT_ALLOWANCE.as_secs_f64()).max(MIN_BURST_BYTES);
        HostBudget {
            rate,
            burst,
            tokens: burst,
            urgent_spent: 0.0,
            urgent_tokens: urgent_burst,
            urgent_burst,
            last: None,
        }
    }

    /// The rate, bytes per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Whether `traffic` may send at `now`: `Ok` if so (then [`spend`](Self::spend) what
    /// it sends), or the instant to ask again. Asking takes nothing, so a driver that
    /// finds it has nothing to send after all leaves the budget as it was.
    pub fn ready(&mut self, now: Instant, traffic: Traffic) -> Result<(), Instant> {
        self.refill(now);
        let tokens = match traffic {
            Traffic::Bulk => self.tokens,
            Traffic::Urgent => self.urgent_tokens,
        };
        if tokens >= 0.0 {
            return Ok(());
        }
        let wait = -tokens / self.rate;
        // At least a microsecond: a wait rounded to zero would be asked again at once.
        Err(now + Duration::from_secs_f64(wait.min(3600.0)).max(Duration::from_micros(1)))
    }

    /// Takes `bytes` of `traffic` that was found [`ready`](Self::ready) (into debt if
    /// they are more than the bucket holds: a send is never cut).
    pub fn spend(&mut self, bytes: usize, traffic: Traffic) {
        self.tokens -= bytes as f64;
        if traffic == Traffic::Urgent {
            self.urgent_spent += bytes as f64;
            self.urgent_tokens -= bytes as f64;
        }
    }

    /// Reserves `bytes` of `traffic` asked for at `now`; they may leave at the
    /// reservation's [`start`](Reservation::start) (`now` if [`ready`](Self::ready) now),
    /// unless urgent traffic [`overtook`](Self::overtaken) them meanwhile. What is
    /// reserved is spent at once, so a later reservation waits behind it: a link reserves
    /// its next message once it sent the last, and links with messages waiting take
    /// turns.
    pub fn reserve(&mut self, now: Instant, bytes: usize, traffic: Traffic) -> Reservation {
        let start = self.ready(now, traffic).err().unwrap_or(now);
        self.spend(bytes, traffic);
        Reservation {
            start,
            traffic,
            urgent_mark: self.urgent_spent,
        }
    }

    /// Asked when a bulk reservation's start came: `None` if it may go, or the later
    /// instant to ask again, by as long as the urgent bytes spent since it was made take
    /// at the rate (they went ahead of it; the reservations made after them counted them
    /// already). Urgent reservations are never overtaken.
    pub fn overtaken(&mut self, reservation: &mut Reservation) -> Option<Instant> {
        let ahead = self.urgent_spent - reservation.urgent_mark;
        if reservation.traffic == Traffic::Urgent || ahead <= 0.0 {
            return None;
        }
        reservation.urgent_mark = self.urgent_spent;
        let wait = Duration::from_secs_f64((ahead / self.rate).min(3600.0));
        reservation.start += wait;
        Some(reservation.start)
    }

    /// How long the sends already made hold a bulk send back at `now` (zero when out of
    /// debt): a bulk link judges the age of what it sends with it.
    pub fn behind(&mut self, now: Instant) -> Duration {
        self.refill(now);
        Duration::from_secs_f64((-self.tokens / self.rate).clamp(0.0, 3600.0))
    }

    fn refill(&mut self, now: Instant) {
        if let Some(last) = self.last {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
            self.urgent_tokens = (self.urgent_tokens + elapsed * self.rate).min(self.urgent_burst);
        }
        // Calls with an earlier `now` (threads racing for the budget) add nothing.
        self.last = Some(self.last.map_or(now, |last| last.max(now)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn bulk_waits_out_the_debt_its_own_sends_made() {
        let t0 = Instant::now();
        // 100 kB/s: a 2 ms burst is 200 bytes, so the floor of one datagram, 1500.
        let mut b = HostBudget::new(100_000.0);
        assert_eq!(
            b.reserve(t0, 10_000, Traffic::Bulk).start,
            t0,
            "out of debt"
        );
        // 10,000 - 1,500 = 8,500 bytes of debt: 85 ms at 100 kB/s.
        let again = b.reserve(t0, 10_000, Traffic::Bulk).start;
        assert_eq!((again - t0).as_millis(), 85);
        assert_eq!(b.behind(t0).as_millis(), 185, "both reserved");
        // A third waits behind both, first come, first served.
        let third = b.reserve(t0 + MS, 1, Traffic::Bulk).start;
        assert_eq!((third - t0).as_millis(), 185);
        // Idle for long, the bucket holds one burst, not more.
        let later = again + Duration::from_secs(10);
        assert_eq!(b.reserve(later, 1_600, Traffic::Bulk).start, later);
        assert!(b.reserve(later, 1, Traffic::Bulk).start > later);
    }

    #[test]
    fn urgent_goes_through_the_bulk_debt_and_pushes_bulk_back() {
        let t0 = Instant::now();
        let mut b = HostBudget::new(100_000.0);
        assert_eq!(b.reserve(t0, 4_500, Traffic::Bulk).start, t0); // 30 ms of debt
        for _ in 0..10 {
            let at = b.reserve(t0, 100, Traffic::Urgent).start;
            assert_eq!(at, t0, "urgent ignores bulk debt");
        }
        // The urgent kilobyte is paid by the bulk: 40 ms now.
        let bulk = b.ready(t0, Traffic::Bulk).unwrap_err();
        assert_eq!((bulk - t0).as_millis(), 40);
        // Urgent alone may run 50 ms (5000 bytes) ahead of the rate, then waits at it.
        assert_eq!(b.reserve(t0, 4_100, Traffic::Urgent).start, t0);
        let urgent = b.reserve(t0, 100, Traffic::Urgent).start;
        assert_eq!((urgent - t0).as_millis(), 1, "100 bytes over, at 100 kB/s");
        // And all of it is the bulk's to wait for: 30 + 10 + 41 + 1 ms.
        assert_eq!(
            (b.ready(urgent, Traffic::Bulk).unwrap_err() - t0).as_millis(),
            82
        );
    }

    #[test]
    fn urgent_bytes_after_a_reservation_go_before_it() {
        let t0 = Instant::now();
        let mut b = HostBudget::new(100_000.0);
        b.spend(1_500, Traffic::Bulk); // out of tokens
        let mut first = b.reserve(t0, 10_000, Traffic::Bulk);
        assert_eq!(first.start, t0);
        // 2 kB of control before the second reserves: the second counts it, the first not.
        b.reserve(t0, 2_000, Traffic::Urgent);
        let mut second = b.reserve(t0, 10_000, Traffic::Bulk);
        assert_eq!((second.start - t0).as_millis(), 120);
        // 1 kB more after both: each lets it go first, 10 ms later.
        b.reserve(t0 + MS, 1_000, Traffic::Urgent);
        let first_at = b.overtaken(&mut first).expect("overtaken");
        assert_eq!((first_at - t0).as_millis(), 30, "2 kB + 1 kB went ahead");
        assert_eq!(b.overtaken(&mut first), None, "nothing more since");
        let second_at = b.overtaken(&mut second).expect("overtaken");
        assert_eq!((second_at - t0).as_millis(), 130);
        // An urgent reservation is never overtaken.
        let mut urgent = b.reserve(t0, 100, Traffic::Urgent);
        b.reserve(t0, 100, Traffic::Urgent);
        assert_eq!(b.overtaken(&mut urgent), None);
    }

    #[test]
    fn ready_takes_nothing_and_time_going_back_adds_nothing() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let mut b = HostBudget::new(1_000_000.0);
        assert!(b.ready(t0, Traffic::Bulk).is_ok());
        assert!(b.ready(t0, Traffic::Bulk).is_ok());
        b.spend(10_000, Traffic::Bulk);
        let at = b.ready(t0, Traffic::Bulk).unwrap_err();
        assert!(b.ready(t0 - Duration::from_secs(1), Traffic::Bulk).is_err());
        assert_eq!(b.ready(t0, Traffic::Bulk).unwrap_err(), at);
    }

    #[test]
    fn absurd_rates_make_a_budget_that_works() {
        let t0 = Instant::now();
        for rate in [0.0, -5.0, f64::NAN, f64::INFINITY, 1e300] {
            let mut b = HostBudget::new(rate);
            assert_eq!(b.reserve(t0, 1, Traffic::Bulk).start, t0, "{rate}");
            let _ = b.reserve(t0, usize::MAX, Traffic::Bulk).start;
            let wait = b.ready(t0, Traffic::Bulk);
            if let Err(at) = wait {
                assert!(
                    at - t0 <= Duration::from_secs(3600),
                    "{rate}: {:?}",
                    at - t0
                );
            }
        }
    }

    proptest::proptest! {
        /// Links that each reserve a message once they sent the last, on a fake clock:
        /// some as a TCP link does (the kernel takes the write at once), some as a paced
        /// UDP link does (its datagrams leave over the message's time at the rate). Over
        /// any stretch, what left is within the rate plus a burst, the urgent allowance
        /// and a message per link; the bulk links take turns (none gets less than half the
        /// messages of another); an urgent link under the rate never waits.
        #[test]
        fn the_rate_holds_links_take_turns_and_urgent_never_waits(
            rate in 20_000.0f64..2e6,
            links in proptest::collection::vec((1_000usize..120_000, proptest::bool::ANY), 1..4),
            urgent_share in 0.0f64..0.8,
        ) {
            let t0 = Instant::now();
            let mut b = HostBudget::new(rate);
            let urgent_size = 200usize;
            let urgent_every = Duration::from_secs_f64(urgent_size as f64 / (urgent_share * rate).max(1.0));
            let end = t0 + Duration::from_secs(3);
            // Each link asks for its next message at a time, then waits for its
            // reservation (`Some`) and sends at its start.
            let mut next: Vec<(Instant, Option<Reservation>)> = vec![(t0, None); links.len()];
            let mut messages = vec![0usize; links.len()];
            let mut urgent_next = t0;
            let mut sent: Vec<(Instant, usize)> = Vec::new();
            loop {
                let (i, at) = next.iter().map(|(at, _)| *at).enumerate().min_by_key(|(_, at)| *at).unwrap();
                let now = at.min(urgent_next);
                if now >= end {
                    break;
                }
                if urgent_share > 0.0 && urgent_next <= at {
                    let start = b.reserve(now, urgent_size, Traffic::Urgent).start;
                    proptest::prop_assert_eq!(start, now, "urgent under the rate waited");
                    sent.push((now, urgent_size));
                    urgent_next = now + urgent_every;
                    continue;
                }
                let (size, paced) = links[i];
                match next[i].1.take() {
                    None => {
                        let reservation = b.reserve(now, size, Traffic::Bulk);
                        proptest::prop_assert!(reservation.start >= now);
                        next[i] = (reservation.start, Some(reservation));
                    }
                    Some(mut reservation) => {
                        if let Some(later) = b.overtaken(&mut reservation) {
                            proptest::prop_assert!(later > now);
                            next[i] = (later, Some(reservation));
                            continue;
                        }
                        sent.push((now, size));
                        messages[i] += 1;
                        let sending = if paced { size as f64 / rate } else { 0.0 };
                        // A message's time at the least: never two asks at one instant.
                        let sending = Duration::from_secs_f64(sending).max(Duration::from_micros(1));
                        next[i] = (now + sending, None);
                    }
                }
            }
            sent.sort_by_key(|(at, _)| *at);
            let allowance = rate * URGENT_ALLOWANCE.as_secs_f64();
            let reserved: usize = links.iter().map(|(size, _)| size).sum();
            let slack = b.burst + allowance + reserved as f64;
            // The worst stretch, in one pass: the most of (bytes sent from i to j) less
            // (rate × the time from i to j), over every i ≤ j.
            let (mut before, mut lowest, mut worst) = (0.0f64, f64::MAX, f64::MIN);
            for &(at, len) in &sent {
                let t = (at - t0).as_secs_f64();
                lowest = lowest.min(before - rate * t);
                before += len as f64;
                worst = worst.max(before - rate * t - lowest);
            }
            proptest::prop_assert!(worst <= slack, "{worst} bytes over the rate, {slack} allowed");
            // The bulk links kept the rate busy: at least half of what was free of urgent.
            let total: f64 = sent.iter().map(|(_, l)| *l as f64).sum();
            proptest::prop_assert!(total >= 0.5 * rate * 3.0, "{total} bytes in 3 s at {rate}");
            let (fewest, most) = (messages.iter().min().unwrap(), messages.iter().max().unwrap());
            proptest::prop_assert!(2 * fewest + 2 >= *most, "messages per link {messages:?}");
        }
    }

    #[test]
    fn small_messages_and_urgent_topics_are_urgent() {
        assert_eq!(Traffic::of_message(false, 64), Traffic::Urgent);
        assert_eq!(
            Traffic::of_message(false, SMALL_MESSAGE_BYTES),
            Traffic::Urgent
        );
        assert_eq!(
            Traffic::of_message(false, SMALL_MESSAGE_BYTES + 1),
            Traffic::Bulk
        );
        assert_eq!(Traffic::of_message(true, 1 << 20), Traffic::Urgent);
    }
}
