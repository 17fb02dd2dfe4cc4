//! A subscriber's link to one publisher, as state machines driven by `now`: when to try
//! again after a link ends ([`Retry`]: exponential back-off, and the fall-back from UDPROS
//! to TCPROS after UDP links that delivered nothing), and, from
//! [`udpros::liveness`](crate::udpros::liveness), when a UDPROS link is dead
//! ([`UdpLiveness`]) and who may speak on it ([`AllowedSources`]).

pub use crate::udpros::liveness::{
    AllowedSources, Dead, UdpLiveness, HEARTBEAT, INCOMPLETE_BEFORE_FAILURE, LIVENESS_CHECK,
    LIVENESS_TIMEOUT,
};
use std::time::{Duration, Instant};

/// The first wait before trying a link again.
pub const FIRST_RETRY: Duration = Duration::from_millis(100);
/// The longest wait between tries; a link that lived longer than this starts over at
/// [`FIRST_RETRY`].
pub const MAX_RETRY: Duration = Duration::from_secs(5);
/// UDP links in a row that ended before delivering a message, after which a subscription
/// that also allows TCPROS offers only TCPROS to that publisher.
pub const UDP_FAILURES_BEFORE_TCP: u32 = 3;

/// When to try a link again, and whether to still offer UDPROS.
#[derive(Debug, Clone)]
pub struct Retry {
    delay: Duration,
    udp_failures: u32,
    can_fall_back: bool,
}

/// What [`Retry::ended`] decided about the attempt that ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextTry {
    /// Wait this long before the next attempt.
    pub after: Duration,
    /// This is the first failure of a run (worth a warning; the retries after it are not).
    pub first_of_run: bool,
    /// This attempt made the link fall back to TCPROS (say so once).
    pub fell_back_to_tcp: bool,
}

/// How an attempt went, as [`Retry::ended`] needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    /// When it started.
    pub started: Instant,
    /// Whether it ran over UDPROS.
    pub udp: bool,
    /// Whether it delivered at least one message.
    pub delivered: bool,
}

impl Retry {
    /// A fresh link; `can_fall_back` when the subscription allows TCPROS too.
    pub fn new(can_fall_back: bool) -> Retry {
        Retry {
            delay: FIRST_RETRY,
            udp_failures: 0,
            can_fall_back,
        }
    }

    /// Whether the next attempt offers UDPROS (false once the link fell back to TCPROS).
    pub fn offer_udp(&self) -> bool {
        !(self.can_fall_back && self.udp_failures >= UDP_FAILURES_BEFORE_TCP)
    }

    /// Records that `attempt` ended at `now`; returns when to try again.
    pub fn ended(&mut self, attempt: Attempt, now: Instant) -> NextTry {
        let mut fell_back_to_tcp = false;
        if attempt.udp {
            if attempt.delivered {
                self.udp_failures = 0;
            } else {
                self.udp_failures = self.udp_failures.saturating_add(1);
                fell_back_to_tcp =
                    self.can_fall_back && self.udp_failures == UDP_FAILURES_BEFORE_TCP;
            }
        }
        if now.saturating_duration_since(attempt.started) > MAX_RETRY {
            self.delay = FIRST_RETRY; // it worked for a while: start again quickly
        }
        let next = NextTry {
            after: self.delay,
            first_of_run: self.delay == FIRST_RETRY,
            fell_back_to_tcp,
        };
        self.delay = (self.delay * 2).min(MAX_RETRY);
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_to_the_cap_and_starts_over_after_a_long_link() {
        let t0 = Instant::now();
        let mut retry = Retry::new(true);
        let mut now = t0;
        let mut waits = Vec::new();
        for _ in 0..8 {
            let attempt = Attempt {
                started: now,
                udp: false,
                delivered: false,
            };
            let next = retry.ended(attempt, now);
            waits.push((next.after.as_millis(), next.first_of_run));
            now += next.after;
        }
        assert_eq!(
            waits,
            [
                (100, true),
                (200, false),
                (400, false),
                (800, false),
                (1600, false),
                (3200, false),
                (5000, false),
                (5000, false)
            ]
        );
        let long = Attempt {
            started: now,
            udp: false,
            delivered: true,
        };
        let next = retry.ended(long, now + Duration::from_secs(60));
        assert_eq!((next.after, next.first_of_run), (FIRST_RETRY, true));
    }

    #[test]
    fn udp_links_that_deliver_nothing_fall_back_to_tcp_once() {
        let now = Instant::now();
        let dead_udp = Attempt {
            started: now,
            udp: true,
            delivered: false,
        };
        let mut retry = Retry::new(true);
        assert!(
            retry.ended(dead_udp, now)
                == NextTry {
                    after: FIRST_RETRY,
                    first_of_run: true,
                    fell_back_to_tcp: false
                }
        );
        // A link that delivered resets the count.
        retry.ended(
            Attempt {
                delivered: true,
                ..dead_udp
            },
            now,
        );
        let fell: Vec<bool> = (0..5)
            .map(|_| retry.ended(dead_udp, now).fell_back_to_tcp)
            .collect();
        assert_eq!(fell, [false, false, true, false, false]);
        assert!(!retry.offer_udp());
        // A UDP-only subscription never stops offering UDP.
        let mut udp_only = Retry::new(false);
        for _ in 0..10 {
            assert!(!udp_only.ended(dead_udp, now).fell_back_to_tcp);
        }
        assert!(udp_only.offer_udp());
    }
}
