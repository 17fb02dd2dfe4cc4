//! One publisher link's task: negotiate with the publisher (requestTopic), then read its
//! TCPROS stream or drive the core's `UdpReceiver` on a UDP socket, and decide from how it
//! ended whether to try again, fall back to TCPROS or give up.

use super::{LinkStatus, PublisherLink, Subscription, REQUEST_TIMEOUT};
use crate::api::ok_value;
use crate::socket::{offload, udp_socket};
use crate::transport::{Protocol, UDPROS_PEER_FIELD};
use crate::wire::header::{ConnectionHeader, HeaderLimits};
use crate::wire::link::{AllowedSources, Attempt, Retry};
use crate::wire::link_setup::receiver_config;
use crate::wire::negotiation::{
    self, subscriber_receive_buffer, GiveUpReason, Offer, SubscriberDecision, SubscriberOffer,
    TopicReply, UdprosAnswer,
};
use crate::wire::secure::handshake::{self, Settled};
use crate::wire::topic::{check_publisher, TopicEvent, TopicReceiver, TopicStreamError};
use crate::wire::udpros::{ReceiverEvent, UdpReceiver, UdpStats};
use crate::xmlrpc::Value;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// Why one attempt at a link ended.
enum Ended {
    /// Worth trying again (the publisher restarted, the network hiccupped).
    Retry(String),
    /// Not worth retrying until the master lists the publisher anew.
    GiveUp(String),
}

pub(super) async fn run_link(sub: Arc<Subscription>, link: Arc<PublisherLink>) {
    let mut retry = Retry::new(sub.config.transports.contains(&Protocol::Tcp));
    loop {
        let started = Instant::now();
        let messages_before = link.stats.totals().messages;
        let ended = connect_and_read(&sub, &link, retry.offer_udp()).await;
        link.set_status(|s| s.connected = false);
        if !sub.is_listed(&link) {
            return;
        }
        let attempt = Attempt {
            started,
            udp: link.status().protocol == Some(Protocol::Udp),
            delivered: link.stats.totals().messages != messages_before,
        };
        let next = retry.ended(attempt, Instant::now());
        let (topic, uri) = (&sub.config.topic, &link.uri);
        if next.fell_back_to_tcp {
            tracing::warn!(
                "subscription to {topic} from {uri}: UDPROS links in a row delivered nothing; falling back to TCPROS",
            );
        }
        match ended {
            Ended::GiveUp(why) => {
                tracing::warn!("subscription to {topic} from {uri}: {why}");
                sub.link_gave_up();
                return;
            }
            // Once per run of failures at warn; the retries after it at debug.
            Ended::Retry(why) if next.first_of_run => {
                tracing::warn!("subscription to {topic} from {uri}: {why}; retrying")
            }
            Ended::Retry(why) => {
                tracing::debug!("subscription to {topic} from {uri}: {why}; retrying")
            }
        }
        tokio::time::sleep(next.after).await;
    }
}

/// The UDP socket offered in negotiation. Datagrams that arrive before the publisher's
/// answer (a latched message) wait in its kernel buffer, sized for several messages.
struct UdpOffer {
    port: u16,
    socket: UdpSocket,
    reader: offload::Reader,
    /// This end's nonce for a secure link's handshake (drawn for every offer; unused
    /// when security is off).
    nonce: [u8; crate::wire::secure::NONCE_LEN],
    /// The publisher's host, resolved once for the route and for the sources allowed.
    publisher: PublisherHost,
}

impl UdpOffer {
    /// The next datagrams, as many as the socket holds. Cancel-safe.
    async fn recv(&mut self) -> std::io::Result<offload::Batch> {
        self.reader.recv(&self.socket).await
    }
}

fn open_udp(sub: &Subscription, publisher: PublisherHost) -> std::io::Result<UdpOffer> {
    let buffer = subscriber_receive_buffer(sub.config.max_message_size);
    let (socket, capped) = udp_socket(SocketAddr::new(sub.local.bind, 0), buffer)?;
    let socket = UdpSocket::from_std(socket)?;
    if let Some(granted) = capped {
        tracing::info!(
            "UDP receive buffer for {} capped by the kernel at {granted} bytes (asked {buffer}); raise net.core.rmem_max for large messages",
            sub.config.topic
        );
    }
    let port = socket.local_addr()?.port();
    offload::enable_coalescing(&socket);
    let nonce = sub
        .local
        .security
        .link_nonce()
        .map_err(std::io::Error::other)?;
    Ok(UdpOffer {
        port,
        socket,
        reader: offload::Reader::keeping_room(crate::wire::udpros::room_after),
        nonce,
        publisher,
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
            Protocol::Udp => match open_udp(sub, PublisherHost::resolve(&link.uri).await) {
                Ok(offer) => {
                    let ipv6_only = !sub.local.bind.is_ipv4()
                        && !crate::transport::has_ipv4_address(&sub.local.host).await;
                    let datagram = datagram_to_ask(sub, &offer.publisher);
                    let entry = sub
                        .udp_offer(offer.port, datagram, ipv6_only, &offer.nonce)
                        .to_params();
                    offers.push(crate::xmlrpc::entry(entry));
                    udp = Some(offer);
                }
                Err(e) => {
                    tracing::warn!(
                        "cannot offer UDPROS for {}: UDP socket: {e}",
                        sub.config.topic
                    )
                }
            },
            Protocol::Tcp => offers.push(crate::xmlrpc::entry(Offer::Tcpros.to_params())),
        }
    }
    let params = vec![
        Value::from(sub.local.node_name.as_str()),
        Value::from(sub.config.topic.as_str()),
        Value::Array(offers),
    ];
    let client = sub.local.client.with_timeout(REQUEST_TIMEOUT);
    let uri = link.uri.clone();
    let call = async move { client.call(&uri, "requestTopic", params).await };
    let reply = match sub.local.on_node_runtime(call).await {
        Some(Ok(reply)) => reply,
        Some(Err(e)) => return Ended::Retry(format!("requestTopic failed: {e}")),
        None => return Ended::Retry("the node's runtime ended".into()),
    };
    let reply = match ok_value(reply) {
        Ok(Value::Array(chosen)) => TopicReply::Chosen(crate::xmlrpc::entry_params(&chosen)),
        Ok(_) => TopicReply::Chosen(Vec::new()),
        Err(crate::api::ApiError::Status { code, message }) => {
            TopicReply::Refused { code, message }
        }
        Err(e) => TopicReply::Refused {
            code: -1,
            message: e.to_string(),
        },
    };
    let offered = SubscriberOffer {
        udp: udp.is_some(),
        udp_only: sub.config.transports == [Protocol::Udp],
    };
    match (offered.decide(reply, &HeaderLimits::default()), udp) {
        (SubscriberDecision::Tcp { host, port }, udp) => {
            drop(udp);
            read_tcp(sub, link, &host, port).await
        }
        (SubscriberDecision::Udp(answer), Some(offer)) => read_udp(sub, link, answer, offer).await,
        // The log line that says why names the publisher.
        (SubscriberDecision::GiveUp(why), _) => Ended::GiveUp(why.to_string()),
        (SubscriberDecision::Udp(_), None) => {
            Ended::GiveUp(GiveUpReason::UdpNotOffered.to_string())
        }
    }
}

async fn read_tcp(
    sub: &Arc<Subscription>,
    link: &Arc<PublisherLink>,
    host: &str,
    port: u16,
) -> Ended {
    let mut stream =
        match tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect((host, port))).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Ended::Retry(format!("connect to {host}:{port}: {e}")),
            Err(_) => return Ended::Retry(format!("connect to {host}:{port} timed out")),
        };
    let _ = stream.set_nodelay(sub.config.tcp_nodelay);
    crate::socket::set_keepalive(&stream);
    // On a node with the key, the header offers a secure link and proves the key; the
    // publisher's answer settles it.
    let nonce = match sub.local.security.link_nonce() {
        Ok(nonce) => nonce,
        Err(e) => return Ended::Retry(e.to_string()),
    };
    let mut ours = sub.identity().tcp_subscriber_header(sub.config.tcp_nodelay);
    sub.offer_security(&mut ours, &nonce);
    if let Err(e) = stream.write_all(&ours.encode_tcp()).await {
        return Ended::Retry(format!("sending header: {e}"));
    }
    let context = crate::wire::secure::stream::tcp_context(&sub.config.topic);
    let mut receiver = TopicReceiver::new(HeaderLimits::default(), sub.config.max_message_size);
    let mut header: Option<Arc<ConnectionHeader>> = None;
    loop {
        let mut delivered = false;
        loop {
            match receiver.poll_event() {
                Ok(Some(TopicEvent::Connected(h))) => {
                    match handshake::accept(sub.local.security.side(), &nonce, &h, &context) {
                        Ok(Settled::Secure(security)) => {
                            receiver.open_with(security.subscriber_stream().0)
                        }
                        Ok(Settled::Plain) => {}
                        Err(refused) => {
                            return Ended::GiveUp(format!("TCPROS link refused: {refused}"))
                        }
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
                            secure: None,
                        }
                    });
                    header = Some(h);
                }
                Ok(Some(TopicEvent::Message(body))) => {
                    if let Some(h) = &header {
                        sub.deliver(link, body, h, Protocol::Tcp);
                        delivered = true;
                    }
                }
                Ok(None) => break,
                Err(e @ TopicStreamError::Publisher(_)) => return Ended::GiveUp(e.to_string()),
                Err(e @ (TopicStreamError::TooLarge(_) | TopicStreamError::Sealed(_))) => {
                    return Ended::Retry(e.to_string())
                }
            }
        }
        if delivered {
            crate::transport::let_readers_run().await;
        }
        crate::socket::acknowledge_promptly(&stream);
        match stream.read_buf(receiver.buffer_mut()).await {
            Ok(0) => return Ended::Retry("publisher closed the connection".into()),
            Ok(_) => {}
            Err(e) => return Ended::Retry(format!("read: {e}")),
        }
    }
}

async fn read_udp(
    sub: &Arc<Subscription>,
    link: &Arc<PublisherLink>,
    answer: UdprosAnswer,
    mut offer: UdpOffer,
) -> Ended {
    let header = answer.header;
    if let Err(refusal) = check_publisher(&header) {
        return Ended::GiveUp(refusal.to_string());
    }
    // A secure link when both ends hold the key; under `require`, a plain answer is
    // refused here, and the log says why.
    let context = handshake::link_context(&sub.config.topic, answer.connection_id as u32);
    let secure = match handshake::accept(sub.local.security.side(), &offer.nonce, &header, &context)
    {
        Ok(Settled::Secure(link)) => Some(link),
        Ok(Settled::Plain) => None,
        Err(refused) => return Ended::GiveUp(format!("UDPROS link refused: {refused}")),
    };
    let udpros_peer = header.get(UDPROS_PEER_FIELD).is_some();
    let sources =
        match allowed_sources(&offer.publisher, &answer.host, answer.port, udpros_peer).await {
            Ok(sources) => sources,
            Err(e) => return Ended::Retry(e.to_string()),
        };
    // The link carries FEC when this end asked and the publisher confirmed (its data
    // blocks are then the code's shards), feedback when the publisher reads it.
    let config = receiver_config(
        &header,
        answer.max_datagram,
        answer.connection_id,
        &sub.config.fec,
        sources,
        sub.config.max_message_size,
        secure,
    );
    if config.fec && !config.sources.all_loopback() {
        crate::transport::prepare_fec_code();
    }
    // Only a governed link's feedback reads when datagrams arrived. (A latched message
    // sent before this is stamped when it is read.)
    if config.feedback {
        offload::enable_arrival_stamps(&offer.socket);
    }
    let header = Arc::new(header);
    let mut receiver = UdpReceiver::new(Instant::now(), config);
    link.set_status(|s| {
        *s = LinkStatus {
            protocol: Some(Protocol::Udp),
            connected: true,
            local_port: offer.port,
            peer: None,
            header: Some(header.clone()),
            udp: UdpStats::default(),
            secure: receiver.secure_stats(),
        }
    });
    // One timer for the link's life, moved earlier when the receiver's deadline comes
    // sooner and re-armed when it fires, never moved later: the receiver tolerates an early
    // `handle_timeout`, and moving the timer to each message's reassembly deadline and back
    // (two resets per message) cost 100 kB messages from roscpp twice the latency (S3 p50
    // 375 against 180 µs).
    let mut wait = std::pin::pin!(tokio::time::sleep_until(receiver.poll_timeout().into()));
    loop {
        let due = receiver.poll_timeout();
        if due < wait.deadline().into_std() {
            wait.as_mut().reset(due.into());
        }
        tokio::select! {
            received = offer.recv() => {
                let batch = match received {
                    Ok(batch) => batch,
                    // A transient error (or the port-unreachable of a loss report sent to a
                    // publisher that left, which its silence will tell): a pause keeps a
                    // persistent one from spinning.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    }
                };
                receiver.on_truncated(batch.dropped);
                let now = Instant::now();
                for read in batch {
                    let (arrived, from) = (read.arrived.unwrap_or(now), read.from);
                    // Each datagram is handed over as its own piece of the read's buffer: a
                    // sealed one is opened where it lies.
                    for datagram in read.into_datagrams() {
                        receiver.handle_arrived_mut(now, arrived, from, datagram);
                    }
                }
            }
            _ = &mut wait => {
                receiver.handle_timeout(Instant::now());
                wait.as_mut().reset(receiver.poll_timeout().into());
            }
        }
        let mut delivered = false;
        while let Some(event) = receiver.poll_event() {
            match event {
                ReceiverEvent::Message(body) => {
                    sub.deliver(link, body, &header, Protocol::Udp);
                    delivered = true;
                }
                ReceiverEvent::Stranger(from) => tracing::warn!(
                    "{}: dropping UDPROS datagrams from {from}, which is not the publisher at {}",
                    sub.config.topic,
                    link.uri
                ),
                ReceiverEvent::Closed => {
                    return Ended::Retry("publisher closed the UDPROS link".into())
                }
                ReceiverEvent::Dead(dead) => return Ended::Retry(dead.to_string()),
            }
        }
        // On an FEC link, the loss seen goes back to the publisher's port, at most a few
        // times a second; a report that cannot leave now is simply not sent.
        if let Some(peer) = receiver.peer() {
            while let Some(report) = receiver.poll_transmit(Instant::now()) {
                let _ = offer.socket.try_send_to(&report, peer);
            }
        }
        link.set_status(|s| {
            s.udp = receiver.stats();
            s.secure = receiver.secure_stats();
            s.peer = receiver.peer();
        });
        if delivered {
            crate::transport::let_readers_run().await;
        }
    }
}

/// The datagram size to ask the publisher for: the user's, or else what the route toward
/// the publisher carries when it is on this host.
fn datagram_to_ask(sub: &Subscription, publisher: &PublisherHost) -> usize {
    let route = match sub.config.max_datagram_size {
        Some(_) => None,
        None => route_target(sub.local.bind, &publisher.addrs)
            .and_then(|peer| crate::socket::probe_route(sub.local.bind, peer).ok()),
    };
    negotiation::datagram_to_ask(sub.config.max_datagram_size, route)
}

/// The address of the publisher's host that a socket bound to `bind` sends to, chosen
/// as [`resolve_udp_peer`](crate::transport::resolve_udp_peer) chooses. Any port does:
/// connecting a UDP socket only asks the routing table.
fn route_target(bind: IpAddr, addrs: &[IpAddr]) -> Option<SocketAddr> {
    const ANY_PORT: u16 = 9;
    let addrs = addrs.iter().map(|&ip| SocketAddr::new(ip, ANY_PORT));
    crate::transport::udp_peer_among(bind, addrs, false)
}

/// A publisher's host as its XML-RPC URI names it, with its addresses (none when the
/// name did not resolve in time).
struct PublisherHost {
    name: Option<String>,
    addrs: Vec<IpAddr>,
}

impl PublisherHost {
    async fn resolve(publisher_uri: &str) -> PublisherHost {
        let name = crate::host::uri_host(publisher_uri);
        let addrs = match &name {
            Some(name) => resolve(name).await,
            None => Vec::new(),
        };
        PublisherHost { name, addrs }
    }
}

/// `name`'s addresses, or none when it does not resolve within [`REQUEST_TIMEOUT`].
async fn resolve(name: &str) -> Vec<IpAddr> {
    let lookup = tokio::net::lookup_host((name, 0));
    match tokio::time::timeout(REQUEST_TIMEOUT, lookup).await {
        Ok(Ok(addrs)) => addrs.map(|a| a.ip()).collect(),
        _ => Vec::new(),
    }
}

/// None of the names of a publisher's host resolved.
#[derive(Debug)]
struct Unresolved(Vec<String>);

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot resolve the publisher's host {:?}", self.0)
    }
}

/// The [`AllowedSources`] of a UDPROS link: the publisher's host as its answer names it
/// and as its XML-RPC URI does (resolved already), each resolved; between udpros peers,
/// only the answer's port.
async fn allowed_sources(
    publisher: &PublisherHost,
    answer_host: &str,
    answer_port: u16,
    udpros_peer: bool,
) -> Result<AllowedSources, Unresolved> {
    let mut hosts = publisher.addrs.clone();
    if publisher.name.as_deref() != Some(answer_host) {
        hosts.extend(resolve(answer_host).await);
    }
    if hosts.is_empty() {
        let names = std::iter::once(answer_host.to_string()).chain(publisher.name.clone());
        return Err(Unresolved(names.collect()));
    }
    Ok(AllowedSources::new(
        hosts,
        udpros_peer.then_some(answer_port),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sources_are_the_answers_host_and_the_uris_host_resolved() {
        let uri = PublisherHost::resolve("http://10.1.2.3:1234/").await;
        assert_eq!(uri.addrs, ["10.1.2.3".parse::<IpAddr>().unwrap()]);
        let peer = allowed_sources(&uri, "127.0.0.1", 4000, true)
            .await
            .unwrap();
        assert!(peer.allows("127.0.0.1:4000".parse().unwrap()));
        assert!(
            peer.allows("10.1.2.3:4000".parse().unwrap()),
            "the URI's host"
        );
        assert!(
            !peer.allows("127.0.0.1:4001".parse().unwrap()),
            "another port"
        );
        assert!(
            !peer.allows("10.9.9.9:4000".parse().unwrap()),
            "another host"
        );
        let roscpp = allowed_sources(&uri, "127.0.0.1", 4000, false)
            .await
            .unwrap();
        assert!(
            roscpp.allows("127.0.0.1:5555".parse().unwrap()),
            "roscpp's port is not its source"
        );
        let nowhere = PublisherHost::resolve("http://no.such.host.invalid:1/").await;
        assert!(nowhere.addrs.is_empty());
        assert!(allowed_sources(&nowhere, "no.such.host.invalid", 1, true)
            .await
            .is_err());
        // The answer's host alone is enough when the URI's does not resolve.
        let answered = allowed_sources(&nowhere, "127.0.0.1", 1, true)
            .await
            .unwrap();
        assert!(answered.allows("127.0.0.1:1".parse().unwrap()));
    }

    #[test]
    fn the_route_is_probed_toward_an_address_the_socket_can_send_to() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let (v4, v6) = (ip("10.0.0.1"), ip("fd00::1"));
        let target = |bind: &str, addrs: &[IpAddr]| route_target(ip(bind), addrs).map(|a| a.ip());
        assert_eq!(
            target("0.0.0.0", &[v6, v4]),
            Some(v4),
            "IPv4 socket: the IPv4 one"
        );
        assert_eq!(
            target("0.0.0.0", &[v6]),
            None,
            "IPv4 socket, no IPv4 address"
        );
        assert_eq!(target("::", &[v6, v4]), Some(v6));
        assert_eq!(target("::", &[v4]), Some(ip("::ffff:10.0.0.1")), "mapped");
        assert_eq!(target("::", &[]), None);
    }
}
