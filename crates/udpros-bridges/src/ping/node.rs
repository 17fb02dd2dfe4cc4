//! The `ping_sonar` node: one Ping1D or Ping360 onto ROS topics. Data is stamped on the
//! arrival of the frame's last byte and published at once; the device is identified,
//! configured and kept streaming by a session that survives link loss.

use super::link::FrameHook;
use super::link::{Link, LinkEvent, LinkSpec, Outgoing};
use super::publish::{
    fast_path, publish_diagnostics, publish_echo, stamp_at, with_frames, LatencyWindow, Publishers,
    Sweep,
};
use super::recorder::Recorder;
use super::session::{Action, ConfigWatch, Session, CHANGE_TIMEOUT};
pub use super::session::{Config, DeviceType, Ping360Settings};
use super::session::{DeviceState, Echo};
use super::{DeviceKind, Dialect};
use crate::Params;
use std::sync::Arc;
use std::time::{Duration, Instant};
use udpros::msg::Time;
use udpros::node::Node;
use udpros::reconfigure::{self as rc, Description};

/// What `--help` prints: every parameter (default, range, meaning), topic and service. A
/// test checks that it names every `~` name this module reads or advertises.
pub const HELP: &str = include_str!("help.txt");

/// Every private parameter `ping_sonar` reads (dynamic_reconfigure's mirror of its
/// settings has the same names): any other is refused at start.
pub const PARAMETERS: &[&str] = &[
    "device",
    "device_type",
    "dialect",
    "fec",
    "max_rate",
    "max_rate_per_host",
    "governor",
    "frame_id",
    "speed_of_sound",
    "range",
    "gain",
    "ping_interval",
    "mode_auto",
    "min_confidence",
    "field_of_view",
    "transmit_frequency",
    "start_angle",
    "stop_angle",
    "num_steps",
    "scan_threshold",
    "use_auto_transmit",
    "image_size",
    "image_rate",
    "record",
    "replay_rate",
    "replay_loop",
];

impl Config {
    /// Reads `~` parameters, with defaults that work; a parameter the node does not have
    /// (a typo) is refused by name.
    pub async fn from_node(node: &Node) -> Result<Config, String> {
        crate::refuse_unknown_parameters(node, PARAMETERS, "ping_sonar").await?;
        let p = Params(node);
        let device: String = p.get("~device", "sim:ping1d".to_string()).await?;
        let device_type = p
            .choice(
                "~device_type",
                "auto",
                &[
                    ("auto", DeviceType::Auto),
                    ("ping1d", DeviceType::Ping1d),
                    ("ping360", DeviceType::Ping360),
                ],
            )
            .await?;
        let dialect = p
            .choice(
                "~dialect",
                "current",
                &[
                    ("current", Dialect::Current),
                    ("draft2017", Dialect::Draft2017),
                ],
            )
            .await?;
        let mut device: LinkSpec = device.parse()?;
        let mut device_type = device_type;
        if let LinkSpec::Replay(replay) = &mut device {
            let rate: f64 = p.within("~replay_rate", 1.0, 0.01, 100.0).await?;
            replay.speed_permille = (rate * 1000.0).round() as u32;
            replay.looped = p.get("~replay_loop", false).await?;
            // The log says which device it is; a log that cannot be opened stops the node
            // now, with the reason.
            let file = super::log::open(&replay.path)
                .map_err(|e| format!("~device {}: {e}", replay.path.display()))?;
            let log = super::log::LogReader::new(std::io::BufReader::new(file))
                .map_err(|e| format!("~device {}: {e}", replay.path.display()))?;
            if device_type == DeviceType::Auto {
                device_type = match log.header().and_then(|h| h.device()) {
                    Some(DeviceKind::Ping1d) => DeviceType::Ping1d,
                    Some(DeviceKind::Ping360) => DeviceType::Ping360,
                    None => DeviceType::Auto,
                };
            }
        }
        if device == LinkSpec::Discover && device_type == DeviceType::Auto {
            device_type = DeviceType::Ping360;
        }
        let record: String = p.get("~record", String::new()).await?;
        let gain = read_gain(&p, device_type, &device).await?;
        Ok(Config {
            device,
            links: p.link_settings().await?,
            device_type,
            dialect,
            frame_id: p.get("~frame_id", "sonar".to_string()).await?,
            // Sound in water is 1400-1600 m/s; anything else is a typo.
            speed_of_sound: p.within("~speed_of_sound", 1500.0, 1000.0, 2500.0).await?,
            range: p.within("~range", 10.0, 0.1, 100.0).await?,
            gain: 1,
            ping_interval: p.within("~ping_interval", 100u32, 20, 10_000).await? as u16,
            mode_auto: p.get("~mode_auto", true).await?,
            min_confidence: p.within("~min_confidence", 0.0, 0.0, 1.0).await?,
            field_of_view: p
                .within(
                    "~field_of_view",
                    std::f32::consts::FRAC_PI_6,
                    0.001,
                    std::f32::consts::PI,
                )
                .await?,
            transmit_frequency: p.within("~transmit_frequency", 750u32, 500, 1000).await? as u16,
            start_angle: p.within("~start_angle", 0.0, 0.0, 360.0).await?,
            stop_angle: p.within("~stop_angle", 360.0, 0.0, 360.0).await?,
            num_steps: p.within("~num_steps", 1u32, 1, 10).await? as u8,
            scan_threshold: p.within("~scan_threshold", 100u32, 0, 255).await? as u8,
            use_auto_transmit: p.get("~use_auto_transmit", true).await?,
            image_size: p.within("~image_size", 200u32, 16, 2000).await?,
            image_rate: p.within("~image_rate", 2.0, 0.01, 100.0).await?,
            record: (!record.is_empty()).then(|| record.into()),
            frames: p.get("~frames", true).await?,
            sweep: super::SweepPattern::Natural,
            number_of_samples: None,
        }
        .with_gain(gain))
    }

    fn with_gain(mut self, gain: u32) -> Config {
        self.gain = gain;
        self
    }
}

/// `~gain`: a Ping1D's gain index (0-6), or a Ping360's setting, 0-2 or by the names its
/// dynamic_reconfigure choices have (`low`, `normal`, `high`). A Ping360's gain past 2 is
/// refused, never clamped.
async fn read_gain(
    p: &Params<'_>,
    device_type: DeviceType,
    device: &LinkSpec,
) -> Result<u32, String> {
    use udpros::xmlrpc::Value;
    const NAMES: [&str; 3] = ["low", "normal", "high"];
    let kind = match (device_type, device) {
        (DeviceType::Ping360, _) => Some(DeviceKind::Ping360),
        (DeviceType::Ping1d, _) => Some(DeviceKind::Ping1d),
        (DeviceType::Auto, LinkSpec::Sim(kind)) => Some(*kind),
        (DeviceType::Auto, LinkSpec::Discover) => Some(DeviceKind::Ping360),
        (DeviceType::Auto, _) => None,
    };
    let ping360 = kind == Some(DeviceKind::Ping360);
    let gain = match p.get("~gain", Value::Int(1)).await? {
        Value::Int(n) => {
            u32::try_from(n).map_err(|_| format!("~gain {n} is out of range: expected 0 to 6"))?
        }
        Value::String(name) => match NAMES.iter().position(|n| name.eq_ignore_ascii_case(n)) {
            Some(i) if kind != Some(DeviceKind::Ping1d) => {
                // The number on the parameter server, where dynamic_reconfigure reads its
                // starting value (an int parameter).
                let key = p.0.resolve_name("~gain");
                if let Err(e) = p.0.set_param(&key, Value::Int(i as i32)).await {
                    return Err(format!("cannot set {key}: {e}"));
                }
                i as u32
            }
            Some(_) => {
                return Err(format!(
                    "~gain '{name}' names a Ping360's gain; a Ping1D's is 0 to 6"
                ))
            }
            None => {
                let key = p.0.resolve_name("~gain");
                return Err(format!(
                    "{key} must be 0 to 6, or low, normal or high: it is the string '{name}'"
                ));
            }
        },
        _ => {
            // The parameter reader's own words for a value of another type.
            return Ok(p.get::<i64>("~gain", 1).await.map(|_| 1)?);
        }
    };
    let most = if ping360 { 2 } else { 6 };
    if gain > most {
        let what = if ping360 {
            "a Ping360's: 0 (low), 1 (normal) or 2 (high)"
        } else {
            "0 to 6"
        };
        return Err(format!("~gain {gain} is out of range: expected {what}"));
    }
    Ok(gain)
}

impl Config {
    /// The device this configuration expects, if it says (`~device_type`, a simulator).
    pub fn kind(&self) -> Option<DeviceKind> {
        match (self.device_type, &self.device) {
            (DeviceType::Ping1d, _) => Some(DeviceKind::Ping1d),
            (DeviceType::Ping360, _) => Some(DeviceKind::Ping360),
            (DeviceType::Auto, LinkSpec::Sim(kind)) => Some(*kind),
            // Only a Ping360 answers discovery.
            (DeviceType::Auto, LinkSpec::Discover) => Some(DeviceKind::Ping360),
            (DeviceType::Auto, _) => None,
        }
    }
}

/// A reconfiguration for the node's loop: the settings to try, and where the settings
/// applied go (refused ones put back).
struct Change {
    tried: Config,
    applied: tokio::sync::oneshot::Sender<Config>,
}

/// What a node makes of its device: the topics it advertises and what it publishes on
/// them, and the settings it serves to dynamic_reconfigure. `ping_sonar`'s own ([`run`])
/// or another driver's ([`super::ping360_sonar`]); the link, the session and the loop
/// around them ([`run_with`]) are the same.
pub(crate) trait Front: Send {
    /// Publishes in the link's task as each frame is decoded (Ping1D's fast path), if
    /// this front does.
    fn hook(&self, live: ConfigWatch) -> Option<FrameHook>;
    /// The device is known to be `kind` (again, if it changes).
    fn device_known(
        &mut self,
        node: &Node,
        kind: DeviceKind,
    ) -> impl std::future::Future<Output = Result<(), String>> + Send;
    /// A Ping360 echo, stamped in ROS time; `arrived` when its frame's last byte did.
    fn echo(&mut self, cfg: &Config, stamp: Time, echo: &Echo, arrived: Instant);
    /// The settings are about to change from `from` to `to`.
    fn reconfiguring(&mut self, from: &Config, to: &Config);
    /// Once a second: diagnostics, if this front publishes them.
    fn diagnostics(&mut self, node: &Node, cfg: &Config, device: &DeviceState, link: &Link);
    /// How its settings meet dynamic_reconfigure.
    fn settings(&self) -> Settings;
}

/// How a front's settings meet dynamic_reconfigure: what it serves for a device, a call's
/// settings applied to the node's, and the node's reported back.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) describe: fn(DeviceKind, &Config) -> Description,
    pub(crate) apply: Arc<ApplyFn>,
    pub(crate) report: Arc<ReportFn>,
}

/// A call's settings applied to the node's.
pub(crate) type ApplyFn = dyn Fn(&Config, &rc::Config) -> Config + Send + Sync;
/// The node's settings written into a call's answer.
pub(crate) type ReportFn = dyn Fn(&Config, &mut rc::Config) + Send + Sync;

/// `ping_sonar`'s topics: a device's own once it is known, `/diagnostics`, and its
/// settings as [`super::reconfigure`] describes them.
struct SonarFront {
    pubs: Arc<Publishers>,
    latency: Arc<std::sync::Mutex<LatencyWindow>>,
    sweep: Sweep,
    clock: udpros::time::Clock,
}

impl Front for SonarFront {
    fn hook(&self, live: ConfigWatch) -> Option<FrameHook> {
        Some(fast_path(
            live,
            self.pubs.clone(),
            self.latency.clone(),
            self.clock.clone(),
        ))
    }

    async fn device_known(&mut self, node: &Node, kind: DeviceKind) -> Result<(), String> {
        self.pubs
            .advertise_for(node, kind)
            .await
            .map_err(|e| e.to_string())
    }

    fn echo(&mut self, cfg: &Config, stamp: Time, echo: &Echo, arrived: Instant) {
        publish_echo(cfg, &self.pubs, &mut self.sweep, stamp, echo);
        self.latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(arrived.elapsed());
    }

    fn reconfiguring(&mut self, from: &Config, to: &Config) {
        if to.image_size != from.image_size {
            self.sweep = Sweep::new(to.image_size, self.clock.now());
        }
    }

    fn diagnostics(&mut self, node: &Node, cfg: &Config, device: &DeviceState, link: &Link) {
        publish_diagnostics(node, cfg, &self.pubs, device, link, &self.latency);
    }

    fn settings(&self) -> Settings {
        use super::reconfigure::{apply, description, report};
        Settings {
            describe: description,
            apply: Arc::new(apply),
            report: Arc::new(report),
        }
    }
}

/// Runs the node until it is asked to shut down: the link's events feed the
/// [`Session`], whose frames go to the link; Ping360 echoes are published here, Ping1D data
/// by the link's fast path. Once the device is known, its topics are advertised and its
/// settings served to dynamic_reconfigure; a change goes to the device, and what it
/// refuses is put back.
pub async fn run(node: Node, cfg: Config) -> Result<(), String> {
    let front = SonarFront {
        pubs: Arc::new(
            Publishers::advertise(&node, cfg.links)
                .await
                .map_err(|e| e.to_string())?,
        ),
        latency: Arc::default(),
        sweep: Sweep::new(cfg.image_size, node.clock().now()),
        clock: node.clock(),
    };
    run_with(node, cfg, front).await
}

/// [`run`] with another [`Front`]: the device driven the same way, published as `front`
/// says.
pub(crate) async fn run_with<F: Front>(
    node: Node,
    cfg: Config,
    mut front: F,
) -> Result<(), String> {
    let mut session = Session::new(cfg.clone(), Instant::now());
    let live = session.watch_config();
    let clock = node.clock();
    let recorder = match &cfg.record {
        Some(path) => Some(Arc::new(
            Recorder::create(path, cfg.kind())
                .map_err(|e| format!("~record {}: {e}", path.display()))?,
        )),
        None => None,
    };
    let hook = if cfg.frames {
        let frames = node
            .advertise("~frames", cfg.links.options())
            .await
            .map_err(|e| e.to_string())?;
        Some(with_frames(
            frames,
            front.hook(live.clone()),
            live.clone(),
            clock.clone(),
        ))
    } else {
        front.hook(live.clone())
    };
    let mut link = Link::spawn_with_hook(
        cfg.device.clone(),
        cfg.dialect,
        super::frame::DEFAULT_MAX_PAYLOAD,
        hook,
        recorder.clone(),
    );
    let mut trouble = crate::Trouble::new(cfg.device.to_string());
    let (changes_tx, mut changes) = tokio::sync::mpsc::channel::<Change>(1);
    let mut serving: Option<DeviceKind> = None;
    // Where the settings a change ends with go, while one is in progress.
    let mut answer: Option<tokio::sync::oneshot::Sender<Config>> = None;
    let mut shutdown = std::pin::pin!(node.shutdown_requested());
    loop {
        // Never sooner than a millisecond: what is due is done below, after every wake.
        let wake = session
            .poll_timeout()
            .max(Instant::now() + Duration::from_millis(1));
        tokio::select! {
            event = link.events.recv() => {
                let Some(event) = event else { break };
                match event {
                    LinkEvent::Connected => session.connected(Instant::now()),
                    LinkEvent::Disconnected(why) => {
                        trouble.failed(&why, Instant::now());
                        session.disconnected(why);
                    }
                    LinkEvent::Message(message, arrived) => {
                        trouble.recovered();
                        if let Some(echo) = session.handle_message(&message, arrived) {
                            front.echo(session.config(), stamp_at(&clock, arrived), &echo, arrived);
                        }
                    }
                }
            }
            Some(change) = changes.recv(), if answer.is_none() => {
                front.reconfiguring(session.config(), &change.tried);
                if session.begin_change(change.tried, Instant::now()) {
                    answer = Some(change.applied);
                }
            }
            _ = tokio::time::sleep_until(wake.into()) => {}
            _ = &mut shutdown => break,
        }
        let now = Instant::now();
        if session.handle_timeout(now) {
            front.diagnostics(&node, session.config(), session.device(), &link);
        }
        send_actions(&mut session, &link);
        if let Some(applied) = session.poll_change(now) {
            if let Some(answer) = answer.take() {
                let _ = answer.send(applied);
            }
        }
        let known = match cfg.device_type {
            DeviceType::Ping1d => Some(DeviceKind::Ping1d),
            DeviceType::Ping360 => Some(DeviceKind::Ping360),
            DeviceType::Auto => session.device().kind,
        };
        if let Some(kind) = known.filter(|k| serving != Some(*k)) {
            front.device_known(&node, kind).await?;
            if serving.is_none() {
                serve_settings(
                    &node,
                    kind,
                    changes_tx.clone(),
                    live.clone(),
                    front.settings(),
                );
            }
            serving = Some(kind);
        }
    }
    session.stop();
    if send_actions(&mut session, &link) {
        finish_sending(&link).await;
    }
    if let Some(recorder) = recorder {
        recorder.finish();
    }
    Ok(())
}

/// Lets the last frames (the session's stop) reach the device before the link is
/// dropped: until the link has written them, or at most [`LAST_FRAMES_WAIT`] (a device
/// that went away takes none).
async fn finish_sending(link: &Link) {
    let _ = tokio::time::timeout(LAST_FRAMES_WAIT, link.flush()).await;
}

/// The longest a stopping node waits for its last frames to be written.
const LAST_FRAMES_WAIT: Duration = Duration::from_millis(500);

/// What [`record_device`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Where the log is: the path asked for, or a free name beside it when that existed.
    pub path: std::path::PathBuf,
    /// Frames written to the log.
    pub frames: u64,
    /// Frames lost because the disk fell behind.
    pub dropped: u64,
}

/// Drives the device as the node does (identification, configuration, streaming or
/// polling), without ROS, and writes everything it sends to `path` as a Ping Viewer log
/// until `until` completes: what `udpros ping record` runs.
pub async fn record_device(
    cfg: Config,
    path: &std::path::Path,
    until: impl std::future::Future<Output = ()>,
) -> Result<Recorded, String> {
    let recorder = Arc::new(
        Recorder::create(path, cfg.kind()).map_err(|e| format!("{}: {e}", path.display()))?,
    );
    let mut link = Link::spawn_with_hook(
        cfg.device.clone(),
        cfg.dialect,
        super::frame::DEFAULT_MAX_PAYLOAD,
        None,
        Some(recorder.clone()),
    );
    let mut session = Session::new(cfg.clone(), Instant::now());
    let mut trouble = crate::Trouble::new(cfg.device.to_string());
    let mut until = std::pin::pin!(until);
    loop {
        let wake = session
            .poll_timeout()
            .max(Instant::now() + Duration::from_millis(1));
        tokio::select! {
            event = link.events.recv() => match event {
                None => break,
                Some(LinkEvent::Connected) => session.connected(Instant::now()),
                Some(LinkEvent::Disconnected(why)) => {
                    trouble.failed(&why, Instant::now());
                    session.disconnected(why);
                }
                Some(LinkEvent::Message(message, arrived)) => {
                    trouble.recovered();
                    session.handle_message(&message, arrived);
                }
            },
            _ = tokio::time::sleep_until(wake.into()) => {}
            _ = &mut until => break,
        }
        session.handle_timeout(Instant::now());
        send_actions(&mut session, &link);
    }
    session.stop();
    if send_actions(&mut session, &link) {
        finish_sending(&link).await;
    }
    recorder.finish();
    Ok(Recorded {
        path: recorder.path.clone(),
        frames: recorder.written.load(std::sync::atomic::Ordering::Relaxed),
        dropped: recorder.dropped.load(std::sync::atomic::Ordering::Relaxed),
    })
}

/// Serves `kind`'s settings to dynamic_reconfigure under `~`, for as long as the node
/// runs. The server starts in a task of its own: its first callback waits for the node's
/// loop, which must not be waiting for it.
fn serve_settings(
    node: &Node,
    kind: DeviceKind,
    changes: tokio::sync::mpsc::Sender<Change>,
    live: ConfigWatch,
    map: Settings,
) {
    let node = node.clone();
    let settings = (map.describe)(kind, &live.borrow());
    tokio::spawn(async move {
        let callback = move |settings: udpros::reconfigure::Config, _level: u32| {
            let (changes, live, map) = (changes.clone(), live.clone(), map.clone());
            async move {
                let base = Config::clone(&live.borrow());
                let tried = (map.apply)(&base, &settings);
                let (tx, rx) = tokio::sync::oneshot::channel();
                let applied = if tried == base {
                    base
                } else if changes.send(Change { tried, applied: tx }).await.is_ok() {
                    // The loop answers within CHANGE_TIMEOUT; a node shutting down may not.
                    tokio::time::timeout(CHANGE_TIMEOUT * 2, rx)
                        .await
                        .ok()
                        .and_then(Result::ok)
                        .unwrap_or(base)
                } else {
                    base
                };
                let mut reported = settings;
                (map.report)(&applied, &mut reported);
                reported
            }
        };
        match node.reconfigure_server("~", settings, callback).await {
            Ok(server) => {
                node.shutdown_requested().await;
                drop(server);
            }
            Err(e) => tracing::error!("cannot serve dynamic_reconfigure: {e}"),
        }
    });
}

/// Hands the session's actions to the link; whether there were any.
fn send_actions(session: &mut Session, link: &Link) -> bool {
    let mut any = false;
    while let Some(action) = session.poll_action() {
        any = true;
        match action {
            Action::Send(frame) => link.send(frame),
            Action::Break => {
                let _ = link.out.send(Outgoing::Break);
            }
        }
    }
    any
}
