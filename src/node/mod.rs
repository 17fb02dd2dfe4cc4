//! A ROS node: its identity (name, namespace, master, host, remappings, private
//! parameters), its slave API server, parameters with a subscription-backed cache, and its
//! lifecycle (shutdown on request, on Ctrl-C, or when dropped).

pub mod args;
pub mod host;
pub mod params;
mod services;
mod topics;

pub use topics::{
    AdvertiseOptions, Publisher, RawPublisher, RawSubscriber, SubscribeOptions, Subscriber,
    DEFAULT_MAX_LINKS, DEFAULT_MAX_LINKS_PER_HOST, DEFAULT_MAX_QUEUED_BYTES,
};

use crate::api::{ApiError, MasterClient, SlaveBackend, SlaveHandler, StatusReply};
use crate::msg::Time;
use crate::time::{Clock, Rate, SimTimeSource};
use crate::transport::tcp_server::TcpRosServer;
use crate::xmlrpc::{Value, XmlRpcClient, XmlRpcServer};
use args::{ArgError, NodeArgs, NodeIdentity};
use params::{FromParam, ParamCache};
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// Why a node could not start or a call failed.
#[derive(Debug)]
pub enum NodeError {
    /// A ROS argument did not parse.
    Args(ArgError),
    /// The slave API server could not bind.
    Bind(std::io::Error),
    /// A master call failed.
    Api(ApiError),
    /// The master did not answer while the node started.
    Master(String, ApiError),
    /// This node already serves a service of that name.
    ServiceExists(String),
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeError::Args(e) => write!(f, "bad node arguments: {e}"),
            NodeError::Bind(e) => write!(f, "cannot start the node's XML-RPC server: {e}"),
            NodeError::Api(e) => write!(f, "master call failed: {e}"),
            NodeError::Master(uri, e) => write!(f, "cannot reach the master at {uri}: {e}"),
            NodeError::ServiceExists(name) => {
                write!(f, "this node already advertises the service {name}")
            }
        }
    }
}

impl std::error::Error for NodeError {}

impl From<ApiError> for NodeError {
    fn from(e: ApiError) -> Self {
        NodeError::Api(e)
    }
}

/// A running node. Clones share it; it shuts down when the last clone is dropped.
#[derive(Clone)]
pub struct Node {
    pub(crate) inner: Arc<NodeInner>,
}

pub(crate) struct NodeInner {
    pub(crate) id: NodeIdentity,
    uri: OnceLock<String>,
    pub(crate) master: MasterClient,
    pub(crate) client: XmlRpcClient,
    params: ParamCache,
    slave: Mutex<Option<XmlRpcServer>>,
    tcp_server: Mutex<Option<TcpRosServer>>,
    pub(crate) tcp_port: OnceLock<u16>,
    /// Connection ids, shared by every link of this node (as roscpp shares one counter).
    pub(crate) link_ids: Arc<AtomicU32>,
    pub(crate) topics: topics::Topics,
    pub(crate) services: services::Services,
    shutdown: watch::Sender<Option<String>>,
    watchdog: Mutex<Option<tokio::task::JoinHandle<()>>>,
    rosout: Mutex<Option<RawPublisher>>,
    logger_services: Mutex<Vec<crate::service::RawServiceServer>>,
    /// Waits for SIGINT or SIGTERM (see [`NodeOptions::handle_signals`]).
    signals: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Held through [`Node::shutdown`]; true once one completed.
    shut_down: tokio::sync::Mutex<bool>,
    /// Wall or sim time, decided once at start (see [`crate::time`]).
    clock: OnceLock<Clock>,
    /// The runtime the node was made on, for work started where there is none: a publisher,
    /// subscriber or service dropped on a plain thread still unregisters.
    runtime: Option<tokio::runtime::Handle>,
}

/// What a node offers besides what the program asks for.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// Serve `~get_loggers` and `~set_logger_level`, as every roscpp and rospy node does
    /// (see [`crate::logging`]). On by default.
    pub logger_services: bool,
    /// Shut the node down cleanly on SIGINT (Ctrl-C) and SIGTERM, as roscpp's and rospy's
    /// default handlers do: everything is unregistered, udpros peers get ERR, every `recv()`
    /// returns `None` and [`Node::shutdown_requested`] completes, so a program written
    /// around them ends by itself. A second signal then ends the process once the node has
    /// unregistered (at most half a second later), a third at once. On by default;
    /// programs that handle signals themselves turn it off.
    pub handle_signals: bool,
    /// Publish the node's log on `/rosout`, as every roscpp and rospy node does. On by
    /// default; off for the node that aggregates `/rosout` (roscpp's `NoRosout`).
    pub rosout: bool,
}

impl Default for NodeOptions {
    fn default() -> NodeOptions {
        NodeOptions {
            logger_services: true,
            handle_signals: true,
            rosout: true,
        }
    }
}

impl Node {
    /// A node named `default_name` (unless `__name:=` says otherwise), configured from the
    /// process's command line and environment.
    pub async fn from_env(default_name: &str) -> Result<Node, NodeError> {
        Node::new(default_name, std::env::args().skip(1)).await
    }

    /// A node configured from `args` (ROS arguments among others) and the environment.
    pub async fn new<S: AsRef<str>>(
        default_name: &str,
        args: impl IntoIterator<Item = S>,
    ) -> Result<Node, NodeError> {
        let args = NodeArgs::parse(args).map_err(NodeError::Args)?;
        let id = NodeIdentity::from_args(default_name, &args).map_err(NodeError::Args)?;
        Node::with_identity(id).await
    }

    /// A node with an identity built by the caller.
    pub async fn with_identity(id: NodeIdentity) -> Result<Node, NodeError> {
        Node::with_options(id, NodeOptions::default()).await
    }

    /// A node with an identity built by the caller and options of its own.
    pub async fn with_options(id: NodeIdentity, options: NodeOptions) -> Result<Node, NodeError> {
        let client = XmlRpcClient::new(Duration::from_secs(2), Duration::from_secs(10));
        let master = MasterClient::new(&id.master_uri, &id.name, client.clone());
        let inner = Arc::new(NodeInner {
            id,
            uri: OnceLock::new(),
            master,
            client,
            params: ParamCache::default(),
            slave: Mutex::new(None),
            tcp_server: Mutex::new(None),
            tcp_port: OnceLock::new(),
            link_ids: Arc::new(AtomicU32::new(0)),
            topics: topics::Topics::default(),
            services: services::Services::default(),
            shutdown: watch::channel(None).0,
            watchdog: Mutex::new(None),
            rosout: Mutex::new(None),
            logger_services: Mutex::new(Vec::new()),
            signals: Mutex::new(None),
            shut_down: tokio::sync::Mutex::new(false),
            clock: OnceLock::new(),
            runtime: tokio::runtime::Handle::try_current().ok(),
        });
        let bind = inner.id.bind;
        let lookup: crate::transport::tcp_server::Lookup = Arc::new(Arc::downgrade(&inner));
        let tcp = TcpRosServer::bind(SocketAddr::new(bind, 0), lookup)
            .await
            .map_err(NodeError::Bind)?;
        let _ = inner.tcp_port.set(tcp.port());
        *lock(&inner.tcp_server) = Some(tcp);
        let backend: Arc<dyn SlaveBackend> = Arc::new(Backend(Arc::downgrade(&inner)));
        let server = XmlRpcServer::bind(
            SocketAddr::new(bind, 0),
            Arc::new(SlaveHandler::new(backend)),
        )
        .await
        .map_err(NodeError::Bind)?;
        let _ = inner.uri.set(server.uri(&inner.id.host));
        *lock(&inner.slave) = Some(server);
        let node = Node { inner };
        let unreachable = |e| NodeError::Master(node.inner.id.master_uri.clone(), e);
        for (key, value) in node.inner.id.params.clone() {
            node.inner
                .master
                .set_param(&key, value)
                .await
                .map_err(unreachable)?;
        }
        let sim_time = node
            .inner
            .master
            .get_param("/use_sim_time")
            .await
            .map_err(unreachable)?
            .is_some_and(|v| v.is_truthy());
        let sim_source = node.start_clock(sim_time);
        // A master call that fails while the node starts is a master that cannot be reached.
        let at_start = |e: NodeError| match e {
            NodeError::Api(e) => unreachable(e),
            other => other,
        };
        // Like roscpp, every node publishes its log on /rosout.
        if options.rosout {
            node.publish_log().await.map_err(at_start)?;
        }
        if let Some(source) = sim_source {
            node.follow_clock_topic(source).await.map_err(at_start)?;
        }
        if options.logger_services {
            let servers = node.advertise_logger_services().await.map_err(at_start)?;
            *lock(&node.inner.logger_services) = servers;
        }
        if options.handle_signals {
            *lock(&node.inner.signals) = Some(tokio::spawn(shut_down_on_signal(Arc::downgrade(
                &node.inner,
            ))));
        }
        // The master that just took our registrations: the watchdog's baseline, so it only
        // registers again after a restart (a new pid), never racing a quick shutdown.
        let pid = node.inner.master.get_pid().await.ok();
        *lock(&node.inner.watchdog) =
            Some(tokio::spawn(watch_master(Arc::downgrade(&node.inner), pid)));
        Ok(node)
    }

    /// Advertises `/rosout` and makes it where this process's log events go.
    async fn publish_log(&self) -> Result<(), NodeError> {
        use crate::msg::Message;
        use crate::msgs::rosgraph_msgs::Log;
        let rosout = self
            .advertise_raw(
                "/rosout",
                Log::TYPE,
                Log::MD5SUM,
                Log::DEFINITION,
                AdvertiseOptions::default(),
            )
            .await?;
        if let Some(publication) = self.inner.publication("/rosout") {
            crate::rosout::set_target(
                self.name(),
                Arc::downgrade(&publication),
                vec!["/rosout".into()],
                self.clock(),
            );
        }
        *lock(&self.inner.rosout) = Some(rosout);
        Ok(())
    }

    /// Decides the node's clock: sim time (returning the source `/clock` drives) or wall.
    fn start_clock(&self, sim_time: bool) -> Option<SimTimeSource> {
        let shutdown = self.inner.shutdown.subscribe();
        let (clock, source) = if sim_time {
            let (source, clock) = Clock::simulated();
            (clock, Some(source))
        } else {
            (Clock::wall(), None)
        };
        let _ = self.inner.clock.set(clock.until(shutdown));
        source
    }

    /// Subscribes `/clock` as roscpp and rospy do in sim time (queue 1) and sets the
    /// node's time from every message, until the node shuts down.
    async fn follow_clock_topic(&self, source: SimTimeSource) -> Result<(), NodeError> {
        use crate::msgs::rosgraph_msgs::Clock as ClockMsg;
        let options = SubscribeOptions {
            queue_size: 1,
            // A Clock is 8 bytes: a publisher of anything much larger is not a clock.
            max_message_size: 1024,
            ..SubscribeOptions::default()
        };
        let mut ticks = self.subscribe::<ClockMsg>("/clock", options).await?;
        tokio::spawn(async move {
            while let Some(tick) = ticks.recv().await {
                source.set(tick.clock);
            }
        });
        Ok(())
    }

    /// The node's clock: wall time, or sim time from `/clock` when `/use_sim_time` was
    /// true as the node started (see [`crate::time`]). Its sleeps end when the node shuts
    /// down.
    pub fn clock(&self) -> Clock {
        self.inner.clock().clone()
    }

    /// The node's ROS time now ([`Node::clock`]'s): what to stamp headers with. In sim
    /// time, zero until the first `/clock`.
    pub fn now(&self) -> Time {
        self.inner.clock().now()
    }

    /// A [`Rate`] of `hz` per second of the node's time. Its `sleep` ends with
    /// [`ClockError::Shutdown`](crate::time::ClockError::Shutdown) when the node shuts
    /// down, so a loop around it ends with the node, and reports a backward jump of sim
    /// time with [`ClockError::MovedBackwards`](crate::time::ClockError::MovedBackwards).
    pub fn rate(&self, hz: f64) -> Rate {
        self.clock().rate(hz)
    }

    /// `~get_loggers` and `~set_logger_level`, backed by [`crate::logging`]'s levels.
    async fn advertise_logger_services(
        &self,
    ) -> Result<Vec<crate::service::RawServiceServer>, NodeError> {
        use crate::msgs::roscpp::{
            GetLoggers, GetLoggersResponse, Logger, SetLoggerLevel, SetLoggerLevelResponse,
        };
        let get = self
            .advertise_service::<GetLoggers, _, _>("~get_loggers", |_| async {
                let loggers = crate::logging::loggers()
                    .into_iter()
                    .map(|(name, level)| Logger {
                        name,
                        level: level.to_string(),
                    })
                    .collect();
                Ok(GetLoggersResponse { loggers })
            })
            .await?;
        let set = self
            .advertise_service::<SetLoggerLevel, _, _>("~set_logger_level", |req| async move {
                crate::logging::set_level(&req.logger, &req.level)?;
                tracing::info!("logger {} set to {}", req.logger, req.level);
                Ok(SetLoggerLevelResponse {})
            })
            .await?;
        Ok(vec![get.into_raw(), set.into_raw()])
    }

    /// Fully qualified name (`/ns/name`).
    pub fn name(&self) -> &str {
        &self.inner.id.name
    }

    /// The node's namespace (`/` at the root).
    pub fn namespace(&self) -> &str {
        &self.inner.id.namespace
    }

    /// The slave API URI (`http://host:port/`).
    pub fn uri(&self) -> &str {
        self.inner.uri.get().map(String::as_str).unwrap_or("")
    }

    /// Who the node is: name, namespace, master, host, remappings.
    pub fn identity(&self) -> &NodeIdentity {
        &self.inner.id
    }

    /// A client of the node's master, calling as this node.
    pub fn master(&self) -> &MasterClient {
        &self.inner.master
    }

    /// Resolves a name for this node, remappings applied.
    pub fn resolve_name(&self, name: &str) -> String {
        self.inner.id.resolve_name(name)
    }

    /// A parameter, fresh from the master; `None` when unset.
    pub async fn get_param(&self, key: &str) -> Result<Option<Value>, ApiError> {
        self.inner.master.get_param(&self.resolve_name(key)).await
    }

    /// A parameter of type `T`, or `default` when unset; a value of another type is an error.
    pub async fn param<T: FromParam>(&self, key: &str, default: T) -> Result<T, ApiError> {
        let resolved = self.resolve_name(key);
        match self.inner.master.get_param(&resolved).await? {
            None => Ok(default),
            Some(v) => T::from_param(&v).ok_or_else(|| {
                ApiError::WrongType(format!(
                    "parameter {resolved} must be {}, not {}",
                    T::EXPECTED,
                    params::describe_value(&v)
                ))
            }),
        }
    }

    /// A parameter from the cache that subscribeParam keeps fresh (subscribing on first use).
    pub async fn get_param_cached(&self, key: &str) -> Result<Option<Value>, ApiError> {
        let resolved = self.resolve_name(key);
        if let Some(cached) = self.inner.params.get(&resolved) {
            return Ok(cached);
        }
        let value = self
            .inner
            .master
            .subscribe_param(&resolved, self.uri())
            .await?;
        self.inner.params.insert(&resolved, value);
        Ok(self.inner.params.get(&resolved).flatten())
    }

    /// Sets a parameter; `key` is resolved as a node name (`~key` is private).
    pub async fn set_param(&self, key: &str, value: Value) -> Result<(), ApiError> {
        let resolved = self.resolve_name(key);
        self.inner
            .master
            .set_param(&resolved, value.clone())
            .await?;
        // The master does not tell the setter of its own change.
        if self.inner.params.is_subscribed(&resolved) {
            self.inner.params.update(&resolved, value);
        }
        Ok(())
    }

    /// Whether the parameter `key` (resolved) is set.
    pub async fn has_param(&self, key: &str) -> Result<bool, ApiError> {
        self.inner.master.has_param(&self.resolve_name(key)).await
    }

    /// Deletes the parameter `key` (resolved); whether it existed.
    pub async fn delete_param(&self, key: &str) -> Result<bool, ApiError> {
        self.inner
            .master
            .delete_param(&self.resolve_name(key))
            .await
    }

    /// `searchParam` from this node's namespace upwards.
    pub async fn search_param(&self, key: &str) -> Result<Option<String>, ApiError> {
        self.inner.master.search_param(key).await
    }

    /// Completes when something asks this node to shut down, with the reason.
    pub async fn shutdown_requested(&self) -> String {
        let mut rx = self.inner.shutdown.subscribe();
        loop {
            if let Some(reason) = rx.borrow_and_update().clone() {
                return reason;
            }
            if rx.changed().await.is_err() {
                return String::new();
            }
        }
    }

    /// Whether the node shut down (by `shutdown`, the master, or `rosnode kill`).
    pub fn is_shutdown(&self) -> bool {
        self.inner.shutdown.borrow().is_some()
    }

    /// Whether the node is still running: false from the moment anything asked it to shut
    /// down (a signal, `rosnode kill`, [`Node::shutdown`]). roscpp's `ros::ok()` and
    /// rospy's `not is_shutdown()`, for `while node.ok() { ... }` loops.
    pub fn ok(&self) -> bool {
        !self.is_shutdown()
    }

    /// Runs until the node is asked to shut down (a signal, `rosnode kill`, the master, or
    /// [`Node::shutdown`] from another task), then finishes the shutdown (everything
    /// unregistered) and returns the reason: roscpp's `ros::spin()` for a node whose work
    /// happens in its subscribers' and services' tasks.
    pub async fn spin(&self) -> String {
        let reason = self.shutdown_requested().await;
        self.shutdown().await;
        reason
    }

    /// Leaves the graph: unregisters every publication and subscription (so nothing stays
    /// registered, as roscpp's shutdown does), unsubscribes cached parameters, closes
    /// every link (udpros subscribers get ERR; every `recv()` returns `None`) and stops
    /// serving. SIGINT, SIGTERM (see [`NodeOptions::handle_signals`]) and `rosnode kill`
    /// do the same.
    pub async fn shutdown(&self) {
        self.inner.shutdown.send_if_modified(|reason| {
            let first = reason.is_none();
            reason.get_or_insert_with(|| "shutdown".into());
            first
        });
        // One shutdown at a time, and once: a program's own `shutdown()` after a signal
        // waits for the one the signal started (and does it, if that one was cancelled).
        let mut done = self.inner.shut_down.lock().await;
        if *done {
            return;
        }
        // The watchdog re-registers what the master lost; it must not undo what follows.
        if let Some(watchdog) = lock(&self.inner.watchdog).take() {
            watchdog.abort();
        }
        self.unregister_everything().await;
        // Publications tell udpros subscribers (ERR) and drop their links; subscriptions
        // close their queues, so every `recv()` returns `None`.
        self.inner.publication_list().iter().for_each(|p| p.close());
        self.inner
            .subscription_list()
            .iter()
            .for_each(|s| s.close());
        self.inner
            .slave
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        *done = true;
    }
}

impl crate::transport::tcp_server::Endpoints for Weak<NodeInner> {
    fn publication(&self, topic: &str) -> Option<Arc<crate::transport::publication::Publication>> {
        self.upgrade()?.publication(topic)
    }

    fn service(&self, service: &str) -> Option<Arc<crate::service::ServicePublication>> {
        self.upgrade()?.service(service)
    }
}

/// The slave API's view of a node; weak, so the server does not keep the node alive.
struct Backend(Weak<NodeInner>);

impl SlaveBackend for Backend {
    fn name(&self) -> String {
        self.0
            .upgrade()
            .map(|n| n.id.name.clone())
            .unwrap_or_default()
    }

    fn uri(&self) -> String {
        self.0
            .upgrade()
            .and_then(|n| n.uri.get().cloned())
            .unwrap_or_default()
    }

    fn master_uri(&self) -> String {
        self.0
            .upgrade()
            .map(|n| n.id.master_uri.clone())
            .unwrap_or_default()
    }

    fn publications(&self) -> Vec<(String, String)> {
        let Some(n) = self.0.upgrade() else {
            return Vec::new();
        };
        n.publication_list()
            .iter()
            .map(|p| (p.info.topic.clone(), p.info.msg_type.clone()))
            .collect()
    }

    fn subscriptions(&self) -> Vec<(String, String)> {
        let Some(n) = self.0.upgrade() else {
            return Vec::new();
        };
        n.subscription_list()
            .iter()
            .map(|s| (s.config.topic.clone(), s.config.msg_type.clone()))
            .collect()
    }

    fn bus_stats(&self) -> Value {
        self.0
            .upgrade()
            .map_or_else(|| Value::Array(vec![]), |n| n.bus_stats())
    }

    fn bus_info(&self) -> Value {
        self.0
            .upgrade()
            .map_or_else(|| Value::Array(vec![]), |n| n.bus_info())
    }

    fn publisher_update(&self, topic: &str, publishers: Vec<String>) -> bool {
        self.0
            .upgrade()
            .is_some_and(|n| n.publisher_update(topic, publishers))
    }

    fn param_update(&self, key: &str, value: Value) -> bool {
        self.0
            .upgrade()
            .is_some_and(|n| n.params.update(key, value))
    }

    fn request_topic(
        &self,
        caller_id: &str,
        topic: &str,
        protocols: Vec<Value>,
    ) -> Pin<Box<dyn Future<Output = StatusReply> + Send>> {
        let Some(node) = self.0.upgrade() else {
            let reply = StatusReply::new(
                -1,
                format!("Not a publisher of [{topic}]"),
                Value::Array(vec![]),
            );
            return Box::pin(async move { reply });
        };
        Box::pin(node.request_topic(caller_id.to_string(), topic.to_string(), protocols))
    }

    fn shutdown(&self, reason: &str) {
        if let Some(node) = self.0.upgrade() {
            tracing::info!("shutdown requested: {reason}");
            node.shutdown.send_replace(Some(reason.to_string()));
            tokio::spawn(async move { Node { inner: node }.shutdown().await });
        }
    }
}

impl Node {
    /// Unregisters every publication, subscription, service and parameter subscription
    /// from the master, all at once and within [`UNREGISTER_BUDGET`]: a master that is
    /// gone or slow must not hold a node that is leaving (nor the process, when a second
    /// signal waits for this).
    async fn unregister_everything(&self) {
        let uri = self.uri().to_string();
        let master = &self.inner.master;
        let mut calls = tokio::task::JoinSet::new();
        for topic in lock(&self.inner.topics.publications).keys() {
            let (master, topic, uri) = (master.clone(), topic.clone(), uri.clone());
            calls.spawn(async move {
                let _ = master.unregister_publisher(&topic, &uri).await;
            });
        }
        for topic in lock(&self.inner.topics.subscriptions).keys() {
            let (master, topic, uri) = (master.clone(), topic.clone(), uri.clone());
            calls.spawn(async move {
                let _ = master.unregister_subscriber(&topic, &uri).await;
            });
        }
        for service in self.inner.service_list() {
            service.close();
            let master = master.clone();
            calls.spawn(async move {
                let _ = master
                    .unregister_service(&service.identity.service, &service.uri)
                    .await;
            });
        }
        for key in self.inner.params.keys() {
            self.inner.params.remove(&key);
            let (master, uri) = (master.clone(), uri.clone());
            calls.spawn(async move {
                let _ = master.unsubscribe_param(&key, &uri).await;
            });
        }
        let all = async { while calls.join_next().await.is_some() {} };
        if tokio::time::timeout(UNREGISTER_BUDGET, all).await.is_err() {
            tracing::warn!(
                "the master did not answer every unregistration within {UNREGISTER_BUDGET:?}"
            );
        }
    }
}

/// How long a node that shuts down waits for the master to take its unregistrations.
pub const UNREGISTER_BUDGET: Duration = Duration::from_secs(2);

/// How long a second SIGINT or SIGTERM waits for the unregistrations the first one started
/// before it ends the process (`timeout` and many kill scripts signal twice at once).
const SECOND_SIGNAL_GRACE: Duration = Duration::from_millis(500);

/// The clock of a node whose own is not decided yet.
static WALL: std::sync::LazyLock<Clock> = std::sync::LazyLock::new(Clock::wall);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits for SIGINT or SIGTERM, then shuts the node down as `rosnode kill` would. A
/// second signal ends the process (exit status 128 + the first signal's number) once the
/// unregistrations are done, or [`SECOND_SIGNAL_GRACE`] after it, for a program that does
/// not end by itself; a third ends it at once.
async fn shut_down_on_signal(node: Weak<NodeInner>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return tracing::warn!(
            "cannot watch SIGINT and SIGTERM; the node will not shut down on them"
        );
    };
    let (name, status) = tokio::select! {
        _ = interrupt.recv() => ("SIGINT", 130),
        _ = terminate.recv() => ("SIGTERM", 143),
    };
    let unregistered = Arc::new(tokio::sync::Notify::new());
    // The later signals are waited for by a task of its own: this one is aborted when the
    // node goes away, and the process must still answer them then.
    let done = unregistered.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        tokio::select! {
            _ = done.notified() => {}
            _ = tokio::time::sleep(SECOND_SIGNAL_GRACE) => {}
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        std::process::exit(status);
    });
    let Some(inner) = node.upgrade() else { return };
    tracing::info!("{name}: shutting down");
    inner.shutdown.send_replace(Some(name.to_string()));
    Node { inner }.shutdown().await;
    // notify_one keeps the permit for a second signal that comes later.
    unregistered.notify_one();
}

/// Notices a master restart (its pid changes, or it answers again after failing) and
/// registers everything again: publications, subscriptions, cached parameters, private
/// parameters from the command line. No ROS1 client library does this.
async fn watch_master(node: Weak<NodeInner>, master_pid: Option<i32>) {
    let mut known_pid: Option<i32> = master_pid;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        let Some(n) = node.upgrade() else { return };
        if n.shutdown.borrow().is_some() {
            return;
        }
        let pid = n.master.get_pid().await.ok();
        let restarted = match (known_pid, pid) {
            (Some(old), Some(new)) => old != new,
            _ => false,
        };
        if pid.is_none() {
            known_pid = None;
            continue;
        }
        let first = known_pid.is_none();
        known_pid = pid;
        if (restarted || (first && n.registered_anything())) && n.shutdown.borrow().is_none() {
            n.register_again().await;
        }
    }
}

impl NodeInner {
    /// Runs `work` on the node's runtime (or the caller's): master calls started by a drop,
    /// which may happen on any thread. Nothing runs if neither is there.
    pub(crate) fn spawn_background(
        &self,
        work: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let runtime = self
            .runtime
            .clone()
            .or_else(|| tokio::runtime::Handle::try_current().ok());
        if let Some(runtime) = runtime {
            runtime.spawn(work);
        }
    }

    /// The clock; the wall clock in the moments before it was decided.
    pub(crate) fn clock(&self) -> &Clock {
        self.clock.get().unwrap_or(&WALL)
    }

    fn registered_anything(&self) -> bool {
        !lock(&self.topics.publications).is_empty()
            || !lock(&self.topics.subscriptions).is_empty()
            || !lock(&self.services.0).is_empty()
    }

    async fn register_again(&self) {
        let uri = self.uri.get().cloned().unwrap_or_default();
        for (key, value) in self.id.params.clone() {
            let _ = self.master.set_param(&key, value).await;
        }
        for p in self.publication_list() {
            let _ = self
                .master
                .register_publisher(&p.info.topic, &p.info.msg_type, &uri)
                .await;
        }
        for s in self.subscription_list() {
            let updates_before = s.update_count();
            if let Ok(publishers) = self
                .master
                .register_subscriber(&s.config.topic, &s.config.msg_type, &uri)
                .await
            {
                s.registered(&publishers, updates_before);
            }
        }
        for key in self.params.keys() {
            if let Ok(value) = self.master.subscribe_param(&key, &uri).await {
                self.params.update(&key, value);
            }
        }
        for s in self.service_list() {
            let _ = self
                .master
                .register_service(&s.identity.service, &s.uri, &uri)
                .await;
        }
    }
}

impl Drop for NodeInner {
    /// The last handle went away without `shutdown`: close links (udpros peers get ERR) and
    /// unregister in the background, if a runtime is still there to do it.
    fn drop(&mut self) {
        let uri = self.uri.get().cloned().unwrap_or_default();
        let pubs: Vec<_> = lock(&self.topics.publications)
            .drain()
            .map(|(_, advertised)| advertised.publication)
            .collect();
        let subs: Vec<_> = lock(&self.topics.subscriptions)
            .drain()
            .map(|(_, s)| s)
            .collect();
        let services: Vec<_> = lock(&self.services.0).drain().map(|(_, s)| s).collect();
        pubs.iter().for_each(|p| p.close());
        subs.iter().for_each(|s| s.close());
        services.iter().for_each(|s| s.close());
        if let Some(w) = lock(&self.watchdog).take() {
            w.abort();
        }
        if let Some(s) = lock(&self.signals).take() {
            s.abort();
        }
        let master = self.master.clone();
        let params = self.params.keys();
        self.spawn_background(async move {
            for p in pubs {
                let _ = master.unregister_publisher(&p.info.topic, &uri).await;
            }
            for s in subs {
                let _ = master.unregister_subscriber(&s.config.topic, &uri).await;
            }
            for key in params {
                let _ = master.unsubscribe_param(&key, &uri).await;
            }
            for s in services {
                let _ = master.unregister_service(&s.identity.service, &s.uri).await;
            }
        });
    }
}
