//! The view following the graph: the master's topics become channels (their types looked
//! up here or learned from a publisher), its services are described and advertised,
//! watched parameters are pushed when they change, and under sim time the clock goes to
//! every client. The rules are the table's; this is their timer and their I/O.

use crate::hub::{Hub, Table};
use crate::table::Action;
use futures_util::StreamExt;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Services probed, and types learned from their publishers, at once.
const PARALLEL_PROBES: usize = 8;

/// Keeps the channels, services and watched parameters in step with the master, every
/// `every`.
pub(crate) async fn track(hub: Arc<Hub>, every: Duration) {
    let learners = Arc::new(Semaphore::new(PARALLEL_PROBES));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let master = hub.node().master();
        match master.get_topic_types().await {
            Ok(topics) => update_channels(&hub, &learners, topics).await,
            Err(e) => tracing::debug!("the view cannot read the graph: {e}"),
        }
        match master.get_system_state().await {
            Ok(graph) => {
                let published = graph.publishers.into_iter();
                let published = published.filter(|(_, nodes)| !nodes.is_empty());
                hub.with_table(|table| table.set_published(published.map(|(t, _)| t)));
                let names = graph.services.into_iter().map(|(name, _)| name).collect();
                update_services(&hub, names).await
            }
            Err(e) => tracing::debug!("the view cannot read the graph: {e}"),
        }
        push_parameter_updates(&hub).await;
    }
}

/// Under sim time, sends the clients the graph's clock (the newest value only, to a
/// client that is behind), twenty times a second while it moves.
pub(crate) async fn track_clock(hub: Arc<Hub>) {
    let clock = hub.node().clock();
    if !clock.is_sim_time() {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = None;
    loop {
        tick.tick().await;
        if !clock.is_valid() {
            continue;
        }
        let now = clock.now();
        if last == Some(now) {
            continue;
        }
        last = Some(now);
        let ns = u64::from(now.sec) * 1_000_000_000 + u64::from(now.nsec);
        for client in hub.client_handles() {
            client.outbox().push_time(ns);
            client.wake();
        }
    }
}

async fn update_channels(hub: &Arc<Hub>, learners: &Arc<Semaphore>, topics: Vec<(String, String)>) {
    // Definitions of types not seen before, found off the runtime's threads (they may
    // read .msg files).
    let unknown = hub.with_table(|table| table.types_to_look_up(&topics));
    if !unknown.is_empty() {
        let found = tokio::task::spawn_blocking(move || {
            let define = |t: String| {
                let found = udpros::msg::find_type(&t).ok();
                let definition = found.and_then(|d| d.definition().ok());
                (t, definition)
            };
            unknown.into_iter().map(define).collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        hub.with_table(|table| {
            for (t, definition) in found {
                table.define(t, definition);
            }
        });
    }
    learn_unknown_types(hub, learners, &topics);
    hub.apply(|table| table.update_channels(&topics));
}

/// For each type nothing here defines (a package this machine lacks), asks a publisher of
/// it: the connection header of a short subscription carries the full definition, as it
/// does for every subscriber. A few types at a time.
fn learn_unknown_types(hub: &Arc<Hub>, learners: &Arc<Semaphore>, topics: &[(String, String)]) {
    let slots = learners.available_permits();
    let due = hub.with_table(|table| table.types_to_learn(Instant::now(), topics, slots));
    for (topic, msg_type) in due {
        let Ok(slot) = learners.clone().try_acquire_owned() else {
            return; // asked again after a while
        };
        let hub = hub.clone();
        tokio::spawn(async move {
            let _slot = slot;
            match crate::forward::ask_publisher(hub.node(), &topic).await {
                Some(definition) => hub.with_table(|table| table.define(msg_type, Some(definition))),
                None => tracing::info!(
                    "the view cannot advertise {topic}: no definition of {msg_type} here or from its publishers"
                ),
            }
        });
    }
}

/// Keeps the advertised services in step with the master's, describing new ones a few at
/// a time: a graph of many services is described in a few rounds of probes, not one
/// after another.
async fn update_services(hub: &Arc<Hub>, listed: BTreeSet<String>) {
    let mut new = Vec::new();
    hub.apply(|table| {
        let (actions, names) = table.update_services(Instant::now(), &listed);
        new = names;
        actions
    });
    let node = hub.node();
    let described: Vec<_> = futures_util::stream::iter(new)
        .map(|name| async move {
            let described = crate::services::describe(node, &name).await;
            (name, described)
        })
        .buffer_unordered(PARALLEL_PROBES)
        .collect()
        .await;
    hub.apply(|table| table.add_services(Instant::now(), described));
}

/// Sends each client the parameters it watches that changed since the last look.
async fn push_parameter_updates(hub: &Arc<Hub>) {
    // Names no client watches any more leave the node's cache and the master's list of
    // its subscriptions: what is cached is only what is watched now.
    for name in hub.with_table(Table::forget_unwatched) {
        let _ = hub.node().forget_cached_param(&name).await;
    }
    for name in hub.with_table(|table| table.watched_parameters()) {
        // Cached by the node once read: a master's paramUpdate keeps it current.
        let now = hub.node().get_param_cached(&name).await.ok().flatten();
        hub.apply(|table| {
            if !table.remember_parameter(&name, now.clone()) {
                return Vec::new();
            }
            let update = crate::params::update(&name, now.as_ref());
            let watchers = table.parameter_watchers(&name).into_iter();
            watchers.map(|c| Action::Say(c, update.clone())).collect()
        });
    }
}
