//! The PING and TIMESYNC exchanges as pure state machines: our requests, which replies are
//! ours (addressed to us, from the autopilot, for something we still wait for), what to
//! answer other requesters, and the counters. Times come in as arguments; the link layer
//! converts these plain structs to and from the `mavlink` crate's messages.

use super::estimator::Exchange;
use std::collections::VecDeque;

/// A MAVLink system and component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ids {
    /// The system id (1 for a vehicle's autopilot, 255 for a ground station).
    pub system: u8,
    /// The component id within the system (1 for the autopilot).
    pub component: u8,
}

impl Ids {
    /// 0/0: every system and component (a request to whoever answers).
    pub const BROADCAST: Ids = Ids {
        system: 0,
        component: 0,
    };
    /// 1/1: vehicle 1's autopilot (`MAV_COMP_ID_AUTOPILOT1`).
    pub const AUTOPILOT: Ids = Ids {
        system: 1,
        component: 1,
    };
    /// 1/191: a companion computer on vehicle 1 (`MAV_COMP_ID_ONBOARD_COMPUTER`), the
    /// bridge's default.
    pub const ONBOARD_COMPUTER: Ids = Ids {
        system: 1,
        component: 191,
    };
    /// 255/190: a ground station (`MAV_COMP_ID_MISSIONPLANNER`), as QGroundControl and
    /// Mission Planner call themselves.
    pub const GROUND_STATION: Ids = Ids {
        system: 255,
        component: 190,
    };
}

/// PING's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping {
    /// The requester's timestamp (µs), echoed in the reply.
    pub time_usec: u64,
    /// The request's sequence number, echoed in the reply.
    pub seq: u32,
    /// 0/0 in a request; the requester in a reply.
    pub target: Ids,
}

/// What the PING exchanges measured so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PingStats {
    /// Requests sent.
    pub sent: u64,
    /// Replies to our requests.
    pub replies: u64,
    /// Requests unanswered within the timeout, counted once a first reply has come.
    pub lost: u64,
    /// Lost over settled requests (see `InFlight`), as of the last `expire`.
    pub loss: f64,
    /// The last round trip (µs).
    pub last_rtt_us: Option<u64>,
    /// The shortest round trip (µs).
    pub min_rtt_us: Option<u64>,
    /// The mean round trip (µs; 0 before a reply).
    pub mean_rtt_us: f64,
}

/// What a PING received means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PingOutcome {
    /// One of our requests came back after this many microseconds.
    Rtt(u64),
    /// Another node's request: send this reply.
    Answer(Ping),
    /// Not for us (another requester's reply, a duplicate, a stranger).
    Ignored,
}

/// Our requests in flight, matched by key. Each settles as answered or lost only once it
/// is older than the timeout: an answer comes within milliseconds but a loss is known only
/// after the timeout, so settling answers at once would under-count loss by the losses of
/// the last timeout's worth of requests.
#[derive(Debug, Clone)]
struct InFlight<K> {
    entries: VecDeque<InFlightEntry<K>>,
    /// Before the first answer nothing settles: the autopilot may not answer at all, or
    /// the link was not up yet.
    first_answer_seen: bool,
    answered: u64,
    lost: u64,
}

#[derive(Debug, Clone, Copy)]
struct InFlightEntry<K> {
    key: K,
    sent: i64,
    answered: bool,
}

/// Requests remembered at most (a flood of requests without answers must not grow memory).
const IN_FLIGHT: usize = 4096;

impl<K: PartialEq + Copy> InFlight<K> {
    fn new() -> Self {
        InFlight {
            entries: VecDeque::new(),
            first_answer_seen: false,
            answered: 0,
            lost: 0,
        }
    }

    fn push(&mut self, key: K, sent: i64) {
        self.entries.push_back(InFlightEntry {
            key,
            sent,
            answered: false,
        });
        if self.entries.len() > IN_FLIGHT {
            if let Some(oldest) = self.entries.pop_front() {
                self.settle(oldest);
            }
        }
    }

    fn settle(&mut self, e: InFlightEntry<K>) {
        if !self.first_answer_seen {
            return;
        }
        if e.answered {
            self.answered += 1;
        } else {
            self.lost += 1;
        }
    }

    /// Marks `key` answered and returns when it was sent; `None` for a key we are not
    /// waiting for (another requester's, or a duplicate).
    fn answer(&mut self, key: K) -> Option<i64> {
        let entry = self
            .entries
            .iter_mut()
            .find(|e| e.key == key && !e.answered)?;
        entry.answered = true;
        let sent = entry.sent;
        if !self.first_answer_seen {
            self.first_answer_seen = true;
            self.entries.retain(|e| e.sent >= sent);
        }
        Some(sent)
    }

    /// Corrects when `key` left.
    fn departed(&mut self, key: K, at: i64) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.key == key) {
            e.sent = at;
        }
    }

    /// Settles every request older than `timeout`.
    fn expire(&mut self, now: i64, timeout: i64) {
        while let Some(&e) = self.entries.front() {
            if now.saturating_sub(e.sent) < timeout {
                break;
            }
            self.entries.pop_front();
            self.settle(e);
        }
    }

    fn loss(&self) -> f64 {
        loss_fraction(self.lost, self.answered)
    }
}

/// Latency measurement with PING, as the MAVLink ping service describes it.
#[derive(Debug, Clone)]
pub struct Pinger {
    ours: Ids,
    next_seq: u32,
    /// Keyed by (seq, time_usec); times in µs.
    in_flight: InFlight<(u32, u64)>,
    timeout_us: u64,
    /// What the exchanges measured so far.
    pub stats: PingStats,
}

impl Pinger {
    /// A pinger for `ours`, counting a request lost after `timeout_us` without reply.
    pub fn new(ours: Ids, timeout_us: u64) -> Pinger {
        Pinger {
            ours,
            next_seq: 0,
            in_flight: InFlight::new(),
            timeout_us,
            stats: PingStats::default(),
        }
    }

    /// How long a request may wait for its reply from now on (µs).
    pub fn set_timeout_us(&mut self, timeout_us: u64) {
        self.timeout_us = timeout_us;
    }

    /// A request to broadcast (target 0/0), with the next sequence number.
    pub fn request(&mut self, now_us: u64) -> Ping {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.in_flight.push((seq, now_us), now_us as i64);
        self.stats.sent += 1;
        Ping {
            time_usec: now_us,
            seq,
            target: Ids::BROADCAST,
        }
    }

    /// A PING from `from` (`autopilot`: whose replies count).
    pub fn on_ping(
        &mut self,
        from: Ids,
        autopilot: Option<Ids>,
        ping: &Ping,
        now_us: u64,
    ) -> PingOutcome {
        if ping.target == Ids::BROADCAST {
            if from == self.ours {
                return PingOutcome::Ignored; // our own request, looped back
            }
            return PingOutcome::Answer(Ping {
                time_usec: ping.time_usec,
                seq: ping.seq,
                target: from,
            });
        }
        if ping.target != self.ours || autopilot.is_some_and(|a| a != from) {
            return PingOutcome::Ignored;
        }
        if self.in_flight.answer((ping.seq, ping.time_usec)).is_none() {
            return PingOutcome::Ignored;
        }
        let rtt = now_us.saturating_sub(ping.time_usec);
        let s = &mut self.stats;
        s.replies += 1;
        s.last_rtt_us = Some(rtt);
        s.min_rtt_us = Some(s.min_rtt_us.map_or(rtt, |m| m.min(rtt)));
        s.mean_rtt_us += (rtt as f64 - s.mean_rtt_us) / s.replies as f64;
        PingOutcome::Rtt(rtt)
    }

    /// Settles requests past their timeout (see `InFlight`).
    pub fn expire(&mut self, now_us: u64) {
        self.in_flight.expire(now_us as i64, self.timeout_us as i64);
        self.stats.lost = self.in_flight.lost;
        self.stats.loss = self.in_flight.loss();
    }
}

/// TIMESYNC's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timesync {
    /// The responder's clock (ns) in a reply; 0 in a request.
    pub tc1: i64,
    /// The requester's clock (ns), echoed in the reply.
    pub ts1: i64,
    /// Whom the message is for (TIMESYNC v2; v1 has no target).
    pub target: Ids,
}

/// Which protocol version the responder speaks, from where it addressed its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Responder {
    /// Addressed to us.
    V2,
    /// Broadcast (0/0): a v1 responder, whose replies cannot be told apart between requesters.
    V1,
    /// Some other address (older PX4 sent uninitialised bytes there).
    GarbageTarget,
}

/// What the TIMESYNC exchanges measured so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TimesyncStats {
    /// Requests sent.
    pub sent: u64,
    /// Replies from the autopilot.
    pub replies: u64,
    /// Replies from another system than the autopilot.
    pub foreign: u64,
    /// Replies for requests we are not waiting for (another requester's, duplicates).
    pub unmatched: u64,
    /// Replies from a v1 responder (broadcast).
    pub v1_replies: u64,
    /// Replies addressed to neither us nor everyone.
    pub garbage_target: u64,
    /// The autopilot's requests we answered.
    pub answered: u64,
    /// Requests unanswered within the timeout, counted once a first reply has come.
    pub lost: u64,
    /// Lost over settled requests, as of the last `expire`.
    pub loss: f64,
}

/// Lost over settled (answered or lost) requests; 0 before anything settled.
fn loss_fraction(lost: u64, answered: u64) -> f64 {
    let settled = lost + answered;
    if settled == 0 {
        0.0
    } else {
        lost as f64 / settled as f64
    }
}

/// What a TIMESYNC received means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimesyncOutcome {
    /// One of our exchanges completed.
    Sample(Exchange, Responder),
    /// The autopilot's own request: send this reply.
    Answer(Timesync),
    /// Not for us, or not a reply we wait for (counted in the stats).
    Ignored,
}

/// Our side of TIMESYNC v2 (v1 responders tolerated).
#[derive(Debug, Clone)]
pub struct TimesyncClient {
    ours: Ids,
    /// Keyed by ts1, with when the request actually left: the link reports departures, so
    /// queueing in this process does not count as uplink delay.
    in_flight: InFlight<i64>,
    last_ts1: i64,
    /// Answer the autopilot's requests (off by default: mavros may share the link).
    pub respond: bool,
    /// What the exchanges measured so far.
    pub stats: TimesyncStats,
}

impl TimesyncClient {
    /// A client for `ours` that answers the autopilot's own requests when `respond`.
    pub fn new(ours: Ids, respond: bool) -> TimesyncClient {
        TimesyncClient {
            ours,
            in_flight: InFlight::new(),
            last_ts1: 0,
            respond,
            stats: TimesyncStats::default(),
        }
    }

    /// A request stamped with our monotonic clock (ns; kept strictly increasing, so every
    /// ts1 is unique and a reply names its request).
    pub fn request(&mut self, now_ns: i64, autopilot: Option<Ids>) -> Timesync {
        let ts1 = now_ns.max(self.last_ts1.saturating_add(1)).max(1);
        self.last_ts1 = ts1;
        self.in_flight.push(ts1, ts1);
        self.stats.sent += 1;
        Timesync {
            tc1: 0,
            ts1,
            target: autopilot.unwrap_or(Ids::BROADCAST),
        }
    }

    /// A TIMESYNC from `from` at `now_ns`: a sample of ours, a request to answer, or nothing.
    pub fn on_timesync(
        &mut self,
        from: Ids,
        autopilot: Option<Ids>,
        msg: &Timesync,
        now_ns: i64,
    ) -> TimesyncOutcome {
        if msg.tc1 == 0 {
            // A request. Answer only the autopilot, and only when asked to.
            if self.respond && autopilot == Some(from) {
                self.stats.answered += 1;
                return TimesyncOutcome::Answer(Timesync {
                    tc1: now_ns,
                    ts1: msg.ts1,
                    target: from,
                });
            }
            return TimesyncOutcome::Ignored;
        }
        if autopilot.is_some_and(|a| a != from) {
            self.stats.foreign += 1;
            return TimesyncOutcome::Ignored;
        }
        let Some(sent) = self.in_flight.answer(msg.ts1) else {
            self.stats.unmatched += 1;
            return TimesyncOutcome::Ignored;
        };
        let responder = match msg.target {
            t if t == self.ours => Responder::V2,
            Ids::BROADCAST => {
                if self.stats.v1_replies == 0 {
                    tracing::warn!("the autopilot answers TIMESYNC as v1 (broadcast replies): other requesters' replies cannot be told apart");
                }
                self.stats.v1_replies += 1;
                Responder::V1
            }
            _ => {
                self.stats.garbage_target += 1;
                Responder::GarbageTarget
            }
        };
        self.stats.replies += 1;
        TimesyncOutcome::Sample(
            Exchange {
                t1: sent,
                tc1: msg.tc1,
                t3: now_ns,
            },
            responder,
        )
    }

    /// The request `ts1` actually left at `at_ns` (ts1 was taken when it was queued).
    pub fn departed(&mut self, ts1: i64, at_ns: i64) {
        self.in_flight.departed(ts1, at_ns);
    }

    /// Settles requests older than `timeout_ns` (see `InFlight`).
    pub fn expire(&mut self, now_ns: i64, timeout_ns: i64) {
        self.in_flight.expire(now_ns, timeout_ns);
        self.stats.lost = self.in_flight.lost;
        self.stats.loss = self.in_flight.loss();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Ids = Ids::ONBOARD_COMPUTER;
    const FCU: Ids = Ids::AUTOPILOT;
    const GCS: Ids = Ids::GROUND_STATION;

    #[test]
    fn ping_accepts_only_our_replies_and_answers_others() {
        let mut p = Pinger::new(US, 2_000_000);
        let req = p.request(1_000);
        assert_eq!((req.seq, req.target), (0, Ids::BROADCAST));
        let reply = Ping { target: US, ..req };
        // A reply for another requester, or from a stranger, does not count.
        assert_eq!(
            p.on_ping(FCU, Some(FCU), &Ping { target: GCS, ..req }, 1_500),
            PingOutcome::Ignored
        );
        assert_eq!(
            p.on_ping(GCS, Some(FCU), &reply, 1_500),
            PingOutcome::Ignored
        );
        assert_eq!(
            p.on_ping(FCU, Some(FCU), &reply, 1_500),
            PingOutcome::Rtt(500)
        );
        assert_eq!(
            p.on_ping(FCU, Some(FCU), &reply, 1_600),
            PingOutcome::Ignored,
            "duplicate"
        );
        // A GCS's request is answered with its time and seq, addressed to it.
        let theirs = Ping {
            time_usec: 42,
            seq: 7,
            target: Ids::BROADCAST,
        };
        assert_eq!(
            p.on_ping(GCS, Some(FCU), &theirs, 0),
            PingOutcome::Answer(Ping {
                target: GCS,
                ..theirs
            })
        );
    }

    #[test]
    fn ping_counts_loss_only_after_the_first_reply_and_wraps_seq() {
        let mut p = Pinger::new(US, 1_000);
        p.request(0);
        p.expire(5_000);
        assert_eq!(
            p.stats.lost, 0,
            "no reply yet: maybe the autopilot never answers PING"
        );
        let r = p.request(10_000);
        p.on_ping(FCU, None, &Ping { target: US, ..r }, 10_100);
        p.request(20_000);
        p.expire(30_000);
        assert_eq!((p.stats.replies, p.stats.lost), (1, 1));
        assert!((p.stats.loss - 0.5).abs() < 1e-9);
        p.next_seq = u32::MAX;
        assert_eq!(p.request(0).seq, u32::MAX);
        assert_eq!(p.request(0).seq, 0);
    }

    #[test]
    fn timesync_matches_on_ts1_and_sender_and_classifies_responders() {
        let mut t = TimesyncClient::new(US, false);
        let a = t.request(1_000, Some(FCU));
        let b = t.request(1_000, Some(FCU)); // same clock reading: still a distinct ts1
        assert!(b.ts1 > a.ts1 && a.tc1 == 0 && a.target == FCU);
        let v2 = Timesync {
            tc1: 5_000,
            ts1: a.ts1,
            target: US,
        };
        assert!(matches!(
            t.on_timesync(FCU, Some(FCU), &v2, 3_000),
            TimesyncOutcome::Sample(_, Responder::V2)
        ));
        assert_eq!(
            t.on_timesync(FCU, Some(FCU), &v2, 3_100),
            TimesyncOutcome::Ignored,
            "duplicate"
        );
        let v1 = Timesync {
            tc1: 5_000,
            ts1: b.ts1,
            target: Ids::BROADCAST,
        };
        assert_eq!(
            t.on_timesync(GCS, Some(FCU), &v1, 3_000),
            TimesyncOutcome::Ignored,
            "foreign sender"
        );
        assert!(matches!(
            t.on_timesync(FCU, Some(FCU), &v1, 3_000),
            TimesyncOutcome::Sample(_, Responder::V1)
        ));
        let other = Timesync {
            tc1: 9,
            ts1: 123_456,
            target: GCS,
        };
        assert_eq!(
            t.on_timesync(FCU, Some(FCU), &other, 3_000),
            TimesyncOutcome::Ignored,
            "another requester's reply"
        );
        assert_eq!(
            (
                t.stats.replies,
                t.stats.v1_replies,
                t.stats.foreign,
                t.stats.unmatched
            ),
            (2, 1, 1, 2)
        );
    }

    #[test]
    fn timesync_answers_the_autopilot_only_when_asked_to() {
        let request = Timesync {
            tc1: 0,
            ts1: 77,
            target: US,
        };
        let mut quiet = TimesyncClient::new(US, false);
        assert_eq!(
            quiet.on_timesync(FCU, Some(FCU), &request, 500),
            TimesyncOutcome::Ignored
        );
        let mut answering = TimesyncClient::new(US, true);
        assert_eq!(
            answering.on_timesync(FCU, Some(FCU), &request, 500),
            TimesyncOutcome::Answer(Timesync {
                tc1: 500,
                ts1: 77,
                target: FCU
            })
        );
        assert_eq!(
            answering.on_timesync(GCS, Some(FCU), &request, 500),
            TimesyncOutcome::Ignored
        );
    }

    #[test]
    fn timesync_loss_counts_only_after_a_first_reply() {
        let mut t = TimesyncClient::new(US, false);
        t.request(1_000, Some(FCU));
        t.expire(10_000_000, 2_000_000);
        assert_eq!(
            t.stats.lost, 0,
            "an autopilot that never answered lost nothing"
        );
        t.request(19_000_000, Some(FCU)); // unanswered, but sent before the first answer
        let a = t.request(20_000_000, Some(FCU));
        let lost = t.request(20_100_000, Some(FCU));
        let reply = Timesync {
            tc1: 1,
            target: US,
            ..a
        };
        assert!(matches!(
            t.on_timesync(FCU, Some(FCU), &reply, 21_000_000),
            TimesyncOutcome::Sample(..)
        ));
        t.expire(lost.ts1 + 1_999_999, 2_000_000);
        assert_eq!(t.stats.lost, 0);
        t.expire(lost.ts1 + 2_000_000, 2_000_000);
        assert_eq!((t.stats.replies, t.stats.lost), (1, 1));
        assert!((t.stats.loss - 0.5).abs() < 1e-9);
    }
}
