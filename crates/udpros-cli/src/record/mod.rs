//! `udpros record`: rosbag record's habits, over UDPROS with FEC first. Subscribers hand
//! each message to one writer thread through a queue bounded in bytes (what does not fit
//! is counted, never waited for), and the thread writes MCAP or a bag.

mod files;
mod sink;

use crate::tool_node::{waiting_tool_node, StopSignals};
use crate::topic::{parse_transports, Transports};
use clap::Args;
use files::Naming;
use regex::Regex;
use sink::{Arrival, LinkNote, Sink, SinkConfig};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use udpros::node::{FecPolicy, Node, RawSubscriber, SubscribeOptions};
use udpros::transport::Received;
use udpros_record::Compression;

#[derive(Args)]
pub struct RecordArgs {
    /// Topics to record (regular expressions with -e).
    topics: Vec<String>,
    /// Record every topic published, now and later.
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// The topics given are regular expressions, matched against whole topic names.
    #[arg(short = 'e', long = "regex")]
    regex: bool,
    /// Leave out the topics this regular expression matches (with -a or -e).
    #[arg(short = 'x', long = "exclude")]
    exclude: Option<String>,
    /// Record the topics this node subscribes to.
    #[arg(long = "node")]
    node: Option<String>,
    /// The file's name (`.mcap` or `.bag` added when it has neither).
    #[arg(short = 'O', long = "output-name", conflicts_with = "output_prefix")]
    output_name: Option<String>,
    /// A prefix to the date-and-time name (`PREFIX_2026-11-30-07-00-00.mcap`).
    #[arg(short = 'o', long = "output-prefix")]
    output_prefix: Option<String>,
    /// Write a ROS bag v2 instead of MCAP.
    #[arg(long)]
    bag: bool,
    /// Bag chunks compressed with bzip2 (`rosbag record -j`).
    #[arg(short = 'j', long = "bz2", conflicts_with = "lz4")]
    bz2: bool,
    /// Chunks compressed with LZ4.
    #[arg(long)]
    lz4: bool,
    /// MCAP chunk compression: zstd (the default), lz4 or none; bags: none (the default),
    /// bz2 or lz4.
    #[arg(long, conflicts_with_all = ["bz2", "lz4"])]
    compression: Option<String>,
    /// Stop after this many messages on each topic.
    #[arg(short = 'l', long = "limit")]
    limit: Option<u64>,
    /// Stop after this long (seconds, or with m or h: `90`, `5m`, `2h`); with --split, the
    /// length of each file.
    #[arg(long)]
    duration: Option<String>,
    /// Stop when the file reaches this many MB; with --split, the size of each file.
    #[arg(long)]
    size: Option<u64>,
    /// Start a new file (`NAME_1.mcap`, ...) at each --size or --duration.
    #[arg(long)]
    split: bool,
    /// With --split: keep this many files, removing the oldest of this recording.
    #[arg(long = "max-splits")]
    max_splits: Option<u64>,
    /// The most message bytes waiting for the disk, in MB; what comes beyond is dropped and
    /// counted (rosbag's -b).
    #[arg(short = 'b', long = "buffsize", default_value_t = 256)]
    buffsize: u64,
    /// Bag chunk size in KB (rosbag's --chunksize).
    #[arg(long = "chunksize", default_value_t = 768)]
    chunksize: u64,
    #[arg(long, default_value = "udp,tcp", value_parser = parse_transports)]
    transport: Transports,
    /// Forward error correction with udpros peers on UDPROS: `adaptive` (the default),
    /// `adaptive:TARGET`, a fixed repair ratio from 0 to 1, or `off`.
    #[arg(long, default_value_t = FecPolicy::default())]
    fec: FecPolicy,
    /// Print nothing while recording.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Leave out /udpros/link, the channel that says how each message arrived.
    #[arg(long = "no-link-channel")]
    no_link_channel: bool,
}

/// Which topics to record, as the arguments say.
enum Selection {
    /// These names, subscribed at once (before anyone publishes them, as rosbag does).
    Named(Vec<String>),
    /// Every published topic matching, found by asking the master each second.
    Matching {
        include: Option<Vec<Regex>>,
        exclude: Option<Regex>,
        node: Option<String>,
    },
}

/// A regular expression that must match a whole topic name, as rosbag's do.
fn whole(pattern: &str) -> Result<Regex, String> {
    Regex::new(&format!("^(?:{pattern})$"))
        .map_err(|e| format!("regular expression {pattern:?}: {e}"))
}

/// `90`, `90s`, `5m`, `2h`: seconds as rosbag's --duration takes them.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = match text.char_indices().last() {
        Some((i, 's')) => (&text[..i], 1.0),
        Some((i, 'm')) => (&text[..i], 60.0),
        Some((i, 'h')) => (&text[..i], 3600.0),
        _ => (text, 1.0),
    };
    let bad = || format!("--duration {text}: a number of seconds, or with m or h");
    let value: f64 = number.parse().map_err(|_| bad())?;
    Duration::try_from_secs_f64(value * unit)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(bad)
}

fn compression(args: &RecordArgs) -> Result<Compression, String> {
    let named = match (&args.compression, args.bz2, args.lz4) {
        (Some(name), _, _) => name.as_str(),
        (None, true, _) => "bz2",
        (None, _, true) => "lz4",
        (None, false, false) if args.bag => "none",
        (None, false, false) => "zstd",
    };
    match (named, args.bag) {
        ("none", _) => Ok(Compression::None),
        ("lz4", _) => Ok(Compression::Lz4),
        ("zstd", false) => Ok(Compression::Zstd),
        ("bz2", true) => Ok(Compression::Bz2),
        ("zstd", true) => Err("bags have no zstd chunks (bz2, lz4 or none)".into()),
        ("bz2", false) => Err("MCAP has no bz2 chunks (zstd, lz4 or none; --bag for bz2)".into()),
        (other, _) => Err(format!("unknown compression {other:?}")),
    }
}

/// Everything the arguments say, checked before the node starts.
struct Plan {
    selection: Selection,
    sink: SinkConfig,
    duration: Option<Duration>,
    options: SubscribeOptions,
    /// Whether each message's arrival is written on /udpros/link.
    link_channel: bool,
}

fn plan(args: RecordArgs) -> Result<Plan, String> {
    let matching = args.all || args.regex || args.node.is_some();
    if !matching && args.topics.is_empty() {
        return Err("no topics given: name some, or use -a, -e or --node".into());
    }
    if args.exclude.is_some() && !(args.all || args.regex) {
        return Err("-x excludes from -a or -e; name topics without it".into());
    }
    let selection = if matching {
        let include = if args.regex {
            Some(
                args.topics
                    .iter()
                    .map(|t| whole(t))
                    .collect::<Result<_, _>>()?,
            )
        } else if !args.topics.is_empty() {
            Some(
                args.topics
                    .iter()
                    .map(|t| whole(&regex::escape(t)))
                    .collect::<Result<_, _>>()?,
            )
        } else {
            None
        };
        Selection::Matching {
            include,
            exclude: args.exclude.as_deref().map(whole).transpose()?,
            node: args.node.clone(),
        }
    } else {
        Selection::Named(args.topics.clone())
    };
    let duration = args.duration.as_deref().map(parse_duration).transpose()?;
    if args.max_splits.is_some() && !args.split {
        return Err("--max-splits needs --split".into());
    }
    if args.split && duration.is_none() && args.size.is_none() {
        return Err("--split needs --size or --duration".into());
    }
    if args.max_splits == Some(0) {
        return Err("--max-splits 0 would keep nothing".into());
    }
    let size = args
        .size
        .map(|mb| mb.checked_mul(1 << 20).filter(|b| *b > 0))
        .map(|b| b.ok_or("--size: a number of MB above 0"))
        .transpose()?;
    let buffer = args
        .buffsize
        .checked_mul(1 << 20)
        .filter(|b| *b > 0 && *b <= 1 << 40)
        .ok_or("-b/--buffsize: a number of MB above 0")? as usize;
    let chunk = args
        .chunksize
        .checked_mul(1024)
        .filter(|b| *b > 0 && *b <= 1 << 30)
        .ok_or("--chunksize: a number of KB above 0, at most 1 GB")? as usize;
    let compression = compression(&args)?;
    let naming = Naming::new(
        args.output_name.as_deref(),
        args.output_prefix.as_deref(),
        args.bag,
        args.split,
    )?;
    Ok(Plan {
        selection,
        sink: SinkConfig {
            naming,
            bag: args.bag,
            compression,
            chunk_threshold: chunk,
            buffer_bytes: buffer,
            limit: args.limit,
            split_size: if args.split { size } else { None },
            split_duration: if args.split { duration } else { None },
            stop_size: if args.split { None } else { size },
            max_splits: args.max_splits,
            quiet: args.quiet,
        },
        duration: if args.split { None } else { duration },
        link_channel: !args.no_link_channel,
        options: SubscribeOptions {
            transports: args.transport.0.clone(),
            fec: args.fec,
            // Each subscription's own queue (before its task hands messages to the writer)
            // must not be where messages go missing: bounded by bytes, not by roscpp's 100
            // messages, which a burst of small ones fills. It holds only what arrives while
            // the task waits to run, so 16 MiB (or -b, if less) is plenty; the newest
            // message is kept whatever its size.
            queue_size: usize::MAX,
            max_queued_bytes: buffer.min(SUBSCRIPTION_QUEUE_BYTES),
            ..SubscribeOptions::default()
        },
    })
}

pub fn run(args: RecordArgs) -> crate::CliResult {
    let plan = plan(args)?;
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        // Before anything starts: a signal during the node's start still closes nothing
        // half-made, and none is lost between two waits.
        let mut stop = StopSignals::listen()?;
        let Some(node) = waiting_tool_node("udpros_record", &mut stop).await? else {
            return Ok(());
        };
        let result = record(&node, plan, &mut stop).await;
        node.shutdown().await;
        result
    })
}

async fn record(node: &Node, plan: Plan, stop: &mut StopSignals) -> crate::CliResult {
    let sink = Sink::start(plan.sink)?;
    let mut subscribed = Topics::default();
    let mut tasks = Vec::new();
    let mut subscribe = |topic: String, subscribed: &mut Topics| {
        if subscribed.admit(&topic) {
            tasks.push(tokio::spawn(subscription(
                node.clone(),
                topic,
                plan.options.clone(),
                plan.link_channel,
                sink.sender(),
            )));
        }
    };
    if let Selection::Named(topics) = &plan.selection {
        for topic in topics {
            subscribe(node.resolve_name(topic), &mut subscribed);
        }
    }
    let mut discovery = tokio::time::interval(Duration::from_secs(1));
    let deadline = plan.duration.map(|d| tokio::time::Instant::now() + d);
    let finished = sink.finished();
    loop {
        tokio::select! {
            _ = discovery.tick() => {
                if let Selection::Matching { include, exclude, node: of_node } = &plan.selection {
                    match matching_topics(node, include.as_deref(), exclude.as_ref(), of_node.as_deref()).await {
                        Ok(topics) => for topic in topics { subscribe(topic, &mut subscribed) },
                        Err(e) => eprintln!("udpros: record: asking the master: {e}"),
                    }
                }
            }
            _ = stop.stopped() => break,
            _ = async { tokio::time::sleep_until(deadline.expect("guarded")).await }, if deadline.is_some() => break,
            // A limit or a size reached, or the disk refused: the writer has ended.
            _ = finished.notified() => break,
        }
    }
    for task in &tasks {
        task.abort();
    }
    sink.stop()
}

/// The most bytes one subscription queues before its task takes them.
const SUBSCRIPTION_QUEUE_BYTES: usize = 16 << 20;

/// The most topics one recording subscribes to: a master that lists a million topics
/// (a hostile one, or a graph gone wrong) costs a subscription each only up to here.
const MAX_TOPICS: usize = 4096;

/// The topics subscribed so far, at most [`MAX_TOPICS`].
#[derive(Default)]
struct Topics {
    subscribed: HashSet<String>,
    /// Topics left out for the bound, said once.
    left_out: u64,
}

impl Topics {
    /// Whether `topic` is new and under the bound (then it counts as subscribed).
    fn admit(&mut self, topic: &str) -> bool {
        if self.subscribed.contains(topic) {
            return false;
        }
        if self.subscribed.len() >= MAX_TOPICS {
            if self.left_out == 0 {
                eprintln!(
                    "udpros: record: {MAX_TOPICS} topics recorded, the most one recording takes; {topic} and any later are left out"
                );
            }
            self.left_out += 1;
            return false;
        }
        self.subscribed.insert(topic.to_string())
    }
}

/// The published topics (or those `node` subscribes to) that the patterns take.
async fn matching_topics(
    node: &Node,
    include: Option<&[Regex]>,
    exclude: Option<&Regex>,
    of_node: Option<&str>,
) -> Result<Vec<String>, udpros::api::ApiError> {
    let candidates: Vec<String> = match of_node {
        Some(name) => {
            let name = node.resolve_name(name);
            node.master()
                .get_system_state()
                .await?
                .subscribers
                .into_iter()
                .filter(|(_, nodes)| nodes.contains(&name))
                .map(|(topic, _)| topic)
                .collect()
        }
        None => node
            .master()
            .get_published_topics("")
            .await?
            .into_iter()
            .map(|(name, _)| name)
            .collect(),
    };
    Ok(candidates
        .into_iter()
        .filter(|t| include.is_none_or(|patterns| patterns.iter().any(|p| p.is_match(t))))
        .filter(|t| !exclude.is_some_and(|x| x.is_match(t)))
        .collect())
}

/// One topic's subscriber: each message, stamped with the node's time as it arrives, to
/// the writer, with how it arrived when the link channel is on.
async fn subscription(
    node: Node,
    topic: String,
    options: SubscribeOptions,
    link_channel: bool,
    sink: sink::Sender,
) {
    let sub = match node.subscribe_raw(&topic, options).await {
        Ok(sub) => sub,
        Err(e) => {
            eprintln!("udpros: record: cannot subscribe to {topic}: {e}");
            return;
        }
    };
    let clock = node.clock();
    let topic: Arc<str> = topic.into();
    let mut links = LinkCounters::default();
    while let Some(received) = sub.recv().await {
        let now = clock.now();
        let received_ns = u64::from(now.sec) * 1_000_000_000 + u64::from(now.nsec);
        let link = link_channel.then(|| links.note(&sub, &received, received_ns));
        sink.offer(Arrival {
            topic: topic.clone(),
            publisher: received.publisher,
            body: received.body,
            received_ns,
            link,
        });
    }
}

/// Each publisher link's UDPROS counters when its previous message arrived, so that each
/// arrival says what the link lost and rebuilt since; and whether each recent publisher's
/// type starts with a Header (read once per link, not per message).
#[derive(Default)]
struct LinkCounters {
    counters: std::collections::HashMap<String, udpros::wire::udpros::UdpStats>,
    /// The last few publishers' headers (a reconnection makes a new one) and whether their
    /// type is stamped; the newest last.
    stamped: Vec<(Arc<udpros::wire::header::ConnectionHeader>, bool)>,
}

/// Publishers' headers remembered per subscription: a topic has one publisher or a few.
const STAMPED_CACHE: usize = 8;

impl LinkCounters {
    fn note(&mut self, sub: &RawSubscriber, received: &Received, received_ns: u64) -> LinkNote {
        let mut note = LinkNote {
            transport: received.protocol.ros_name(),
            age: self.age(received, received_ns),
            ..LinkNote::default()
        };
        if received.protocol == udpros::transport::Protocol::Udp {
            let link = sub.links().into_iter().find(|l| {
                l.header
                    .as_ref()
                    .is_some_and(|h| Arc::ptr_eq(h, &received.publisher))
            });
            if let Some(link) = link {
                let before = self
                    .counters
                    .insert(link.publisher_uri, link.udp)
                    .unwrap_or_default();
                note.lost = link.udp.missed.saturating_sub(before.missed);
                note.incomplete = link.udp.incomplete.saturating_sub(before.incomplete);
                note.repairs = link.udp.repairs.saturating_sub(before.repairs);
                note.rebuilt = link.udp.rebuilt.saturating_sub(before.rebuilt);
            }
        }
        note
    }

    /// Seconds from the message's own header stamp to its arrival; NaN for a type without
    /// a header.
    fn age(&mut self, received: &Received, received_ns: u64) -> f64 {
        let known = self
            .stamped
            .iter()
            .find(|(h, _)| Arc::ptr_eq(h, &received.publisher))
            .map(|(_, stamped)| *stamped);
        let stamped = known.unwrap_or_else(|| {
            let definition = received.publisher.get("message_definition").unwrap_or("");
            let stamped = crate::topic::starts_with_header(definition);
            if self.stamped.len() == STAMPED_CACHE {
                self.stamped.remove(0);
            }
            self.stamped.push((received.publisher.clone(), stamped));
            stamped
        });
        match crate::topic::header_stamp_ns(&received.body).filter(|_| stamped) {
            Some(stamp_ns) => (received_ns as f64 - stamp_ns as f64) / 1e9,
            None => f64::NAN,
        }
    }
}

#[cfg(test)]
mod tests;
