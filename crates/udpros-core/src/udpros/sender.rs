//! One publisher's UDPROS link to one subscriber, send side, as one object: message ids and
//! fragmentation, pacing toward the subscriber, the layout of datagrams for segmented
//! sends, the heartbeat of an idle link, the goodbye, and what a refused send means. The
//! driver owns the socket and the clock:
//!
//! - a message goes in through [`UdpSender::push_now`] (from the publishing thread, when the
//!   link is idle and the message small: it is paced as a whole, then sent at once) or
//!   [`UdpSender::push_queued`] (from the link's task: paced send by send);
//! - then [`UdpSender::poll_transmit`] gives the next datagrams, which the driver sends in one
//!   call (segmented when [`Transmit::segment_size`] is smaller than the datagrams), then
//!   reports with [`UdpSender::on_transmitted`] or [`UdpSender::on_send_error`]; while
//!   `poll_transmit` has nothing but [`UdpSender::is_sending`] is true, pacing holds the
//!   next datagrams until [`UdpSender::poll_timeout`];
//! - a kernel that has no room (`EWOULDBLOCK`) is the driver's affair: it waits and asks
//!   `poll_transmit` again, which hands out the same datagrams;
//! - on a heartbeat tick, [`UdpSender::poll_heartbeat`]; when the link closes,
//!   [`UdpSender::goodbye`].
//!
//! On a secure link (both ends hold the graph key: [`UdpSenderConfig::secure`]) every
//! datagram leaves sealed, [`OVERHEAD`] bytes longer (the fragmenter's datagrams are that
//! much smaller), and the subscriber's reports are opened before they are read.
//!
//! Toward roscpp the policy is conservative: roscpp reads a datagram per call into a
//! kernel-default receive buffer and drops a link on PING or ERR, so it gets neither, and
//! large messages are spread over its publishing period.

use super::fec::{FecEncoder, LinkFec, FEC_HEADER_LEN};
use super::feedback::{Feedback, FEEDBACK_INTERVAL};
use super::governor::{Governor, GovernorConfig, GovernorStats, SendLog, START_TRAIN};
use super::liveness::HEARTBEAT;
use super::loss::Report;
use super::{ExtraPlace, FragmentError, Fragmenter, Pacer, FILLER_FIRST_BLOCK, HEADER_LEN};
use crate::secure::datagram::{OpenStats, Opener, Sealer, OVERHEAD};
use crate::secure::LinkSecurity;
use bytes::Bytes;
use std::time::Instant;

/// Most datagrams one segmented send carries (Linux's UDP_MAX_SEGMENTS).
pub const MAX_SEGMENTS: usize = 64;
/// Most datagrams one segmented send of a secure link carries: each is sealed just before
/// its send, so smaller sends let the subscriber open the first datagrams of a message
/// while the publisher still seals the last ones.
const SEALED_SEGMENTS: usize = 16;
/// Most bytes one UDP send over IPv4 may carry, segmented or not.
pub const MAX_SEND: usize = 65_507;

/// How many bytes of `segment`-byte datagrams one send may carry.
pub fn max_send(segment: usize) -> usize {
    let segment = segment.max(1);
    (MAX_SEND / segment).clamp(1, MAX_SEGMENTS) * segment
}

/// Without segmentation, messages of more datagrams than this are not sent from the
/// publishing thread: sending them would hold it up.
pub const DIRECT_MAX_DATAGRAMS: usize = 8;
/// With segmentation, messages that take up to this many sends (about 128 kB of 1500-byte
/// datagrams: a compressed camera frame) go from the publishing thread; larger ones through
/// the link's task. Handing a 100 kB message to the task cost the publisher a wake of the
/// runtime's thread, and the subscriber often a second wake for the task's later second
/// send (S3, 6 alternated runs: p50 216 → 158 µs, p99 345 → 244, publisher CPU -28 %,
/// subscriber's -9 %). Two sends hold the caller for tens of µs; the twenty of a 1 MB
/// message would hold it too long.
pub const DIRECT_MAX_SENDS: usize = 2;

/// How often an adaptive FEC link looks for the subscriber's loss reports: as often as
/// they come ([`REPORT_INTERVAL`](super::loss::REPORT_INTERVAL)). The look is a read
/// syscall on the publishing thread, which a sleeping publisher pays cold: every 50 ms it
/// cost 100 kB messages at 10 Hz about 20 µs each (S8, lossless, 3 alternated runs: 510 →
/// 466 µs of publisher CPU per message).
pub const REPORT_CHECK: std::time::Duration = super::loss::REPORT_INTERVAL;

/// How often a governed link looks for the subscriber's feedback: twice per report, so
/// that a report waits at most half an interval to be read.
pub const FEEDBACK_CHECK: std::time::Duration =
    std::time::Duration::from_millis(FEEDBACK_INTERVAL.as_millis() as u64 / 2);

/// The same while the start's train waits to be judged
/// ([`Governor::train`](super::governor::Governor::train)), the subscriber reporting every
/// [`START_FEEDBACK_INTERVAL`](super::feedback::START_FEEDBACK_INTERVAL).
pub const START_FEEDBACK_CHECK: std::time::Duration = std::time::Duration::from_micros(
    super::feedback::START_FEEDBACK_INTERVAL.as_micros() as u64 / 2,
);

/// On a governed link that cannot carry everything published, the longest a queued
/// message may wait for its first datagram to leave: older ones are dropped whole, the
/// newest kept (a half-sent image is worth nothing, a late one little).
pub const FRESHNESS: std::time::Duration = std::time::Duration::from_millis(200);

/// A governed link paced below its maximum sends bursts of at most this long at its rate
/// (and never less than a datagram): what it adds to the bottleneck's queue at once.
pub const GOVERNED_BURST: std::time::Duration = std::time::Duration::from_millis(2);

/// What the driver knows about a link when it opens it.
#[derive(Debug, Clone, PartialEq)]
pub struct UdpSenderConfig {
    /// The subscriber is udpros: it sizes its receive buffer for whole messages, and
    /// expects heartbeats and a goodbye.
    pub udpros_peer: bool,
    /// The MTU of the route to the subscriber, if known: datagrams larger than it become
    /// several IP fragments, which shrinks what a roscpp receive buffer holds.
    pub route_mtu: Option<usize>,
    /// The kernel cuts one send into datagrams (Linux's UDP_SEGMENT).
    pub segmenting: bool,
    /// The subscriber is on this machine (a loopback address): an adaptive FEC link plans
    /// its repair from the reports alone (see [`LinkFec::repairs_on_loopback`]).
    pub loopback: bool,
    /// Repair for each message, on a link where both ends agreed on FEC (`None` where they
    /// did not). The fragmenter's blocks are then the code's shards: build it with the
    /// datagram size [`fec::shard_size`](super::fec::shard_size) leaves for data.
    pub fec: Option<LinkFec>,
    /// The subscriber sends [`feedback`](super::feedback) (both ends agreed): the link's
    /// pacing follows a [`Governor`] within these limits. `None`: fixed pacing.
    pub governor: Option<GovernorConfig>,
    /// The most the link sends, bytes per second, whatever else allows (the user's cap,
    /// for a path they know is narrow: toward roscpp and rospy, which send no feedback,
    /// the only way to know). Bursts are at most [`GOVERNED_BURST`] of it; a governed
    /// link is paced at the lower of this and its governor's rate. `None`: no cap.
    pub max_rate: Option<f64>,
    /// A secure link's mode and keys (udpros peers that both hold the graph key):
    /// datagrams leave sealed. Build the fragmenter with [`OVERHEAD`] bytes less.
    pub secure: Option<LinkSecurity>,
}

/// Datagrams to send in one call: `datagrams` holds them back to back, each
/// `segment_size` bytes but the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit<'a> {
    /// The datagrams, back to back.
    pub datagrams: &'a [u8],
    /// The size of each datagram but the last; equal to `datagrams.len()` for one.
    pub segment_size: usize,
}

/// Why a send failed, as far as the link cares (the driver maps its OS errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The kernel does not do this kind of send here (EIO, EINVAL, EOPNOTSUPP,
    /// ENOPROTOOPT): on a segmented send, an interface without checksum offload.
    Unsupported,
    /// EMSGSIZE: larger than the path allows, or an earlier datagram's ICMP
    /// "fragmentation needed" surfacing on this send.
    TooLarge,
    /// Anything else: the link is broken.
    Other,
}

/// What the link makes of a failed send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterError {
    /// The kernel refused segmented sends on this route: from now on one datagram per
    /// send, which IP fragments as it does roscpp's. Ask `poll_transmit` again.
    StoppedSegmenting,
    /// The message was too large for the path: it is dropped, the link goes on. `first`
    /// on the first such drop of the link (worth a warning).
    DroppedMessage {
        /// The first drop on this link.
        first: bool,
    },
    /// The link is broken: close it.
    Fatal,
}

/// Datagram pacing toward a subscriber: udpros subscribers size their receive buffers for
/// whole messages. roscpp's is the kernel default (about 200 kB) and it reads a datagram
/// per call, so bursts stay well under that buffer; messages that fit it leave at 250 MB/s,
/// larger ones are spread over half their publishing period, never slower than 40 MB/s (a
/// rate roscpp keeps up with: 1 MB at 20 Hz went from 64-78 % delivered at 250 MB/s to
/// 100 %). Each IP fragment a datagram becomes on the route takes a packet's share of a
/// roscpp subscriber's receive buffer, so the budget toward roscpp shrinks with them
/// (measured at MTU 576, 100 kB messages: 12 of 20 arrived unscaled).
fn pacer_for(udpros_peer: bool, fragments: usize) -> Pacer {
    if udpros_peer {
        Pacer::new(1_500_000_000, 4 << 20)
    } else {
        let f = fragments.max(1);
        Pacer::spreading(
            250_000_000 / f as u64,
            40_000_000 / f as u64,
            (96 << 10) / f,
            (128 << 10) / f,
        )
    }
}

/// How many IP fragments a datagram of `size` bytes becomes on a route of `route_mtu`.
fn fragments_per_datagram(route_mtu: Option<usize>, size: usize) -> usize {
    let Some(mtu) = route_mtu else {
        return 1;
    };
    // Each fragment carries a multiple of 8 bytes of the UDP datagram (header included).
    let per_fragment = (mtu.saturating_sub(20) / 8 * 8).max(8);
    (size + 8).div_ceil(per_fragment)
}

/// What a link with FEC keeps between messages.
#[derive(Debug, Default)]
struct FecWork {
    encoder: FecEncoder,
    /// A message's data datagrams, before they are laid out among its repair datagrams.
    data: Vec<u8>,
    /// Its repair datagrams.
    repair: Vec<u8>,
}

/// A stretch of the outgoing datagrams that share one size (but its last), as one
/// segmented send wants them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    /// Where in `out` it ends.
    end: usize,
    /// The size of each of its datagrams but the last.
    segment: usize,
}

/// One publisher's UDPROS link to one subscriber, send side (see the module documentation
/// for the order of calls).
#[derive(Debug)]
pub struct UdpSender {
    fragmenter: Fragmenter,
    pacer: Pacer,
    /// Datagrams to send, back to back, in runs of one size: one message's fragments (and
    /// its repair datagrams), or several small messages.
    out: Vec<u8>,
    runs: Vec<Run>,
    /// The run being sent.
    run: usize,
    /// How much of `out` has left.
    sent: usize,
    /// The pacer has granted the next send (`Some(at)`: from `at` on).
    granted: Option<Instant>,
    /// The whole of `out` was paced when it was loaded (a direct send).
    paced_whole: bool,
    segmenting: bool,
    last_sent: Instant,
    udpros_peer: bool,
    loopback: bool,
    /// Messages dropped because a send was refused as too large.
    oversize_drops: u64,
    fec: Option<LinkFec>,
    /// What the subscriber last reported of the link's loss (adaptive FEC links).
    reported: Option<Report>,
    /// When the driver should next look for reports.
    next_report_check: Instant,
    /// The repair for the last block count asked: `(k, repairs)` (the adaptive search is
    /// cheap, but not free for messages of thousands of blocks).
    repairs_cache: Option<(usize, u16)>,
    /// The code's state and a message's datagrams before they are laid out, kept between
    /// messages (boxed: links without FEC carry only the pointer).
    work: Box<FecWork>,
    /// Repair datagrams sent.
    repairs_sent: u64,
    /// The most bytes one send may carry (a governed link's burst); `None`: as segmentation
    /// allows.
    send_cap: Option<usize>,
    /// The last message's block count and repair datagrams.
    last_plan: Option<(u16, u16)>,
    /// The link's governor, on links whose subscriber sends feedback (boxed: most links
    /// toward roscpp and on loopback have none).
    governed: Option<Box<Governed>>,
    /// The user's cap on the link's rate (bytes per second).
    rate_cap: Option<f64>,
    /// Messages dropped as stale ([`UdpSender::drop_stale`]).
    stale: u64,
    /// What is loaded is filler ([`UdpSender::load_filler`]).
    filler: bool,
    /// Bytes of filler sent.
    filler_sent: u64,
    /// The last filler datagram's number.
    filler_number: u16,
    /// A secure link's seals (boxed: plain links carry only the pointer).
    sealing: Option<Box<Sealing>>,
}

/// What the publisher's end of a secure link did: the datagrams it sealed, and what it
/// made of the subscriber's sealed reports (a forged report is refused and counted here).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecureSendStats {
    /// Datagrams sealed: data, repair, heartbeats and filler.
    pub sealed: u64,
    /// The subscriber's reports opened and refused.
    pub reports: OpenStats,
}

/// What a secure link's send side keeps: its sealer, the opener of the subscriber's
/// reports, and the sealed copy of the datagrams handed out last.
#[derive(Debug)]
struct Sealing {
    sealer: Sealer,
    opener: Opener,
    sealed: Vec<u8>,
}

/// A governed link's controller and the record of its sends it reads.
#[derive(Debug)]
struct Governed {
    governor: Governor,
    log: SendLog,
    /// The rate the pacer was last given (bytes per second).
    applied: f64,
    /// The pacing without a governor, restored while it knows nothing.
    max_rate: f64,
    /// The pacer's burst is the start's train ([`START_TRAIN`]).
    train: bool,
}

impl UdpSender {
    /// A link that opens at `now`, sending through `fragmenter` (its connection id and
    /// datagram size are the negotiated ones).
    pub fn new(now: Instant, fragmenter: Fragmenter, config: UdpSenderConfig) -> UdpSender {
        let size = fragmenter.max_datagram_size();
        let fragments = fragments_per_datagram(config.route_mtu, size);
        let mut sender = UdpSender {
            pacer: pacer_for(config.udpros_peer, fragments),
            fragmenter,
            out: Vec::new(),
            runs: Vec::new(),
            run: 0,
            sent: 0,
            granted: None,
            paced_whole: false,
            segmenting: config.segmenting,
            last_sent: now,
            udpros_peer: config.udpros_peer,
            loopback: config.loopback,
            oversize_drops: 0,
            fec: config.fec.filter(|_| config.udpros_peer),
            reported: None,
            next_report_check: now,
            repairs_cache: None,
            work: Box::default(),
            repairs_sent: 0,
            last_plan: None,
            send_cap: None,
            governed: config
                .governor
                .filter(|_| config.udpros_peer)
                .map(|limits| {
                    Box::new(Governed {
                        governor: Governor::new(now, limits),
                        log: SendLog::default(),
                        applied: limits.max_rate,
                        max_rate: limits.max_rate,
                        train: false,
                    })
                }),
            rate_cap: config.max_rate.filter(|cap| cap.is_finite() && *cap > 0.0),
            stale: 0,
            filler: false,
            filler_sent: 0,
            filler_number: 0,
            sealing: config.secure.filter(|_| config.udpros_peer).map(|link| {
                let (sealer, opener) = link.publisher_end();
                Box::new(Sealing {
                    sealer,
                    opener,
                    sealed: Vec::new(),
                })
            }),
        };
        if let Some(cap) = sender.rate_cap {
            sender.pace_at(now, cap);
        }
        sender
    }

    /// Paces the link at `rate` (bytes per second) with bursts of [`GOVERNED_BURST`] at
    /// it (at least a datagram), and caps each send to that burst.
    fn pace_at(&mut self, now: Instant, rate: f64) {
        let datagram = self.fragmenter.max_datagram_size();
        let burst = ((rate * GOVERNED_BURST.as_secs_f64()) as usize).max(datagram);
        self.pacer.set_rate(now, rate, burst);
        self.send_cap = Some(burst);
    }

    /// The rate the link is held to below its own pacing, if any: its governor's once it
    /// knows the path, the user's cap, or the lower of the two.
    fn held_to(&self) -> Option<f64> {
        let governed = self
            .governed
            .as_ref()
            .map(|g| (g.governor.rate(), g.max_rate))
            .filter(|(rate, max)| rate < max)
            .map(|(rate, _)| rate);
        match (governed, self.rate_cap) {
            (Some(g), Some(cap)) => Some(g.min(cap)),
            (one, other) => one.or(other),
        }
    }

    /// What the link's governor knows (`None`: the link is not governed).
    pub fn governor(&self) -> Option<GovernorStats> {
        self.governed.as_ref().map(|g| GovernorStats {
            stale: self.stale,
            filler: self.filler_sent,
            ..g.governor.stats()
        })
    }

    /// The link's governor is probing for room above its estimate: the link should not
    /// fall silent, not even while it holds a message back for a fresher one (it sends
    /// filler then: [`load_filler`](Self::load_filler)). A pause lets a token bucket in
    /// front of the radio fill, and its burst then hides what the probe sends above the
    /// path's rate (no queue shows until the probe has climbed a fifth above it, and then
    /// one grows by ten milliseconds a report).
    pub fn probing(&self) -> bool {
        self.governed.as_ref().is_some_and(|g| g.governor.probing())
    }

    /// How long a message of `frame_len` bytes takes to leave at the rate the link is held
    /// to (its governor's below its maximum, or the user's cap); `None` when it is not
    /// held to one.
    pub fn send_time(&mut self, frame_len: usize) -> Option<std::time::Duration> {
        let rate = self.held_to()?;
        let bytes = self.wire_bytes(frame_len) as f64;
        std::time::Duration::try_from_secs_f64(bytes / rate).ok()
    }

    /// Messages dropped as stale so far ([`drop_stale`](Self::drop_stale)).
    pub fn stale(&self) -> u64 {
        self.stale
    }

    /// On a link held below its own pacing (a governed link paced below its maximum, or
    /// one under the user's cap), drops from the front of `frames` (the messages queued
    /// for it, oldest first) those that would leave later than [`FRESHNESS`] at its rate:
    /// the newest that fit, and always the newest one, are kept whole and in order.
    /// Returns how many were dropped (counted as stale). Call when the link takes its
    /// queue, before [`push_queued`](Self::push_queued).
    pub fn drop_stale(&mut self, frames: &mut Vec<Bytes>) -> usize {
        let Some(rate) = self.held_to() else {
            return 0;
        };
        if frames.len() < 2 {
            return 0;
        }
        let budget = rate * FRESHNESS.as_secs_f64();
        let (mut keep, mut bytes) = (0, 0.0);
        for i in (0..frames.len()).rev() {
            let wire = self.wire_bytes(frames[i].len()) as f64;
            if keep > 0 && bytes + wire > budget {
                break;
            }
            bytes += wire;
            keep += 1;
        }
        let stale = frames.len() - keep;
        frames.drain(..stale);
        self.stale += stale as u64;
        stale
    }

    /// Gives the pacer the governor's rate when it moved by more than a percent, with a
    /// burst of [`GOVERNED_BURST`] at it, and caps each send to that burst.
    fn follow_governor(&mut self, now: Instant) {
        let Some(g) = self.governed.as_mut() else {
            return;
        };
        let known = g.governor.rate();
        // The silence is paid for at the rate that follows it: a pause taken at the rate
        // before a cut would last old/new times longer.
        let pause = g.governor.take_pause();
        let rate = self.rate_cap.map_or(known, |cap| known.min(cap));
        // The start's train goes at once (a burst of the pacer's), in sends that take no
        // more than is left of it: a send granted at the train's burst and the start's
        // rate would leave 0.2 s later, whatever the rate by then. Then the rate.
        let datagram = self.fragmenter.max_datagram_size();
        // A link the user capped (the path known narrow) sends no train.
        let train_left = match g.governor.train() && self.rate_cap.is_none() {
            true => START_TRAIN.saturating_sub(g.log.bytes()) as usize,
            false => 0,
        };
        let train = train_left >= datagram;
        if train {
            if !g.train || (rate - g.applied).abs() > 0.01 * g.applied {
                self.pacer.set_rate(now, rate, START_TRAIN as usize);
            }
            g.train = true;
            g.applied = rate;
            self.send_cap = Some(train_left);
        } else if (rate - g.applied).abs() > 0.01 * g.applied || g.train {
            g.applied = rate;
            g.train = false;
            if rate >= g.max_rate {
                // Nothing known, and no cap: the link's own pacing.
                self.pacer = pacer_for(true, 1);
                self.send_cap = None;
            } else {
                self.pace_at(now, rate);
            }
        }
        if !pause.is_zero() {
            self.pacer.pause(now, pause);
        }
    }

    /// The FEC the link carries (`None` toward roscpp and where either end is off).
    pub fn fec(&self) -> Option<LinkFec> {
        self.fec
    }

    /// What the subscriber last reported of the link's loss.
    pub fn reported(&self) -> Option<Report> {
        self.reported
    }

    /// How often the link looks at the subscriber's reports, if it takes any: governed
    /// links (faster while the governor's first train is out) and adaptive FEC links.
    fn report_every(&self) -> Option<std::time::Duration> {
        let adaptive = self.fec.is_some_and(|f| f.target.is_some());
        match (self.governed.as_ref(), adaptive) {
            (Some(g), _) if g.governor.train() => Some(START_FEEDBACK_CHECK),
            (Some(_), _) => Some(FEEDBACK_CHECK),
            (None, true) => Some(REPORT_CHECK),
            (None, false) => None,
        }
    }

    /// Whether the driver should read the subscriber's reports from the link's socket now
    /// (adaptive FEC and governed links, every [`REPORT_CHECK`] or [`FEEDBACK_CHECK`]): a
    /// non-blocking read before a send, so that the link needs no reader of its own. Hand
    /// what it read to [`handle_reports`](Self::handle_reports), even nothing: that
    /// schedules the next look.
    pub fn wants_reports(&self, now: Instant) -> bool {
        self.report_every().is_some() && now >= self.next_report_check
    }

    /// A datagram read from the link's socket at `now`: the subscriber's loss report or
    /// feedback, or nothing this link takes (ignored; a report claims at most
    /// [`MAX_REPORTED_LOSS`](super::loss::MAX_REPORTED_LOSS), and feedback moves the rate
    /// only within the governor's limits).
    pub fn handle_report(&mut self, now: Instant, datagram: &[u8]) -> bool {
        self.handle_reports(now, [datagram])
    }

    /// Datagrams read together from the link's socket at `now`, oldest first (see
    /// [`handle_report`](Self::handle_report)); true if any was taken. Of the feedback
    /// among them the governor is given the newest only: reports that waited in the
    /// socket while the link slept tell of sends the newest covers, and the governor
    /// takes one report per [`MIN_REPORT_GAP`](super::governor::MIN_REPORT_GAP), so
    /// handing them over in order had it act on the oldest and ignore the rest.
    pub fn handle_reports<'a>(
        &mut self,
        now: Instant,
        datagrams: impl IntoIterator<Item = &'a [u8]>,
    ) -> bool {
        if let Some(every) = self.report_every() {
            self.next_report_check = now + every;
        }
        let connection_id = self.fragmenter.connection_id();
        let mut newest_feedback = None;
        let mut taken = false;
        for datagram in datagrams {
            // On a secure link only what the subscriber sealed is read.
            let opened;
            let datagram = match self.sealing.as_deref_mut() {
                Some(sealing) => match sealing.opener.open(datagram) {
                    Ok(plain) => {
                        opened = plain;
                        &opened[..]
                    }
                    Err(_) => continue,
                },
                None => datagram,
            };
            if self.governed.is_some() {
                if let Some(feedback) = Feedback::parse(datagram, connection_id) {
                    newest_feedback = Some(feedback);
                    continue;
                }
            }
            let Some(report) = Report::parse(datagram, connection_id) else {
                continue;
            };
            if self.reported != Some(report) {
                self.repairs_cache = None;
            }
            self.reported = Some(report);
            taken = true;
        }
        if let (Some(feedback), Some(g)) = (newest_feedback, self.governed.as_mut()) {
            taken |= g.governor.on_feedback(now, &feedback, &g.log);
            // The share of the loss that was a queue's may have moved.
            self.repairs_cache = None;
            self.follow_governor(now);
        }
        taken
    }

    /// Repair shards for a message of `k` blocks.
    fn repairs(&mut self, k: usize) -> u16 {
        let Some(fec) = self.fec else {
            return 0;
        };
        if let Some((cached, r)) = self.repairs_cache.filter(|(cached, _)| *cached == k) {
            debug_assert_eq!(cached, k);
            return r;
        }
        let datagram = self.fragmenter.max_datagram_size();
        // A governed link repairs the random loss only: a full queue's is the governor's.
        let planned = match (self.reported, &self.governed) {
            (Some(report), Some(g)) => Some(g.governor.random_loss(&report)),
            (reported, _) => reported,
        };
        let r = if self.loopback {
            fec.repairs_on_loopback(k, datagram, planned.as_ref())
        } else {
            fec.repairs(k, datagram, planned.as_ref())
        };
        self.repairs_cache = Some((k, r));
        r
    }

    /// Repair datagrams sent so far.
    pub fn repairs_sent(&self) -> u64 {
        self.repairs_sent
    }

    /// The last message's blocks and repair datagrams (FEC links): the redundancy in use.
    pub fn last_plan(&self) -> Option<(u16, u16)> {
        self.last_plan
    }

    /// Whether the subscriber is udpros (it gets heartbeats and a goodbye).
    pub fn udpros_peer(&self) -> bool {
        self.udpros_peer
    }

    /// Whether sends are segmented (false once the kernel refused).
    pub fn segmenting(&self) -> bool {
        self.segmenting
    }

    /// Whether loaded datagrams are still to be sent.
    pub fn is_sending(&self) -> bool {
        self.sent < self.out.len()
    }

    /// The bytes of what is loaded that have not left yet, headers and repair included:
    /// what a budget shared with other links is charged for a message as it starts.
    pub fn unsent_bytes(&self) -> usize {
        self.out.len().saturating_sub(self.sent)
    }

    /// Messages dropped because the path refused them as too large.
    pub fn oversize_drops(&self) -> u64 {
        self.oversize_drops
    }

    /// Loads `frame` to be sent at once from the publishing thread, if the link is idle,
    /// the message small (see [`DIRECT_MAX_SENDS`], [`DIRECT_MAX_DATAGRAMS`]) and pacing
    /// allows the whole of it now; false leaves it to the queue. Once loaded, the message
    /// has its id: all of it must follow.
    pub fn push_now(&mut self, now: Instant, frame: &Bytes) -> bool {
        self.discard_filler();
        let blocks = self.fragmenter.blocks_for(frame.len());
        let bytes = self.wire_bytes(frame.len());
        let small = if self.segmenting {
            bytes <= DIRECT_MAX_SENDS * max_send(self.fragmenter.max_datagram_size())
        } else {
            blocks <= DIRECT_MAX_DATAGRAMS
        };
        self.governor_sending(now);
        if self.is_sending() || !small || !self.pacer.try_reserve(now, bytes) {
            return false;
        }
        self.pacer.message(now, bytes);
        if self.load(frame).is_err() {
            return false; // the link's task counts it as dropped
        }
        self.paced_whole = true;
        true
    }

    /// Loads, from the front of `frames`, what the next sends carry: a run of small
    /// messages of one size that one segmented send takes, or one message. Returns how
    /// many frames it took (at least one when the link is idle and `frames` is not empty),
    /// or the error that makes the first unsendable (the driver counts it dropped and goes
    /// on with the next).
    pub fn push_queued(&mut self, now: Instant, frames: &[Bytes]) -> Result<usize, FragmentError> {
        if !frames.is_empty() {
            self.discard_filler();
        }
        if self.is_sending() || frames.is_empty() {
            return Ok(0);
        }
        self.governor_sending(now);
        let taken = match self.segmenting {
            true => self.load_small(frames),
            false => 0,
        };
        let taken = if taken > 0 {
            taken
        } else {
            self.load(&frames[0])?;
            1
        };
        for frame in &frames[..taken] {
            let bytes = self.wire_bytes(frame.len());
            self.pacer.message(now, bytes);
        }
        self.paced_whole = false;
        Ok(taken)
    }

    /// Loads one datagram of filler, a PING padded to the link's datagram size, when the
    /// link is idle and its governor probing ([`probing`](Self::probing)); false (nothing
    /// loaded) otherwise. A link that holds its newest message back for a fresher one
    /// sends filler meanwhile, at the pacer's rate, so that the probe goes on loading the
    /// path: silent, the link would let a token bucket in front of the radio fill, and the
    /// bucket's burst would then hide what the probe sends above the path's rate (holding
    /// silently while probing took control's p99 on the real 2 Mbit/s radio from 6 to
    /// 12-17 ms, and across a 20 → 4 → 20 Mbit/s step with loss from 3 to 25 ms). The
    /// subscriber takes filler as a heartbeat and samples its arrival as it samples data
    /// (it carries a block number of its own, from [`FILLER_FIRST_BLOCK`]), so the governor
    /// measures the probe through the hold. Filler not yet sent gives way to the next
    /// message loaded ([`discard_filler`](Self::discard_filler)).
    pub fn load_filler(&mut self, now: Instant) -> bool {
        if self.is_sending() || !self.probing() {
            return false;
        }
        // Filler is sending: a governor that hears nothing for long slows the link, and
        // may end the probe.
        self.governor_sending(now);
        if !self.probing() {
            return false;
        }
        self.clear();
        // Numbered apart from the data blocks, so that the subscriber samples its arrival
        // and the governor pairs it with its send, as it does data.
        self.filler_number = self.filler_number.wrapping_add(1);
        let block = FILLER_FIRST_BLOCK | (self.filler_number & !FILLER_FIRST_BLOCK);
        self.out.extend_from_slice(&self.fragmenter.filler(block));
        let size = self.fragmenter.max_datagram_size().max(HEADER_LEN);
        self.out.resize(size, 0);
        self.runs.push(Run {
            end: size,
            segment: size,
        });
        self.paced_whole = false;
        self.filler = true;
        true
    }

    /// Whether what is loaded and not yet sent is filler.
    pub fn is_filling(&self) -> bool {
        self.filler && self.is_sending()
    }

    /// Drops filler that has not left yet (a message is ready to go in its place);
    /// returns whether there was any.
    pub fn discard_filler(&mut self) -> bool {
        let unsent = self.is_filling() && self.sent == 0;
        if unsent {
            self.clear();
        }
        unsent
    }

    /// The next datagrams to send, if any may leave at `now`. Asked again before
    /// [`on_transmitted`](Self::on_transmitted), it hands out the same ones.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit<'_>> {
        if !self.is_sending() {
            return None;
        }
        let len = self.next_send_len();
        let segment = self.segment();
        if !self.paced_whole {
            let wire = self.wire_len(len, segment);
            let at = *self
                .granted
                .get_or_insert_with(|| self.pacer.reserve(now, wire));
            if at > now {
                if let Some(g) = self.governed.as_mut() {
                    g.governor.on_held();
                }
                return None;
            }
        }
        let plain = &self.out[self.sent..self.sent + len];
        let Some(sealing) = self.sealing.as_deref_mut() else {
            return Some(Transmit {
                datagrams: plain,
                segment_size: segment,
            });
        };
        // Sealed again when asked again: fresh counters for the same datagrams, of which
        // the subscriber takes whichever arrives.
        sealing.sealed.clear();
        for datagram in plain.chunks(segment.max(1)) {
            sealing.sealer.seal_into(datagram, &mut sealing.sealed);
        }
        Some(Transmit {
            datagrams: &sealing.sealed,
            segment_size: segment + OVERHEAD,
        })
    }

    /// Bytes `len` bytes of `segment`-byte datagrams of `out` take on the wire: as many,
    /// or sealed.
    fn wire_len(&self, len: usize, segment: usize) -> usize {
        match self.sealing {
            Some(_) => len + len.div_ceil(segment.max(1)) * OVERHEAD,
            None => len,
        }
    }

    /// What a secure link sealed, and opened and refused of the subscriber's reports
    /// (`None`: the link is plain).
    pub fn secure_stats(&self) -> Option<SecureSendStats> {
        self.sealing.as_ref().map(|s| SecureSendStats {
            sealed: s.sealer.sealed(),
            reports: s.opener.stats(),
        })
    }

    /// A control datagram (PING, ERR) as it leaves: sealed on a secure link.
    fn control(&mut self, datagram: [u8; HEADER_LEN]) -> Vec<u8> {
        match self.sealing.as_deref_mut() {
            Some(sealing) => sealing.sealer.seal(&datagram),
            None => datagram.to_vec(),
        }
    }

    /// When the driver must next act, covering every timer of the link: while it
    /// [`is_sending`](Self::is_sending), when pacing lets the next datagrams go (`Some`
    /// whenever [`poll_transmit`](Self::poll_transmit) returned `None`) or, on a governed
    /// link, when it next looks at its reports ([`wants_reports`](Self::wants_reports)),
    /// whichever comes first; while idle, its next heartbeat
    /// ([`poll_heartbeat`](Self::poll_heartbeat), udpros peers only). Poll again after
    /// every other call.
    #[must_use = "act at this instant: poll_transmit, wants_reports or poll_heartbeat"]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_sending() {
            let look = self.governed.as_ref().map(|_| self.next_report_check);
            return self.granted.into_iter().chain(look).min();
        }
        self.udpros_peer.then(|| self.last_sent + HEARTBEAT)
    }

    /// The link is about to send at `now`: a governor that has heard nothing for long
    /// slows it.
    fn governor_sending(&mut self, now: Instant) {
        if let Some(g) = self.governed.as_mut() {
            g.governor.on_sending(now);
            self.follow_governor(now);
        }
    }

    /// The datagrams of the last [`Transmit`] left whole at `now`.
    pub fn on_transmitted(&mut self, now: Instant) {
        let len = self.next_send_len();
        if let Some(g) = self.governed.as_mut() {
            let segment = self.runs.get(self.run).map_or(len, |run| run.segment);
            g.log
                .record(now, &self.out[self.sent..self.sent + len], segment);
        }
        if self.governed.as_ref().is_some_and(|g| g.train) {
            // The train is out: the next send is granted at the rate's own burst.
            self.follow_governor(now);
        }
        self.sent += len;
        if self.filler {
            self.filler_sent += len as u64;
        }
        if self
            .runs
            .get(self.run)
            .is_some_and(|run| self.sent >= run.end)
        {
            self.run += 1;
        }
        self.granted = None;
        if !self.is_sending() {
            self.last_sent = now;
        }
    }

    /// The send of the last [`Transmit`] (or of a heartbeat) failed with `error`.
    pub fn on_send_error(&mut self, error: SendError) -> AfterError {
        let segmented = self.is_sending() && self.next_send_len() > self.segment();
        match error {
            SendError::Unsupported | SendError::TooLarge if self.segmenting && segmented => {
                self.segmenting = false;
                self.granted = None;
                AfterError::StoppedSegmenting
            }
            SendError::TooLarge => {
                self.oversize_drops += 1;
                self.sent = self.out.len();
                self.granted = None;
                AfterError::DroppedMessage {
                    first: self.oversize_drops == 1,
                }
            }
            SendError::Unsupported | SendError::Other => AfterError::Fatal,
        }
    }

    /// A PING to send now to a udpros subscriber when nothing has left for [`HEARTBEAT`]
    /// (roscpp drops a link on PING); the link is otherwise idle then. The next is due a
    /// period after it ([`poll_timeout`](Self::poll_timeout)).
    #[must_use = "a heartbeat handed out counts as sent"]
    pub fn poll_heartbeat(&mut self, now: Instant) -> Option<Vec<u8>> {
        let idle = !self.is_sending() && now.saturating_duration_since(self.last_sent) >= HEARTBEAT;
        if !(self.udpros_peer && idle) {
            return None;
        }
        self.last_sent = now;
        let ping = self.fragmenter.ping();
        Some(self.control(ping))
    }

    /// The ERR that tells a udpros subscriber the link is closing (roscpp gets nothing: it
    /// sees the link stop).
    pub fn goodbye(&mut self) -> Option<Vec<u8>> {
        let err = self.udpros_peer.then(|| self.fragmenter.err())?;
        Some(self.control(err))
    }

    /// Bytes a frame of `frame_len` bytes takes on the wire, headers and repair included.
    fn wire_bytes(&mut self, frame_len: usize) -> usize {
        let blocks = self.fragmenter.blocks_for(frame_len);
        let data = frame_len + blocks * HEADER_LEN;
        // A secure link's seal, on each datagram.
        let seal = match self.sealing {
            Some(_) => OVERHEAD,
            None => 0,
        };
        if self.fec.is_none() {
            return data + blocks * seal;
        }
        let shard = match blocks {
            // A one-block message's repair is a copy of it (padded to even).
            1 => frame_len.next_multiple_of(2),
            _ => self.fragmenter.max_datagram_size() - HEADER_LEN,
        };
        match self.repairs(blocks) {
            0 if blocks < 2 => data + blocks * seal,
            0 => data + HEADER_LEN + FEC_HEADER_LEN + (blocks + 1) * seal,
            r => {
                let r = usize::from(r);
                data + r * (HEADER_LEN + FEC_HEADER_LEN + shard) + (blocks + r) * seal
            }
        }
    }

    /// Forgets what was loaded.
    fn clear(&mut self) {
        self.filler = false;
        self.out.clear();
        self.runs.clear();
        self.run = 0;
        self.sent = 0;
        self.granted = None;
    }

    /// Appends `datagrams`, each `segment` bytes but the last, to `out` as one run.
    fn push_run(&mut self, datagrams: &[u8], segment: usize) {
        if datagrams.is_empty() {
            return;
        }
        self.out.extend_from_slice(datagrams);
        self.runs.push(Run {
            end: self.out.len(),
            segment,
        });
    }

    /// Lays out a message's datagrams in `out`; takes its message id. With FEC, its repair
    /// datagrams go among them: the first ahead of the data (it tells the subscriber the
    /// message's size and checksum before any block), the others spread over the data's
    /// sends, so that a burst of loss takes some of each and the pacer spaces them. A
    /// lossless message's checksum alone rides in one of its data sends where it can
    /// ([`metadata_place`](Self::metadata_place)).
    fn load(&mut self, frame: &Bytes) -> Result<(), FragmentError> {
        self.clear();
        let data_size = self.fragmenter.max_datagram_size();
        if self.fec.is_none() {
            self.fragmenter.write_datagrams(frame, &mut self.out)?;
            self.runs.push(Run {
                end: self.out.len(),
                segment: data_size,
            });
            return Ok(());
        }
        let blocks = self.fragmenter.blocks_for(frame.len());
        let repairs = self.repairs(blocks);
        let mut work = std::mem::take(&mut self.work);
        work.data.clear();
        work.repair.clear();
        // The repair is the code's over the frame, so it is written first, under the id
        // the data will take (the fragmenter takes it when it writes them).
        let (fec, shards) = work.encoder.write(
            self.fragmenter.connection_id(),
            self.fragmenter.next_message_id(),
            frame,
            data_size - HEADER_LEN,
            repairs,
            &mut work.repair,
        );
        // A message of one datagram has nothing to announce: its copies follow it.
        let only_ahead = fec == 0 || (fec == 1 && blocks >= 2);
        let metadata_place = match (shards, fec) {
            (0, 1) => self.metadata_place(blocks, frame.len(), work.repair.len()),
            _ => None,
        };
        let written = if let Some(place) = metadata_place {
            self.load_with_metadata(frame, &work.repair, place)
        } else if only_ahead {
            // At most the one datagram ahead (a lossless link's checksum or single
            // repair): the data go straight after it, with no copy to lay them out.
            self.push_run(&work.repair, work.repair.len());
            let written = self.fragmenter.write_datagrams(frame, &mut self.out);
            self.runs.push(Run {
                end: self.out.len(),
                segment: data_size,
            });
            written
        } else {
            let written = self.fragmenter.write_datagrams(frame, &mut work.data);
            if written.is_ok() {
                self.interleave(&work.data, data_size, &work.repair, fec);
            }
            written
        };
        match written {
            Ok(blocks) => {
                self.repairs_sent += u64::from(shards);
                self.last_plan = Some((blocks, shards));
            }
            // Nothing of a message that cannot be sent may leave.
            Err(_) => self.clear(),
        }
        self.work = work;
        written.map(|_| ())
    }

    /// Where a lossless message's metadata datagram (its checksum, `meta_len` bytes) can
    /// leave in one segmented send with some of its `blocks` data blocks, rather than in a
    /// send of its own ahead of them (a send, and on loopback a wake of the subscriber,
    /// more than the link without FEC): as the short last segment of the first full send
    /// when the data take several, else after the last block sent first when that block
    /// goes alone (datagrams too large for two in a send: loopback); `None` if neither.
    /// The receiver has the checksum before the message completes either way.
    fn metadata_place(
        &self,
        blocks: usize,
        frame_len: usize,
        meta_len: usize,
    ) -> Option<ExtraPlace> {
        let data_size = self.fragmenter.max_datagram_size();
        if !self.segmenting || blocks < 2 {
            return None;
        }
        let per_send = max_send(data_size) / data_size;
        let with_meta = per_send * data_size + meta_len;
        if blocks > per_send && with_meta <= MAX_SEND && per_send < MAX_SEGMENTS {
            return u16::try_from(per_send).ok().map(ExtraPlace::AfterBlocks);
        }
        let last = self.last_datagram_len(frame_len, blocks);
        let last_alone = (blocks - 1).is_multiple_of(per_send);
        (last_alone && last >= meta_len && last + meta_len <= MAX_SEND)
            .then_some(ExtraPlace::AfterLastBlockFirst)
    }

    /// The size of the last data datagram of a frame of `frame_len` bytes in `blocks`
    /// blocks.
    fn last_datagram_len(&self, frame_len: usize, blocks: usize) -> usize {
        let payload = self.fragmenter.max_datagram_size() - HEADER_LEN;
        HEADER_LEN + frame_len - (blocks.max(1) - 1) * payload
    }

    /// Writes a lossless message's data blocks with its metadata datagram `meta` placed
    /// by [`metadata_place`](Self::metadata_place), as two runs: the send that carries the
    /// metadata as its short last segment, then the rest of the data.
    fn load_with_metadata(
        &mut self,
        frame: &[u8],
        meta: &[u8],
        place: ExtraPlace,
    ) -> Result<u16, FragmentError> {
        let data_size = self.fragmenter.max_datagram_size();
        let blocks = self
            .fragmenter
            .write_datagrams_with(frame, &mut self.out, meta, place)?;
        let (first_end, first_segment) = match place {
            ExtraPlace::AfterBlocks(n) => (usize::from(n) * data_size + meta.len(), data_size),
            ExtraPlace::AfterLastBlockFirst => {
                let last = self.last_datagram_len(frame.len(), usize::from(blocks));
                (last + meta.len(), last)
            }
        };
        self.runs.push(Run {
            end: first_end,
            segment: first_segment,
        });
        self.runs.push(Run {
            end: self.out.len(),
            segment: data_size,
        });
        Ok(blocks)
    }

    /// Lays out `data` (datagrams of `data_size` bytes, the last possibly shorter) and the
    /// `fec` equal-size datagrams of `repair`: one FEC datagram first, the others in groups
    /// after each of the data's sends.
    fn interleave(&mut self, data: &[u8], data_size: usize, repair: &[u8], fec: usize) {
        let repair_size = repair.len().checked_div(fec).unwrap_or(0);
        let per_send = if self.segmenting {
            max_send(data_size)
        } else {
            data_size
        };
        let sends = data.len().div_ceil(per_send).max(1);
        // A message of one datagram has nothing to announce: its copies follow it.
        let ahead = usize::from(data.len() > data_size).min(fec);
        let later = fec - ahead;
        let first = ahead * repair_size;
        self.push_run(&repair[..first], repair_size);
        for (i, chunk) in data.chunks(per_send).enumerate() {
            self.push_run(chunk, data_size);
            let (from, to) = (later * i / sends, later * (i + 1) / sends);
            let group = &repair[first + from * repair_size..first + to * repair_size];
            self.push_run(group, repair_size);
        }
    }

    /// Lays out, from the front of `frames`, messages of one datagram each and all of
    /// `frames[0]`'s size, as many as one segmented send carries. Returns how many.
    fn load_small(&mut self, frames: &[Bytes]) -> usize {
        let size = frames[0].len();
        if self.fragmenter.blocks_for(size) != 1 || self.repairs(1) > 0 {
            return 0;
        }
        let segment = HEADER_LEN + size;
        let most = max_send(segment) / segment;
        self.clear();
        let mut taken = 0;
        for frame in frames.iter().take(most).take_while(|f| f.len() == size) {
            if self
                .fragmenter
                .write_datagrams(frame, &mut self.out)
                .is_err()
            {
                break;
            }
            taken += 1;
        }
        self.runs.push(Run {
            end: self.out.len(),
            segment,
        });
        taken
    }

    /// The size of the datagrams of the run being sent.
    fn segment(&self) -> usize {
        self.runs
            .get(self.run)
            .map_or(self.fragmenter.max_datagram_size(), |run| run.segment)
    }

    /// How many bytes of `out` the next send carries: as many whole datagrams of the run
    /// being sent as one segmented send takes, or one datagram.
    fn next_send_len(&self) -> usize {
        let Some(run) = self.runs.get(self.run) else {
            return 0;
        };
        let left = run.end.saturating_sub(self.sent);
        if !self.segmenting {
            return left.min(run.segment);
        }
        // A governed link's burst: whole datagrams, at least one.
        let cap = self.send_cap.map_or(usize::MAX, |cap| {
            (cap / run.segment.max(1)).max(1) * run.segment.max(1)
        });
        // A run's last datagram may be shorter than its segment: the rest of the run goes
        // in one send when it fits one, the short datagram included. Sealed, each datagram
        // is OVERHEAD bytes longer on the wire.
        let most = match self.sealing {
            Some(_) => SEALED_SEGMENTS,
            None => MAX_SEGMENTS,
        };
        let fits = self.wire_len(left, run.segment) <= MAX_SEND
            && left.div_ceil(run.segment.max(1)) <= most;
        if fits && left <= cap {
            left
        } else {
            let sealed = self.wire_len(run.segment, run.segment);
            let datagrams = (max_send(sealed) / sealed.max(1)).min(most);
            left.min(datagrams * run.segment).min(cap)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udpros::{DatagramHeader, Opcode};
    use std::time::Duration;

    /// A link's settings with nothing on: no FEC, governor, cap or sealing.
    fn plain_config(udpros_peer: bool, segmenting: bool) -> UdpSenderConfig {
        UdpSenderConfig {
            udpros_peer,
            route_mtu: None,
            segmenting,
            loopback: false,
            fec: None,
            governor: None,
            max_rate: None,
            secure: None,
        }
    }

    fn sender(now: Instant, udpros_peer: bool, segmenting: bool) -> UdpSender {
        let config = plain_config(udpros_peer, segmenting);
        UdpSender::new(now, Fragmenter::new(7, 1500).unwrap(), config)
    }

    /// What a driver does when `poll_transmit` held the link: waits until `poll_timeout`
    /// (at once if that has passed) and looks at the reports if the link wants to.
    fn wait(tx: &mut UdpSender, now: Instant) -> Instant {
        let at = tx
            .poll_timeout()
            .expect("a sending link says when")
            .max(now);
        if tx.wants_reports(at) {
            tx.handle_reports(at, std::iter::empty());
        }
        at
    }

    /// Sends everything loaded, at the times pacing allows; returns the sends made.
    fn drain(tx: &mut UdpSender, mut now: Instant) -> (Vec<Vec<u8>>, Instant) {
        let mut sends = Vec::new();
        while tx.is_sending() {
            match tx.poll_transmit(now) {
                Some(t) => {
                    sends.push(t.datagrams.to_vec());
                    tx.on_transmitted(now);
                }
                None => now = wait(tx, now),
            }
        }
        (sends, now)
    }

    /// The user's cap toward a roscpp subscriber (no feedback): a 100 kB image leaves at
    /// the cap, in bursts of a datagram, and a queue the cap cannot carry within the
    /// freshness bound keeps its newest message only; uncapped, nothing is dropped.
    #[test]
    fn a_capped_link_paces_at_its_cap_and_sends_the_newest_whole() {
        let now = Instant::now();
        let config = UdpSenderConfig {
            udpros_peer: false,
            route_mtu: None,
            segmenting: true,
            loopback: false,
            fec: None,
            governor: None,
            max_rate: Some(500_000.0), // 4 Mbit/s
            secure: None,
        };
        let mut tx = UdpSender::new(now, Fragmenter::new(7, 1500).unwrap(), config);
        let image = Bytes::from(vec![1u8; 100_000]);
        assert_eq!(tx.push_queued(now, std::slice::from_ref(&image)), Ok(1));
        let (sends, done) = drain(&mut tx, now);
        assert!(
            sends.iter().all(|s| s.len() <= 1500),
            "a datagram per burst"
        );
        let took = done.duration_since(now).as_secs_f64();
        assert!(
            (0.19..0.21).contains(&took),
            "100 kB at 500 kB/s took {took} s"
        );
        let mut queued = vec![image.clone(); 5];
        assert_eq!(
            tx.drop_stale(&mut queued),
            4,
            "200 ms at the cap: one image"
        );
        assert_eq!((queued.len(), tx.stale()), (1, 4));
        let mut uncapped = sender(now, false, true);
        let mut queued = vec![image; 5];
        assert_eq!(uncapped.drop_stale(&mut queued), 0);
    }

    #[test]
    fn max_send_is_whole_segments_and_never_zero() {
        assert_eq!(max_send(1500), 43 * 1500);
        assert_eq!(max_send(500), 64 * 500, "at most 64 segments");
        assert_eq!(max_send(65_507), 65_507);
        assert!(max_send(0) > 0, "no division by zero");
    }

    #[test]
    fn a_camera_frame_goes_direct_in_two_segmented_sends_and_a_larger_one_queues() {
        let now = Instant::now();
        let mut tx = sender(now, true, true);
        assert!(tx.push_now(now, &Bytes::from(vec![3u8; 100_000])));
        assert!(!tx.push_now(now, &Bytes::from(vec![3u8; 10])), "busy");
        let (sends, _) = drain(&mut tx, now);
        assert_eq!(sends.len(), 2);
        assert!(sends.iter().all(|s| s.len() <= max_send(1500)));
        let larger = Bytes::from(vec![4u8; DIRECT_MAX_SENDS * max_send(1500) + 1]);
        assert!(!tx.push_now(now, &larger));
        // Without segmentation, eight datagrams at most.
        let mut plain = sender(now, true, false);
        assert!(plain.push_now(now, &Bytes::from(vec![0u8; 8 * 1492 - 4])));
        let (sends, _) = drain(&mut plain, now);
        assert_eq!(sends.len(), 8);
        assert!(!plain.push_now(now, &Bytes::from(vec![0u8; 8 * 1492 + 1])));
    }

    /// A secure link seals each datagram as it leaves, so its sends are smaller: the
    /// subscriber opens the first datagrams of a frame while the rest are sealed. Every
    /// datagram still opens, in order, to what a plain link would have sent.
    #[test]
    fn a_secure_link_sends_a_frame_in_sends_of_few_sealed_datagrams() {
        use crate::secure::{Cipher, LinkKeys, Mode};
        let now = Instant::now();
        let link = LinkSecurity {
            mode: Mode::Encrypt,
            cipher: Cipher::Aes256Gcm,
            keys: LinkKeys {
                downstream: [1; 32],
                upstream: [2; 32],
            },
        };
        let config = UdpSenderConfig {
            secure: Some(link.clone()),
            ..plain_config(true, true)
        };
        let fragmenter = Fragmenter::new(7, 1500 - OVERHEAD).unwrap();
        let mut tx = UdpSender::new(now, fragmenter, config);
        assert!(tx.push_now(now, &Bytes::from(vec![3u8; 100_000])));
        let (sends, _) = drain(&mut tx, now);
        let datagrams = 100_000usize.div_ceil(1500 - OVERHEAD - 8);
        assert_eq!(sends.len(), datagrams.div_ceil(SEALED_SEGMENTS));
        let (mut opener, _) = link.subscriber_end();
        let mut body = Vec::new();
        for send in &sends {
            assert!(send.len() <= SEALED_SEGMENTS * 1500, "{}", send.len());
            for sealed in send.chunks(1500) {
                let datagram = opener.open(sealed).expect("sealed by the link");
                body.extend_from_slice(&datagram[8..]);
            }
        }
        assert_eq!(opener.stats().opened as usize, datagrams);
        assert_eq!(body, vec![3u8; 100_000], "the frame whole, in order");
    }

    #[test]
    fn small_queued_messages_of_one_size_share_a_send_and_keep_their_ids() {
        let now = Instant::now();
        let mut tx = sender(now, true, true);
        let frames: Vec<Bytes> = (0..100u8).map(|i| Bytes::from(vec![i; 100])).collect();
        let taken = tx.push_queued(now, &frames).unwrap();
        assert_eq!(taken, MAX_SEGMENTS, "one send carries 64 datagrams");
        let (sends, _) = drain(&mut tx, now);
        assert_eq!(sends.len(), 1);
        assert_eq!(
            tx.push_queued(now, &frames[taken..]),
            Ok(100 - MAX_SEGMENTS)
        );
        let (more, _) = drain(&mut tx, now);
        let ids: Vec<u8> = sends
            .iter()
            .chain(&more)
            .flat_map(|send| send.chunks(108))
            .map(|d| DatagramHeader::parse(d).unwrap().message_id)
            .collect();
        assert_eq!(ids, (1..=100).collect::<Vec<u8>>());
    }

    #[test]
    fn a_large_message_to_roscpp_is_spread_at_a_rate_it_keeps_up_with() {
        let t0 = Instant::now();
        let mut tx = sender(t0, false, true);
        let frame = Bytes::from(vec![1u8; 1 << 20]);
        assert!(!tx.push_now(t0, &frame), "too large for the caller");
        assert_eq!(tx.push_queued(t0, std::slice::from_ref(&frame)), Ok(1));
        let (sends, done) = drain(&mut tx, t0);
        let took = done - t0;
        // Before the publishing period is known: 40 MB/s, after a 96 kB burst.
        assert!(took > Duration::from_millis(20), "{took:?}");
        assert!(took < Duration::from_millis(30), "{took:?}");
        assert!(sends.iter().all(|s| s.len() <= max_send(1500)));
    }

    /// On a lossless FEC link a message is its checksum datagram ahead of today's data
    /// datagrams, under the data's id; with a fixed quarter of repair, one repair datagram
    /// ahead and the rest among the data's sends; one-datagram messages get their copies
    /// after them.
    #[test]
    fn fec_datagrams_go_ahead_of_the_data_under_its_id_and_copies_after() {
        use crate::udpros::fec::{LinkFec, RepairRatio};
        let now = Instant::now();
        let with = |ratio: f64, datagram: usize| {
            let fec = LinkFec {
                floor: RepairRatio::new(ratio).unwrap(),
                target: None,
            };
            let config = UdpSenderConfig {
                udpros_peer: true,
                route_mtu: None,
                segmenting: true,
                loopback: false,
                fec: Some(fec),
                governor: None,
                max_rate: None,
                secure: None,
            };
            UdpSender::new(now, Fragmenter::new(7, datagram).unwrap(), config)
        };
        // Each datagram sent: which send carried it, its opcode, message id and length.
        let sent = |tx: &mut UdpSender, len: usize| {
            assert!(tx.push_now(now, &Bytes::from(vec![9u8; len])));
            let mut seen = Vec::new();
            let mut send = 0;
            while let Some(t) = tx.poll_transmit(now) {
                for datagram in t.datagrams.chunks(t.segment_size) {
                    let header = DatagramHeader::parse(datagram).unwrap();
                    seen.push((send, header.opcode, header.message_id, datagram.len()));
                }
                tx.on_transmitted(now);
                send += 1;
            }
            seen
        };
        const ETHERNET: usize = 1500 - 16;
        const LOOPBACK: usize = MAX_SEND - 16;
        let mut lossless = with(0.0, ETHERNET);
        for _ in 0..2 {
            // The checksum rides as the short last segment of the first full send: no
            // send more than without FEC.
            let seen = sent(&mut lossless, 100_000);
            let id = seen[0].2;
            assert_eq!(seen[0].1, Opcode::Data0);
            assert_eq!(seen.last().unwrap().0, 1, "two sends, as without FEC");
            let meta: Vec<_> = seen.iter().filter(|d| d.1 == Opcode::Repair).collect();
            assert_eq!(meta, [&(0, Opcode::Repair, id, 24)]);
            assert_eq!(seen.iter().position(|d| d.1 == Opcode::Repair), Some(44));
            assert!(seen.iter().all(|d| d.2 == id));
        }
        // One send carries all of a 10 kB message without FEC: its checksum goes ahead.
        let seen = sent(&mut lossless, 10_000);
        assert_eq!(seen[0].1, Opcode::Repair);
        assert_eq!(seen[1].1, Opcode::Data0);
        // On loopback each 64 kB datagram is a send: the last (short) block goes first,
        // with the checksum after it in the same send, then block 0.
        let seen = sent(&mut with(0.0, LOOPBACK), 100_000);
        let kinds: Vec<_> = seen.iter().map(|d| (d.0, d.1)).collect();
        assert_eq!(
            kinds,
            [(0, Opcode::DataN), (0, Opcode::Repair), (1, Opcode::Data0)]
        );
        let mut quarter = with(0.25, ETHERNET);
        let seen = sent(&mut quarter, 100_000);
        assert_eq!(seen[0].1, Opcode::Repair);
        assert_eq!(seen[1].1, Opcode::Data0);
        assert!(
            seen.last().unwrap().0 > 2,
            "repair among the data's sends: {seen:?}"
        );
        let seen = sent(&mut with(1.0, ETHERNET), 500);
        assert_eq!(
            seen[0].1,
            Opcode::Data0,
            "a small message first, its copy after"
        );
        assert_eq!(seen[1].1, Opcode::Repair);
    }

    #[test]
    fn a_refused_segmented_send_turns_segmentation_off_and_an_oversize_drops_one_message() {
        let now = Instant::now();
        let mut tx = sender(now, true, true);
        assert!(tx.push_now(now, &Bytes::from(vec![1u8; 10_000])));
        let first = tx.poll_transmit(now).unwrap().datagrams.len();
        assert!(first > 1500);
        assert_eq!(
            tx.on_send_error(SendError::Unsupported),
            AfterError::StoppedSegmenting
        );
        assert!(!tx.segmenting());
        assert_eq!(tx.poll_transmit(now).unwrap().datagrams.len(), 1500);
        assert_eq!(
            tx.on_send_error(SendError::TooLarge),
            AfterError::DroppedMessage { first: true }
        );
        assert!(!tx.is_sending(), "the rest of the message is dropped");
        assert!(tx.push_now(now, &Bytes::from(vec![1u8; 100])));
        assert_eq!(
            tx.on_send_error(SendError::TooLarge),
            AfterError::DroppedMessage { first: false }
        );
        assert_eq!(tx.on_send_error(SendError::Other), AfterError::Fatal);
    }

    #[test]
    fn heartbeats_and_goodbyes_go_to_udpros_peers_only_and_only_when_idle() {
        let t0 = Instant::now();
        let mut tx = sender(t0, true, true);
        assert_eq!(tx.poll_timeout(), Some(t0 + HEARTBEAT));
        assert_eq!(tx.poll_heartbeat(t0 + HEARTBEAT / 2), None);
        let ping = tx
            .poll_heartbeat(t0 + HEARTBEAT)
            .expect("idle for a period");
        assert_eq!(DatagramHeader::parse(&ping).unwrap().opcode, Opcode::Ping);
        // The heartbeat counts as sent: the next is a period after it, not at once.
        assert_eq!(tx.poll_timeout(), Some(t0 + HEARTBEAT * 2));
        assert_eq!(tx.poll_heartbeat(t0 + HEARTBEAT), None);
        let later = t0 + HEARTBEAT * 3;
        assert!(tx.push_now(later, &Bytes::from(vec![1u8; 100])));
        assert_eq!(tx.poll_heartbeat(later), None, "busy");
        tx.on_transmitted(later);
        assert_eq!(tx.poll_heartbeat(later + HEARTBEAT / 2), None, "just sent");
        assert_eq!(tx.poll_timeout(), Some(later + HEARTBEAT));
        let bye = tx.goodbye().unwrap();
        assert_eq!(DatagramHeader::parse(&bye).unwrap().opcode, Opcode::Err);
        let mut roscpp = sender(t0, false, true);
        assert_eq!(roscpp.poll_heartbeat(t0 + HEARTBEAT * 10), None);
        assert_eq!(
            roscpp.poll_timeout(),
            None,
            "no timer on an idle roscpp link"
        );
        assert_eq!(roscpp.goodbye(), None);
    }

    #[test]
    fn fragments_per_datagram_follow_the_route_mtu() {
        assert_eq!(fragments_per_datagram(None, 65_000), 1);
        assert_eq!(fragments_per_datagram(Some(1500), 1500), 2);
        assert_eq!(fragments_per_datagram(Some(1500), 1472), 1);
        assert_eq!(fragments_per_datagram(Some(576), 1500), 3);
    }

    /// Filler goes only from a governed link that probes (the simulated radio,
    /// `tests/governor_sim.rs`, shows it sent there and what it does); anywhere else
    /// nothing is loaded, and a link that is sending keeps what it sends.
    #[test]
    fn filler_is_loaded_only_by_a_probing_link() {
        let t0 = Instant::now();
        let mut plain = sender(t0, true, true);
        assert!(!plain.load_filler(t0), "not governed");
        assert!(!plain.is_sending() && !plain.discard_filler());
        let mut governed = governed_sender(t0, GovernorConfig::default());
        assert!(!governed.probing(), "a new link starts, it does not probe");
        assert!(!governed.load_filler(t0));
        assert_eq!(
            governed.push_queued(t0, &[Bytes::from(vec![1u8; 5_000])]),
            Ok(1)
        );
        assert!(!governed.discard_filler(), "a message is not filler");
        assert!(governed.is_sending() && !governed.is_filling());
        assert_eq!(governed.governor().unwrap().filler, 0);
    }

    /// A governed link to a udpros subscriber, opened at `t0`.
    fn governed_sender(t0: Instant, governor: GovernorConfig) -> UdpSender {
        let config = UdpSenderConfig {
            governor: Some(governor),
            ..plain_config(true, true)
        };
        UdpSender::new(t0, Fragmenter::new(7, 1500).unwrap(), config)
    }

    /// One timer covers a link: a governed link that is sending wakes its driver for its
    /// next look at the reports as well as for pacing; asking whether reports are wanted
    /// changes nothing, handing them over schedules the next look; an idle link's timer
    /// is its heartbeat.
    #[test]
    fn a_sending_governed_link_times_its_looks_at_the_reports() {
        let t0 = Instant::now();
        let mut tx = governed_sender(t0, GovernorConfig::default());
        let mut ungoverned = sender(t0, true, true);
        assert_eq!(tx.poll_timeout(), Some(t0 + HEARTBEAT));
        assert!(
            !ungoverned.wants_reports(t0 + HEARTBEAT),
            "no reports to read"
        );
        assert_eq!(
            tx.push_queued(t0, &[Bytes::from(vec![1u8; 200_000])]),
            Ok(1)
        );
        let big = [Bytes::from(vec![1u8; 200_000])];
        assert_eq!(ungoverned.push_queued(t0, &big), Ok(1));
        let mut now = t0;
        let mut looks = 0;
        while tx.is_sending() && looks < 1000 {
            match tx.poll_transmit(now) {
                Some(_) => tx.on_transmitted(now),
                None => {
                    now = tx
                        .poll_timeout()
                        .expect("a sending link says when")
                        .max(now);
                    if tx.wants_reports(now) {
                        assert!(tx.wants_reports(now), "asking is no look");
                        tx.handle_reports(now, std::iter::empty());
                        assert!(!tx.wants_reports(now));
                        looks += 1;
                    }
                }
            }
        }
        assert!(!tx.is_sending());
        assert!(looks >= 2, "{looks} looks while {:?} of pacing", now - t0);
        assert_eq!(tx.poll_timeout(), Some(now + HEARTBEAT));
        // An ungoverned link's timer while it sends is its pacing alone.
        while let Some(t) = ungoverned.poll_transmit(now) {
            let _ = t;
            ungoverned.on_transmitted(now);
        }
        assert!(ungoverned.poll_timeout().is_some_and(|at| at > now));
    }

    /// Reports that waited in the socket together (the link slept through a pause): the
    /// governor is given the newest, which tells of the queue now; handed over oldest
    /// first, the oldest was taken and the rest ignored as too soon after it.
    #[test]
    fn of_reports_read_together_the_governor_takes_the_newest() {
        use crate::udpros::feedback::Sample;
        let t0 = Instant::now();
        let mut tx = governed_sender(t0, GovernorConfig::default());
        assert_eq!(tx.push_queued(t0, &[Bytes::from(vec![1u8; 20_000])]), Ok(1));
        // When each block left (the governor's clock starts at t0).
        let mut sent_us = std::collections::BTreeMap::new();
        let mut now = t0;
        while tx.is_sending() {
            match tx.poll_transmit(now) {
                Some(t) => {
                    for d in t.datagrams.chunks(t.segment_size) {
                        let h = DatagramHeader::parse(d).unwrap();
                        let us = (now - t0).as_micros() as u32;
                        sent_us.insert(
                            if h.opcode == Opcode::Data0 {
                                0
                            } else {
                                h.block
                            },
                            us,
                        );
                    }
                    tx.on_transmitted(now);
                }
                None => now = wait(&mut tx, now),
            }
        }
        // A report of samples (block, µs queued), each arriving a millisecond after it left.
        let feedback_of = |sequence, samples: &[(u16, u32)]| {
            let feedback = Feedback {
                sequence,
                datagrams: 0,
                bytes: 0,
                samples: samples
                    .iter()
                    .map(|&(block, queued_us)| Sample {
                        message_id: 1,
                        block,
                        arrival_us: sent_us[&block] + 1_000 + queued_us,
                        bytes: u32::from(block + 1) * 1472,
                    })
                    .collect(),
            };
            let mut out = Vec::new();
            feedback.encode(7, &mut out);
            out
        };
        let older = feedback_of(1, &[(0, 0), (1, 0), (2, 0)]);
        let newest = feedback_of(2, &[(3, 0), (4, 8_000), (5, 8_000)]);
        assert!(tx.handle_reports(now, [older.as_slice(), newest.as_slice()]));
        let stats = tx.governor().unwrap();
        assert_eq!((stats.reports, stats.ignored), (1, 0));
        assert_eq!(
            stats.queue,
            Duration::from_millis(8),
            "the newest report's queue"
        );
    }

    /// An overuse found at a rate far above the path's: the link cuts and is silent for
    /// the governor's pause, paid at the new rate. Paid at the old one (the pause taken
    /// before the cut), a cut from 100 to 1 Mbit/s was silent a hundred times as long.
    #[test]
    fn the_pause_after_a_cut_lasts_the_pause_not_the_old_rate_over_the_new() {
        use crate::udpros::feedback::Sample;
        let t0 = Instant::now();
        let start = GovernorConfig {
            start_rate: 12.5e6,
            ..GovernorConfig::default()
        };
        let mut tx = governed_sender(t0, start);
        let mut now = t0;
        let drain = |tx: &mut UdpSender, now: &mut Instant| {
            let mut first = None;
            while tx.is_sending() {
                match tx.poll_transmit(*now) {
                    Some(_) => {
                        first.get_or_insert(*now);
                        tx.on_transmitted(*now);
                    }
                    None => *now = wait(tx, *now),
                }
            }
            first
        };
        assert_eq!(
            tx.push_queued(now, &[Bytes::from(vec![1u8; 20_000])]),
            Ok(1)
        );
        drain(&mut tx, &mut now);
        // The path delivered a datagram every 15 ms (~100 kB/s), its queue growing past
        // what the start's train waits for a measure within.
        let sent_us = (now - t0).as_micros() as u32;
        let samples = (0..6u16)
            .map(|block| Sample {
                message_id: 1,
                block,
                arrival_us: sent_us + 1_000 + u32::from(block) * 15_000,
                bytes: u32::from(block + 1) * 1472,
            })
            .collect();
        let mut report = Vec::new();
        Feedback {
            sequence: 1,
            datagrams: 0,
            bytes: 0,
            samples,
        }
        .encode(7, &mut report);
        now += Duration::from_millis(60);
        assert!(tx.handle_reports(now, [report.as_slice()]));
        let stats = tx.governor().unwrap();
        assert_eq!(stats.overuses, 1, "{stats:?}");
        assert!(stats.rate < 200e3, "cut to the path: {stats:?}");
        let reported_at = now;
        assert_eq!(tx.push_queued(now, &[Bytes::from(vec![2u8; 1_000])]), Ok(1));
        let resumed = drain(&mut tx, &mut now).unwrap() - reported_at;
        assert!(
            resumed >= Duration::from_millis(20)
                && resumed <= crate::udpros::governor::MAX_PAUSE + Duration::from_millis(20),
            "silent for {resumed:?}"
        );
    }
}
