//! The MAVLink link: a tokio task that opens what `~fcu_url` says (UDP, TCP client or
//! server, serial), reconnects forever, stamps every received message on CLOCK_MONOTONIC
//! the moment it is read, and sends MAVLink 2 while accepting v1 and v2. Transports are
//! libmavconn's, with its rules: a UDP link answers whoever sent last, a TCP server sends to
//! every client.

use super::clock::monotonic_ns;
use super::messages::{crc_extra, frame, Incoming, Outgoing, StreamParser};
use super::protocol::Ids;
use super::signing::{self, unix_us, Refused, Signer, SigningConfig, Verifier};
use super::url::{Broadcast, HostPort, Transport};
use mavlink::MavlinkVersion;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

pub use super::url::FcuUrl;

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
        /// The whole frame as it came (at most [`MAX_FRAME`](super::messages::MAX_FRAME)
        /// bytes), for `~messages`.
        frame: Vec<u8>,
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
    /// Times the transport came up (a TCP server: clients accepted).
    pub connects: AtomicU64,
    /// Messages not sent because no peer was known yet (UDP with an empty remote).
    pub no_peer: AtomicU64,
    /// Bytes of a stream (TCP, serial) skipped as noise.
    pub skipped_bytes: AtomicU64,
    /// TCP clients turned away because [`MAX_TCP_CLIENTS`] were connected.
    pub refused_clients: AtomicU64,
    /// TCP clients closed to make room: they had sent no valid frame in
    /// [`SILENT_CLIENT_GRACE`] while every place was taken.
    pub evicted_clients: AtomicU64,
    /// UDP datagrams that held no valid MAVLink frame: they neither reach the node nor
    /// move the peer.
    pub ignored_datagrams: AtomicU64,
    /// Signed frames whose signature held (signing on).
    pub signed: AtomicU64,
    /// Unsigned frames refused (signing `require`).
    pub refused_unsigned: AtomicU64,
    /// Frames refused for a signature that does not hold (another key, a changed frame).
    pub refused_bad_signature: AtomicU64,
    /// Frames refused as replays (a timestamp not newer than their stream's) or as a new
    /// stream's frame older than a minute.
    pub refused_replayed: AtomicU64,
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

/// TCP clients a `tcp-l://` link serves at once; more are turned away.
pub const MAX_TCP_CLIENTS: usize = 16;
/// Frames queued for one TCP client before it counts as too slow and misses them.
const CLIENT_QUEUE: usize = 256;
/// How long a `tcp-l://` client may stay without sending a valid frame before it may be
/// closed to make room for a new one (an autopilot or a ground station sends a
/// heartbeat every second).
pub const SILENT_CLIENT_GRACE: Duration = Duration::from_secs(3);

impl Link {
    /// Opens `transport` as `ours`, again and again while it fails, until dropped.
    pub fn spawn(transport: Transport, ours: Ids, signing: Option<&SigningConfig>) -> Link {
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let (out, out_rx) = mpsc::channel(OUT_QUEUE);
        let stats = Arc::new(LinkStats::default());
        let (signer, verifier) = signing.and_then(SigningConfig::start).unzip();
        let ctx = Ctx {
            ours,
            sequence: 0,
            events: events_tx,
            stats: stats.clone(),
            signer,
            verifier,
        };
        let task = tokio::spawn(run(transport, ctx, out_rx));
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

/// What every transport shares: our ids and frame sequence, where events go, the counters.
#[derive(Clone)]
struct Ctx {
    ours: Ids,
    sequence: u8,
    events: mpsc::Sender<LinkEvent>,
    stats: Arc<LinkStats>,
    /// Signs what we send, with signing on.
    signer: Option<Signer>,
    /// Checks what we receive, with signing on (a TCP server's clients: one each).
    verifier: Option<Verifier>,
}

impl Ctx {
    /// `msg` as the next MAVLink 2 frame, signed when signing is on.
    fn encode(&mut self, msg: &Outgoing) -> Vec<u8> {
        self.sequence = self.sequence.wrapping_add(1);
        let mut bytes = frame(self.ours, self.sequence, MavlinkVersion::V2, msg);
        if let Some(signer) = &mut self.signer {
            signer.sign(&mut bytes, unix_us(), crc_extra(msg));
        }
        bytes
    }

    /// Whether the whole frame `raw` may reach the node: with signing on, its signature
    /// and timestamp hold (or it is unsigned and the policy takes that); counted.
    fn admit(&mut self, raw: &[u8]) -> bool {
        let Some(verifier) = &mut self.verifier else {
            return true;
        };
        let verdict = verifier.check(raw, unix_us());
        let signed = raw.get(2).is_some_and(|flags| flags & signing::SIGNED != 0);
        let counter = match verdict {
            Ok(()) if !signed => return true,
            Ok(()) => &self.stats.signed,
            Err(Refused::Unsigned) => &self.stats.refused_unsigned,
            Err(Refused::BadSignature) => &self.stats.refused_bad_signature,
            Err(Refused::Replayed | Refused::Stale) => &self.stats.refused_replayed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        verdict.is_ok()
    }

    /// The valid frames of one datagram that may reach the node, with their senders.
    fn datagram_frames(&mut self, bytes: &[u8]) -> Vec<(Ids, Incoming, Vec<u8>)> {
        let mut frames = Vec::new();
        StreamParser::default().push(bytes, |raw, from, msg| {
            if frames.len() < 64 && self.admit(raw) {
                frames.push((from, msg, raw.to_vec()));
            }
        });
        frames
    }

    /// Counts a send; a TIMESYNC request's departure goes to the node.
    fn sent(&self, msg: &Outgoing, at_ns: i64) {
        self.stats.sent.fetch_add(1, Ordering::Relaxed);
        if let Outgoing::Timesync(t) = msg {
            if t.tc1 == 0 {
                let _ = self
                    .events
                    .try_send(LinkEvent::TimesyncSent { ts1: t.ts1, at_ns });
            }
        }
    }

    /// Hands a received message on; false once the node is gone. A node too far behind
    /// misses messages (counted) rather than stalling the transport.
    fn received(&self, from: Ids, msg: Incoming, frame: &[u8], at_ns: i64) -> bool {
        self.stats.received.fetch_add(1, Ordering::Relaxed);
        let frame = frame.to_vec();
        match self.events.try_send(LinkEvent::Message {
            from,
            msg,
            at_ns,
            frame,
        }) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.stats.overflowed.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    async fn up(&self) {
        self.stats.connects.fetch_add(1, Ordering::Relaxed);
        let _ = self.events.send(LinkEvent::Connected).await;
    }

    /// Stream bytes through `parser` to the node: how many valid frames they completed,
    /// or `None` once the node is gone.
    fn stream_bytes(&mut self, parser: &mut StreamParser, bytes: &[u8]) -> Option<usize> {
        let at_ns = monotonic_ns();
        let before = parser.skipped;
        let (mut open, mut frames) = (true, 0);
        parser.push(bytes, |raw, from, msg| {
            if self.admit(raw) {
                frames += 1;
                open &= self.received(from, msg, raw, at_ns)
            }
        });
        self.stats
            .skipped_bytes
            .fetch_add(parser.skipped - before, Ordering::Relaxed);
        open.then_some(frames)
    }
}

/// Why a transport stopped: the node is gone, or a reason to report before trying again.
enum Ended {
    NodeGone,
    Failed(String),
}

async fn run(transport: Transport, mut ctx: Ctx, mut out: mpsc::Receiver<Outgoing>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let connects = ctx.stats.connects.load(Ordering::Relaxed);
        let ended = match &transport {
            Transport::Udp {
                bind,
                remote,
                broadcast,
            } => udp(&mut ctx, &mut out, bind, remote.as_ref(), *broadcast).await,
            Transport::TcpClient(server) => tcp_client(&mut ctx, &mut out, server).await,
            Transport::TcpServer(bind) => tcp_server(&mut ctx, &mut out, bind).await,
            Transport::Serial {
                path,
                baud,
                hardware_flow,
            } => serial(&mut ctx, &mut out, path, *baud, *hardware_flow).await,
        };
        let why = match ended {
            Ended::NodeGone => return,
            Ended::Failed(why) => why,
        };
        // The reason alone: whoever reports it names the link (the node's trouble report
        // and diagnostics say the URL once).
        let _ = ctx.events.send(LinkEvent::Disconnected(why)).await;
        if ctx.stats.connects.load(Ordering::Relaxed) != connects {
            backoff = Duration::from_millis(100); // it was up: try again soon
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// `at`'s addresses; with `family`, only that family's (a socket bound to IPv4 cannot send
/// to IPv6).
async fn resolve(at: &HostPort, family: Option<SocketAddr>) -> Result<SocketAddr, String> {
    let found = tokio::net::lookup_host((at.host.as_str(), at.port))
        .await
        .map_err(|e| format!("cannot resolve {}: {e}", at.host))?;
    found
        .into_iter()
        .find(|a| family.is_none_or(|f| f.is_ipv4() == a.is_ipv4()))
        .ok_or_else(|| format!("{} has no usable address", at.host))
}

async fn udp(
    ctx: &mut Ctx,
    out: &mut mpsc::Receiver<Outgoing>,
    bind: &HostPort,
    remote: Option<&HostPort>,
    broadcast: Broadcast,
) -> Ended {
    let socket = match udp_socket(bind, broadcast != Broadcast::Never).await {
        Ok(s) => s,
        Err(why) => return Ended::Failed(why),
    };
    let local = socket.local_addr().ok();
    let mut peer = match remote {
        Some(r) => match resolve(r, local).await {
            Ok(addr) => Some(addr),
            Err(why) => return Ended::Failed(why),
        },
        None => None,
    };
    ctx.up().await;
    let mut buf = vec![0u8; 65536];
    let mut answered = LearntPeer::default();
    loop {
        tokio::select! {
            received = socket.recv_from(&mut buf) => match received {
                Ok((n, from)) => {
                    let at_ns = monotonic_ns();
                    let frames = ctx.datagram_frames(&buf[..n]);
                    if frames.is_empty() {
                        ctx.stats.ignored_datagrams.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    // Whoever sent last is whom we answer (libmavconn's rule), except
                    // when broadcasting for good; but only a sender of valid frames of
                    // the system answered so far.
                    if answered.teaches(frames.iter().map(|(ids, ..)| *ids)) && broadcast != Broadcast::Always {
                        peer = Some(from);
                    }
                    for (ids, msg, frame) in frames {
                        if !ctx.received(ids, msg, &frame, at_ns) {
                            return Ended::NodeGone;
                        }
                    }
                }
                Err(e) => return Ended::Failed(format!("UDP receive: {e}")),
            },
            msg = out.recv() => {
                let Some(msg) = msg else { return Ended::NodeGone };
                let Some(to) = peer else {
                    ctx.stats.no_peer.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let bytes = ctx.encode(&msg);
                let at_ns = monotonic_ns();
                match socket.send_to(&bytes, to).await {
                    Ok(_) => ctx.sent(&msg, at_ns),
                    Err(_) => { ctx.stats.send_errors.fetch_add(1, Ordering::Relaxed); }
                }
            }
        }
    }
}

/// Which datagrams may teach a UDP link whom to answer. libmavconn answers whoever sent
/// last, so one byte of junk from anywhere would redirect the link; here only a datagram
/// with a valid frame (checksum and a known message) does, and once a system has been
/// answered, only one of that system's frames (the autopilot moving to another port or
/// address after a reboot is still followed).
#[derive(Debug, Default)]
struct LearntPeer {
    system: Option<u8>,
}

impl LearntPeer {
    /// Whether the sender of a datagram whose valid frames are `frames` is to be answered
    /// from now on.
    fn teaches(&mut self, mut senders: impl Iterator<Item = Ids>) -> bool {
        let Some(first) = senders.next() else {
            return false;
        };
        match self.system {
            None => {
                self.system = Some(first.system);
                true
            }
            Some(system) => first.system == system || senders.any(|ids| ids.system == system),
        }
    }
}

/// A UDP socket bound to `bind`, shared with other programs on that port as libmavconn's
/// is (SO_REUSEADDR), able to broadcast if asked.
async fn udp_socket(bind: &HostPort, broadcast: bool) -> Result<tokio::net::UdpSocket, String> {
    use socket2::{Domain, Socket, Type};
    let addr = resolve(bind, None).await?;
    let fail = |e: std::io::Error| format!("UDP bind {addr}: {e}");
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, None).map_err(fail)?;
    socket.set_reuse_address(true).map_err(fail)?;
    if broadcast {
        socket.set_broadcast(true).map_err(fail)?;
    }
    socket.set_nonblocking(true).map_err(fail)?;
    socket.bind(&addr.into()).map_err(fail)?;
    tokio::net::UdpSocket::from_std(socket.into()).map_err(fail)
}

async fn tcp_client(ctx: &mut Ctx, out: &mut mpsc::Receiver<Outgoing>, server: &HostPort) -> Ended {
    let addr = match resolve(server, None).await {
        Ok(a) => a,
        Err(why) => return Ended::Failed(why),
    };
    let stream =
        match tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
            .await
        {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Ended::Failed(format!("TCP connect to {addr}: {e}")),
            Err(_) => return Ended::Failed(format!("TCP connect to {addr}: timed out")),
        };
    let _ = stream.set_nodelay(true);
    ctx.up().await;
    stream_link(ctx, out, stream, &addr.to_string()).await
}

/// Reads frames from `io` and writes the node's messages to it until either side ends.
async fn stream_link<S: AsyncRead + AsyncWrite + Unpin>(
    ctx: &mut Ctx,
    out: &mut mpsc::Receiver<Outgoing>,
    io: S,
    name: &str,
) -> Ended {
    let (mut reader, mut writer) = tokio::io::split(io);
    let mut parser = StreamParser::default();
    let mut buf = vec![0u8; 4096];
    loop {
        tokio::select! {
            read = reader.read(&mut buf) => match read {
                Ok(0) => return Ended::Failed(format!("{name} closed")),
                Ok(n) => if ctx.stream_bytes(&mut parser, &buf[..n]).is_none() { return Ended::NodeGone },
                Err(e) => return Ended::Failed(format!("reading {name}: {e}")),
            },
            msg = out.recv() => {
                let Some(msg) = msg else { return Ended::NodeGone };
                let bytes = ctx.encode(&msg);
                let at_ns = monotonic_ns();
                match writer.write_all(&bytes).await {
                    Ok(()) => ctx.sent(&msg, at_ns),
                    Err(e) => {
                        ctx.stats.send_errors.fetch_add(1, Ordering::Relaxed);
                        return Ended::Failed(format!("writing {name}: {e}"));
                    }
                }
            }
        }
    }
}

async fn tcp_server(ctx: &mut Ctx, out: &mut mpsc::Receiver<Outgoing>, bind: &HostPort) -> Ended {
    let addr = match resolve(bind, None).await {
        Ok(a) => a,
        Err(why) => return Ended::Failed(why),
    };
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => return Ended::Failed(format!("TCP listen on {addr}: {e}")),
    };
    let mut clients: Vec<TcpClient> = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, from) = match accepted {
                    Ok(accepted) => accepted,
                    Err(_) => {
                        // Out of descriptors, say: pause rather than spin on the error.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                if clients.len() >= MAX_TCP_CLIENTS {
                    // Idle connections must not keep the autopilot out: the client that
                    // has been connected longest without a valid frame makes room.
                    let silent = clients
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| !c.spoke.load(Ordering::Relaxed))
                        .filter(|(_, c)| c.since.elapsed() >= SILENT_CLIENT_GRACE)
                        .min_by_key(|(_, c)| c.since)
                        .map(|(i, _)| i);
                    let Some(silent) = silent else {
                        ctx.stats.refused_clients.fetch_add(1, Ordering::Relaxed);
                        continue; // dropped: the client sees the connection close
                    };
                    clients.swap_remove(silent).task.abort();
                    ctx.stats.evicted_clients.fetch_add(1, Ordering::Relaxed);
                }
                let _ = stream.set_nodelay(true);
                let (tx, rx) = mpsc::channel(CLIENT_QUEUE);
                next_id += 1;
                let spoke = Arc::new(AtomicBool::new(false));
                let task = tasks.spawn(serve_client(ctx.clone(), stream, from, rx, next_id, spoke.clone()));
                clients.push(TcpClient { id: next_id, frames: tx, spoke, since: Instant::now(), task });
                ctx.up().await;
            }
            Some(done) = tasks.join_next() => {
                let Ok((id, why)) = done else { continue };
                clients.retain(|c| c.id != id);
                if clients.is_empty() {
                    let why = format!("no TCP client connected (the last: {why})");
                    let _ = ctx.events.send(LinkEvent::Disconnected(why)).await;
                }
            }
            msg = out.recv() => {
                let Some(msg) = msg else { return Ended::NodeGone };
                if clients.is_empty() {
                    ctx.stats.no_peer.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let bytes: Arc<[u8]> = ctx.encode(&msg).into();
                let at_ns = monotonic_ns();
                for client in &clients {
                    if client.frames.try_send(bytes.clone()).is_err() {
                        ctx.stats.send_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                ctx.sent(&msg, at_ns);
            }
        }
    }
}

/// A `tcp-l://` client as the server keeps it.
struct TcpClient {
    id: u64,
    /// The node's frames to it.
    frames: mpsc::Sender<Arc<[u8]>>,
    /// Whether it has sent a valid frame.
    spoke: Arc<AtomicBool>,
    since: Instant,
    task: tokio::task::AbortHandle,
}

/// One `tcp-l://` client: its frames to the node, the node's frames to it; returns its id
/// and why it ended. `spoke` is set at its first valid frame.
async fn serve_client(
    mut ctx: Ctx,
    stream: tokio::net::TcpStream,
    from: SocketAddr,
    mut frames: mpsc::Receiver<Arc<[u8]>>,
    id: u64,
    spoke: Arc<AtomicBool>,
) -> (u64, String) {
    let (mut reader, mut writer) = stream.into_split();
    let mut parser = StreamParser::default();
    let mut buf = vec![0u8; 4096];
    let why = loop {
        tokio::select! {
            read = reader.read(&mut buf) => match read {
                Ok(0) => break format!("{from} closed"),
                Ok(n) => match ctx.stream_bytes(&mut parser, &buf[..n]) {
                    None => break "node gone".into(),
                    Some(0) => {}
                    Some(_) => spoke.store(true, Ordering::Relaxed),
                },
                Err(e) => break format!("reading {from}: {e}"),
            },
            bytes = frames.recv() => {
                let Some(bytes) = bytes else { break "node gone".into() };
                if let Err(e) = writer.write_all(&bytes).await {
                    break format!("writing {from}: {e}");
                }
            }
        }
    };
    (id, why)
}

async fn serial(
    ctx: &mut Ctx,
    out: &mut mpsc::Receiver<Outgoing>,
    path: &str,
    baud: u32,
    hardware_flow: bool,
) -> Ended {
    let flow = if hardware_flow {
        tokio_serial::FlowControl::Hardware
    } else {
        tokio_serial::FlowControl::None
    };
    let mut port =
        match tokio_serial::SerialStream::open(&tokio_serial::new(path, baud).flow_control(flow)) {
            Ok(p) => p,
            Err(e) => return Ended::Failed(format!("cannot open {path}: {e}")),
        };
    // No second program may talk to the autopilot through this port at the same time.
    let _ = port.set_exclusive(true);
    ctx.up().await;
    stream_link(ctx, out, port, path).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_valid_frames_of_the_answered_system_move_the_peer() {
        let mut rule = LearntPeer::default();
        assert!(!rule.teaches([].into_iter()), "junk teaches nothing");
        assert!(rule.teaches([Ids::AUTOPILOT].into_iter()));
        let stranger = Ids {
            system: 42,
            component: 1,
        };
        assert!(!rule.teaches([stranger].into_iter()));
        assert!(!rule.teaches([].into_iter()));
        assert!(
            rule.teaches([stranger, Ids::AUTOPILOT].into_iter()),
            "a datagram that carries the autopilot's frame"
        );
    }

    fn transport(url: String) -> Transport {
        match url.parse() {
            Ok(FcuUrl::Device { transport, .. }) => transport,
            other => panic!("{url}: {other:?}"),
        }
    }

    #[tokio::test]
    async fn exchanges_messages_with_a_udp_peer_and_stamps_them() {
        let peer = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let ours = Ids::ONBOARD_COMPUTER;
        let mut link = Link::spawn(
            transport(format!("udpout:{}", peer.local_addr().unwrap())),
            ours,
            None,
        );
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
            Some(LinkEvent::Message {
                from,
                msg,
                at_ns,
                frame,
            }) => {
                assert_eq!((from, msg), (fcu, Incoming::Heartbeat { autopilot: true }));
                assert_eq!(frame, reply, "the frame as it came");
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
        let mut link = Link::spawn(
            transport(format!("tcpout:{}", listener.local_addr().unwrap())),
            ours,
            None,
        );
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
