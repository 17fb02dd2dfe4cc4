//! `udpros demo`: the whole system on embedded defaults. A master (the embedded one unless
//! one answers at ROS_MASTER_URI), simulated Ping1D, Ping360 and autopilot behind the two
//! bridge nodes, and a viewer subscribing over UDPROS that shows the data live.

use super::CliResult;
use clap::Args;
use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
use udpros::msgs::{sensor_msgs, udpros as umsg};
use udpros::node::{Node, SubscribeOptions};
use udpros::transport::Protocol;
use udpros::transport::PublisherLinkStats;
use udpros_bridges::mavlink::link::FcuUrl;
use udpros_bridges::mavlink::node as mavlink_node;
use udpros_bridges::ping::node as ping_node;
use udpros_bridges::sim::Faults;

#[derive(Args)]
pub struct DemoArgs {
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
    /// A status line per second instead of the live view (the default when the output is
    /// not a terminal).
    #[arg(long)]
    plain: bool,
    /// Port of the console and Foxglove WebSocket server (any free one when it is taken;
    /// 0: any free one).
    #[arg(long, default_value_t = udpros_view::DEFAULT_PORT)]
    view_port: u16,
}

pub fn run(args: DemoArgs) -> CliResult {
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(demo(args))
}

/// ROS_MASTER_URI, or ROS's default.
fn master_uri() -> String {
    std::env::var("ROS_MASTER_URI").unwrap_or_else(|_| "http://localhost:11311/".into())
}

/// Whether a master answers at `uri` (getPid within a second).
async fn master_answers(uri: &str) -> bool {
    // Signed when a key is configured: a master under `require` answers nothing else.
    let security = udpros::secure::Security::from_env().unwrap_or_default();
    let client = udpros::xmlrpc::XmlRpcClient::new(Duration::from_secs(1), Duration::from_secs(1))
        .signed(&security);
    let master = udpros::api::MasterClient::new(uri, "/udpros_demo", client);
    master.get_pid().await.is_ok()
}

/// The port of an `http://host:port/` URI.
fn uri_port(uri: &str) -> Result<u16, String> {
    uri.parse::<hyper::Uri>()
        .ok()
        .and_then(|u| u.port_u16())
        .ok_or_else(|| format!("ROS_MASTER_URI '{uri}' has no port"))
}

async fn demo_node(uri: &str, name: &str) -> Result<Node, String> {
    Node::new(
        name,
        [format!("__master:={uri}"), format!("__name:={name}")],
    )
    .await
    .map_err(|e| format!("node {name}: {e}"))
}

async fn demo(args: DemoArgs) -> CliResult {
    let uri = master_uri();
    let embedded = if master_answers(&uri).await {
        None
    } else {
        let overrides = udpros::host::HostOverrides::from_env();
        let host = udpros::host::advertised_host(&overrides);
        let bind =
            std::net::SocketAddr::new(udpros::host::bind_address(&overrides), uri_port(&uri)?);
        let core = udpros::master::Roscore::start(bind, &host, Default::default())
            .await
            .map_err(|e| {
                format!("no master answers at {uri}, and none can start on {bind}: {e}")
            })?;
        Some(core)
    };
    let uri = embedded
        .as_ref()
        .map_or(uri, |core| core.master().uri().to_string());

    let ping1d = demo_node(&uri, "ping1d").await?;
    let ping360 = demo_node(&uri, "ping360").await?;
    let fcu = demo_node(&uri, "mavlink_bridge").await?;
    let viewer = demo_node(&uri, "udpros_demo").await?;
    let web = demo_node(&uri, "udpros_view").await?;
    let nodes = [
        ping1d.clone(),
        ping360.clone(),
        fcu.clone(),
        viewer.clone(),
        web.clone(),
    ];
    let token = crate::view_cmd::token(false)?;
    let view = start_view(web, args.view_port, token.clone()).await?;

    let mut tasks = tokio::task::JoinSet::new();
    let sonar = ping_node::Config::new("sim:ping1d".parse()?);
    let mut scanner = ping_node::Config::new("sim:ping360".parse()?);
    scanner.range = 20.0;
    let mut autopilot = mavlink_node::Config::new(FcuUrl::Sim);
    // A link worth measuring: 1.5 ms up, 2.5 ms down, jitter, 1 % loss, a drifting clock.
    autopilot.sim.clock_offset_ns = Some(-1_000_000_000);
    autopilot.sim.drift_ppm = 25.0;
    let way = |ms: f64| Faults {
        loss: 0.01,
        duplicate: 0.0,
        delay: Duration::from_secs_f64(ms / 1000.0),
        jitter: Duration::from_micros(200),
    };
    autopilot.sim.up = way(1.5);
    autopilot.sim.down = way(2.5);
    tasks.spawn(async move {
        ping_node::run(ping1d, sonar)
            .await
            .map_err(|e| e.to_string())
    });
    tasks.spawn(async move {
        ping_node::run(ping360, scanner)
            .await
            .map_err(|e| e.to_string())
    });
    tasks.spawn(async move { mavlink_node::run(fcu, autopilot).await });

    let console = crate::view_cmd::addresses(view.local_addr(), token.as_deref(), false);
    let result = live_view(&viewer, &uri, embedded.is_some(), &console, &args).await;
    drop(view);
    for node in &nodes {
        node.shutdown().await;
    }
    // The bridges end with their nodes; give them a moment, then stop whatever is left.
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tasks.abort_all();
    println!("udpros demo: stopped");
    result
}

/// What the viewer knows, updated as messages arrive.
#[derive(Default)]
struct Board {
    depth: Option<f32>,
    confidence: Option<f32>,
    /// How near the first strong echo is, per 1/40 of a turn (255: at the transducer, 0:
    /// none), and the last angle (gradians).
    sweep: Vec<Option<f32>>,
    angle: u16,
    latency: Option<umsg::MavlinkLatency>,
    arrivals: [VecDeque<Instant>; 4],
}

const TOPICS: [&str; 4] = [
    "/ping1d/range",
    "/ping1d/profile",
    "/ping360/echo",
    "/mavlink_bridge/latency",
];

impl Board {
    fn arrived(&mut self, topic: usize) {
        let now = Instant::now();
        let q = &mut self.arrivals[topic];
        q.push_back(now);
        while q.front().is_some_and(|t| now - *t > Duration::from_secs(2)) {
            q.pop_front();
        }
    }

    fn rate(&self, topic: usize) -> f64 {
        let q = &self.arrivals[topic];
        match (q.front(), q.back()) {
            (Some(a), Some(b)) if q.len() > 1 => (q.len() - 1) as f64 / (*b - *a).as_secs_f64(),
            _ => 0.0,
        }
    }
}

/// Where the first strong echo of a ping lies, as a share of its samples (0: at the
/// transducer, 1: at the far end of the range); `None` when there is none.
fn first_echo(intensities: &[u8]) -> Option<f32> {
    const STRONG: u8 = 100;
    let i = intensities.iter().position(|v| *v >= STRONG)?;
    Some(i as f32 / intensities.len().max(1) as f32)
}

/// The sweep as one row of shades, scaled to what the sweep holds: its nearest echo is
/// the darkest block and its farthest the lightest, so a scene shows its shape at any range.
fn sweep_row(sweep: &[Option<f32>]) -> String {
    const SHADES: [char; 4] = ['░', '▒', '▓', '█'];
    let echoes = sweep.iter().flatten();
    let near = echoes.clone().copied().fold(f32::INFINITY, f32::min);
    let far = echoes.copied().fold(f32::NEG_INFINITY, f32::max);
    sweep
        .iter()
        .map(|v| match v {
            None => ' ',
            Some(_) if far - near < 1e-6 => SHADES[2],
            Some(v) => {
                let nearness = (far - v) / (far - near);
                SHADES[((nearness * 3.999) as usize).min(3)]
            }
        })
        .collect()
}

/// UDP messages delivered and lost over a subscription's publisher links, and whether any
/// link is UDP.
fn udp_counts(links: &[PublisherLinkStats]) -> (u64, u64, bool) {
    let mut out = (0, 0, false);
    for link in links {
        if link.protocol == Some(Protocol::Udp) {
            out.0 += link.udp.messages;
            out.1 += link.udp.lost();
            out.2 = true;
        }
    }
    out
}

/// The console and Foxglove server on `port`, or on any free port when that one is taken
/// (a second demo, or a foxglove_bridge on the machine).
async fn start_view(
    node: Node,
    port: u16,
    token: Option<String>,
) -> Result<udpros_view::View, String> {
    let options = |port| udpros_view::ViewOptions {
        port,
        token: token.clone(),
        ..udpros_view::ViewOptions::default()
    };
    match udpros_view::View::start(node.clone(), options(port)).await {
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && port != 0 => {
            udpros_view::View::start(node, options(0)).await
        }
        started => started,
    }
    .map_err(|e| format!("cannot serve the view: {e}"))
}

async fn live_view(
    viewer: &Node,
    uri: &str,
    embedded: bool,
    console: &[String; 2],
    args: &DemoArgs,
) -> CliResult {
    let udp = SubscribeOptions::default(); // UDPROS first, TCPROS if a publisher refuses it
    let e = |e: udpros::node::NodeError| e.to_string();
    let mut range = viewer
        .subscribe::<sensor_msgs::Range>(TOPICS[0], udp.clone())
        .await
        .map_err(e)?;
    let mut profile = viewer
        .subscribe::<umsg::PingProfile>(TOPICS[1], udp.clone())
        .await
        .map_err(e)?;
    let mut echo = viewer
        .subscribe::<umsg::Ping360Echo>(TOPICS[2], udp.clone())
        .await
        .map_err(e)?;
    let mut latency = viewer
        .subscribe::<umsg::MavlinkLatency>(TOPICS[3], udp)
        .await
        .map_err(e)?;
    let live = !args.plain && std::io::stdout().is_terminal();
    let started = Instant::now();
    let mut board = Board {
        sweep: vec![None; 40],
        ..Board::default()
    };
    let mut redraw = tokio::time::interval(Duration::from_millis(if live { 200 } else { 1000 }));
    let end = async {
        match args
            .duration
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
        {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let mut end = std::pin::pin!(end);
    // Listened for from here on, not anew in each turn of the loop: a signal that came
    // while the screen was redrawn would otherwise be missed. SIGTERM too (a service
    // manager's stop): its nodes shut down on it, and the demo must end with them.
    let mut stop = crate::tool_node::StopSignals::listen()?;
    if !live {
        println!(
            "udpros demo: offset is ROS time − autopilot time; the simulated autopilot's clock counts from its boot, as an autopilot's does before GPS"
        );
    }
    println!(
        "udpros demo: {} master at {uri}; simulated Ping1D, Ping360 and autopilot; Ctrl-C stops",
        if embedded { "embedded" } else { "existing" }
    );
    for line in console {
        println!("udpros demo: {line}");
    }
    if live {
        print!("\x1b[?25l"); // hide the cursor while the view updates in place
    }
    loop {
        tokio::select! {
            Some(m) = range.recv() => { board.depth = Some(m.range); board.arrived(0); }
            Some(m) = profile.recv() => { board.confidence = Some(m.confidence); board.arrived(1); }
            Some(m) = echo.recv() => {
                let sector = usize::from(m.angle_gradians % 400) / 10;
                if let Some(s) = board.sweep.get_mut(sector) { *s = first_echo(&m.intensities); }
                board.angle = m.angle_gradians;
                board.arrived(2);
            }
            Some(m) = latency.recv() => { board.latency = Some(m); board.arrived(3); }
            _ = redraw.tick() => {
                let losses = [
                    udp_counts(&range.links()),
                    udp_counts(&profile.links()),
                    udp_counts(&echo.links()),
                    udp_counts(&latency.links()),
                ];
                let text = if live {
                    screen(&board, &losses, started.elapsed(), &console[0])
                } else {
                    status_line(&board, started.elapsed())
                };
                let mut out = std::io::stdout().lock();
                if live {
                    let _ = write!(out, "\x1b[H\x1b[2J{text}");
                } else {
                    let _ = writeln!(out, "{text}");
                }
                let _ = out.flush();
            }
            _ = &mut end => break,
            _ = stop.stopped() => break,
        }
    }
    if live {
        println!("\x1b[?25h");
    }
    Ok(())
}

fn ms(seconds: f64) -> String {
    if seconds.is_finite() {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        "-".into()
    }
}

fn offset(ns: i64, known: bool) -> String {
    if known {
        format!("{:+.6} s", ns as f64 / 1e9)
    } else {
        "-".into()
    }
}

/// The live view.
fn screen(b: &Board, losses: &[(u64, u64, bool); 4], elapsed: Duration, console: &str) -> String {
    let mut s = format!(
        "udpros demo  {:.0} s   (Ctrl-C stops)   {console}\n\n",
        elapsed.as_secs_f64()
    );
    s += "Ping1D sonar\n";
    s += &format!(
        "  depth {:>8}   confidence {:>5}\n\n",
        b.depth.map_or("-".into(), |d| format!("{d:.2} m")),
        b.confidence
            .map_or("-".into(), |c| format!("{:.0} %", c * 100.0))
    );
    s += "Ping360 sweep (first strong echo per 9°, scaled to the sweep: █ nearest, ░ farthest; ^ = transducer)\n  ";
    s += &sweep_row(&b.sweep);
    s += "\n  ";
    let marker = usize::from(b.angle % 400) / 10;
    s += &" ".repeat(marker);
    s += "^\n\n";
    s += "Autopilot link (MAVLink PING and TIMESYNC)\n";
    match &b.latency {
        Some(l) => {
            s += &format!(
                "  PING RTT {:>9} (min {})   TIMESYNC RTT {:>9}   loss {:.1} % / {:.1} %\n",
                ms(l.ping_rtt),
                ms(l.ping_rtt_min),
                ms(l.timesync_rtt),
                l.ping_loss * 100.0,
                l.timesync_loss * 100.0
            );
            // Offsets are ROS time − autopilot time (mavros's sign); the PX4 filter is shown
            // as its difference from ours, where the two estimators disagree.
            let px4 = if l.px4_offset_ns != 0 && l.uncertainty_ns >= 0 {
                format!("{:+.1} µs", (l.px4_offset_ns - l.offset_ns) as f64 / 1e3)
            } else {
                "-".into()
            };
            s +=
                &format!(
                "  clock offset (ROS − autopilot) {} ± {:.3} ms{}\n  (the simulated autopilot's clock counts from its boot, as an autopilot's does before GPS)\n  PX4 filter: {px4} from it{}\n",
                offset(l.offset_ns, l.uncertainty_ns >= 0),
                l.uncertainty_ns.max(0) as f64 / 1e6,
                if l.converged { "" } else { " (converging)" },
                if l.px4_converged { "" } else { " (converging: 500 samples)" },
            );
            s += &format!("  skew {:+.1} ppm\n\n", l.skew_ppm);
        }
        None => s += "  waiting for the first report\n\n",
    }
    s += "Topics (UDPROS)\n";
    for (i, topic) in TOPICS.iter().enumerate() {
        let (delivered, lost, udp) = losses[i];
        let loss = if delivered + lost > 0 {
            format!(
                "{:.2} % lost",
                100.0 * lost as f64 / (delivered + lost) as f64
            )
        } else {
            "-".into()
        };
        s += &format!(
            "  {topic:<26} {:>6.1} Hz   {:<4} {loss}\n",
            b.rate(i),
            if udp { "UDP" } else { "TCP" }
        );
    }
    s
}

/// One line per second, for logs and pipes.
fn status_line(b: &Board, elapsed: Duration) -> String {
    let (rtt, ours, px4) =
        b.latency
            .as_ref()
            .map_or(("-".to_string(), "-".to_string(), "-".to_string()), |l| {
                (
                    ms(l.timesync_rtt),
                    offset(l.offset_ns, l.uncertainty_ns >= 0),
                    offset(l.px4_offset_ns, l.px4_offset_ns != 0),
                )
            });
    format!(
        "t={:.0}s depth={} confidence={} ping360_angle={:.1}deg rtt={rtt} offset={ours} px4_offset={px4} rates={:.1}/{:.1}/{:.1}/{:.1}Hz",
        elapsed.as_secs_f64(),
        b.depth.map_or("-".into(), |d| format!("{d:.2}m")),
        b.confidence.map_or("-".into(), |c| format!("{:.0}%", c * 100.0)),
        f64::from(b.angle) * 0.9,
        b.rate(0),
        b.rate(1),
        b.rate(2),
        b.rate(3),
    )
}

#[cfg(test)]
mod tests {
    use super::{first_echo, sweep_row, uri_port};

    /// Echoes between a third and two thirds of the range (no sample near the transducer)
    /// still span the shades, nearest darkest; sectors without an echo stay blank.
    #[test]
    fn the_sweep_row_is_scaled_to_what_the_sweep_holds() {
        let ping = |at: usize| {
            let mut samples = vec![0u8; 600];
            samples[at] = 200;
            first_echo(&samples)
        };
        let sweep = [ping(200), ping(300), ping(400), None, ping(250)];
        let row = sweep_row(&sweep);
        assert_eq!(row.chars().collect::<Vec<_>>(), ['█', '▒', '░', ' ', '▓']);
        assert_eq!(sweep_row(&[ping(100), ping(100)]), "▓▓");
        assert_eq!(first_echo(&[0; 10]), None);
        assert_eq!(sweep_row(&[None, None]), "  ");
    }

    #[test]
    fn the_embedded_master_takes_the_port_of_ros_master_uri() {
        assert_eq!(uri_port("http://localhost:11311/"), Ok(11311));
        assert_eq!(uri_port("http://[::1]:11411"), Ok(11411));
        assert!(uri_port("http://robot/").is_err());
        assert!(uri_port("not a uri").is_err());
    }
}
