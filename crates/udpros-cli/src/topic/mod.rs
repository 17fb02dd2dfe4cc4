//! `udpros topic`: rostopic's commands on udpros. One file per kind of subcommand:
//! `publish` (`pub`), `echo`, `graph` (`list`, `info`, `type`, `find`: questions to the
//! master and the nodes), `measure` (`hz`, `bw`, `delay`: a subscription sampled each
//! second).

/// Set once stdout's reader has gone (`udpros topic hz /x | head`): the loop then ends
/// and the node unregisters, where `println!` would panic and leave it registered.
pub(super) static STDOUT_GONE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Writes a line on stdout; a write that fails marks stdout gone.
pub(super) fn say_line(args: std::fmt::Arguments) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|_| out.write_all(b"\n"))
        .and_then(|_| out.flush());
    if written.is_err() {
        STDOUT_GONE.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// `println!` that never panics (see [`say_line`]).
macro_rules! say {
    () => { say_line(format_args!("")) };
    ($($arg:tt)*) => { say_line(format_args!($($arg)*)) };
}

mod echo;
mod graph;
mod measure;

pub(crate) use measure::{header_stamp_ns, starts_with_header};
mod publish;

use crate::tool_node::{node_with_logger_services, tool_node, ToolNodeError};
use clap::{Args, Subcommand};
use std::fmt;
use std::time::Duration;
use udpros::msg::dynamic::DynamicError;
use udpros::node::FecPolicy;
use udpros::node::{Node, NodeError};
use udpros::transport::Protocol;

#[derive(Subcommand)]
pub enum TopicCommand {
    /// Publish messages given as YAML (like `rostopic pub`).
    Pub(PubArgs),
    /// Print messages as YAML like `rostopic echo`, or as JSON lines.
    Echo(EchoArgs),
    /// List the topics of the graph.
    List,
    /// Type, publishers, subscribers, and each connection's transport.
    Info { topic: String },
    /// Message rate (and, over UDP, the loss seen in message ids).
    Hz(HzArgs),
    /// Bandwidth: bytes per second and message sizes (like `rostopic bw`).
    Bw(HzArgs),
    /// Age of messages on arrival, from their header stamps (like `rostopic delay`).
    Delay(HzArgs),
    /// A topic's message type.
    Type { topic: String },
    /// The topics of a message type.
    Find { msg_type: String },
}

#[derive(Args)]
pub struct PubArgs {
    /// Publish at this rate; without it, publish once and stay latched.
    #[arg(short = 'r', long = "rate", allow_negative_numbers = true)]
    rate: Option<f64>,
    /// Stop after this many messages.
    #[arg(short = 'n', long = "count")]
    count: Option<u64>,
    /// Latch the last message for late subscribers.
    #[arg(long)]
    latch: bool,
    /// With -r, take `now` and `header: auto` anew for each message (rostopic's -s), so
    /// each message carries the time it was sent.
    #[arg(short = 's', long = "substitute-keywords")]
    substitute_keywords: bool,
    /// Forward error correction with udpros peers on UDPROS: `adaptive` (the default),
    /// `adaptive:TARGET`, a fixed repair ratio from 0 to 1, or `off`.
    #[arg(long, default_value_t = FecPolicy::default())]
    fec: FecPolicy,
    /// Fixed pacing on UDPROS links to udpros subscribers on other hosts, without the link
    /// governor that paces each just under what its path carries (on by default).
    #[arg(long)]
    no_governor: bool,
    /// The most each subscriber link sends, in bytes per second (a 4 Mbit/s radio is
    /// 500000): 0, the default, is no cap.
    #[arg(
        long = "max-rate",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    max_rate: f64,
    /// The most all the links to one subscriber host send together, in bytes per second
    /// (as a node's `max_rate_per_host`): several subscribers on an operator's machine
    /// behind one radio share it. 0, the default, is no cap. (No `--urgent`: it orders a
    /// node's topics within this budget, and the tool publishes one.)
    #[arg(
        long = "max-rate-per-host",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    max_rate_per_host: f64,
    topic: String,
    /// `package/Type`
    msg_type: String,
    /// The message as YAML (`data: hi`, `{x: 1, y: 2}`, `[1, 2]`); all defaults when omitted.
    yaml: Option<String>,
}

/// Transport preferences: `udp`, `tcp`, `udp,tcp` or `tcp,udp`.
#[derive(Clone, Debug)]
pub struct Transports(pub(crate) Vec<Protocol>);

pub(crate) fn parse_transports(text: &str) -> Result<Transports, String> {
    let list: Result<Vec<Protocol>, String> = text
        .split(',')
        .map(|t| match t.trim() {
            "udp" => Ok(Protocol::Udp),
            "tcp" => Ok(Protocol::Tcp),
            other => Err(format!(
                "unknown transport '{other}' (use udp, tcp or udp,tcp)"
            )),
        })
        .collect();
    Ok(Transports(list?))
}

#[derive(Args)]
pub struct EchoArgs {
    #[arg(long, default_value = "udp,tcp", value_parser = parse_transports)]
    transport: Transports,
    /// Exit after this many messages.
    #[arg(short = 'n', long = "count")]
    count: Option<u64>,
    /// One JSON object per line instead of YAML.
    #[arg(long)]
    json: bool,
    /// Show every time field as its offset from the node's ROS time when printed (`time -
    /// now`, negative for the past), as `rostopic echo --offset`.
    #[arg(long)]
    offset: bool,
    /// Forward error correction with udpros peers on UDPROS: `adaptive` (the default),
    /// `adaptive:TARGET`, a fixed repair ratio from 0 to 1, or `off`.
    #[arg(long, default_value_t = FecPolicy::default())]
    fec: FecPolicy,
    topic: String,
}

#[derive(Args)]
pub struct HzArgs {
    #[arg(long, default_value = "udp,tcp", value_parser = parse_transports)]
    transport: Transports,
    /// Stop after this many seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Forward error correction with udpros peers on UDPROS: `adaptive` (the default),
    /// `adaptive:TARGET`, a fixed repair ratio from 0 to 1, or `off`.
    #[arg(long, default_value_t = FecPolicy::default())]
    fec: FecPolicy,
    topic: String,
}

/// Why a `topic` command failed: printed as one line.
#[derive(Debug)]
pub enum TopicError {
    /// The async runtime could not start.
    Runtime(std::io::Error),
    /// The tool's node could not start or reach the master.
    Node(ToolNodeError),
    /// A master call failed.
    Master(udpros::api::ApiError),
    /// Advertising or subscribing failed.
    Link(NodeError),
    /// The node shut down while waiting for its first `/clock`.
    Clock(udpros::time::ClockError),
    /// `-r` is not a rate a timer can keep.
    Rate(f64),
    /// `--max-rate` is not a cap a link can keep (why, from the library).
    MaxRate(String),
    /// `--max-rate-per-host` outside [`udpros::node::MAX_RATE_RANGE`] (and not 0).
    MaxRatePerHost(String),
    /// The message type is not known.
    UnknownType {
        /// `package/Type` as given.
        msg_type: String,
        /// Why it is not known.
        error: DynamicError,
    },
    /// The message YAML does not parse.
    Yaml(udpros::yaml::YamlError),
    /// The YAML does not make a message of the type.
    Message(DynamicError),
    /// A publisher's type cannot be decoded.
    Undecodable {
        /// The publisher's `type`.
        msg_type: String,
        /// Why.
        error: DynamicError,
    },
    /// The master knows no such topic.
    UnknownTopic(String),
}

impl fmt::Display for TopicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopicError::Runtime(e) => write!(f, "cannot start the runtime: {e}"),
            TopicError::Node(e) => e.fmt(f),
            TopicError::Master(e) => e.fmt(f),
            TopicError::Link(e) => e.fmt(f),
            TopicError::Clock(e) => e.fmt(f),
            TopicError::Rate(rate) => write!(
                f,
                "-r/--rate must be a number of Hz above 0 and at most {MAX_PUB_RATE}, not {rate}"
            ),
            TopicError::MaxRate(why) => write!(f, "--max-rate: {why}"),
            TopicError::MaxRatePerHost(why) => write!(f, "--max-rate-per-host: {why}"),
            TopicError::UnknownType { msg_type, error } => {
                write!(f, "unknown type {msg_type}: {error}")
            }
            TopicError::Yaml(e) => write!(f, "message YAML: {e}"),
            TopicError::Message(e) => e.fmt(f),
            TopicError::Undecodable { msg_type, error } => {
                write!(f, "cannot decode {msg_type}: {error}")
            }
            TopicError::UnknownTopic(topic) => write!(f, "unknown topic {topic}"),
        }
    }
}

impl std::error::Error for TopicError {}

impl From<udpros::api::ApiError> for TopicError {
    fn from(e: udpros::api::ApiError) -> Self {
        TopicError::Master(e)
    }
}

impl From<NodeError> for TopicError {
    fn from(e: NodeError) -> Self {
        TopicError::Link(e)
    }
}

impl From<ToolNodeError> for TopicError {
    fn from(e: ToolNodeError) -> Self {
        TopicError::Node(e)
    }
}

/// Runs one `topic` subcommand on an anonymous node of its own, shut down when it is done.
pub fn run(cmd: TopicCommand) -> Result<(), TopicError> {
    // Bad values are refused before anything connects.
    if let TopicCommand::Pub(args) = &cmd {
        if let Some(rate) = args.rate {
            check_rate(rate)?;
        }
        udpros::node::max_rate_from(args.max_rate).map_err(TopicError::MaxRate)?;
        udpros::node::max_rate_from(args.max_rate_per_host).map_err(TopicError::MaxRatePerHost)?;
    }
    let runtime = tokio::runtime::Runtime::new().map_err(TopicError::Runtime)?;
    // The commands for which rostopic starts a rospy node serve its logger services too.
    let long_running = matches!(
        cmd,
        TopicCommand::Pub(_)
            | TopicCommand::Echo(_)
            | TopicCommand::Hz(_)
            | TopicCommand::Bw(_)
            | TopicCommand::Delay(_)
    );
    runtime.block_on(async {
        let node = if long_running {
            node_with_logger_services("udpros_topic").await?
        } else {
            tool_node("udpros_topic").await?
        };
        let result = match cmd {
            TopicCommand::Pub(args) => publish::publish(&node, args).await,
            TopicCommand::Echo(args) => echo::echo(&node, args).await,
            TopicCommand::List => graph::list(&node).await,
            TopicCommand::Info { topic } => graph::info(&node, &topic).await,
            TopicCommand::Hz(args) => measure::hz(&node, args).await,
            TopicCommand::Bw(args) => measure::bw(&node, args).await,
            TopicCommand::Delay(args) => measure::delay(&node, args).await,
            TopicCommand::Type { topic } => graph::topic_type(&node, &topic).await,
            TopicCommand::Find { msg_type } => graph::find(&node, &msg_type).await,
        };
        node.shutdown().await;
        result
    })
}

/// The node's ROS time, once it has one: in sim time, after the first `/clock` (said on
/// stderr when that takes more than a second), so nothing is stamped or offset with zero.
async fn valid_now(node: &Node) -> Result<udpros::msg::Time, TopicError> {
    let clock = node.clock();
    let valid = clock.wait_for_valid();
    tokio::pin!(valid);
    let waited = tokio::select! {
        now = &mut valid => now,
        _ = tokio::time::sleep(Duration::from_secs(1)) => {
            eprintln!("udpros: /use_sim_time is true; waiting for the first /clock");
            valid.await
        }
    };
    waited.map_err(TopicError::Clock)
}

/// The fastest `topic pub -r` publishes: a period under a microsecond is no rate a timer
/// can keep.
const MAX_PUB_RATE: f64 = 1e6;

/// A rate in Hz that `topic pub -r` can keep: positive, finite, at most [`MAX_PUB_RATE`].
fn check_rate(rate: f64) -> Result<f64, TopicError> {
    if rate.is_finite() && rate > 0.0 && rate <= MAX_PUB_RATE {
        Ok(rate)
    } else {
        Err(TopicError::Rate(rate))
    }
}
