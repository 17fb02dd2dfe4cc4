//! A UDPROS link without sockets: a [`UdpSender`] and a [`UdpReceiver`] joined by a
//! simulated path that loses, duplicates, reorders and delays datagrams, on a fake clock,
//! driven the way the library's tokio drivers drive them. The link's
//! property tests drive it; nothing here reads a clock or opens a socket.

#![allow(dead_code)] // each test binary uses part of the harness

use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use udpros_core::freshness::Cadence;
use udpros_core::header::ConnectionHeader;
use udpros_core::link::AllowedSources;
use udpros_core::link_setup::{receiver_config, PathFacts, SenderTerms};
use udpros_core::negotiation::{UdpPlan, UdprosOffer};
use udpros_core::topic::UDPROS_PEER_FIELD;
use udpros_core::udpros::fec::{block_payload, FecPolicy};
use udpros_core::udpros::feedback::{Feedback, FEEDBACK_FIELD, FEEDBACK_VERSION};
use udpros_core::udpros::governor::GovernorConfig;
use udpros_core::udpros::{ReassemblerConfig, ReceiverEvent, UdpReceiver, UdpSender, HEADER_LEN};

/// A small deterministic generator (xorshift64*), seeded by the property test.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// What the simulated path does to each datagram.
#[derive(Debug, Clone, Copy)]
pub struct PathConfig {
    /// Chance a datagram is lost.
    pub loss: f64,
    /// Chance a datagram arrives twice.
    pub duplication: f64,
    /// Chance a datagram is held back by up to `reorder_by`, so later ones overtake it.
    pub reordering: f64,
    pub reorder_by: Duration,
    /// One-way delay of every datagram.
    pub delay: Duration,
    /// Mean length of a run of lost datagrams (Gilbert-Elliott style; 1 for independent
    /// losses), at the same average `loss`.
    pub mean_burst: f64,
}

impl PathConfig {
    pub fn clean() -> PathConfig {
        PathConfig {
            loss: 0.0,
            duplication: 0.0,
            reordering: 0.0,
            reorder_by: Duration::ZERO,
            delay: Duration::from_millis(1),
            mean_burst: 1.0,
        }
    }

    /// 5 % loss, 5 % duplication and 5 % reordering by up to 20 ms.
    pub fn lossy() -> PathConfig {
        PathConfig {
            loss: 0.05,
            duplication: 0.05,
            reordering: 0.05,
            reorder_by: Duration::from_millis(20),
            delay: Duration::from_millis(5),
            mean_burst: 1.0,
        }
    }

    /// Only random loss: `loss` of the datagrams, in runs of `mean_burst` on average.
    pub fn losing(loss: f64, mean_burst: f64) -> PathConfig {
        PathConfig {
            loss,
            mean_burst,
            ..PathConfig::clean()
        }
    }
}

/// Datagrams in flight, by arrival time (ties in sending order).
#[derive(Debug)]
pub struct Path {
    config: PathConfig,
    rng: Rng,
    in_flight: BTreeMap<(Instant, u64), Bytes>,
    sent: u64,
    /// Datagrams still to lose in the current run of losses.
    burst_left: u32,
    /// Datagrams offered to the path, and of them lost.
    pub offered: u64,
    pub lost: u64,
    /// Bytes offered to the path (UDP payloads), and of them delivered.
    pub offered_bytes: u64,
    pub delivered_bytes: u64,
    /// Datagrams for which this is true are lost, besides the random losses.
    pub drop_when: Option<fn(&[u8]) -> bool>,
    /// A narrow stretch of the path, ahead of the losses.
    pub bottleneck: Option<Bottleneck>,
    /// The subscriber reads what arrived only every so often (a busy reader, a batch
    /// per wake): each datagram arrives at the next read after it came.
    pub reads_every: Option<Duration>,
    /// The first read's moment, from which reads are counted.
    first_read: Option<Instant>,
}

/// A radio or a tether in front of its queue, as `tc tbf` models one: datagrams leave at
/// `rate` once the bucket's tokens are spent (a full bucket, [`Bottleneck::burst`] bytes,
/// lets a burst through at once after a pause, as tbf does), wait in a queue that holds
/// `queue` of it, and are dropped when it is full.
#[derive(Debug, Clone)]
pub struct Bottleneck {
    /// Bytes per second, and the later rates: `(from, rate)`, `from` counted from the
    /// first datagram.
    pub rate: f64,
    pub steps: Vec<(Duration, f64)>,
    /// How much of the rate the queue holds.
    pub queue: Duration,
    /// Bytes each datagram costs on the wire besides its payload (IP, UDP, Ethernet).
    pub overhead: usize,
    /// The bucket's size, bytes: what leaves at once after a pause.
    pub burst: f64,
    /// Tokens in the bucket when the last datagram left.
    tokens: f64,
    /// When the queue will be empty.
    free_at: Option<Instant>,
    started: Option<Instant>,
    /// Datagrams the full queue dropped.
    pub dropped: u64,
}

impl Bottleneck {
    /// A link of `bits_per_sec` as `tc tbf rate … burst 16kb latency …` sets one up for
    /// UDP over IPv4 on Ethernet: its queue holds `latency` of the rate and the burst.
    pub fn new(bits_per_sec: f64, latency: Duration) -> Bottleneck {
        let rate = bits_per_sec / 8.0;
        Bottleneck {
            rate,
            steps: Vec::new(),
            queue: latency + Duration::from_secs_f64(16_384.0 / rate),
            overhead: 42,
            burst: 16_384.0,
            tokens: 16_384.0,
            free_at: None,
            started: None,
            dropped: 0,
        }
    }

    /// The rate changes to `bits_per_sec` at `from` after the first datagram.
    pub fn step(mut self, from: Duration, bits_per_sec: f64) -> Bottleneck {
        self.steps.push((from, bits_per_sec / 8.0));
        self
    }

    /// The rate at `now`, bytes per second.
    pub fn rate_at(&mut self, now: Instant) -> f64 {
        let started = *self.started.get_or_insert(now);
        let elapsed = now.saturating_duration_since(started);
        self.steps
            .iter()
            .rfind(|(from, _)| *from <= elapsed)
            .map_or(self.rate, |(_, rate)| *rate)
    }

    /// A datagram of `len` bytes reaches the queue at `now`: when it leaves the link, or
    /// `None` when the queue is full.
    pub fn enqueue(&mut self, now: Instant, len: usize) -> Option<Instant> {
        let rate = self.rate_at(now);
        let backlog = self.backlog(now);
        if backlog > self.queue {
            self.dropped += 1;
            return None;
        }
        // It leaves once the one before it has and the bucket holds its bytes; the bucket
        // fills at the rate meanwhile, up to its size.
        let ready = now + backlog;
        let last = self.free_at.unwrap_or(ready);
        let refill = rate * ready.saturating_duration_since(last).as_secs_f64();
        let tokens = (self.tokens + refill).min(self.burst);
        let len = (len + self.overhead) as f64;
        let wait = Duration::from_secs_f64((len - tokens).max(0.0) / rate);
        let leaves = ready + wait;
        self.tokens = tokens + rate * wait.as_secs_f64() - len;
        self.free_at = Some(leaves);
        Some(leaves)
    }

    /// How long a datagram arriving at `now` waits behind the queue.
    pub fn backlog(&self, now: Instant) -> Duration {
        self.free_at
            .map_or(Duration::ZERO, |at| at.saturating_duration_since(now))
    }
}

impl Path {
    pub fn new(config: PathConfig, seed: u64) -> Path {
        Path {
            config,
            rng: Rng::new(seed),
            in_flight: BTreeMap::new(),
            sent: 0,
            burst_left: 0,
            offered: 0,
            lost: 0,
            offered_bytes: 0,
            delivered_bytes: 0,
            drop_when: None,
            bottleneck: None,
            reads_every: None,
            first_read: None,
        }
    }

    /// Whether the next datagram is lost: runs start with chance `loss / mean_burst` and
    /// go on with chance `1 - 1 / mean_burst` per datagram (a geometric run length).
    fn loses(&mut self) -> bool {
        let mean = self.config.mean_burst.max(1.0);
        if self.burst_left > 0 {
            self.burst_left -= 1;
            return true;
        }
        if !self.rng.chance(self.config.loss / mean) {
            return false;
        }
        while self.rng.chance(1.0 - 1.0 / mean) && self.burst_left < 1000 {
            self.burst_left += 1;
        }
        true
    }

    pub fn send(&mut self, now: Instant, datagram: Bytes) {
        self.offered += 1;
        self.offered_bytes += datagram.len() as u64;
        let mut now = now;
        if let Some(bottleneck) = self.bottleneck.as_mut() {
            match bottleneck.enqueue(now, datagram.len()) {
                Some(leaves) => now = leaves,
                None => {
                    self.lost += 1;
                    return;
                }
            }
        }
        if self.loses() || self.drop_when.is_some_and(|drop| drop(&datagram)) {
            self.lost += 1;
            return;
        }
        self.delivered_bytes += datagram.len() as u64;
        let copies = if self.rng.chance(self.config.duplication) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut at = now + self.config.delay;
            if self.rng.chance(self.config.reordering) {
                let by = self.config.reorder_by.as_micros() as u64;
                at += Duration::from_micros(self.rng.below(by + 1));
            }
            if let Some(every) = self.reads_every {
                let first = *self.first_read.get_or_insert(at);
                let reads = (at - first).as_nanos().div_ceil(every.as_nanos());
                at = first + every * reads as u32;
            }
            self.sent += 1;
            self.in_flight.insert((at, self.sent), datagram.clone());
        }
    }

    /// The datagrams that have arrived by `now`, in arrival order.
    pub fn arrived(&mut self, now: Instant) -> Vec<Bytes> {
        let later = self.in_flight.split_off(&(now, u64::MAX));
        let arrived = std::mem::replace(&mut self.in_flight, later);
        arrived.into_values().collect()
    }

    pub fn next_arrival(&self) -> Option<Instant> {
        self.in_flight.keys().next().map(|(at, _)| *at)
    }
}

/// Where the simulated publisher sends from.
pub fn publisher_addr() -> SocketAddr {
    "10.0.0.2:4000".parse().unwrap()
}

/// The receiver a udpros subscriber makes for a udpros publisher at [`publisher_addr`].
pub fn receiver(now: Instant, connection_id: u32, max_datagram: usize) -> UdpReceiver {
    receiver_with(now, connection_id, max_datagram, false)
}

/// The data datagram size on a link of `max_datagram`, with or without FEC.
pub fn data_datagram(max_datagram: usize, fec: bool) -> usize {
    HEADER_LEN + block_payload(max_datagram, fec)
}

/// [`receiver`], on a link that agreed on FEC when `fec`.
pub fn receiver_with(
    now: Instant,
    connection_id: u32,
    max_datagram: usize,
    fec: bool,
) -> UdpReceiver {
    let policy = if fec {
        FecPolicy::default()
    } else {
        FecPolicy::Off
    };
    let terms = SenderTerms {
        connection_id,
        ..settle(policy, max_datagram, None)
    };
    receiver_for(now, &terms, policy)
}

/// What a udpros publisher with policy `fec` (and `governor`, if the link is governed)
/// settles with a subscriber of the same policy, as the library's publisher settles it.
pub fn settle(
    fec: FecPolicy,
    max_datagram: usize,
    governor: Option<GovernorConfig>,
) -> SenderTerms {
    let mut offer = fec.ask(ConnectionHeader::new());
    offer.insert(UDPROS_PEER_FIELD, "1");
    if governor.is_some() {
        offer.insert(FEEDBACK_FIELD, FEEDBACK_VERSION);
    }
    let plan = UdpPlan::for_offer(&UdprosOffer {
        header: offer.clone(),
        host: publisher_addr().ip().to_string(),
        port: 4001,
        max_datagram,
        ipv6_only: false,
    });
    let path = PathFacts {
        route_payload: None,
        route_mtu: None,
        loopback: false,
    };
    SenderTerms::settle(&plan, &offer, path, &fec, governor, 7, None)
}

/// The sender of a link settled on `terms`, with segmented sends.
pub fn sender_for(now: Instant, terms: &SenderTerms) -> UdpSender {
    terms
        .sender(now, true, false)
        .expect("a datagram size the link can use")
}

/// The receiver a subscriber with policy `fec` makes of the answer to `terms`, for a
/// publisher at [`publisher_addr`], as the library's subscriber makes it.
pub fn receiver_for(now: Instant, terms: &SenderTerms, fec: FecPolicy) -> UdpReceiver {
    receiver_from(now, terms, fec, publisher_addr())
}

/// [`receiver_for`] a publisher sending from `publisher`.
pub fn receiver_from(
    now: Instant,
    terms: &SenderTerms,
    fec: FecPolicy,
    publisher: SocketAddr,
) -> UdpReceiver {
    let mut answer = ConnectionHeader::new();
    for (field, value) in terms.answer_fields() {
        answer.insert(field, value);
    }
    let sources = AllowedSources::new(vec![publisher.ip()], Some(publisher.port()));
    let config = receiver_config(
        &answer,
        terms.max_datagram,
        terms.connection_id as i32,
        &fec,
        sources,
        ReassemblerConfig::default().max_message_size,
        terms.secure.clone(),
    );
    UdpReceiver::new(now, config)
}

/// A message body that names itself: `id` in its first 8 bytes, then bytes derived from
/// it, so a delivered body tells which message it was and whether it is whole.
pub fn body(id: u64, len: usize) -> Vec<u8> {
    let mut body = id.to_le_bytes().to_vec();
    body.extend(
        (0..len.saturating_sub(8)).map(|i| (id as usize).wrapping_mul(31).wrapping_add(i) as u8),
    );
    body.truncate(len.max(8));
    body
}

/// The id of a body made by [`body`], if the rest of it is what that id makes.
pub fn check_body(delivered: &[u8]) -> Option<u64> {
    let id = u64::from_le_bytes(delivered.get(..8)?.try_into().ok()?);
    (body(id, delivered.len()) == delivered).then_some(id)
}

/// What rewrites feedback on its way back: given the time and the report.
pub type Tamper = Box<dyn FnMut(Instant, &mut Feedback)>;

/// A publisher and a subscriber over a [`Path`], on a fake clock.
pub struct Pair {
    /// When the link began.
    pub started: Instant,
    pub now: Instant,
    pub sender: UdpSender,
    /// Messages the publisher queued for the link's task.
    queue: VecDeque<Bytes>,
    pub path: Path,
    pub receiver: UdpReceiver,
    /// What the receiver produced, in order, with when.
    pub events: Vec<(Instant, ReceiverEvent)>,
    /// When a datagram last reached the receiver.
    pub last_arrival: Option<Instant>,
    /// The publisher heartbeats when idle (false: it has gone silent).
    pub heartbeats: bool,
    /// Loss reports and feedback the subscriber sent.
    pub reports: u64,
    /// Rewrites each feedback report on its way back (a forger at the subscriber's port),
    /// given the report and the time; `None` passes it as it is.
    pub tamper: Option<Tamper>,
    /// The link holds its newest message back for a fresher one, as the library's link
    /// task does ([`Pair::hold_for_fresher`]); `None`: it sends each as it comes.
    hold: Option<Hold>,
}

/// How a [`Pair`] holds a message back for a fresher one.
#[derive(Debug)]
struct Hold {
    cadence: Cadence,
    /// When each queued message was published (beside `Pair::queue`).
    published: VecDeque<Instant>,
    /// While a probing link holds: sends filler (false: silent, or no hold at all).
    filler: bool,
    /// The publish time of the newest message held for, and until when.
    held: Option<(Instant, Instant)>,
}

impl Pair {
    /// A link between udpros peers: `max_datagram` negotiated, segmented sends.
    pub fn new(path: PathConfig, seed: u64, max_datagram: usize) -> Pair {
        Pair::with_fec(path, seed, max_datagram, FecPolicy::Off)
    }

    /// A link between udpros peers that both have the policy `fec`, settled as a
    /// publisher settles it; the subscriber's loss reports reach the publisher.
    pub fn with_fec(path: PathConfig, seed: u64, max_datagram: usize, fec: FecPolicy) -> Pair {
        let now = Instant::now();
        let terms = settle(fec, max_datagram, None);
        Pair {
            started: now,
            now,
            sender: sender_for(now, &terms),
            queue: VecDeque::new(),
            path: Path::new(path, seed),
            receiver: receiver_for(now, &terms, fec),
            events: Vec::new(),
            last_arrival: None,
            heartbeats: true,
            reports: 0,
            tamper: None,
            hold: None,
        }
    }

    /// From now on the link holds its newest message back when a fresher one is due soon
    /// ([`Cadence::hold`]), as the library's link task does. While its governor probes it
    /// then sends filler if `filler` (the library's way), else it does not hold at all.
    pub fn hold_for_fresher(&mut self, filler: bool) {
        self.hold = Some(Hold {
            cadence: Cadence::new(),
            published: VecDeque::new(),
            filler,
            held: None,
        });
    }

    /// Whether the link holds back what is queued at `now`, loading filler meanwhile
    /// where it does. Each newest message is judged once, as the link task judges what it
    /// takes from its queue.
    fn holding(&mut self) -> bool {
        let now = self.now;
        let Some(hold) = self.hold.as_mut() else {
            return false;
        };
        if self.sender.is_sending() && !self.sender.is_filling() {
            // Busy: what is queued is judged when the link takes it.
            return false;
        }
        let (Some(&newest), Some(frame)) = (hold.published.back(), self.queue.back()) else {
            return false;
        };
        let until = match hold.held {
            Some((held, until)) if held == newest => until,
            _ => {
                let judged = if self.sender.probing() && !hold.filler {
                    None
                } else {
                    let send_time = self.sender.send_time(frame.len());
                    send_time.and_then(|t| hold.cadence.hold(now, now, newest, t))
                };
                let until = judged.unwrap_or(now);
                hold.held = Some((newest, until));
                until
            }
        };
        if now >= until {
            return false;
        }
        if hold.filler {
            self.sender.load_filler(now);
        }
        true
    }

    /// A link between udpros peers whose subscriber sends feedback to the publisher's
    /// governor (default limits), over `path` through `bottleneck`.
    pub fn governed(path: PathConfig, bottleneck: Bottleneck, seed: u64) -> Pair {
        let mut pair = Pair::new(path, seed, 1472);
        pair.govern(FecPolicy::Off);
        pair.path.bottleneck = Some(bottleneck);
        pair
    }

    /// Makes the link a governed one between peers that both have the policy `fec`: a
    /// new sender and receiver, as at the link's start.
    pub fn govern(&mut self, fec: FecPolicy) {
        let terms = settle(fec, 1472, Some(GovernorConfig::default()));
        self.sender = sender_for(self.now, &terms);
        self.receiver = receiver_for(self.now, &terms, fec);
    }

    /// Queues one message body for the link's task.
    pub fn send(&mut self, body: &[u8]) {
        let mut frame = (body.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(body);
        self.queue.push_back(Bytes::from(frame));
        let now = self.now;
        if let Some(hold) = self.hold.as_mut() {
            hold.cadence.published(now);
            hold.published.push_back(now);
            // The fresher message a hold waited for ends it, and goes without a hold of
            // its own (the link task takes it with the one held).
            if hold.held.is_some_and(|(_, until)| until > now) {
                hold.held = Some((now, now));
            }
        }
        self.transmit();
    }

    /// What the link's task does at `now`: loads queued messages and sends what pacing
    /// lets go, each segmented send cut into its datagrams.
    fn transmit(&mut self) {
        loop {
            let ready = !self.queue.is_empty() && !self.holding();
            if ready {
                // Filler that has not left gives way to what was held.
                self.sender.discard_filler();
            }
            if ready && !self.sender.is_sending() {
                // What the library's link task does with what it takes from its queue.
                let mut taken: Vec<Bytes> = self.queue.drain(..).collect();
                let stale = self.sender.drop_stale(&mut taken);
                self.queue.extend(taken);
                let (front, _) = self.queue.as_slices();
                let taken = self.sender.push_queued(self.now, front).unwrap();
                self.queue.drain(..taken);
                if let Some(hold) = self.hold.as_mut() {
                    hold.published.drain(..stale + taken);
                }
            }
            let Some(t) = self.sender.poll_transmit(self.now) else {
                return;
            };
            let datagrams: Vec<Bytes> = t
                .datagrams
                .chunks(t.segment_size)
                .map(Bytes::copy_from_slice)
                .collect();
            for datagram in datagrams {
                self.path.send(self.now, datagram);
            }
            self.sender.on_transmitted(self.now);
        }
    }

    /// Runs the link until `until`: arrivals, paced sends, heartbeats and the receiver's
    /// timers, each at its own time.
    pub fn run_until(&mut self, until: Instant) {
        loop {
            // A publisher gone silent sends nothing more once idle.
            let sender_timer = self
                .sender
                .poll_timeout()
                .filter(|_| self.heartbeats || self.sender.is_sending());
            let next = [
                self.path.next_arrival(),
                Some(self.receiver.poll_timeout()),
                sender_timer,
                self.hold
                    .as_ref()
                    .and_then(|h| h.held)
                    .map(|(_, until)| until)
                    .filter(|until| *until > self.now),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap();
            if next > until {
                self.now = until;
                return;
            }
            self.now = self.now.max(next);
            self.transmit();
            if self.heartbeats {
                if let Some(ping) = self.sender.poll_heartbeat(self.now) {
                    self.path.send(self.now, Bytes::copy_from_slice(&ping));
                }
            }
            if self.sender.wants_reports(self.now) {
                // What the driver reads of its socket: the reports went back at once
                // below, so there is nothing left; the look is scheduled again.
                self.sender.handle_reports(self.now, std::iter::empty());
            }
            for datagram in self.path.arrived(self.now) {
                self.receiver.handle(self.now, publisher_addr(), datagram);
                self.last_arrival = Some(self.now);
            }
            // Reports go back at once: the way back is not what is tested.
            while let Some(mut report) = self.receiver.poll_transmit(self.now) {
                self.reports += 1;
                if let Some(tamper) = self.tamper.as_mut() {
                    if let Some(mut feedback) = Feedback::parse(&report, 7) {
                        tamper(self.now, &mut feedback);
                        report.clear();
                        feedback.encode(7, &mut report);
                    }
                }
                self.sender.handle_report(self.now, &report);
            }
            if self.receiver.poll_timeout() <= self.now {
                self.receiver.handle_timeout(self.now);
            }
            let now = self.now;
            self.events
                .extend(std::iter::from_fn(|| self.receiver.poll_event()).map(|e| (now, e)));
        }
    }

    /// Runs the link for `d` of fake time.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(self.now + d);
    }

    /// Runs one more second of fake time (for what is in flight) and returns the ids of
    /// every body delivered, each checked whole.
    pub fn finish(&mut self) -> Vec<u64> {
        self.run_for(Duration::from_secs(1));
        self.delivered()
            .map(|b| check_body(b).expect("a delivered message is whole"))
            .collect()
    }

    /// The bodies delivered so far.
    pub fn delivered(&self) -> impl Iterator<Item = &Bytes> {
        self.events.iter().filter_map(|(_, e)| match e {
            ReceiverEvent::Message(body) => Some(body),
            _ => None,
        })
    }

    /// When the link was declared dead, and why.
    pub fn dead(&self) -> Option<(Instant, udpros_core::link::Dead)> {
        self.events.iter().find_map(|(at, e)| match e {
            ReceiverEvent::Dead(dead) => Some((*at, *dead)),
            _ => None,
        })
    }
}
