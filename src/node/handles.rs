//! The handles a program publishes and subscribes with, typed and untyped; the last
//! handle of a topic dropped unadvertises or unsubscribes it.

use super::registry::{remove_if_same, Registration};
use super::NodeInner;
use crate::msg::Message;
use crate::transport::publication::Publication;
use crate::transport::queue::DropOldest;
use crate::transport::subscription::{PublisherLinkStats, Received, Subscription};
use crate::transport::SubscriberLinkStats;
use crate::wire::header::ConnectionHeader;
use bytes::Bytes;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A handle on an advertised topic; the last one dropped unadvertises it.
pub struct RawPublisher {
    node: std::sync::Weak<NodeInner>,
    publication: Arc<Publication>,
}

impl RawPublisher {
    pub(super) fn new(node: &Arc<NodeInner>, publication: Arc<Publication>) -> RawPublisher {
        RawPublisher {
            node: Arc::downgrade(node),
            publication,
        }
    }

    /// A handle for a node that shut down (as roscpp's `NodeHandle::advertise` then
    /// gives): registered nowhere, with no links; publishing does nothing.
    pub(super) fn closed(publication: Publication) -> RawPublisher {
        publication.close();
        RawPublisher {
            node: std::sync::Weak::new(),
            publication: Arc::new(publication),
        }
    }

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

    /// Each subscriber link's counters now, by subscriber name: messages sent and dropped,
    /// and on UDPROS links to udpros subscribers, FEC (the loss they report, the
    /// redundancy in use).
    pub fn links(&self) -> Vec<SubscriberLinkStats> {
        let mut links: Vec<_> = self
            .publication
            .subscriber_links()
            .iter()
            .map(|l| l.snapshot())
            .collect();
        links.sort_by(|a, b| a.caller_id.cmp(&b.caller_id));
        links
    }
}

impl Drop for RawPublisher {
    fn drop(&mut self) {
        let Some(node) = self.node.upgrade() else {
            return;
        };
        let topic = self.publication.info.topic.clone();
        let last = {
            let mut pubs = super::lock(&node.topics.publications);
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
            node.spawn_unregister(Registration::Publisher(self.publication.clone()));
        }
    }
}

/// A typed publisher.
pub struct Publisher<M> {
    raw: RawPublisher,
    _type: PhantomData<fn(M)>,
}

impl<M: Message> Publisher<M> {
    pub(super) fn new(raw: RawPublisher) -> Publisher<M> {
        Publisher {
            raw,
            _type: PhantomData,
        }
    }

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

    /// Each subscriber link's counters now (see [`RawPublisher::links`]).
    pub fn links(&self) -> Vec<SubscriberLinkStats> {
        self.raw.links()
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
    pending: Option<Pin<Box<dyn Future<Output = Option<Received>> + Send + Sync>>>,
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
    pub(super) fn new(
        node: &Arc<NodeInner>,
        subscription: Arc<Subscription>,
        sink: Arc<DropOldest<Received>>,
    ) -> RawSubscriber {
        RawSubscriber {
            node: Arc::downgrade(node),
            subscription,
            sink,
            pending: None,
        }
    }

    /// A handle for a node that shut down: registered nowhere; `recv()` returns `None`.
    pub(super) fn closed(subscription: Arc<Subscription>, queue_size: usize) -> RawSubscriber {
        let sink = subscription.add_sink(queue_size, 0);
        subscription.close();
        RawSubscriber {
            node: std::sync::Weak::new(),
            subscription,
            sink,
            pending: None,
        }
    }

    /// A handle on a subscription that belongs to no node (a
    /// [`Guest`](crate::guest::Guest)'s link to one publisher): dropping or closing the
    /// last handle ends its links.
    pub(crate) fn detached(
        subscription: Arc<Subscription>,
        sink: Arc<DropOldest<Received>>,
    ) -> RawSubscriber {
        RawSubscriber {
            node: std::sync::Weak::new(),
            subscription,
            sink,
            pending: None,
        }
    }

    /// Stops this handle now rather than when it drops: `recv()` returns `None` from here
    /// on, and when it was the topic's last handle the subscription ends (unregistered,
    /// its links closed), as dropping it does.
    pub fn close(&self) {
        if self.subscription.remove_sink(&self.sink) > 0 {
            return;
        }
        let Some(node) = self.node.upgrade() else {
            // A detached subscription (or a shut-down node's, closed already).
            self.subscription.close();
            return;
        };
        let topic = &self.subscription.config.topic;
        // Not if the node's shutdown took it out already.
        if !remove_if_same(&node.topics.subscriptions, topic, &self.subscription) {
            return;
        }
        self.subscription.close();
        node.spawn_unregister(Registration::Subscriber(self.subscription.clone()));
    }

    /// The next message, `None` once the node shuts down. Takes `&self`: tasks sharing
    /// one handle (an `Arc`) take turns at its messages, each message to one of them, and
    /// its links can be read while one of them waits.
    pub fn recv(&self) -> impl Future<Output = Option<Received>> + Send + 'static {
        let sink = self.sink.clone();
        async move { sink.pop().await }
    }

    /// The next message if one is waiting, without waiting.
    pub fn try_recv(&self) -> Option<Received> {
        self.sink.try_pop()
    }

    /// The resolved topic name.
    pub fn topic(&self) -> &str {
        &self.subscription.config.topic
    }

    /// The [`DrivenRuntime`](crate::transport::DrivenRuntime) the links run on, when the
    /// topic's first subscriber gave one ([`SubscribeOptions::links_on`](super::SubscribeOptions::links_on)):
    /// wait for messages in its `block_on` to read them on the waiting thread.
    pub fn links_on(&self) -> Option<&Arc<crate::transport::DrivenRuntime>> {
        self.subscription.config.links_on.as_ref()
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

    /// A function that lists the caller ids of the publishers linked now (from their
    /// connection headers), still usable after this handle moved into a task.
    pub(crate) fn linked_callers(&self) -> impl Fn() -> Vec<String> + Send + Sync + 'static {
        let subscription = self.subscription.clone();
        move || {
            subscription
                .publisher_links()
                .iter()
                .map(|l| l.snapshot())
                .filter(|s| s.connected)
                .filter_map(|s| Some(s.header?.get("callerid")?.to_string()))
                .collect()
        }
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
        self.close();
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
    pub(super) fn new(raw: RawSubscriber) -> Subscriber<M> {
        Subscriber {
            raw,
            _type: PhantomData,
        }
    }

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
