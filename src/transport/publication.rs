//! One advertised topic: the links to its subscribers, each fed the same serialized frame,
//! sent at once when the link is idle or else through its own drop-oldest queue, so
//! `publish` never waits for a slow subscriber.

use super::host_share::HostBudgets;
use super::queue::DropOldest;
use super::sender::{DirectSend, LinkSender, QueuedFrame, SenderCells};
use super::{
    FecSendCounters, GovernorCell, LinkStats, LinkTotals, Protocol, SecureCell, SecureSendLink,
    SubscriberLinkStats,
};
use crate::socket::SendSocket;
use crate::wire::freshness::Cadence;
use crate::wire::header::ConnectionHeader;
use crate::wire::link_setup::SenderTerms;
use crate::wire::topic::{SubscriberRefusal, TopicIdentity};
use crate::wire::udpros::fec::{FecPolicy, LinkFec};
use crate::wire::udpros::governor::GovernorConfig;
use bytes::Bytes;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Why a publication turns a subscriber away; its text is the `error` field of the reply
/// (TCPROS) or the status of requestTopic's answer.
#[derive(Debug)]
pub(crate) enum LinkRefusal {
    /// The subscriber's header does not match the topic.
    Handshake(SubscriberRefusal),
    /// The publication has [`AdvertiseOptions::max_links`](crate::node::AdvertiseOptions::max_links) links.
    AtCap { topic: String, links: usize },
    /// The process is near its descriptor limit.
    NoDescriptors { topic: String },
    /// The subscriber's host has [`AdvertiseOptions::max_links_per_host`](crate::node::AdvertiseOptions::max_links_per_host) links.
    HostAtCap {
        topic: String,
        host: IpAddr,
        links: usize,
    },
}

impl std::fmt::Display for LinkRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkRefusal::Handshake(refusal) => refusal.fmt(f),
            LinkRefusal::AtCap { topic, links } => write!(
                f,
                "{topic} already has {links} subscriber links, its limit (AdvertiseOptions::max_links)"
            ),
            LinkRefusal::NoDescriptors { topic } => write!(
                f,
                "{topic}: this node is near its descriptor limit and keeps the rest for its own work"
            ),
            LinkRefusal::HostAtCap { topic, host, links } => write!(
                f,
                "{topic} already has {links} subscriber links to {host}, its limit per host (AdvertiseOptions::max_links_per_host)"
            ),
        }
    }
}

/// Why a publisher could not open the UDPROS link a subscriber asked for.
#[derive(Debug)]
pub(crate) enum UdpLinkError {
    /// The publication turned the subscriber away.
    Refused(LinkRefusal),
    /// The subscriber's host did not resolve to an address this node can send to.
    Resolve { host: String, error: std::io::Error },
    /// `ROS_HOSTNAME` or `ROS_IP` name a loopback address and the subscriber is elsewhere.
    OnlyLocal { host: String },
    /// The socket could not be made, connected or inspected.
    Socket(std::io::Error),
    /// The datagram size the plan chose is unusable.
    Datagram(crate::wire::udpros::FragmentError),
    /// The secure link's handshake refused the subscriber (said to it, and logged).
    Secure(crate::wire::secure::handshake::Refused),
    /// The OS gave no random bytes for the link's nonce.
    Random(crate::secure::KeyFileError),
}

impl std::fmt::Display for UdpLinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UdpLinkError::Refused(refusal) => refusal.fmt(f),
            UdpLinkError::Resolve { host, error } => write!(f, "cannot resolve {host}: {error}"),
            UdpLinkError::OnlyLocal { host } => write!(
                f,
                "ROS_HOSTNAME / ROS_IP allow only local connections, not {host}"
            ),
            UdpLinkError::Socket(e) => write!(f, "UDP socket: {e}"),
            UdpLinkError::Datagram(e) => e.fmt(f),
            UdpLinkError::Secure(refused) => write!(f, "secure link refused: {refused}"),
            UdpLinkError::Random(e) => e.fmt(f),
        }
    }
}

impl From<LinkRefusal> for UdpLinkError {
    fn from(refusal: LinkRefusal) -> Self {
        UdpLinkError::Refused(refusal)
    }
}

impl From<std::io::Error> for UdpLinkError {
    fn from(e: std::io::Error) -> Self {
        UdpLinkError::Socket(e)
    }
}

/// One subscriber's connection.
#[derive(Debug)]
pub(crate) struct SubscriberLink {
    /// The id getBusInfo and getBusStats report.
    pub id: u32,
    pub caller_id: String,
    pub protocol: Protocol,
    pub peer: SocketAddr,
    pub local_port: u16,
    pub stats: LinkStats,
    /// FEC, on a UDPROS link to a udpros subscriber that agreed on it.
    pub fec: Option<(LinkFec, Arc<FecSendCounters>)>,
    /// What the link's governor knows, on a governed link.
    pub governor: Option<GovernorCell>,
    /// How a secure link is sealed, and on UDPROS what its sender counted.
    pub secure: Option<SecureSend>,
    /// The largest datagram, UDPROS header included, on a UDPROS link.
    pub max_datagram: Option<usize>,
    /// The type and full definition the subscriber's header carried, kept only by a
    /// publication of any type (md5sum `*`), which is there to learn them.
    pub subscriber_type: std::sync::Mutex<Option<(String, String)>>,
    queue: DropOldest<QueuedFrame>,
    sender: tokio::sync::Mutex<LinkSender>,
    closed: AtomicBool,
    /// Tells the link's sender, which may be waiting for its host's budget, that it closed.
    closing: Option<tokio::sync::watch::Sender<bool>>,
}

impl SubscriberLink {
    /// The link's counters and state now.
    pub(crate) fn snapshot(&self) -> SubscriberLinkStats {
        let LinkTotals {
            bytes,
            messages,
            drops,
        } = self.stats.totals();
        SubscriberLinkStats {
            caller_id: self.caller_id.clone(),
            protocol: self.protocol,
            peer: self.peer,
            messages,
            bytes,
            drops,
            fec: self
                .fec
                .as_ref()
                .map(|(link, counters)| counters.snapshot(*link)),
            governor: self
                .governor
                .as_ref()
                .and_then(|cell| *cell.lock().unwrap_or_else(|e| e.into_inner())),
            secure: self.secure.as_ref().map(SecureSend::snapshot),
            max_datagram: self.max_datagram,
            subscriber_type: self
                .subscriber_type
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.queue.close();
        if let Some(closing) = &self.closing {
            closing.send_replace(true);
        }
    }

    /// Sends a frame from the publishing thread when the link is idle, else queues it for
    /// the link's task, as published at `now`.
    pub(crate) fn offer(&self, frame: &Bytes, now: Instant) {
        if let Ok(mut sender) = self.sender.try_lock() {
            // Frames already queued go first: then this one queues behind them.
            if self.queue.is_empty() {
                match sender.try_send_now(frame) {
                    DirectSend::Sent => return self.stats.add_message(frame.len()),
                    DirectSend::Started => {
                        drop(sender);
                        self.queue.kick();
                        return self.stats.add_message(frame.len());
                    }
                    DirectSend::Failed(e) => {
                        log_link_end(&self.caller_id, &e);
                        return self.close();
                    }
                    DirectSend::NotNow => {}
                }
            }
        }
        self.queue.push(QueuedFrame::published(frame.clone(), now));
    }
}

/// How a published frame reaches each link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handoff {
    /// Sent from the publishing thread where the link is idle, queued elsewhere.
    TryNow,
    /// Queued for every link's task (which sends piled-up frames together).
    Queue,
}

/// A secure link's seal, as the rest of the link knows it.
#[derive(Debug)]
pub(crate) struct SecureSend {
    mode: crate::wire::secure::Mode,
    cipher: crate::wire::secure::Cipher,
    /// Where a UDPROS link's sender counts (none on TCPROS).
    counts: Option<SecureCell>,
}

impl SecureSend {
    fn new(link: &crate::wire::secure::LinkSecurity, counts: Option<SecureCell>) -> SecureSend {
        SecureSend {
            mode: link.mode,
            cipher: link.cipher,
            counts,
        }
    }

    fn snapshot(&self) -> SecureSendLink {
        SecureSendLink {
            mode: self.mode,
            cipher: self.cipher,
            datagrams: self
                .counts
                .as_ref()
                .and_then(|cell| *cell.lock().unwrap_or_else(|e| e.into_inner())),
        }
    }
}

/// What the rest of the link holds of its sender, which its task keeps locked while it
/// sends: where the statistics calls read what a UDPROS link's sender knows of its FEC and
/// its governor (nothing, on a TCPROS link), and how closing the link ends a wait for the
/// host's budget.
#[derive(Debug, Default)]
struct SenderHandles {
    fec: Option<(LinkFec, Arc<FecSendCounters>)>,
    governor: Option<GovernorCell>,
    secure: Option<SecureSend>,
    /// Set to true as the link closes (when it shares its host's budget).
    closing: Option<tokio::sync::watch::Sender<bool>>,
    /// The largest datagram a UDPROS link sends.
    max_datagram: Option<usize>,
}

/// What one publication's subscriber links may hold and how many there may be.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinkLimits {
    /// Messages queued per link.
    pub queue_size: usize,
    /// Bytes queued per link (the newest message is always kept).
    pub queue_bytes: usize,
    /// Links at once.
    pub max_links: usize,
    /// Links at once to one host.
    pub max_links_per_host: usize,
    /// FEC on UDPROS links to udpros subscribers that ask for it.
    pub fec: FecPolicy,
    /// The governor's limits on UDPROS links to udpros subscribers that send feedback.
    pub governor: Option<GovernorConfig>,
    /// The age past which a message is not worth sending on a TCPROS link off this host
    /// (see [`crate::wire::freshness`]); `None` sends everything the queue holds.
    pub freshness: Option<Duration>,
    /// The most each link sends, bytes per second (`None`: no cap).
    pub max_rate: Option<f64>,
    /// The topic's messages go before bulk ones in a host's budget, whatever their size.
    pub urgent: bool,
}

/// Descriptors a node keeps for its own work when it takes a subscriber link: a
/// publication refuses links that would leave fewer.
const DESCRIPTOR_MARGIN: usize = 128;

pub(crate) struct Publication {
    /// What the topic carries and who publishes it, as the handshake states it.
    pub info: TopicIdentity,
    /// The type's first field is `std_msgs/Header header`: its `seq` is filled in.
    has_header: bool,
    pub latch: bool,
    limits: LinkLimits,
    /// The node's budgets per subscriber host.
    hosts: Arc<HostBudgets>,
    links: Mutex<Vec<Arc<SubscriberLink>>>,
    latched: Mutex<Option<Bytes>>,
    messages: AtomicU64,
    link_ids: Arc<AtomicU32>,
    /// The last `header.seq` given out (see [`Publication::stamp_seq`]).
    seq: AtomicU32,
}

impl std::fmt::Debug for Publication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publication")
            .field("topic", &self.info.topic)
            .finish()
    }
}

/// The longest subscriber definition a publication of any type keeps per link.
const MAX_KEPT_DEFINITION: usize = 256 << 10;

/// The receive buffer of a UDPROS link's socket (the kernel doubles it and counts each
/// datagram's whole buffer, kilobytes on loopback): room for a few dozen datagrams. 8 KiB
/// was too small: a new link's first message then reached the subscriber seconds late
/// (`hostile_master.rs`'s 10k fan-out test, 3 runs in 3; mechanism not pinned down: what the
/// subscriber sends the publisher as the link starts may be what was dropped).
pub(crate) const REPORT_BUFFER_BYTES: usize = 128 << 10;

impl Publication {
    pub(crate) fn new(
        info: TopicIdentity,
        has_header: bool,
        latch: bool,
        limits: LinkLimits,
        hosts: Arc<HostBudgets>,
        link_ids: Arc<AtomicU32>,
    ) -> Publication {
        Publication {
            info,
            has_header,
            latch,
            limits: LinkLimits {
                queue_size: limits.queue_size.max(1),
                ..limits
            },
            hosts,
            links: Mutex::new(Vec::new()),
            latched: Mutex::new(None),
            messages: AtomicU64::new(0),
            link_ids,
            seq: AtomicU32::new(0),
        }
    }

    fn links(&self) -> std::sync::MutexGuard<'_, Vec<Arc<SubscriberLink>>> {
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands one frame (length prefix included) to every subscriber; never waits. Idle
    /// links send it at once, on this thread.
    pub(crate) fn publish_frame(&self, frame: Bytes) {
        self.hand_out(frame, Handoff::TryNow);
    }

    /// Writes the topic's next sequence number into the frame's `header.seq` (the first
    /// four bytes of the body of a type whose first field is a Header), as rospy does: the
    /// first message a subscriber can receive is 1, and publishing to nobody uses no number.
    /// Whatever the caller put there is replaced (on the wire; the caller's message is not
    /// touched). A latched frame is later sent unchanged to late subscribers, as roscpp
    /// does (rospy numbers each anew).
    fn stamp_seq(&self, open_links: &[Arc<SubscriberLink>], frame: Bytes) -> Bytes {
        if !self.has_header || frame.len() < 8 || open_links.is_empty() {
            return frame;
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        // A frame just serialized is not shared: this writes in place, without a copy.
        let mut frame = frame
            .try_into_mut()
            .unwrap_or_else(|shared| bytes::BytesMut::from(&shared[..]));
        frame[4..8].copy_from_slice(&seq.to_le_bytes());
        frame.freeze()
    }

    fn hand_out(&self, frame: Bytes, how: Handoff) {
        let mut links = self.links();
        links.retain(|l| !l.is_closed());
        let frame = self.stamp_seq(&links, frame);
        if self.latch {
            *self.latched.lock().unwrap_or_else(|e| e.into_inner()) = Some(frame.clone());
        }
        self.messages.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        for link in links.iter() {
            match how {
                Handoff::TryNow => link.offer(&frame, now),
                // A publisher that waits for room loses nothing, however late.
                Handoff::Queue => link.queue.push(QueuedFrame::never_stale(frame.clone())),
            }
        }
    }

    /// Like [`publish_frame`](Self::publish_frame), but first waits until every
    /// subscriber's queue has room, so nothing is dropped for a slow subscriber: the
    /// publisher goes at the pace of the slowest link instead. Made for throughput, it
    /// always queues: the links' tasks then send what piled up together (UDP: up to 64
    /// datagrams per system call) rather than one system call per message.
    pub(crate) async fn publish_frame_when_room(&self, frame: Bytes) {
        for link in &self.subscriber_links() {
            link.queue.wait_for_room().await;
        }
        self.hand_out(frame, Handoff::Queue);
    }

    /// Whether a message published now goes anywhere: a subscriber is linked, or the topic
    /// latches (the frame waits for late subscribers). When not, a typed publisher skips
    /// serializing it, as roscpp does, and only counts it ([`count_unsent`](Self::count_unsent)).
    pub(crate) fn wants_frames(&self) -> bool {
        self.latch || self.links().iter().any(|l| !l.is_closed())
    }

    /// Counts a message published while nobody was linked, never serialized.
    pub(crate) fn count_unsent(&self) {
        self.messages.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn num_subscribers(&self) -> usize {
        self.links().iter().filter(|l| !l.is_closed()).count()
    }

    pub(crate) fn messages_sent(&self) -> u64 {
        self.messages.load(Ordering::Relaxed)
    }

    pub(crate) fn subscriber_links(&self) -> Vec<Arc<SubscriberLink>> {
        self.links()
            .iter()
            .filter(|l| !l.is_closed())
            .cloned()
            .collect()
    }

    /// The handshake's verdict on a subscriber's header: our reply header, or the refusal.
    pub(crate) fn accept(
        &self,
        header: &ConnectionHeader,
    ) -> Result<ConnectionHeader, LinkRefusal> {
        self.info
            .accept_subscriber(header, self.latch)
            .map_err(LinkRefusal::Handshake)
    }

    /// Whether one more subscriber link is within this publication's cap and leaves the
    /// node its margin of descriptors; if not, the status that says why.
    pub(crate) fn admit_any(&self) -> Result<(), LinkRefusal> {
        let topic = self.info.topic.clone();
        let links = self.num_subscribers();
        if links >= self.limits.max_links {
            return Err(LinkRefusal::AtCap { topic, links });
        }
        if !crate::connections::descriptors_to_spare(DESCRIPTOR_MARGIN) {
            return Err(LinkRefusal::NoDescriptors { topic });
        }
        Ok(())
    }

    /// Whether one more link to `host` is within the cap per host (the caller has checked
    /// [`admit_any`](Self::admit_any)).
    pub(crate) fn admit_host(&self, host: IpAddr) -> Result<(), LinkRefusal> {
        let host = host.to_canonical();
        let from_host = self
            .links()
            .iter()
            .filter(|l| !l.is_closed() && l.peer.ip().to_canonical() == host)
            .count();
        if from_host >= self.limits.max_links_per_host {
            return Err(LinkRefusal::HostAtCap {
                topic: self.info.topic.clone(),
                host,
                links: from_host,
            });
        }
        Ok(())
    }

    /// A link and its task.
    fn add_link(
        &self,
        caller_id: &str,
        protocol: Protocol,
        peer: SocketAddr,
        local_port: u16,
        sender: LinkSender,
        handles: SenderHandles,
    ) -> Arc<SubscriberLink> {
        let SenderHandles {
            fec,
            governor,
            secure,
            closing,
            max_datagram,
        } = handles;
        let link = Arc::new(SubscriberLink {
            id: self.link_ids.fetch_add(1, Ordering::Relaxed),
            caller_id: caller_id.to_string(),
            protocol,
            peer,
            local_port,
            stats: LinkStats::default(),
            fec,
            governor,
            secure,
            max_datagram,
            subscriber_type: std::sync::Mutex::new(None),
            queue: DropOldest::bounded(
                self.limits.queue_size,
                self.limits.queue_bytes,
                QueuedFrame::len,
            ),
            sender: tokio::sync::Mutex::new(sender),
            closed: AtomicBool::new(false),
            closing,
        });
        if let Some(frame) = self
            .latched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            link.queue
                .push(QueuedFrame::published(frame, Instant::now()));
        }
        {
            // Closed links go here too, not only as a message is published: a publication
            // that sends to its links one by one (a guest's) publishes nothing itself.
            let mut links = self.links();
            links.retain(|l| !l.is_closed());
            links.push(link.clone());
        }
        tokio::spawn(serve(link.clone()));
        link
    }

    /// Serves a TCP subscriber whose handshake succeeded (our reply already written).
    ///
    /// With `TCP_NODELAY` whatever the subscriber's `tcp_nodelay` says (the field asks for
    /// it; a "0" asks for nothing). A link writes each message whole, and what queued
    /// behind a send in one call, so Nagle's algorithm has nothing left to merge: it can
    /// only hold a message until the previous one is acknowledged, and a subscriber that
    /// delays its acknowledgements (roslibrust's, which sends "0") then got each S5
    /// message up to 11 ms late.
    pub(crate) fn add_tcp_link(
        &self,
        stream: TcpStream,
        caller_id: &str,
        header: &crate::wire::header::ConnectionHeader,
        secure: Option<&crate::wire::secure::LinkSecurity>,
    ) {
        let peer = stream
            .peer_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let local_port = stream.local_addr().map(|a| a.port()).unwrap_or(0);
        let _ = stream.set_nodelay(true);
        crate::socket::set_keepalive(&stream);
        // A capped link is paced by the kernel (TCP's own pacing, no qdisc needed).
        let capped = self
            .max_rate()
            .is_some_and(|rate| crate::socket::cap_tcp_rate(&stream, rate));
        // Off this host, or capped, what a link holds is bounded by age: the kernel keeps
        // only a little unsent (so the link, not the kernel, chooses what goes next) and
        // the link drops what would arrive stale. To this host (a recorder, a slow local
        // reader) every message the queue holds is sent, as roscpp does.
        let freshness = self
            .limits
            .freshness
            .filter(|_| capped || !peer.ip().to_canonical().is_loopback())
            .filter(|_| crate::socket::hold_little_unsent(&stream))
            .map(crate::wire::freshness::Freshness::new);
        let (mut reader, writer) = stream.into_split();
        // A publication of any type is there to learn its subscribers' type: what their
        // headers say of it is kept (a definition of at most 256 KiB).
        let subscriber_type = match (header.get("type"), header.get("message_definition")) {
            (Some(ty), Some(definition))
                if self.info.md5sum == "*" && definition.len() <= MAX_KEPT_DEFINITION =>
            {
                Some((ty.to_string(), definition.to_string()))
            }
            _ => None,
        };
        let sealer = secure.map(|link| link.publisher_stream().0);
        let mut sender = LinkSender::tcp(writer, freshness, sealer);
        let handles = SenderHandles {
            secure: secure.map(|link| SecureSend::new(link, None)),
            closing: self.share_host(&mut sender, peer),
            ..SenderHandles::default()
        };
        let link = self.add_link(caller_id, Protocol::Tcp, peer, local_port, sender, handles);
        if let Some(learned) = subscriber_type {
            if let Ok(mut kept) = link.subscriber_type.lock() {
                *kept = Some(learned);
            }
        }
        // The subscriber sends nothing after its header: any read completing means it left.
        tokio::spawn(async move {
            let mut buf = [0u8; 64];
            while let Ok(1..) = reader.read(&mut buf).await {}
            link.close();
        });
    }

    /// Opens a UDP link to a subscriber (negotiated through requestTopic).
    pub(crate) fn add_udp_link(
        &self,
        socket: std::net::UdpSocket,
        caller_id: &str,
        terms: SenderTerms,
    ) -> Result<Arc<SubscriberLink>, UdpLinkError> {
        let peer = socket.peer_addr()?;
        let local_port = socket.local_addr().map(|a| a.port()).unwrap_or(0);
        // All this socket receives are the subscriber's loss reports, of which only the
        // newest counts: a small buffer bounds what a flood of forged ones (from the
        // subscriber's address, all a connected socket takes) can queue.
        let _ = socket2::SockRef::from(&socket).set_recv_buffer_size(REPORT_BUFFER_BYTES);
        let socket = SendSocket::new(socket)?;
        let counters = terms.fec.map(|_| Arc::new(FecSendCounters::default()));
        let governor = terms.governor.map(|_| GovernorCell::default());
        // Sealed only toward a udpros subscriber (as the core's sender does).
        let secure = terms.secure.as_ref().filter(|_| terms.udpros_peer);
        let secure_counts = secure.map(|_| SecureCell::default());
        let mut sender = LinkSender::udp(
            socket,
            &terms,
            SenderCells {
                fec: counters.clone(),
                governor: governor.clone(),
                secure: secure_counts.clone(),
            },
        )
        .map_err(UdpLinkError::Datagram)?;
        let handles = SenderHandles {
            fec: terms.fec.zip(counters),
            governor,
            secure: secure.map(|link| SecureSend::new(link, secure_counts)),
            closing: self.share_host(&mut sender, peer),
            max_datagram: Some(terms.max_datagram),
        };
        Ok(self.add_link(caller_id, Protocol::Udp, peer, local_port, sender, handles))
    }

    /// The FEC this publication offers udpros subscribers.
    pub(crate) fn fec(&self) -> FecPolicy {
        self.limits.fec
    }

    /// The governor this publication puts on links to udpros subscribers that send
    /// feedback (`None`: fixed pacing).
    pub(crate) fn governor(&self) -> Option<GovernorConfig> {
        self.limits.governor
    }

    /// The cap on each link's rate, bytes per second: the user's, or the node's per host
    /// when that is lower and the topic is not urgent (one link never sends more than its
    /// host's share; several share it through [`share_host`](Self::share_host)).
    pub(crate) fn max_rate(&self) -> Option<f64> {
        // An urgent topic's links are not paced at the host's rate: their messages go
        // at once, and the budget holds them to the rate only beyond its allowance.
        let host = self.hosts.rate().filter(|_| !self.limits.urgent);
        match (self.limits.max_rate, host) {
            (Some(link), Some(host)) => Some(link.min(host)),
            (one, other) => one.or(other),
        }
    }

    /// Gives a new link to `peer` its share of the host's budget, if the node has them:
    /// what tells its waits for the budget that the link closed.
    fn share_host(
        &self,
        sender: &mut LinkSender,
        peer: SocketAddr,
    ) -> Option<tokio::sync::watch::Sender<bool>> {
        let (closing, closed) = tokio::sync::watch::channel(false);
        let share = self.hosts.share(peer.ip(), self.limits.urgent, closed)?;
        sender.share_host(share);
        Some(closing)
    }

    /// Closes every link (udpros UDP peers are sent ERR).
    pub(crate) fn close(&self) {
        for link in self.links().drain(..) {
            link.close();
        }
    }
}

impl Drop for Publication {
    fn drop(&mut self) {
        self.close();
    }
}

/// Drives one link: sends what `publish` queued or left unfinished, heartbeats on idle
/// udpros UDP links, and says goodbye when the link closes.
async fn serve(link: Arc<SubscriberLink>) {
    // When the idle link's next heartbeat is due, as its sender says; a direct send from
    // `publish` moves it later, which the wake finds (no PING then) and reschedules.
    let mut next_heartbeat = link.sender.lock().await.next_heartbeat();
    let mut frames: Vec<QueuedFrame> = Vec::new();
    let mut cadence = Cadence::new();
    let served: std::io::Result<()> = async {
        loop {
            tokio::select! {
                _ = link.queue.wait_ready() => {}
                _ = crate::time::sleep_until_due(next_heartbeat) => {
                    let mut sender = link.sender.lock().await;
                    sender.heartbeat().await?;
                    next_heartbeat = sender.next_heartbeat();
                    continue;
                }
            }
            // Frames are taken only under the sender's lock, so a direct send from
            // `publish` (which needs the lock and an empty queue) never overtakes them.
            let mut sender = link.sender.lock().await;
            sender.finish().await?;
            while take_queued(&link, &mut frames, &mut cadence) {
                if let Some(deadline) = sender.hold_until(&cadence, &frames) {
                    // A fresher message is due soon: the link waits for it (or the
                    // deadline), sending filler meanwhile if its governor probes, then
                    // judges both (the older one is dropped if its rate cannot carry
                    // both within their freshness).
                    let newer = async {
                        // `wait_ready` may return early (a wake left by what was taken).
                        while link.queue.is_empty() && !link.queue.is_closed() {
                            link.queue.wait_ready().await;
                        }
                    };
                    tokio::select! {
                        _ = newer => {}
                        filled = sender.fill_hold(deadline) => filled?,
                    }
                    take_queued(&link, &mut frames, &mut cadence);
                }
                sender.send_all(&mut frames, &link.stats).await?;
            }
            sender.unwatch();
            next_heartbeat = sender.next_heartbeat();
            if link.queue.is_closed() {
                return Ok(());
            }
        }
    }
    .await;
    if let Err(e) = served {
        log_link_end(&link.caller_id, &e);
    }
    link.close();
    link.sender.lock().await.goodbye().await;
}

/// Appends what `link`'s queue holds to `frames`, telling `cadence` when each was
/// published; false if it held nothing.
fn take_queued(
    link: &SubscriberLink,
    frames: &mut Vec<QueuedFrame>,
    cadence: &mut Cadence,
) -> bool {
    let from = frames.len();
    if !link.queue.take_all(frames) {
        return false;
    }
    for at in frames[from..].iter().filter_map(|q| q.at) {
        cadence.published(at);
    }
    true
}

/// Says why a link to a subscriber ended, once. A subscriber that left shows as the
/// kernel's port-unreachable (UDP) or a reset (TCP): that is news, not a fault; anything
/// else is a failure someone should see.
fn log_link_end(caller_id: &str, e: &std::io::Error) {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused | ConnectionReset | BrokenPipe => {
            tracing::info!("link to {caller_id} closed: {e}")
        }
        _ => tracing::warn!("link to {caller_id} failed and was closed: {e}"),
    }
}
