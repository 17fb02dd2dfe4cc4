//! What the view gets from the graph by subscribing: a topic's messages, forwarded while
//! clients want them, and a type's definition from a publisher's connection header. Both
//! know nothing of the hub: they hand what arrives to the closures they are given.

use crate::links::LinkSummary;
use bytes::Bytes;
use std::time::{Duration, Instant};
use udpros::node::{Node, NodeError, SentPaths, SubscribeOptions};
use udpros::transport::Protocol;

/// How often a forward's link counters are read for the console.
const LINK_REFRESH: Duration = Duration::from_secs(1);

/// How long a publisher has to send its connection header when its type is learned.
const LEARN_TIMEOUT: Duration = Duration::from_secs(3);

/// Subscribes to `topic` (UDPROS first, TCPROS where a publisher refuses it) and hands
/// each message's bytes to `deliver` and, every second, the links' summary to `links`,
/// until the subscription ends or the caller drops (aborts) this future. `Err` when the
/// subscription could not be made.
pub(crate) async fn forward(
    node: &Node,
    topic: &str,
    mut deliver: impl FnMut(Bytes),
    mut links: impl FnMut(LinkSummary),
) -> Result<(), NodeError> {
    let options = SubscribeOptions {
        transports: vec![Protocol::Udp, Protocol::Tcp],
        ..SubscribeOptions::default()
    };
    let subscriber = node.subscribe_raw(topic, options).await?;
    let mut refresh = tokio::time::interval(LINK_REFRESH);
    refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let paths = SentPaths::default();
    loop {
        tokio::select! {
            received = subscriber.recv() => match received {
                Some(received) => deliver(received.body),
                None => return Ok(()),
            },
            _ = refresh.tick() => {
                let stats = subscriber.links();
                let mut summary = LinkSummary::of(&stats);
                // The publisher's own view of its link: a governed one's path, and what
                // any link dropped (the first publisher that says, on a shared topic).
                summary.path = paths.known(&stats).into_iter().next().map(|(_, p)| p);
                paths.refresh(node, topic, &stats);
                links(summary);
            }
        }
    }
}

/// The definition a publisher of `topic` sends in its connection header, if one answers
/// within [`LEARN_TIMEOUT`]: how the view learns a type this machine has no package for.
pub(crate) async fn ask_publisher(node: &Node, topic: &str) -> Option<String> {
    let subscriber = node
        .subscribe_raw(topic, SubscribeOptions::default())
        .await
        .ok()?;
    let deadline = Instant::now() + LEARN_TIMEOUT;
    while Instant::now() < deadline {
        let found = subscriber.links().into_iter().find_map(|link| {
            let definition = link.header?.get("message_definition")?.to_string();
            (!definition.trim().is_empty()).then_some(definition)
        });
        if found.is_some() {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}
