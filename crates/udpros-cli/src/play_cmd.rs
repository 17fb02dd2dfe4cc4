//! `udpros play`: a recording (MCAP or a ROS bag) published again with its timing, as
//! `rosbag play` does: one publisher per topic, latched where the recording's publisher
//! latched, over whatever transport each subscriber asks for (UDPROS included).

use crate::tool_node::{waiting_tool_node, StopSignals};
use clap::Args;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use udpros::node::{AdvertiseOptions, Node, RawPublisher};
use udpros_record::{Connection, Item, Limits};

mod keys;
mod timeline;

use timeline::Timeline;

#[derive(Args)]
pub struct PlayArgs {
    /// The recording: MCAP or a ROS bag v2 (told apart by its first bytes).
    file: PathBuf,
    /// Print nothing while playing.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Play this many times faster (0.5: half speed).
    #[arg(short = 'r', long = "rate", default_value_t = 1.0)]
    rate: f64,
    /// Start this many seconds into the recording.
    #[arg(short = 's', long = "start", default_value_t = 0.0)]
    start: f64,
    /// Play only this many seconds of the recording.
    #[arg(short = 'u', long = "duration")]
    duration: Option<f64>,
    /// Play again from the start when it ends, until stopped.
    #[arg(short = 'l', long = "loop")]
    looped: bool,
    /// Play only these topics.
    #[arg(long, num_args = 1..)]
    topics: Vec<String>,
    /// Publish the recording's time on /clock (for nodes with /use_sim_time).
    #[arg(long)]
    clock: bool,
    /// How often /clock is published, in Hz.
    #[arg(long, default_value_t = 100.0)]
    hz: f64,
    /// Wait this many seconds after advertising each topic, for subscribers to connect.
    #[arg(short = 'd', long = "delay", default_value_t = 0.2)]
    delay: f64,
    /// Start paused. On a terminal, space pauses and resumes and `s` publishes the next
    /// message while paused, as in rosbag play.
    #[arg(long)]
    pause: bool,
}

/// The positive, finite seconds of a flag, or a one-line refusal.
fn seconds(flag: &str, value: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| format!("{flag} {value}: a number of seconds, 0 or more"))
}

pub fn run(args: PlayArgs) -> crate::CliResult {
    if !(args.rate.is_finite() && args.rate > 0.0 && args.rate <= 1e6) {
        return Err(format!("-r {}: a rate above 0", args.rate));
    }
    if !(args.hz.is_finite() && args.hz > 0.0 && args.hz <= 10_000.0) {
        return Err(format!("--hz {}: above 0, at most 10000", args.hz));
    }
    let start = seconds("-s", args.start)?;
    let duration = args.duration.map(|d| seconds("-u", d)).transpose()?;
    let delay = seconds("-d", args.delay)?;
    // The file is checked before any node starts: a wrong path is one line.
    drop(open(&args.file)?);
    // Keys, as rosbag play takes them, whenever standard input is a terminal.
    let keys = keys::Keys::start();
    if args.pause && keys.is_none() {
        return Err("--pause needs a terminal on standard input (space resumes)".into());
    }
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let mut stop = StopSignals::listen()?;
        let Some(node) = waiting_tool_node("udpros_play", &mut stop).await? else {
            return Ok(());
        };
        let plan = Plan {
            start,
            duration,
            delay,
            rate: args.rate,
            topics: args.topics.iter().map(|t| node.resolve_name(t)).collect(),
            quiet: args.quiet,
            start_paused: args.pause,
        };
        let mut keys = keys;
        let clock = if args.clock {
            Some(Clock::advertise(&node, args.hz).await?)
        } else {
            None
        };
        let mut publishers = Publishers::default();
        let result = loop {
            let played = tokio::select! {
                played = play_once(&node, &args.file, &plan, &mut publishers, clock.as_ref(), keys.as_mut()) => played,
                _ = stop.stopped() => break Ok(()),
            };
            match played {
                Err(e) => break Err(e),
                Ok(_) if !args.looped => break Ok(()),
                // A loop over nothing would spin: a recording with no message to play
                // (or none of --topics, or none after -s) plays once.
                Ok(0) => break Err(format!("-l: {} has no message to play", args.file.display())),
                Ok(_) => {}
            }
        };
        // What was published last still goes out before the node leaves.
        tokio::time::sleep(Duration::from_millis(300)).await;
        node.shutdown().await;
        result
    })
}

fn open(
    path: &std::path::Path,
) -> Result<Box<dyn Iterator<Item = Result<Item, udpros_record::RecordError>> + Send>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    udpros_record::read_recording(
        std::io::BufReader::with_capacity(1 << 20, file),
        Limits::default(),
    )
    .map_err(|e| format!("{}: {e}", path.display()))
}

struct Plan {
    start: Duration,
    duration: Option<Duration>,
    delay: Duration,
    rate: f64,
    topics: Vec<String>,
    quiet: bool,
    start_paused: bool,
}

/// A publisher per topic, kept across loops (subscribers stay connected).
#[derive(Default)]
struct Publishers(HashMap<String, (Connection, Arc<RawPublisher>)>);

impl Publishers {
    /// The publisher of `connection`'s topic, advertised on first use; `None` (said once)
    /// when an earlier connection gave the topic another type.
    async fn of(
        &mut self,
        node: &Node,
        connection: &Connection,
        delay: Duration,
    ) -> Result<Option<Arc<RawPublisher>>, String> {
        if let Some((first, publisher)) = self.0.get(&connection.topic) {
            if first.md5sum != connection.md5sum {
                return Ok(None);
            }
            return Ok(Some(publisher.clone()));
        }
        let options = AdvertiseOptions {
            latch: connection.latching,
            ..AdvertiseOptions::default()
        };
        let publisher = node
            .advertise_raw(
                &connection.topic,
                &connection.msg_type,
                &connection.md5sum,
                &connection.definition,
                options,
            )
            .await
            .map_err(|e| format!("cannot advertise {}: {e}", connection.topic))?;
        let publisher = Arc::new(publisher);
        self.0.insert(
            connection.topic.clone(),
            (connection.clone(), publisher.clone()),
        );
        tokio::time::sleep(delay).await;
        Ok(Some(publisher))
    }
}

/// The recording's time, published on /clock while playing.
struct Clock {
    /// (recording time in ns, the instant it was that time, rate): `None` until playing.
    anchor: std::sync::Arc<std::sync::Mutex<Option<(u64, Instant, f64)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Clock {
    async fn advertise(node: &Node, hz: f64) -> Result<Clock, String> {
        let info = udpros::msg::builtin("rosgraph_msgs/Clock")
            .ok_or("rosgraph_msgs/Clock is not built in")?;
        let publisher = node
            .advertise_raw(
                "/clock",
                info.type_name,
                info.md5sum,
                info.definition,
                AdvertiseOptions::default(),
            )
            .await
            .map_err(|e| format!("cannot advertise /clock: {e}"))?;
        let anchor = std::sync::Arc::new(std::sync::Mutex::new(None::<(u64, Instant, f64)>));
        let shared = anchor.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / hz));
            loop {
                tick.tick().await;
                let Some((at, since, rate)) = *shared.lock().unwrap_or_else(|e| e.into_inner())
                else {
                    continue;
                };
                let now = at + (since.elapsed().as_nanos() as f64 * rate) as u64;
                let mut body = Vec::with_capacity(8);
                body.extend_from_slice(&((now / 1_000_000_000) as u32).to_le_bytes());
                body.extend_from_slice(&((now % 1_000_000_000) as u32).to_le_bytes());
                publisher.publish_body(&body);
            }
        });
        Ok(Clock { anchor, task })
    }

    /// Publishes the recording's time as `timeline` has it from `now` on: still while it
    /// is paused.
    fn follow(&self, timeline: &Timeline, now: Instant) {
        let rate = if timeline.is_paused() {
            0.0
        } else {
            timeline.rate()
        };
        *self.anchor.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((timeline.recording_ns(now), now, rate));
    }
}

impl Drop for Clock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Plays the file once, from -s for -u, at -r.
async fn play_once(
    node: &Node,
    path: &std::path::Path,
    plan: &Plan,
    publishers: &mut Publishers,
    clock: Option<&Clock>,
    mut keys: Option<&mut keys::Keys>,
) -> Result<u64, String> {
    // The file is read on a thread of its own, a few items ahead of the player.
    let (items, mut next) = tokio::sync::mpsc::channel(64);
    let mut recording = open(path)?;
    let reader = std::thread::spawn(move || {
        for item in recording.by_ref() {
            let failed = item.is_err();
            if items.blocking_send(item).is_err() || failed {
                break;
            }
        }
    });
    let mut connections: HashMap<u32, Option<Arc<RawPublisher>>> = HashMap::new();
    // The recording's time that plays first (its first message's, or -s later), and the
    // timeline that maps the recording's times onto this machine's.
    let mut first: Option<u64> = None;
    let mut timeline: Option<Timeline> = None;
    let mut played = 0u64;
    let mut result = Ok(());
    while let Some(item) = next.recv().await {
        match item {
            Err(e) => {
                // What came before the damage was played; the damage is one line.
                result = Err(format!("{}: {e}", path.display()));
                break;
            }
            Ok(Item::Connection { id, connection }) => {
                let wanted = plan.topics.is_empty() || plan.topics.contains(&connection.topic);
                let publisher = if wanted {
                    let publisher = publishers.of(node, &connection, plan.delay).await?;
                    if publisher.is_none() {
                        eprintln!(
                            "udpros: play: {} is recorded with two types; playing the first",
                            connection.topic
                        );
                    }
                    publisher
                } else {
                    None
                };
                connections.insert(id.0, publisher);
            }
            Ok(Item::Message {
                connection,
                time_ns,
                data,
            }) => {
                let Some(Some(publisher)) = connections.get(&connection.0) else {
                    continue;
                };
                let first =
                    *first.get_or_insert(time_ns.saturating_add(plan.start.as_nanos() as u64));
                if time_ns < first {
                    continue;
                }
                let offset = Duration::from_nanos(time_ns - first);
                if plan.duration.is_some_and(|d| offset > d) {
                    break;
                }
                let timeline = timeline.get_or_insert_with(|| {
                    let timeline =
                        Timeline::new(first, Instant::now(), plan.rate, plan.start_paused);
                    if let Some(clock) = clock {
                        clock.follow(&timeline, Instant::now());
                    }
                    if plan.start_paused && !plan.quiet {
                        eprintln!(
                            "udpros: play: paused (space resumes, s publishes the next message)"
                        );
                    }
                    timeline
                });
                // Until the message is due, or stepped to while paused.
                loop {
                    let due = timeline.due(time_ns);
                    let key = async {
                        match keys.as_deref_mut() {
                            Some(keys) => keys.next().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        _ = async { tokio::time::sleep_until(due.expect("guarded")).await }, if due.is_some() => break,
                        key = key => {
                            let now = Instant::now();
                            match key {
                                keys::Key::Toggle => {
                                    timeline.toggle(now);
                                    if !plan.quiet {
                                        let state = if timeline.is_paused() { "paused (space resumes, s steps)" } else { "playing" };
                                        eprintln!("udpros: play: {state}");
                                    }
                                }
                                keys::Key::Step if timeline.is_paused() => {
                                    timeline.step_to(time_ns);
                                    break;
                                }
                                keys::Key::Step => {}
                            }
                            if let Some(clock) = clock {
                                clock.follow(timeline, now);
                            }
                        }
                    }
                }
                publisher.publish_body(&data);
                played += 1;
            }
        }
    }
    drop(next);
    let _ = tokio::task::spawn_blocking(move || reader.join()).await;
    if !plan.quiet {
        eprintln!("udpros: play: {played} messages from {}", path.display());
    }
    result.map(|()| played)
}
