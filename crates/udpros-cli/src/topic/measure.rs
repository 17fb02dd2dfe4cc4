//! `topic hz`, `bw` and `delay`: one subscription sampled each second, and the UDP loss
//! report that `echo` shares.

use super::{say_line, STDOUT_GONE};
use super::{HzArgs, TopicError};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use udpros::node::{Node, SentPaths, SubscribeOptions};
use udpros::transport::{Protocol, PublisherLinkStats};

pub(super) async fn hz(node: &Node, args: HzArgs) -> Result<(), TopicError> {
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

/// Runs `on_message` for each message and `report` each second, until `--duration`, the
/// end of the topic, or Ctrl-C; the shared loop of `hz`, `bw` and `delay`.
async fn sample<S>(
    node: &Node,
    args: &HzArgs,
    mut state: S,
    on_message: impl Fn(&mut S, &udpros::transport::Received),
    report: impl Fn(&mut S, &[PublisherLinkStats]),
) -> Result<(), TopicError> {
    let options = SubscribeOptions {
        transports: args.transport.0.clone(),
        fec: args.fec,
        ..SubscribeOptions::default()
    };
    let sub = node.subscribe_raw(&args.topic, options).await?;
    say!("subscribed to [{}]", node.resolve_name(&args.topic));
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let paths = SentPaths::default();
    let topic = node.resolve_name(&args.topic);
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
            _ = tick.tick() => {
                let links = sub.links();
                report(&mut state, &links);
                for (uri, path) in paths.known(&links) {
                    say!("\tpath from {uri} (the publisher's view): {}", path.summary());
                }
                paths.refresh(node, &topic, &links);
            }
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
        if STDOUT_GONE.load(Ordering::Relaxed) {
            return Ok(());
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

pub(super) async fn bw(node: &Node, args: HzArgs) -> Result<(), TopicError> {
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
            say!(
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

/// A message's `header.stamp` in seconds, when its definition starts with a Header.
fn header_stamp(m: &udpros::transport::Received) -> Option<f64> {
    let definition = m.publisher.get("message_definition")?;
    if !starts_with_header(definition) {
        return None;
    }
    header_stamp_ns(&m.body).map(|ns| ns as f64 * 1e-9)
}

/// Whether a message definition's first field is `Header header` (or
/// `std_msgs/Header header`), as a stamped message's is; comments and blank lines before
/// it do not count.
pub(crate) fn starts_with_header(definition: &str) -> bool {
    let first_field = definition
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .find(|l| !l.is_empty());
    first_field.is_some_and(|f| {
        let mut words = f.split_whitespace();
        matches!(words.next(), Some("Header" | "std_msgs/Header")) && words.next() == Some("header")
    })
}

/// The `header.stamp` (ns since the epoch) of a serialized message that starts with a
/// Header: the two u32 after its `seq`; `None` for a body too short to hold them.
pub(crate) fn header_stamp_ns(body: &[u8]) -> Option<u64> {
    let word = |i: usize| Some(u32::from_le_bytes(body.get(i..i + 4)?.try_into().ok()?));
    Some(u64::from(word(4)?) * 1_000_000_000 + u64::from(word(8)?))
}

pub(super) async fn delay(node: &Node, args: HzArgs) -> Result<(), TopicError> {
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
                say!("msg does not have header");
                return;
            }
            if delays.is_empty() {
                say!("no new messages");
                return;
            }
            let n = delays.len() as f64;
            let mean = delays.iter().sum::<f64>() / n;
            let std = (delays.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n).sqrt();
            let min = delays.iter().cloned().fold(f64::INFINITY, f64::min);
            let max = delays.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            say!(
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
        say!("no new messages");
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
    say!(
        "average rate: {:.3}\n\tmin: {min:.3}s max: {max:.3}s std dev: {std:.5}s window: {}",
        1.0 / mean,
        stamps.len()
    );
    for line in udp_report(links) {
        say!("\t{line}");
    }
}

/// Per UDP publisher: messages delivered, lost (gaps in message ids), and datagrams that
/// never completed a message or could not be read, from the reassemblers' counters.
pub(super) fn udp_report(links: &[PublisherLinkStats]) -> Vec<String> {
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
            let mut line = format!(
                "UDP from {}: {} delivered, {} lost ({pct:.2}%), {} incomplete, {} malformed",
                link.publisher_uri,
                udp.messages,
                udp.lost(),
                udp.incomplete,
                udp.malformed
            );
            if udp.repairs + udp.checksums > 0 {
                line += &format!(
                    "; FEC: {} repair datagrams, {} checksums, {} rebuilt, {} failed their checksum",
                    udp.repairs, udp.checksums, udp.rebuilt, udp.corrupt
                );
            }
            lines.push(line);
        }
    }
    lines
}

/// Failures seen on a subscription's UDP links so far: lost, incomplete and malformed.
pub(super) fn udp_failures(links: &[PublisherLinkStats]) -> u64 {
    links
        .iter()
        .map(|l| l.udp)
        .map(|u| u.lost() + u.incomplete + u.malformed)
        .sum()
}
