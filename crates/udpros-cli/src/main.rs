//! `udpros`: the command-line tool (ROS's `rosmsg`, and more as the library grows).

mod action_cmd;
mod bench;
mod convert_cmd;

mod demo_cmd;
mod key_cmd;
mod master_cmd;
mod msg_cmd;
mod msg_export;
mod node_cmd;
mod param_cmd;
mod ping_cmd;
mod play_cmd;
mod proxy_cmd;
mod record;
mod service_cmd;
#[cfg(test)]
mod shown_commands;
mod tool_node;
mod topic;
mod view_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use std::sync::OnceLock;

/// ROS arguments given on the command line (`__name:=`, `__ns:=`, remaps, `_param:=`),
/// taken out before the tool's own arguments are parsed, as rospy's `myargv` does.
static ROS_ARGS: OnceLock<Vec<String>> = OnceLock::new();

/// The ROS arguments of this invocation, for the tool's node.
fn ros_args() -> Vec<String> {
    ROS_ARGS.get().cloned().unwrap_or_default()
}

#[derive(Parser)]
#[command(
    name = "udpros",
    version,
    about = "ROS1 with UDPROS: tools for messages, topics, nodes, services and parameters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Benchmarks beside roscpp: `run` prints the table; `peer` is one side of a scenario.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// The whole system on embedded defaults: master, simulated sonars and autopilot, both
    /// bridge nodes, and a live view of their data over UDPROS.
    Demo(demo_cmd::DemoArgs),
    /// Message types: md5 sums, definitions, the list udpros ships (like `rosmsg`).
    #[command(subcommand)]
    Msg(msg_cmd::MsgCommand),
    /// Topics: publish, echo, list, info, rate (like `rostopic`, UDPROS-aware).
    #[command(subcommand)]
    Topic(topic::TopicCommand),
    /// Nodes: list, info, ping, kill, cleanup (like `rosnode`).
    #[command(subcommand)]
    Node(node_cmd::NodeCommand),
    /// Services: list, info, type, args, uri, find, call (like `rosservice`).
    #[command(subcommand)]
    Service(service_cmd::ServiceCommand),
    /// Parameters: get, set, list, delete, dump, load (like `rosparam`).
    #[command(subcommand)]
    Param(param_cmd::ParamCommand),
    /// Run a ROS master (rosmaster's semantics; stock ROS nodes and tools work with it).
    Master(master_cmd::MasterArgs),
    /// Ping sonars without ROS: discover Ping360s on Ethernet, record a device's log.
    #[command(subcommand)]
    Ping(ping_cmd::PingCommand),
    /// A UDP fault proxy: loss, duplication, delay and jitter per direction (user-space netem).
    Proxy(proxy_cmd::ProxyArgs),
    /// The operator's view: the console page and a Foxglove WebSocket server for the graph.
    View(view_cmd::ViewArgs),
    /// Actions: list them, send a goal and print its feedback and result.
    #[command(subcommand)]
    Action(action_cmd::ActionCommand),
    /// Record topics into MCAP or a ROS bag (like `rosbag record`, over UDPROS first).
    Record(record::RecordArgs),
    /// Publish a recording (MCAP or a ROS bag) again with its timing (like `rosbag play`).
    Play(play_cmd::PlayArgs),
    /// A Ping Viewer sensor log (`.bin`) into MCAP, each frame a `udpros/PingFrame`.
    Convert(convert_cmd::ConvertArgs),
    /// The graph key of secure links: make one, print a key file's id.
    #[command(subcommand)]
    Key(key_cmd::KeyCommand),
}

/// A failure the user should read: printed as one line, exit status 1.
type CliResult = Result<(), String>;

/// A `--flag SECONDS` value: 0 for no limit (`None`), else a duration; negative, infinite
/// and NaN values are one-line errors.
fn seconds_or_none(flag: &str, seconds: f64) -> Result<Option<std::time::Duration>, String> {
    match seconds {
        0.0 => Ok(None),
        s => std::time::Duration::try_from_secs_f64(s)
            .map(Some)
            .map_err(|_| format!("{flag} {s}: expected a number of seconds, 0 or more")),
    }
}

fn main() -> ExitCode {
    let mut argv: Vec<String> = std::env::args().collect();
    let program = if argv.is_empty() {
        Vec::new()
    } else {
        vec![argv.remove(0)]
    };
    let (ros, rest): (Vec<String>, Vec<String>) = argv.into_iter().partition(|a| a.contains(":="));
    let _ = ROS_ARGS.set(ros);
    let argv: Vec<String> = program.into_iter().chain(rest).collect();
    let cli = Cli::parse_from(argv);
    udpros::logging::init();
    let result = match cli.command {
        Command::Bench(cmd) => bench::run(cmd),
        Command::Demo(args) => demo_cmd::run(args),
        Command::Msg(cmd) => msg_cmd::run(cmd),
        Command::Master(args) => master_cmd::run(args),
        Command::Node(cmd) => node_cmd::run(cmd),
        Command::Param(cmd) => param_cmd::run(cmd),
        Command::Service(cmd) => service_cmd::run(cmd),
        Command::Topic(cmd) => topic::run(cmd).map_err(|e| e.to_string()),
        Command::Ping(cmd) => ping_cmd::run(cmd),
        Command::Proxy(args) => proxy_cmd::run(args),
        Command::View(args) => view_cmd::run(args),
        Command::Action(cmd) => action_cmd::run(cmd),
        Command::Key(cmd) => key_cmd::run(cmd),
        Command::Record(args) => record::run(args),
        Command::Play(args) => play_cmd::run(args),
        Command::Convert(args) => convert_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("udpros: {message}");
            ExitCode::FAILURE
        }
    }
}
