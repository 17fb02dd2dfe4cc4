//! The bridge's state without I/O: which autopilot it talks to, the PING and TIMESYNC
//! exchanges, both estimators and the round-trip figures. Messages and the time come in;
//! messages to send and samples to publish come out. All times are CLOCK_MONOTONIC ns.

use super::estimator::{Exchange, FitParams, Px4Filter, Px4Params, WindowFit};
use super::messages::{Incoming, Outgoing};
use super::protocol::{
    Ids, PingOutcome, PingStats, Pinger, Responder, TimesyncClient, TimesyncOutcome, TimesyncStats,
};

/// What a [`Session`] is set up with.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Our own system and component.
    pub ours: Ids,
    /// The autopilot, if fixed; else learnt from its HEARTBEAT.
    pub autopilot: Option<Ids>,
    /// How long a request may wait for its reply before it counts as lost (ns).
    pub timeout_ns: i64,
    /// Answer the autopilot's own TIMESYNC requests.
    pub respond_timesync: bool,
    /// PX4's offset filter, run beside ours for comparison.
    pub px4: Px4Params,
    /// Our windowed fit of offset and skew.
    pub fit: FitParams,
}

/// One completed TIMESYNC exchange, as mavros's `TimesyncStatus` reports it (ns, local −
/// remote, on CLOCK_MONOTONIC).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimesyncSample {
    /// The four timestamps of the exchange.
    pub exchange: Exchange,
    /// Which protocol version answered.
    pub responder: Responder,
    /// This exchange's own offset (midpoint of the round trip).
    pub observed_offset: i64,
    /// Our estimator's offset at the reply's arrival.
    pub fit_offset: Option<i64>,
    /// PX4's filter's offset at the reply's arrival.
    pub px4_offset: Option<i64>,
}

/// What the session asks of the node after a message.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Send this to the autopilot.
    Send(Outgoing),
    /// A TIMESYNC exchange completed.
    Timesync(TimesyncSample),
    /// The autopilot's wall clock (SYSTEM_TIME), received at `at_ns`.
    SystemTime {
        /// The autopilot's Unix time (µs).
        unix_usec: u64,
        /// When it arrived, on our CLOCK_MONOTONIC (ns).
        at_ns: i64,
    },
    /// The autopilot was heard for the first time.
    AutopilotFound(Ids),
}

/// Running round-trip figures (ns).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RttStats {
    /// The last round trip.
    pub last: Option<i64>,
    /// The shortest.
    pub min: Option<i64>,
    /// The mean (0 before any).
    pub mean: f64,
    /// Round trips counted.
    pub count: u64,
}

impl RttStats {
    fn add(&mut self, rtt: i64) {
        self.count += 1;
        self.last = Some(rtt);
        self.min = Some(self.min.map_or(rtt, |m| m.min(rtt)));
        self.mean += (rtt as f64 - self.mean) / self.count as f64;
    }
}

/// Everything the latency topic and the diagnostics show.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The autopilot, once known.
    pub autopilot: Option<Ids>,
    /// PING round trips and losses.
    pub ping: PingStats,
    /// TIMESYNC counts and losses.
    pub timesync: TimesyncStats,
    /// TIMESYNC round trips.
    pub timesync_rtt: RttStats,
    /// The TIMESYNC version the autopilot answers with, once known.
    pub responder: Option<Responder>,
    /// Our estimator at `now` (local − remote, ns).
    pub offset: Option<i64>,
    /// PX4's filter's offset at `now` (ns).
    pub px4_offset: Option<i64>,
    /// Our estimate of the clocks' rate difference (parts per million).
    pub skew_ppm: Option<f64>,
    /// Whether our estimator has converged.
    pub converged: bool,
    /// A clock jump restarted our estimator and the new window is not confirmed yet:
    /// `offset` is the last confirmed estimate.
    pub reconverging: bool,
    /// Whether PX4's filter has converged.
    pub px4_converged: bool,
    /// Our estimate's uncertainty (ns).
    pub uncertainty: Option<i64>,
    /// Times a clock jump restarted our estimator.
    pub resets: u32,
    /// Times PX4's filter reset.
    pub px4_resets: u32,
}

/// PING and TIMESYNC with one autopilot, without I/O: messages and `now` in, messages to send, samples and reports out.
#[derive(Debug, Clone)]
pub struct Session {
    cfg: SessionConfig,
    autopilot: Option<Ids>,
    pinger: Pinger,
    timesync: TimesyncClient,
    px4: Px4Filter,
    fit: WindowFit,
    timesync_rtt: RttStats,
    responder: Option<Responder>,
}

impl Session {
    /// A session set up with `cfg`, before the autopilot is heard.
    pub fn new(cfg: SessionConfig) -> Session {
        Session {
            autopilot: cfg.autopilot,
            pinger: Pinger::new(cfg.ours, (cfg.timeout_ns / 1000).max(1) as u64),
            timesync: TimesyncClient::new(cfg.ours, cfg.respond_timesync),
            px4: Px4Filter::new(cfg.px4),
            fit: WindowFit::new(cfg.fit),
            timesync_rtt: RttStats::default(),
            responder: None,
            cfg,
        }
    }

    /// Starts both offset estimators afresh (the `~reset_timesync` service): each counts
    /// it as one reset, and the next replies converge them again from nothing.
    pub fn reset_estimators(&mut self) {
        let (px4_resets, fit_resets) = (self.px4.resets, self.fit.resets);
        self.px4 = Px4Filter::new(self.cfg.px4);
        self.fit = WindowFit::new(self.cfg.fit);
        self.px4.resets = px4_resets.saturating_add(1);
        self.fit.resets = fit_resets.saturating_add(1);
    }

    /// How long a request may wait for its reply before it counts as lost, from now on.
    pub fn set_timeout(&mut self, timeout_ns: i64) {
        self.cfg.timeout_ns = timeout_ns;
        self.pinger
            .set_timeout_us((timeout_ns / 1000).max(1) as u64);
    }

    /// New settings for the window estimator, which then starts afresh (its samples were
    /// gathered under the old ones); its reset count carries on.
    pub fn set_fit(&mut self, fit: FitParams) {
        if fit == self.cfg.fit {
            return;
        }
        self.cfg.fit = fit;
        let resets = self.fit.resets;
        self.fit = WindowFit::new(fit);
        self.fit.resets = resets;
    }

    /// The autopilot, once known (fixed, or learnt from its HEARTBEAT).
    pub fn autopilot(&self) -> Option<Ids> {
        self.autopilot
    }

    /// The next PING request, stamped `now_ns`.
    pub fn ping_request(&mut self, now_ns: i64) -> Outgoing {
        Outgoing::Ping(self.pinger.request(micros(now_ns)))
    }

    /// The next TIMESYNC request, stamped `now_ns`, to the autopilot once known.
    pub fn timesync_request(&mut self, now_ns: i64) -> Outgoing {
        Outgoing::Timesync(self.timesync.request(now_ns, self.autopilot))
    }

    /// The link reports when a TIMESYNC request actually left.
    pub fn departed(&mut self, ts1: i64, at_ns: i64) {
        self.timesync.departed(ts1, at_ns);
    }

    /// Counts requests past the timeout as lost.
    pub fn expire(&mut self, now_ns: i64) {
        self.pinger.expire(micros(now_ns));
        self.timesync.expire(now_ns, self.cfg.timeout_ns);
    }

    /// A message from `from` that arrived at `at_ns`; what to do about it.
    pub fn on_message(&mut self, from: Ids, msg: Incoming, at_ns: i64) -> Option<Event> {
        if from == self.cfg.ours {
            return None; // our own message, looped back by a router or broadcast
        }
        match msg {
            Incoming::Heartbeat { autopilot: true } if self.autopilot.is_none() => {
                self.autopilot = Some(from);
                Some(Event::AutopilotFound(from))
            }
            Incoming::Ping(p) => match self.pinger.on_ping(from, self.autopilot, &p, micros(at_ns))
            {
                PingOutcome::Answer(reply) => Some(Event::Send(Outgoing::Ping(reply))),
                PingOutcome::Rtt(_) | PingOutcome::Ignored => None,
            },
            Incoming::Timesync(t) => {
                match self.timesync.on_timesync(from, self.autopilot, &t, at_ns) {
                    TimesyncOutcome::Answer(reply) => Some(Event::Send(Outgoing::Timesync(reply))),
                    TimesyncOutcome::Sample(exchange, responder) => {
                        Some(Event::Timesync(self.estimate(exchange, responder)))
                    }
                    TimesyncOutcome::Ignored => None,
                }
            }
            Incoming::SystemTime { unix_usec, .. } if Some(from) == self.autopilot => {
                Some(Event::SystemTime { unix_usec, at_ns })
            }
            _ => None,
        }
    }

    fn estimate(&mut self, exchange: Exchange, responder: Responder) -> TimesyncSample {
        self.responder = Some(responder);
        self.timesync_rtt.add(exchange.rtt());
        self.px4.update(&exchange);
        self.fit.update(&exchange);
        TimesyncSample {
            exchange,
            responder,
            observed_offset: exchange.observed_offset(),
            fit_offset: self.fit.offset_at(exchange.t3),
            px4_offset: self.px4.offset(),
        }
    }

    /// The offset (local − remote, ns) at our instant `at_ns`: PX4's filter's with `px4`,
    /// else our fit's; `None` before either has an estimate.
    pub fn offset_at(&self, at_ns: i64, px4: bool) -> Option<i64> {
        if px4 {
            self.px4.offset()
        } else {
            self.fit.offset_at(at_ns)
        }
    }

    /// Everything measured, with the estimators read at `now_ns`.
    pub fn report(&self, now_ns: i64) -> Report {
        Report {
            autopilot: self.autopilot,
            ping: self.pinger.stats,
            timesync: self.timesync.stats,
            timesync_rtt: self.timesync_rtt,
            responder: self.responder,
            offset: self.fit.offset_at(now_ns),
            px4_offset: self.px4.offset(),
            skew_ppm: self.fit.skew_ppm(),
            converged: self.fit.converged(),
            reconverging: self.fit.reconverging(),
            px4_converged: self.px4.converged(),
            uncertainty: self.fit.uncertainty(),
            resets: self.fit.resets,
            px4_resets: self.px4.resets,
        }
    }
}

fn micros(ns: i64) -> u64 {
    (ns / 1000).max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mavlink::protocol::{Ping, Timesync};

    const US: Ids = Ids::ONBOARD_COMPUTER;
    const FCU: Ids = Ids::AUTOPILOT;
    const GCS: Ids = Ids::GROUND_STATION;

    fn session() -> Session {
        Session::new(SessionConfig {
            ours: US,
            autopilot: None,
            timeout_ns: 2_000_000_000,
            respond_timesync: false,
            px4: Px4Params::default(),
            fit: FitParams::default(),
        })
    }

    #[test]
    fn learns_the_autopilot_from_its_heartbeat_and_estimates_its_offset() {
        let mut s = session();
        assert_eq!(
            s.on_message(GCS, Incoming::Heartbeat { autopilot: false }, 0),
            None
        );
        assert_eq!(
            s.on_message(FCU, Incoming::Heartbeat { autopilot: true }, 0),
            Some(Event::AutopilotFound(FCU))
        );
        // The autopilot's clock is 7 ms behind ours; 1 ms each way.
        let mut last = None;
        for i in 0..40i64 {
            let t1 = 1_000_000_000 + i * 100_000_000;
            let Outgoing::Timesync(req) = s.timesync_request(t1) else {
                panic!()
            };
            assert_eq!(req.target, FCU);
            let reply = Timesync {
                tc1: t1 + 1_000_000 - 7_000_000,
                ts1: req.ts1,
                target: US,
            };
            last = s.on_message(FCU, Incoming::Timesync(reply), t1 + 2_000_000);
        }
        let Some(Event::Timesync(sample)) = last else {
            panic!("{last:?}")
        };
        assert_eq!(sample.responder, Responder::V2);
        assert_eq!(sample.observed_offset, 7_000_000);
        assert_eq!(sample.fit_offset, Some(7_000_000));
        let r = s.report(5_000_000_000);
        assert!(r.converged && r.offset == Some(7_000_000), "{r:?}");
        assert_eq!(r.uncertainty, Some(1_000_000));
        assert_eq!(r.timesync_rtt.min, Some(2_000_000));
    }

    #[test]
    fn answers_other_pingers_and_ignores_its_own_echo() {
        let mut s = session();
        let request = Ping {
            time_usec: 5,
            seq: 9,
            target: Ids::BROADCAST,
        };
        assert_eq!(
            s.on_message(GCS, Incoming::Ping(request), 0),
            Some(Event::Send(Outgoing::Ping(Ping {
                target: GCS,
                ..request
            })))
        );
        assert_eq!(s.on_message(US, Incoming::Ping(request), 0), None);
    }
}
