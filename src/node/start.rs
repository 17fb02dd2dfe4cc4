//! Making a node: its TCPROS and slave API servers, the private parameters from the
//! command line, the clock, `/rosout`, the logger services, the signal handler and the
//! master watchdog, in the order roscpp's start-up does them.

use super::args::{NodeArgs, NodeIdentity};
use super::lifecycle::{shut_down_on_signal, watch_master};
use super::master_wait::{MasterWait, MasterWaiting, Next, Say, MASTER_WAIT_VAR};
use super::params::ParamCache;
use super::slave::Backend;
use super::{lock, AdvertiseOptions, Node, NodeError, NodeInner, SubscribeOptions};
use crate::api::ApiError;
use crate::api::{MasterClient, SlaveBackend, SlaveHandler};
use crate::time::{Clock, SimTimeSource};
use crate::transport::tcp_server::TcpRosServer;
use crate::xmlrpc::{XmlRpcClient, XmlRpcServer};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;

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
    /// unregistered (at most half a second later), a third at once. A signal while the
    /// node is still starting ends the process (status 128 + the signal's number) once
    /// what it had registered is unregistered: the program has no node yet to end by.
    /// On by default; programs that handle signals themselves turn it off.
    pub handle_signals: bool,
    /// Publish the node's log on `/rosout`, as every roscpp and rospy node does. On by
    /// default; off for the node that aggregates `/rosout` (roscpp's `NoRosout`).
    pub rosout: bool,
    /// How long the node waits at start for a master that does not answer yet, saying so
    /// every few seconds: for ever by default, as roscpp and rospy do (a node started
    /// before its master, by systemd or a launch, comes up when the master does). The
    /// environment's `UDPROS_MASTER_WAIT` (seconds, or `forever`) overrides it.
    pub master_wait: MasterWait,
    /// The most the node's publications send to one subscriber host together, in bytes
    /// per second: for a radio or tether you know is narrow, that every topic crosses.
    /// All of the node's links to a host (TCPROS and UDPROS, udpros and roscpp/rospy
    /// subscribers alike) take from one budget (see [`crate::wire::host_budget`]); each
    /// link alone is also held to it as to [`AdvertiseOptions::max_rate`] (whole messages,
    /// the newest first). Within the budget, messages of topics marked
    /// [`AdvertiseOptions::urgent`], and every message that fits one datagram, go before
    /// any bulk datagram of the node's other links. `None` (the default): no shared cap;
    /// check a user's figure with [`max_rate_from`](super::max_rate_from). A node that
    /// learns it from a parameter sets it with
    /// [`Node::set_max_rate_per_host`](super::Node::set_max_rate_per_host).
    ///
    /// [`AdvertiseOptions::max_rate`]: super::AdvertiseOptions::max_rate
    /// [`AdvertiseOptions::urgent`]: super::AdvertiseOptions::urgent
    pub max_rate_per_host: Option<f64>,
    /// How the node secures its links with udpros peers that hold the graph key (see
    /// [`crate::secure`]). `None` (the default): from the node's command line
    /// (`__key_file:=`, `__security:=`, `__secure_mode:=`) over the environment
    /// (`UDPROS_KEY_FILE`, `UDPROS_SECURITY`, `UDPROS_SECURE_MODE`); with no key file
    /// named in either, security is off, as in ROS1.
    pub security: Option<crate::secure::Security>,
}

impl Default for NodeOptions {
    fn default() -> NodeOptions {
        NodeOptions {
            logger_services: true,
            handle_signals: true,
            rosout: true,
            master_wait: MasterWait::Forever,
            max_rate_per_host: None,
            security: None,
        }
    }
}

/// Asks the master for its pid until it answers, as [`MasterWaiting`] says; the last
/// failure if the wait's limit passed. A master that answers with an error is there: what
/// is wrong with it is for the calls that follow to say.
async fn wait_for_master(master: &MasterClient, limit: MasterWait) -> Result<(), ApiError> {
    use crate::xmlrpc::CallError;
    let mut waiting = MasterWaiting::new(limit);
    loop {
        let error = match master.get_pid().await {
            Err(
                e @ ApiError::Call(
                    CallError::Transport(_) | CallError::Timeout | CallError::OutOfDescriptors,
                ),
            ) => e,
            _ => break,
        };
        match waiting.failed(Instant::now()) {
            Next::GiveUp => return Err(error),
            Next::Retry { at, say } => {
                let uri = master.uri();
                match say {
                    Some(Say::Waiting) => tracing::warn!(
                        "no master answers at {uri} ({error}): waiting for it ({MASTER_WAIT_VAR} sets a limit)"
                    ),
                    Some(Say::Still(waited)) => tracing::warn!(
                        "still waiting for the master at {uri} ({} s)",
                        waited.as_secs()
                    ),
                    None => {}
                }
                tokio::time::sleep_until(at.into()).await;
            }
        }
    }
    let waited = waiting.waited(Instant::now());
    if !waited.is_zero() {
        tracing::warn!(
            "the master at {} answered after {:.1} s: starting",
            master.uri(),
            waited.as_secs_f64()
        );
    }
    Ok(())
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
        let master_wait = MasterWait::from_env_or(options.master_wait)
            .map_err(|e| NodeError::Args(super::args::ArgError(e)))?;
        let security = match options.security.clone() {
            Some(security) => security,
            None => crate::secure::Security::from_args_and_env(&id.security)
                .map_err(NodeError::Security)?,
        };
        if let Some(key) = security.active_key() {
            tracing::info!(
                "secure links: policy {}, mode {}, graph key {}",
                security.policy,
                security.mode,
                key.id()
            );
        }
        let client =
            XmlRpcClient::new(Duration::from_secs(2), Duration::from_secs(10)).signed(&security);
        let guard = crate::xmlrpc::CallGuard::new(&security);
        let master = MasterClient::new(&id.master_uri, &id.name, client.clone());
        let inner = Arc::new(NodeInner {
            id,
            security,
            uri: OnceLock::new(),
            master,
            client,
            params: ParamCache::default(),
            slave: Mutex::new(None),
            tcp_server: Mutex::new(None),
            tcp_port: OnceLock::new(),
            link_ids: Arc::new(AtomicU32::new(0)),
            host_budgets: {
                let budgets = crate::transport::host_share::HostBudgets::default();
                budgets.set_rate(options.max_rate_per_host);
                Arc::new(budgets)
            },
            topics: super::topics::Topics::default(),
            services: super::services::Services::default(),
            in_flight: Arc::default(),
            registering: Default::default(),
            shutdown: watch::channel(None).0,
            watchdog: Mutex::new(None),
            rosout: Mutex::new(None),
            logger_services: Mutex::new(Vec::new()),
            signals: Mutex::new(None),
            started: Default::default(),
            signalled: Default::default(),
            shut_down: tokio::sync::Mutex::new(false),
            before_shutdown: Mutex::new(Vec::new()),
            clock: OnceLock::new(),
            runtime: tokio::runtime::Handle::try_current().ok(),
        });
        // Watched from the start: a Ctrl-C while the node registers must unregister what
        // it registered, and the default action (before a handler) would leave it all.
        if options.handle_signals {
            *lock(&inner.signals) = Some(tokio::spawn(shut_down_on_signal(Arc::downgrade(&inner))));
        }
        let bind = inner.id.bind;
        let lookup: crate::transport::tcp_server::Lookup = Arc::new(Arc::downgrade(&inner));
        let tcp = TcpRosServer::bind(SocketAddr::new(bind, 0), lookup)
            .await
            .map_err(NodeError::Bind)?;
        let _ = inner.tcp_port.set(tcp.port());
        *lock(&inner.tcp_server) = Some(tcp);
        let backend: Arc<dyn SlaveBackend> = Arc::new(Backend(Arc::downgrade(&inner)));
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(bind, 0))
            .await
            .map_err(NodeError::Bind)?;
        let server = XmlRpcServer::serve_guarded(
            listener,
            Arc::new(SlaveHandler::new(backend)),
            Default::default(),
            guard,
        )
        .map_err(NodeError::Bind)?;
        let _ = inner.uri.set(server.uri(&inner.id.host));
        *lock(&inner.slave) = Some(server);
        let node = Node { inner };
        match node.start(options, master_wait).await {
            Ok(()) => {
                node.inner.started.store(true, Ordering::Release);
                Ok(node)
            }
            // The start failed because a signal shut the node down: the signal's task
            // ends the process once everything is unregistered (within the budget).
            Err(_) if node.inner.signalled.load(Ordering::Acquire) => std::future::pending().await,
            Err(e) => Err(e),
        }
    }

    /// Registers what every node has (parameters from the command line, /rosout, the
    /// logger services, /clock in sim time) once the master answers.
    async fn start(&self, options: NodeOptions, master_wait: MasterWait) -> Result<(), NodeError> {
        let node = self;
        let unreachable = |e| NodeError::Master(node.inner.id.master_uri.clone(), e);
        wait_for_master(&node.inner.master, master_wait)
            .await
            .map_err(unreachable)?;
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
        *lock(&node.inner.watchdog) = Some(tokio::spawn(watch_master(Arc::downgrade(&node.inner))));
        Ok(())
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

    /// `~get_loggers` and `~set_logger_level`, backed by [`crate::logging`]'s levels.
    async fn advertise_logger_services(&self) -> Result<Vec<super::RawServiceServer>, NodeError> {
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
                crate::logging::set_level(&req.logger, &req.level).map_err(|e| e.to_string())?;
                tracing::info!("logger {} set to {}", req.logger, req.level);
                Ok(SetLoggerLevelResponse {})
            })
            .await?;
        Ok(vec![get.into_raw(), set.into_raw()])
    }
}
