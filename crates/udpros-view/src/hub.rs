//! What the view knows and owes: the graph's topics as channels, the clients and their
//! subscriptions, and one udpros subscription per channel that some client wants.

use crate::ViewOptions;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;
use udpros::node::{Node, SubscribeOptions};
use udpros::transport::Protocol;
use udpros::wire::foxglove::client::{parse_binary, parse_text, Request, RequestError};
use udpros::wire::foxglove::server::{Channel, Level, ServerMessage};
use udpros::wire::foxglove::{ChannelId, Outbox, SubscriptionId};

/// How often a forward's link counters are read for the console.
const LINK_REFRESH: Duration = Duration::from_secs(1);

/// Subscriptions one client may hold at once.
const MAX_SUBSCRIPTIONS_PER_CLIENT: usize = 4096;

/// One connected client, shared by its session's reader and writer and by the forwards.
pub(crate) struct Client {
    outbox: Mutex<Outbox>,
    wake: Notify,
    closed: AtomicBool,
}

impl Client {
    pub(crate) fn outbox(&self) -> MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells the writer to look again (something to send or flush).
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Waits until there may be something to send (or the client was closed).
    pub(crate) async fn notified(&self) {
        self.wake.notified().await;
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Ends the client's session (its writer sees it next).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.wake.notify_one();
    }

    fn say(&self, message: &ServerMessage) {
        let pushed = self.outbox().push_text(message.to_json());
        if pushed.is_err() {
            // Control frames piled up past the buffer: the client is behind for good.
            self.close();
        } else {
            self.wake.notify_one();
        }
    }

    fn status(&self, level: Level, message: impl Into<String>) {
        self.say(&ServerMessage::Status {
            level,
            message: message.into(),
            id: None,
        });
    }
}

#[derive(Default)]
struct State {
    channels: BTreeMap<ChannelId, Channel>,
    by_topic: HashMap<String, ChannelId>,
    next_channel: ChannelId,
    /// Definitions by type, `None` for a type nothing here defines (asked once).
    definitions: HashMap<String, Option<String>>,
    clients: HashMap<u64, Arc<Client>>,
    next_client: u64,
    /// Each client's subscriptions, and for each channel who wants it.
    subscriptions: HashMap<(u64, SubscriptionId), ChannelId>,
    wanted: HashMap<ChannelId, Vec<(u64, SubscriptionId)>>,
    /// The udpros subscription of each wanted channel.
    forwards: HashMap<ChannelId, tokio::task::JoinHandle<()>>,
    /// What each forward's publisher links say, refreshed every second.
    links: HashMap<ChannelId, LinkSummary>,
}

/// A forwarded topic's publisher links, summed: what the console's topic table shows.
#[derive(Debug, Clone, Default)]
pub(crate) struct LinkSummary {
    /// `UDP`, `TCP`, `UDP+TCP` (publishers on both), or empty before any link is up.
    pub protocol: String,
    pub publishers: usize,
    pub delivered: u64,
    /// UDPROS messages lost (by message id); TCPROS loses none.
    pub lost: u64,
}

impl LinkSummary {
    fn of(links: &[udpros::transport::PublisherLinkStats]) -> LinkSummary {
        let mut summary = LinkSummary::default();
        let (mut udp, mut tcp) = (false, false);
        for link in links.iter().filter(|l| l.connected) {
            summary.publishers += 1;
            summary.delivered += link.messages;
            match link.protocol {
                Some(Protocol::Udp) => {
                    udp = true;
                    summary.lost += link.udp.lost();
                }
                Some(Protocol::Tcp) => tcp = true,
                _ => {}
            }
        }
        summary.protocol = match (udp, tcp) {
            (true, true) => "UDP+TCP",
            (true, false) => "UDP",
            (false, true) => "TCP",
            (false, false) => "",
        }
        .into();
        summary
    }
}

pub(crate) struct Hub {
    node: Node,
    pub(crate) options: ViewOptions,
    session_id: String,
    state: Mutex<State>,
}

impl Hub {
    pub(crate) fn new(node: Node, options: ViewOptions) -> Arc<Hub> {
        let started = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Arc::new(Hub {
            node,
            options,
            session_id: started.as_nanos().to_string(),
            state: Mutex::default(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn clients(&self) -> usize {
        self.state().clients.len()
    }

    pub(crate) fn buffered_bytes(&self) -> usize {
        let clients: Vec<Arc<Client>> = self.state().clients.values().cloned().collect();
        clients.iter().map(|c| c.outbox().bytes()).sum()
    }

    /// Each forwarded topic's links, by topic.
    pub(crate) fn link_summaries(&self) -> Vec<(String, LinkSummary)> {
        let state = self.state();
        let mut out: Vec<(String, LinkSummary)> = state
            .links
            .iter()
            .filter_map(|(id, summary)| {
                let channel = state.channels.get(id)?;
                Some((channel.topic.clone(), summary.clone()))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    pub(crate) fn forwarded_topics(&self) -> Vec<String> {
        let state = self.state();
        let mut topics: Vec<String> = state
            .forwards
            .keys()
            .filter_map(|id| state.channels.get(id))
            .map(|c| c.topic.clone())
            .collect();
        topics.sort();
        topics
    }

    /// A new client, told who the server is and every channel; `None` when the view has
    /// as many clients as it takes.
    pub(crate) fn join(&self) -> Option<(u64, Arc<Client>)> {
        let mut state = self.state();
        if state.clients.len() >= self.options.max_clients {
            return None;
        }
        let id = state.next_client;
        state.next_client += 1;
        let client = Arc::new(Client {
            outbox: Mutex::new(Outbox::new(self.options.send_limit)),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
        });
        client.say(&ServerMessage::ServerInfo {
            name: self.node.name().to_string(),
            capabilities: Vec::new(),
            supported_encodings: Vec::new(),
            metadata: BTreeMap::from([
                (
                    "server".into(),
                    format!("udpros-view {}", env!("CARGO_PKG_VERSION")),
                ),
                (
                    "ROS_MASTER_URI".into(),
                    self.node.master().uri().to_string(),
                ),
            ]),
            session_id: self.session_id.clone(),
        });
        if !state.channels.is_empty() {
            client.say(&ServerMessage::Advertise {
                channels: state.channels.values().cloned().collect(),
            });
        }
        state.clients.insert(id, client.clone());
        Some((id, client))
    }

    /// A client went away: its subscriptions end.
    pub(crate) fn leave(&self, client: u64) {
        let mut state = self.state();
        if let Some(gone) = state.clients.remove(&client) {
            gone.close();
        }
        let ids: Vec<SubscriptionId> = state
            .subscriptions
            .keys()
            .filter(|(c, _)| *c == client)
            .map(|(_, s)| *s)
            .collect();
        for id in ids {
            unsubscribe(&mut state, client, id);
        }
    }

    /// Stops every forward and closes every client.
    pub(crate) fn close(&self) {
        let mut state = self.state();
        for (_, forward) in state.forwards.drain() {
            forward.abort();
        }
        for client in state.clients.values() {
            client.close();
        }
    }

    /// A text frame from `client`: `Err` if it was not a request (the client is closed).
    pub(crate) fn handle_text(self: &Arc<Self>, client: u64, text: &str) -> Result<(), String> {
        let Some(handle) = self.state().clients.get(&client).cloned() else {
            return Err("gone".into());
        };
        let request = match parse_text(text) {
            Ok(request) => request,
            Err(RequestError::UnknownOp(op)) => {
                handle.status(Level::Warning, format!("unsupported op {op:?}"));
                return Ok(());
            }
            Err(e) => return Err(e.to_string()),
        };
        match request {
            Request::Subscribe { subscriptions } => {
                for s in subscriptions {
                    self.subscribe(client, &handle, s.id, s.channel_id);
                }
            }
            Request::Unsubscribe { subscription_ids } => {
                let mut state = self.state();
                for id in subscription_ids {
                    unsubscribe(&mut state, client, id);
                    handle.outbox().forget(id);
                }
            }
            other => handle.status(
                Level::Warning,
                format!("{} is not supported by this server", op_name(&other)),
            ),
        }
        Ok(())
    }

    /// A binary frame from `client`: `Err` if it was not a request.
    pub(crate) fn handle_binary(&self, client: u64, frame: &[u8]) -> Result<(), String> {
        parse_binary(frame).map_err(|e| e.to_string())?;
        if let Some(handle) = self.state().clients.get(&client) {
            handle.status(
                Level::Error,
                "this server takes no messages or service calls from clients",
            );
        }
        Ok(())
    }

    fn subscribe(
        self: &Arc<Self>,
        client: u64,
        handle: &Client,
        id: SubscriptionId,
        channel: ChannelId,
    ) {
        let mut state = self.state();
        if !state.channels.contains_key(&channel) {
            drop(state);
            handle.status(Level::Error, format!("no channel {channel}"));
            return;
        }
        if state.subscriptions.contains_key(&(client, id)) {
            drop(state);
            handle.status(Level::Error, format!("subscription {id} exists already"));
            return;
        }
        let held = state
            .subscriptions
            .keys()
            .filter(|(c, _)| *c == client)
            .count();
        if held >= MAX_SUBSCRIPTIONS_PER_CLIENT {
            drop(state);
            handle.status(
                Level::Error,
                format!("at most {MAX_SUBSCRIPTIONS_PER_CLIENT} subscriptions per client"),
            );
            return;
        }
        state.subscriptions.insert((client, id), channel);
        state.wanted.entry(channel).or_default().push((client, id));
        if !state.forwards.contains_key(&channel) {
            let topic = state.channels[&channel].topic.clone();
            let forward = tokio::spawn(self.clone().forward(channel, topic));
            state.forwards.insert(channel, forward);
        }
    }

    /// Subscribes to `topic` and hands each message to the clients that want `channel`,
    /// until aborted (no client wants it any more, or the view stops).
    async fn forward(self: Arc<Self>, channel: ChannelId, topic: String) {
        let options = SubscribeOptions {
            transports: vec![Protocol::Udp, Protocol::Tcp],
            ..SubscribeOptions::default()
        };
        let mut subscriber = match self.node.subscribe_raw(&topic, options).await {
            Ok(subscriber) => subscriber,
            Err(e) => {
                let mut state = self.state();
                // A later subscription to the channel tries again.
                state.forwards.remove(&channel);
                for (client, _) in state.wanted.get(&channel).into_iter().flatten() {
                    if let Some(handle) = state.clients.get(client) {
                        handle.status(Level::Error, format!("cannot subscribe to {topic}: {e}"));
                    }
                }
                return;
            }
        };
        let mut refresh = tokio::time::interval(LINK_REFRESH);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                received = subscriber.recv() => match received {
                    Some(received) => self.deliver(channel, received.body),
                    None => break,
                },
                _ = refresh.tick() => {
                    let summary = LinkSummary::of(&subscriber.links());
                    let mut state = self.state();
                    if state.forwards.contains_key(&channel) {
                        state.links.insert(channel, summary);
                    }
                }
            }
        }
    }

    fn deliver(&self, channel: ChannelId, body: Bytes) {
        let received_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let state = self.state();
        for (client, id) in state.wanted.get(&channel).into_iter().flatten() {
            if let Some(handle) = state.clients.get(client) {
                handle.outbox().push_message(*id, received_ns, body.clone());
                handle.wake.notify_one();
            }
        }
    }

    /// Keeps the channels in step with the master's topics, every `every`.
    pub(crate) async fn track_graph(self: Arc<Self>, every: Duration) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match self.node.master().get_topic_types().await {
                Ok(topics) => self.update_channels(topics).await,
                Err(e) => tracing::debug!("the view cannot read the graph: {e}"),
            }
        }
    }

    async fn update_channels(&self, topics: Vec<(String, String)>) {
        // Definitions of types not seen before, found off the runtime's threads (they may
        // read .msg files).
        let unknown: Vec<String> = {
            let state = self.state();
            let mut unknown: Vec<String> = topics
                .iter()
                .map(|(_, t)| t.clone())
                .filter(|t| !state.definitions.contains_key(t))
                .collect();
            unknown.sort();
            unknown.dedup();
            unknown
        };
        if !unknown.is_empty() {
            let found = tokio::task::spawn_blocking(move || {
                unknown
                    .into_iter()
                    .map(|t| {
                        let definition = udpros::msg::find_type(&t)
                            .ok()
                            .and_then(|d| d.definition().ok());
                        (t, definition)
                    })
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap_or_default();
            let mut state = self.state();
            for (t, definition) in found {
                if definition.is_none() {
                    tracing::info!("the view cannot advertise topics of {t}: no definition found");
                }
                state.definitions.insert(t, definition);
            }
        }
        let mut state = self.state();
        let listed: HashMap<&str, &str> = topics
            .iter()
            .map(|(topic, t)| (topic.as_str(), t.as_str()))
            .collect();
        let gone: Vec<ChannelId> = state
            .channels
            .values()
            .filter(|c| listed.get(c.topic.as_str()) != Some(&c.schema_name.as_str()))
            .map(|c| c.id)
            .collect();
        for id in &gone {
            remove_channel(&mut state, *id);
        }
        let mut added = Vec::new();
        for (topic, msg_type) in &topics {
            if state.by_topic.contains_key(topic) {
                continue;
            }
            let Some(Some(definition)) = state.definitions.get(msg_type).cloned() else {
                continue;
            };
            let id = state.next_channel;
            state.next_channel += 1;
            let channel = Channel::ros1(id, topic, msg_type, &definition);
            state.by_topic.insert(topic.clone(), id);
            state.channels.insert(id, channel.clone());
            added.push(channel);
        }
        for client in state.clients.values() {
            if !gone.is_empty() {
                client.say(&ServerMessage::Unadvertise {
                    channel_ids: gone.clone(),
                });
            }
            if !added.is_empty() {
                client.say(&ServerMessage::Advertise {
                    channels: added.clone(),
                });
            }
        }
    }
}

/// Ends subscription `id` of `client`, and the channel's forward if nobody wants it now.
fn unsubscribe(state: &mut State, client: u64, id: SubscriptionId) {
    let Some(channel) = state.subscriptions.remove(&(client, id)) else {
        return;
    };
    if let Some(wanting) = state.wanted.get_mut(&channel) {
        wanting.retain(|w| *w != (client, id));
        if wanting.is_empty() {
            state.wanted.remove(&channel);
            if let Some(forward) = state.forwards.remove(&channel) {
                forward.abort();
            }
            state.links.remove(&channel);
        }
    }
}

/// A topic went away (or changed type): its channel, subscriptions and forward end.
fn remove_channel(state: &mut State, id: ChannelId) {
    if let Some(channel) = state.channels.remove(&id) {
        state.by_topic.remove(&channel.topic);
    }
    for (client, subscription) in state.wanted.remove(&id).unwrap_or_default() {
        state.subscriptions.remove(&(client, subscription));
        if let Some(handle) = state.clients.get(&client) {
            handle.outbox().forget(subscription);
        }
    }
    if let Some(forward) = state.forwards.remove(&id) {
        forward.abort();
    }
    state.links.remove(&id);
}

/// The `op` of a request, for a status that names it.
fn op_name(request: &Request) -> &'static str {
    match request {
        Request::Subscribe { .. } => "subscribe",
        Request::Unsubscribe { .. } => "unsubscribe",
        Request::Advertise { .. } => "advertise",
        Request::Unadvertise { .. } => "unadvertise",
        Request::GetParameters { .. } => "getParameters",
        Request::SetParameters { .. } => "setParameters",
        Request::SubscribeParameterUpdates { .. } => "subscribeParameterUpdates",
        Request::UnsubscribeParameterUpdates { .. } => "unsubscribeParameterUpdates",
        Request::SubscribeConnectionGraph => "subscribeConnectionGraph",
        Request::UnsubscribeConnectionGraph => "unsubscribeConnectionGraph",
    }
}
