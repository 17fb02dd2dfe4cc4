//! The view's driver: it feeds the [`ViewTable`] what clients and the master say and
//! performs the table's [`Action`]s (frames to clients, sessions closed, forwards
//! started and stopped). The tasks live here: one forward per wanted channel, the graph's
//! and the clock's trackers, and the requests that wait on the master or a service.

use crate::client::Client;
use crate::client_publish::ClientPublication;
use crate::foxglove::client::{parse_binary, parse_text, BinaryRequest, Request, RequestError};
use crate::foxglove::server::{capability, ServerMessage};
use crate::foxglove::ChannelId;
use crate::links::LinkSummary;
use crate::table::{Action, ClientId, Refusal, ViewTable};
use crate::ViewOptions;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::task::JoinHandle;
use udpros::node::Node;

/// Why a client's session ends on what it sent.
#[derive(Debug)]
pub(crate) enum SessionEnd {
    /// The client left the view meanwhile (another took its place).
    Gone,
    /// A frame that is no request of the protocol.
    Garbage(RequestError),
}

impl fmt::Display for SessionEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionEnd::Gone => f.write_str("the client has left the view"),
            SessionEnd::Garbage(e) => write!(f, "not a request: {e}"),
        }
    }
}

/// The table as the hub keeps it: a client's channel is a publication in ROS.
pub(crate) type Table = ViewTable<Arc<ClientPublication>>;

/// What the hub's lock guards: the table, and the I/O that carries its state out.
struct Inner {
    table: Table,
    clients: HashMap<ClientId, Arc<Client>>,
    forwards: HashMap<ChannelId, JoinHandle<()>>,
}

pub(crate) struct Hub {
    node: Node,
    pub(crate) options: ViewOptions,
    inner: Mutex<Inner>,
}

/// A request of a client in flight; its slot is given back when it ends.
struct RequestSlot {
    hub: Arc<Hub>,
    client: ClientId,
}

impl Drop for RequestSlot {
    fn drop(&mut self) {
        self.hub.inner().table.finish_request(self.client);
    }
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
        let publishing = !options.client_topics.is_empty();
        let server_info = ServerMessage::ServerInfo {
            name: node.name().to_string(),
            capabilities: capabilities(&node, publishing),
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
                ("ROS_MASTER_URI".into(), node.master().uri().to_string()),
            ]),
            session_id: started.as_nanos().to_string(),
        };
        // A new client is sent every channel: their definitions together must fit well
        // inside its send buffer.
        let table = ViewTable::new(server_info, options.max_clients, options.send_limit / 2);
        Arc::new(Hub {
            node,
            options,
            inner: Mutex::new(Inner {
                table,
                clients: HashMap::new(),
                forwards: HashMap::new(),
            }),
        })
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `change` on the table and performs what it answers, under one lock: what the
    /// table says holds in the world before anyone looks again.
    pub(crate) fn apply(self: &Arc<Self>, change: impl FnOnce(&mut Table) -> Vec<Action>) {
        let mut inner = self.inner();
        let actions = change(&mut inner.table);
        self.perform(&mut inner, actions);
    }

    /// Reads or changes the table where the change needs nothing done.
    pub(crate) fn with_table<R>(&self, look: impl FnOnce(&mut Table) -> R) -> R {
        look(&mut self.inner().table)
    }

    /// Every client's handle, taken out of the lock.
    pub(crate) fn client_handles(&self) -> Vec<Arc<Client>> {
        self.inner().clients.values().cloned().collect()
    }

    fn perform(self: &Arc<Self>, inner: &mut Inner, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Say(client, message) => {
                    if let Some(client) = inner.clients.get(&client) {
                        client.say(&message);
                    }
                }
                Action::SayAll(message) => {
                    let text = message.to_json();
                    for client in inner.clients.values() {
                        client.say_text(text.clone());
                    }
                }
                Action::Close(client) => {
                    if let Some(client) = inner.clients.remove(&client) {
                        client.close();
                    }
                }
                Action::Forget(client, subscription) => {
                    if let Some(client) = inner.clients.get(&client) {
                        client.outbox().forget(subscription);
                    }
                }
                Action::StartForward { channel, topic } => {
                    let forward = tokio::spawn(self.clone().forward(channel, topic));
                    if let Some(old) = inner.forwards.insert(channel, forward) {
                        old.abort();
                    }
                }
                Action::StopForward(channel) => {
                    if let Some(forward) = inner.forwards.remove(&channel) {
                        forward.abort();
                    }
                }
            }
        }
    }

    pub(crate) fn node(&self) -> &Node {
        &self.node
    }

    pub(crate) fn clients(&self) -> usize {
        self.inner().table.client_count()
    }

    pub(crate) fn buffered_bytes(&self) -> usize {
        let clients: Vec<Arc<Client>> = self.inner().clients.values().cloned().collect();
        clients.iter().map(|c| c.outbox().bytes()).sum()
    }

    /// Each forwarded topic's links, by topic.
    pub(crate) fn link_summaries(&self) -> Vec<(String, LinkSummary)> {
        self.inner().table.link_summaries()
    }

    /// The advertised topics that have a publisher now, sorted.
    pub(crate) fn published_topics(&self) -> Vec<String> {
        self.inner().table.published_topics()
    }

    pub(crate) fn forwarded_topics(&self) -> Vec<String> {
        self.inner().table.forwarded_topics()
    }

    /// A new client, greeted; `None` when the view is full (see [`ViewTable::join`]).
    pub(crate) fn join(self: &Arc<Self>) -> Option<(ClientId, Arc<Client>)> {
        let mut inner = self.inner();
        let (id, actions) = inner.table.join(Instant::now()).ok()?;
        let client = Arc::new(Client::new(self.options.send_limit));
        inner.clients.insert(id, client.clone());
        self.perform(&mut inner, actions);
        Some((id, client))
    }

    /// The client sent a frame: it is not idle.
    pub(crate) fn heard(&self, client: ClientId) {
        self.inner().table.heard(client, Instant::now());
    }

    /// A client went away: its subscriptions end.
    pub(crate) fn leave(self: &Arc<Self>, client: ClientId) {
        self.apply(|table| table.leave(client));
    }

    /// Stops every forward and closes every client.
    pub(crate) fn close(self: &Arc<Self>) {
        self.apply(Table::close_all);
    }

    fn client(&self, client: ClientId) -> Result<Arc<Client>, SessionEnd> {
        self.inner()
            .clients
            .get(&client)
            .cloned()
            .ok_or(SessionEnd::Gone)
    }

    /// A text frame from `client`; `Err` ends its session.
    pub(crate) fn handle_text(
        self: &Arc<Self>,
        client: ClientId,
        text: &str,
    ) -> Result<(), SessionEnd> {
        let handle = self.client(client)?;
        let request = match parse_text(text) {
            Ok(request) => request,
            Err(RequestError::UnknownOp(op)) => {
                handle.refuse(&Refusal::UnknownOp(op));
                return Ok(());
            }
            Err(e) => return Err(SessionEnd::Garbage(e)),
        };
        let refused = match request {
            Request::Subscribe { subscriptions } => {
                let wanted = subscriptions.iter().map(|s| (s.id, s.channel_id));
                self.apply(|table| table.subscribe(client, wanted));
                Ok(())
            }
            Request::Unsubscribe { subscription_ids } => {
                self.apply(|table| table.unsubscribe(client, subscription_ids));
                Ok(())
            }
            Request::GetParameters {
                parameter_names,
                id,
            } => self.start(client, handle.clone(), Work::Get(parameter_names, id)),
            Request::SetParameters { parameters, id } => {
                self.start(client, handle.clone(), Work::Set(parameters, id))
            }
            Request::SubscribeParameterUpdates { parameter_names } => {
                self.inner().table.watch(client, parameter_names)
            }
            Request::UnsubscribeParameterUpdates { parameter_names } => {
                self.inner().table.unwatch(client, &parameter_names);
                Ok(())
            }
            Request::Advertise { .. } if self.options.client_topics.is_empty() => {
                Err(Refusal::PublishingOff)
            }
            Request::Advertise { channels } => {
                self.start(client, handle.clone(), Work::Advertise(channels))
            }
            Request::Unadvertise { channel_ids } => {
                self.inner().table.remove_publications(client, channel_ids);
                Ok(())
            }
            other => Err(Refusal::Unsupported(other.op())),
        };
        if let Err(refusal) = refused {
            handle.refuse(&refusal);
        }
        Ok(())
    }

    /// Runs a request that waits on the master on a task of its own, within the client's
    /// requests in flight.
    fn start(
        self: &Arc<Self>,
        client: ClientId,
        handle: Arc<Client>,
        work: Work,
    ) -> Result<(), Refusal> {
        let slot = self.request_slot(client)?;
        tokio::spawn(async move {
            let hub = &slot.hub;
            match work {
                Work::Get(names, id) => crate::params::get(&hub.node, &handle, names, id).await,
                Work::Set(parameters, id) => {
                    crate::params::set(&hub.node, &handle, parameters, id).await
                }
                Work::Advertise(channels) => {
                    for channel in channels {
                        hub.advertise_client_channel(client, &handle, channel).await;
                    }
                }
            }
        });
        Ok(())
    }

    fn request_slot(self: &Arc<Self>, client: ClientId) -> Result<RequestSlot, Refusal> {
        self.inner().table.start_request(client)?;
        Ok(RequestSlot {
            hub: self.clone(),
            client,
        })
    }

    async fn advertise_client_channel(
        &self,
        client: ClientId,
        handle: &Client,
        channel: crate::foxglove::client::ClientChannel,
    ) {
        let may = self.inner().table.may_publish(client);
        let added = match may {
            Err(refusal) => Err(refusal.to_string()),
            Ok(()) => {
                let topics = &self.options.client_topics;
                match ClientPublication::advertise(&self.node, topics, &channel).await {
                    Ok(publication) => {
                        let publication = Arc::new(publication);
                        let mut inner = self.inner();
                        let added = inner.table.add_publication(client, channel.id, publication);
                        added.map_err(|refusal| refusal.to_string())
                    }
                    Err(e) => Err(e),
                }
            }
        };
        if let Err(e) = added {
            handle.status(crate::foxglove::server::Level::Error, e);
        }
    }

    /// A binary frame from `client`; `Err` ends its session.
    pub(crate) fn handle_binary(
        self: &Arc<Self>,
        client: ClientId,
        frame: &[u8],
    ) -> Result<(), SessionEnd> {
        let request = parse_binary(frame).map_err(SessionEnd::Garbage)?;
        let handle = self.client(client)?;
        match request {
            BinaryRequest::MessageData { channel, payload } => {
                let publication = self.inner().table.publication(client, channel).cloned();
                let published = match publication {
                    Ok(publication) => publication.publish(payload),
                    Err(refusal) => Err(refusal.to_string()),
                };
                if let Err(e) = published {
                    handle.status(crate::foxglove::server::Level::Error, e);
                }
            }
            BinaryRequest::ServiceCallRequest {
                service,
                call,
                encoding,
                payload,
            } => {
                let Some(known) = self.inner().table.service(service).cloned() else {
                    handle.say(&ServerMessage::ServiceCallFailure {
                        service_id: service,
                        call_id: call,
                        message: format!("no service {service}"),
                    });
                    return Ok(());
                };
                let slot = match self.request_slot(client) {
                    Ok(slot) => slot,
                    Err(refusal) => {
                        handle.refuse(&refusal);
                        return Ok(());
                    }
                };
                let (encoding, request) = (encoding.to_string(), payload.to_vec());
                let max_response = self.options.send_limit / 2;
                tokio::spawn(async move {
                    let node = &slot.hub.node;
                    let (encoding, request) = (&encoding, &request);
                    crate::services::call(
                        node,
                        max_response,
                        &handle,
                        known,
                        call,
                        encoding,
                        request,
                    )
                    .await;
                });
            }
        }
        Ok(())
    }

    /// The forward of `channel`: its messages to the clients that want it, its links'
    /// summary to the table; a subscription that fails is said to them.
    async fn forward(self: Arc<Self>, channel: ChannelId, topic: String) {
        let deliver = |body| self.deliver(channel, body);
        let links = |summary| self.with_table(|table| table.update_links(channel, summary));
        let Err(e) = crate::forward::forward(&self.node, &topic, deliver, links).await else {
            return;
        };
        let mut inner = self.inner();
        // Only while this task is still the channel's forward: one stopped (and a new one
        // started) while this one was failing must not end the new one.
        let current = inner.forwards.get(&channel).map(JoinHandle::id);
        if current == Some(tokio::task::id()) {
            inner.forwards.remove(&channel);
            let actions = inner.table.forward_failed(channel, &e.to_string());
            self.perform(&mut inner, actions);
        }
    }

    fn deliver(&self, channel: ChannelId, body: Bytes) {
        let received_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let inner = self.inner();
        for (client, id) in inner.table.wanting(channel) {
            if let Some(handle) = inner.clients.get(&client) {
                handle.outbox().push_message(id, received_ns, body.clone());
                handle.wake();
            }
        }
    }
}

/// What this server offers: parameters and services always, the clock under sim time,
/// publishing only when the operator allowed topics.
fn capabilities(node: &Node, publishing: bool) -> Vec<String> {
    let mut offered = vec![
        capability::PARAMETERS,
        capability::PARAMETERS_SUBSCRIBE,
        capability::SERVICES,
    ];
    if node.clock().is_sim_time() {
        offered.push(capability::TIME);
    }
    if publishing {
        offered.push(capability::CLIENT_PUBLISH);
    }
    offered.into_iter().map(String::from).collect()
}
