//! The MAVLink link: a tokio task around the `mavlink` crate's async connection that
//! reconnects forever, stamps every received message on CLOCK_MONOTONIC the moment `recv`
//! returns, and sends MAVLink 2 while accepting v1 and v2.

use super::clock::monotonic_ns;
use super::messages::{from_mavlink, sender, to_mavlink, Incoming, Outgoing};
use super::protocol::Ids;
use mavlink::dialects::common::MavMessage;
use mavlink::{AsyncMavConnection, MavHeader};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Where the autopilot is: the `mavlink` crate's address syntax, or the built-in simulator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FcuUrl {
    /// `udpin:HOST:PORT`, `udpout:HOST:PORT`, `tcpin:HOST:PORT`, `tcpout:HOST:PORT`,
    /// `serial:PATH:BAUD`.
    Mavlink(String),
    /// `sim:`: a simulated autopilot in this process.
    Sim,
}

impl FromStr for FcuUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<FcuUrl, String> {
        if s == "sim" || s == "sim:" {
            return Ok(FcuUrl::Sim);
        }
        let (scheme, rest) = s.split_once(':').ok_or_else(|| {
            format!("fcu_url '{s}' has no scheme (udpin:, udpout:, tcpin:, tcpout:, serial:, sim:)")
        })?;
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("fcu_url '{s}' needs HOST:PORT (or PATH:BAUD)"))?;
        if host.is_empty() || port.parse::<u32>().is_err() {
            return Err(format!(
                "fcu_url '{s}': '{port}' is not a port or baud rate"
            ));
        }
        match scheme {
            "udpin" | "udpout" | "tcpin" | "tcpout" | "serial" => Ok(FcuUrl::Mavlink(s.into())),
            other => Err(format!(
                "fcu_url scheme '{other}' is not udpin, udpout, tcpin, tcpout, serial or sim"
            )),
        }
    }
}

impl std::fmt::Display for FcuUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FcuUrl::Mavlink(s) => f.write_str(s),
            FcuUrl::Sim => f.write_str("sim:"),
        }
    }
}

/// What a link reports.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkEvent {
    /// The transport is up.
    Connected,
    /// The transport went down, and why; the link connects again.
    Disconnected(String),
    /// The TIMESYNC request `ts1` was handed to the transport at `at_ns`.
    TimesyncSent {
        /// The request's ts1.
        ts1: i64,
        /// CLOCK_MONOTONIC (ns).
        at_ns: i64,
    },
    /// A message from `from`, received at `at_ns` (CLOCK_MONOTONIC).
    Message {
        /// The sender.
        from: Ids,
        /// The message.
        msg: Incoming,
        /// CLOCK_MONOTONIC (ns).
        at_ns: i64,
    },
}

/// A link's counters, shared with its task.
#[derive(Debug, Default)]
pub struct LinkStats {
    /// Messages received.
    pub received: AtomicU64,
    /// Messages sent.
    pub sent: AtomicU64,
    /// Sends that failed.
    pub send_errors: AtomicU64,
    /// Messages dropped because the node fell behind (the event queue was full).
    pub overflowed: AtomicU64,
    /// Times the transport came up.
    pub connects: AtomicU64,
}

/// A running link; dropping it stops the task.
pub struct Link {
    /// What the link reports, in order.
    pub events: mpsc::Receiver<LinkEvent>,
    out: mpsc::Sender<Outgoing>,
    /// Its counters.
    pub stats: Arc<LinkStats>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Events the node may fall behind by before messages are dropped.
const EVENT_QUEUE: usize = 1024;
const OUT_QUEUE: usize = 256;

impl Link {
    /// Connects to `address` (the `mavlink` crate's syntax) as `ours`, forever.
    pub fn spawn(address: String, ours: Ids) -> Link {
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let (out, out_rx) = mpsc::channel(OUT_QUEUE);
        let stats = Arc::new(LinkStats::default());
        let task = tokio::spawn(run(address, ours, events_tx, out_rx, stats.clone()));
        Link {
            events,
            out,
            stats,
            task,
        }
    }

    /// Queues a message; false if the link is too far behind to take it.
    pub fn send(&self, msg: Outgoing) -> bool {
        self.out.try_send(msg).is_ok()
    }
}

async fn run(
    address: String,
    ours: Ids,
    events: mpsc::Sender<LinkEvent>,
    mut out: mpsc::Receiver<Outgoing>,
    stats: Arc<LinkStats>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let mut conn = match mavlink::connect_async::<MavMessage>(&address).await {
            Ok(conn) => conn,
            Err(e) => {
                // The reason alone: whoever reports it names the link (the node's
                // trouble report and diagnostics say the URL once).
                let _ = events
                    .send(LinkEvent::Disconnected(format!("cannot open: {e}")))
                    .await;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        conn.set_allow_recv_any_version(true);
        let conn = Arc::new(conn);
        backoff = Duration::from_millis(100);
        stats.connects.fetch_add(1, Ordering::Relaxed);
        let _ = events.send(LinkEvent::Connected).await;
        // The crate keeps reader and writer behind separate locks: one task reads while
        // this one writes.
        let mut reader = tokio::spawn(read(conn.clone(), events.clone(), stats.clone()));
        let header = MavHeader {
            system_id: ours.system.into(),
            component_id: ours.component,
            sequence: 0,
        };
        let why = loop {
            tokio::select! {
                msg = out.recv() => {
                    let Some(msg) = msg else {
                        reader.abort();
                        return; // the node is gone
                    };
                    let at_ns = monotonic_ns();
                    match conn.send(&header, &to_mavlink(&msg)).await {
                        Ok(_) => {
                            stats.sent.fetch_add(1, Ordering::Relaxed);
                            if let Outgoing::Timesync(t) = &msg {
                                if t.tc1 == 0 {
                                    let _ = events.try_send(LinkEvent::TimesyncSent { ts1: t.ts1, at_ns });
                                }
                            }
                        }
                        Err(_) => {
                            stats.send_errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                ended = &mut reader => {
                    break match ended {
                        Ok(why) => why,
                        Err(e) => e.to_string(),
                    };
                }
            }
        };
        let _ = events.send(LinkEvent::Disconnected(why)).await;
        tokio::time::sleep(backoff).await;
    }
}

/// Forwards received messages until the connection fails; returns why.
async fn read<C: AsyncMavConnection<MavMessage>>(
    conn: Arc<C>,
    events: mpsc::Sender<LinkEvent>,
    stats: Arc<LinkStats>,
) -> String {
    loop {
        match conn.recv().await {
            Ok((header, msg)) => {
                let at_ns = monotonic_ns();
                stats.received.fetch_add(1, Ordering::Relaxed);
                let event = LinkEvent::Message {
                    from: sender(&header),
                    msg: from_mavlink(&msg),
                    at_ns,
                };
                match events.try_send(event) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        stats.overflowed.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => return "closed".into(),
                }
            }
            Err(e) => return e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fcu_urls_parse_like_the_mavlink_crate_and_refuse_the_rest() {
        assert_eq!("sim:".parse(), Ok(FcuUrl::Sim));
        for ok in [
            "udpin:0.0.0.0:14540",
            "udpout:127.0.0.1:14557",
            "tcpout:127.0.0.1:5760",
            "tcpin:0.0.0.0:5760",
            "serial:/dev/ttyACM0:921600",
        ] {
            assert_eq!(ok.parse(), Ok(FcuUrl::Mavlink(ok.into())), "{ok}");
        }
        for bad in [
            "",
            "udp://:14540@",
            "udpin:14540",
            "serial:/dev/ttyS0:fast",
            "file:x:1",
        ] {
            assert!(bad.parse::<FcuUrl>().is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn exchanges_messages_with_a_udp_peer_and_stamps_them() {
        let peer = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let ours = Ids::ONBOARD_COMPUTER;
        let mut link = Link::spawn(format!("udpout:{}", peer.local_addr().unwrap()), ours);
        assert_eq!(link.events.recv().await, Some(LinkEvent::Connected));
        assert!(link.send(Outgoing::Heartbeat));
        let mut buf = [0u8; 512];
        let (n, from) = peer.recv_from(&mut buf).await.unwrap();
        let got = super::super::messages::parse_datagram(&buf[..n]);
        assert_eq!(got, vec![(ours, Incoming::Heartbeat { autopilot: false })]);
        let fcu = Ids::AUTOPILOT;
        let before = monotonic_ns();
        let reply = super::super::messages::frame(
            fcu,
            0,
            mavlink::MavlinkVersion::V1,
            &Outgoing::AutopilotHeartbeat,
        );
        peer.send_to(&reply, from).await.unwrap();
        match link.events.recv().await {
            Some(LinkEvent::Message { from, msg, at_ns }) => {
                assert_eq!((from, msg), (fcu, Incoming::Heartbeat { autopilot: true }));
                assert!(at_ns >= before);
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_dropped_tcp_connection_is_made_again() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let ours = Ids::ONBOARD_COMPUTER;
        let mut link = Link::spawn(format!("tcpout:{}", listener.local_addr().unwrap()), ours);
        for round in 0..2 {
            let (mut stream, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
                .await
                .unwrap_or_else(|_| panic!("connection {round}"))
                .unwrap();
            assert_eq!(link.events.recv().await, Some(LinkEvent::Connected));
            assert!(link.send(Outgoing::Heartbeat));
            let mut buf = [0u8; 64];
            let n = stream.read(&mut buf).await.unwrap();
            assert_eq!(buf[0], 0xFD, "MAVLink 2 out");
            assert!(n >= 12);
            drop(stream); // the autopilot goes away
            match link.events.recv().await {
                Some(LinkEvent::Disconnected(_)) => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(link.stats.connects.load(Ordering::Relaxed), 2);
    }
}
