//! The operator's view (scenario S9): what `udpros view` adds between a publisher and a
//! browser. One publisher (the udpros bench peer) feeds, over UDPROS, three subscribers
//! at once: the view (its own process, forwarding to a WebSocket client in this process),
//! a udpros subscriber in this process, and a roscpp subscriber (the reference for CPU).
//!
//! - Added age: for each message, its arrival at the WebSocket client minus its arrival
//!   at the udpros subscriber, both read with this process's clock: what the view's hop
//!   (receive, hand to the client's buffer, frame, send, and the client's read) costs
//!   beyond the UDPROS delivery every subscriber pays.
//! - CPU per forwarded message: the view process's CPU time over the run (every thread's
//!   `schedstat`, in ns; its graph polling included) over the messages it forwarded,
//!   beside the roscpp subscriber's CPU per message received (its getrusage).

use super::harness::{fields, loopback_ros_env, spawn};
use super::report::percentile;
use futures_util::{SinkExt, StreamExt};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use udpros::msgs::sensor_msgs;
use udpros::node::{Node, SubscribeOptions};
use udpros::transport::Protocol;

/// One cell: a message size at a rate.
struct Cell {
    what: &'static str,
    size: usize,
    rate: f64,
    count: u64,
}

fn cells(quick: bool) -> [Cell; 2] {
    let n = |full: u64, small: u64| if quick { small } else { full };
    [
        Cell {
            what: "1 kB at 100 Hz",
            size: 1000,
            rate: 100.0,
            count: n(3000, 100),
        },
        Cell {
            what: "250 kB at 10 Hz",
            size: 250_000,
            rate: 10.0,
            count: n(300, 10),
        },
    ]
}

/// What a cell measured.
struct Measured {
    what: &'static str,
    sent: u64,
    direct: usize,
    forwarded: usize,
    /// Per message delivered both ways: WebSocket arrival − udpros arrival, µs.
    added_us: Vec<f64>,
    view_cpu_us_per_msg: f64,
    roscpp_cpu_us_per_msg: Option<f64>,
}

/// Runs S9 and prints its table; the cells that could not be measured, each with why
/// (the table has the others).
pub(super) async fn run_table(quick: bool, master: &str, roscpp: &Path) -> Vec<String> {
    let mut measured = Vec::new();
    let mut failed = Vec::new();
    for (k, cell) in cells(quick).into_iter().enumerate() {
        let topic = format!("/bench_view_{k}");
        match run_cell(&cell, master, roscpp, &topic).await {
            Ok(m) => {
                eprintln!("S9 {}: done", cell.what);
                measured.push(m);
            }
            Err(e) => {
                eprintln!("S9 {}: {e}", cell.what);
                failed.push(format!("S9 {}: {e}", cell.what));
            }
        }
    }
    print_table(&measured);
    failed
}

async fn run_cell(
    cell: &Cell,
    master: &str,
    roscpp: &Path,
    topic: &str,
) -> Result<Measured, String> {
    let exe = std::env::current_exe().unwrap_or_else(|_| "udpros".into());
    // The view, on a free loopback port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    // The view asks for a token, as it does by default; a fresh one per cell, given
    // through the environment as a user would.
    let token = crate::view_cmd::token(false)?.ok_or("the view has no token")?;
    let mut cmd = Command::new(&exe);
    cmd.env(crate::view_cmd::TOKEN_VAR, &token);
    cmd.args([
        "view",
        "--address",
        "127.0.0.1",
        "--port",
        &port.to_string(),
    ]);
    cmd.arg(format!("__name:=bench_view_{port}"));
    loopback_ros_env(&mut cmd, master);
    let view = spawn(cmd)?;
    let view_pid = view.pid();
    let ready = tokio::task::spawn_blocking(move || {
        let line = view.wait_line("Foxglove", Duration::from_secs(30));
        (view, line)
    })
    .await
    .map_err(|e| e.to_string())?;
    let (view, Some(_)) = ready else {
        return Err("the view did not start".into());
    };

    // The roscpp reference subscriber.
    let mut cmd = Command::new(roscpp);
    cmd.args([
        "sub",
        topic,
        "--count",
        &cell.count.to_string(),
        "--transport",
        "udp",
    ]);
    loopback_ros_env(&mut cmd, master);
    let reference = spawn(cmd)?;
    let reference = tokio::task::spawn_blocking(move || {
        let ready = reference.wait_line("READY", Duration::from_secs(30));
        ready.map(|_| reference)
    })
    .await
    .map_err(|e| e.to_string())?
    .ok_or("the roscpp subscriber did not start")?;

    // The publisher, waiting for its three subscribers.
    let mut cmd = Command::new(&exe);
    cmd.args([
        "bench",
        "peer",
        "pub",
        topic,
        "--size",
        &cell.size.to_string(),
        "--rate",
        &cell.rate.to_string(),
        "--count",
        &cell.count.to_string(),
        "--subscribers",
        "3",
    ]);
    loopback_ros_env(&mut cmd, master);
    let publisher = spawn(cmd)?;

    // This process's udpros subscriber, and its WebSocket client of the view.
    let node = Node::new(
        &format!("bench_view_direct_{port}"),
        [format!("__master:={master}"), "__ip:=127.0.0.1".to_string()],
    )
    .await
    .map_err(|e| e.to_string())?;
    let options = SubscribeOptions {
        transports: vec![Protocol::Udp],
        queue_size: 100_000,
        ..SubscribeOptions::default()
    };
    let mut direct = node
        .subscribe::<sensor_msgs::CompressedImage>(topic, options)
        .await
        .map_err(|e| e.to_string())?;
    let mut socket = connect(port, &token).await?;
    let channel = channel_of(&mut socket, topic).await?;
    let subscribe =
        format!(r#"{{"op":"subscribe","subscriptions":[{{"id":1,"channelId":{channel}}}]}}"#);
    socket
        .send(Message::text(subscribe))
        .await
        .map_err(|e| e.to_string())?;

    let cpu_before = task_cpu_ns(view_pid);
    let idle = Duration::from_secs(3);
    let receiving_direct = async {
        let mut arrivals = HashMap::new();
        while let Ok(Some(m)) =
            tokio::time::timeout(idle + Duration::from_secs(30), direct.recv()).await
        {
            arrivals.insert(m.header.seq, now_us());
            if arrivals.len() as u64 == cell.count {
                break;
            }
        }
        arrivals
    };
    let receiving_ws = async {
        let mut arrivals = HashMap::new();
        while let Ok(Some(Ok(frame))) =
            tokio::time::timeout(idle + Duration::from_secs(30), socket.next()).await
        {
            let at = now_us();
            if let Message::Binary(data) = frame {
                // Message Data: opcode, subscription, receipt time, then the message,
                // whose header's seq comes first.
                if data.len() >= 17 && data[0] == 1 {
                    let seq = u32::from_le_bytes([data[13], data[14], data[15], data[16]]);
                    arrivals.insert(seq, at);
                }
            }
            if arrivals.len() as u64 == cell.count {
                break;
            }
        }
        arrivals
    };
    let (direct_at, ws_at) = tokio::join!(receiving_direct, receiving_ws);
    let cpu_after = task_cpu_ns(view_pid);
    let limit = Duration::from_secs(30);
    let (publisher_line, reference_line) = tokio::task::spawn_blocking(move || {
        (
            publisher.wait_line("PUB", limit),
            reference.wait_line("SUB", limit),
        )
    })
    .await
    .map_err(|e| e.to_string())?;
    drop(view);
    node.shutdown().await;
    publisher_line.ok_or("the publisher did not finish")?;
    let mut added_us: Vec<f64> = ws_at
        .iter()
        .filter_map(|(seq, ws)| Some(ws - direct_at.get(seq)?))
        .collect();
    added_us.sort_by(f64::total_cmp);
    let forwarded = ws_at.len();
    let view_cpu_us_per_msg = match (cpu_before, cpu_after) {
        (Some(a), Some(b)) if forwarded > 0 => (b - a) as f64 / 1e3 / forwarded as f64,
        _ => f64::NAN,
    };
    let roscpp_cpu_us_per_msg = reference_line.map(|l| {
        let f = fields(&l);
        let cpu = f.get("user").copied().unwrap_or(0.0) + f.get("sys").copied().unwrap_or(0.0);
        let received = f.get("received").copied().unwrap_or(0.0).max(1.0);
        cpu * 1e6 / received
    });
    Ok(Measured {
        what: cell.what,
        sent: cell.count,
        direct: direct_at.len(),
        forwarded,
        added_us,
        view_cpu_us_per_msg,
        roscpp_cpu_us_per_msg,
    })
}

/// Wall-clock microseconds, as both receivers of this process read them.
fn now_us() -> f64 {
    udpros::msg::Time::now().as_nanos() as f64 / 1e3
}

async fn connect(
    port: u16,
    token: &str,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    String,
> {
    let mut request = format!("ws://127.0.0.1:{port}/?token={token}")
        .into_client_request()
        .map_err(|e| e.to_string())?;
    request.headers_mut().insert(
        "sec-websocket-protocol",
        "foxglove.websocket.v1".parse().map_err(|_| "header")?,
    );
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(socket, _)| socket)
        .map_err(|e| format!("cannot connect to the view: {e}"))
}

/// The id of the channel the view advertises for `topic` (within 30 s).
async fn channel_of<S>(socket: &mut S, topic: &str) -> Result<u64, String>
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, socket.next()).await {
        let Message::Text(text) = frame else { continue };
        let Ok(message) = serde_json::from_str::<serde_json::Value>(text.as_str()) else {
            continue;
        };
        if message["op"] != "advertise" {
            continue;
        }
        let found = message["channels"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["topic"] == topic)
            .and_then(|c| c["id"].as_u64());
        if let Some(id) = found {
            return Ok(id);
        }
    }
    Err(format!("the view never advertised {topic}"))
}

/// CPU time of every thread of process `pid` so far, in ns (`/proc/PID/task/*/schedstat`).
fn task_cpu_ns(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0;
    for task in tasks.flatten() {
        let text = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        total += text
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(total)
}

fn print_table(cells: &[Measured]) {
    println!("\n### S9, the view: a publisher → `udpros view` → a WebSocket client\n");
    println!("| cell | sent | udpros sub got | WebSocket got | added age p50 | p99 | max | view CPU per forwarded message | roscpp subscriber CPU per message |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for c in cells {
        let us = |p: f64| format!("{:.0} µs", percentile(&c.added_us, p));
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} µs | {} |",
            c.what,
            c.sent,
            c.direct,
            c.forwarded,
            us(0.5),
            us(0.99),
            us(1.0),
            c.view_cpu_us_per_msg,
            c.roscpp_cpu_us_per_msg
                .map_or("-".into(), |v| format!("{v:.1} µs")),
        );
    }
    println!(
        "\nAdded age: a message's arrival at the WebSocket client minus its arrival at a udpros \
         subscriber of the same publisher, one clock. View CPU: all its threads (graph polling \
         included) over the messages it forwarded."
    );
}
