//! Publishing and subscribing: typed and untyped handles, the node's registries of
//! publications and subscriptions, negotiation answers (requestTopic), and the statistics
//! the slave API reports.

use super::{Node, NodeError, NodeInner};
use crate::api::StatusReply;
use crate::msg::Message;
use crate::transport::publication::Publication;
use crate::transport::queue::DropOldest;
use crate::transport::subscription::{
    LocalNode, PublisherLinkStats, Received, Subscription, SubscriptionConfig,
};
use crate::transport::{resolve_udp_peer, udp_socket, LinkTotals, Protocol, UDPROS_PEER_FIELD};
use crate::wire::header::{ConnectionHeader, HeaderLimits};
use crate::wire::negotiation::{Answer, Offer, UdpPlan, UdprosAnswer, UdprosOffer};
use crate::wire::topic::TopicIdentity;
use crate::wire::udpros::ROSCPP_MAX_DATAGRAM;
use crate::xmlrpc::Value;
use bytes::Bytes;
use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// Options of `advertise`.
#[derive(Debug, Clone)]
pub struct AdvertiseOptions {
    /// Send the last message to every subscriber that connects later.
    pub latch: bool,
    /// Messages queued per subscriber before the oldest is dropped.
    pub queue_size: usize,
    /// Bytes queued per subscriber before the oldest message is dropped (the newest is
    /// always kept, however large).
    pub max_queued_bytes: usize,
    /// Subscriber links (TCPROS and UDPROS together) this publication serves at once;
    /// beyond it a subscriber is refused with a status saying so.
    pub max_links: usize,
    /// Of those, links to one subscriber host (IP address).
    pub max_links_per_host: usize,
}

/// The default bound on the bytes a queue of messages holds, per subscriber and per
/// subscriber handle: 64 MiB.
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 64 << 20;

impl Default for AdvertiseOptions {
    fn default() -> Self {
        AdvertiseOptions {
            latch: false,
            queue_size: 100,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
            max_links: DEFAULT_MAX_LINKS,
            max_links_per_host: DEFAULT_MAX_LINKS_PER_HOST,
        }
    }
}

/// The default cap on one publication's subscriber links: each costs a descriptor and a
/// send per message (2000 links at 100 Hz took most of a core).
pub const DEFAULT_MAX_LINKS: usize = 512;

/// The default cap on one publication's links to one host: room for every node of a big
/// robot computer, not for one peer taking them all.
pub const DEFAULT_MAX_LINKS_PER_HOST: usize = 128;

/// Options of `subscribe`, roscpp's transport hints among them.
#[derive(Debug, Clone)]
pub struct SubscribeOptions {
    /// Transports to offer, most preferred first: UDP then TCP by default.
    pub transports: Vec<Protocol>,
    /// The largest datagram to ask UDPROS publishers for.
    pub max_datagram_size: usize,
    /// Ask TCPROS publishers for `TCP_NODELAY` (roscpp's `tcpNoDelay()` hint).
    pub tcp_nodelay: bool,
    /// Messages queued before the oldest is dropped.
    pub queue_size: usize,
    /// Bytes queued before the oldest message is dropped (the newest is always kept).
    pub max_queued_bytes: usize,
    /// Larger messages are refused (and the link dropped, on TCP).
    pub max_message_size: usize,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        SubscribeOptions {
            transports: vec![Protocol::Udp, Protocol::Tcp],
            max_datagram_size: ROSCPP_MAX_DATAGRAM,
            tcp_nodelay: true,
            queue_size: 100,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
            max_message_size: 64 << 20,
        }
    }
}

impl SubscribeOptions {
    /// UDPROS only: no fallback to TCPROS (publishers without UDPROS, such as rospy's, are not heard).
    pub fn udp_only() -> Self {
        SubscribeOptions {
            transports: vec![Protocol::Udp],
            ..Self::default()
        }
    }

    /// TCPROS only, as rospy subscribes.
    pub fn tcp_only() -> Self {
        SubscribeOptions {
            transports: vec![Protocol::Tcp],
            ..Self::default()
        }
    }
}

/// One advertised topic: its publication, shared by every publisher handle of it.
pub(crate) struct Advertised {
    pub publication: Arc<Publication>,
    /// Publisher handles alive; the topic is unadvertised when the last goes.
    pub handles: usize,
}

/// The node's publications and subscriptions, by resolved topic.
#[derive(Default)]
pub(crate) struct Topics {
    pub publications: Mutex<HashMap<String, Advertised>>,
    pub subscriptions: Mutex<HashMap<String, Arc<Subscription>>>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Node {
    /// Advertises `topic` with message type `M`.
    pub async fn advertise<M: Message>(
        &self,
        topic: &str,
        options: AdvertiseOptions,
    ) -> Result<Publisher<M>, NodeError> {
        let raw = self
            .advertise_raw(topic, M::TYPE, M::MD5SUM, M::DEFINITION, options)
            .await?;
        Ok(Publisher {
            raw,
            _type: PhantomData,
        })
    }

    /// Advertises `topic` for already serialized messages of the given type.
    pub async fn advertise_raw(
        &self,
        topic: &str,
        msg_type: &str,
        md5sum: &str,
        definition: &str,
        options: AdvertiseOptions,
    ) -> Result<RawPublisher, NodeError> {
        let topic = self.resolve_name(topic);
        let info = TopicIdentity {
            node: self.name().to_string(),
            topic: topic.clone(),
            msg_type: msg_type.into(),
            md5sum: md5sum.into(),
            definition: definition.into(),
        };
        let has_header = definition_has_header(msg_type, definition);
        let publication = {
            let mut pubs = locked(&self.inner.topics.publications);
            let entry = pubs.entry(topic.clone()).or_insert_with(|| {
                let p = Publication::new(
                    info,
                    has_header,
                    options.latch,
                    crate::transport::publication::LinkLimits {
                        queue_size: options.queue_size,
                        queue_bytes: options.max_queued_bytes,
                        max_links: options.max_links,
                        max_links_per_host: options.max_links_per_host,
                    },
                    self.inner.link_ids.clone(),
                );
                Advertised {
                    publication: Arc::new(p),
                    handles: 0,
                }
            });
            entry.handles += 1;
            entry.publication.clone()
        };
        self.inner
            .master
            .register_publisher(&topic, msg_type, self.uri())
            .await?;
        Ok(RawPublisher {
            node: Arc::downgrade(&self.inner),
            publication,
        })
    }

    /// Subscribes to `topic` with message type `M`.
    pub async fn subscribe<M: Message>(
        &self,
        topic: &str,
        options: SubscribeOptions,
    ) -> Result<Subscriber<M>, NodeError> {
        let raw = self
            .subscribe_with(topic, M::TYPE, M::MD5SUM, M::DEFINITION, options)
            .await?;
        Ok(Subscriber {
            raw,
            _type: PhantomData,
        })
    }

    /// Subscribes to `topic` whatever its type (md5 `*`): messages arrive as bytes with the
    /// publisher's connection header, whose `type` and `message_definition` describe them.
    pub async fn subscribe_raw(
        &self,
        topic: &str,
        options: SubscribeOptions,
    ) -> Result<RawSubscriber, NodeError> {
        self.subscribe_with(topic, "*", "*", "", options).await
    }

    pub(crate) async fn subscribe_with(
        &self,
        topic: &str,
        msg_type: &str,
        md5sum: &str,
        definition: &str,
        options: SubscribeOptions,
    ) -> Result<RawSubscriber, NodeError> {
        let topic = self.resolve_name(topic);
        let (subscription, fresh) = {
            let mut subs = locked(&self.inner.topics.subscriptions);
            match subs.get(&topic) {
                Some(s) => (s.clone(), false),
                None => {
                    let config = SubscriptionConfig {
                        topic: topic.clone(),
                        msg_type: msg_type.into(),
                        md5sum: md5sum.into(),
                        definition: definition.into(),
                        transports: options.transports.clone(),
                        max_datagram_size: options.max_datagram_size,
                        tcp_nodelay: options.tcp_nodelay,
                        max_message_size: options.max_message_size,
                    };
                    let s = Subscription::new(config, self.local());
                    subs.insert(topic.clone(), s.clone());
                    (s, true)
                }
            }
        };
        let sink = subscription.add_sink(options.queue_size, options.max_queued_bytes);
        if fresh {
            let updates_before = subscription.update_count();
            let publishers = self
                .inner
                .master
                .register_subscriber(&topic, msg_type, self.uri())
                .await?;
            subscription.registered(&publishers, updates_before);
        }
        Ok(RawSubscriber {
            node: Arc::downgrade(&self.inner),
            subscription,
            sink,
            pending: None,
        })
    }

    fn local(&self) -> LocalNode {
        LocalNode {
            node_name: self.name().to_string(),
            host: self.inner.id.host.clone(),
            bind: self.inner.id.bind,
            client: self.inner.client.clone(),
            link_ids: self.inner.link_ids.clone(),
        }
    }
}

/// Whether a type's full definition starts with `Header header` (its own text is the part
/// before the first section separator); unknown or unparsable definitions have none.
fn definition_has_header(msg_type: &str, definition: &str) -> bool {
    use crate::codegen::spec::{MsgSpec, SECTION_SEPARATOR};
    let own = definition.split(SECTION_SEPARATOR).next().unwrap_or("");
    MsgSpec::parse(msg_type, own).is_ok_and(|spec| spec.has_header())
}

/// A handle on an advertised topic; the last one dropped unadvertises it.
pub struct RawPublisher {
    node: std::sync::Weak<NodeInner>,
    publication: Arc<Publication>,
}

impl RawPublisher {
    /// Sends one frame (the `u32` length prefix and the serialized message).
    pub fn publish_frame(&self, frame: Bytes) {
        self.publication.publish_frame(frame);
    }

    /// Sends one serialized message body.
    pub fn publish_body(&self, body: &[u8]) {
        self.publication
            .publish_frame(crate::wire::tcpros::frame(body));
    }

    /// The resolved topic name.
    pub fn topic(&self) -> &str {
        &self.publication.info.topic
    }

    /// Subscribers linked now.
    pub fn num_subscribers(&self) -> usize {
        self.publication.num_subscribers()
    }
}

impl Drop for RawPublisher {
    fn drop(&mut self) {
        let Some(node) = self.node.upgrade() else {
            return;
        };
        let topic = self.publication.info.topic.clone();
        let last = {
            let mut pubs = locked(&node.topics.publications);
            match pubs.get_mut(&topic) {
                Some(entry) if entry.handles > 1 => {
                    entry.handles -= 1;
                    false
                }
                Some(_) => pubs.remove(&topic).is_some(),
                None => false,
            }
        };
        if last {
            self.publication.close();
            node.spawn_unregister(Registration::Publisher(topic));
        }
    }
}

/// A typed publisher.
pub struct Publisher<M> {
    raw: RawPublisher,
    _type: PhantomData<fn(M)>,
}

impl<M: Message> Publisher<M> {
    /// Serializes once and queues the message for every subscriber; never waits. With no
    /// subscriber linked and no latching, the message is not serialized at all (as roscpp).
    pub fn publish(&self, msg: &M) -> Result<(), crate::wire::Error> {
        if !self.raw.publication.wants_frames() {
            self.raw.publication.count_unsent();
            return Ok(());
        }
        self.raw.publish_frame(crate::wire::to_frame(msg)?);
        Ok(())
    }

    /// Publishes once every subscriber's queue has room: nothing is dropped, and the caller
    /// goes at the pace of the slowest subscriber (for floods that must arrive whole;
    /// [`publish`](Self::publish) keeps the freshest data instead).
    pub async fn publish_when_room(&self, msg: &M) -> Result<(), crate::wire::Error> {
        let frame = crate::wire::to_frame(msg)?;
        self.raw.publication.publish_frame_when_room(frame).await;
        Ok(())
    }

    /// The resolved topic name.
    pub fn topic(&self) -> &str {
        self.raw.topic()
    }

    /// Subscribers linked now.
    pub fn num_subscribers(&self) -> usize {
        self.raw.num_subscribers()
    }

    /// The untyped publisher behind it (publishing already serialized frames).
    pub fn raw(&self) -> &RawPublisher {
        &self.raw
    }
}

/// A handle on a subscription; the last one dropped unsubscribes. Also a `Stream` of
/// [`Received`] messages.
pub struct RawSubscriber {
    node: std::sync::Weak<NodeInner>,
    subscription: Arc<Subscription>,
    sink: Arc<DropOldest<Received>>,
    /// The pending `pop` while polled as a stream.
    pending: Option<Pin<Box<dyn Future<Output = Option<Received>> + Send>>>,
}

impl futures_core::Stream for RawSubscriber {
    type Item = Received;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Received>> {
        let sink = self.sink.clone();
        let pending = self
            .pending
            .get_or_insert_with(|| Box::pin(async move { sink.pop().await }));
        let polled = pending.as_mut().poll(cx);
        if polled.is_ready() {
            self.pending = None;
        }
        polled
    }
}

impl RawSubscriber {
    /// The next message, `None` once the node shuts down.
    pub async fn recv(&mut self) -> Option<Received> {
        self.sink.pop().await
    }

    /// The resolved topic name.
    pub fn topic(&self) -> &str {
        &self.subscription.config.topic
    }

    /// Each publisher link as it stands: transport, state, counters, the publisher's
    /// connection header. Links come and go as the master lists publishers.
    pub fn links(&self) -> Vec<PublisherLinkStats> {
        let mut links: Vec<_> = self
            .subscription
            .publisher_links()
            .iter()
            .map(|l| l.snapshot())
            .collect();
        links.sort_by(|a, b| a.publisher_uri.cmp(&b.publisher_uri));
        links
    }

    /// Messages dropped because this handle fell behind.
    pub fn dropped(&self) -> u64 {
        self.sink.dropped()
    }

    /// Publishers linked now.
    pub fn num_publishers(&self) -> usize {
        self.subscription
            .publisher_links()
            .iter()
            .filter(|l| l.status().connected)
            .count()
    }
}

impl Drop for RawSubscriber {
    fn drop(&mut self) {
        if self.subscription.remove_sink(&self.sink) > 0 {
            return;
        }
        let Some(node) = self.node.upgrade() else {
            return;
        };
        let topic = self.subscription.config.topic.clone();
        locked(&node.topics.subscriptions).remove(&topic);
        self.subscription.close();
        node.spawn_unregister(Registration::Subscriber(topic));
    }
}

/// A typed subscriber; also a `Stream` of messages (those that do not decode as `M` are
/// skipped with a warning).
pub struct Subscriber<M> {
    raw: RawSubscriber,
    _type: PhantomData<fn() -> M>,
}

impl<M: Message> futures_core::Stream for Subscriber<M> {
    type Item = M;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<M>> {
        loop {
            let received = match Pin::new(&mut self.raw).poll_next(cx) {
                Poll::Ready(Some(r)) => r,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            };
            match crate::wire::from_bytes::<M>(&received.body) {
                Ok(msg) => return Poll::Ready(Some(msg)),
                Err(e) => tracing::warn!(
                    "dropping a message on {} that is not a {}: {e}",
                    self.raw.topic(),
                    M::TYPE
                ),
            }
        }
    }
}

impl<M: Message> Subscriber<M> {
    /// Each publisher link as it stands; see [`RawSubscriber::links`].
    pub fn links(&self) -> Vec<PublisherLinkStats> {
        self.raw.links()
    }

    /// The next message that decodes as `M`, `None` once the node shuts down.
    pub async fn recv(&mut self) -> Option<M> {
        loop {
            let received = self.raw.recv().await?;
            match crate::wire::from_bytes::<M>(&received.body) {
                Ok(msg) => return Some(msg),
                Err(e) => tracing::warn!(
                    "dropping a message on {} that is not a {}: {e}",
                    self.raw.topic(),
                    M::TYPE
                ),
            }
        }
    }

    /// The next message with the publisher's connection header.
    pub async fn recv_with_header(&mut self) -> Option<(M, Arc<ConnectionHeader>)> {
        loop {
            let received = self.raw.recv().await?;
            if let Ok(msg) = crate::wire::from_bytes::<M>(&received.body) {
                return Some((msg, received.publisher));
            }
        }
    }

    /// Calls `callback` for each message on a task of its own, until the node shuts down.
    pub fn for_each(
        mut self,
        mut callback: impl FnMut(M) + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            while let Some(msg) = self.recv().await {
                callback(msg);
            }
        })
    }

    /// The untyped subscriber behind it.
    pub fn raw(&self) -> &RawSubscriber {
        &self.raw
    }

    /// Publishers linked now.
    pub fn num_publishers(&self) -> usize {
        self.raw.num_publishers()
    }
}

pub(crate) enum Registration {
    Publisher(String),
    Subscriber(String),
}

impl NodeInner {
    pub(crate) fn spawn_unregister(&self, what: Registration) {
        let master = self.master.clone();
        let uri = self.uri.get().cloned().unwrap_or_default();
        self.spawn_background(async move {
            let _ = match what {
                Registration::Publisher(topic) => master.unregister_publisher(&topic, &uri).await,
                Registration::Subscriber(topic) => master.unregister_subscriber(&topic, &uri).await,
            };
        });
    }

    pub(crate) fn publication(&self, topic: &str) -> Option<Arc<Publication>> {
        locked(&self.topics.publications)
            .get(topic)
            .map(|a| a.publication.clone())
    }

    pub(crate) fn publication_list(&self) -> Vec<Arc<Publication>> {
        let mut v: Vec<_> = locked(&self.topics.publications)
            .values()
            .map(|a| a.publication.clone())
            .collect();
        v.sort_by(|a, b| a.info.topic.cmp(&b.info.topic));
        v
    }

    pub(crate) fn subscription_list(&self) -> Vec<Arc<Subscription>> {
        let mut v: Vec<_> = locked(&self.topics.subscriptions)
            .values()
            .cloned()
            .collect();
        v.sort_by(|a, b| a.config.topic.cmp(&b.config.topic));
        v
    }

    pub(crate) fn publisher_update(&self, topic: &str, publishers: Vec<String>) -> bool {
        match locked(&self.topics.subscriptions).get(topic) {
            Some(s) => {
                s.publisher_update(&publishers);
                true
            }
            None => false,
        }
    }

    /// `[pubStats, subStats, serviceStats]` as rospy reports them.
    pub(crate) fn bus_stats(&self) -> Value {
        let publications = self.publication_list();
        let pubs = publications.iter().map(|p| {
            let conns = p.subscriber_links().into_iter().map(|l| {
                let LinkTotals {
                    bytes, messages, ..
                } = l.stats.totals();
                Value::Array(vec![
                    Value::Int(l.id as i32),
                    Value::Int(bytes as i32),
                    Value::Int(messages as i32),
                    Value::Bool(true),
                ])
            });
            Value::Array(vec![
                Value::from(p.info.topic.as_str()),
                Value::Int(p.messages_sent() as i32),
                Value::Array(conns.collect()),
            ])
        });
        let subscriptions = self.subscription_list();
        let subs = subscriptions.iter().map(|s| {
            let conns = s.publisher_links().into_iter().map(|l| {
                let LinkTotals {
                    bytes, messages, ..
                } = l.stats.totals();
                let status = l.status();
                Value::Array(vec![
                    Value::Int(l.id as i32),
                    Value::Int(bytes as i32),
                    Value::Int(messages as i32),
                    Value::Int(status.udp.lost() as i32),
                    Value::Bool(status.connected),
                ])
            });
            Value::Array(vec![
                Value::from(s.config.topic.as_str()),
                Value::Array(conns.collect()),
            ])
        });
        Value::Array(vec![
            Value::Array(pubs.collect()),
            Value::Array(subs.collect()),
            Value::Array(vec![]),
        ])
    }

    /// getBusInfo rows, in the form `rosnode info` parses.
    pub(crate) fn bus_info(&self) -> Value {
        let mut rows = Vec::new();
        for p in self.publication_list() {
            for l in p.subscriber_links() {
                rows.push(Value::Array(vec![
                    Value::Int(l.id as i32),
                    Value::from(l.caller_id.as_str()),
                    Value::from("o"),
                    Value::from(l.protocol.ros_name()),
                    Value::from(p.info.topic.as_str()),
                    Value::Bool(true),
                    Value::String(format!(
                        "{} connection on port {} to [{} on socket {}]",
                        l.protocol.ros_name(),
                        l.local_port,
                        l.peer,
                        l.id
                    )),
                ]));
            }
        }
        for s in self.subscription_list() {
            for l in s.publisher_links() {
                let status = l.status();
                let protocol = status.protocol.unwrap_or(Protocol::Tcp);
                let peer = status.peer.map(|p| p.to_string()).unwrap_or_default();
                rows.push(Value::Array(vec![
                    Value::Int(l.id as i32),
                    Value::from(l.uri.as_str()),
                    Value::from("i"),
                    Value::from(protocol.ros_name()),
                    Value::from(s.config.topic.as_str()),
                    Value::Bool(status.connected),
                    Value::String(format!(
                        "{} connection on port {} to [{peer} on socket {}]",
                        protocol.ros_name(),
                        status.local_port,
                        l.id
                    )),
                ]));
            }
        }
        Value::Array(rows)
    }

    /// Answers requestTopic: the first offered protocol this node can serve.
    pub(crate) async fn request_topic(
        self: Arc<Self>,
        caller_id: String,
        topic: String,
        protocols: Vec<Value>,
    ) -> StatusReply {
        let Some(publication) = self.publication(&topic) else {
            return StatusReply::new(
                -1,
                format!("Not a publisher of [{topic}]"),
                Value::Array(vec![]),
            );
        };
        // Past the publication's cap no transport will do: say so rather than offer TCPROS.
        if let Err(refusal) = publication.admit_any() {
            tracing::warn!("requestTopic from {caller_id}: {refusal}");
            return StatusReply::new(0, refusal, Value::Array(vec![]));
        }
        let mut udp_refused = None;
        for entry in &protocols {
            let Some(items) = entry.as_array() else {
                continue;
            };
            let offer = Offer::from_params(
                &crate::xmlrpc::entry_params(items),
                &HeaderLimits::default(),
            );
            match offer {
                Ok(Some(Offer::Tcpros)) => {
                    let host = self.id.host.clone();
                    let port = self.tcp_port.get().copied().unwrap_or(0);
                    let answer = Answer::Tcpros {
                        host: host.clone(),
                        port,
                    };
                    let reply = crate::xmlrpc::entry(answer.to_params());
                    return StatusReply::ok(format!("ready on {host}:{port}"), reply);
                }
                Ok(Some(Offer::Udpros(offer))) => {
                    match self.udp_link(&publication, &caller_id, offer).await {
                        Ok(answer) => {
                            return StatusReply::ok("", crate::xmlrpc::entry(answer.to_params()))
                        }
                        // The next offer (TCPROS, usually) may still work: an IPv4-only node
                        // cannot send to an IPv6-only subscriber, but it can accept its TCP.
                        Err(e) => {
                            tracing::info!("UDPROS request for {topic} from {caller_id}: {e}");
                            udp_refused = Some(e);
                        }
                    }
                }
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!("requestTopic for {topic} from {caller_id}: {e}");
                    return StatusReply::new(0, e.to_string(), Value::Array(vec![]));
                }
            }
        }
        let why = udp_refused.unwrap_or_else(|| "no supported protocol implementations".into());
        StatusReply::new(0, why, Value::Array(vec![]))
    }

    async fn udp_link(
        &self,
        publication: &Arc<Publication>,
        caller_id: &str,
        offer: UdprosOffer,
    ) -> Result<Answer, String> {
        let mut reply = publication.accept(&offer.header)?;
        let plan = UdpPlan::for_offer(&offer);
        let peer = resolve_udp_peer(self.id.bind, &offer.host, offer.port, !plan.udpros_peer)
            .await
            .map_err(|e| e.to_string())?;
        if self.id.bind.is_loopback() && !peer.ip().to_canonical().is_loopback() {
            return Err(format!(
                "ROS_HOSTNAME / ROS_IP allow only local connections, not {}",
                offer.host
            ));
        }
        // requestTopic checked the publication's cap and the descriptors already.
        publication.admit_host(peer.ip())?;
        let (socket, _) = udp_socket(SocketAddr::new(self.id.bind, 0), plan.send_buffer)
            .map_err(|e| e.to_string())?;
        socket
            .connect(peer)
            .map_err(|e| format!("connect UDP to {peer}: {e}"))?;
        let route_mtu = crate::transport::route_mtu(&socket);
        let route_payload =
            route_mtu.map(|mtu| mtu.saturating_sub(crate::transport::udp_headers(peer)));
        let max_datagram = plan.datagram_for_route(route_payload);
        // Declared in the answer: roscpp treats this port as informational, udpros
        // subscribers accept datagrams only from it.
        let source_port = socket.local_addr().map_err(|e| e.to_string())?.port();
        let connection_id = self.link_ids.fetch_add(1, Ordering::Relaxed);
        publication.add_udp_link(
            socket,
            caller_id,
            connection_id,
            max_datagram,
            plan.udpros_peer,
            route_mtu,
        )?;
        reply.insert(UDPROS_PEER_FIELD, "1");
        Ok(Answer::Udpros(UdprosAnswer {
            host: self.id.host.clone(),
            port: source_port,
            connection_id: connection_id as i32,
            max_datagram,
            header: reply,
        }))
    }
}
