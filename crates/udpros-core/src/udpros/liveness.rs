//! Whether a UDPROS link is alive, and who may speak on it, as state machines driven by
//! `now`: [`UdpLiveness`] declares a subscriber's link dead after publisher silence between
//! udpros peers or messages that begin and never complete with any publisher;
//! [`AllowedSources`] says which addresses its datagrams may come from.
//!
//! The publisher side needs one number: a udpros publisher sends a PING datagram on a UDP
//! link idle for [`HEARTBEAT`], and a udpros subscriber declares the link dead after
//! [`LIVENESS_TIMEOUT`] without data or PING (two and a half heartbeats: one late PING is
//! not a dead link). roscpp neither sends nor expects PINGs, so links with roscpp are
//! watched by their messages only.

use super::UdpStats;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// How often a udpros publisher sends PING on an idle UDP link.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// How long a udpros subscriber waits for data or PING before declaring the link dead.
pub const LIVENESS_TIMEOUT: Duration = Duration::from_millis(2500);
/// How often a UDP link checks its liveness while none of its messages has completed
/// (a path that completes none is dead); after one has, it checks only when silence
/// could have killed it (see [`UdpLiveness::handle_timeout`]).
pub const LIVENESS_CHECK: Duration = Duration::from_millis(250);
/// A new UDP link on which this many messages began and none completed is failing: the
/// path drops what the publisher sends (an MTU that drops fragments, heavy loss), whatever
/// its heartbeats say.
pub const INCOMPLETE_BEFORE_FAILURE: u64 = 10;
/// Why a UDPROS link is declared dead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dead {
    /// A udpros publisher sent neither data nor PING for [`LIVENESS_TIMEOUT`].
    Silent,
    /// This many messages began, none completed, and most of their datagrams never came.
    NothingCompletes(u64),
}

impl std::fmt::Display for Dead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dead::Silent => write!(
                f,
                "publisher silent for {} ms (it heartbeats every {} ms)",
                LIVENESS_TIMEOUT.as_millis(),
                HEARTBEAT.as_millis()
            ),
            Dead::NothingCompletes(n) => write!(
                f,
                "{n} UDPROS messages begun, none completed, and most of their datagrams lost (a path MTU that drops fragments)"
            ),
        }
    }
}

/// Watches a subscriber's UDPROS link: `heard` on every message or PING,
/// [`poll_timeout`](UdpLiveness::poll_timeout) for the next check,
/// [`handle_timeout`](UdpLiveness::handle_timeout) at it.
#[derive(Debug, Clone)]
pub struct UdpLiveness {
    last_heard: Instant,
    next_check: Instant,
    expects_heartbeats: bool,
}

impl UdpLiveness {
    /// A link that starts at `now`; `expects_heartbeats` when the publisher is udpros (it
    /// sends PING when idle).
    pub fn new(now: Instant, expects_heartbeats: bool) -> UdpLiveness {
        UdpLiveness {
            last_heard: now,
            next_check: now + LIVENESS_CHECK,
            expects_heartbeats,
        }
    }

    /// A message or a PING arrived at `now`.
    pub fn heard(&mut self, now: Instant) {
        self.last_heard = now;
    }

    /// When [`handle_timeout`](UdpLiveness::handle_timeout) is due.
    pub fn poll_timeout(&self) -> Instant {
        self.next_check
    }

    /// The check at `now`, given what the link's reassembly counted; `Some` when the link
    /// is dead.
    ///
    /// Messages that begin and never complete mean a path that drops every full-size
    /// datagram (an MTU black hole: only the short last blocks and heartbeats get through),
    /// which UDPROS cannot cross, so the link is given up and the subscriber falls back.
    /// They also mean heavy random loss, where a message of 70 datagrams is rarely whole at
    /// 5 % but most of each one's datagrams arrive: that link still carries fresh data (and
    /// FEC rebuilds it), so it is judged dead only when most of the blocks of the messages
    /// given up never came.
    ///
    /// Once a message has completed, only silence can kill the link, and not before
    /// [`LIVENESS_TIMEOUT`] after it was last heard: the next check waits for that (a
    /// PING or a message meanwhile moves it on, at that check). Without heartbeats,
    /// silence kills nothing, and a check comes every [`LIVENESS_TIMEOUT`]. An idle
    /// udpros link is then looked at every second or two instead of four times a second:
    /// each look woke the thread that reads it, for each subscription of a process.
    pub fn handle_timeout(&mut self, now: Instant, stats: &UdpStats) -> Option<Dead> {
        if now < self.next_check {
            return None;
        }
        self.next_check = self.next_check_after(now, stats.messages > 0);
        let mostly_lost = stats.incomplete_blocks_seen * 2 < stats.incomplete_blocks_expected;
        if stats.messages == 0 && stats.incomplete >= INCOMPLETE_BEFORE_FAILURE && mostly_lost {
            return Some(Dead::NothingCompletes(stats.incomplete));
        }
        if self.expects_heartbeats
            && now.saturating_duration_since(self.last_heard) > LIVENESS_TIMEOUT
        {
            return Some(Dead::Silent);
        }
        None
    }

    /// When to check after a check at `now` (see [`handle_timeout`](Self::handle_timeout)).
    fn next_check_after(&self, now: Instant, completed_one: bool) -> Instant {
        let soonest = now + LIVENESS_CHECK;
        match (completed_one, self.expects_heartbeats) {
            (false, _) => soonest,
            (true, false) => now + LIVENESS_TIMEOUT,
            // Just past the timeout: silence is death only when longer than it.
            (true, true) => {
                soonest.max(self.last_heard + LIVENESS_TIMEOUT + Duration::from_millis(1))
            }
        }
    }
}

/// Where a UDPROS link's datagrams may come from: the publisher's host (each address its
/// answer's host name and its XML-RPC URI's host resolve to), any loopback address when
/// that host is local, and, between udpros peers, only the port the publisher declared in
/// its answer, which is the port it sends from. ROS1 has no authentication; this keeps a
/// stranger who reads the subscriber's port from `getBusInfo` from taking the link over by
/// sending first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedSources {
    hosts: Vec<IpAddr>,
    port: Option<u16>,
}

impl AllowedSources {
    /// Datagrams from `hosts`, and from `port` only when it is `Some` and not 0 (roscpp's
    /// answers name a port it does not send from, so roscpp links pass `None`).
    pub fn new(hosts: Vec<IpAddr>, port: Option<u16>) -> AllowedSources {
        AllowedSources {
            hosts: hosts.into_iter().map(canonical_ip).collect(),
            port: port.filter(|&p| p != 0),
        }
    }

    /// Whether every host the link takes datagrams from is this machine (a loopback
    /// address).
    pub fn all_loopback(&self) -> bool {
        !self.hosts.is_empty() && self.hosts.iter().all(IpAddr::is_loopback)
    }

    /// Whether a datagram from `from` belongs to the link.
    pub fn allows(&self, from: SocketAddr) -> bool {
        let ip = canonical_ip(from.ip());
        let host_ok = self
            .hosts
            .iter()
            .any(|&h| h == ip || (h.is_loopback() && ip.is_loopback()));
        host_ok && self.port.is_none_or(|p| p == from.port())
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it maps.
fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silent_udpros_publisher_is_dead_after_the_timeout_and_roscpp_is_not() {
        let t0 = Instant::now();
        let mut udpros = UdpLiveness::new(t0, true);
        let mut roscpp = UdpLiveness::new(t0, false);
        let five = UdpStats {
            messages: 5,
            ..UdpStats::default()
        };
        assert_eq!(udpros.handle_timeout(t0, &five), None, "not due yet");
        let mut now = t0;
        let mut dead_at = None;
        let mut heartbeat = Some(t0 + Duration::from_secs(1));
        while now < t0 + Duration::from_secs(10) {
            now = udpros.poll_timeout();
            // A heartbeat at 1 s, heard before the first check after it.
            if let Some(at) = heartbeat.filter(|&at| at <= now) {
                udpros.heard(at);
                heartbeat = None;
            }
            if let Some(dead) = udpros.handle_timeout(now, &five) {
                dead_at = Some((dead, now - t0));
                break;
            }
            assert_eq!(roscpp.handle_timeout(now, &five), None);
        }
        let (dead, after) = dead_at.expect("declared dead");
        assert_eq!(dead, Dead::Silent);
        assert!(
            after > Duration::from_millis(3500) && after <= Duration::from_millis(3750),
            "{after:?}"
        );
    }

    #[test]
    fn a_link_that_completed_a_message_is_checked_only_when_silence_could_kill_it() {
        let t0 = Instant::now();
        let completed = UdpStats {
            messages: 1,
            ..UdpStats::default()
        };
        let mut udpros = UdpLiveness::new(t0, true);
        // Heartbeats every second for a minute, then none.
        let (stop, mut beat) = (t0 + Duration::from_secs(60), t0 + HEARTBEAT);
        let mut checks = 0;
        let (dead, at) = loop {
            let due = udpros.poll_timeout();
            while beat <= due && beat < stop {
                udpros.heard(beat);
                beat += HEARTBEAT;
            }
            checks += 1;
            assert!(checks < 1000, "never declared dead");
            if let Some(dead) = udpros.handle_timeout(due, &completed) {
                break (dead, due);
            }
        };
        assert_eq!(dead, Dead::Silent);
        let last_beat = beat - HEARTBEAT;
        let silent = at - last_beat;
        assert!(
            silent > LIVENESS_TIMEOUT && silent <= LIVENESS_TIMEOUT + LIVENESS_CHECK,
            "{silent:?}"
        );
        // Every 250 ms would be 250 checks.
        assert!(checks <= 60, "{checks} checks");

        // roscpp sends no heartbeats: after a completed message, silence is no death.
        let mut roscpp = UdpLiveness::new(t0, false);
        let mut checks = 0;
        while roscpp.poll_timeout() < t0 + Duration::from_secs(60) {
            let due = roscpp.poll_timeout();
            assert_eq!(roscpp.handle_timeout(due, &completed), None);
            checks += 1;
        }
        assert!(checks <= 30, "{checks} checks");
    }

    #[test]
    fn messages_that_never_complete_kill_a_new_link_with_any_publisher() {
        let t0 = Instant::now();
        let mut roscpp = UdpLiveness::new(t0, false);
        // Ten messages of ten blocks each, of which only the last block ever arrived.
        let stats = |messages, incomplete, seen| UdpStats {
            messages,
            incomplete,
            incomplete_blocks_seen: seen,
            incomplete_blocks_expected: incomplete * 10,
            ..UdpStats::default()
        };
        let due = roscpp.poll_timeout();
        assert_eq!(roscpp.handle_timeout(due, &stats(0, 9, 9)), None);
        let due = roscpp.poll_timeout();
        assert_eq!(
            roscpp.handle_timeout(due, &stats(0, 10, 10)),
            Some(Dead::NothingCompletes(10))
        );
        let due = roscpp.poll_timeout();
        assert_eq!(
            roscpp.handle_timeout(due, &stats(1, 50, 50)),
            None,
            "one completed message"
        );
        let due = roscpp.poll_timeout();
        assert_eq!(
            roscpp.handle_timeout(due, &stats(0, 50, 475)),
            None,
            "random loss: most blocks of each message arrive"
        );
    }

    #[test]
    fn sources_are_the_publishers_hosts_and_between_udpros_peers_its_port() {
        let hosts = vec!["127.0.0.1".parse().unwrap(), "10.1.2.3".parse().unwrap()];
        let udpros = AllowedSources::new(hosts.clone(), Some(4000));
        let allows = |s: &AllowedSources, a: &str| s.allows(a.parse().unwrap());
        assert!(allows(&udpros, "127.0.0.1:4000"));
        assert!(allows(&udpros, "10.1.2.3:4000"));
        assert!(allows(&udpros, "127.0.1.1:4000"), "loopback is one host");
        assert!(
            allows(&udpros, "[::ffff:10.1.2.3]:4000"),
            "IPv4-mapped IPv6"
        );
        assert!(!allows(&udpros, "127.0.0.1:4001"), "another port");
        assert!(!allows(&udpros, "10.9.9.9:4000"), "another host");
        let roscpp = AllowedSources::new(hosts.clone(), None);
        assert!(
            allows(&roscpp, "10.1.2.3:5555"),
            "roscpp's port is not its source"
        );
        assert!(!allows(&roscpp, "10.9.9.9:5555"));
        assert_eq!(
            AllowedSources::new(hosts, Some(0)),
            roscpp,
            "port 0 is no port"
        );
    }
}
