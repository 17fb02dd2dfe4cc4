//! A ROS node: its identity (name, namespace, master, host, remappings, private
//! parameters), its slave API server, parameters with a subscription-backed cache, and its
//! lifecycle (shutdown on request, on Ctrl-C, or when dropped).
//!
//! By role: `start` makes a node (servers, clock, `/rosout`, logger services, the master
//! watchdog), `lifecycle` ends it (shutdown, signals, a master restart, `Drop`), `registry`
//! is the one list of what it holds registered with the master, `slave` answers the slave
//! API (requestTopic, bus statistics), `topics` and `handles` publish and subscribe,
//! `services` and `params` are the rest of what a node offers.

pub mod args;
mod handles;
mod lifecycle;
pub mod master_wait;
pub mod params;
pub(crate) mod registry;
pub mod sent_path;
pub(crate) mod services;
mod slave;
mod start;
mod topics;

pub use crate::wire::udpros::fec::{FecPolicy, RepairRatio};
pub use handles::{Publisher, RawPublisher, RawSubscriber, Subscriber};
pub use master_wait::MasterWait;
pub use sent_path::{SentPath, SentPaths};
pub use services::{RawServiceServer, ServiceServer};
pub use start::NodeOptions;
pub use topics::{
    max_rate_from, AdvertiseOptions, SubscribeOptions, DEFAULT_MAX_LINKS,
    DEFAULT_MAX_LINKS_PER_HOST, DEFAULT_MAX_QUEUED_BYTES, MAX_RATE_RANGE,
};

use crate::api::{ApiError, MasterClient};
use crate::msg::Time;
use crate::time::{Clock, Rate};
use crate::transport::tcp_server::TcpRosServer;
use crate::xmlrpc::{XmlRpcClient, XmlRpcServer};
use args::{ArgError, NodeIdentity};
use params::ParamCache;
use std::fmt;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, OnceLock};
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
    /// This node already publishes the topic with another type: topic, its type, the
    /// type asked for.
    TypeMismatch(String, String, String),
    /// The node's security settings cannot be used (a key file others may read, a
    /// policy that needs a key and has none).
    Security(crate::secure::SecurityError),
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeError::Args(e) => write!(f, "bad node arguments: {e}"),
            NodeError::Bind(e) => write!(f, "cannot start the node's XML-RPC server: {e}"),
            NodeError::Api(e) => write!(f, "master call failed: {e}"),
            // Reached, and it said no (a refusal, a bad argument): not "cannot reach".
            NodeError::Master(uri, e @ (ApiError::Status { .. } | ApiError::Shape(_))) => {
                write!(f, "the master at {uri} refused: {e}")
            }
            NodeError::Master(uri, e) => write!(f, "cannot reach the master at {uri}: {e}"),
            NodeError::ServiceExists(name) => {
                write!(f, "this node already advertises the service {name}")
            }
            NodeError::TypeMismatch(topic, published, asked) => write!(
                f,
                "this node publishes {topic} as {published}; it cannot advertise it as {asked}"
            ),
            NodeError::Security(e) => write!(f, "security: {e}"),
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

/// A node that may be gone, for what must not keep it alive (a service client, a
/// reconfigure server): the layers above the node reach it through this, never through
/// its inside.
#[derive(Clone)]
pub(crate) struct WeakNode(std::sync::Weak<NodeInner>);

impl WeakNode {
    /// The node's master client, unless the node is gone.
    pub(crate) fn master(&self) -> Option<MasterClient> {
        self.0.upgrade().map(|node| node.master.clone())
    }

    /// How the node secures its links, unless the node is gone.
    pub(crate) fn security(&self) -> Option<crate::secure::Security> {
        self.0.upgrade().map(|node| node.security.clone())
    }
}

pub(crate) struct NodeInner {
    pub(crate) id: NodeIdentity,
    /// How the node secures its links (see [`NodeOptions::security`]).
    pub(crate) security: crate::secure::Security,
    uri: OnceLock<String>,
    pub(crate) master: MasterClient,
    pub(crate) client: XmlRpcClient,
    params: ParamCache,
    slave: Mutex<Option<XmlRpcServer>>,
    tcp_server: Mutex<Option<TcpRosServer>>,
    pub(crate) tcp_port: OnceLock<u16>,
    /// Connection ids, shared by every link of this node (as roscpp shares one counter).
    pub(crate) link_ids: Arc<AtomicU32>,
    /// One budget per subscriber host (see [`NodeOptions::max_rate_per_host`]).
    pub(crate) host_budgets: Arc<crate::transport::host_share::HostBudgets>,
    pub(crate) topics: topics::Topics,
    pub(crate) services: services::Services,
    /// Single unregistrations not yet done, which a new registration of the name awaits.
    pub(crate) in_flight: Arc<registry::InFlight>,
    /// Registrations not yet answered, which a shutdown waits for.
    pub(crate) registering: registry::Registering,
    shutdown: watch::Sender<Option<String>>,
    watchdog: Mutex<Option<tokio::task::JoinHandle<()>>>,
    rosout: Mutex<Option<RawPublisher>>,
    logger_services: Mutex<Vec<RawServiceServer>>,
    /// Waits for SIGINT or SIGTERM (see [`NodeOptions::handle_signals`]).
    signals: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Set once the node has started (the program has it); a signal before that ends the
    /// process once it has unregistered, as the signal's default action would have.
    started: std::sync::atomic::AtomicBool,
    /// Set as a signal begins the shutdown.
    signalled: std::sync::atomic::AtomicBool,
    /// Held through [`Node::shutdown`]; true once one completed.
    shut_down: tokio::sync::Mutex<bool>,
    /// Run as a shutdown begins, before anything is unregistered or closed: what must
    /// still go out on the node's publications (an action server's last results).
    before_shutdown: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
    /// Wall or sim time, decided once at start (see [`crate::time`]).
    clock: OnceLock<Clock>,
    /// The runtime the node was made on, for work started where there is none: a publisher,
    /// subscriber or service dropped on a plain thread still unregisters.
    runtime: Option<tokio::runtime::Handle>,
}

impl Node {
    /// This node, without keeping it alive.
    pub(crate) fn downgrade(&self) -> WeakNode {
        WeakNode(Arc::downgrade(&self.inner))
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

    /// Sets [`NodeOptions::max_rate_per_host`] (bytes per second; `None` for no shared
    /// cap) for the subscriber links made from now on: a node that reads the figure from a
    /// parameter (a bridge's `~max_rate_per_host`) sets it before it advertises. Links
    /// already open keep what they had.
    pub fn set_max_rate_per_host(&self, rate: Option<f64>) {
        self.inner.host_budgets.set_rate(rate);
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
}

/// How long a node that shuts down waits for the master to take its unregistrations.
pub const UNREGISTER_BUDGET: Duration = Duration::from_secs(2);

/// The clock of a node whose own is not decided yet.
static WALL: std::sync::LazyLock<Clock> = std::sync::LazyLock::new(Clock::wall);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
}
