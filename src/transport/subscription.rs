//! One subscribed topic: a link per publisher, each negotiating its transport in the
//! subscription's order of preference (UDPROS, then TCPROS, by default), reading messages
//! into the subscription's drop-oldest queue, and reconnecting while the master lists its
//! publisher.

use super::queue::DropOldest;
use super::{offload, udp_socket, LinkStats, Protocol, LIVENESS_TIMEOUT, UDPROS_PEER_FIELD};
use crate::api::ok_value;
use crate::wire::header::{ConnectionHeader, HeaderLimits};
use crate::wire::tcpros::FrameDecoder;
use crate::wire::udpros::{Event, Reassembler, ReassemblerConfig, UdpStats};
use crate::xmlrpc::{Value, XmlRpcClient};
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

#[derive(Debug, Clone)]
pub struct SubscriptionConfig {
    pub topic: String,
    pub msg_type: String,
    pub md5sum: String,
    pub definition: String,
    /// Transports to offer, most preferred first.
    pub transports: Vec<Protocol>,
    pub max_datagram_size: usize,
    pub tcp_nodelay: bool,
    pub queue_size: usize,
    pub max_message_size: usize,
}

/// A received message and what its publisher said of itself.
#[derive(Debug, Clone)]
pub struct Received {
    pub body: Bytes,
    pub publisher: Arc<ConnectionHeader>,
    pub protocol: Protocol,
}

/// What a link currently knows, for statistics and `getBusInfo`.
#[derive(Debug, Clone, Default)]
pub struct LinkStatus {
    pub protocol: Option<Protocol>,
    pub connected: bool,
    pub local_port: u16,
    pub peer: Option<SocketAddr>,
    pub header: Option<Arc<ConnectionHeader>>,
    pub udp: UdpStats,
}

pub struct PublisherLink {
    pub uri: String,
    pub id: u32,
    pub stats: LinkStats,
    status: Mutex<LinkStatus>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl PublisherLink {
    pub fn status(&self) -> LinkStatus {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_status(&self, f: impl FnOnce(&mut LinkStatus)) {
        f(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn stop(&self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
            task.abort();
        }
    }
}

impl Drop for PublisherLink {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Who this node is, as its links tell publishers.
#[derive(Debug, Clone)]
pub struct Local {
    pub node_name: String,
    pub node_uri: String,
    pub host: String,
    pub bind: IpAddr,
    pub client: XmlRpcClient,
    pub link_ids: Arc<AtomicU32>,
}

pub struct Subscription {
    pub config: SubscriptionConfig,
    local: Local,
    links: Mutex<HashMap<String, Arc<PublisherLink>>>,
    /// One queue per subscriber handle on this topic.
    sinks: Mutex<Vec<Arc<DropOldest<Received>>>>,
    /// publisherUpdate calls so far; changed and read only under the `links` lock.
    updates: AtomicU64,
    closed: AtomicBool,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("topic", &self.config.topic)
            .finish()
    }
}

const FIRST_RETRY: Duration = Duration::from_millis(100);
const MAX_RETRY: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a UDP link checks that its publisher still sends (or heartbeats).
const LIVENESS_CHECK: Duration = Duration::from_millis(250);
/// A new UDP link on which this many messages began and none completed is failing: the
/// path drops what the publisher sends, whatever its heartbeats say.
const INCOMPLETE_BEFORE_FAILURE: u64 = 10;

impl Subscription {
    pub fn new(config: SubscriptionConfig, local: Local) -> Arc<Subscription> {
        Arc::new(Subscription {
            config,
            local,
            links: Mutex::new(HashMap::new()),
            sinks: Mutex::new(Vec::new()),
            updates: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        })
    }

    fn sinks(&self) -> std::sync::MutexGuard<'_, Vec<Arc<DropOldest<Received>>>> {
        self.sinks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new queue fed every message of this topic (one per subscriber handle).
    pub fn add_sink(&self, queue_size: usize) -> Arc<DropOldest<Received>> {
        let sink = Arc::new(DropOldest::new(queue_size));
        self.sinks().push(sink.clone());
        sink
    }

    /// Removes a handle's queue; returns how many remain.
    pub fn remove_sink(&self, sink: &Arc<DropOldest<Received>>) -> usize {
        let mut sinks = self.sinks();
        sinks.retain(|s| !Arc::ptr_eq(s, sink));
        sink.close();
        sinks.len()
    }

    fn links(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<PublisherLink>>> {
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn publisher_links(&self) -> Vec<Arc<PublisherLink>> {
        let mut links: Vec<_> = self.links().values().cloned().collect();
        links.sort_by_key(|l| l.id);
        links
    }

    /// The master's publisherUpdate: the full, current list of publishers.
    pub fn publisher_update(self: &Arc<Self>, uris: &[String]) {
        let mut links = self.links();
        self.updates.fetch_add(1, Ordering::Relaxed);
        self.set_publishers(&mut links, uris);
    }

    /// How many publisherUpdate calls have arrived; take it before registerSubscriber.
    pub fn update_count(&self) -> u64 {
        let _links = self.links();
        self.updates.load(Ordering::Relaxed)
    }

    /// The publisher list registerSubscriber answered. The master notifies a subscriber
    /// only once it is registered, so an update that arrived since `updates_before` was
    /// computed after this answer: the answer is stale then and must not undo it (a
    /// publisher advertising during our registration would otherwise be dropped for good).
    pub fn registered(self: &Arc<Self>, uris: &[String], updates_before: u64) {
        let mut links = self.links();
        if self.updates.load(Ordering::Relaxed) == updates_before {
            self.set_publishers(&mut links, uris);
        }
    }

    /// Links to new publishers start, links to publishers no longer listed stop (as
    /// roscpp does).
    fn set_publishers(
        self: &Arc<Self>,
        links: &mut HashMap<String, Arc<PublisherLink>>,
        uris: &[String],
    ) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        links.retain(|uri, link| {
            let keep = uris.contains(uri);
            if !keep {
                link.stop();
            }
            keep
        });
        for uri in uris {
            if links.contains_key(uri) {
                continue;
            }
            let link = Arc::new(PublisherLink {
                uri: uri.clone(),
                id: self.local.link_ids.fetch_add(1, Ordering::Relaxed),
                stats: LinkStats::default(),
                status: Mutex::new(LinkStatus::default()),
                task: Mutex::new(None),
            });
            let task = tokio::spawn(run_link(self.clone(), link.clone()));
            *link.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
            links.insert(uri.clone(), link);
        }
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for (_, link) in self.links().drain() {
            link.stop();
        }
        for sink in self.sinks().drain(..) {
            sink.close();
        }
    }

    fn is_listed(&self, link: &Arc<PublisherLink>) -> bool {
        self.links()
            .get(&link.uri)
            .is_some_and(|l| Arc::ptr_eq(l, link))
    }

    fn deliver(
        &self,
        link: &PublisherLink,
        body: Bytes,
        publisher: &Arc<ConnectionHeader>,
        protocol: Protocol,
    ) {
        link.stats.add_message(body.len());
        let received = Received {
            body,
            publisher: publisher.clone(),
            protocol,
        };
        for sink in self.sinks().iter() {
            sink.push(received.clone());
        }
    }

    fn udp_offer(&self, port: u16) -> Value {
        let header = ConnectionHeader::new()
            .with("callerid", self.local.node_name.as_str())
            .with("md5sum", self.config.md5sum.as_str())
            .with("topic", self.config.topic.as_str())
            .with("type", self.config.msg_type.as_str())
            .with(UDPROS_PEER_FIELD, "1");
        Value::Array(vec![
            Value::from("UDPROS"),
            Value::Base64(header.encode_fields()),
            Value::from(self.local.host.as_str()),
            Value::Int(i32::from(port)),
            Value::Int(self.config.max_datagram_size as i32),
        ])
    }

    fn tcp_header(&self) -> ConnectionHeader {
        ConnectionHeader::new()
            .with("callerid", self.local.node_name.as_str())
            .with("md5sum", self.config.md5sum.as_str())
            .with("message_definition", self.config.definition.as_str())
            .with(
                "tcp_nodelay",
                if self.config.tcp_nodelay { "1" } else { "0" },
            )
            .with("topic", self.config.topic.as_str())
            .with("type", self.config.msg_type.as_str())
    }
}

/// Why one attempt at a link ended.
enum Ended {
    /// Worth trying again (the publisher restarted, the network hiccupped).
    Retry(String),
    /// Not worth retrying until the master lists the publisher anew.
    GiveUp(String),
}

/// UDP links in a row that ended before delivering a message, after which a subscription
/// that also offers TCP offers only TCP to that publisher.
const UDP_FAILURES_BEFORE_TCP: u32 = 3;

async fn run_link(sub: Arc<Subscription>, link: Arc<PublisherLink>) {
    let mut delay = FIRST_RETRY;
    let mut udp_failures = 0;
    let can_fall_back = sub.config.transports.contains(&Protocol::Tcp);
    loop {
        let started = Instant::now();
        let messages_before = link.stats.get().1;
        let offer_udp = !(can_fall_back && udp_failures >= UDP_FAILURES_BEFORE_TCP);
        let ended = connect_and_read(&sub, &link, offer_udp).await;
        link.set_status(|s| s.connected = false);
        if !sub.is_listed(&link) {
            return;
        }
        if link.status().protocol == Some(Protocol::Udp) {
            if link.stats.get().1 == messages_before {
                udp_failures += 1;
                if can_fall_back && udp_failures == UDP_FAILURES_BEFORE_TCP {
                    tracing::warn!(
                        "subscription to {} from {}: {udp_failures} UDPROS links in a row delivered nothing; falling back to TCPROS",
                        sub.config.topic,
                        link.uri
                    );
                }
            } else {
                udp_failures = 0;
            }
        }
        if started.elapsed() > MAX_RETRY {
            delay = FIRST_RETRY; // it worked for a while: start again quickly
        }
        match ended {
            Ended::GiveUp(why) => {
                tracing::warn!(
                    "subscription to {} from {}: {why}",
                    sub.config.topic,
                    link.uri
                );
                return;
            }
            // Once per run of failures at warn; the retries after it at debug.
            Ended::Retry(why) if delay == FIRST_RETRY => tracing::warn!(
                "subscription to {} from {}: {why}; retrying",
                sub.config.topic,
                link.uri
            ),
            Ended::Retry(why) => tracing::debug!(
                "subscription to {} from {}: {why}; retrying",
                sub.config.topic,
                link.uri
            ),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_RETRY);
    }
}

/// The UDP socket offered in negotiation. Datagrams that arrive before the publisher's
/// answer (a latched message) wait in its kernel buffer, sized for several messages.
struct UdpOffer {
    port: u16,
    socket: UdpSocket,
    /// Where datagrams are read into: split per read, so the steady state allocates only
    /// when a block of reads has been handed on.
    buf: BytesMut,
}

impl UdpOffer {
    /// The next datagrams (several when the kernel coalesced them), their size and their
    /// sender. Cancel-safe: nothing is lost if the wait is.
    async fn recv(&mut self) -> std::io::Result<(Bytes, usize, SocketAddr)> {
        if self.buf.capacity() - self.buf.len() < offload::MAX_READ {
            self.buf.reserve(4 * offload::MAX_READ);
        }
        let read = offload::recv(&self.socket, &mut self.buf).await?;
        Ok((self.buf.split().freeze(), read.segment, read.from))
    }
}

fn open_udp(sub: &Subscription) -> Result<UdpOffer, String> {
    let buffer = (sub.config.max_message_size.saturating_mul(2)).clamp(1 << 20, 4 << 20);
    let (socket, capped) = udp_socket(SocketAddr::new(sub.local.bind, 0), buffer)
        .map_err(|e| format!("UDP socket: {e}"))?;
    if let Some(granted) = capped {
        tracing::info!(
            "UDP receive buffer for {} capped by the kernel at {granted} bytes (asked {buffer}); raise net.core.rmem_max for large messages",
            sub.config.topic
        );
    }
    let port = socket.local_addr().map_err(|e| e.to_string())?.port();
    offload::enable_coalescing(&socket);
    Ok(UdpOffer {
        port,
        socket,
        buf: BytesMut::new(),
    })
}

async fn connect_and_read(
    sub: &Arc<Subscription>,
    link: &Arc<PublisherLink>,
    offer_udp: bool,
) -> Ended {
    let mut udp = None;
    let mut offers = Vec::new();
    for protocol in &sub.config.transports {
        match protocol {
            Protocol::Udp if !offer_udp => {}
            Protocol::Udp => match open_udp(sub) {
                Ok(offer) => {
                    offers.push(sub.udp_offer(offer.port));
                    udp = Some(offer);
                }
                Err(e) => tracing::warn!("cannot offer UDPROS for {}: {e}", sub.config.topic),
            },
            Protocol::Tcp => offers.push(Value::from(vec!["TCPROS"])),
        }
    }
    let params = vec![
        Value::from(sub.local.node_name.as_str()),
        Value::from(sub.config.topic.as_str()),
        Value::Array(offers),
    ];
    let client = sub.local.client.with_timeout(REQUEST_TIMEOUT);
    let reply = match client.call(&link.uri, "requestTopic", params).await {
        Ok(reply) => reply,
        Err(e) => return Ended::Retry(format!("requestTopic failed: {e}")),
    };
    let chosen = match ok_value(reply) {
        Ok(Value::Array(chosen)) if !chosen.is_empty() => chosen,
        Ok(_) | Err(crate::api::ApiError::Status { code: 0, .. })
            if sub.config.transports == [Protocol::Udp] =>
        {
            return Ended::GiveUp(format!(
                "the publisher at {} does not support UDPROS, and this subscription allows only UDP",
                link.uri
            ));
        }
        Ok(other) => {
            return Ended::GiveUp(format!(
                "no common transport (publisher answered {other:?})"
            ))
        }
        Err(e) => return Ended::GiveUp(format!("publisher refused: {e}")),
    };
    match chosen.first().and_then(Value::as_str) {
        Some("TCPROS") => {
            drop(udp);
            read_tcp(sub, link, &chosen).await
        }
        Some("UDPROS") => match udp {
            Some(offer) => read_udp(sub, link, &chosen, offer).await,
            None => Ended::GiveUp("publisher chose UDPROS, which was not offered".into()),
        },
        other => Ended::GiveUp(format!("publisher chose an unknown transport {other:?}")),
    }
}

async fn read_tcp(sub: &Arc<Subscription>, link: &Arc<PublisherLink>, chosen: &[Value]) -> Ended {
    let (Some(host), Some(port)) = (
        chosen.get(1).and_then(Value::as_str),
        chosen.get(2).and_then(Value::as_i32),
    ) else {
        return Ended::GiveUp(format!("malformed TCPROS answer {chosen:?}"));
    };
    let Ok(port) = u16::try_from(port) else {
        return Ended::GiveUp(format!("bad TCPROS port {port}"));
    };
    let mut stream =
        match tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect((host, port))).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Ended::Retry(format!("connect to {host}:{port}: {e}")),
            Err(_) => return Ended::Retry(format!("connect to {host}:{port} timed out")),
        };
    let _ = stream.set_nodelay(sub.config.tcp_nodelay);
    super::set_keepalive(&stream);
    if let Err(e) = stream.write_all(&sub.tcp_header().encode_tcp()).await {
        return Ended::Retry(format!("sending header: {e}"));
    }
    let limits = HeaderLimits::default();
    let mut decoder = FrameDecoder::new(limits.max_total);
    let mut header: Option<Arc<ConnectionHeader>> = None;
    loop {
        loop {
            match decoder.next_frame() {
                Ok(Some(body)) => match &header {
                    None => {
                        let h = match ConnectionHeader::decode_fields(&body, &limits) {
                            Ok(h) => h,
                            Err(e) => {
                                return Ended::GiveUp(format!("bad header from publisher: {e}"))
                            }
                        };
                        if let Some(error) = h.error() {
                            return Ended::GiveUp(format!(
                                "publisher refused the connection: {error}"
                            ));
                        }
                        if h.get("md5sum").is_none() || h.get("type").is_none() {
                            return Ended::GiveUp("publisher header lacks md5sum or type".into());
                        }
                        let h = Arc::new(h);
                        let (local, peer) = (stream.local_addr().ok(), stream.peer_addr().ok());
                        link.set_status(|s| {
                            *s = LinkStatus {
                                protocol: Some(Protocol::Tcp),
                                connected: true,
                                local_port: local.map_or(0, |a| a.port()),
                                peer,
                                header: Some(h.clone()),
                                udp: UdpStats::default(),
                            }
                        });
                        decoder.set_max_frame(sub.config.max_message_size);
                        header = Some(h);
                    }
                    Some(h) => sub.deliver(link, body, h, Protocol::Tcp),
                },
                Ok(None) => break,
                Err(e) => return Ended::Retry(format!("publisher sent {e}")),
            }
        }
        match stream.read_buf(decoder.buffer_mut()).await {
            Ok(0) => return Ended::Retry("publisher closed the connection".into()),
            Ok(_) => {}
            Err(e) => return Ended::Retry(format!("read: {e}")),
        }
    }
}

async fn read_udp(
    sub: &Arc<Subscription>,
    link: &Arc<PublisherLink>,
    chosen: &[Value],
    mut offer: UdpOffer,
) -> Ended {
    let (Some(conn_id), Some(header_bytes)) = (
        chosen.get(3).and_then(Value::as_i32),
        chosen.get(5).and_then(Value::as_bytes),
    ) else {
        return Ended::GiveUp(format!("malformed UDPROS answer {chosen:?}"));
    };
    let header = match ConnectionHeader::decode_fields(header_bytes, &HeaderLimits::default()) {
        Ok(h) => h,
        Err(e) => return Ended::GiveUp(format!("bad UDPROS header from publisher: {e}")),
    };
    if let Some(error) = header.error() {
        return Ended::GiveUp(format!("publisher refused the connection: {error}"));
    }
    let udpros_peer = header.get(UDPROS_PEER_FIELD).is_some();
    let sources = match AllowedSources::from_answer(&link.uri, chosen, udpros_peer).await {
        Ok(sources) => sources,
        Err(e) => return Ended::Retry(e),
    };
    let header = Arc::new(header);
    // The publisher cuts the stream at the size it answered (an echo of ours).
    let max_datagram = chosen
        .get(4)
        .and_then(Value::as_i32)
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n > crate::wire::udpros::HEADER_LEN)
        .unwrap_or(sub.config.max_datagram_size);
    let config = ReassemblerConfig {
        max_message_size: sub.config.max_message_size,
        // roscpp's ids are opaque; a udpros publisher sends the id it returned.
        connection_id: udpros_peer.then_some(conn_id as u32),
        block_payload: Some(max_datagram - crate::wire::udpros::HEADER_LEN),
        ..ReassemblerConfig::default()
    };
    let mut reassembler = Reassembler::new(config);
    link.set_status(|s| {
        *s = LinkStatus {
            protocol: Some(Protocol::Udp),
            connected: true,
            local_port: offer.port,
            peer: None,
            header: Some(header.clone()),
            udp: UdpStats::default(),
        }
    });
    let mut last_heard = Instant::now();
    // Datagrams from addresses that are not the publisher's, counted with the foreign ones.
    let mut foreign = 0u64;
    // Where the publisher's datagrams come from, as getBusInfo shows it.
    let mut peer: Option<SocketAddr> = None;
    // One timer for the link's life, moved earlier only when a message in reassembly
    // expires sooner: a timer armed per datagram costs a clock read and a timer-wheel
    // insert and removal each time.
    let mut wait = std::pin::pin!(tokio::time::sleep(LIVENESS_CHECK));
    loop {
        if let Some(due) = reassembler.poll_timeout() {
            if due < wait.deadline().into_std() {
                wait.as_mut().reset(due.into());
            }
        }
        tokio::select! {
            received = offer.recv() => {
                let (datagrams, segment, from) = match received {
                    Ok(received) => received,
                    // A transient error (this socket sends nothing, so no port-unreachable):
                    // a pause keeps a persistent one from spinning.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    }
                };
                // The source of the last accepted datagram needs no second look.
                if peer != Some(from) && !sources.allows(from) {
                    foreign += 1;
                    if foreign == 1 {
                        tracing::warn!(
                            "{}: dropping UDPROS datagrams from {from}, which is not the publisher at {}",
                            sub.config.topic, link.uri
                        );
                    }
                    continue;
                }
                if peer != Some(from) {
                    peer = Some(from);
                    link.set_status(|s| s.peer = peer);
                }
                let now = Instant::now();
                for start in (0..datagrams.len()).step_by(segment.max(1)) {
                    let datagram = datagrams.slice(start..(start + segment).min(datagrams.len()));
                    match reassembler.handle(now, datagram) {
                        Some(Event::Message(body)) => {
                            last_heard = now;
                            sub.deliver(link, body, &header, Protocol::Udp);
                        }
                        Some(Event::Ping) => last_heard = now,
                        Some(Event::Closed) => return Ended::Retry("publisher closed the UDPROS link".into()),
                        None => {}
                    }
                }
                let mut stats = *reassembler.stats();
                stats.foreign += foreign;
                link.set_status(|s| s.udp = stats);
            }
            _ = &mut wait => {
                let now = Instant::now();
                reassembler.handle_timeout(now);
                let stats = reassembler.stats();
                if stats.messages == 0 && stats.incomplete >= INCOMPLETE_BEFORE_FAILURE {
                    return Ended::Retry(format!(
                        "{} UDPROS messages begun and none completed (a path MTU that drops fragments, or heavy loss)",
                        stats.incomplete
                    ));
                }
                if udpros_peer && now.duration_since(last_heard) > LIVENESS_TIMEOUT {
                    return Ended::Retry(format!(
                        "publisher silent for {} ms (it heartbeats every {} ms)",
                        LIVENESS_TIMEOUT.as_millis(),
                        super::HEARTBEAT.as_millis()
                    ));
                }
                wait.as_mut().reset((now + LIVENESS_CHECK).into());
            }
        }
    }
}

/// Where a UDPROS link's datagrams may come from: the publisher's host as its answer
/// names it or as its XML-RPC URI does (each resolved), any loopback address when that
/// host is local, and, between udpros peers, only the port the publisher declared, which
/// is the port it sends from. ROS1 has no authentication; this keeps a stranger who reads
/// our port from `getBusInfo` from taking the link over by sending first.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AllowedSources {
    hosts: Vec<IpAddr>,
    port: Option<u16>,
}

impl AllowedSources {
    async fn from_answer(
        publisher_uri: &str,
        chosen: &[Value],
        udpros_peer: bool,
    ) -> Result<AllowedSources, String> {
        let mut names: Vec<String> = Vec::new();
        if let Some(host) = chosen.get(1).and_then(Value::as_str) {
            names.push(host.to_string());
        }
        if let Some(host) = crate::node::host::uri_host(publisher_uri) {
            names.push(host);
        }
        let mut hosts = Vec::new();
        for name in &names {
            let lookup = tokio::net::lookup_host((name.as_str(), 0));
            if let Ok(Ok(addrs)) = tokio::time::timeout(REQUEST_TIMEOUT, lookup).await {
                hosts.extend(addrs.map(|a| a.ip()));
            }
        }
        if hosts.is_empty() {
            return Err(format!("cannot resolve the publisher's host {names:?}"));
        }
        let port = chosen
            .get(2)
            .and_then(Value::as_i32)
            .and_then(|p| u16::try_from(p).ok())
            .filter(|&p| udpros_peer && p != 0);
        Ok(AllowedSources { hosts, port })
    }

    fn allows(&self, from: SocketAddr) -> bool {
        let ip = canonical_ip(from.ip());
        let host_ok = self.hosts.iter().any(|&h| {
            let h = canonical_ip(h);
            h == ip || (h.is_loopback() && ip.is_loopback())
        });
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

    #[tokio::test]
    async fn only_the_publishers_host_and_declared_port_may_send() {
        let chosen = [
            Value::from("UDPROS"),
            Value::from("127.0.0.1"),
            Value::Int(4000),
        ];
        let peer = AllowedSources::from_answer("http://10.1.2.3:1234/", &chosen, true)
            .await
            .unwrap();
        assert!(peer.allows("127.0.0.1:4000".parse().unwrap()));
        assert!(
            peer.allows("10.1.2.3:4000".parse().unwrap()),
            "the URI's host"
        );
        assert!(
            peer.allows("127.0.1.1:4000".parse().unwrap()),
            "loopback is one host"
        );
        assert!(
            !peer.allows("127.0.0.1:4001".parse().unwrap()),
            "another port"
        );
        assert!(
            !peer.allows("10.9.9.9:4000".parse().unwrap()),
            "another host"
        );
        let roscpp = AllowedSources::from_answer("http://10.1.2.3:1234/", &chosen, false)
            .await
            .unwrap();
        assert!(
            roscpp.allows("127.0.0.1:5555".parse().unwrap()),
            "roscpp's port is not its source"
        );
        assert!(!roscpp.allows("10.9.9.9:5555".parse().unwrap()));
    }
}
