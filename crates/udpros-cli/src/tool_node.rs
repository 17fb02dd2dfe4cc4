//! The node a command-line tool runs as: anonymous, configured from the environment and
//! the `name:=value` arguments, and sure of its master before any command goes on.

use std::fmt;
use udpros::node::Node;

/// Why a tool's node did not start.
#[derive(Debug)]
pub enum ToolNodeError {
    /// A ROS argument did not parse.
    Args(udpros::node::args::ArgError),
    /// The node could not start.
    Start(udpros::node::NodeError),
    /// The master did not answer.
    Master {
        /// The master's URI.
        uri: String,
        /// What the call said.
        error: udpros::api::ApiError,
    },
}

impl fmt::Display for ToolNodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolNodeError::Args(e) => e.fmt(f),
            ToolNodeError::Start(e) => e.fmt(f),
            ToolNodeError::Master { uri, error } => {
                write!(f, "cannot reach the master at {uri}: {error}")
            }
        }
    }
}

impl std::error::Error for ToolNodeError {}

/// For the commands that still report failures as text.
impl From<ToolNodeError> for String {
    fn from(e: ToolNodeError) -> String {
        e.to_string()
    }
}

/// A command fails at once with no master, as rostopic does (a script that wants to wait
/// sets UDPROS_MASTER_WAIT); nodes, the view, `record` and `play` wait for it.
const AT_ONCE: udpros::node::MasterWait =
    udpros::node::MasterWait::Limit(std::time::Duration::ZERO);

/// An anonymous node for a tool, from the environment (ROS_MASTER_URI, ROS_IP, ...). It
/// serves no logger services, so listing services or parameters shows only the graph's
/// (rosservice list, rosparam and rosnode start no node at all).
pub async fn tool_node(prefix: &str) -> Result<Node, ToolNodeError> {
    anonymous_node(prefix, false, true, AT_ONCE).await
}

/// A [`tool_node`] that does not shut down on SIGINT or SIGTERM: for a command that answers
/// Ctrl-C itself before it leaves (`udpros action send` cancels its goal first).
pub async fn tool_node_keeping_signals(prefix: &str) -> Result<Node, ToolNodeError> {
    anonymous_node(prefix, false, false, AT_ONCE).await
}

/// An anonymous node that serves `~get_loggers` and `~set_logger_level`, as the rospy node
/// that `rostopic pub`, `echo`, `hz`, `bw` and `delay` start does.
pub async fn node_with_logger_services(prefix: &str) -> Result<Node, ToolNodeError> {
    anonymous_node(prefix, true, true, AT_ONCE).await
}

/// The node of a command that runs until stopped (`record`, `play`): like rosbag's, which
/// is a roscpp node, it waits for a master that is not up yet (saying so now and then;
/// `UDPROS_MASTER_WAIT` sets a limit), so that a recorder started in the same breath as
/// the master records. SIGINT or SIGTERM while it waits ends the wait: `None`, nothing
/// started.
pub async fn waiting_tool_node(
    prefix: &str,
    stop: &mut StopSignals,
) -> Result<Option<Node>, ToolNodeError> {
    tokio::select! {
        node = anonymous_node(prefix, false, false, udpros::node::MasterWait::Forever) => node.map(Some),
        _ = stop.stopped() => Ok(None),
    }
}

async fn anonymous_node(
    prefix: &str,
    logger_services: bool,
    handle_signals: bool,
    master_wait: udpros::node::MasterWait,
) -> Result<Node, ToolNodeError> {
    let name = format!("{prefix}_{}", std::process::id());
    let args =
        udpros::node::args::NodeArgs::parse(crate::ros_args()).map_err(ToolNodeError::Args)?;
    let id =
        udpros::node::args::NodeIdentity::from_args(&name, &args).map_err(ToolNodeError::Args)?;
    let options = udpros::node::NodeOptions {
        logger_services,
        handle_signals,
        master_wait,
        ..udpros::node::NodeOptions::default()
    };
    let node = Node::with_options(id, options)
        .await
        .map_err(ToolNodeError::Start)?;
    node.master()
        .get_pid()
        .await
        .map_err(|error| ToolNodeError::Master {
            uri: node.master().uri().to_string(),
            error,
        })?;
    Ok(node)
}

/// SIGINT and SIGTERM, listened for from the moment this is made: a command that closes
/// something on either (`record` its file) makes one before it starts, so that a signal
/// is never lost between two waits and never kills it half-way.
pub struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Listens for both (inside a tokio runtime).
    pub fn listen() -> Result<StopSignals, String> {
        use tokio::signal::unix::{signal, SignalKind};
        let listen =
            |kind: SignalKind| signal(kind).map_err(|e| format!("cannot watch signals: {e}"));
        Ok(StopSignals {
            interrupt: listen(SignalKind::interrupt())?,
            terminate: listen(SignalKind::terminate())?,
        })
    }

    /// Waits for either signal (one that came since the last wait counts).
    pub async fn stopped(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}
