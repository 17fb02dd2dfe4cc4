//! The link governor: a publisher's estimate of what the path to one udpros subscriber
//! carries, from the subscriber's [`Feedback`], and the pacing rate that follows from it.
//!
//! # The model, and why
//!
//! A teleoperation link is a radio or a tether with a queue in front of it (a router's, a
//! modem's). Sending faster than the link fills the queue: everything behind it, a control
//! topic from another process included, waits, and once the queue is full datagrams are
//! lost, a few from every large message, so that none completes. The governor keeps that
//! queue near empty by pacing each link just under the rate the path delivers.
//!
//! It is a delay-based controller with a bottleneck-rate model, in the manner of BBR's
//! model and GCC's delay signal rather than loss-driven TCP:
//!
//! - **Queueing delay.** The one-way delay of a sampled datagram is its arrival time (the
//!   subscriber's clock) less its send time (ours): unknown offset included, which the
//!   smallest delay seen over [`BASE_WINDOW`] cancels. What exceeds that minimum is queue.
//!   A sample names its datagram by message id and block, and ids are one byte: at 10,000
//!   messages a second they come round every 25.6 ms, so a sample is paired with the send
//!   whose delay is nearest the last sample's (`Governor::pair_samples`), never blindly
//!   with the newest.
//!   Loss alone never slows the link: a noisy radio loses datagrams with no queue, and that
//!   is FEC's to repair; loss with a growing queue is the queue overflowing, answered by
//!   slowing, and FEC repairs only the rest ([`Governor::random_loss`]: repair for a full
//!   queue's losses would add load to the link that overflowed).
//! - **Bottleneck rate.** Between two samples the subscriber received `Δbytes` in
//!   `Δarrival`; while the publisher was sending faster than that, the path's bottleneck set
//!   the pace, so `Δbytes / Δarrival` is its rate. Pairs where the publisher was idle
//!   (app-limited) only tell a lower bound, and never lower the estimate.
//! - **Start.** A new link knows nothing of its path: one image sent at full speed into
//!   a 4 Mbit/s radio fills its queue (the control topic behind it waits) and loses most
//!   of itself, and one sent at a megabit across a gigabit tether waits for nothing. So
//!   its first [`START_TRAIN`] bytes go at once, a *train*: twice the token bucket of a
//!   radio's queue (`tc tbf`'s `burst 16kb`), less than a 2 Mbit/s radio's bucket and
//!   queue hold, so that what queues behind the bucket arrives at the path's rate, and
//!   nothing overflows. The subscriber reports every
//!   [`START_FEEDBACK_INTERVAL`](super::feedback::START_FEEDBACK_INTERVAL) at a link's
//!   start, and the first report that saw the whole train arrive without a queue sets the
//!   link at its own pacing (the path is wider than any bucket and queue this short hide;
//!   a wider one is found at its first overuse). A train that queued is measured by its
//!   pairs that queued at both ends ([`TRAIN_MEASURE_WAIT`] at most) and ends the start as
//!   an overuse, the link pausing for the train's queue: on the simulated 4 Mbit/s radio
//!   the estimate is the radio's 3.89 Mbit/s of datagrams 31 ms after the first byte, and
//!   the control datagram behind the train waits 34 ms, once. After the train, and on a
//!   link whose train was never judged (the reports lost), the link paces at
//!   [`GovernorConfig::start_rate`] and, with each report that shows no queue while the
//!   pacer holds it back, at [`START_GROWTH`] × what the path was shown to carry, as BBR's
//!   startup does; a report that shows a queue beginning ([`CALM`]) while the pacer holds
//!   the link back ends the start as an overuse. Before the train, the start was only this
//!   ramp, and it cost a wide link the first second (a 1 MB message at the start took
//!   0.46 s, and messages were dropped as stale behind it: bench S8).
//! - **Token buckets.** A radio's queue often has a token bucket in front (`tc tbf`'s
//!   burst, a modem's): after a pause it lets a burst through at line rate, so arrivals
//!   come closer than the sends were. A pair's delivery rate is therefore taken over the
//!   longer of its send and arrival spans (BBR's rule), and a rate above the one the path
//!   last overflowed at (its *ceiling*) is believed only once the path has carried more
//!   above it, without a queue, than a bucket holds ([`CEILING_PROOF`]).
//! - **Pacing.** The link is then paced at [`CRUISE`] × the estimate, so that the queue
//!   drains between bursts. Every [`CRUISE_REPORTS`] reports (doubling up to
//!   [`MAX_CRUISE_REPORTS`] while probes keep ending in overuse) it probes above the
//!   estimate: with no ceiling, by [`PROBE`] growing to [`MAX_PROBE`] each report the path
//!   keeps up, so that a link that widened fivefold is found within a second; above a
//!   ceiling, by a slow ramp ([`PROVING_STEP`] a report) to [`MAX_PROVING`], so that a
//!   bucket emptying under it shows a queue of a few milliseconds, not tens. An outgrown
//!   ceiling is raised a step at a time ([`FIRST_RAISE`], growing by [`RAISE_GROWTH`]
//!   while the path keeps outgrowing them, which lets the ramp climb as far, and once
//!   they carried more than a bucket hides ([`WIDENING_PROOF`]) the next probe starts
//!   there): what a probe carried through a bucket is what it was sent at, not what the
//!   path carries.
//!   While it probes, a link that holds a message back for a fresher one sends filler
//!   meanwhile ([`UdpSender::load_filler`](super::UdpSender::load_filler)): a pause would
//!   fill the bucket again and hide the probe's excess.
//! - **Overuse.** When the queue passes [`OVERUSE`], the estimate and the ceiling become
//!   what the path delivered under the queue (over every report since it began to stand:
//!   a subscriber's arrival stamps are a read late, and one report's pairs measure a few
//!   percent off), the link falls silent for as long as the
//!   queue holds by now (the report's age included, at most [`MAX_PAUSE`]) and then sends
//!   at [`DRAIN`] × that rate until reports on what it sent after the pause show the queue
//!   gone. Reports on what was sent before the pause tell of the queue already answered;
//!   a queue that outlasts the pause pauses the link again, with the estimate kept (the
//!   drain sends below it by design, so what it delivered measures nothing).
//! - **No report, no change for long.** Reports stop when nothing arrives: after
//!   [`SILENCE`] of sending without one, the rate halves each [`SILENCE`], never below the
//!   floor. An idle link hears nothing and loses nothing.
//!
//! # What a forged report can do
//!
//! Reports come from the subscriber's address (the link's socket is connected), so a
//! forger must spoof it. Counts are clamped to what was sent, so a report cannot claim a
//! rate the link never sent at, and the estimate rises by at most [`PROBE`] per report
//! over what the link actually sent. Delays that claim a queue can lower the rate, never
//! below [`GovernorConfig::min_rate`], and silence the link for at most [`MAX_PAUSE`] at
//! a time (within the freshness bound); a queue that the counts do not bear out (the link
//! delivers what it sends, yet the delay says the queue keeps growing) resets the delay's
//! baseline, and the ceiling it set, after [`BASELINE_DOUBT`]. A low ceiling left by
//! forged reports is outgrown a ramp at a time: the link is back at the radio's rate
//! within about nine seconds of the forgery ending (`tests/governor_sim.rs`). A report
//! that claims the start's train arrived without a queue sets the link at its own pacing,
//! which is the rate the train was sent at: that is what the link showed it carries.
//!
//! The governor is pure: reports and `now` in, a rate out. The [`SendLog`] it reads send
//! times from is filled by the [`UdpSender`](super::UdpSender) as datagrams leave.

use super::feedback::{Feedback, Sample};
use super::loss::Report;
use super::DatagramHeader;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A queue longer than this is overuse. Short enough that a control datagram behind it
/// still arrives within a few milliseconds; long enough to stand above the jitter of a
/// busy receiver's reads.
pub const OVERUSE: Duration = Duration::from_millis(6);
/// The queue must be below this for the rate to grow.
pub const CALM: Duration = Duration::from_millis(3);
/// The share of the estimated bottleneck rate the link is paced at between probes.
pub const CRUISE: f64 = 0.95;
/// The share of the estimated bottleneck rate the first probe of a series paces at.
pub const PROBE: f64 = 1.06;
/// Each probe that found room reaches this much further than the last (twice as far
/// every two reports, a [`FEEDBACK_INTERVAL`](super::feedback::FEEDBACK_INTERVAL) each) ...
pub const PROBE_GROWTH: f64 = std::f64::consts::SQRT_2;
/// ... up to this share of the estimate.
pub const MAX_PROBE: f64 = 1.5;
/// The growth of the rate per report at the start, while no queue shows: twice every two
/// reports, as BBR's startup doubles each round trip.
pub const START_GROWTH: f64 = std::f64::consts::SQRT_2;
/// The bytes a governed link sends at once when it starts (see the module documentation's
/// "Start"): twice a radio's token bucket (`tc tbf ... burst 16kb`), so that half of them
/// queue behind a narrow path and show its rate, and less than a 2 Mbit/s radio's bucket
/// and 50 ms queue hold together.
pub const START_TRAIN: u64 = 32 << 10;
/// While the start train's queue is shorter than this and no pair of it has measured the
/// path, the governor waits for one before it cuts: a cut on the first report that shows
/// the queue took the rate from datagrams the bucket let through and set it four times
/// the radio's.
pub const TRAIN_MEASURE_WAIT: Duration = Duration::from_millis(50);
/// Reports at the cruise rate between two probes, once a probe found no more room ...
pub const CRUISE_REPORTS: u32 = 12;
/// ... doubling after each probe that ended in overuse, up to this many (a second): on a
/// link whose width is known, probing is what fills its queue, and a probing link that
/// holds a message back sends filler (see
/// [`UdpSender::load_filler`](super::UdpSender::load_filler)).
pub const MAX_CRUISE_REPORTS: u32 = 40;
/// Bytes a path must deliver above the rate it last overflowed at, without a queue,
/// before that rate is taken as outgrown: what it carries in [`CEILING_PROOF_TIME`], from
/// [`MIN_CEILING_PROOF`] to this. A token bucket in front of a radio (`tc tbf`'s 16 kB, a
/// modem's) lets a probe through without a queue until it is empty: only more than it
/// holds says the link itself widened.
pub const CEILING_PROOF: f64 = 32_768.0;
/// An outgrown ceiling is raised by this share of itself, the share growing by
/// [`RAISE_GROWTH`] with each ceiling outgrown in a row ...
pub const FIRST_RAISE: f64 = 0.06;
/// See [`FIRST_RAISE`].
pub const RAISE_GROWTH: f64 = 3.0;
/// ... up to this share.
pub const MAX_RAISE: f64 = 1.0;
/// Bytes carried above the ceilings outgrown since the last overuse beyond which the path
/// is widening, not a token bucket emptying: the probe after the next raise starts as far
/// as the raise goes (see [`FIRST_RAISE`]). Twice the most a bucket is taken to hold: a
/// raise proves a quarter of one after the first, and with three in a row taken as the
/// sign, a bucket's false raises stood queues of 20-30 ms on the real 4 Mbit/s radio.
pub const WIDENING_PROOF: f64 = 2.0 * CEILING_PROOF;
/// The proof on a slow link: a low ceiling (a forged report's, a radio that was narrow)
/// is outgrown in a few seconds.
pub const MIN_CEILING_PROOF: f64 = 1_500.0;
/// See [`CEILING_PROOF`].
pub const CEILING_PROOF_TIME: Duration = Duration::from_millis(60);
/// The longest an overuse silences the link: well within the freshness bound, so that a
/// report claiming a queue of seconds (forged, or a wrong delay floor) stalls nothing;
/// a longer real queue drains at [`DRAIN`] after it.
pub const MAX_PAUSE: Duration = Duration::from_millis(100);
/// While a probe above the ceiling is carried without a queue, its gain grows by this
/// much per report (linearly: see [`CEILING_PROOF`]).
pub const PROVING_STEP: f64 = 0.015;
/// The highest a probe above a ceiling climbs, but on a path whose ceilings were outgrown
/// in a row (see [`FIRST_RAISE`]): a queue then grows by an eighth of the report interval
/// each report, so that it is seen before it stands ten milliseconds.
pub const MAX_PROVING: f64 = 1.12;
/// A report whose busy pairs arrived at most 1/`KEPT_UP` as far apart as they were sent
/// (all of them together) shows a path that kept up.
const KEPT_UP: f64 = 0.9;
/// The rate after overuse, as a share of what the path delivered under the queue: less
/// than it, so that the queue drains.
pub const DRAIN: f64 = 0.85;
/// How long the smallest one-way delay is remembered: long enough to have seen the queue
/// empty, short enough to follow a route that changed.
pub const BASE_WINDOW: Duration = Duration::from_secs(10);
/// Without a report for this long while sending, the rate halves.
pub const SILENCE: Duration = Duration::from_millis(500);
/// A queue that the counts do not bear out for this long is taken as a wrong baseline.
pub const BASELINE_DOUBT: Duration = Duration::from_secs(2);
/// Send records a governed link keeps (a run of consecutive data blocks each): several
/// hundred milliseconds of a fast link's sends, seconds of a radio's.
pub const MAX_RECORDS: usize = 4096;
/// A queue at least this long at both samples of a pair says the bottleneck was busy
/// between them: their spacing is its rate alone.
pub const BOTTLENECK_BUSY: Duration = Duration::from_millis(1);
/// A pair of samples with a queue at both whose arrivals are at least this share of their
/// sends apart measures the bottleneck's rate (see [`Governor::on_feedback`]).
const BOTTLENECK_SPREAD: f64 = 0.9;
/// Datagrams sent within this of each other went in one burst: the link was busy between
/// them, whatever its rate (the pacer's bursts are 2 ms).
const BURST_SPAN: Duration = Duration::from_millis(1);
/// Pairs of samples closer than this in arrival say little about a rate.
const MIN_PAIR: Duration = Duration::from_micros(500);
/// Reports closer together than this are not looked at: the subscriber sends one every
/// [`FEEDBACK_INTERVAL`](super::feedback::FEEDBACK_INTERVAL), and looking one up costs up
/// to [`MAX_SAMPLES`](super::feedback::MAX_SAMPLES) × [`MAX_RECORDS`] comparisons.
pub const MIN_REPORT_GAP: Duration = Duration::from_millis(10);
/// The same while the start's train waits to be judged ([`Governor::train`]): the
/// subscriber reports every
/// [`START_FEEDBACK_INTERVAL`](super::feedback::START_FEEDBACK_INTERVAL) then.
pub const START_REPORT_GAP: Duration = Duration::from_millis(4);
/// Nor do pairs fewer bytes apart than this (four datagrams of an Ethernet MTU): at a
/// quarter of a megabit a report interval holds one datagram.
const MIN_PAIR_BYTES: u64 = 4 * 1500;

/// One send's run of consecutive data blocks of one message.
#[derive(Debug, Clone, Copy)]
struct SendRecord {
    message_id: u8,
    first_block: u16,
    last_block: u16,
    at: Instant,
    /// The link's count of bytes sent after its first and after its last datagram.
    bytes_after_first: u64,
    bytes_after_last: u64,
}

/// When the link's data datagrams left and how many bytes had left with them: what the
/// governor pairs the subscriber's arrival samples with. Bounded ([`MAX_RECORDS`] runs).
#[derive(Debug, Clone, Default)]
pub struct SendLog {
    records: VecDeque<SendRecord>,
    bytes: u64,
}

/// A sample paired with its send.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    sent_at: Instant,
    /// Bytes the link had sent after the datagram.
    sent: u64,
    /// Arrival, µs of the subscriber's clock, unwrapped.
    arrival_us: i64,
    /// Bytes the subscriber had received after it (its wrapping count).
    received: u32,
}

impl SendLog {
    /// `datagrams`, back to back, each `segment` bytes but the last, left at `now`.
    pub fn record(&mut self, now: Instant, datagrams: &[u8], segment: usize) {
        for d in datagrams.chunks(segment.max(1)) {
            self.bytes += d.len() as u64;
            let Some(h) = DatagramHeader::parse(d) else {
                continue;
            };
            let Some(block) = h.sampled_block(d.len()) else {
                continue;
            };
            match self.records.back_mut() {
                Some(r)
                    if r.at == now
                        && r.message_id == h.message_id
                        && u32::from(r.last_block) + 1 == u32::from(block) =>
                {
                    r.last_block = block;
                    r.bytes_after_last = self.bytes;
                }
                _ => {
                    if self.records.len() == MAX_RECORDS {
                        self.records.pop_front();
                    }
                    self.records.push_back(SendRecord {
                        message_id: h.message_id,
                        first_block: block,
                        last_block: block,
                        at: now,
                        bytes_after_first: self.bytes,
                        bytes_after_last: self.bytes,
                    });
                }
            }
        }
    }

    /// Every byte sent so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The sends the datagram a sample names may be, newest first, at most
    /// [`MAX_CANDIDATES`]: when each left and the bytes sent with it. Message ids are one
    /// byte and come back every 256 messages (every 25.6 ms at 10 kHz), so a sample can
    /// name more than one; [`Governor::on_feedback`] takes the one its delay agrees with.
    fn candidates<'a>(&'a self, sample: &'a Sample) -> impl Iterator<Item = (Instant, u64)> + 'a {
        self.records
            .iter()
            .rev()
            .filter(|r| {
                r.message_id == sample.message_id
                    && (r.first_block..=r.last_block).contains(&sample.block)
            })
            .take(MAX_CANDIDATES)
            .map(|r| {
                let runs = u64::from(r.last_block - r.first_block);
                let into = u64::from(sample.block - r.first_block);
                let bytes = match runs {
                    0 => r.bytes_after_first,
                    _ => {
                        r.bytes_after_first
                            + (r.bytes_after_last - r.bytes_after_first) * into / runs
                    }
                };
                (r.at, bytes)
            })
    }
}

/// Sends of one message id and block a sample is weighed against (see
/// [`SendLog::candidates`]): a second of 1,000 messages a second, 100 ms at 10 kHz.
const MAX_CANDIDATES: usize = 4;

/// The one-way delay (µs) of a datagram sent at `sent_at` that arrived at `arrival_us` of
/// the subscriber's clock, counting sends from `epoch`: the clocks' offset included, which
/// the delay's floor cancels.
fn one_way_delay(epoch: Instant, arrival_us: i64, sent_at: Instant) -> i64 {
    arrival_us - sent_at.saturating_duration_since(epoch).as_micros() as i64
}

/// The smallest value seen over about [`BASE_WINDOW`], kept in two halves.
#[derive(Debug, Clone, Copy)]
struct WindowMin {
    current: Option<(i64, Instant)>,
    previous: Option<i64>,
}

impl WindowMin {
    fn add(&mut self, now: Instant, value: i64) {
        match &mut self.current {
            Some((min, since)) if now.saturating_duration_since(*since) < BASE_WINDOW / 2 => {
                *min = (*min).min(value);
            }
            current => {
                self.previous = current.map(|(min, _)| min);
                *current = Some((value, now));
            }
        }
    }

    fn get(&self) -> Option<i64> {
        let current = self.current.map(|(min, _)| min);
        match (current, self.previous) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn reset(&mut self, now: Instant, value: i64) {
        self.current = Some((value, now));
        self.previous = None;
    }
}

/// What a report's pairs of samples say of the link's rates.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Delivery {
    /// The rate the subscriber received at while the link was busy (bytes per second).
    delivered: Option<f64>,
    /// Over how long (seconds of the busy pairs).
    span: f64,
    /// What arrived over the pairs with a queue standing at both: what the bottleneck let
    /// through while a queue built in front of it.
    bottleneck: Pooled,
    /// The rate the busy pairs were sent at: what `delivered` is to be held against (the
    /// pacing rate may have moved since they left).
    sending: Option<f64>,
    /// How much further apart the busy pairs arrived than they were sent, over all of
    /// them (1: as sent; more: a queue grew).
    spread: Option<f64>,
    /// The rate over the busy pairs that arrived further apart than they were sent, queue
    /// or not: once a token bucket is spent, the bottleneck's rate (those a bucket let
    /// through arrived closer than they were sent).
    slowed: Option<f64>,
    /// What arrived kept up with what was sent (no backlog growing, under a tenth lost).
    carried: bool,
    /// Bytes sent between the report's first and last pair, and those of them lost while a
    /// queue over [`OVERUSE`] stood at either end of their pair, or not.
    sent: f64,
    lost: LossSplit,
}

impl Delivery {
    /// Whether `rate`, measured under a queue, is slower than these pairs were sent: only
    /// then does it show the path narrower than what sent them (pairs that arrive as they
    /// were sent are no queue at all: forged delays, a floor gone wrong).
    fn slower_than_sent(&self, rate: f64) -> bool {
        self.sending.is_some_and(|s| rate < BOTTLENECK_SPREAD * s)
    }
}

/// Bytes that arrived over seconds of arrivals, summed over pairs of samples: a rate that
/// more pairs measure better (a subscriber's arrival stamps are a read late, up to a
/// millisecond or two on a busy one, against pairs 10-20 ms apart on a radio).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Pooled {
    bytes: f64,
    secs: f64,
}

impl Pooled {
    fn add(&mut self, other: Pooled) {
        self.bytes += other.bytes;
        self.secs += other.secs;
    }

    fn rate(&self) -> Option<f64> {
        (self.secs > 0.0).then(|| self.bytes / self.secs)
    }
}

/// Bytes a link lost, by whether a queue over [`OVERUSE`] stood when they were: a full
/// queue's losses are answered by slowing (the governor's cut), the rest are the radio's
/// and FEC's to repair. The governor keeps them decayed by the bytes sent, over the two
/// windows of the subscriber's [`LossMeter`](super::loss::LossMeter), so that the share it
/// holds against the subscriber's reports covers the same traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct LossSplit {
    queued: f64,
    random: f64,
}

impl LossSplit {
    /// `lost` of `sent` bytes; `half_life` in bytes.
    fn add(&mut self, sent: f64, lost: LossSplit, half_life: f64) {
        let decay = 0.5f64.powf(sent / half_life);
        self.queued = self.queued * decay + lost.queued;
        self.random = self.random * decay + lost.random;
    }

    /// The share of the losses that were a queue's.
    fn queued_share(&self) -> f64 {
        let all = self.queued + self.random;
        if all > 0.0 {
            self.queued / all
        } else {
            0.0
        }
    }
}

/// The bytes the subscriber's short loss window halves its weight over ([`HALF_LIFE`]
/// datagrams of an Ethernet path).
///
/// [`HALF_LIFE`]: super::loss::HALF_LIFE
const LOSS_HALF_LIFE_BYTES: f64 = super::loss::HALF_LIFE * super::fec::ETHERNET_DATAGRAM as f64;

/// Limits a link's governor works within.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GovernorConfig {
    /// The rate before anything is known, and the most the link is ever paced at
    /// (bytes per second): the link's pacing without a governor.
    pub max_rate: f64,
    /// The least it is paced at whatever the reports say (bytes per second): a link is
    /// never stalled by them.
    pub min_rate: f64,
    /// The rate a new link starts at (bytes per second), before any report.
    pub start_rate: f64,
}

impl Default for GovernorConfig {
    /// From 32 kB/s (a quarter of a megabit) to 1.5 GB/s (a udpros link's pacing),
    /// starting at 125 kB/s (a megabit).
    fn default() -> Self {
        GovernorConfig {
            max_rate: 1.5e9,
            min_rate: 32e3,
            start_rate: 125e3,
        }
    }
}

/// Where the governor is in its cycle.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// No queue seen yet: growing by [`START_GROWTH`] per calm report.
    Start,
    /// At [`CRUISE`] × the estimate; a probe after this many more reports.
    Cruise(u32),
    /// At this share of the estimate (from [`PROBE`] to [`MAX_PROBE`]) for one report.
    Probe(f64),
    /// Below the estimate until the queue has drained: after the overuse's pause, which
    /// ends at the instant. Reports on datagrams sent before it tell of the queue the
    /// cut already answered.
    Drain(Instant),
}

/// What the governor knows of a link, for statistics.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GovernorStats {
    /// The estimated bottleneck rate, bytes per second.
    pub capacity: Option<f64>,
    /// The queueing delay the last report showed.
    pub queue: Duration,
    /// The pacing rate now, bytes per second.
    pub rate: f64,
    /// Reports taken.
    pub reports: u64,
    /// Reports ignored: out of order, or naming no datagram the link sent lately.
    pub ignored: u64,
    /// Times the queue passed [`OVERUSE`] and the rate was cut.
    pub overuses: u64,
    /// Messages dropped whole before their first datagram because they would have left
    /// older than the link's freshness bound (counted by the link's sender).
    pub stale: u64,
    /// Bytes of filler the link sent while it held a message back during a probe
    /// (counted by the link's sender: [`UdpSender::load_filler`](super::UdpSender::load_filler)).
    pub filler: u64,
}

/// A publisher's controller for one link (see the module documentation).
#[derive(Debug, Clone)]
pub struct Governor {
    config: GovernorConfig,
    rate: f64,
    capacity: Option<f64>,
    phase: Phase,
    /// The one-way delay's floor, µs (clock offset included).
    base: WindowMin,
    queue: Duration,
    /// The last sample of the last report, paired with its send.
    last_point: Option<Point>,
    /// The last raw arrival and its unwrapped value.
    arrival: Option<(u32, i64)>,
    last_sequence: Option<u32>,
    /// The first send since the last report taken: the start of a silence.
    unanswered_since: Option<Instant>,
    /// When a report was last looked at (taken or found to name nothing sent).
    last_taken: Option<Instant>,
    /// The pacer held datagrams back since the last report: the rate, not the
    /// publisher, limited the link.
    held: bool,
    /// The start train ([`START_TRAIN`]) is not yet judged: no report has shown it
    /// through without a queue, nor its queue.
    train: bool,
    /// Bytes the link had sent after the newest datagram the last report sampled.
    newest_sent_bytes: u64,
    /// The longest queue a datagram of the start's train found.
    train_queue: Duration,
    /// Since when the delay has claimed a queue the counts do not show.
    doubt_since: Option<Instant>,
    /// The silence the last overuse asks of the link (see [`Governor::take_pause`]).
    pause: Duration,
    /// When the newest datagram the last report sampled was sent.
    newest_sent: Option<Instant>,
    /// The one-way delay of the last sample paired (µs, as [`Governor::delay`]): which of
    /// the sends an ambiguous sample names ([`Governor::pair_samples`]).
    last_delay: Option<i64>,
    /// What the path delivered under its last overflowing queue, and the bytes it has
    /// since delivered above that rate without a queue (see [`CEILING_PROOF`]).
    ceiling: Option<Ceiling>,
    /// How far above the ceiling the next outgrown ceiling is set (from [`FIRST_RAISE`]
    /// to [`MAX_RAISE`]).
    raise: f64,
    /// Reports between probes now (from [`CRUISE_REPORTS`] to [`MAX_CRUISE_REPORTS`]).
    cruise_reports: u32,
    /// The bytes carried above the ceilings outgrown since the last overuse.
    outgrown: f64,
    /// What the bottleneck let through since its queue began to stand (over the reports
    /// since; emptied when the queue is gone or a cut answered it).
    standing: Pooled,
    /// The link's losses over the subscriber's short loss window and its long one.
    losses: LossSplit,
    long_losses: LossSplit,
    epoch: Instant,
    stats: GovernorStats,
}

impl Governor {
    /// A governor for a link opened at `now`.
    pub fn new(now: Instant, config: GovernorConfig) -> Governor {
        let min_rate = config.min_rate.max(1.0);
        let max_rate = config.max_rate.max(min_rate);
        let config = GovernorConfig {
            min_rate,
            max_rate,
            start_rate: config.start_rate.clamp(min_rate, max_rate),
        };
        Governor {
            config,
            rate: config.start_rate,
            capacity: None,
            phase: Phase::Start,
            base: WindowMin {
                current: None,
                previous: None,
            },
            queue: Duration::ZERO,
            last_point: None,
            arrival: None,
            last_sequence: None,
            unanswered_since: None,
            last_taken: None,
            held: false,
            train: true,
            newest_sent_bytes: 0,
            train_queue: Duration::ZERO,
            doubt_since: None,
            pause: Duration::ZERO,
            newest_sent: None,
            last_delay: None,
            ceiling: None,
            cruise_reports: CRUISE_REPORTS,
            raise: FIRST_RAISE,
            outgrown: 0.0,
            standing: Pooled::default(),
            losses: LossSplit::default(),
            long_losses: LossSplit::default(),
            epoch: now,
            stats: GovernorStats::default(),
        }
    }

    /// The pacing rate, bytes per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Whether the link is probing for room above the estimate now.
    pub fn probing(&self) -> bool {
        matches!(self.phase, Phase::Probe(_))
    }

    /// What of the subscriber's loss `report` FEC should repair: the loss less the share
    /// the governor saw lost while a queue over [`OVERUSE`] stood, in each of its windows.
    /// A full queue's losses are answered by slowing; repairing them too would only add
    /// load to the link that overflowed. Random loss on a link without a queue is kept
    /// whole.
    pub fn random_loss(&self, report: &Report) -> Report {
        let random = 1.0 - self.losses.queued_share();
        Report {
            loss: report.loss * random,
            long_loss: report.long_loss * (1.0 - self.long_losses.queued_share()),
            // A full queue drops datagrams in runs: what remains of the runs is the
            // random losses' share of them.
            mean_run: 1.0 + (report.mean_run - 1.0) * random,
            ..*report
        }
    }

    /// What the governor knows, for statistics.
    pub fn stats(&self) -> GovernorStats {
        GovernorStats {
            capacity: self.capacity,
            queue: self.queue,
            rate: self.rate,
            ..self.stats
        }
    }

    /// Whether the link should send its first [`START_TRAIN`] bytes at once: at its start,
    /// until a report judged them.
    pub fn train(&self) -> bool {
        self.train && self.phase == Phase::Start
    }

    /// The link is sending at `now`: after [`SILENCE`] of sending without a report, the
    /// rate halves. Call before pacing a message.
    pub fn on_sending(&mut self, now: Instant) {
        let since = *self.unanswered_since.get_or_insert(now);
        if now.saturating_duration_since(since) < SILENCE {
            return;
        }
        self.rate = (self.rate / 2.0).max(self.config.min_rate);
        self.capacity = self.capacity.map(|c| (c / 2.0).max(self.config.min_rate));
        if self.phase == Phase::Start {
            self.phase = Phase::Cruise(self.cruise_reports);
            self.capacity = Some(self.rate / CRUISE);
        }
        // The next halving a silence later.
        self.unanswered_since = Some(now);
    }

    /// How long the link should send nothing now, to let the path's queue drain (once:
    /// taking it clears it). Zero but after an overuse.
    pub fn take_pause(&mut self) -> Duration {
        std::mem::take(&mut self.pause)
    }

    /// The pacer held datagrams that were ready to leave: the rate limits the link. A link
    /// grows its rate at the start only when it does (a link that sends a few small
    /// messages is not told anything by their arriving fast).
    pub fn on_held(&mut self) {
        self.held = true;
    }

    /// A report from the subscriber, read at `now`; `log` holds the link's sends.
    /// Returns false when it was ignored (out of order, or naming nothing sent lately).
    pub fn on_feedback(&mut self, now: Instant, report: &Feedback, log: &SendLog) -> bool {
        let in_order = self
            .last_sequence
            .is_none_or(|last| (1..1 << 31).contains(&report.sequence.wrapping_sub(last)));
        // Pairing samples with sends is the costly part (a look through the send record):
        // a flood of reports, forged or not, is taken at most every `MIN_REPORT_GAP`
        // (`START_REPORT_GAP` while the start's train waits to be judged: a link the train
        // found wide stays at its start, and is not looked at more often for it).
        let gap = if self.train() {
            START_REPORT_GAP
        } else {
            MIN_REPORT_GAP
        };
        let too_soon = self
            .last_taken
            .is_some_and(|at| now.saturating_duration_since(at) < gap);
        if !in_order || too_soon {
            self.stats.ignored += 1;
            return false;
        }
        self.last_taken = Some(now);
        let points = self.pair_samples(report, log);
        if points.is_empty() {
            self.stats.ignored += 1;
            return false;
        }
        self.last_sequence = Some(report.sequence);
        self.unanswered_since = None;
        self.stats.reports += 1;
        let newest_queue = self.measure_queue(now, &points);
        let (delivery, anchor) = self.delivery(&points);
        self.last_point = Some(anchor);
        if delivery.bottleneck.secs > 0.0 {
            self.standing.add(delivery.bottleneck);
        } else if newest_queue < BOTTLENECK_BUSY {
            self.standing = Pooled::default();
        }
        self.losses
            .add(delivery.sent, delivery.lost, LOSS_HALF_LIFE_BYTES);
        self.long_losses
            .add(delivery.sent, delivery.lost, 10.0 * LOSS_HALF_LIFE_BYTES);
        self.check_baseline(now, newest_queue, delivery.carried);
        self.decide(now, delivery);
        true
    }

    /// Each of the report's samples paired with the send it names. Where its message id
    /// names several (ids come round every 256 messages), the send whose one-way delay is
    /// nearest the last sample's: the newest one, taken blindly, was a send 256 messages
    /// after the datagram at 10 kHz, its delay 25.6 ms short, and the delay's floor fell
    /// by as much, so that every right pairing after it read as a 25 ms queue. Delay moves
    /// by a queue's growth between two samples, never by half a wrap of ids, unless the
    /// link sends at several times what its path carries. A link's first samples come
    /// before its ids first come round, so the first reference is unambiguous.
    fn pair_samples(&mut self, report: &Feedback, log: &SendLog) -> Vec<Point> {
        let mut points = Vec::with_capacity(report.samples.len());
        for s in &report.samples {
            let arrival_us = self.unwrap_arrival(s.arrival_us);
            let nearest = log.candidates(s).min_by_key(|(sent_at, _)| {
                let delay = self.delay(arrival_us, *sent_at);
                self.last_delay
                    .map_or(0, |last| (delay - last).unsigned_abs())
            });
            if let Some((sent_at, sent)) = nearest {
                self.last_delay = Some(self.delay(arrival_us, sent_at));
                points.push(Point {
                    sent_at,
                    sent,
                    arrival_us,
                    received: s.bytes,
                });
            }
        }
        points
    }

    /// [`one_way_delay`] on this link's epoch.
    fn delay(&self, arrival_us: i64, sent_at: Instant) -> i64 {
        one_way_delay(self.epoch, arrival_us, sent_at)
    }

    /// Unwraps the subscriber's 32-bit µs clock against the last arrival.
    fn unwrap_arrival(&mut self, raw: u32) -> i64 {
        let unwrapped = match self.arrival {
            Some((last_raw, last)) => last + i64::from(raw.wrapping_sub(last_raw) as i32),
            None => i64::from(raw),
        };
        if self.arrival.is_none_or(|(_, last)| unwrapped > last) {
            self.arrival = Some((raw, unwrapped));
        }
        unwrapped
    }

    /// The queueing delay the report shows: the second longest of its samples', against
    /// the delay floor. One late read on a busy subscriber is not a queue, and the samples
    /// span the report's interval, so a queue that stood for a burst between reports
    /// shows whatever the phase of the bursts against the reports.
    fn measure_queue(&mut self, now: Instant, points: &[Point]) -> Duration {
        let epoch = self.epoch;
        let delay = |p: &Point| one_way_delay(epoch, p.arrival_us, p.sent_at);
        for p in points {
            self.base.add(now, delay(p));
        }
        self.newest_sent = points.iter().map(|p| p.sent_at).max();
        self.newest_sent_bytes = points.iter().map(|p| p.sent).max().unwrap_or(0);
        let base = self.base.get().unwrap_or(0);
        if self.train {
            // The longest queue a datagram of the train found.
            let train = points.iter().filter(|p| p.sent <= START_TRAIN);
            let longest = train.map(|p| delay(p) - base).max().unwrap_or(0);
            self.train_queue = self
                .train_queue
                .max(Duration::from_micros(longest.max(0) as u64));
        }
        let mut queued: Vec<i64> = points.iter().map(|p| delay(p) - base).collect();
        queued.sort_unstable_by(|a, b| b.cmp(a));
        let second = queued.get(1).or(queued.first()).copied().unwrap_or(0);
        self.queue = Duration::from_micros(second.max(0) as u64);
        self.queue
    }

    /// What the report's samples say of the link's rates (see [`Delivery`]), over pairs
    /// of samples at least [`MIN_PAIR_BYTES`] apart, from the last report's last pair on;
    /// and the sample the next report's pairs start from.
    fn delivery(&self, points: &[Point]) -> (Delivery, Point) {
        let (mut bytes, mut secs, mut sent_total, mut received_total) = (0.0, 0.0, 0.0, 0.0);
        let (mut queued_bytes, mut queued_secs) = (0.0, 0.0);
        let (mut busy_sent, mut busy_sending, mut busy_arrival) = (0.0, 0.0, 0.0);
        let (mut slowed_bytes, mut slowed_secs) = (0.0, 0.0);
        let mut lost = LossSplit::default();
        let mut anchor = self.last_point.unwrap_or(points[0]);
        let base = self.base.get().unwrap_or(0);
        let (standing, overuse) = (
            BOTTLENECK_BUSY.as_micros() as i64,
            OVERUSE.as_micros() as i64,
        );
        let queued_at = |p: &Point| self.delay(p.arrival_us, p.sent_at) - base;
        for b in points {
            let a = anchor;
            if b.sent < a.sent.saturating_add(MIN_PAIR_BYTES) {
                // Too close to measure a rate by (or older): the pair waits for more.
                if b.sent < a.sent {
                    anchor = *b;
                }
                continue;
            }
            anchor = *b;
            let arrival = Duration::from_micros((b.arrival_us - a.arrival_us).max(0) as u64);
            let sent = b.sent.saturating_sub(a.sent) as f64;
            // Never more than was sent between them: a report cannot claim a rate the link
            // did not send at.
            let received = f64::from(b.received.wrapping_sub(a.received)).min(sent);
            sent_total += sent;
            received_total += received;
            if queued_at(&a).max(queued_at(b)) > overuse {
                lost.queued += sent - received;
            } else {
                lost.random += sent - received;
            }
            if arrival < MIN_PAIR || sent == 0.0 {
                continue;
            }
            let sending_for = b.sent_at.saturating_duration_since(a.sent_at).as_secs_f64();
            // The link was busy if it sent at least half its rate between them, or sent
            // them in one burst (at its own pacing the rate is no measure: a gigabyte a
            // second, which no link sends at, and its overuses measured nothing).
            let busy =
                sending_for <= BURST_SPAN.as_secs_f64() || sent >= 0.5 * self.rate * sending_for;
            if busy {
                bytes += received;
                busy_sent += sent;
                busy_sending += sending_for;
                busy_arrival += arrival.as_secs_f64();
                // Over the longer of the two spans, as BBR's delivery rate: a token bucket
                // on the path (a radio's, `tc tbf`'s) lets what queued behind a pause out
                // at once, arrivals closer than the sends were, and that is not a rate
                // the path carries.
                secs += arrival.as_secs_f64().max(sending_for);
                if arrival.as_secs_f64() > sending_for {
                    slowed_bytes += received;
                    slowed_secs += arrival.as_secs_f64();
                }
                // A queue stood at both and did not shrink much between them, so it never
                // emptied: the path, not the sender, spaced these, at its rate alone. Not
                // "grew": a subscriber that reads in batches stamps arrivals a read late,
                // and taking only the pairs that seemed to spread took its late reads and
                // left its early ones (2 ms reads set the estimate 5 % low).
                if arrival.as_secs_f64() > BOTTLENECK_SPREAD * sending_for
                    && queued_at(&a) >= standing
                    && queued_at(b) >= standing
                {
                    queued_bytes += received;
                    queued_secs += arrival.as_secs_f64();
                }
            }
        }
        let delivery = Delivery {
            delivered: (secs > 0.0).then(|| bytes / secs),
            bottleneck: Pooled {
                bytes: queued_bytes,
                secs: queued_secs,
            },
            sending: (busy_sending > 0.0).then(|| busy_sent / busy_sending),
            spread: (busy_sending > 0.0).then(|| busy_arrival / busy_sending),
            slowed: (slowed_secs > 0.0).then(|| slowed_bytes / slowed_secs),
            span: secs,
            carried: sent_total == 0.0 || received_total >= 0.9 * sent_total,
            sent: sent_total,
            lost,
        };
        (delivery, anchor)
    }

    /// A queue that the counts do not show growing (everything sent arrives) for
    /// [`BASELINE_DOUBT`] is a wrong floor (a forged early arrival, a route that got
    /// longer): start the floor again from now.
    fn check_baseline(&mut self, now: Instant, queue: Duration, carried: bool) {
        if queue <= OVERUSE || !carried || !matches!(self.phase, Phase::Drain(_)) {
            self.doubt_since = None;
            return;
        }
        let since = *self.doubt_since.get_or_insert(now);
        if now.saturating_duration_since(since) >= BASELINE_DOUBT {
            if let Some(p) = self.last_point {
                self.base.reset(now, self.delay(p.arrival_us, p.sent_at));
            }
            self.queue = Duration::ZERO;
            self.doubt_since = None;
            self.phase = Phase::Cruise(0);
            // The overuses the wrong floor claimed set the ceiling: it goes with it.
            self.ceiling = None;
        }
    }

    fn decide(&mut self, now: Instant, delivery: Delivery) {
        let (min, max) = (self.config.min_rate, self.config.max_rate);
        let calm = self.queue < CALM;
        if self.train() {
            // Every datagram of the train was reported once one sent after it was (a
            // path delivers in order; what is missing was lost).
            let reported = self.newest_sent_bytes > START_TRAIN;
            if self.train_queue >= CALM {
                // The train's queue measures the path once a pair of its datagrams
                // queued at both ends: until then, while it is short, the link waits at
                // the start rate (which a path this narrow still drains).
                let measured = self.standing.rate().is_some() || reported;
                if !measured && self.queue < TRAIN_MEASURE_WAIT {
                    return;
                }
                return self.overuse(now, delivery);
            } else if reported {
                // The whole train arrived without a queue: the path is wider than a
                // bucket and queue this short could hide. The link's own pacing, until
                // a queue shows.
                self.train = false;
                self.rate = max;
                return;
            }
        }
        // A probe is looking for the edge: the first queue it stands is the edge, and the
        // link pauses for it at once. Cruising on (as before) let the reports on what the
        // probe had sent show the queue growing past an overuse a report later, and the
        // cut and a second one cost the image in flight 30-50 ms (the real radio, 4 Mbit/s).
        if self.queue > OVERUSE || (self.probing() && !calm) {
            return self.overuse(now, delivery);
        }
        let held = std::mem::take(&mut self.held);
        let carried = delivery.delivered.map(|d| d.min(max));
        let Some(known) = self.capacity else {
            if held && !calm {
                // A queue begins while the rate holds the link: the path's rate is found
                // (see the module documentation's "Start").
                return self.overuse(now, delivery);
            } else if calm && held {
                // Starting: grow while no queue shows and the rate is what holds the link,
                // from what the path was shown to carry: a report tells of sends a report
                // old, and growing the rate itself would grow a rate no report has yet
                // seen carried. Never from more than the rate itself: a token bucket on
                // the path lets the first datagrams through faster than they were paced.
                let shown = carried.unwrap_or(self.rate).min(self.rate);
                self.rate = (shown * START_GROWTH).max(self.rate).clamp(min, max);
            }
            return;
        };
        // What the link carried without a queue: the path has at least that, but no more
        // than the rate it last overflowed at until it has carried more above that than a
        // token bucket holds; then that is the new ceiling.
        let mut capacity = known;
        let mut raised = false;
        if let Some(carried) = carried {
            capacity = match &mut self.ceiling {
                None => known.max(carried),
                Some(ceiling) => {
                    if calm && carried > ceiling.rate {
                        ceiling.proof += (carried - ceiling.rate) * delivery.span;
                        if ceiling.proof >= ceiling.proof_needed() {
                            self.outgrown += ceiling.proof;
                            // What a probe carried is what it was sent at while a bucket
                            // lets it through: the path has shown it carries more than
                            // the ceiling, not how much more. The new ceiling is a step
                            // above, the step growing while the path keeps outgrowing
                            // them (a link that widened fivefold is found in a few steps).
                            *ceiling = Ceiling {
                                raised: true,
                                ..Ceiling::at(carried.min(ceiling.rate * (1.0 + self.raise)))
                            };
                            self.raise = (self.raise * RAISE_GROWTH).min(MAX_RAISE);
                            self.cruise_reports = CRUISE_REPORTS;
                            raised = true;
                        }
                    }
                    known.max(carried.min(ceiling.rate))
                }
            };
        }
        // The path kept up with what was sent: it had room for it. Judged by time, not
        // bytes: random loss takes bytes without a queue's doing, and on pairs of four or
        // five datagrams one loss is a fifth of them (with 2 % loss a probe then failed
        // this a report in twenty, and a probe spans tens: a widening was never found).
        let kept_up = delivery
            .spread
            .is_some_and(|spread| spread * KEPT_UP <= 1.0);
        self.phase = match self.phase {
            Phase::Drain(_) if !calm || self.answered() => self.phase,
            Phase::Drain(_) | Phase::Start => Phase::Cruise(self.cruise_reports),
            // A probe is judged on what it delivered: at a low rate a report may hold no
            // pair of samples far enough apart to tell.
            Phase::Probe(_) if calm && carried.is_none() => self.phase,
            // Outgrown: the ramp starts again from the new ceiling, which is what the
            // path carried. A link that widened severalfold is still found in a second or
            // two (each ceiling outgrown lifts the next ramp's base); one that did not is
            // probed a few percent above what it carries, not at the ramp's height above
            // it (half its step more, as before, stood queues of 10-15 ms on the
            // simulated 4 Mbit/s radio: a token bucket had let the ramp through). Once the
            // ceilings outgrown have carried more than a bucket could hide
            // ([`WIDENING_PROOF`]), the path is widening: the probe goes as far as the next
            // raise, or each ceiling would be what the last probe sent at, a tenth above
            // the last (a radio widening fivefold took 2-3 s to be found, not two).
            Phase::Probe(_) if calm && raised => Phase::Probe(if self.outgrown >= WIDENING_PROOF {
                (1.0 + self.raise).min(MAX_PROBE)
            } else {
                PROBE + PROVING_STEP
            }),
            // The probe was carried and the link has more to send: look further. With no
            // ceiling, at once; with one, by a slow ramp, so that a bucket that empties
            // under it shows a queue that grows by a few milliseconds a report, not tens.
            Phase::Probe(gain) if calm && held && kept_up => match self.ceiling {
                None => Phase::Probe((1.0 + (gain - 1.0) * PROBE_GROWTH).min(MAX_PROBE)),
                // Climbing no higher than a path that keeps outgrowing its ceilings has
                // earned: a queue a bucket hid shows while it is still short.
                Some(_) => {
                    Phase::Probe((gain + PROVING_STEP).min(MAX_PROVING.max(1.0 + self.raise)))
                }
            },
            Phase::Probe(_) => {
                // What a bucket let through during this probe does not carry over, and
                // the bucket fills again while the link cruises.
                if let Some(ceiling) = &mut self.ceiling {
                    ceiling.proof = 0.0;
                    ceiling.raised = false;
                }
                Phase::Cruise(self.cruise_reports)
            }
            Phase::Cruise(0) if calm => Phase::Probe(PROBE),
            Phase::Cruise(n) => Phase::Cruise(n.saturating_sub(u32::from(calm))),
        };
        self.capacity = Some(capacity);
        let gain = match self.phase {
            Phase::Probe(gain) => gain,
            Phase::Drain(_) => DRAIN,
            _ => CRUISE,
        };
        self.rate = (capacity * gain).clamp(min, max);
    }

    /// The queue passed [`OVERUSE`]: the path's rate is what it delivered under the queue,
    /// the link pauses for what the queue holds by now and then sends below that rate
    /// until the queue is gone.
    fn overuse(&mut self, now: Instant, delivery: Delivery) {
        let (min, max) = (self.config.min_rate, self.config.max_rate);
        if self.answered() {
            // The last cut answered this queue, but the pairs under it may show the path
            // narrower than the cut took it for: at a step, a report with no pair that
            // queued at both ends gave what it delivered, a bucket's burst included (7.2
            // for 4 Mbit/s on the real radio, the queue then growing to 80 ms while the
            // reports told of sends from before the cut). The estimate follows at once,
            // without another pause; pairs that arrived as they were sent show no path
            // narrower than what sent them (see the drain's cut below).
            let narrower = self
                .standing
                .rate()
                .filter(|b| delivery.slower_than_sent(*b));
            if let (Some(known), Some(b)) = (self.capacity, narrower) {
                if b < known {
                    let b = b.clamp(min, max);
                    self.capacity = Some(b);
                    self.rate = (b * DRAIN).clamp(min, max);
                    self.ceiling = Some(Ceiling::at(b));
                }
            }
            return;
        }
        // What arrived while the queue stood is the bottleneck's rate (pairs from before
        // it, sent into a token bucket's stored burst, would overstate it), pooled over
        // the reports since it began to stand: one report's pairs measure the path a few
        // percent off, and a low estimate stays (a probe climbing a few percent above it
        // shows a queue before it could outgrow it). Without pairs that queued all along,
        // what the report delivered is the measure.
        // But while an earlier cut's queue drains, the estimate stands unless pairs that
        // queued all along show the path narrower: other pairs span the pause and arrive
        // slower than the path carries (on the simulated 4 Mbit/s radio, such second cuts
        // set the estimate 25-30 % low for seconds), and the drain sends below the
        // estimate by design, so the rate it sends at is no bound on the path (cuts
        // clamped to it set the estimate a fifth low on the real 4 Mbit/s radio, and the
        // probes that outgrew it stood the next queue). A start that a token bucket
        // fooled is set right here (one took 6.6 Mbit/s for the 4 Mbit/s radio).
        let bottleneck = std::mem::take(&mut self.standing).rate();
        let measured = match (self.phase, bottleneck, self.capacity) {
            (Phase::Drain(_), bottleneck, Some(known)) => bottleneck
                // Only pairs that arrived slower than the drain sent them show the path
                // narrower than it: while a real queue drains they arrive faster (and are
                // not pooled), and pairs that arrive as they were sent are no queue at
                // all (forged delays, a floor gone wrong), whose cuts would walk the
                // estimate down by the drain's share a report.
                .filter(|b| delivery.slower_than_sent(*b))
                .map_or(known, |b| b.min(known)),
            (phase, bottleneck, _) => {
                // A start that outgrew the path had a token bucket let it through faster
                // than the path carries: what the report delivered overall is the
                // bucket's, and the pairs that arrived slower than they were sent are the
                // path's (on the 2 Mbit/s radio the first cut was to 3.9 Mbit/s, and the
                // queue stood 110 ms).
                let slowed = delivery.slowed.filter(|_| phase == Phase::Start);
                // Never above what the link sent at: the train went at once.
                let sent_at = if self.train() {
                    max
                } else {
                    self.rate.max(delivery.sending.unwrap_or(0.0))
                };
                bottleneck
                    .or(slowed)
                    .or(delivery.delivered)
                    .unwrap_or(self.rate)
                    .min(sent_at)
            }
        }
        .clamp(min, max);
        // The samples are a report's age old: the queue went on growing since at the
        // excess of what was sent over what the path carries.
        let since = self
            .newest_sent
            .map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
        let growth = since.mul_f64((self.rate / measured - 1.0).clamp(0.0, 4.0));
        let queue_now = self.queue + growth;
        self.capacity = Some(measured);
        self.rate = (measured * DRAIN).clamp(min, max);
        self.stats.overuses += 1;
        self.train = false;
        self.ceiling = Some(Ceiling::at(measured));
        self.raise = FIRST_RAISE;
        self.outgrown = 0.0;
        if matches!(self.phase, Phase::Probe(_)) {
            self.cruise_reports = if self.queue > OVERUSE {
                // The probe overshot the edge: look less often.
                (self.cruise_reports * 2).min(MAX_CRUISE_REPORTS)
            } else {
                // It found the edge as its first queue: the next waits twice the least
                // (probes cost the path's queue a few milliseconds, and the link filler),
                // not the most, since a link that widens is found by probing.
                self.cruise_reports.max(2 * CRUISE_REPORTS)
            };
        }
        // The queue empties fastest with the link silent for as long as it holds: a
        // control datagram behind it then waits one report's overshoot, not the hundreds
        // of milliseconds that sending at DRAIN takes to drain it.
        self.pause = queue_now.saturating_sub(CALM).min(MAX_PAUSE);
        self.phase = Phase::Drain(now + self.pause);
    }

    /// Whether the last report only tells of datagrams sent before the last cut took
    /// effect (its queue is the one the cut answered).
    fn answered(&self) -> bool {
        match self.phase {
            Phase::Drain(resumed) => self.newest_sent.is_none_or(|sent| sent < resumed),
            _ => false,
        }
    }
}

/// The rate a path last overflowed at, and the bytes it has since carried above it
/// without a queue (see [`CEILING_PROOF`]).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ceiling {
    rate: f64,
    proof: f64,
    /// Set by a probe that outgrew the last one, still probing: a bucket in front of the
    /// path was spent proving that, and the next proof need only show a rate.
    raised: bool,
}

impl Ceiling {
    fn at(rate: f64) -> Ceiling {
        Ceiling {
            rate,
            proof: 0.0,
            raised: false,
        }
    }

    /// The bytes above it that outgrow it: a bucket's worth, or a quarter of that for a
    /// ceiling just outgrown (a link that widened fivefold then shows it within two
    /// seconds: `tests/governor_sim.rs`).
    fn proof_needed(&self) -> f64 {
        let bucket =
            (self.rate * CEILING_PROOF_TIME.as_secs_f64()).clamp(MIN_CEILING_PROOF, CEILING_PROOF);
        if self.raised {
            (bucket / 4.0).max(MIN_CEILING_PROOF)
        } else {
            bucket
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udpros::Fragmenter;
    use bytes::Bytes;

    #[test]
    fn the_log_finds_each_block_and_the_bytes_sent_with_it() {
        let t0 = Instant::now();
        let mut log = SendLog::default();
        let mut fragmenter = Fragmenter::new(7, 1000).unwrap();
        let frame = Bytes::from(vec![0u8; 9_000]);
        let mut wire = Vec::new();
        fragmenter.write_datagrams(&frame, &mut wire).unwrap();
        // Ten datagrams of 1000 bytes but the last, in two sends.
        log.record(t0, &wire[..5000], 1000);
        let later = t0 + Duration::from_millis(1);
        log.record(later, &wire[5000..], 1000);
        let sample = |block| Sample {
            message_id: 1,
            block,
            arrival_us: 0,
            bytes: 0,
        };
        let newest = |block| log.candidates(&sample(block)).next();
        assert_eq!(newest(0), Some((t0, 1000)));
        assert_eq!(newest(4), Some((t0, 5000)));
        assert_eq!(newest(5), Some((later, 6000)));
        assert_eq!(newest(9), Some((later, wire.len() as u64)));
        assert_eq!(newest(10), None);
        assert_eq!(log.records.len(), 2, "one record per send");
        // The same message id and block sent again (ids come round): both, newest first.
        let again = later + Duration::from_millis(30);
        log.record(again, &wire[..1000], 1000);
        let sent = wire.len() as u64;
        assert_eq!(
            log.candidates(&sample(0)).collect::<Vec<_>>(),
            [(again, sent + 1000), (t0, 1000)]
        );
    }

    #[test]
    fn the_log_is_bounded() {
        let t0 = Instant::now();
        let mut log = SendLog::default();
        let mut fragmenter = Fragmenter::new(7, 1000).unwrap();
        for i in 0..10 * MAX_RECORDS {
            let mut wire = Vec::new();
            fragmenter
                .write_datagrams(&Bytes::from_static(b"x"), &mut wire)
                .unwrap();
            log.record(t0 + Duration::from_micros(i as u64), &wire, 1000);
        }
        assert_eq!(log.records.len(), MAX_RECORDS);
    }

    /// Reports that name nothing the link sent, come out of order, or do not parse move
    /// nothing; a report that does is counted.
    #[test]
    fn reports_that_name_nothing_sent_are_ignored() {
        let t0 = Instant::now();
        let mut log = SendLog::default();
        let mut fragmenter = Fragmenter::new(7, 1000).unwrap();
        let mut wire = Vec::new();
        fragmenter
            .write_datagrams(&Bytes::from(vec![0u8; 20_000]), &mut wire)
            .unwrap();
        log.record(t0, &wire, 1000);
        let mut governor = Governor::new(t0, GovernorConfig::default());
        let sample = |message_id, block, arrival_us| Sample {
            message_id,
            block,
            arrival_us,
            bytes: 0,
        };
        let report = |sequence, samples| Feedback {
            sequence,
            datagrams: 0,
            bytes: 0,
            samples,
        };
        let ms = |n| t0 + Duration::from_millis(n);
        assert!(!governor.on_feedback(ms(50), &report(1, vec![sample(9, 0, 0)]), &log));
        assert!(!governor.on_feedback(ms(60), &report(1, vec![sample(1, 500, 0)]), &log));
        assert!(governor.on_feedback(ms(70), &report(2, vec![sample(1, 3, 10)]), &log));
        assert!(
            !governor.on_feedback(ms(80), &report(1, vec![sample(1, 4, 20)]), &log),
            "older than the last taken"
        );
        // A flood: one report looked at per MIN_REPORT_GAP, whatever comes.
        let taken = (0..100_000u32)
            .filter(|i| governor.on_feedback(ms(90), &report(3 + i, vec![sample(1, 5, 30)]), &log))
            .count();
        assert_eq!(taken, 1);
        let stats = governor.stats();
        assert_eq!((stats.reports, stats.ignored), (2, 3 + 99_999));
        assert_eq!(stats.rate, GovernorConfig::default().start_rate);
    }

    #[test]
    fn the_delay_floor_forgets_after_its_window() {
        let t0 = Instant::now();
        let mut min = WindowMin {
            current: None,
            previous: None,
        };
        min.add(t0, 10);
        min.add(t0 + Duration::from_secs(1), 50);
        assert_eq!(min.get(), Some(10));
        min.add(t0 + BASE_WINDOW / 2, 40);
        assert_eq!(min.get(), Some(10), "the previous half still counts");
        min.add(t0 + BASE_WINDOW, 60);
        assert_eq!(min.get(), Some(40), "the first half is forgotten");
    }
}
