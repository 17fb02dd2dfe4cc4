use super::CliResult;
use clap::{Args, Subcommand};
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};
use udpros::msg::dynamic::DynamicType;
use udpros::node::{AdvertiseOptions, Node, SubscribeOptions};
use udpros::transport::{Protocol, PublisherLinkStats};
use udpros::wire::header::ConnectionHeader;

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
    topic: String,
    /// `package/Type`
    msg_type: String,
    /// The message as YAML (`data: hi`, `{x: 1, y: 2}`, `[1, 2]`); all defaults when omitted.
    yaml: Option<String>,
}

/// Transport preferences: `udp`, `tcp`, `udp,tcp` or `tcp,udp`.
#[derive(Clone, Debug)]
pub struct Transports(Vec<Protocol>);

fn parse_transports(text: &str) -> Result<Transports, String> {
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
    topic: String,
}

#[derive(Args)]
pub struct HzArgs {
    #[arg(long, default_value = "udp,tcp", value_parser = parse_transports)]
    transport: Transports,
    /// Stop after this many seconds.
    #[arg(long)]
    duration: Option<f64>,
    topic: String,
}

pub fn run(cmd: TopicCommand) -> CliResult {
    // Bad values are refused before anything connects.
    if let TopicCommand::Pub(PubArgs { rate: Some(r), .. }) = &cmd {
        check_rate(*r)?;
    }
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))?;
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
            TopicCommand::Pub(args) => publish(&node, args).await,
            TopicCommand::Echo(args) => echo(&node, args).await,
            TopicCommand::List => list(&node).await,
            TopicCommand::Info { topic } => info(&node, &topic).await,
            TopicCommand::Hz(args) => hz(&node, args).await,
            TopicCommand::Bw(args) => bw(&node, args).await,
            TopicCommand::Delay(args) => delay(&node, args).await,
            TopicCommand::Type { topic } => topic_type(&node, &topic).await,
            TopicCommand::Find { msg_type } => find(&node, &msg_type).await,
        };
        node.shutdown().await;
        result
    })
}

/// An anonymous node for a tool, from the environment (ROS_MASTER_URI, ROS_IP, ...). It
/// serves no logger services, so listing services or parameters shows only the graph's
/// (rosservice list, rosparam and rosnode start no node at all).
pub async fn tool_node(prefix: &str) -> Result<Node, String> {
    anonymous_node(prefix, false).await
}

/// An anonymous node that serves `~get_loggers` and `~set_logger_level`, as the rospy node
/// that `rostopic pub`, `echo`, `hz`, `bw` and `delay` start does.
pub async fn node_with_logger_services(prefix: &str) -> Result<Node, String> {
    anonymous_node(prefix, true).await
}

async fn anonymous_node(prefix: &str, logger_services: bool) -> Result<Node, String> {
    let name = format!("{prefix}_{}", std::process::id());
    let args = udpros::node::args::NodeArgs::parse(super::ros_args()).map_err(|e| e.to_string())?;
    let id =
        udpros::node::args::NodeIdentity::from_args(&name, &args).map_err(|e| e.to_string())?;
    let options = udpros::node::NodeOptions {
        logger_services,
        ..udpros::node::NodeOptions::default()
    };
    let node = Node::with_options(id, options)
        .await
        .map_err(|e| e.to_string())?;
    node.master()
        .get_pid()
        .await
        .map_err(|e| format!("cannot reach the master at {}: {e}", node.master().uri()))?;
    Ok(node)
}

/// The node's ROS time, once it has one: in sim time, after the first `/clock` (said on
/// stderr when that takes more than a second), so nothing is stamped or offset with zero.
async fn valid_now(node: &Node) -> Result<udpros::msg::Time, String> {
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
    waited.map_err(|e| e.to_string())
}

/// The fastest `topic pub -r` publishes: a period under a microsecond is no rate a timer
/// can keep.
const MAX_PUB_RATE: f64 = 1e6;

/// A rate in Hz that `topic pub -r` can keep: positive, finite, at most [`MAX_PUB_RATE`].
fn check_rate(rate: f64) -> Result<f64, String> {
    if rate.is_finite() && rate > 0.0 && rate <= MAX_PUB_RATE {
        Ok(rate)
    } else {
        Err(format!(
            "-r/--rate must be a number of Hz above 0 and at most {MAX_PUB_RATE}, not {rate}"
        ))
    }
}

async fn publish(node: &Node, args: PubArgs) -> CliResult {
    let ty = udpros::msg::find_type(&args.msg_type)
        .map_err(|e| format!("unknown type {}: {e}", args.msg_type))?;
    let yaml = match args.yaml.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(text) if text.starts_with('{') || text.starts_with('[') => {
            Some(udpros::yaml::load(text))
        }
        // `data: hi` and `x: 1, y: 2`: a block mapping on one line.
        Some(text) => Some(udpros::yaml::load(&format!("{{{text}}}"))),
    };
    let yaml = yaml.transpose().map_err(|e| format!("message YAML: {e}"))?;
    // `now` and `header: auto` take the node's ROS time (sim time under /use_sim_time).
    let body_at = |now| {
        let value = ty
            .value_from_yaml_at(yaml.as_ref(), now)
            .map_err(|e| e.to_string())?;
        ty.encode(&value).map_err(|e| e.to_string())
    };
    let mut body = body_at(valid_now(node).await?)?;
    let definition = ty.definition().map_err(|e| e.to_string())?;
    let latch = args.latch || args.rate.is_none();
    let publisher = node
        .advertise_raw(
            &args.topic,
            ty.type_name(),
            ty.md5sum(),
            &definition,
            AdvertiseOptions {
                latch,
                ..AdvertiseOptions::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    let mut sent = 0u64;
    let period = args.rate.map(|r| Duration::from_secs_f64(1.0 / r));
    let mut tick = tokio::time::interval(period.unwrap_or(Duration::from_secs(3600)));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = node.shutdown_requested() => return Ok(()),
        }
        if period.is_some() || sent == 0 {
            if args.substitute_keywords && sent > 0 {
                body = body_at(node.now())?;
            }
            publisher.publish_body(&body);
            sent += 1;
        }
        if args.count.is_some_and(|n| sent >= n) {
            // Give subscribers a moment to take the last messages.
            tokio::time::sleep(Duration::from_millis(500)).await;
            return Ok(());
        }
    }
}

/// Decoders by the publisher's type and definition.
#[derive(Default)]
struct Decoders(HashMap<(String, String), Arc<DynamicType>>);

impl Decoders {
    fn get(&mut self, header: &ConnectionHeader) -> Result<Arc<DynamicType>, String> {
        let ty = header.get("type").unwrap_or("").to_string();
        let definition = header.get("message_definition").unwrap_or("").to_string();
        if let Some(d) = self.0.get(&(ty.clone(), definition.clone())) {
            return Ok(d.clone());
        }
        let decoder = if definition.is_empty() {
            // roscpp's UDPROS answers carry the definition; a peer without one: ask ROS.
            udpros::msg::find_type(&ty)
        } else {
            DynamicType::from_definition(&ty, &definition)
        }
        .map_err(|e| format!("cannot decode {ty}: {e}"))?;
        let decoder = Arc::new(decoder);
        self.0.insert((ty, definition), decoder.clone());
        Ok(decoder)
    }
}

async fn echo(node: &Node, args: EchoArgs) -> CliResult {
    let options = SubscribeOptions {
        transports: args.transport.0.clone(),
        ..SubscribeOptions::default()
    };
    let mut sub = node
        .subscribe_raw(&args.topic, options)
        .await
        .map_err(|e| e.to_string())?;
    let mut decoders = Decoders::default();
    let mut printed = 0u64;
    let mut out = std::io::stdout();
    // UDP losses go to stderr (stdout stays what rostopic echo prints), when they change.
    let mut failures = 0u64;
    let mut report_losses = |sub: &udpros::node::RawSubscriber| {
        let links = sub.links();
        let now = udp_failures(&links);
        if now != failures {
            failures = now;
            for line in udp_report(&links) {
                eprintln!("udpros: {line}");
            }
        }
    };
    let mut check = tokio::time::interval(Duration::from_secs(1));
    loop {
        let received = tokio::select! {
            r = sub.recv() => r,
            _ = check.tick() => {
                report_losses(&sub);
                continue;
            }
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(received) = received else {
            report_losses(&sub);
            return Ok(());
        };
        let decoder = decoders.get(&received.publisher)?;
        let mut value = match decoder.decode(&received.body) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("udpros: skipping a message that does not decode: {e}");
                continue;
            }
        };
        if args.offset {
            value.offset_times(valid_now(node).await?);
        }
        let text = if args.json {
            format!("{}\n", value.to_json())
        } else {
            format!("{}\n---\n", value.to_yaml())
        };
        if out
            .write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            return Ok(()); // the reader went away
        }
        printed += 1;
        if args.count.is_some_and(|n| printed >= n) {
            report_losses(&sub);
            return Ok(());
        }
    }
}

async fn list(node: &Node) -> CliResult {
    let state = node
        .master()
        .get_system_state()
        .await
        .map_err(|e| e.to_string())?;
    let mut topics: Vec<&String> = state
        .publishers
        .iter()
        .chain(&state.subscribers)
        .map(|(t, _)| t)
        .collect();
    topics.sort();
    topics.dedup();
    for t in topics {
        println!("{t}");
    }
    Ok(())
}

async fn info(node: &Node, topic: &str) -> CliResult {
    let topic = node.resolve_name(topic);
    let master = node.master();
    let types = master.get_topic_types().await.map_err(|e| e.to_string())?;
    let ty = types
        .iter()
        .find(|(t, _)| *t == topic)
        .map_or("<unknown>", |(_, ty)| ty.as_str());
    let state = master.get_system_state().await.map_err(|e| e.to_string())?;
    println!("Type: {ty}\n");
    let client = udpros::xmlrpc::XmlRpcClient::default();
    for (title, table) in [
        ("Publishers", &state.publishers),
        ("Subscribers", &state.subscribers),
    ] {
        let nodes = table
            .iter()
            .find(|(t, _)| *t == topic)
            .map(|(_, n)| n.clone())
            .unwrap_or_default();
        if nodes.is_empty() {
            println!("{title}: None\n");
            continue;
        }
        println!("{title}: ");
        for n in nodes {
            let uri = master.lookup_node(&n).await.unwrap_or_default();
            println!(" * {n} ({uri})");
            // Each connection of that node on this topic, with its transport.
            if let Ok(reply) = client
                .call(&uri, "getBusInfo", vec![node.name().into()])
                .await
            {
                let rows = reply
                    .as_array()
                    .and_then(|r| r.get(2))
                    .and_then(|v| v.as_array())
                    .unwrap_or(&[])
                    .to_vec();
                for row in rows.iter().filter_map(|r| r.as_array()) {
                    if row.get(4).and_then(|v| v.as_str()) == Some(topic.as_str()) {
                        let peer = row.get(1).and_then(|v| v.as_str()).unwrap_or("");
                        let transport = row.get(3).and_then(|v| v.as_str()).unwrap_or("");
                        let dir = if row.get(2).and_then(|v| v.as_str()) == Some("o") {
                            "to"
                        } else {
                            "from"
                        };
                        println!("     {transport} {dir} {peer}");
                    }
                }
            }
        }
        println!();
    }
    Ok(())
}

async fn hz(node: &Node, args: HzArgs) -> CliResult {
    sample(
        node,
        &args,
        Vec::<Instant>::new(),
        |stamps, _| {
            stamps.push(Instant::now());
            if stamps.len() > 10_000 {
                stamps.remove(0);
            }
        },
        |stamps, links| print_rate(stamps, links),
    )
    .await
}

async fn topic_type(node: &Node, topic: &str) -> CliResult {
    let topic = node.resolve_name(topic);
    let types = node
        .master()
        .get_topic_types()
        .await
        .map_err(|e| e.to_string())?;
    let (_, ty) = types
        .iter()
        .find(|(t, _)| *t == topic)
        .ok_or_else(|| format!("unknown topic {topic}"))?;
    println!("{ty}");
    Ok(())
}

async fn find(node: &Node, msg_type: &str) -> CliResult {
    let types = node
        .master()
        .get_topic_types()
        .await
        .map_err(|e| e.to_string())?;
    let mut topics: Vec<&String> = types
        .iter()
        .filter(|(_, ty)| ty == msg_type)
        .map(|(t, _)| t)
        .collect();
    topics.sort();
    for t in topics {
        println!("{t}");
    }
    Ok(())
}

/// Runs `on_message` for each message and `report` each second, until `--duration`, the
/// end of the topic, or Ctrl-C; the shared loop of `hz`, `bw` and `delay`.
async fn sample<S>(
    node: &Node,
    args: &HzArgs,
    mut state: S,
    on_message: impl Fn(&mut S, &udpros::transport::Received),
    report: impl Fn(&mut S, &[PublisherLinkStats]),
) -> CliResult {
    let options = SubscribeOptions {
        transports: args.transport.0.clone(),
        ..SubscribeOptions::default()
    };
    let mut sub = node
        .subscribe_raw(&args.topic, options)
        .await
        .map_err(|e| e.to_string())?;
    println!("subscribed to [{}]", node.resolve_name(&args.topic));
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        if args
            .duration
            .is_some_and(|d| start.elapsed().as_secs_f64() >= d)
        {
            return Ok(());
        }
        tokio::select! {
            r = sub.recv() => match r {
                Some(m) => on_message(&mut state, &m),
                None => return Ok(()),
            },
            _ = tick.tick() => report(&mut state, &sub.links()),
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

/// The last `WINDOW` values, as rostopic keeps them.
const WINDOW: usize = 100;

fn push_window<T>(v: &mut std::collections::VecDeque<T>, x: T) {
    v.push_back(x);
    if v.len() > WINDOW {
        v.pop_front();
    }
}

async fn bw(node: &Node, args: HzArgs) -> CliResult {
    sample(
        node,
        &args,
        std::collections::VecDeque::<(Instant, usize)>::new(),
        |sizes, m| push_window(sizes, (Instant::now(), m.body.len())),
        |sizes, _| {
            let (Some(first), Some(_)) = (sizes.front(), sizes.back()) else {
                return;
            };
            let n = sizes.len();
            let total: usize = sizes.iter().map(|s| s.1).sum();
            let span = Instant::now().duration_since(first.0).as_secs_f64().max(1e-9);
            let per_s = total as f64 / span;
            let mean = total as f64 / n as f64;
            let min = sizes.iter().map(|s| s.1).min().unwrap_or(0) as f64;
            let max = sizes.iter().map(|s| s.1).max().unwrap_or(0) as f64;
            let (unit, scale) = if per_s < 1000.0 {
                ("B", 1.0)
            } else if per_s < 1_000_000.0 {
                ("KB", 1000.0)
            } else {
                ("MB", 1_000_000.0)
            };
            println!(
                "average: {:.2}{unit}/s\n\tmean: {:.2}{unit} min: {:.2}{unit} max: {:.2}{unit} window: {n}",
                per_s / scale,
                mean / scale,
                min / scale,
                max / scale
            );
        },
    )
    .await
}

/// A message's `header.stamp`, when its definition starts with a Header.
fn header_stamp(m: &udpros::transport::Received) -> Option<f64> {
    let definition = m.publisher.get("message_definition")?;
    let first = definition
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))?;
    let ty = first.split_whitespace().next()?;
    if ty != "Header" && ty != "std_msgs/Header" {
        return None;
    }
    let word = |i: usize| Some(u32::from_le_bytes(m.body.get(i..i + 4)?.try_into().ok()?));
    Some(f64::from(word(4)?) + f64::from(word(8)?) * 1e-9)
}

async fn delay(node: &Node, args: HzArgs) -> CliResult {
    sample(
        node,
        &args,
        (std::collections::VecDeque::<f64>::new(), false),
        |(delays, headerless), m| match header_stamp(m) {
            // The node's ROS time, as rostopic delay uses rospy's (sim time too); none
            // before the first /clock.
            Some(stamp) if node.clock().is_valid() => {
                push_window(delays, node.now().as_secs_f64() - stamp);
            }
            Some(_) => {}
            None => *headerless = true,
        },
        |(delays, headerless), _| {
            if *headerless && delays.is_empty() {
                println!("msg does not have header");
                return;
            }
            if delays.is_empty() {
                println!("no new messages");
                return;
            }
            let n = delays.len() as f64;
            let mean = delays.iter().sum::<f64>() / n;
            let std = (delays.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n).sqrt();
            let min = delays.iter().cloned().fold(f64::INFINITY, f64::min);
            let max = delays.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            println!(
                "average delay: {mean:.3}\n\tmin: {min:.3}s max: {max:.3}s std dev: {std:.5}s window: {}",
                delays.len()
            );
        },
    )
    .await
}

/// `rostopic hz`'s report, plus UDP loss from the reassemblers' counters.
fn print_rate(stamps: &[Instant], links: &[PublisherLinkStats]) {
    if stamps.len() < 2 {
        println!("no new messages");
        return;
    }
    let deltas: Vec<f64> = stamps
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    let mean = deltas.iter().sum::<f64>() / deltas.len() as f64;
    let std = (deltas.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / deltas.len() as f64).sqrt();
    let min = deltas.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = deltas.iter().cloned().fold(0.0, f64::max);
    println!(
        "average rate: {:.3}\n\tmin: {min:.3}s max: {max:.3}s std dev: {std:.5}s window: {}",
        1.0 / mean,
        stamps.len()
    );
    for line in udp_report(links) {
        println!("\t{line}");
    }
}

/// Per UDP publisher: messages delivered, lost (gaps in message ids), and datagrams that
/// never completed a message or could not be read, from the reassemblers' counters.
fn udp_report(links: &[PublisherLinkStats]) -> Vec<String> {
    let mut lines = Vec::new();
    for link in links {
        if link.protocol == Some(Protocol::Udp) {
            let udp = link.udp;
            let total = udp.messages + udp.lost();
            let pct = if total > 0 {
                100.0 * udp.lost() as f64 / total as f64
            } else {
                0.0
            };
            lines.push(format!(
                "UDP from {}: {} delivered, {} lost ({pct:.2}%), {} incomplete, {} malformed",
                link.publisher_uri,
                udp.messages,
                udp.lost(),
                udp.incomplete,
                udp.malformed
            ));
        }
    }
    lines
}

/// Failures seen on a subscription's UDP links so far: lost, incomplete and malformed.
fn udp_failures(links: &[PublisherLinkStats]) -> u64 {
    links
        .iter()
        .map(|l| l.udp)
        .map(|u| u.lost() + u.incomplete + u.malformed)
        .sum()
}
