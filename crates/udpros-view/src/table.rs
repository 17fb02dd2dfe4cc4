//! What the view knows and owes, without I/O: the graph's topics as channels, the
//! definitions behind them, the clients with their subscriptions, watched parameters,
//! published channels and requests in flight, the services, and which channels are being
//! forwarded.
//!
//! [`ViewTable`] takes what happened (a client joined, asked, left; the master listed
//! topics or services; a definition was found) with `now` where a rule needs the time, and
//! answers with [`Action`]s for the hub to perform: frames for clients, sessions to close,
//! forwards to start or stop. It reads no clock and spawns nothing, so every rule here
//! (who gives way when the view is full, which subscriptions are refused and how that is
//! said, when a channel's forward starts and ends, when a type or service is tried again)
//! is tested on a fake clock below. The hub (`hub.rs`) owns the sockets and tasks.

use crate::foxglove::server::{Channel, Level, ServerMessage, Service};
use crate::foxglove::{ChannelId, SubscriptionId};
use crate::links::LinkSummary;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::time::{Duration, Instant};

/// A client of the view, numbered from 0 in the order they joined (never reused).
pub(crate) type ClientId = u64;

/// Subscriptions one client may hold at once.
pub(crate) const MAX_SUBSCRIPTIONS_PER_CLIENT: usize = 4096;

/// Requests one client may have waiting on the master or a service at once (parameter
/// reads and writes, service calls, advertisements); more are refused with a status.
pub(crate) const MAX_REQUESTS_IN_FLIGHT: usize = 8;

/// Parameter names one client may watch at once.
pub(crate) const MAX_WATCHED_PER_CLIENT: usize = 1000;

/// Channels one client may advertise (publish on) at once.
pub(crate) const MAX_CLIENT_CHANNELS: usize = 64;

/// Services advertised at once; the rest are left out.
pub(crate) const MAX_SERVICES: usize = 4096;

/// How long a service or type that could not be described waits before it is tried again.
pub(crate) const REPROBE_AFTER: Duration = Duration::from_secs(30);

/// The longest message definition a channel may carry. The largest definitions of
/// Debian's ROS messages are tens of kilobytes; a publisher that sends megabytes in its
/// connection header would otherwise cost every client that much at connect.
pub(crate) const MAX_DEFINITION_BYTES: usize = 256 << 10;

/// Bytes of definitions remembered in all: a graph of thousands of types, each with a
/// large definition learned from its publisher, is bounded too.
pub(crate) const MAX_DEFINITIONS_TOTAL: usize = 32 << 20;

/// Channels advertised at once; further topics are left out (and said so).
pub(crate) const MAX_CHANNELS: usize = 4096;

/// Types whose definitions are remembered (a master that lists more distinct types than
/// this has been filled by someone: the rest are looked at again on the next tick).
pub(crate) const MAX_TYPES: usize = 16384;

/// The largest advertisement frame: a new client's list of channels goes out in parts of
/// at most this many bytes of definitions.
pub(crate) const ADVERTISE_PART_BYTES: usize = 1 << 20;

/// How long a client must have said nothing before a new client may take its place when
/// the view is full (a client that just connected has not subscribed yet).
pub(crate) const CLIENT_IDLE_GRACE: Duration = Duration::from_secs(5);

/// Something the hub must do for the table's state to hold in the world.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Send a text frame to one client.
    Say(ClientId, ServerMessage),
    /// Send a text frame to every client (serialized once).
    SayAll(ServerMessage),
    /// End a client's session (it has left the table).
    Close(ClientId),
    /// Drop what the client's send buffer still holds for an ended subscription.
    Forget(ClientId, SubscriptionId),
    /// Subscribe to `topic` and hand its messages to the clients that want `channel`.
    StartForward {
        /// The channel whose clients get the messages.
        channel: ChannelId,
        /// The ROS topic.
        topic: String,
    },
    /// Stop the channel's forward: nobody wants it, or its topic went away.
    StopForward(ChannelId),
}

/// Why a client's subscription was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum SubscribeRefusal {
    /// The channel is not advertised (never was, or its topic went away).
    NoSuchChannel,
    /// The client already holds a subscription with this id.
    IdInUse,
    /// The client already subscribes to the channel (one subscription per channel, so a
    /// message costs one copy per client).
    AlreadySubscribed,
    /// The client holds [`MAX_SUBSCRIPTIONS_PER_CLIENT`] already.
    OverLimit,
}

impl SubscribeRefusal {
    fn reason(self) -> &'static str {
        match self {
            SubscribeRefusal::NoSuchChannel => "no such channel",
            SubscribeRefusal::IdInUse => "subscription id in use",
            SubscribeRefusal::AlreadySubscribed => "already subscribed to the channel",
            SubscribeRefusal::OverLimit => "over the limit per client",
        }
    }
}

/// Why a client's request was refused. The session goes on; the client is told in a
/// status ([`Refusal::status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The client has [`MAX_REQUESTS_IN_FLIGHT`] requests waiting already.
    TooManyRequests,
    /// The client watches [`MAX_WATCHED_PER_CLIENT`] parameters already.
    TooManyWatched,
    /// The client publishes on [`MAX_CLIENT_CHANNELS`] channels already.
    TooManyClientChannels,
    /// The operator opened no topics to clients.
    PublishingOff,
    /// A message on a channel the client did not advertise.
    NotAdvertised(ChannelId),
    /// An op this protocol version does not have.
    UnknownOp(String),
    /// An op of the protocol that this server does not offer.
    Unsupported(&'static str),
    /// Subscriptions refused for one reason: how many, and the first (subscription id and
    /// channel) as an example. One refusal per reason however many a request carried.
    Subscriptions {
        /// Why.
        why: SubscribeRefusal,
        /// How many of the request's subscriptions.
        count: usize,
        /// The first refused: its subscription id and channel.
        first: (SubscriptionId, ChannelId),
    },
}

impl Refusal {
    /// How bad: an op the server lacks is a warning, the rest are errors.
    pub(crate) fn level(&self) -> Level {
        match self {
            Refusal::UnknownOp(_) | Refusal::Unsupported(_) => Level::Warning,
            _ => Level::Error,
        }
    }

    /// The status that tells the client.
    pub(crate) fn status(&self) -> ServerMessage {
        ServerMessage::Status {
            level: self.level(),
            message: self.to_string(),
            id: None,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::TooManyRequests => {
                write!(
                    f,
                    "at most {MAX_REQUESTS_IN_FLIGHT} requests in flight per client"
                )
            }
            Refusal::TooManyWatched => {
                write!(
                    f,
                    "at most {MAX_WATCHED_PER_CLIENT} parameters watched per client"
                )
            }
            Refusal::TooManyClientChannels => {
                write!(f, "at most {MAX_CLIENT_CHANNELS} channels per client")
            }
            Refusal::PublishingOff => f.write_str("this server takes no messages from clients"),
            Refusal::NotAdvertised(channel) => {
                write!(f, "no channel {channel} advertised by this client")
            }
            Refusal::UnknownOp(op) => write!(f, "unsupported op {op:?}"),
            Refusal::Unsupported(op) => write!(f, "{op} is not supported by this server"),
            Refusal::Subscriptions {
                why,
                count,
                first: (id, channel),
            } => {
                let example = match why {
                    SubscribeRefusal::NoSuchChannel | SubscribeRefusal::AlreadySubscribed => {
                        format!("channel {channel}")
                    }
                    SubscribeRefusal::IdInUse => format!("subscription {id}"),
                    SubscribeRefusal::OverLimit => {
                        format!("subscription {id}; at most {MAX_SUBSCRIPTIONS_PER_CLIENT}")
                    }
                };
                write!(
                    f,
                    "{count} subscription(s) refused, {} (such as {example})",
                    why.reason()
                )
            }
        }
    }
}

impl std::error::Error for Refusal {}

/// The view has as many clients as it takes, and none has been idle long enough to give
/// way to a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Full;

/// What the view knows of a message type's definition.
#[derive(Debug, Clone, PartialEq)]
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

/// A service's type and definitions, as probed from the service and looked up.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Description {
    pub(crate) service_type: String,
    pub(crate) request_schema: String,
    pub(crate) response_schema: String,
}

/// What the table knows of one client.
struct ClientEntry<P> {
    /// When it last sent a frame: the idlest one gives way when the view is full.
    last_heard: Instant,
    /// Requests of its own waiting on the master or a service.
    requests: usize,
    /// Its subscriptions, by its ids.
    subscriptions: HashMap<SubscriptionId, ChannelId>,
    /// The parameters it watches.
    watched: BTreeSet<String>,
    /// The channels it publishes on, by its ids.
    publications: HashMap<ChannelId, P>,
}

impl<P> ClientEntry<P> {
    /// Holds nothing of the view's: no subscription, watched parameter, advertised
    /// channel or request in flight.
    fn holds_nothing(&self) -> bool {
        self.subscriptions.is_empty()
            && self.watched.is_empty()
            && self.publications.is_empty()
            && self.requests == 0
    }
}

/// The view's state; `P` is what the hub keeps for a channel a client publishes on.
pub(crate) struct ViewTable<P> {
    /// The first frame every client is sent.
    server_info: ServerMessage,
    max_clients: usize,
    /// Bytes of definitions the channels may carry in all: a new client is sent every
    /// channel, and they must fit well inside its send buffer.
    definition_budget: usize,
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
    /// Types whose definition was asked of a publisher, and when.
    learning: HashMap<String, Instant>,
    clients: HashMap<ClientId, ClientEntry<P>>,
    next_client: ClientId,
    /// For each channel, who wants it: one subscription per client and channel.
    wanted: HashMap<ChannelId, HashMap<ClientId, SubscriptionId>>,
    /// The channels being forwarded: exactly those somebody wants, unless a forward
    /// failed (then the next subscription tries again).
    forwarded: HashSet<ChannelId>,
    /// What each forward's publisher links say.
    links: HashMap<ChannelId, LinkSummary>,
    /// The graph's services that could be described, by id and by name.
    services: BTreeMap<u32, Service>,
    service_ids: HashMap<String, u32>,
    next_service: u32,
    /// Services that could not be described, and when they were last tried.
    undescribed: HashMap<String, Instant>,
    /// Each watched parameter's value when last looked at.
    parameter_values: HashMap<String, Option<udpros::xmlrpc::Value>>,
}

impl<P> ViewTable<P> {
    /// An empty view that greets each client with `server_info`, takes `max_clients` at
    /// once and advertises at most `definition_budget` bytes of definitions in all.
    pub(crate) fn new(
        server_info: ServerMessage,
        max_clients: usize,
        definition_budget: usize,
    ) -> Self {
        ViewTable {
            server_info,
            max_clients,
            definition_budget,
            channels: BTreeMap::new(),
            by_topic: HashMap::new(),
            next_channel: 0,
            schema_bytes: 0,
            published: BTreeSet::new(),
            left_out: HashMap::new(),
            definitions: HashMap::new(),
            definition_bytes: 0,
            learning: HashMap::new(),
            clients: HashMap::new(),
            next_client: 0,
            wanted: HashMap::new(),
            forwarded: HashSet::new(),
            links: HashMap::new(),
            services: BTreeMap::new(),
            service_ids: HashMap::new(),
            next_service: 0,
            undescribed: HashMap::new(),
            parameter_values: HashMap::new(),
        }
    }

    // ----- clients -----

    /// A new client at `now`: its id and the frames that greet it (who the server is,
    /// every channel, what was left out, the services). When the view is full, the
    /// client that holds nothing and has been silent longest, at least
    /// [`CLIENT_IDLE_GRACE`], gives way (its [`Action::Close`] comes first); when none
    /// has, [`Full`].
    pub(crate) fn join(&mut self, now: Instant) -> Result<(ClientId, Vec<Action>), Full> {
        let mut actions = Vec::new();
        if self.clients.len() >= self.max_clients {
            let idlest = self
                .clients
                .iter()
                .filter(|(_, entry)| entry.holds_nothing())
                .map(|(id, entry)| (*id, now.saturating_duration_since(entry.last_heard)))
                .filter(|(_, silent)| *silent >= CLIENT_IDLE_GRACE)
                .max_by_key(|(id, silent)| (*silent, std::cmp::Reverse(*id)))
                .map(|(id, _)| id)
                .ok_or(Full)?;
            tracing::info!("the view is full: an idle client gives way to a new one");
            actions.extend(self.leave(idlest));
        }
        let id = self.next_client;
        self.next_client += 1;
        self.clients.insert(
            id,
            ClientEntry {
                last_heard: now,
                requests: 0,
                subscriptions: HashMap::new(),
                watched: BTreeSet::new(),
                publications: HashMap::new(),
            },
        );
        actions.push(Action::Say(id, self.server_info.clone()));
        advertise(&mut actions, Some(id), self.channels.values());
        if !self.left_out.is_empty() {
            actions.push(Action::Say(id, left_out_status(&self.left_out)));
        }
        if !self.services.is_empty() {
            let services = self.services.values().cloned().collect();
            actions.push(Action::Say(
                id,
                ServerMessage::AdvertiseServices { services },
            ));
        }
        Ok((id, actions))
    }

    /// `client` sent a frame at `now`: it is not idle.
    pub(crate) fn heard(&mut self, client: ClientId, now: Instant) {
        if let Some(entry) = self.clients.get_mut(&client) {
            entry.last_heard = now;
        }
    }

    /// `client` went away (or is sent away): its session closes, and its subscriptions,
    /// watches and publications end, with the forwards nobody wants now.
    pub(crate) fn leave(&mut self, client: ClientId) -> Vec<Action> {
        let Some(entry) = self.clients.remove(&client) else {
            return Vec::new();
        };
        let mut actions = vec![Action::Close(client)];
        for channel in entry.subscriptions.into_values() {
            self.drop_wanting(client, channel, &mut actions);
        }
        actions
    }

    /// Every client closes and every forward stops: the view ends.
    pub(crate) fn close_all(&mut self) -> Vec<Action> {
        let clients: Vec<ClientId> = self.clients.keys().copied().collect();
        clients.into_iter().flat_map(|c| self.leave(c)).collect()
    }

    /// How many clients the view has.
    pub(crate) fn client_count(&self) -> usize {
        self.clients.len()
    }

    // ----- requests in flight -----

    /// A slot for one more request of `client` waiting on the master or a service; give
    /// it back with [`ViewTable::finish_request`].
    pub(crate) fn start_request(&mut self, client: ClientId) -> Result<(), Refusal> {
        let entry = self
            .clients
            .get_mut(&client)
            .ok_or(Refusal::TooManyRequests)?;
        if entry.requests >= MAX_REQUESTS_IN_FLIGHT {
            return Err(Refusal::TooManyRequests);
        }
        entry.requests += 1;
        Ok(())
    }

    /// A request of `client` ended (a client that left has nothing to give back).
    pub(crate) fn finish_request(&mut self, client: ClientId) {
        if let Some(entry) = self.clients.get_mut(&client) {
            entry.requests = entry.requests.saturating_sub(1);
        }
    }

    // ----- subscriptions and forwards -----

    /// Takes a client's subscriptions: each to a channel that exists, under an id the
    /// client does not use yet, one per channel, within the client's limit. A channel
    /// wanted for the first time starts its forward. What is refused is said in one
    /// status per reason, however many a request carried.
    pub(crate) fn subscribe(
        &mut self,
        client: ClientId,
        wanted: impl IntoIterator<Item = (SubscriptionId, ChannelId)>,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        let mut refused: BTreeMap<SubscribeRefusal, (usize, (SubscriptionId, ChannelId))> =
            BTreeMap::new();
        let Some(entry) = self.clients.get_mut(&client) else {
            return actions;
        };
        for (id, channel) in wanted {
            let why = if !self.channels.contains_key(&channel) {
                Some(SubscribeRefusal::NoSuchChannel)
            } else if entry.subscriptions.contains_key(&id) {
                Some(SubscribeRefusal::IdInUse)
            } else if self
                .wanted
                .get(&channel)
                .is_some_and(|w| w.contains_key(&client))
            {
                Some(SubscribeRefusal::AlreadySubscribed)
            } else if entry.subscriptions.len() >= MAX_SUBSCRIPTIONS_PER_CLIENT {
                Some(SubscribeRefusal::OverLimit)
            } else {
                None
            };
            if let Some(why) = why {
                refused.entry(why).or_insert((0, (id, channel))).0 += 1;
                continue;
            }
            entry.subscriptions.insert(id, channel);
            self.wanted.entry(channel).or_default().insert(client, id);
            if self.forwarded.insert(channel) {
                let topic = self.channels[&channel].topic.clone();
                actions.push(Action::StartForward { channel, topic });
            }
        }
        for (why, (count, first)) in refused {
            let refusal = Refusal::Subscriptions { why, count, first };
            actions.push(Action::Say(client, refusal.status()));
        }
        actions
    }

    /// Ends the client's subscriptions named (ids it does not hold are let be).
    pub(crate) fn unsubscribe(
        &mut self,
        client: ClientId,
        ids: impl IntoIterator<Item = SubscriptionId>,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        for id in ids {
            let removed = self
                .clients
                .get_mut(&client)
                .and_then(|entry| entry.subscriptions.remove(&id));
            if let Some(channel) = removed {
                actions.push(Action::Forget(client, id));
                self.drop_wanting(client, channel, &mut actions);
            }
        }
        actions
    }

    /// The channel side of ending `client`'s subscription to `channel` (already gone from
    /// the client's own table): the forward stops with the last one.
    fn drop_wanting(&mut self, client: ClientId, channel: ChannelId, actions: &mut Vec<Action>) {
        let Some(wanting) = self.wanted.get_mut(&channel) else {
            return;
        };
        wanting.remove(&client);
        if wanting.is_empty() {
            self.wanted.remove(&channel);
            self.stop_forward(channel, actions);
        }
    }

    fn stop_forward(&mut self, channel: ChannelId, actions: &mut Vec<Action>) {
        if self.forwarded.remove(&channel) {
            actions.push(Action::StopForward(channel));
        }
        self.links.remove(&channel);
    }

    /// The clients that want `channel`, each with its subscription id: where a message
    /// of the channel goes.
    pub(crate) fn wanting(
        &self,
        channel: ChannelId,
    ) -> impl Iterator<Item = (ClientId, SubscriptionId)> + '_ {
        self.wanted
            .get(&channel)
            .into_iter()
            .flatten()
            .map(|(client, id)| (*client, *id))
    }

    /// The channel's forward could not subscribe (`why`): the clients that want it are
    /// told, and their next subscription to it tries again.
    pub(crate) fn forward_failed(&mut self, channel: ChannelId, why: &str) -> Vec<Action> {
        self.forwarded.remove(&channel);
        let Some(topic) = self.channels.get(&channel).map(|c| c.topic.clone()) else {
            return Vec::new();
        };
        let message = format!("cannot subscribe to {topic}: {why}");
        self.wanting(channel)
            .map(|(client, _)| {
                let status = ServerMessage::Status {
                    level: Level::Error,
                    message: message.clone(),
                    id: None,
                };
                Action::Say(client, status)
            })
            .collect()
    }

    /// What a forward's publisher links say now (kept only while it forwards).
    pub(crate) fn update_links(&mut self, channel: ChannelId, summary: LinkSummary) {
        if self.forwarded.contains(&channel) {
            self.links.insert(channel, summary);
        }
    }

    /// Each forwarded topic's links, by topic.
    pub(crate) fn link_summaries(&self) -> Vec<(String, LinkSummary)> {
        let mut out: Vec<(String, LinkSummary)> = self
            .links
            .iter()
            .filter_map(|(id, summary)| {
                let channel = self.channels.get(id)?;
                Some((channel.topic.clone(), summary.clone()))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The topics being forwarded, sorted.
    pub(crate) fn forwarded_topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self
            .forwarded
            .iter()
            .filter_map(|id| self.channels.get(id))
            .map(|c| c.topic.clone())
            .collect();
        topics.sort();
        topics
    }

    // ----- channels and their definitions -----

    /// The topics that have a publisher now (at most [`MAX_CHANNELS`] are kept).
    pub(crate) fn set_published(&mut self, topics: impl IntoIterator<Item = String>) {
        self.published = topics.into_iter().take(MAX_CHANNELS).collect();
    }

    /// The advertised topics that have a publisher now, sorted.
    pub(crate) fn published_topics(&self) -> Vec<String> {
        self.published
            .iter()
            .filter(|topic| self.by_topic.contains_key(*topic))
            .cloned()
            .collect()
    }

    /// The types of `topics` the table has not looked up yet, sorted, as many as the
    /// remembered types leave room for ([`MAX_TYPES`]).
    pub(crate) fn types_to_look_up(&self, topics: &[(String, String)]) -> Vec<String> {
        let room = MAX_TYPES.saturating_sub(self.definitions.len());
        let mut unknown: Vec<String> = topics
            .iter()
            .map(|(_, t)| t)
            .filter(|t| !self.definitions.contains_key(*t))
            .cloned()
            .collect();
        unknown.sort();
        unknown.dedup();
        unknown.truncate(room);
        unknown
    }

    /// Remembers what `text` says of `msg_type` (`None`: nothing here defines it), within
    /// the bounds on definitions.
    pub(crate) fn define(&mut self, msg_type: String, text: Option<String>) {
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

    /// Topics whose type nothing here defines and whose publisher may be asked for it at
    /// `now`: one topic per type, at most `slots`, a type asked again only after
    /// [`REPROBE_AFTER`]. Each returned type counts as asked at `now`.
    pub(crate) fn types_to_learn(
        &mut self,
        now: Instant,
        topics: &[(String, String)],
        slots: usize,
    ) -> Vec<(String, String)> {
        let mut due = Vec::new();
        for (topic, msg_type) in topics {
            if due.len() >= slots {
                break;
            }
            let unknown = matches!(self.definitions.get(msg_type), Some(Definition::Unknown));
            let asked_lately = self
                .learning
                .get(msg_type)
                .is_some_and(|asked| now.saturating_duration_since(*asked) < REPROBE_AFTER);
            if unknown && !asked_lately {
                self.learning.insert(msg_type.clone(), now);
                due.push((topic.clone(), msg_type.clone()));
            }
        }
        // Bounded: only types remembered as unknown are asked, and at most MAX_TYPES
        // types are remembered.
        due
    }

    /// Keeps the channels in step with the master's `topics` (topic, type): channels of
    /// topics gone or retyped end (with their subscriptions and forwards), topics whose
    /// definition is known become channels within the bounds, and the topics left out are
    /// said once each.
    pub(crate) fn update_channels(&mut self, topics: &[(String, String)]) -> Vec<Action> {
        let mut actions = Vec::new();
        let listed: HashMap<&str, &str> = topics
            .iter()
            .map(|(topic, t)| (topic.as_str(), t.as_str()))
            .collect();
        let gone: Vec<ChannelId> = self
            .channels
            .values()
            .filter(|c| listed.get(c.topic.as_str()) != Some(&c.schema_name.as_str()))
            .map(|c| c.id)
            .collect();
        for id in &gone {
            self.remove_channel(*id, &mut actions);
        }
        self.left_out
            .retain(|topic, _| listed.contains_key(topic.as_str()));
        let mut added = Vec::new();
        let mut newly_left_out = HashMap::new();
        for (topic, msg_type) in topics {
            if self.by_topic.contains_key(topic) {
                continue;
            }
            let definition = match self.definitions.get(msg_type) {
                Some(Definition::Known(definition)) => definition,
                // Not known yet, or being learned from a publisher.
                Some(Definition::Unknown) | None => continue,
                Some(other) => {
                    let why = self.why_left_out(other);
                    self.leave_out(topic, why, &mut newly_left_out);
                    continue;
                }
            };
            let why = if self.channels.len() >= MAX_CHANNELS {
                Some(format!("the view advertises at most {MAX_CHANNELS} topics"))
            } else if self.schema_bytes + definition.len() > self.definition_budget {
                Some(format!(
                    "the definitions advertised reach the view's {} kB budget",
                    self.definition_budget >> 10
                ))
            } else {
                None
            };
            if let Some(why) = why {
                self.leave_out(topic, why, &mut newly_left_out);
                continue;
            }
            let id = self.next_channel;
            self.next_channel += 1;
            let channel = Channel::ros1(id, topic, msg_type, definition);
            self.schema_bytes += channel.schema.len();
            self.left_out.remove(topic);
            self.by_topic.insert(topic.clone(), id);
            self.channels.insert(id, channel.clone());
            added.push(channel);
        }
        if !gone.is_empty() {
            actions.push(Action::SayAll(ServerMessage::Unadvertise {
                channel_ids: gone,
            }));
        }
        advertise(&mut actions, None, &added);
        if !newly_left_out.is_empty() {
            actions.push(Action::SayAll(left_out_status(&newly_left_out)));
        }
        actions
    }

    fn why_left_out(&self, definition: &Definition) -> String {
        match definition {
            Definition::TooLarge(bytes) => format!(
                "its definition is {} kB, over the view's {} kB",
                bytes >> 10,
                MAX_DEFINITION_BYTES >> 10
            ),
            _ => format!(
                "the view remembers at most {} MB of definitions",
                MAX_DEFINITIONS_TOTAL >> 20
            ),
        }
    }

    /// Records that `topic` is not advertised and why, to be said once.
    fn leave_out(&mut self, topic: &str, why: String, newly: &mut HashMap<String, String>) {
        if !self.left_out.contains_key(topic) {
            tracing::warn!("the view does not advertise {topic}: {why}");
            self.left_out.insert(topic.to_string(), why.clone());
            newly.insert(topic.to_string(), why);
        }
    }

    /// A topic went away (or changed type): its channel, subscriptions and forward end.
    fn remove_channel(&mut self, id: ChannelId, actions: &mut Vec<Action>) {
        if let Some(channel) = self.channels.remove(&id) {
            self.by_topic.remove(&channel.topic);
            self.schema_bytes = self.schema_bytes.saturating_sub(channel.schema.len());
        }
        for (client, subscription) in self.wanted.remove(&id).unwrap_or_default() {
            if let Some(entry) = self.clients.get_mut(&client) {
                entry.subscriptions.remove(&subscription);
                actions.push(Action::Forget(client, subscription));
            }
        }
        self.stop_forward(id, actions);
    }

    // ----- services -----

    /// Keeps the advertised services in step with the master's `listed` names at `now`:
    /// the services gone are unadvertised (the actions), and the names returned are the
    /// new ones to describe (those that failed lately wait [`REPROBE_AFTER`]), as many as
    /// [`MAX_SERVICES`] leaves room for. Their descriptions come back through
    /// [`ViewTable::add_services`].
    pub(crate) fn update_services(
        &mut self,
        now: Instant,
        listed: &BTreeSet<String>,
    ) -> (Vec<Action>, Vec<String>) {
        let gone: Vec<u32> = self
            .services
            .values()
            .filter(|s| !listed.contains(&s.name))
            .map(|s| s.id)
            .collect();
        for id in &gone {
            if let Some(service) = self.services.remove(id) {
                self.service_ids.remove(&service.name);
            }
        }
        self.undescribed.retain(|name, _| listed.contains(name));
        let room = MAX_SERVICES.saturating_sub(self.services.len());
        let new = listed
            .iter()
            .filter(|n| !self.service_ids.contains_key(*n))
            .filter(|n| {
                self.undescribed
                    .get(*n)
                    .is_none_or(|tried| now.saturating_duration_since(*tried) >= REPROBE_AFTER)
            })
            .take(room)
            .cloned()
            .collect();
        let mut actions = Vec::new();
        if !gone.is_empty() {
            let message = ServerMessage::UnadvertiseServices { service_ids: gone };
            actions.push(Action::SayAll(message));
        }
        (actions, new)
    }

    /// The outcome of describing services at `now`: those described are advertised (a
    /// name seen already, or past [`MAX_SERVICES`], is let be), the others tried again
    /// after [`REPROBE_AFTER`].
    pub(crate) fn add_services(
        &mut self,
        now: Instant,
        described: impl IntoIterator<Item = (String, Option<Description>)>,
    ) -> Vec<Action> {
        let mut added = Vec::new();
        for (name, description) in described {
            let Some(description) = description else {
                self.undescribed.insert(name, now);
                continue;
            };
            self.undescribed.remove(&name);
            if self.service_ids.contains_key(&name) || self.services.len() >= MAX_SERVICES {
                continue;
            }
            let id = self.next_service;
            self.next_service += 1;
            let service = Service {
                id,
                name: name.clone(),
                service_type: description.service_type,
                request_schema: description.request_schema,
                response_schema: description.response_schema,
            };
            self.service_ids.insert(name, id);
            self.services.insert(id, service.clone());
            added.push(service);
        }
        if added.is_empty() {
            return Vec::new();
        }
        vec![Action::SayAll(ServerMessage::AdvertiseServices {
            services: added,
        })]
    }

    /// The advertised service `id`.
    pub(crate) fn service(&self, id: u32) -> Option<&Service> {
        self.services.get(&id)
    }

    // ----- parameters -----

    /// `client` watches `names` too, within [`MAX_WATCHED_PER_CLIENT`] (the names before
    /// the limit are kept).
    pub(crate) fn watch(
        &mut self,
        client: ClientId,
        names: impl IntoIterator<Item = String>,
    ) -> Result<(), Refusal> {
        let Some(entry) = self.clients.get_mut(&client) else {
            return Ok(());
        };
        for name in names {
            if entry.watched.len() >= MAX_WATCHED_PER_CLIENT && !entry.watched.contains(&name) {
                return Err(Refusal::TooManyWatched);
            }
            entry.watched.insert(name);
        }
        Ok(())
    }

    /// `client` no longer watches `names`.
    pub(crate) fn unwatch<'a>(
        &mut self,
        client: ClientId,
        names: impl IntoIterator<Item = &'a String>,
    ) {
        if let Some(entry) = self.clients.get_mut(&client) {
            for name in names {
                entry.watched.remove(name);
            }
        }
    }

    /// Every parameter some client watches.
    pub(crate) fn watched_parameters(&self) -> BTreeSet<String> {
        let watched = self.clients.values().flat_map(|e| e.watched.iter());
        watched.cloned().collect()
    }

    /// Parameters looked at before that no client watches now; forgotten here.
    pub(crate) fn forget_unwatched(&mut self) -> Vec<String> {
        let watched = self.watched_parameters();
        let gone: Vec<String> = self
            .parameter_values
            .keys()
            .filter(|name| !watched.contains(*name))
            .cloned()
            .collect();
        for name in &gone {
            self.parameter_values.remove(name);
        }
        gone
    }

    /// Records a parameter's value; whether it differs from the last one recorded (the
    /// first look at a parameter counts as no change: its watchers asked for it).
    pub(crate) fn remember_parameter(
        &mut self,
        name: &str,
        value: Option<udpros::xmlrpc::Value>,
    ) -> bool {
        match self
            .parameter_values
            .insert(name.to_string(), value.clone())
        {
            Some(before) => before != value,
            None => false,
        }
    }

    /// The clients that watch `name`.
    pub(crate) fn parameter_watchers(&self, name: &str) -> Vec<ClientId> {
        let watching = self
            .clients
            .iter()
            .filter(|(_, e)| e.watched.contains(name));
        watching.map(|(id, _)| *id).collect()
    }

    // ----- channels clients publish on -----

    /// Whether `client` may advertise one more channel.
    pub(crate) fn may_publish(&self, client: ClientId) -> Result<(), Refusal> {
        let held = self
            .clients
            .get(&client)
            .map_or(0, |e| e.publications.len());
        if held >= MAX_CLIENT_CHANNELS {
            return Err(Refusal::TooManyClientChannels);
        }
        Ok(())
    }

    /// Keeps `publication` as `client`'s channel `id` (one advertised again replaces the
    /// old). A client that left meanwhile keeps nothing; a client at its limit (several
    /// requests advertising at once) is refused.
    pub(crate) fn add_publication(
        &mut self,
        client: ClientId,
        id: ChannelId,
        publication: P,
    ) -> Result<(), Refusal> {
        let Some(entry) = self.clients.get_mut(&client) else {
            return Ok(());
        };
        if entry.publications.len() >= MAX_CLIENT_CHANNELS && !entry.publications.contains_key(&id)
        {
            return Err(Refusal::TooManyClientChannels);
        }
        entry.publications.insert(id, publication);
        Ok(())
    }

    /// Ends `client`'s channels `ids`.
    pub(crate) fn remove_publications(
        &mut self,
        client: ClientId,
        ids: impl IntoIterator<Item = ChannelId>,
    ) {
        if let Some(entry) = self.clients.get_mut(&client) {
            for id in ids {
                entry.publications.remove(&id);
            }
        }
    }

    /// `client`'s channel `id`, or the refusal to say when it advertised none.
    pub(crate) fn publication(&self, client: ClientId, id: ChannelId) -> Result<&P, Refusal> {
        self.clients
            .get(&client)
            .and_then(|e| e.publications.get(&id))
            .ok_or(Refusal::NotAdvertised(id))
    }
}

/// Advertises `channels` to one client (`Some`) or all (`None`), in frames of at most
/// [`ADVERTISE_PART_BYTES`] of definitions each (a client's message size limit is met
/// by each part).
fn advertise<'a>(
    actions: &mut Vec<Action>,
    to: Option<ClientId>,
    channels: impl IntoIterator<Item = &'a Channel>,
) {
    let say = |channels| {
        let message = ServerMessage::Advertise { channels };
        match to {
            Some(client) => Action::Say(client, message),
            None => Action::SayAll(message),
        }
    };
    let mut part: Vec<Channel> = Vec::new();
    let mut part_bytes = 0;
    for channel in channels {
        if !part.is_empty() && part_bytes + channel.schema.len() > ADVERTISE_PART_BYTES {
            actions.push(say(std::mem::take(&mut part)));
            part_bytes = 0;
        }
        part_bytes += channel.schema.len();
        part.push(channel.clone());
    }
    if !part.is_empty() {
        actions.push(say(part));
    }
}

/// One warning for the topics left out: how many, and the first few with their reasons.
fn left_out_status(left_out: &HashMap<String, String>) -> ServerMessage {
    let mut named: Vec<(&String, &String)> = left_out.iter().collect();
    named.sort();
    let shown: Vec<String> = named
        .iter()
        .take(3)
        .map(|(topic, why)| format!("{topic} ({why})"))
        .collect();
    let more = named.len().saturating_sub(shown.len());
    let mut message = format!(
        "{} topic(s) not advertised: {}",
        named.len(),
        shown.join(", ")
    );
    if more > 0 {
        message.push_str(&format!(" and {more} more"));
    }
    ServerMessage::Status {
        level: Level::Warning,
        message,
        id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SECOND: Duration = Duration::from_secs(1);

    /// The greeting (a real one names the server; any frame will do here).
    fn info() -> ServerMessage {
        ServerMessage::RemoveStatus {
            status_ids: vec!["hello".into()],
        }
    }

    /// A table of `max_clients` with a 1 MB definition budget, and the fake clock's start.
    fn table(max_clients: usize) -> (ViewTable<&'static str>, Instant) {
        (ViewTable::new(info(), max_clients, 1 << 20), Instant::now())
    }

    fn topics(names: &[(&str, &str)]) -> Vec<(String, String)> {
        names
            .iter()
            .map(|(t, ty)| (t.to_string(), ty.to_string()))
            .collect()
    }

    /// Defines `msg_type` and lists `topic` of it: the channel's id.
    fn channel(
        t: &mut ViewTable<&'static str>,
        listed: &mut Vec<(String, String)>,
        topic: &str,
    ) -> ChannelId {
        t.define("std_msgs/String".into(), Some("string data".into()));
        listed.push((topic.into(), "std_msgs/String".into()));
        t.update_channels(listed);
        t.by_topic[topic]
    }

    fn statuses(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Say(_, ServerMessage::Status { message, .. })
                | Action::SayAll(ServerMessage::Status { message, .. }) => Some(message.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_full_view_lets_the_client_silent_longest_go_once_the_grace_is_over() {
        let (mut t, t0) = table(2);
        let (a, _) = t.join(t0).unwrap();
        let (b, _) = t.join(t0 + SECOND).unwrap();
        assert_eq!(
            t.join(t0 + 2 * SECOND),
            Err(Full),
            "nobody silent for the grace yet"
        );
        // Six seconds in, both have been silent for the grace; a has been silent longest.
        let (c, actions) = t.join(t0 + 6 * SECOND).unwrap();
        assert_eq!(actions[0], Action::Close(a));
        assert_eq!(actions[1], Action::Say(c, info()), "the greeting follows");
        assert_eq!(t.client_count(), 2);
        // b speaks: now c is the idle one, but only after its own grace.
        t.heard(b, t0 + 7 * SECOND);
        assert_eq!(t.join(t0 + 10 * SECOND), Err(Full));
        let (_, actions) = t.join(t0 + 11 * SECOND + Duration::from_millis(1)).unwrap();
        assert_eq!(actions[0], Action::Close(c));
    }

    #[test]
    fn a_client_holding_anything_never_gives_way() {
        let (mut t, t0) = table(1);
        let mut listed = Vec::new();
        let ch = channel(&mut t, &mut listed, "/chatter");
        let late = t0 + 3600 * SECOND;
        // A subscription, a watched parameter, a publication, a request in flight: each
        // keeps a silent client in.
        type Hold = fn(&mut ViewTable<&'static str>, ClientId, ChannelId);
        let holds: [Hold; 4] = [
            |t, c, ch| assert!(!t.subscribe(c, [(1, ch)]).is_empty()),
            |t, c, _| t.watch(c, ["/p".to_string()]).unwrap(),
            |t, c, _| t.add_publication(c, 3, "pub").unwrap(),
            |t, c, _| t.start_request(c).unwrap(),
        ];
        for hold in holds {
            let (c, _) = t.join(t0).unwrap();
            hold(&mut t, c, ch);
            assert_eq!(t.join(late), Err(Full));
            t.leave(c);
        }
        let (c, _) = t.join(t0).unwrap();
        t.start_request(c).unwrap();
        t.finish_request(c);
        assert!(t.join(late).is_ok(), "a request that ended holds nothing");
    }

    #[test]
    fn requests_in_flight_are_bounded_per_client_and_given_back() {
        let (mut t, t0) = table(4);
        let (a, _) = t.join(t0).unwrap();
        let (b, _) = t.join(t0).unwrap();
        for _ in 0..MAX_REQUESTS_IN_FLIGHT {
            t.start_request(a).unwrap();
        }
        assert_eq!(t.start_request(a), Err(Refusal::TooManyRequests));
        assert_eq!(
            t.start_request(b),
            Ok(()),
            "another client's slots are its own"
        );
        t.finish_request(a);
        assert_eq!(t.start_request(a), Ok(()));
        t.leave(a);
        t.finish_request(a); // a request that outlives its client gives nothing back
        assert_eq!(t.start_request(a), Err(Refusal::TooManyRequests), "gone");
        assert_eq!(
            Refusal::TooManyRequests.to_string(),
            "at most 8 requests in flight per client"
        );
    }

    #[test]
    fn one_forward_per_wanted_channel_from_the_first_subscription_to_the_last() {
        let (mut t, t0) = table(4);
        let mut listed = Vec::new();
        let ch = channel(&mut t, &mut listed, "/chatter");
        let (a, _) = t.join(t0).unwrap();
        let (b, _) = t.join(t0).unwrap();
        let start = Action::StartForward {
            channel: ch,
            topic: "/chatter".into(),
        };
        assert_eq!(t.subscribe(a, [(7, ch)]), vec![start]);
        assert_eq!(t.subscribe(b, [(1, ch)]), vec![], "forwarded already");
        let mut wanting: Vec<_> = t.wanting(ch).collect();
        wanting.sort();
        assert_eq!(wanting, vec![(a, 7), (b, 1)]);
        assert_eq!(t.forwarded_topics(), vec!["/chatter".to_string()]);
        assert_eq!(t.unsubscribe(a, [7, 99]), vec![Action::Forget(a, 7)]);
        assert_eq!(t.leave(b), vec![Action::Close(b), Action::StopForward(ch)]);
        assert!(t.forwarded_topics().is_empty());
        assert_eq!(t.wanting(ch).count(), 0);
        assert_eq!(t.leave(b), vec![], "leaving twice does nothing");
    }

    #[test]
    fn refused_subscriptions_are_said_once_per_reason_with_a_count() {
        let (mut t, t0) = table(4);
        let mut listed = Vec::new();
        let ch = channel(&mut t, &mut listed, "/a");
        let (a, _) = t.join(t0).unwrap();
        let actions = t.subscribe(a, [(1, ch), (2, 90), (3, 91), (1, ch), (4, ch), (5, 93)]);
        assert_eq!(
            statuses(&actions),
            vec![
                "3 subscription(s) refused, no such channel (such as channel 90)",
                "1 subscription(s) refused, subscription id in use (such as subscription 1)",
                "1 subscription(s) refused, already subscribed to the channel (such as channel 0)",
            ]
        );
        assert!(actions.iter().all(|a| matches!(
            a,
            Action::StartForward { .. }
                | Action::Say(
                    _,
                    ServerMessage::Status {
                        level: Level::Error,
                        ..
                    }
                )
        )));
        assert_eq!(t.wanting(ch).collect::<Vec<_>>(), vec![(a, 1)]);
    }

    #[test]
    fn a_topic_gone_or_retyped_ends_its_channel_subscriptions_and_forward() {
        let (mut t, t0) = table(4);
        let mut listed = Vec::new();
        let ch = channel(&mut t, &mut listed, "/a");
        let (a, _) = t.join(t0).unwrap();
        t.subscribe(a, [(5, ch)]);
        t.define("std_msgs/Int32".into(), Some("int32 data".into()));
        let actions = t.update_channels(&topics(&[("/a", "std_msgs/Int32")]));
        assert_eq!(actions[0], Action::Forget(a, 5));
        assert_eq!(actions[1], Action::StopForward(ch));
        assert_eq!(
            actions[2],
            Action::SayAll(ServerMessage::Unadvertise {
                channel_ids: vec![ch]
            })
        );
        let Action::SayAll(ServerMessage::Advertise { channels }) = &actions[3] else {
            panic!("{actions:?}")
        };
        assert_eq!(channels.len(), 1);
        assert_ne!(channels[0].id, ch, "a new channel, a new id");
        assert_eq!(channels[0].schema_name, "std_msgs/Int32");
        assert_eq!(actions.len(), 4);
        // The subscription is gone from the client's side too: its id is free again.
        let new = channels[0].id;
        assert_eq!(t.subscribe(a, [(5, new)]).len(), 1);
        // The topic goes: the channel, and the forward with it.
        let actions = t.update_channels(&[]);
        assert!(actions.contains(&Action::StopForward(new)));
        assert!(t.published_topics().is_empty() && t.forwarded_topics().is_empty());
    }

    #[test]
    fn a_topic_of_an_unknown_type_waits_and_is_advertised_once_learned() {
        let (mut t, t0) = table(4);
        let listed = topics(&[("/x", "pkg/Unseen")]);
        assert_eq!(t.types_to_look_up(&listed), vec!["pkg/Unseen".to_string()]);
        t.define("pkg/Unseen".into(), None);
        assert!(t.types_to_look_up(&listed).is_empty(), "looked up once");
        assert!(
            t.update_channels(&listed).is_empty(),
            "nothing to advertise yet"
        );
        // Its publisher is asked, a few types at a time, and again only after a while.
        assert_eq!(t.types_to_learn(t0, &listed, 0), vec![]);
        assert_eq!(t.types_to_learn(t0, &listed, 8), listed);
        assert_eq!(t.types_to_learn(t0 + 29 * SECOND, &listed, 8), vec![]);
        assert_eq!(t.types_to_learn(t0 + REPROBE_AFTER, &listed, 8), listed);
        t.define("pkg/Unseen".into(), Some("uint8 x".into()));
        assert_eq!(t.types_to_learn(t0 + 99 * SECOND, &listed, 8), vec![]);
        let actions = t.update_channels(&listed);
        assert!(
            matches!(&actions[..], [Action::SayAll(ServerMessage::Advertise { channels })]
            if channels[0].schema == "uint8 x")
        );
    }

    #[test]
    fn definitions_are_bounded_and_each_topic_left_out_is_said_once() {
        let mut t: ViewTable<()> = ViewTable::new(info(), 4, 100);
        t.define("a/Big".into(), Some("x".repeat(MAX_DEFINITION_BYTES + 1)));
        t.define("a/Fits".into(), Some("y".repeat(60)));
        let listed = topics(&[("/big", "a/Big"), ("/one", "a/Fits"), ("/two", "a/Fits")]);
        let actions = t.update_channels(&listed);
        let said = statuses(&actions);
        assert_eq!(said.len(), 1, "{actions:?}");
        assert!(said[0].starts_with("2 topic(s) not advertised: /big (its definition is 256 kB, over the view's 256 kB), /two (the definitions advertised reach the view's 0 kB budget)"), "{}", said[0]);
        assert!(
            statuses(&t.update_channels(&listed)).is_empty(),
            "said once"
        );
        // A new client hears of them when it joins.
        let (_, actions) = t.join(Instant::now()).unwrap();
        assert_eq!(statuses(&actions).len(), 1);
        // The memory for definitions is bounded in all: past it, a type is NoRoom.
        let mut t: ViewTable<()> = ViewTable::new(info(), 4, usize::MAX);
        let big = "z".repeat(MAX_DEFINITION_BYTES);
        let fit = MAX_DEFINITIONS_TOTAL / MAX_DEFINITION_BYTES;
        for i in 0..=fit {
            t.define(format!("t/T{i}"), Some(big.clone()));
        }
        assert!(t.definition_bytes <= MAX_DEFINITIONS_TOTAL);
        assert_eq!(t.definitions[&format!("t/T{fit}")], Definition::NoRoom);
        // Redefining a type gives its bytes back.
        t.define("t/T0".into(), None);
        t.define(format!("t/T{fit}"), Some(big));
        assert!(matches!(
            t.definitions[&format!("t/T{fit}")],
            Definition::Known(_)
        ));
        assert_eq!(t.definition_bytes, MAX_DEFINITIONS_TOTAL);
    }

    #[test]
    fn channels_are_bounded_and_a_new_client_gets_them_in_parts() {
        let mut t: ViewTable<()> = ViewTable::new(info(), 4, usize::MAX);
        t.define("a/Mid".into(), Some("m".repeat(200 << 10)));
        let listed: Vec<(String, String)> = (0..MAX_CHANNELS + 10)
            .map(|i| (format!("/t{i:05}"), "a/Mid".to_string()))
            .collect();
        let actions = t.update_channels(&listed);
        assert_eq!(t.channels.len(), MAX_CHANNELS);
        assert!(statuses(&actions)[0].starts_with("10 topic(s) not advertised"));
        let (_, actions) = t.join(Instant::now()).unwrap();
        let parts: Vec<&Vec<Channel>> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Say(_, ServerMessage::Advertise { channels }) => Some(channels),
                _ => None,
            })
            .collect();
        assert_eq!(parts.iter().map(|p| p.len()).sum::<usize>(), MAX_CHANNELS);
        for part in &parts {
            let bytes: usize = part.iter().map(|c| c.schema.len()).sum();
            assert!(bytes <= ADVERTISE_PART_BYTES, "{bytes}");
        }
        assert!(parts.len() > 800, "5 channels per part: {}", parts.len());
    }

    fn described(ty: &str) -> Option<Description> {
        Some(Description {
            service_type: ty.into(),
            request_schema: String::new(),
            response_schema: String::new(),
        })
    }

    #[test]
    fn services_follow_the_master_and_undescribed_ones_wait_before_another_probe() {
        let (mut t, t0) = table(4);
        let listed: BTreeSet<String> = ["/a".to_string(), "/b".to_string()].into();
        let (actions, new) = t.update_services(t0, &listed);
        assert!(actions.is_empty());
        assert_eq!(new, vec!["/a".to_string(), "/b".to_string()]);
        let actions = t.add_services(
            t0,
            [
                ("/a".into(), described("std_srvs/Empty")),
                ("/b".into(), None),
            ],
        );
        let [Action::SayAll(ServerMessage::AdvertiseServices { services })] = &actions[..] else {
            panic!("{actions:?}")
        };
        assert_eq!(services[0].name, "/a");
        let a = services[0].id;
        assert_eq!(
            t.service(a).map(|s| s.service_type.as_str()),
            Some("std_srvs/Empty")
        );
        // /b waits before it is probed again; /a is known.
        assert!(t.update_services(t0 + 10 * SECOND, &listed).1.is_empty());
        assert_eq!(
            t.update_services(t0 + REPROBE_AFTER, &listed).1,
            vec!["/b".to_string()]
        );
        // /a goes: unadvertised to everyone; a client joining later does not hear of it.
        let (actions, _) = t.update_services(t0 + REPROBE_AFTER, &["/b".to_string()].into());
        assert_eq!(
            actions,
            vec![Action::SayAll(ServerMessage::UnadvertiseServices {
                service_ids: vec![a]
            })]
        );
        assert!(t.service(a).is_none());
        let (_, actions) = t.join(t0).unwrap();
        assert_eq!(actions.len(), 1, "the greeting only: {actions:?}");
    }

    #[test]
    fn watches_and_publications_are_bounded_per_client() {
        let (mut t, t0) = table(4);
        let (a, _) = t.join(t0).unwrap();
        let names = (0..MAX_WATCHED_PER_CLIENT).map(|i| format!("/p{i}"));
        t.watch(a, names).unwrap();
        assert_eq!(t.watch(a, ["/p0".to_string()]), Ok(()), "watched already");
        assert_eq!(
            t.watch(a, ["/more".to_string()]),
            Err(Refusal::TooManyWatched)
        );
        t.unwatch(a, &["/p0".to_string()]);
        assert_eq!(t.watch(a, ["/more".to_string()]), Ok(()));
        for id in 0..MAX_CLIENT_CHANNELS as ChannelId {
            t.may_publish(a).unwrap();
            t.add_publication(a, id, "p").unwrap();
        }
        assert_eq!(t.may_publish(a), Err(Refusal::TooManyClientChannels));
        assert_eq!(
            t.add_publication(a, 1000, "p"),
            Err(Refusal::TooManyClientChannels)
        );
        assert_eq!(t.add_publication(a, 0, "again"), Ok(()), "replaces its own");
        assert_eq!(t.publication(a, 0), Ok(&"again"));
        t.remove_publications(a, [0]);
        assert_eq!(t.publication(a, 0), Err(Refusal::NotAdvertised(0)));
        assert_eq!(
            t.add_publication(99, 0, "gone"),
            Ok(()),
            "a client gone keeps nothing"
        );
        assert_eq!(t.publication(99, 0), Err(Refusal::NotAdvertised(0)));
    }

    #[test]
    fn parameter_changes_are_seen_once_and_unwatched_ones_forgotten() {
        use udpros::xmlrpc::Value;
        let (mut t, t0) = table(4);
        let (a, _) = t.join(t0).unwrap();
        let (b, _) = t.join(t0).unwrap();
        t.watch(a, ["/gain".to_string()]).unwrap();
        t.watch(b, ["/gain".to_string(), "/mode".to_string()])
            .unwrap();
        let mut watchers = t.parameter_watchers("/gain");
        watchers.sort();
        assert_eq!(watchers, vec![a, b]);
        assert!(
            !t.remember_parameter("/gain", Some(Value::Int(1))),
            "first look"
        );
        assert!(!t.remember_parameter("/gain", Some(Value::Int(1))));
        assert!(t.remember_parameter("/gain", Some(Value::Int(2))));
        assert!(t.remember_parameter("/gain", None), "deleted");
        t.remember_parameter("/mode", None);
        t.leave(b);
        assert_eq!(t.forget_unwatched(), vec!["/mode".to_string()]);
        assert_eq!(t.watched_parameters(), ["/gain".to_string()].into());
    }

    #[test]
    fn a_failed_forward_is_said_to_its_clients_and_tried_again_by_the_next_subscription() {
        let (mut t, t0) = table(4);
        let mut listed = Vec::new();
        let ch = channel(&mut t, &mut listed, "/a");
        let (a, _) = t.join(t0).unwrap();
        let (b, _) = t.join(t0).unwrap();
        t.subscribe(a, [(1, ch)]);
        let actions = t.forward_failed(ch, "refused");
        assert_eq!(statuses(&actions), vec!["cannot subscribe to /a: refused"]);
        assert!(t.forwarded_topics().is_empty());
        let restart = t.subscribe(b, [(1, ch)]);
        assert!(matches!(restart[..], [Action::StartForward { channel, .. }] if channel == ch));
        // Link summaries are kept only for channels being forwarded.
        t.update_links(ch, LinkSummary::default());
        t.update_links(ch + 1, LinkSummary::default());
        assert_eq!(t.link_summaries().len(), 1);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Join,
        Heard(usize),
        Leave(usize),
        Subscribe(usize, Vec<(SubscriptionId, ChannelId)>),
        Unsubscribe(usize, Vec<SubscriptionId>),
        Topics(Vec<(u8, bool)>),
        ForwardFailed(ChannelId),
        Wait(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Join),
            (0..8usize).prop_map(Op::Heard),
            (0..8usize).prop_map(Op::Leave),
            (0..8usize, prop::collection::vec((0..6u32, 0..12u32), 0..6))
                .prop_map(|(c, s)| Op::Subscribe(c, s)),
            (0..8usize, prop::collection::vec(0..6u32, 0..4))
                .prop_map(|(c, s)| Op::Unsubscribe(c, s)),
            prop::collection::vec((0..10u8, any::<bool>()), 0..10).prop_map(Op::Topics),
            (0..12u32).prop_map(Op::ForwardFailed),
            (0..8000u64).prop_map(Op::Wait),
        ]
    }

    proptest! {
        /// Whatever clients and the master do, the table's two views of subscriptions
        /// agree, the forwards its actions start and stop are exactly the channels
        /// somebody wants (but for failed ones), and nothing is said to a client that
        /// has left.
        #[test]
        fn the_actions_keep_the_world_in_step_with_the_table(ops in prop::collection::vec(op(), 1..120)) {
            let (mut t, mut now) = table(3);
            t.define("a/A".into(), Some("int8 a".into()));
            t.define("a/B".into(), Some("int8 b".into()));
            let mut joined: Vec<ClientId> = Vec::new();
            let mut open: BTreeSet<ClientId> = BTreeSet::new();
            let mut running: BTreeSet<ChannelId> = BTreeSet::new();
            let mut failed: BTreeSet<ChannelId> = BTreeSet::new();
            for op in ops {
                let pick = |i: usize| joined.get(i % joined.len().max(1)).copied().unwrap_or(999);
                let actions = match op {
                    Op::Join => match t.join(now) {
                        Ok((id, actions)) => {
                            joined.push(id);
                            open.insert(id);
                            actions
                        }
                        Err(Full) => {
                            prop_assert_eq!(t.client_count(), 3);
                            Vec::new()
                        }
                    },
                    Op::Heard(i) => { t.heard(pick(i), now); Vec::new() }
                    Op::Leave(i) => t.leave(pick(i)),
                    Op::Subscribe(i, s) => t.subscribe(pick(i), s),
                    Op::Unsubscribe(i, s) => t.unsubscribe(pick(i), s),
                    Op::Topics(listed) => {
                        let listed: Vec<(String, String)> = listed
                            .iter()
                            .map(|(n, b)| (format!("/t{n}"), if *b { "a/B" } else { "a/A" }.to_string()))
                            .collect();
                        t.update_channels(&listed)
                    }
                    Op::ForwardFailed(ch) => {
                        if running.remove(&ch) {
                            failed.insert(ch);
                            t.forward_failed(ch, "no")
                        } else {
                            Vec::new()
                        }
                    }
                    Op::Wait(ms) => { now += Duration::from_millis(ms); Vec::new() }
                };
                for action in actions {
                    match action {
                        Action::Say(c, _) | Action::Forget(c, _) => prop_assert!(open.contains(&c), "{c} has left"),
                        Action::Close(c) => prop_assert!(open.remove(&c), "{c} closed twice"),
                        Action::SayAll(_) => {}
                        Action::StartForward { channel, .. } => {
                            failed.remove(&channel);
                            prop_assert!(running.insert(channel), "{channel} started twice");
                        }
                        Action::StopForward(channel) => prop_assert!(running.remove(&channel), "{channel} not running"),
                    }
                }
                prop_assert!(t.client_count() <= 3);
                prop_assert_eq!(open.iter().copied().collect::<HashSet<_>>(), t.clients.keys().copied().collect::<HashSet<_>>());
                for (id, entry) in &t.clients {
                    for (sub, ch) in &entry.subscriptions {
                        prop_assert_eq!(t.wanted.get(ch).and_then(|w| w.get(id)), Some(sub));
                        prop_assert!(t.channels.contains_key(ch));
                    }
                }
                for (ch, wanting) in &t.wanted {
                    prop_assert!(!wanting.is_empty());
                    for (client, sub) in wanting {
                        prop_assert_eq!(t.clients[client].subscriptions.get(sub), Some(ch));
                    }
                }
                let wanted: BTreeSet<ChannelId> = t.wanted.keys().copied().collect();
                let expected: BTreeSet<ChannelId> = wanted.difference(&failed).copied().collect();
                prop_assert_eq!(&running, &expected);
                prop_assert_eq!(&running, &t.forwarded.iter().copied().collect());
            }
        }
    }
}
