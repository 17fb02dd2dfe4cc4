//! udpros's links inside a node that another library runs.
//!
//! rospy serves its node's slave API itself, answers `requestTopic` itself and connects
//! its subscribers itself, and it speaks only TCPROS. A [`Guest`] lends such a node
//! udpros's links one at a time, under the host node's name and address:
//!
//! - [`Guest::link_to_publisher`]: a subscriber's link to one publisher, negotiated,
//!   reassembled, repaired (FEC) and retried exactly as a udpros node's own links are
//!   (UDPROS first by default, TCPROS where the publisher refuses it);
//! - [`Guest::answer_udpros`]: the UDPROS link a subscriber asks one of the host node's
//!   publications for, and the `requestTopic` answer that tells it where the datagrams
//!   come from.
//!
//! The guest registers nothing with the master and serves no XML-RPC: the host node keeps
//! its registrations, its URI and its graph. `import udpros.rospy` in the Python package
//! is built on it.

use crate::node::{AdvertiseOptions, RawSubscriber, SubscribeOptions};
use crate::secure::{Security, SecurityError};
use crate::transport::host_share::HostBudgets;
use crate::transport::publication::{LinkLimits, Publication, SubscriberLink};
use crate::transport::subscription::{LocalNode, Subscription, SubscriptionConfig};
use crate::transport::{Protocol, SubscriberLinkStats};
use crate::wire::header::HeaderLimits;
use crate::wire::negotiation::Offer;
use crate::wire::topic::TopicIdentity;
use crate::xmlrpc::{Value, XmlRpcClient};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// udpros's links for a node another library runs (see the [module](self)).
pub struct Guest {
    local: LocalNode,
    hosts: Arc<HostBudgets>,
    /// The host node's publications that have UDPROS links, by topic: where the caps on
    /// links apply.
    publications: Mutex<HashMap<String, Arc<Publication>>>,
    options: AdvertiseOptions,
}

impl std::fmt::Debug for Guest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guest")
            .field("node", &self.local.node_name)
            .field("host", &self.local.host)
            .finish()
    }
}

/// A topic the host node publishes, as its subscribers' handshakes check it.
#[derive(Debug, Clone)]
pub struct PublishedTopic {
    /// The resolved topic name.
    pub topic: String,
    /// The message type, `pkg/Name`.
    pub msg_type: String,
    /// The type's md5sum.
    pub md5sum: String,
    /// The type's full definition.
    pub definition: String,
    /// Whether the host node latches the topic (said in the answer's header; the host
    /// node sends the latched message itself).
    pub latch: bool,
}

/// Why a subscriber's UDPROS offer was not taken; its text is what `requestTopic`
/// answers.
#[derive(Debug)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

impl Guest {
    /// A guest of the node named `node_name` (its resolved name, the `callerid` its
    /// headers carry) whose URIs advertise `host`. Sockets bind as a udpros node's do
    /// (`ROS_IP`, `ROS_HOSTNAME`, `ROS_IPV6`); secure links follow `UDPROS_SECURE` and
    /// `UDPROS_KEY_FILE`. `publications` sets what each UDPROS link to a subscriber may
    /// queue and how many there may be ([`latch`](AdvertiseOptions::latch) is the
    /// topic's own, in [`PublishedTopic`]).
    pub fn new(
        node_name: &str,
        host: &str,
        publications: AdvertiseOptions,
    ) -> Result<Guest, SecurityError> {
        let security = Security::from_env()?;
        let overrides = crate::host::HostOverrides::from_env();
        let client =
            XmlRpcClient::new(Duration::from_secs(2), Duration::from_secs(10)).signed(&security);
        Ok(Guest {
            local: LocalNode {
                node_name: node_name.to_string(),
                host: host.to_string(),
                bind: crate::host::bind_address(&overrides),
                client,
                link_ids: Arc::new(AtomicU32::new(0)),
                security,
                runtime: tokio::runtime::Handle::try_current().ok(),
            },
            hosts: Arc::new(HostBudgets::default()),
            publications: Mutex::new(HashMap::new()),
            options: publications,
        })
    }

    /// A subscriber's link to the publisher at `publisher_uri` for `topic`, as a udpros
    /// node's subscription links to each publisher: `options.transports` in order of
    /// preference, FEC asked of udpros publishers, retried while the handle lives. Call
    /// it within a tokio runtime; the link runs on it. Closing or dropping the handle
    /// ends the link.
    pub fn link_to_publisher(
        &self,
        publisher_uri: &str,
        topic: &str,
        msg_type: &str,
        md5sum: &str,
        definition: &str,
        options: SubscribeOptions,
    ) -> RawSubscriber {
        let config = SubscriptionConfig {
            topic: topic.to_string(),
            msg_type: msg_type.to_string(),
            md5sum: md5sum.to_string(),
            definition: definition.to_string(),
            transports: options.transports,
            max_datagram_size: options.max_datagram_size,
            tcp_nodelay: options.tcp_nodelay,
            max_message_size: options.max_message_size,
            fec: options.fec,
            links_on: options.links_on,
        };
        let (subscription, sink) = Subscription::to_one_publisher(
            config,
            self.local.clone(),
            publisher_uri,
            options.queue_size,
            options.max_queued_bytes,
        );
        RawSubscriber::detached(subscription, sink)
    }

    /// Answers a subscriber's UDPROS offer (`offer`: the protocol entry of its
    /// `requestTopic`, `["UDPROS", header, host, port, max_datagram]`) for `topic`: the
    /// entry to answer with (`["UDPROS", host, port, connection_id, max_datagram,
    /// header]`) and the link that sends to it. Call it within a tokio runtime.
    pub async fn answer_udpros(
        &self,
        topic: &PublishedTopic,
        offer: &[Value],
    ) -> Result<(Vec<Value>, GuestLink), Refused> {
        let params = crate::xmlrpc::entry_params(offer);
        let offer = match Offer::from_params(&params, &HeaderLimits::default()) {
            Ok(Some(Offer::Udpros(offer))) => offer,
            Ok(_) => return Err(Refused("not a UDPROS offer".into())),
            Err(e) => return Err(Refused(e.to_string())),
        };
        let caller_id = offer.header.get("callerid").unwrap_or("").to_string();
        let publication = self.publication(topic);
        publication
            .admit_any()
            .map_err(|e| Refused(e.to_string()))?;
        let (answer, link) = crate::transport::udp_answer::open_udp_link(
            &self.local,
            &publication,
            &caller_id,
            offer,
        )
        .await
        .map_err(|e| Refused(e.to_string()))?;
        let entry = match crate::xmlrpc::entry(answer.to_params()) {
            Value::Array(items) => items,
            _ => Vec::new(),
        };
        Ok((entry, GuestLink { publication, link }))
    }

    /// The publication of `topic` that holds its UDPROS links: the one there is, unless
    /// the host node now publishes another type under the name; publications with no
    /// link left are forgotten.
    fn publication(&self, topic: &PublishedTopic) -> Arc<Publication> {
        let mut publications = self.publications.lock().unwrap_or_else(|e| e.into_inner());
        publications.retain(|_, p| p.num_subscribers() > 0);
        let same = |p: &&Arc<Publication>| {
            p.info.msg_type == topic.msg_type
                && p.info.md5sum == topic.md5sum
                && p.latch == topic.latch
        };
        if let Some(publication) = publications.get(&topic.topic).filter(same) {
            return publication.clone();
        }
        let publication = Arc::new(Publication::new(
            TopicIdentity {
                node: self.local.node_name.clone(),
                topic: topic.topic.clone(),
                msg_type: topic.msg_type.clone(),
                md5sum: topic.md5sum.clone(),
                definition: topic.definition.clone(),
            },
            // The host node numbers its messages' headers itself.
            false,
            topic.latch,
            LinkLimits::from(&self.options),
            self.hosts.clone(),
            self.local.link_ids.clone(),
        ));
        publications.insert(topic.topic.clone(), publication.clone());
        publication
    }
}

/// One UDPROS link from a host node's publication to a subscriber (from
/// [`Guest::answer_udpros`]). Dropping it closes the link (a udpros subscriber is told).
pub struct GuestLink {
    publication: Arc<Publication>,
    link: Arc<SubscriberLink>,
}

impl std::fmt::Debug for GuestLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestLink")
            .field("topic", &self.publication.info.topic)
            .field("subscriber", &self.link.caller_id)
            .field("peer", &self.link.peer)
            .finish()
    }
}

impl GuestLink {
    /// Sends one serialized message, its 4-byte length prefix included (as rospy's
    /// publisher hands each connection its buffer). Never waits: an idle link sends it at
    /// once, on this thread; a busy one queues it, dropping the oldest when full. False
    /// once the link has closed (the subscriber left).
    pub fn send(&self, frame: &[u8]) -> bool {
        if self.link.is_closed() {
            return false;
        }
        self.link
            .offer(&Bytes::copy_from_slice(frame), Instant::now());
        !self.link.is_closed()
    }

    /// Whether the link closed (the subscriber left, or [`close`](Self::close)).
    pub fn is_closed(&self) -> bool {
        self.link.is_closed()
    }

    /// Closes the link; a udpros subscriber is told.
    pub fn close(&self) {
        self.link.close();
    }

    /// The link's id, the `connection_id` of the answer.
    pub fn id(&self) -> u32 {
        self.link.id
    }

    /// The local port the link sends from.
    pub fn local_port(&self) -> u16 {
        self.link.local_port
    }

    /// The link's counters and state now.
    pub fn stats(&self) -> SubscriberLinkStats {
        self.link.snapshot()
    }

    /// UDPROS, always: the guest answers only UDPROS offers.
    pub fn protocol(&self) -> Protocol {
        self.link.protocol
    }
}

impl Drop for GuestLink {
    fn drop(&mut self) {
        self.link.close();
    }
}
