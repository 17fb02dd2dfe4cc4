//! The tokio layer that drives the wire cores: publications fanning one serialized buffer
//! out to TCPROS and UDPROS links, subscriptions negotiating with each publisher and
//! reading from it. The sockets themselves, and every system call udpros makes on them
//! directly, are in `socket`.

mod driven;
pub(crate) mod host_share;
pub(crate) mod publication;
pub(crate) mod queue;
mod sender;
pub mod service_endpoint;
pub(crate) mod subscription;
pub(crate) mod tcp_server;
pub(crate) mod udp_answer;

pub use crate::wire::udpros::governor::GovernorStats;
pub use crate::wire::udpros::{SecureSendStats, UdpStats};
pub use driven::{DrivenRuntime, HANDOVER_AFTER};
pub use subscription::{PublisherLinkStats, Received, MAX_PUBLISHER_LINKS};

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use crate::wire::topic::UDPROS_PEER_FIELD;

/// Which transport a link uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// TCPROS: length-prefixed messages on a TCP connection; every message arrives, in
    /// order, and a slow link queues.
    Tcp,
    /// UDPROS: messages cut into datagrams; a lost datagram loses its message, and a late
    /// message never holds up a newer one.
    Udp,
}

impl Protocol {
    /// The name ROS uses in negotiation and getBusInfo.
    pub fn ros_name(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCPROS",
            Protocol::Udp => "UDPROS",
        }
    }
}

/// Has the FEC code's tables built on a thread of their own, once per process, when a link
/// to another machine agrees on FEC: built on first use instead, they held up the first
/// repaired message (publisher) or the first rebuilt one (subscriber) by about 12 ms.
/// Loopback links skip it: they repair only when their reports show loss, and a process
/// whose links never repair keeps the 8 MB.
pub(crate) fn prepare_fec_code() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("udpros-fec-tables".into())
            .spawn(crate::wire::udpros::fec::prepare_code);
        if let Err(e) = spawned {
            // Not fatal: the tables are then built on first use.
            tracing::debug!("cannot build the FEC tables ahead: {e}");
        }
    });
}

/// Counters of one link, shared by its task and the statistics calls.
#[derive(Debug, Default)]
pub(crate) struct LinkStats {
    pub(crate) bytes: AtomicU64,
    pub(crate) messages: AtomicU64,
    pub(crate) drops: AtomicU64,
}

impl LinkStats {
    pub(crate) fn add_message(&self, bytes: usize) {
        self.messages.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// What the link has counted so far.
    pub(crate) fn totals(&self) -> LinkTotals {
        LinkTotals {
            bytes: self.bytes.load(Ordering::Relaxed),
            messages: self.messages.load(Ordering::Relaxed),
            drops: self.drops.load(Ordering::Relaxed),
        }
    }
}

/// Where a governed link's sender leaves what its governor knows, for the statistics calls.
pub(crate) type GovernorCell = Arc<std::sync::Mutex<Option<GovernorStats>>>;

/// Where a secure UDPROS link's sender leaves what it sealed and refused, for the
/// statistics calls.
pub(crate) type SecureCell = Arc<std::sync::Mutex<Option<SecureSendStats>>>;

/// What a UDPROS link to a udpros subscriber with FEC has sent and heard, shared by its
/// sender and the statistics calls.
#[derive(Debug)]
pub(crate) struct FecSendCounters {
    repairs_sent: AtomicU64,
    /// The last message's blocks (high half) and repair datagrams (low half).
    last_plan: AtomicU64,
    /// The loss the subscriber last reported, parts per million; `u32::MAX` before any.
    reported_loss_ppm: std::sync::atomic::AtomicU32,
}

impl Default for FecSendCounters {
    fn default() -> Self {
        FecSendCounters {
            repairs_sent: AtomicU64::new(0),
            last_plan: AtomicU64::new(0),
            reported_loss_ppm: std::sync::atomic::AtomicU32::new(u32::MAX),
        }
    }
}

impl FecSendCounters {
    /// Takes what the link's sender knows now.
    pub(crate) fn update(&self, sender: &crate::wire::udpros::UdpSender) {
        self.repairs_sent
            .store(sender.repairs_sent(), Ordering::Relaxed);
        if let Some((blocks, repairs)) = sender.last_plan() {
            let plan = (u64::from(blocks) << 32) | u64::from(repairs);
            self.last_plan.store(plan, Ordering::Relaxed);
        }
        if let Some(report) = sender.reported() {
            let ppm = (report.loss * 1e6).round() as u32;
            self.reported_loss_ppm.store(ppm, Ordering::Relaxed);
        }
    }

    /// The counters now.
    pub(crate) fn snapshot(&self, link: crate::wire::udpros::fec::LinkFec) -> FecSendStats {
        let plan = self.last_plan.load(Ordering::Relaxed);
        let ppm = self.reported_loss_ppm.load(Ordering::Relaxed);
        FecSendStats {
            link,
            repairs_sent: self.repairs_sent.load(Ordering::Relaxed),
            last_blocks: (plan >> 32) as u16,
            last_repairs: plan as u16,
            reported_loss: (ppm != u32::MAX).then(|| f64::from(ppm) / 1e6),
        }
    }
}

/// FEC on a UDPROS link to a udpros subscriber, as it stood when asked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FecSendStats {
    /// What both ends settled on.
    pub link: crate::wire::udpros::fec::LinkFec,
    /// Repair datagrams sent so far.
    pub repairs_sent: u64,
    /// The last message's blocks and repair datagrams: the redundancy in use.
    pub last_blocks: u16,
    /// See `last_blocks`.
    pub last_repairs: u16,
    /// The datagram loss the subscriber last reported (adaptive links).
    pub reported_loss: Option<f64>,
}

/// One subscriber link of a publisher, as it stood when asked (from
/// [`RawPublisher::links`](crate::node::RawPublisher::links)).
#[derive(Debug, Clone)]
pub struct SubscriberLinkStats {
    /// The subscriber's node name.
    pub caller_id: String,
    /// The transport.
    pub protocol: Protocol,
    /// Where the link sends to.
    pub peer: SocketAddr,
    /// Messages and message bytes sent, and messages dropped from its queue.
    pub messages: u64,
    /// See `messages`.
    pub bytes: u64,
    /// See `messages`.
    pub drops: u64,
    /// FEC, on UDPROS links to udpros subscribers that agreed on it.
    pub fec: Option<FecSendStats>,
    /// The link governor's view of the path (its estimated capacity, queueing delay and
    /// pacing rate), on UDPROS links whose subscriber sends feedback; `None` before its
    /// first report and on links that are not governed.
    pub governor: Option<GovernorStats>,
    /// The subscriber's type and full definition, from its connection header: kept by a
    /// publication of any type (md5sum `*`) only, to learn a type this machine lacks.
    pub subscriber_type: Option<(String, String)>,
    /// How the link is sealed, on a secure link (see [`crate::secure`]).
    pub secure: Option<SecureSendLink>,
    /// The largest datagram the link sends, its UDPROS header included, on a UDPROS link:
    /// what the subscriber asked for, fitted to the route (see
    /// [`SubscribeOptions::max_datagram_size`](crate::node::SubscribeOptions::max_datagram_size)).
    pub max_datagram: Option<usize>,
}

/// The publisher's end of a secure link: how it is sealed and, on UDPROS, what its sender
/// sealed and made of the subscriber's reports (forged or replayed reports are counted
/// here). Never a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecureSendLink {
    /// Encrypted or authenticated.
    pub mode: crate::wire::secure::Mode,
    /// The AEAD under the seals.
    pub cipher: crate::wire::secure::Cipher,
    /// On UDPROS, once the link has sent: its datagrams and the reports it took.
    pub datagrams: Option<SecureSendStats>,
}

/// A link's counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkTotals {
    /// Message bytes sent or received.
    pub bytes: u64,
    /// Messages sent or received.
    pub messages: u64,
    /// Messages dropped.
    pub drops: u64,
}

/// Steps aside once after a link delivered messages: the link's task is woken at once
/// and goes to the back of the run queue, so the readers of what it delivered (woken by
/// the delivery) run before it reads its socket again. Without it, each message waited
/// for one more read, the one that finds the socket empty: on the current-thread runtime,
/// from the socket read to a reader task holding the message took 2.6-3.2 µs, and
/// 1.2-1.8 µs with it (S1). Not `tokio::task::yield_now`, which also polls the I/O
/// driver (one more system call) before the task runs again.
pub(crate) async fn let_readers_run() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

/// Reads a peer's connection header within `limits`; with it, the decoder holding any
/// bytes that came after it (a peer may send its first frame without waiting).
pub(crate) async fn read_header(
    stream: &mut tokio::net::TcpStream,
    limits: &crate::wire::header::HeaderLimits,
) -> Result<
    (
        crate::wire::header::ConnectionHeader,
        crate::wire::tcpros::FrameDecoder,
    ),
    HeaderReadError,
> {
    use tokio::io::AsyncReadExt;
    let mut decoder = crate::wire::tcpros::FrameDecoder::new(limits.max_total);
    loop {
        if let Some(body) = decoder.next_frame().map_err(HeaderReadError::TooLarge)? {
            let header = crate::wire::header::ConnectionHeader::decode_fields(&body, limits)
                .map_err(HeaderReadError::Malformed)?;
            return Ok((header, decoder));
        }
        match stream.read_buf(decoder.buffer_mut()).await {
            Ok(0) => return Err(HeaderReadError::Closed),
            Ok(_) => {}
            Err(e) => return Err(HeaderReadError::Io(e)),
        }
    }
}

/// Why a peer's connection header could not be read.
#[derive(Debug)]
pub(crate) enum HeaderReadError {
    /// It announced more than the limits allow.
    TooLarge(crate::wire::tcpros::FrameTooLarge),
    /// Its fields do not parse.
    Malformed(crate::wire::header::HeaderError),
    /// The peer closed the connection first.
    Closed,
    /// Reading failed.
    Io(std::io::Error),
}

impl std::fmt::Display for HeaderReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderReadError::TooLarge(e) => e.fmt(f),
            HeaderReadError::Malformed(e) => e.fmt(f),
            HeaderReadError::Closed => f.write_str("connection closed before its header"),
            HeaderReadError::Io(e) => e.fmt(f),
        }
    }
}

/// Resolves a UDPROS peer for a socket bound to `bind`. An IPv4 socket reaches IPv4
/// addresses only. A dual-stack one (`ROS_IPV6=on`) reaches the first address of either
/// family, an IPv4 one as its IPv4-mapped IPv6 address; but a roscpp subscriber
/// (`ipv4_peer`) reads on an IPv4 socket whatever its host resolves to, so it is sent to
/// over IPv4 only.
pub async fn resolve_udp_peer(
    bind: std::net::IpAddr,
    host: &str,
    port: u16,
    ipv4_peer: bool,
) -> std::io::Result<SocketAddr> {
    let addrs = tokio::net::lookup_host((host, port)).await?;
    udp_peer_among(bind, addrs, ipv4_peer).ok_or_else(|| {
        let family = if bind.is_ipv4() || ipv4_peer {
            "IPv4 "
        } else {
            ""
        };
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no {family}address for {host}"),
        )
    })
}

/// The choice [`resolve_udp_peer`] makes among a host's addresses: the first IPv4 one
/// for an IPv4 socket or a roscpp peer, else the first of either family; an IPv4 address
/// as IPv4-mapped on a dual-stack socket.
pub(crate) fn udp_peer_among(
    bind: std::net::IpAddr,
    addrs: impl IntoIterator<Item = SocketAddr>,
    ipv4_peer: bool,
) -> Option<SocketAddr> {
    let mut addrs = addrs.into_iter();
    let first = if bind.is_ipv4() || ipv4_peer {
        addrs.find(|a| a.ip().to_canonical().is_ipv4())?
    } else {
        addrs.next()?
    };
    Some(match first.ip().to_canonical() {
        std::net::IpAddr::V4(v4) if !bind.is_ipv4() => {
            SocketAddr::new(v4.to_ipv6_mapped().into(), first.port())
        }
        std::net::IpAddr::V4(v4) => SocketAddr::new(v4.into(), first.port()),
        _ => first,
    })
}

/// Whether `host` (an address or a name) has an IPv4 address, which a roscpp publisher
/// needs to send UDPROS to it; a subscriber whose host has none offers
/// [`UDPROS6`](crate::wire::negotiation::UDPROS6) instead.
pub(crate) async fn has_ipv4_address(host: &str) -> bool {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return ip.to_canonical().is_ipv4();
    }
    resolve_ipv4(host, 0).await.is_ok()
}

/// Resolves a host name to an IPv4 address (roscpp's UDPROS is IPv4 only).
pub async fn resolve_ipv4(host: &str, port: u16) -> std::io::Result<SocketAddr> {
    tokio::net::lookup_host((host, port))
        .await?
        .find(SocketAddr::is_ipv4)
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no IPv4 address for {host}"),
            )
        })
}
