//! One subscribed topic: a link per publisher, each negotiating its transport in the
//! subscription's order of preference (UDPROS, then TCPROS, by default), reading messages
//! into the subscription's drop-oldest queue, and reconnecting while the master lists its
//! publisher.

use super::queue::DropOldest;
use super::{LinkStats, LinkTotals, Protocol};
use crate::wire::header::ConnectionHeader;
use crate::wire::negotiation::{Offer, UdprosOffer};
use crate::wire::secure::NONCE_LEN;
use crate::wire::topic::TopicIdentity;
use crate::wire::udpros::fec::FecPolicy;
use crate::wire::udpros::UdpStats;
use crate::xmlrpc::XmlRpcClient;
use bytes::Bytes;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod receive;

#[derive(Debug, Clone)]
pub(crate) struct SubscriptionConfig {
    pub topic: String,
    pub msg_type: String,
    pub md5sum: String,
    pub definition: String,
    /// Transports to offer, most preferred first.
    pub transports: Vec<Protocol>,
    /// The datagram size to ask UDPROS publishers for; `None`: by the route
    /// ([`datagram_to_ask`](crate::wire::negotiation::datagram_to_ask)).
    pub max_datagram_size: Option<usize>,
    pub tcp_nodelay: bool,
    pub max_message_size: usize,
    /// What UDPROS offers ask of udpros publishers.
    pub fec: FecPolicy,
    /// Where the links run, when not on the runtime that makes them.
    pub links_on: Option<Arc<super::DrivenRuntime>>,
}

/// A received message and what its publisher said of itself.
#[derive(Debug, Clone)]
pub struct Received {
    /// The serialized message, without its length prefix.
    pub body: Bytes,
    /// The publisher's connection header (callerid, type, md5sum, latching).
    pub publisher: Arc<ConnectionHeader>,
    /// The transport it came over.
    pub protocol: Protocol,
}

/// What a link currently knows, for statistics and `getBusInfo`.
#[derive(Debug, Clone, Default)]
pub(crate) struct LinkStatus {
    pub protocol: Option<Protocol>,
    pub connected: bool,
    pub local_port: u16,
    pub peer: Option<SocketAddr>,
    pub header: Option<Arc<ConnectionHeader>>,
    pub udp: UdpStats,
    pub secure: Option<crate::wire::secure::datagram::OpenStats>,
}

pub(crate) struct PublisherLink {
    pub uri: String,
    pub id: u32,
    pub stats: LinkStats,
    status: Mutex<LinkStatus>,
    task: Mutex<Option<LinkTask>>,
}

/// Where a link's future runs.
enum LinkTask {
    /// A task of the runtime that made the link.
    Task(tokio::task::JoinHandle<()>),
    /// Inside the consumer's wait on a [`DrivenRuntime`](super::DrivenRuntime).
    Inline(super::driven::InlineTask),
}

impl LinkTask {
    fn abort(&self) {
        match self {
            LinkTask::Task(task) => task.abort(),
            LinkTask::Inline(task) => task.abort(),
        }
    }

    fn is_finished(&self) -> bool {
        match self {
            LinkTask::Task(task) => task.is_finished(),
            LinkTask::Inline(task) => task.is_finished(),
        }
    }
}

/// One publisher link of a subscriber, as it stood when asked (from
/// [`RawSubscriber::links`](crate::node::RawSubscriber::links)).
#[derive(Debug, Clone)]
pub struct PublisherLinkStats {
    /// The publisher's XML-RPC URI, as the master lists it.
    pub publisher_uri: String,
    /// The transport, once negotiated.
    pub protocol: Option<Protocol>,
    /// Whether the link is up (it reconnects while the master lists the publisher).
    pub connected: bool,
    /// The local port the link receives on.
    pub local_port: u16,
    /// Where the publisher's data comes from (TCPROS: the connection's peer; UDPROS: the
    /// source of the last accepted datagram).
    pub peer: Option<SocketAddr>,
    /// The publisher's connection header (type, md5sum, callerid, latching).
    pub header: Option<Arc<ConnectionHeader>>,
    /// Messages delivered over this link.
    pub messages: u64,
    /// Bytes of message bodies delivered over this link.
    pub bytes: u64,
    /// UDPROS reassembly counters (all zero on TCPROS): messages, losses by message id,
    /// incomplete and malformed datagrams, datagrams from strangers.
    pub udp: UdpStats,
    /// On a secure link, the datagrams opened and those refused, by reason (forged,
    /// replayed, too old, too short).
    pub secure: Option<crate::wire::secure::datagram::OpenStats>,
    /// The link stopped trying: the publisher refused it for good (another type, not a
    /// publisher of the topic, a secure link it cannot settle) or the subscription closed.
    pub ended: bool,
}

impl PublisherLink {
    /// The link's counters and state now.
    pub(crate) fn snapshot(&self) -> PublisherLinkStats {
        let status = self.status();
        let LinkTotals {
            bytes, messages, ..
        } = self.stats.totals();
        PublisherLinkStats {
            publisher_uri: self.uri.clone(),
            protocol: status.protocol,
            connected: status.connected,
            local_port: status.local_port,
            peer: status.peer,
            header: status.header,
            messages,
            bytes,
            udp: status.udp,
            secure: status.secure,
            ended: self
                .task
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_none_or(|task| task.is_finished()),
        }
    }

    pub(crate) fn status(&self) -> LinkStatus {
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
pub(crate) struct LocalNode {
    pub node_name: String,
    pub host: String,
    pub bind: IpAddr,
    pub client: XmlRpcClient,
    pub link_ids: Arc<AtomicU32>,
    /// How the node secures its links.
    pub security: crate::secure::Security,
    /// The runtime of the node's own tasks, where links make their XML-RPC calls: a
    /// link may run on a [`DrivenRuntime`](super::DrivenRuntime), which stands still
    /// while nobody waits, and the client's pooled connections live on the runtime that
    /// opened them. `None`: the caller's.
    pub runtime: Option<tokio::runtime::Handle>,
}

impl LocalNode {
    /// Runs `work` on the node's runtime and waits for it from whichever runtime the
    /// caller is on; `None` when the node's runtime ended first.
    pub(crate) async fn on_node_runtime<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        let here = tokio::runtime::Handle::try_current().ok().map(|h| h.id());
        let Some(node) = self.runtime.as_ref().filter(|node| Some(node.id()) != here) else {
            return Some(work.await);
        };
        // A set aborts its tasks when dropped: a link closed while it waits takes its call
        // with it.
        let mut call = tokio::task::JoinSet::new();
        call.spawn_on(work, node);
        call.join_next().await?.ok()
    }
}

pub(crate) struct Subscription {
    pub config: SubscriptionConfig,
    local: LocalNode,
    links: Mutex<HashMap<String, Arc<PublisherLink>>>,
    /// One queue per subscriber handle on this topic.
    sinks: Mutex<Vec<Arc<DropOldest<Received>>>>,
    /// publisherUpdate calls so far; changed and read only under the `links` lock.
    updates: AtomicU64,
    closed: AtomicBool,
    /// Linked to one publisher only, for good ([`Subscription::to_one_publisher`]): when
    /// that link gives up, nothing more can come, and the handles' `recv` ends.
    one_publisher: bool,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("topic", &self.config.topic)
            .finish()
    }
}

const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Most publishers one subscription links to: beyond every real topic's (each node of a
/// large system publishing `/rosout` to its one aggregator is some hundreds), short of
/// what a forged `publisherUpdate` could ask (each link holds a socket and a task).
pub const MAX_PUBLISHER_LINKS: usize = 1024;

impl Subscription {
    pub(crate) fn new(config: SubscriptionConfig, local: LocalNode) -> Arc<Subscription> {
        Subscription::made(config, local, false)
    }

    fn made(
        config: SubscriptionConfig,
        local: LocalNode,
        one_publisher: bool,
    ) -> Arc<Subscription> {
        Arc::new(Subscription {
            config,
            local,
            links: Mutex::new(HashMap::new()),
            sinks: Mutex::new(Vec::new()),
            updates: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            one_publisher,
        })
    }

    /// A subscription that belongs to no node and links to `publisher_uri` alone (a
    /// guest's): no master lists publishers for it, so once its link gives up for good
    /// its handles' `recv` returns `None` rather than wait for ever (the link stays, with
    /// its counters and `ended`, until the subscription closes).
    pub(crate) fn to_one_publisher(
        config: SubscriptionConfig,
        local: LocalNode,
        publisher_uri: &str,
        queue_size: usize,
        max_queued_bytes: usize,
    ) -> (Arc<Subscription>, Arc<DropOldest<Received>>) {
        let subscription = Subscription::made(config, local, true);
        // The handle's queue first: a latched message may come as soon as the link starts.
        let sink = subscription.add_sink(queue_size, max_queued_bytes);
        subscription.publisher_update(&[publisher_uri.to_string()]);
        (subscription, sink)
    }

    fn sinks(&self) -> std::sync::MutexGuard<'_, Vec<Arc<DropOldest<Received>>>> {
        self.sinks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new queue fed every message of this topic (one per subscriber handle).
    pub(crate) fn add_sink(
        &self,
        queue_size: usize,
        max_bytes: usize,
    ) -> Arc<DropOldest<Received>> {
        let sink = Arc::new(DropOldest::bounded(
            queue_size,
            max_bytes,
            |r: &Received| r.body.len(),
        ));
        self.sinks().push(sink.clone());
        sink
    }

    /// Removes a handle's queue; returns how many remain.
    pub(crate) fn remove_sink(&self, sink: &Arc<DropOldest<Received>>) -> usize {
        let mut sinks = self.sinks();
        sinks.retain(|s| !Arc::ptr_eq(s, sink));
        sink.close();
        sinks.len()
    }

    fn links(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<PublisherLink>>> {
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn publisher_links(&self) -> Vec<Arc<PublisherLink>> {
        let mut links: Vec<_> = self.links().values().cloned().collect();
        links.sort_by_key(|l| l.id);
        links
    }

    /// The master's publisherUpdate: the full, current list of publishers.
    pub(crate) fn publisher_update(self: &Arc<Self>, uris: &[String]) {
        let mut links = self.links();
        self.updates.fetch_add(1, Ordering::Relaxed);
        self.set_publishers(&mut links, uris);
    }

    /// How many publisherUpdate calls have arrived; take it before registerSubscriber.
    pub(crate) fn update_count(&self) -> u64 {
        let _links = self.links();
        self.updates.load(Ordering::Relaxed)
    }

    /// The publisher list registerSubscriber answered. The master notifies a subscriber
    /// only once it is registered, so an update that arrived since `updates_before` was
    /// computed after this answer: the answer is stale then and must not undo it (a
    /// publisher advertising during our registration would otherwise be dropped for good).
    pub(crate) fn registered(self: &Arc<Self>, uris: &[String], updates_before: u64) {
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
        // A set: a list of 500,000 URIs (what one XML-RPC body may carry) looked up
        // once per link would take minutes.
        let listed: std::collections::HashSet<&str> = uris.iter().map(String::as_str).collect();
        links.retain(|uri, link| {
            let keep = listed.contains(uri.as_str());
            if !keep {
                link.stop();
            }
            keep
        });
        let mut unlinked = 0;
        for uri in uris {
            if links.contains_key(uri) {
                continue;
            }
            if links.len() >= MAX_PUBLISHER_LINKS {
                unlinked += 1;
                continue;
            }
            let link = Arc::new(PublisherLink {
                uri: uri.clone(),
                id: self.local.link_ids.fetch_add(1, Ordering::Relaxed),
                stats: LinkStats::default(),
                status: Mutex::new(LinkStatus::default()),
                task: Mutex::new(None),
            });
            let run = receive::run_link(self.clone(), link.clone());
            let task = match &self.config.links_on {
                Some(runtime) => LinkTask::Inline(runtime.spawn_inline(run)),
                None => LinkTask::Task(tokio::spawn(run)),
            };
            *link.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
            links.insert(uri.clone(), link);
        }
        if unlinked > 0 {
            tracing::warn!(
                "{}: {unlinked} more publishers listed than the {MAX_PUBLISHER_LINKS} a subscription links to; those are not heard",
                self.config.topic
            );
        }
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for (_, link) in self.links().drain() {
            link.stop();
        }
        for sink in self.sinks().drain(..) {
            sink.close();
        }
    }

    /// A link gave up for good: when it was the only one this subscription will ever
    /// have, the handles' queues close, so that a `recv` waiting on them ends instead of
    /// waiting for ever (with what was queued still taken first).
    fn link_gave_up(&self) {
        if self.one_publisher {
            for sink in self.sinks().iter() {
                sink.close();
            }
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

    /// Who this subscription is, as its handshakes state it.
    fn identity(&self) -> TopicIdentity {
        TopicIdentity {
            node: self.local.node_name.clone(),
            topic: self.config.topic.clone(),
            msg_type: self.config.msg_type.clone(),
            md5sum: self.config.md5sum.clone(),
            definition: self.config.definition.clone(),
        }
    }

    /// Adds to a subscriber's header (UDPROS offer or TCPROS header) a secure link's
    /// offer under `nonce`, and signs the whole header, on a node whose policy uses the
    /// key; leaves it as it is otherwise.
    pub(crate) fn offer_security(&self, header: &mut ConnectionHeader, nonce: &[u8; NONCE_LEN]) {
        use crate::wire::secure::{handshake, proof};
        let side = self.local.security.side();
        for (field, value) in handshake::offer_fields(side, nonce) {
            header.insert(field, value);
        }
        if let Some(key) = side.key {
            proof::sign(key, proof::Role::Subscriber, header, None);
        }
    }

    /// The UDPROS offer: the subscriber's header (with FEC asked for, and on a node with
    /// the graph key, a secure link offered under `nonce` and the header signed), asking
    /// for datagrams of `max_datagram` bytes.
    fn udp_offer(
        &self,
        port: u16,
        max_datagram: usize,
        ipv6_only: bool,
        nonce: &[u8; NONCE_LEN],
    ) -> Offer {
        let mut header = self.config.fec.ask(self.identity().udp_subscriber_header());
        self.offer_security(&mut header, nonce);
        Offer::Udpros(UdprosOffer {
            header,
            host: self.local.host.clone(),
            port,
            max_datagram,
            ipv6_only,
        })
    }
}
