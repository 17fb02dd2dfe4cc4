//! Publishing and subscribing: typed and untyped handles, the node's registries of
//! publications and subscriptions, negotiation answers (requestTopic), and the statistics
//! the slave API reports.

use super::handles::{Publisher, RawPublisher, RawSubscriber, Subscriber};
use super::{lock, Node, NodeError, NodeInner};
use crate::msg::Message;
use crate::transport::publication::{LinkLimits, Publication};
use crate::transport::subscription::{LocalNode, Subscription, SubscriptionConfig};
use crate::transport::Protocol;
use crate::wire::topic::TopicIdentity;
use crate::wire::udpros::fec::FecPolicy;
use crate::wire::udpros::governor::GovernorConfig;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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
    /// Forward error correction on UDPROS links to udpros subscribers that ask for it (see
    /// [`crate::wire::udpros::fec`]): by default adaptive, each message of several
    /// datagrams carrying a checksum and the fewest repair datagrams that keep the chance
    /// of losing it under one in a thousand at the loss the subscriber reports;
    /// [`FecPolicy::Fixed`] adds at least a fixed ratio, [`FecPolicy::Off`] keeps today's
    /// wire.
    pub fec: FecPolicy,
    /// The link governor on UDPROS links to udpros subscribers on other hosts (see
    /// [`crate::wire::udpros::governor`]): each link is paced just under the rate its path
    /// is measured to carry, so that a narrow radio's queue stays short and large messages
    /// arrive whole. On by default ([`GovernorConfig::default`]); `None` keeps the fixed
    /// pacing of a link without one. A link to this host, or to a roscpp or rospy
    /// subscriber (which sends no feedback), is never governed.
    pub governor: Option<GovernorConfig>,
    /// How old a message may be when it reaches a subscriber on another host over TCPROS
    /// (see [`crate::wire::freshness`]). On a path narrower than what is published (a
    /// radio), the link sends the newest messages whole and drops, before their first
    /// byte, those that would arrive older than this at the rate the path drains (counted
    /// in the link's drops; the newest is always sent), and the kernel holds only 32 KiB
    /// unsent (`TCP_NOTSENT_LOWAT`). A link with room
    /// never drops: only a message that waits for its link can go stale. Links to this
    /// host (a recorder, a slow local reader) send every message the queue holds, as
    /// roscpp does; so do publishers that wait for room. `None` turns it off. By default
    /// [`DEFAULT_FRESHNESS`](crate::wire::freshness::DEFAULT_FRESHNESS), 500 ms.
    pub freshness: Option<std::time::Duration>,
    /// The most each subscriber link sends, in bytes per second (a 4 Mbit/s radio is
    /// 500,000): for a path you know is narrow. Toward roscpp and rospy subscribers, which
    /// say nothing of what arrives, it is the only way a publisher knows. A UDPROS link
    /// is paced at it in bursts of 2 ms and, when it cannot carry what is published, sends
    /// the newest messages whole, dropping before their first datagram those that would
    /// wait more than 200 ms for it (counted in the link's drops); a governed link is
    /// paced at the lower of this and its governor's rate. A TCPROS link is paced by the
    /// kernel (`SO_MAX_PACING_RATE`) and keeps to [`freshness`](Self::freshness), to
    /// this host too. `None` (the default): no cap. For a cap that all of a node's
    /// topics share, see [`NodeOptions::max_rate_per_host`](super::NodeOptions::max_rate_per_host).
    pub max_rate: Option<f64>,
    /// The topic's messages go before any bulk datagram of the node's other links in the
    /// budget they share toward a host ([`NodeOptions::max_rate_per_host`](super::NodeOptions::max_rate_per_host)),
    /// whatever their size: control, a small state topic sent as one large message. Any
    /// message that fits one datagram ([`SMALL_MESSAGE_BYTES`](crate::wire::host_budget::SMALL_MESSAGE_BYTES))
    /// is urgent already. Strict priority holds inside the node only: in the path (a
    /// radio's queue) every process's datagrams wait in one line, which the budget keeps
    /// short. Off by default; without a per-host budget it changes nothing.
    pub urgent: bool,
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
            fec: FecPolicy::default(),
            governor: Some(GovernorConfig::default()),
            freshness: Some(crate::wire::freshness::DEFAULT_FRESHNESS),
            max_rate: None,
            urgent: false,
        }
    }
}

impl From<&AdvertiseOptions> for LinkLimits {
    fn from(options: &AdvertiseOptions) -> LinkLimits {
        LinkLimits {
            queue_size: options.queue_size,
            queue_bytes: options.max_queued_bytes,
            max_links: options.max_links,
            max_links_per_host: options.max_links_per_host,
            fec: options.fec,
            governor: options.governor,
            freshness: options.freshness,
            max_rate: options.max_rate.filter(|r| r.is_finite() && *r > 0.0),
            urgent: options.urgent,
        }
    }
}

impl AdvertiseOptions {
    /// The defaults with [`latch`](Self::latch) on: each subscriber that connects gets the
    /// last message published (rospy's `latch=True`, roscpp's `advertise(..., true)`).
    pub fn latched() -> Self {
        AdvertiseOptions {
            latch: true,
            ..Self::default()
        }
    }
}

/// The range of a rate cap a user gives in bytes per second (a `~max_rate` parameter,
/// `--max-rate`): at least 1 kB/s, below which a single large message would take minutes
/// and the link would only ever drop; at most 10 Gbit/s.
pub const MAX_RATE_RANGE: std::ops::RangeInclusive<f64> = 1_000.0..=1.25e9;

/// A user's rate cap in bytes per second as [`AdvertiseOptions::max_rate`] takes it: 0 is
/// none; otherwise it must lie in [`MAX_RATE_RANGE`], and anything else (negative, NaN,
/// out of range) is refused with what is allowed, never clamped silently.
pub fn max_rate_from(bytes_per_second: f64) -> Result<Option<f64>, String> {
    if bytes_per_second == 0.0 {
        Ok(None)
    } else if MAX_RATE_RANGE.contains(&bytes_per_second) {
        Ok(Some(bytes_per_second))
    } else {
        Err(format!(
            "a rate cap of {bytes_per_second} bytes/s is out of range: expected 0 (none) or {} to {}",
            MAX_RATE_RANGE.start(),
            MAX_RATE_RANGE.end()
        ))
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
    /// The datagram size to ask UDPROS publishers for (roscpp's `maxDatagramSize` hint).
    /// By default (`None`), a publisher on this host is asked for the largest datagram its
    /// route carries (65,507 bytes over loopback): there datagrams are not fragmented, lost
    /// or paced, and fewer of them cost less to read. A publisher on another host is asked
    /// for 1500 bytes, roscpp's default, which a udpros publisher fits to its route.
    pub max_datagram_size: Option<usize>,
    /// Ask TCPROS publishers for `TCP_NODELAY` (roscpp's `tcpNoDelay()` hint).
    pub tcp_nodelay: bool,
    /// Messages queued before the oldest is dropped.
    pub queue_size: usize,
    /// Bytes queued before the oldest message is dropped (the newest is always kept).
    pub max_queued_bytes: usize,
    /// Larger messages are refused (and the link dropped, on TCP).
    pub max_message_size: usize,
    /// Forward error correction asked of udpros publishers on UDPROS links: by default
    /// adaptive (the link reports the loss it sees and the publisher repairs for it);
    /// [`FecPolicy::Fixed`] asks for at least a fixed ratio of repair,
    /// [`FecPolicy::Adaptive`] with a stricter target for that, [`FecPolicy::Off`] for
    /// nothing. roscpp publishers are never asked.
    pub fec: FecPolicy,
    /// The runtime that runs the links, when not the one the subscription is made on: a
    /// [`DrivenRuntime`](crate::transport::DrivenRuntime) whose `block_on` the consumer
    /// waits in, so that each message is read, reassembled and handed over on the
    /// consumer's own thread, with no other thread woken. Taken by the first subscriber of
    /// a topic in a node (later ones share its links).
    pub links_on: Option<Arc<crate::transport::DrivenRuntime>>,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        SubscribeOptions {
            transports: vec![Protocol::Udp, Protocol::Tcp],
            max_datagram_size: None,
            tcp_nodelay: true,
            queue_size: 100,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
            max_message_size: 64 << 20,
            fec: FecPolicy::default(),
            links_on: None,
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

impl Node {
    /// Every subscriber link of every topic this node publishes, by topic: what each
    /// link sent and dropped, and FEC on UDPROS links to udpros subscribers (what bridges
    /// put in `/diagnostics`).
    pub fn publication_links(&self) -> Vec<(String, crate::transport::SubscriberLinkStats)> {
        self.inner
            .publication_list()
            .iter()
            .flat_map(|p| {
                let topic = p.info.topic.clone();
                p.subscriber_links()
                    .into_iter()
                    .map(move |l| (topic.clone(), l.snapshot()))
            })
            .collect()
    }

    /// Advertises `topic` with message type `M`.
    ///
    /// On a node that shut down (or is shutting down) this registers nothing and returns
    /// a publisher with no links, as roscpp's `NodeHandle::advertise` then does: a
    /// program that is ending needs no error path for it. The same holds for
    /// [`subscribe`](Self::subscribe) (its `recv()` returns `None` at once) and
    /// [`advertise_service`](Self::advertise_service).
    pub async fn advertise<M: Message>(
        &self,
        topic: &str,
        options: AdvertiseOptions,
    ) -> Result<Publisher<M>, NodeError> {
        let raw = self
            .advertise_raw(topic, M::TYPE, M::MD5SUM, M::DEFINITION, options)
            .await?;
        Ok(Publisher::new(raw))
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
        let new_publication = || {
            Publication::new(
                info,
                has_header,
                options.latch,
                LinkLimits::from(&options),
                self.inner.host_budgets.clone(),
                self.inner.link_ids.clone(),
            )
        };
        // Before the table: a shutdown from here on waits for this registration.
        let Some(_registering) = self.inner.registering.begin() else {
            return Ok(RawPublisher::closed(new_publication()));
        };
        let publication = {
            let mut pubs = lock(&self.inner.topics.publications);
            if let Some(existing) = pubs.get(&topic) {
                // One topic, one type: a second advertisement of another type would
                // re-type the topic at the master under the first one's subscribers.
                let published = &existing.publication.info;
                let md5_differs =
                    published.md5sum != md5sum && md5sum != "*" && published.md5sum != "*";
                if published.msg_type != msg_type || md5_differs {
                    return Err(NodeError::TypeMismatch(
                        topic,
                        published.msg_type.clone(),
                        msg_type.into(),
                    ));
                }
            }
            let entry = pubs.entry(topic.clone()).or_insert_with(|| Advertised {
                publication: Arc::new(new_publication()),
                handles: 0,
            });
            entry.handles += 1;
            entry.publication.clone()
        };
        self.inner.in_flight.settled(&format!("pub {topic}")).await;
        self.inner
            .master
            .register_publisher(&topic, msg_type, self.uri())
            .await?;
        Ok(RawPublisher::new(&self.inner, publication))
    }

    /// Subscribes to `topic` with message type `M`.
    pub async fn subscribe<M: Message>(
        &self,
        topic: &str,
        options: SubscribeOptions,
    ) -> Result<Subscriber<M>, NodeError> {
        let raw = self
            .subscribe_raw_as(topic, M::TYPE, M::MD5SUM, M::DEFINITION, options)
            .await?;
        Ok(Subscriber::new(raw))
    }

    /// Subscribes to `topic` whatever its type (md5 `*`): messages arrive as bytes with the
    /// publisher's connection header, whose `type` and `message_definition` describe them.
    pub async fn subscribe_raw(
        &self,
        topic: &str,
        options: SubscribeOptions,
    ) -> Result<RawSubscriber, NodeError> {
        self.subscribe_raw_as(topic, "*", "*", "", options).await
    }

    /// Subscribes to `topic` as a subscriber of `msg_type` (its `md5sum` and full
    /// `definition`, which publishers check and rospy's connection header carries), with
    /// messages as bytes: for bindings whose message classes live outside Rust (genpy's,
    /// in the Python package).
    pub async fn subscribe_raw_as(
        &self,
        topic: &str,
        msg_type: &str,
        md5sum: &str,
        definition: &str,
        options: SubscribeOptions,
    ) -> Result<RawSubscriber, NodeError> {
        let topic = self.resolve_name(topic);
        let new_subscription = || {
            let config = SubscriptionConfig {
                topic: topic.clone(),
                msg_type: msg_type.into(),
                md5sum: md5sum.into(),
                definition: definition.into(),
                transports: options.transports.clone(),
                max_datagram_size: options.max_datagram_size,
                tcp_nodelay: options.tcp_nodelay,
                max_message_size: options.max_message_size,
                fec: options.fec,
                links_on: options.links_on.clone(),
            };
            Subscription::new(config, self.inner.local())
        };
        let Some(_registering) = self.inner.registering.begin() else {
            return Ok(RawSubscriber::closed(
                new_subscription(),
                options.queue_size,
            ));
        };
        let (subscription, fresh) = {
            let mut subs = lock(&self.inner.topics.subscriptions);
            match subs.get(&topic) {
                Some(s) => (s.clone(), false),
                None => {
                    let s = new_subscription();
                    subs.insert(topic.clone(), s.clone());
                    (s, true)
                }
            }
        };
        let sink = subscription.add_sink(options.queue_size, options.max_queued_bytes);
        if fresh {
            self.inner.in_flight.settled(&format!("sub {topic}")).await;
            let updates_before = subscription.update_count();
            let publishers = self
                .inner
                .master
                .register_subscriber(&topic, msg_type, self.uri())
                .await?;
            subscription.registered(&publishers, updates_before);
        }
        Ok(RawSubscriber::new(&self.inner, subscription, sink))
    }
}

/// Whether a type's full definition starts with `Header header` (its own text is the part
/// before the first section separator); unknown or unparsable definitions have none.
fn definition_has_header(msg_type: &str, definition: &str) -> bool {
    use crate::codegen::spec::{MsgSpec, SECTION_SEPARATOR};
    let own = definition.split(SECTION_SEPARATOR).next().unwrap_or("");
    MsgSpec::parse(msg_type, own).is_ok_and(|spec| spec.has_header())
}

impl NodeInner {
    /// Who this node is, as its links tell their peers.
    pub(crate) fn local(&self) -> LocalNode {
        LocalNode {
            node_name: self.id.name.clone(),
            host: self.id.host.clone(),
            bind: self.id.bind,
            client: self.client.clone(),
            link_ids: self.link_ids.clone(),
            security: self.security.clone(),
            runtime: self.runtime.clone(),
        }
    }

    pub(crate) fn publication(&self, topic: &str) -> Option<Arc<Publication>> {
        lock(&self.topics.publications)
            .get(topic)
            .map(|a| a.publication.clone())
    }

    pub(crate) fn publication_list(&self) -> Vec<Arc<Publication>> {
        let mut v: Vec<_> = lock(&self.topics.publications)
            .values()
            .map(|a| a.publication.clone())
            .collect();
        v.sort_by(|a, b| a.info.topic.cmp(&b.info.topic));
        v
    }

    pub(crate) fn subscription_list(&self) -> Vec<Arc<Subscription>> {
        let mut v: Vec<_> = lock(&self.topics.subscriptions).values().cloned().collect();
        v.sort_by(|a, b| a.config.topic.cmp(&b.config.topic));
        v
    }

    pub(crate) fn publisher_update(&self, topic: &str, publishers: Vec<String>) -> bool {
        match lock(&self.topics.subscriptions).get(topic) {
            Some(s) => {
                s.publisher_update(&publishers);
                true
            }
            None => false,
        }
    }
}
