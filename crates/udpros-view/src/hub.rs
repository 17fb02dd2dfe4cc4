//! What the view knows and owes: the graph's topics as channels, the clients and their
//! subscriptions, and one udpros subscription per channel that some client wants.

use crate::client_publish::{ClientPublication, MAX_CLIENT_CHANNELS};
use crate::foxglove::client::{parse_binary, parse_text, BinaryRequest, Request, RequestError};
use crate::foxglove::server::{capability, Channel, Level, ServerMessage, Service};
use crate::foxglove::{ChannelId, Outbox, SubscriptionId};
use crate::params::MAX_WATCHED_PER_CLIENT;
use crate::services::MAX_SERVICES;
use crate::ViewOptions;
use bytes::Bytes;
use futures_util::StreamExt;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use udpros::node::{Node, SentPath, SentPaths, SubscribeOptions};
use udpros::transport::Protocol;

/// How often a forward's link counters are read for the console.
const LINK_REFRESH: Duration = Duration::from_secs(1);

/// Subscriptions one client may hold at once.
const MAX_SUBSCRIPTIONS_PER_CLIENT: usize = 4096;

/// Requests one client may have waiting on the master or a service at once (parameter
/// reads and writes, service calls, advertisements); more are refused with a status.
const MAX_REQUESTS_IN_FLIGHT: usize = 8;

/// Services probed at once while describing new ones.
const PARALLEL_PROBES: usize = 8;

/// How long a publisher has to send its connection header when its type is learned.
const LEARN_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a service or type that could not be described waits before it is tried again.
const REPROBE_AFTER: Duration = Duration::from_secs(30);

/// The longest message definition a channel may carry. The largest definitions of
/// Debian's ROS messages are tens of kilobytes; a publisher that sends megabytes in its
/// connection header would otherwise cost every client that much at connect.
pub(crate) const MAX_DEFINITION_BYTES: usize = 256 << 10;

/// Bytes of definitions remembered in all: a graph of thousands of types, each with a
/// large definition learned from its publisher, is bounded too.
const MAX_DEFINITIONS_TOTAL: usize = 32 << 20;

/// Channels advertised at once; further topics are left out (and said so).
pub(crate) const MAX_CHANNELS: usize = 4096;

/// Types whose definitions are remembered (a master that lists more distinct types than
/// this has been filled by someone: the rest are looked at again on the next tick).
const MAX_TYPES: usize = 16384;

/// The largest advertisement frame: a new client's list of channels goes out in parts of
/// at most this many bytes of definitions.
const ADVERTISE_PART_BYTES: usize = 1 << 20;

/// How long a client must have said nothing before a new client may take its place when
/// the view is full (a client that just connected has not subscribed yet).
pub(crate) const CLIENT_IDLE_GRACE: Duration = Duration::from_secs(5);

/// One connected client, shared by its session's reader and writer and by the forwards.
pub(crate) struct Client {
    outbox: Mutex<Outbox>,
    wake: Notify,
    closed: AtomicBool,
    requests: Arc<Semaphore>,
    /// The payload of the last ping not answered yet (one is enough: a pong answers the
    /// latest ping).
    pending_pong: Mutex<Option<Bytes>>,
    /// When the client last sent a frame: the idlest one gives way to a new client when
    /// the view is full.
    last_heard: Mutex<Instant>,
}

impl Client {
    pub(crate) fn outbox(&self) -> MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A ping arrived: its pong goes out before anything else waiting.
    pub(crate) fn pong(&self, payload: Bytes) {
        *self.pending_pong.lock().unwrap_or_else(|e| e.into_inner()) = Some(payload);
        self.wake.notify_one();
    }

    /// The client sent something: it is not idle.
    pub(crate) fn heard(&self) {
        *self.last_heard.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn silent_for(&self) -> Duration {
        self.last_heard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }

    pub(crate) fn take_pong(&self) -> Option<Bytes> {
        self.pending_pong
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
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

    pub(crate) fn say(&self, message: &ServerMessage) {
        let pushed = self.outbox().push_text(message.to_json());
        self.pushed(pushed.is_ok());
    }

    pub(crate) fn send_binary(&self, frame: Vec<u8>) {
        let pushed = self.outbox().push_binary(frame);
        self.pushed(pushed.is_ok());
    }

    fn pushed(&self, fits: bool) {
        if fits {
            self.wake.notify_one();
        } else {
            // Control frames piled up past the buffer: the client is behind for good.
            self.close();
        }
    }

    /// A slot for one more request in flight, or a status saying there is none.
    fn request_slot(&self) -> Option<OwnedSemaphorePermit> {
        let slot = self.requests.clone().try_acquire_owned().ok();
        if slot.is_none() {
            self.status(
                Level::Error,
                format!("at most {MAX_REQUESTS_IN_FLIGHT} requests in flight per client"),
            );
        }
        slot
    }

    pub(crate) fn status(&self, level: Level, message: impl Into<String>) {
        self.say(&ServerMessage::Status {
            level,
            message: message.into(),
            id: None,
        });
    }
}

/// What the view knows of a message type's definition.
#[derive(Debug, Clone)]
enum Definition {
    /// The full definition, as a channel's schema.
    Known(String),
    /// Nothing here defines it (asked once; its publishers may be asked).
    Unknown,
    /// Defined, but longer than [`MAX_DEFINITION_BYTES`]: its topics are not advertised.
    TooLarge(usize),
    /// Defined, but the definitions remembered already fill [`MAX_DEFINITIONS_TOTAL`].
    NoRoom,
}

impl Definition {
    fn known_bytes(&self) -> usize {
        match self {
            Definition::Known(text) => text.len(),
            _ => 0,
        }
    }
}

impl State {
    /// Remembers what `text` says of `msg_type`, within the bounds on definitions.
    fn define(&mut self, msg_type: String, text: Option<String>) {
        let definition = match text {
            Some(text) if text.len() > MAX_DEFINITION_BYTES => Definition::TooLarge(text.len()),
            Some(text) if self.definition_bytes + text.len() > MAX_DEFINITIONS_TOTAL => {
                Definition::NoRoom
            }
            Some(text) => Definition::Known(text),
            None => Definition::Unknown,
        };
        self.definition_bytes += definition.known_bytes();
        if let Some(before) = self.definitions.insert(msg_type, definition) {
            self.definition_bytes -= before.known_bytes();
        }
    }
}

#[derive(Default)]
struct State {
    channels: BTreeMap<ChannelId, Channel>,
    by_topic: HashMap<String, ChannelId>,
    next_channel: ChannelId,
    /// Bytes of definitions the advertised channels carry: what a new client is sent.
    schema_bytes: usize,
    /// Topics that have a publisher now (the console prefers them).
    published: BTreeSet<String>,
    /// Topics not advertised and why, each said to the clients once.
    left_out: HashMap<String, String>,
    definitions: HashMap<String, Definition>,
    /// Bytes of the known definitions, at most [`MAX_DEFINITIONS_TOTAL`].
    definition_bytes: usize,
    clients: HashMap<u64, Arc<Client>>,
    next_client: u64,
    /// Each client's subscriptions (by client, so that counting and leaving cost nothing
    /// of other clients), and for each channel who wants it: one subscription per client
    /// and channel, so a message costs one copy per client however it subscribed.
    subscriptions: HashMap<u64, HashMap<SubscriptionId, ChannelId>>,
    wanted: HashMap<ChannelId, HashMap<u64, SubscriptionId>>,
    /// The udpros subscription of each wanted channel.
    forwards: HashMap<ChannelId, tokio::task::JoinHandle<()>>,
    /// What each forward's publisher links say, refreshed every second.
    links: HashMap<ChannelId, LinkSummary>,
    /// The graph's services that could be described, by id and by name.
    services: BTreeMap<u32, Service>,
    service_ids: HashMap<String, u32>,
    next_service: u32,
    /// Services that could not be described, and when they were last tried.
    undescribed: HashMap<String, Instant>,
    /// The parameters each client watches, and what each was when last looked at.
    watched: HashMap<u64, BTreeSet<String>>,
    parameter_values: HashMap<String, Option<udpros::xmlrpc::Value>>,
    /// The channels clients publish on, by client and the client's channel id.
    client_channels: HashMap<u64, HashMap<ChannelId, Arc<ClientPublication>>>,
    /// Types whose definition was asked of a publisher, and when.
    learning: HashMap<String, Instant>,
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
    /// Whether a UDPROS link has FEC, and the messages it rebuilt from repair.
    pub fec: bool,
    pub rebuilt: u64,
    /// What the publisher says of its link to the view (see [`SentPath`]).
    pub path: Option<SentPath>,
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
                    summary.fec |= link.udp.repairs + link.udp.checksums > 0;
                    summary.rebuilt += link.udp.rebuilt;
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
    /// Types being learned from their publishers at once.
    learners: Arc<Semaphore>,
}

/// What a text request needs done off the connection's task.
enum Work {
    Get(Vec<String>, Option<String>),
    Set(
        Vec<crate::foxglove::client::ClientParameter>,
        Option<String>,
    ),
    Advertise(Vec<crate::foxglove::client::ClientChannel>),
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
            learners: Arc::new(Semaphore::new(PARALLEL_PROBES)),
        })
    }

    pub(crate) fn node(&self) -> &Node {
        &self.node
    }

    /// What this server offers: parameters and services always, the clock under sim
    /// time, publishing only when the operator allowed topics.
    fn capabilities(&self) -> Vec<String> {
        let mut offered = vec![
            capability::PARAMETERS,
            capability::PARAMETERS_SUBSCRIBE,
            capability::SERVICES,
        ];
        if self.node.clock().is_sim_time() {
            offered.push(capability::TIME);
        }
        if !self.options.client_topics.is_empty() {
            offered.push(capability::CLIENT_PUBLISH);
        }
        offered.into_iter().map(String::from).collect()
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

    /// The advertised topics that have a publisher now, sorted.
    pub(crate) fn published_topics(&self) -> Vec<String> {
        let state = self.state();
        state
            .published
            .iter()
            .filter(|topic| state.by_topic.contains_key(*topic))
            .cloned()
            .collect()
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
    /// as many clients as it takes and none of them has been idle (nothing subscribed,
    /// watched, advertised or asked, and silent for [`CLIENT_IDLE_GRACE`]) to give way.
    pub(crate) fn join(&self) -> Option<(u64, Arc<Client>)> {
        let mut state = self.state();
        if state.clients.len() >= self.options.max_clients {
            let idlest = state
                .clients
                .iter()
                .filter(|(id, client)| is_idle(&state, **id, client))
                .map(|(id, client)| (*id, client.silent_for()))
                .filter(|(_, silent)| *silent >= CLIENT_IDLE_GRACE)
                .max_by_key(|(_, silent)| *silent)
                .map(|(id, _)| id)?;
            tracing::info!("the view is full: an idle client gives way to a new one");
            leave_locked(&mut state, idlest);
        }
        let id = state.next_client;
        state.next_client += 1;
        let client = Arc::new(Client {
            outbox: Mutex::new(Outbox::new(self.options.send_limit)),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            requests: Arc::new(Semaphore::new(MAX_REQUESTS_IN_FLIGHT)),
            pending_pong: Mutex::new(None),
            last_heard: Mutex::new(Instant::now()),
        });
        let publishing = !self.options.client_topics.is_empty();
        client.say(&ServerMessage::ServerInfo {
            name: self.node.name().to_string(),
            capabilities: self.capabilities(),
            supported_encodings: if publishing {
                vec!["ros1".into()]
            } else {
                Vec::new()
            },
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
        advertise(&client, state.channels.values());
        if !state.left_out.is_empty() {
            client.status(Level::Warning, left_out_summary(&state.left_out));
        }
        if !state.services.is_empty() {
            client.say(&ServerMessage::AdvertiseServices {
                services: state.services.values().cloned().collect(),
            });
        }
        state.clients.insert(id, client.clone());
        Some((id, client))
    }

    /// A client went away: its subscriptions end.
    pub(crate) fn leave(&self, client: u64) {
        leave_locked(&mut self.state(), client);
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
                let wanted = subscriptions.iter().map(|s| (s.id, s.channel_id));
                self.subscribe(client, &handle, wanted)
            }
            Request::Unsubscribe { subscription_ids } => {
                let mut state = self.state();
                for id in subscription_ids {
                    unsubscribe(&mut state, client, id);
                    handle.outbox().forget(id);
                }
            }
            Request::GetParameters {
                parameter_names,
                id,
            } => self.start(client, handle, Work::Get(parameter_names, id)),
            Request::SetParameters { parameters, id } => {
                self.start(client, handle, Work::Set(parameters, id))
            }
            Request::SubscribeParameterUpdates { parameter_names } => {
                self.watch(client, &handle, parameter_names)
            }
            Request::UnsubscribeParameterUpdates { parameter_names } => {
                if let Some(watched) = self.state().watched.get_mut(&client) {
                    for name in &parameter_names {
                        watched.remove(name);
                    }
                }
            }
            Request::Advertise { channels } => {
                if self.options.client_topics.is_empty() {
                    handle.status(Level::Error, "this server takes no messages from clients");
                } else {
                    self.start(client, handle, Work::Advertise(channels));
                }
            }
            Request::Unadvertise { channel_ids } => {
                if let Some(held) = self.state().client_channels.get_mut(&client) {
                    for id in channel_ids {
                        held.remove(&id);
                    }
                }
            }
            other => handle.status(
                Level::Warning,
                format!("{} is not supported by this server", op_name(&other)),
            ),
        }
        Ok(())
    }

    /// Runs a request that waits on the master on a task of its own, within the client's
    /// requests in flight.
    fn start(self: &Arc<Self>, client: u64, handle: Arc<Client>, work: Work) {
        let Some(slot) = handle.request_slot() else {
            return;
        };
        let hub = self.clone();
        tokio::spawn(async move {
            let _slot = slot;
            match work {
                Work::Get(names, id) => hub.get_parameters(handle, names, id).await,
                Work::Set(parameters, id) => hub.set_parameters(handle, parameters, id).await,
                Work::Advertise(channels) => {
                    for channel in channels {
                        hub.advertise_client_channel(client, &handle, channel).await;
                    }
                }
            }
        });
    }

    fn watch(&self, client: u64, handle: &Client, names: Vec<String>) {
        let mut state = self.state();
        let watched = state.watched.entry(client).or_default();
        for name in names {
            if watched.len() >= MAX_WATCHED_PER_CLIENT {
                drop(state);
                handle.status(
                    Level::Error,
                    format!("at most {MAX_WATCHED_PER_CLIENT} parameters watched per client"),
                );
                return;
            }
            watched.insert(name);
        }
    }

    /// Every parameter some client watches.
    pub(crate) fn watched_parameters(&self) -> BTreeSet<String> {
        let state = self.state();
        state.watched.values().flatten().cloned().collect()
    }

    /// Parameters looked at before that no client watches now; forgotten here.
    pub(crate) fn unwatched_parameters(&self, watched: &BTreeSet<String>) -> Vec<String> {
        let mut state = self.state();
        let gone: Vec<String> = state
            .parameter_values
            .keys()
            .filter(|name| !watched.contains(*name))
            .cloned()
            .collect();
        for name in &gone {
            state.parameter_values.remove(name);
        }
        gone
    }

    /// Records a parameter's value; whether it differs from the last one recorded (the
    /// first look at a parameter counts as a change only when it is set).
    pub(crate) fn remember_parameter(
        &self,
        name: &str,
        value: Option<udpros::xmlrpc::Value>,
    ) -> bool {
        let mut state = self.state();
        match state
            .parameter_values
            .insert(name.to_string(), value.clone())
        {
            Some(before) => before != value,
            None => false,
        }
    }

    /// The clients that watch `name`.
    pub(crate) fn parameter_watchers(&self, name: &str) -> Vec<Arc<Client>> {
        let state = self.state();
        state
            .watched
            .iter()
            .filter(|(_, names)| names.contains(name))
            .filter_map(|(id, _)| state.clients.get(id).cloned())
            .collect()
    }

    async fn advertise_client_channel(
        &self,
        client: u64,
        handle: &Client,
        channel: crate::foxglove::client::ClientChannel,
    ) {
        {
            let state = self.state();
            let held = state.client_channels.get(&client).map_or(0, HashMap::len);
            if held >= MAX_CLIENT_CHANNELS {
                drop(state);
                handle.status(
                    Level::Error,
                    format!("at most {MAX_CLIENT_CHANNELS} channels per client"),
                );
                return;
            }
        }
        match ClientPublication::advertise(&self.node, &self.options.client_topics, &channel).await
        {
            Ok(publication) => {
                let mut state = self.state();
                // Gone meanwhile: nothing to keep.
                if state.clients.contains_key(&client) {
                    state
                        .client_channels
                        .entry(client)
                        .or_default()
                        .insert(channel.id, Arc::new(publication));
                }
            }
            Err(e) => handle.status(Level::Error, e),
        }
    }

    /// A binary frame from `client`: `Err` if it was not a request.
    pub(crate) fn handle_binary(self: &Arc<Self>, client: u64, frame: &[u8]) -> Result<(), String> {
        let request = parse_binary(frame).map_err(|e| e.to_string())?;
        let Some(handle) = self.state().clients.get(&client).cloned() else {
            return Err("gone".into());
        };
        match request {
            BinaryRequest::MessageData { channel, payload } => {
                let publication = self
                    .state()
                    .client_channels
                    .get(&client)
                    .and_then(|held| held.get(&channel))
                    .cloned();
                match publication {
                    Some(publication) => {
                        if let Err(e) = publication.publish(payload) {
                            handle.status(Level::Error, e);
                        }
                    }
                    None => handle.status(
                        Level::Error,
                        format!("no channel {channel} advertised by this client"),
                    ),
                }
            }
            BinaryRequest::ServiceCallRequest {
                service,
                call,
                encoding,
                payload,
            } => {
                let known = self.state().services.get(&service).cloned();
                let Some(known) = known else {
                    handle.say(&ServerMessage::ServiceCallFailure {
                        service_id: service,
                        call_id: call,
                        message: format!("no service {service}"),
                    });
                    return Ok(());
                };
                let Some(slot) = handle.request_slot() else {
                    return Ok(());
                };
                let (encoding, request) = (encoding.to_string(), payload.to_vec());
                tokio::spawn(
                    self.clone()
                        .call_service_in(slot, handle, known, call, encoding, request),
                );
            }
        }
        Ok(())
    }

    async fn call_service_in(
        self: Arc<Self>,
        _slot: OwnedSemaphorePermit,
        handle: Arc<Client>,
        service: Service,
        call: u32,
        encoding: String,
        request: Vec<u8>,
    ) {
        self.call_service(handle, service, call, encoding, request)
            .await;
    }

    /// Takes a client's subscriptions: each to a channel that exists, under an id the
    /// client does not use yet, one per channel, within the client's limit. What is
    /// refused is said in one status per reason, however many a request carried.
    fn subscribe(
        self: &Arc<Self>,
        client: u64,
        handle: &Client,
        wanted: impl Iterator<Item = (SubscriptionId, ChannelId)>,
    ) {
        let mut refused: BTreeMap<&'static str, (usize, String)> = BTreeMap::new();
        let mut refuse = |reason: &'static str, example: String| {
            let entry = refused.entry(reason).or_insert((0, example));
            entry.0 += 1;
        };
        let mut state = self.state();
        for (id, channel) in wanted {
            let held = state.subscriptions.get(&client).map_or(0, HashMap::len);
            if !state.channels.contains_key(&channel) {
                refuse("no such channel", format!("channel {channel}"));
            } else if state
                .subscriptions
                .get(&client)
                .is_some_and(|h| h.contains_key(&id))
            {
                refuse("subscription id in use", format!("subscription {id}"));
            } else if state
                .wanted
                .get(&channel)
                .is_some_and(|w| w.contains_key(&client))
            {
                refuse(
                    "already subscribed to the channel",
                    format!("channel {channel}"),
                );
            } else if held >= MAX_SUBSCRIPTIONS_PER_CLIENT {
                refuse(
                    "over the limit per client",
                    format!("subscription {id}; at most {MAX_SUBSCRIPTIONS_PER_CLIENT}"),
                );
            } else {
                state
                    .subscriptions
                    .entry(client)
                    .or_default()
                    .insert(id, channel);
                state.wanted.entry(channel).or_default().insert(client, id);
                if !state.forwards.contains_key(&channel) {
                    let topic = state.channels[&channel].topic.clone();
                    let forward = tokio::spawn(self.clone().forward(channel, topic));
                    state.forwards.insert(channel, forward);
                }
            }
        }
        drop(state);
        for (reason, (count, example)) in refused {
            handle.status(
                Level::Error,
                format!("{count} subscription(s) refused, {reason} (such as {example})"),
            );
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
                for client in state
                    .wanted
                    .get(&channel)
                    .into_iter()
                    .flat_map(HashMap::keys)
                {
                    if let Some(handle) = state.clients.get(client) {
                        handle.status(Level::Error, format!("cannot subscribe to {topic}: {e}"));
                    }
                }
                return;
            }
        };
        let mut refresh = tokio::time::interval(LINK_REFRESH);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let paths = SentPaths::default();
        loop {
            tokio::select! {
                received = subscriber.recv() => match received {
                    Some(received) => self.deliver(channel, received.body),
                    None => break,
                },
                _ = refresh.tick() => {
                    let links = subscriber.links();
                    let mut summary = LinkSummary::of(&links);
                    // The publisher's own view of its link: a governed one's path, and what
                    // any link dropped (the first publisher that says, on a shared topic).
                    summary.path = paths.known(&links).into_iter().next().map(|(_, p)| p);
                    paths.refresh(&self.node, &topic, &links);
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
            match self.node.master().get_system_state().await {
                Ok(graph) => {
                    let published: BTreeSet<String> = graph
                        .publishers
                        .into_iter()
                        .filter(|(_, nodes)| !nodes.is_empty())
                        .map(|(topic, _)| topic)
                        .take(MAX_CHANNELS)
                        .collect();
                    self.state().published = published;
                    self.update_services(graph.services).await
                }
                Err(e) => tracing::debug!("the view cannot read the graph: {e}"),
            }
            self.push_parameter_updates().await;
        }
    }

    /// Under sim time, sends the clients the graph's clock (the newest value only, to a
    /// client that is behind), twenty times a second while it moves.
    pub(crate) async fn track_clock(self: Arc<Self>) {
        let clock = self.node.clock();
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
            let clients: Vec<Arc<Client>> = self.state().clients.values().cloned().collect();
            for client in clients {
                client.outbox().push_time(ns);
                client.wake();
            }
        }
    }

    /// For each type nothing here defines (a package this machine lacks), asks a publisher
    /// of it: the connection header of a short subscription carries the full definition,
    /// as it does for every subscriber. A few types at a time; one that could not be
    /// learned is tried again after a while.
    fn learn_unknown_types(self: &Arc<Self>, topics: &[(String, String)]) {
        let mut state = self.state();
        for (topic, msg_type) in topics {
            let unknown = matches!(state.definitions.get(msg_type), Some(Definition::Unknown));
            let due = state
                .learning
                .get(msg_type)
                .is_none_or(|tried| tried.elapsed() >= REPROBE_AFTER);
            if !unknown || !due {
                continue;
            }
            let Ok(slot) = self.learners.clone().try_acquire_owned() else {
                return; // the next look starts the rest
            };
            state.learning.insert(msg_type.clone(), Instant::now());
            let (hub, topic, msg_type) = (self.clone(), topic.clone(), msg_type.clone());
            tokio::spawn(async move {
                let _slot = slot;
                match hub.ask_publisher(&topic).await {
                    Some(definition) => hub.state().define(msg_type, Some(definition)),
                    None => tracing::info!(
                        "the view cannot advertise {topic}: no definition of {msg_type} here or from its publishers"
                    ),
                }
            });
        }
    }

    /// The definition a publisher of `topic` sends in its connection header, if one
    /// answers within a few seconds.
    async fn ask_publisher(&self, topic: &str) -> Option<String> {
        let subscriber = self
            .node
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

    /// Keeps the advertised services in step with the master's, describing new ones.
    async fn update_services(&self, listed: Vec<(String, Vec<String>)>) {
        let names: BTreeSet<String> = listed.into_iter().map(|(name, _)| name).collect();
        let (gone, new): (Vec<u32>, Vec<String>) = {
            let mut state = self.state();
            let gone: Vec<u32> = state
                .services
                .values()
                .filter(|s| !names.contains(&s.name))
                .map(|s| s.id)
                .collect();
            for id in &gone {
                if let Some(service) = state.services.remove(id) {
                    state.service_ids.remove(&service.name);
                }
            }
            state.undescribed.retain(|name, _| names.contains(name));
            let room = MAX_SERVICES.saturating_sub(state.services.len());
            let new = names
                .iter()
                .filter(|n| !state.service_ids.contains_key(*n))
                .filter(|n| {
                    state
                        .undescribed
                        .get(*n)
                        .is_none_or(|tried| tried.elapsed() >= REPROBE_AFTER)
                })
                .take(room)
                .cloned()
                .collect();
            (gone, new)
        };
        // Probed a few at a time: a graph of many services is described in a few rounds
        // of probes, not one after another.
        let described: Vec<(String, Option<crate::services::Description>)> =
            futures_util::stream::iter(new)
                .map(|name| async move {
                    let described = crate::services::describe(self, &name).await;
                    (name, described)
                })
                .buffer_unordered(PARALLEL_PROBES)
                .collect()
                .await;
        let mut added = Vec::new();
        for (name, described) in described {
            let mut state = self.state();
            match described {
                Some(description) => {
                    state.undescribed.remove(&name);
                    let id = state.next_service;
                    state.next_service += 1;
                    let service = Service {
                        id,
                        name: name.clone(),
                        service_type: description.service_type,
                        request_schema: description.request_schema,
                        response_schema: description.response_schema,
                    };
                    state.service_ids.insert(name, id);
                    state.services.insert(id, service.clone());
                    added.push(service);
                }
                None => {
                    state.undescribed.insert(name, Instant::now());
                }
            }
        }
        let state = self.state();
        for client in state.clients.values() {
            if !gone.is_empty() {
                client.say(&ServerMessage::UnadvertiseServices {
                    service_ids: gone.clone(),
                });
            }
            if !added.is_empty() {
                client.say(&ServerMessage::AdvertiseServices {
                    services: added.clone(),
                });
            }
        }
    }

    async fn update_channels(self: &Arc<Self>, topics: Vec<(String, String)>) {
        // Definitions of types not seen before, found off the runtime's threads (they may
        // read .msg files).
        let unknown: Vec<String> = {
            let state = self.state();
            let room = MAX_TYPES.saturating_sub(state.definitions.len());
            let mut unknown: Vec<String> = topics
                .iter()
                .map(|(_, t)| t.clone())
                .filter(|t| !state.definitions.contains_key(t))
                .collect();
            unknown.sort();
            unknown.dedup();
            unknown.truncate(room);
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
                state.define(t, definition);
            }
        }
        self.learn_unknown_types(&topics);
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
        state
            .left_out
            .retain(|topic, _| listed.contains_key(topic.as_str()));
        // A new client is sent every channel: their definitions together must fit well
        // inside its send buffer.
        let budget = self.options.send_limit / 2;
        let mut added = Vec::new();
        let mut newly_left_out = HashMap::new();
        for (topic, msg_type) in &topics {
            if state.by_topic.contains_key(topic) {
                continue;
            }
            let why = match state.definitions.get(msg_type) {
                Some(Definition::Known(definition)) => {
                    if state.channels.len() >= MAX_CHANNELS {
                        Some(format!("the view advertises at most {MAX_CHANNELS} topics"))
                    } else if state.schema_bytes + definition.len() > budget {
                        Some(format!(
                            "the definitions advertised reach the view's {} kB budget",
                            budget >> 10
                        ))
                    } else {
                        None
                    }
                }
                Some(Definition::TooLarge(bytes)) => Some(format!(
                    "its definition is {} kB, over the view's {} kB",
                    bytes >> 10,
                    MAX_DEFINITION_BYTES >> 10
                )),
                Some(Definition::NoRoom) => Some(format!(
                    "the view remembers at most {} MB of definitions",
                    MAX_DEFINITIONS_TOTAL >> 20
                )),
                // Not known yet, or being learned from a publisher.
                Some(Definition::Unknown) | None => continue,
            };
            if let Some(why) = why {
                if !state.left_out.contains_key(topic) {
                    tracing::warn!("the view does not advertise {topic}: {why}");
                    state.left_out.insert(topic.clone(), why.clone());
                    newly_left_out.insert(topic.clone(), why);
                }
                continue;
            }
            let Some(Definition::Known(definition)) = state.definitions.get(msg_type) else {
                continue;
            };
            let id = state.next_channel;
            let channel = Channel::ros1(id, topic, msg_type, definition);
            state.next_channel += 1;
            state.schema_bytes += channel.schema.len();
            state.left_out.remove(topic);
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
            advertise(client, &added);
            if !newly_left_out.is_empty() {
                client.status(Level::Warning, left_out_summary(&newly_left_out));
            }
        }
    }
}

/// Whether `client` holds nothing of the view's: no subscription, watched parameter,
/// advertised channel or request in flight.
fn is_idle(state: &State, id: u64, client: &Client) -> bool {
    state.subscriptions.get(&id).is_none_or(HashMap::is_empty)
        && state.watched.get(&id).is_none_or(BTreeSet::is_empty)
        && state.client_channels.get(&id).is_none_or(HashMap::is_empty)
        && client.requests.available_permits() == MAX_REQUESTS_IN_FLIGHT
}

/// Ends `client`: its session closes, its subscriptions, watches and publications end.
fn leave_locked(state: &mut State, client: u64) {
    if let Some(gone) = state.clients.remove(&client) {
        gone.close();
    }
    for (_, channel) in state.subscriptions.remove(&client).unwrap_or_default() {
        drop_subscription(state, client, channel);
    }
    state.watched.remove(&client);
    // Its publishers end with it (unregistered when the last handle goes).
    state.client_channels.remove(&client);
}

/// Ends subscription `id` of `client`, and the channel's forward if nobody wants it now.
fn unsubscribe(state: &mut State, client: u64, id: SubscriptionId) {
    let removed = state
        .subscriptions
        .get_mut(&client)
        .and_then(|held| held.remove(&id));
    if let Some(channel) = removed {
        drop_subscription(state, client, channel);
    }
}

/// The channel side of ending `client`'s subscription to `channel` (already gone from
/// the client's own table): the forward ends with the last one.
fn drop_subscription(state: &mut State, client: u64, channel: ChannelId) {
    let Some(wanting) = state.wanted.get_mut(&channel) else {
        return;
    };
    wanting.remove(&client);
    if wanting.is_empty() {
        state.wanted.remove(&channel);
        if let Some(forward) = state.forwards.remove(&channel) {
            forward.abort();
        }
        state.links.remove(&channel);
    }
}

/// A topic went away (or changed type): its channel, subscriptions and forward end.
fn remove_channel(state: &mut State, id: ChannelId) {
    if let Some(channel) = state.channels.remove(&id) {
        state.by_topic.remove(&channel.topic);
        state.schema_bytes = state.schema_bytes.saturating_sub(channel.schema.len());
    }
    for (client, subscription) in state.wanted.remove(&id).unwrap_or_default() {
        if let Some(held) = state.subscriptions.get_mut(&client) {
            held.remove(&subscription);
        }
        if let Some(handle) = state.clients.get(&client) {
            handle.outbox().forget(subscription);
        }
    }
    if let Some(forward) = state.forwards.remove(&id) {
        forward.abort();
    }
    state.links.remove(&id);
}

/// Tells `client` of `channels`, in frames of at most [`ADVERTISE_PART_BYTES`] of
/// definitions each (a client's message size limit is met by each part).
fn advertise<'a>(client: &Client, channels: impl IntoIterator<Item = &'a Channel>) {
    let mut part: Vec<Channel> = Vec::new();
    let mut part_bytes = 0;
    for channel in channels {
        if !part.is_empty() && part_bytes + channel.schema.len() > ADVERTISE_PART_BYTES {
            client.say(&ServerMessage::Advertise {
                channels: std::mem::take(&mut part),
            });
            part_bytes = 0;
        }
        part_bytes += channel.schema.len();
        part.push(channel.clone());
    }
    if !part.is_empty() {
        client.say(&ServerMessage::Advertise { channels: part });
    }
}

/// One line for the topics left out: how many, and the first few with their reasons.
fn left_out_summary(left_out: &HashMap<String, String>) -> String {
    let mut named: Vec<(&String, &String)> = left_out.iter().collect();
    named.sort();
    let shown: Vec<String> = named
        .iter()
        .take(3)
        .map(|(topic, why)| format!("{topic} ({why})"))
        .collect();
    let more = named.len().saturating_sub(shown.len());
    let mut line = format!(
        "{} topic(s) not advertised: {}",
        named.len(),
        shown.join(", ")
    );
    if more > 0 {
        line.push_str(&format!(" and {more} more"));
    }
    line
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
