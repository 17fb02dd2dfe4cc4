//! One subscriber's UDPROS link, receive side, as one object: which sources belong to the
//! link, reassembly, liveness and the link's counters behind "datagrams and `now` in;
//! events and a deadline out". The driver owns the socket and the clock and does nothing
//! else:
//!
//! - after reading datagrams, call [`UdpReceiver::handle`] for each, then drain
//!   [`UdpReceiver::poll_event`];
//! - keep one timer at [`UdpReceiver::poll_timeout`] (it may move after `handle` or
//!   `handle_timeout`); when it fires call [`UdpReceiver::handle_timeout`], then drain
//!   [`UdpReceiver::poll_event`] again. An early `handle_timeout` does nothing, so a driver
//!   may keep a timer that only moves earlier and is re-armed when it fires (cheaper than
//!   following every move: a message in reassembly moves the deadline twice);
//! - after a [`ReceiverEvent::Closed`] or [`ReceiverEvent::Dead`] the link is over: drop
//!   the receiver.

use super::{Event, Reassembler, ReassemblerConfig, UdpStats};
use crate::link::{AllowedSources, Dead, UdpLiveness};
use bytes::Bytes;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

/// What a [`UdpReceiver`] needs to know about its link.
#[derive(Debug, Clone)]
pub struct UdpReceiverConfig {
    /// How messages are reassembled: size limit, connection id, block size.
    pub reassembler: ReassemblerConfig,
    /// Where the publisher's datagrams may come from.
    pub sources: AllowedSources,
    /// The publisher is udpros and heartbeats an idle link, so silence means it is gone
    /// (roscpp sends no heartbeats: its links are judged by their messages only).
    pub expects_heartbeats: bool,
}

/// What happened on the link, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiverEvent {
    /// A whole message body (without its length prefix).
    Message(Bytes),
    /// The first datagram from a source that is not the publisher: worth one warning.
    /// Later ones are only counted (in [`UdpStats::foreign`]).
    Stranger(SocketAddr),
    /// The publisher closed the link (an ERR datagram).
    Closed,
    /// The link is dead; see [`Dead`] for why.
    Dead(Dead),
}

/// Events a receiver holds before the driver drains them: a read batch yields at most a
/// few dozen, and a driver that drains after every batch never comes near this.
const MAX_PENDING_EVENTS: usize = 4096;

/// One subscriber's UDPROS link, receive side (see the module documentation for the order
/// of calls).
#[derive(Debug)]
pub struct UdpReceiver {
    sources: AllowedSources,
    reassembler: Reassembler,
    liveness: UdpLiveness,
    /// The source of the last accepted datagram: the same one needs no second look.
    peer: Option<SocketAddr>,
    /// Datagrams from sources that are not the publisher.
    strangers: u64,
    /// Reads the socket could not hand over whole.
    truncated: u64,
    events: VecDeque<ReceiverEvent>,
    /// Messages dropped because the driver did not drain events.
    events_dropped: u64,
}

impl UdpReceiver {
    /// A link that starts at `now`.
    pub fn new(now: Instant, config: UdpReceiverConfig) -> UdpReceiver {
        UdpReceiver {
            sources: config.sources,
            reassembler: Reassembler::new(config.reassembler),
            liveness: UdpLiveness::new(now, config.expects_heartbeats),
            peer: None,
            strangers: 0,
            truncated: 0,
            events: VecDeque::new(),
            events_dropped: 0,
        }
    }

    /// Takes one datagram that arrived at `now` from `from`.
    pub fn handle(&mut self, now: Instant, from: SocketAddr, datagram: Bytes) {
        if self.peer != Some(from) {
            if !self.sources.allows(from) {
                self.strangers += 1;
                if self.strangers == 1 {
                    self.push(ReceiverEvent::Stranger(from));
                }
                return;
            }
            self.peer = Some(from);
        }
        match self.reassembler.handle(now, datagram) {
            Some(Event::Message(body)) => {
                self.liveness.heard(now);
                self.push(ReceiverEvent::Message(body));
            }
            Some(Event::Ping) => self.liveness.heard(now),
            Some(Event::Closed) => self.push(ReceiverEvent::Closed),
            None => {}
        }
    }

    /// Counts `reads` the socket could not hand over whole (a datagram larger than the
    /// buffer): they are malformed datagrams as far as the link is concerned.
    pub fn on_truncated(&mut self, reads: u64) {
        self.truncated += reads;
    }

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<ReceiverEvent> {
        self.events.pop_front()
    }

    /// When [`UdpReceiver::handle_timeout`] is due: the earlier of the liveness check and
    /// the deadline of a message in reassembly.
    pub fn poll_timeout(&self) -> Instant {
        let check = self.liveness.poll_timeout();
        self.reassembler
            .poll_timeout()
            .map_or(check, |due| due.min(check))
    }

    /// Runs what is due at `now`: gives up incomplete messages past their deadline, and
    /// checks liveness (an [`ReceiverEvent::Dead`] when the link is dead).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.reassembler.handle_timeout(now);
        let stats = self.reassembler.stats();
        let (completed, incomplete) = (stats.messages, stats.incomplete);
        if let Some(dead) = self.liveness.handle_timeout(now, completed, incomplete) {
            self.push(ReceiverEvent::Dead(dead));
        }
    }

    /// The link's counters, as `getBusStats` reports them: the reassembler's, with
    /// datagrams from strangers counted as foreign and truncated reads as malformed.
    pub fn stats(&self) -> UdpStats {
        let mut stats = *self.reassembler.stats();
        stats.foreign += self.strangers;
        stats.malformed += self.truncated;
        stats
    }

    /// Messages dropped because events were not drained (a driver that drains after each
    /// read never loses one).
    pub fn events_dropped(&self) -> u64 {
        self.events_dropped
    }

    /// Where the publisher's datagrams come from, once one arrived (`getBusInfo` shows it).
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// Bytes held for messages in reassembly and events not yet drained.
    pub fn memory(&self) -> usize {
        let pending: usize = self
            .events
            .iter()
            .map(|e| match e {
                ReceiverEvent::Message(body) => body.len(),
                _ => 0,
            })
            .sum();
        self.reassembler.memory() + pending
    }

    fn push(&mut self, event: ReceiverEvent) {
        if self.events.len() >= MAX_PENDING_EVENTS {
            // A driver that never drains must not make the link grow: the oldest message
            // goes, as a subscriber's queue drops its oldest.
            if let Some(at) = self
                .events
                .iter()
                .position(|e| matches!(e, ReceiverEvent::Message(_)))
            {
                self.events.remove(at);
                self.events_dropped += 1;
            } else {
                return;
            }
        }
        self.events.push_back(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{INCOMPLETE_BEFORE_FAILURE, LIVENESS_TIMEOUT};
    use crate::udpros::Fragmenter;
    use std::time::Duration;

    const PUBLISHER: &str = "10.0.0.2:4000";

    fn receiver(now: Instant, heartbeats: bool) -> UdpReceiver {
        UdpReceiver::new(
            now,
            UdpReceiverConfig {
                reassembler: ReassemblerConfig {
                    connection_id: Some(7),
                    block_payload: Some(1492),
                    ..ReassemblerConfig::default()
                },
                sources: AllowedSources::new(vec!["10.0.0.2".parse().unwrap()], Some(4000)),
                expects_heartbeats: heartbeats,
            },
        )
    }

    fn datagrams(fragmenter: &mut Fragmenter, body: &[u8]) -> Vec<Bytes> {
        let mut frame = (body.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(body);
        let fragments = fragmenter.fragment(&Bytes::from(frame)).unwrap();
        fragments.map(|d| Bytes::from(d.to_vec())).collect()
    }

    fn events(rx: &mut UdpReceiver) -> Vec<ReceiverEvent> {
        std::iter::from_fn(|| rx.poll_event()).collect()
    }

    #[test]
    fn messages_from_the_publisher_pass_and_a_stranger_is_said_once_and_counted() {
        let now = Instant::now();
        let mut rx = receiver(now, true);
        let mut tx = Fragmenter::new(7, 1500).unwrap();
        let publisher: SocketAddr = PUBLISHER.parse().unwrap();
        let stranger: SocketAddr = "10.0.0.9:4000".parse().unwrap();
        for d in datagrams(&mut tx, &[1; 4000]) {
            rx.handle(now, stranger, d.clone());
            rx.handle(now, publisher, d);
        }
        let got = events(&mut rx);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], ReceiverEvent::Stranger(stranger));
        assert_eq!(got[1], ReceiverEvent::Message(Bytes::from(vec![1; 4000])));
        let stats = rx.stats();
        assert_eq!((stats.messages, stats.foreign), (1, 3));
        assert_eq!(rx.peer(), Some(publisher));
        rx.on_truncated(2);
        assert_eq!(rx.stats().malformed, 2);
    }

    #[test]
    fn the_publisher_closing_and_falling_silent_end_the_link() {
        let t0 = Instant::now();
        let publisher: SocketAddr = PUBLISHER.parse().unwrap();
        let tx = Fragmenter::new(7, 1500).unwrap();
        let mut rx = receiver(t0, true);
        rx.handle(t0, publisher, Bytes::copy_from_slice(&tx.err()));
        assert_eq!(events(&mut rx), [ReceiverEvent::Closed]);

        let mut rx = receiver(t0, true);
        let mut now = t0;
        let mut dead_at = None;
        while now < t0 + Duration::from_secs(10) && dead_at.is_none() {
            now = rx.poll_timeout();
            if now < t0 + Duration::from_secs(2) {
                rx.handle(now, publisher, Bytes::copy_from_slice(&tx.ping()));
            }
            rx.handle_timeout(now);
            if let Some(ReceiverEvent::Dead(dead)) = rx.poll_event() {
                dead_at = Some((dead, now));
            }
        }
        let (dead, at) = dead_at.expect("declared dead");
        assert_eq!(dead, Dead::Silent);
        let silent_since = t0 + Duration::from_millis(1750);
        assert!(at - silent_since > LIVENESS_TIMEOUT, "{:?}", at - t0);
        assert!(at - silent_since <= LIVENESS_TIMEOUT + Duration::from_millis(500));
    }

    #[test]
    fn a_path_that_drops_every_last_fragment_is_dead_even_with_heartbeats() {
        let t0 = Instant::now();
        let publisher: SocketAddr = PUBLISHER.parse().unwrap();
        let mut tx = Fragmenter::new(7, 1500).unwrap();
        let mut rx = receiver(t0, true);
        let mut now = t0;
        for _ in 0..INCOMPLETE_BEFORE_FAILURE + 1 {
            let mut blocks = datagrams(&mut tx, &[2; 5000]);
            blocks.pop();
            for d in blocks {
                rx.handle(now, publisher, d);
            }
            rx.handle(now, publisher, Bytes::copy_from_slice(&tx.ping()));
            now += Duration::from_millis(100);
        }
        now = now.max(rx.poll_timeout());
        rx.handle_timeout(now);
        let dead = events(&mut rx);
        assert!(
            matches!(dead[..], [ReceiverEvent::Dead(Dead::NothingCompletes(n))] if n >= INCOMPLETE_BEFORE_FAILURE),
            "{dead:?}"
        );
    }

    #[test]
    fn a_driver_that_never_drains_holds_a_bounded_number_of_events() {
        let now = Instant::now();
        let publisher: SocketAddr = PUBLISHER.parse().unwrap();
        let mut tx = Fragmenter::new(7, 1500).unwrap();
        let mut rx = receiver(now, true);
        for _ in 0..3 * MAX_PENDING_EVENTS {
            for d in datagrams(&mut tx, &[3; 100]) {
                rx.handle(now, publisher, d);
            }
        }
        assert_eq!(rx.events.len(), MAX_PENDING_EVENTS);
        assert!(rx.memory() <= MAX_PENDING_EVENTS * 100);
        assert_eq!(rx.stats().messages, 3 * MAX_PENDING_EVENTS as u64);
        assert_eq!(rx.events_dropped(), 2 * MAX_PENDING_EVENTS as u64);
    }
}
