//! The `ping_sonar` node: one Ping1D or Ping360 onto ROS topics. Data is stamped on the
//! arrival of the frame's last byte and published at once; the device is identified,
//! configured and kept streaming by a session that survives link loss.

use super::link::{Link, LinkEvent, Outgoing};
use super::messages::Message;
use super::session::{Action, DeviceState, Echo, Session, CHANGE_TIMEOUT};
pub use super::session::{Config, DeviceType, Ping360Settings};
use super::{draft2017 as draft, Decoded, DeviceKind, Dialect};
use crate::Params;
use bytes::Bytes;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use udpros::msg::Time;
use udpros::msgs::{diagnostic_msgs, sensor_msgs, udpros as umsg};
use udpros::node::{AdvertiseOptions, Node, NodeError, Publisher};

/// What `--help` prints: every parameter (default, range, meaning), topic and service. A
/// test checks that it names every `~` name this module reads or advertises.
pub const HELP: &str = include_str!("help.txt");

impl Config {
    /// Reads `~` parameters, with defaults that work.
    pub async fn from_node(node: &Node) -> Result<Config, String> {
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
        Ok(Config {
            device: device.parse()?,
            device_type,
            dialect,
            frame_id: p.get("~frame_id", "sonar".to_string()).await?,
            // Sound in water is 1400-1600 m/s; anything else is a typo.
            speed_of_sound: p.within("~speed_of_sound", 1500.0, 1000.0, 2500.0).await?,
            range: p.within("~range", 10.0, 0.1, 100.0).await?,
            gain: p.within("~gain", 1u32, 0, 6).await?,
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
        })
    }
}

/// A Ping1D's topics.
struct Ping1dTopics {
    range: Publisher<sensor_msgs::Range>,
    profile: Publisher<umsg::PingProfile>,
}

/// A Ping360's topics.
struct Ping360Topics {
    echo: Publisher<umsg::Ping360Echo>,
    scan: Publisher<sensor_msgs::LaserScan>,
    image: Publisher<sensor_msgs::Image>,
}

/// The node's topics: a device's are advertised once it is known (identified, or named by
/// `~device_type`), so a Ping1D never shows Ping360 topics and the other way round.
struct Publishers {
    ping1d: OnceLock<Ping1dTopics>,
    ping360: OnceLock<Ping360Topics>,
    diagnostics: Publisher<diagnostic_msgs::DiagnosticArray>,
}

impl Publishers {
    /// Advertises `kind`'s topics, the first time only.
    async fn advertise_for(&self, node: &Node, kind: DeviceKind) -> Result<(), NodeError> {
        let opts = AdvertiseOptions::default();
        match kind {
            DeviceKind::Ping1d if self.ping1d.get().is_none() => {
                let topics = Ping1dTopics {
                    range: node.advertise("~range", opts.clone()).await?,
                    profile: node.advertise("~profile", opts).await?,
                };
                let _ = self.ping1d.set(topics);
            }
            DeviceKind::Ping360 if self.ping360.get().is_none() => {
                let topics = Ping360Topics {
                    echo: node.advertise("~echo", opts.clone()).await?,
                    scan: node.advertise("~scan", opts.clone()).await?,
                    image: node.advertise("~image", opts).await?,
                };
                let _ = self.ping360.set(topics);
            }
            _ => {}
        }
        Ok(())
    }
}

/// The session's settings as they change: what the fast path publishes with and what
/// dynamic_reconfigure's changes start from.
type Live = tokio::sync::watch::Receiver<Arc<Config>>;

/// A reconfiguration for the node's loop: the settings to try, and where the settings
/// applied go (refused ones put back).
struct Change {
    tried: Config,
    applied: tokio::sync::oneshot::Sender<Config>,
}

/// The latest data-path latencies, for percentiles in /diagnostics.
#[derive(Debug, Default, Clone)]
struct LatencyWindow {
    samples: std::collections::VecDeque<Duration>,
}

impl LatencyWindow {
    const SIZE: usize = 1000;

    fn record(&mut self, d: Duration) {
        if self.samples.len() == Self::SIZE {
            self.samples.pop_front();
        }
        self.samples.push_back(d);
    }

    fn percentile(&self, p: f64) -> Option<Duration> {
        let mut v: Vec<Duration> = self.samples.iter().copied().collect();
        v.sort();
        v.get(((v.len().max(1) - 1) as f64 * p).round() as usize)
            .copied()
    }
}

/// A sweep being gathered into a LaserScan and an image.
struct Sweep {
    ranges: Vec<f32>,
    intensities: Vec<f32>,
    image: Vec<u8>,
    started: Time,
    last_angle: Option<u16>,
    last_image: Option<Instant>,
}

impl Sweep {
    fn new(image_size: u32, now: Time) -> Sweep {
        Sweep {
            ranges: vec![f32::INFINITY; 400],
            intensities: vec![0.0; 400],
            image: vec![0; (image_size * image_size) as usize],
            started: now,
            last_angle: None,
            last_image: None,
        }
    }
}

/// Runs the node until it is asked to shut down: the link's events feed the
/// [`Session`], whose frames go to the link; Ping360 echoes are published here, Ping1D data
/// by the link's fast path. Once the device is known, its topics are advertised and its
/// settings served to dynamic_reconfigure; a change goes to the device, and what it
/// refuses is put back.
pub async fn run(node: Node, cfg: Config) -> Result<(), NodeError> {
    let pubs = Arc::new(Publishers {
        ping1d: OnceLock::new(),
        ping360: OnceLock::new(),
        diagnostics: node
            .advertise("/diagnostics", AdvertiseOptions::default())
            .await?,
    });
    let mut session = Session::new(cfg.clone(), Instant::now());
    let live = session.watch_config();
    let latency = Arc::new(std::sync::Mutex::new(LatencyWindow::default()));
    let clock = node.clock();
    let hook = fast_path(live.clone(), pubs.clone(), latency.clone(), clock.clone());
    let mut link = Link::spawn_with_hook(
        cfg.device.clone(),
        cfg.dialect,
        super::frame::DEFAULT_MAX_PAYLOAD,
        Some(hook),
    );
    let mut sweep = Sweep::new(cfg.image_size, clock.now());
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
                        let data = matches!(
                            message,
                            Decoded::Current(Message::DeviceData(_) | Message::AutoDeviceData(_))
                        );
                        if let Some(echo) = session.handle_message(&message, arrived) {
                            publish_echo(session.config(), &pubs, &mut sweep, stamp_at(&clock, arrived), &echo);
                        }
                        if data {
                            latency.lock().unwrap_or_else(|e| e.into_inner()).record(arrived.elapsed());
                        }
                    }
                }
            }
            Some(change) = changes.recv(), if answer.is_none() => {
                if change.tried.image_size != session.config().image_size {
                    sweep = Sweep::new(change.tried.image_size, clock.now());
                }
                if session.begin_change(change.tried, Instant::now()) {
                    answer = Some(change.applied);
                }
            }
            _ = tokio::time::sleep_until(wake.into()) => {}
            _ = &mut shutdown => break,
        }
        let now = Instant::now();
        if session.handle_timeout(now) {
            publish_diagnostics(
                &node,
                session.config(),
                &pubs,
                session.device(),
                &link,
                &latency,
            );
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
            pubs.advertise_for(&node, kind).await?;
            if serving.is_none() {
                serve_settings(&node, kind, changes_tx.clone(), live.clone());
            }
            serving = Some(kind);
        }
    }
    session.stop();
    if send_actions(&mut session, &link) {
        tokio::time::sleep(Duration::from_millis(50)).await; // let the last frames leave
    }
    Ok(())
}

/// Serves `kind`'s settings to dynamic_reconfigure under `~`, for as long as the node
/// runs. The server starts in a task of its own: its first callback waits for the node's
/// loop, which must not be waiting for it.
fn serve_settings(
    node: &Node,
    kind: DeviceKind,
    changes: tokio::sync::mpsc::Sender<Change>,
    live: Live,
) {
    use super::reconfigure::{apply, description, report};
    let node = node.clone();
    let settings = description(kind, &live.borrow());
    tokio::spawn(async move {
        let callback = move |settings: udpros::reconfigure::Config, _level: u32| {
            let (changes, live) = (changes.clone(), live.clone());
            async move {
                let base = Config::clone(&live.borrow());
                let tried = apply(&base, &settings);
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
                report(&applied, &mut reported);
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

/// Publishes Ping1D data in the link's task, the moment a frame is decoded: the latency
/// from a frame's last byte to its ROS messages is then decode-and-serialize, with no hop
/// to another task.
fn fast_path(
    live: Live,
    pubs: Arc<Publishers>,
    latency: Arc<std::sync::Mutex<LatencyWindow>>,
    clock: udpros::time::Clock,
) -> super::link::FrameHook {
    Arc::new(move |message: &Decoded, arrived: Instant| {
        let stamp = stamp_at(&clock, arrived);
        let cfg = live.borrow();
        let published = match message {
            Decoded::Draft(draft::DraftMessage::EsProfile(p)) => {
                let scan = (p.start_mm, p.length_mm);
                let confidence = u16::from(p.confidence);
                publish_profile(
                    &cfg,
                    &pubs,
                    stamp,
                    p.distance,
                    confidence,
                    p.pulse_usec,
                    p.ping_number,
                    scan,
                    p.gain_index,
                    p.data.clone(),
                );
                true
            }
            Decoded::Current(Message::Profile(p)) => {
                let scan = (p.scan_start, p.scan_length);
                publish_profile(
                    &cfg,
                    &pubs,
                    stamp,
                    p.distance,
                    p.confidence,
                    p.transmit_duration,
                    p.ping_number,
                    scan,
                    p.gain_setting,
                    p.profile_data.clone(),
                );
                true
            }
            Decoded::Current(Message::Distance(d)) => {
                let scan = (d.scan_start, d.scan_length);
                publish_profile(
                    &cfg,
                    &pubs,
                    stamp,
                    d.distance,
                    d.confidence,
                    d.transmit_duration,
                    d.ping_number,
                    scan,
                    d.gain_setting,
                    Bytes::new(),
                );
                true
            }
            _ => false,
        };
        if published {
            latency
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(arrived.elapsed());
        }
    })
}

/// The node's time (ROS time: sim time under `/use_sim_time`) when the frame's last byte
/// `arrived`.
fn stamp_at(clock: &udpros::time::Clock, arrived: Instant) -> Time {
    clock.now() - udpros::msg::Duration::from(arrived.elapsed())
}

fn header(cfg: &Config, stamp: Time) -> udpros::msgs::std_msgs::Header {
    udpros::msgs::std_msgs::Header {
        seq: 0,
        stamp,
        frame_id: cfg.frame_id.clone(),
    }
}

/// A profile in the units ROS users expect, from either dialect.
#[allow(clippy::too_many_arguments)]
fn publish_profile(
    cfg: &Config,
    pubs: &Publishers,
    stamp: Time,
    distance_mm: u32,
    confidence: u16,
    transmit_us: u16,
    ping_number: u32,
    scan: (u32, u32),
    gain: u32,
    data: Bytes,
) {
    let confidence_f = f32::from(confidence.min(100)) / 100.0;
    let distance = distance_mm as f32 / 1000.0;
    let (min, max) = (scan.0 as f32 / 1000.0, (scan.0 + scan.1) as f32 / 1000.0);
    // REP 117: below min_confidence there is no trustworthy return.
    let range = if f64::from(confidence_f) < cfg.min_confidence {
        f32::INFINITY
    } else {
        distance
    };
    let r = sensor_msgs::Range {
        header: header(cfg, stamp),
        radiation_type: sensor_msgs::Range::ULTRASOUND,
        field_of_view: cfg.field_of_view,
        min_range: min,
        max_range: max,
        range,
    };
    let Some(topics) = pubs.ping1d.get() else {
        return;
    };
    let _ = topics.range.publish(&r);
    if topics.profile.num_subscribers() > 0 {
        let p = umsg::PingProfile {
            header: header(cfg, stamp),
            distance,
            confidence: confidence_f,
            transmit_duration: f32::from(transmit_us) * 1e-6,
            scan_start: min,
            scan_length: scan.1 as f32 / 1000.0,
            speed_of_sound: cfg.speed_of_sound as f32,
            ping_number,
            gain_setting: gain,
            distance_mm,
            confidence_percent: confidence,
            transmit_duration_us: transmit_us,
            scan_start_mm: scan.0,
            scan_length_mm: scan.1,
            profile_data: data,
        };
        let _ = topics.profile.publish(&p);
    }
}

/// Publishes one Ping360 echo, adds it to the sweep's scan and fan image, and publishes
/// those when the sweep ends (the image at its own rate, while someone looks).
fn publish_echo(cfg: &Config, pubs: &Publishers, sweep: &mut Sweep, stamp: Time, echo: &Echo) {
    let Echo {
        angle,
        gain_setting: gain,
        transmit_frequency: frequency,
        transmit_duration: transmit,
        sample_period: period,
        ref data,
    } = *echo;
    let Some(topics) = pubs.ping360.get() else {
        return;
    };
    if data.is_empty() {
        return;
    }
    let resolution = Ping360Settings::resolution(period, cfg.speed_of_sound);
    let range = resolution * data.len() as f64;
    let radians = f64::from(angle) * std::f64::consts::PI / 200.0;
    let echo = umsg::Ping360Echo {
        header: header(cfg, stamp),
        angle: radians as f32,
        angle_gradians: angle,
        gain_setting: gain,
        transmit_frequency: frequency,
        transmit_duration: transmit,
        sample_period: period,
        number_of_samples: data.len() as u16,
        speed_of_sound: cfg.speed_of_sound as f32,
        range: range as f32,
        range_resolution: resolution as f32,
        intensities: data.clone(),
    };
    let _ = topics.echo.publish(&echo);
    // The scan: first return above the threshold (skipping the transmit ringing).
    let slot = usize::from(angle % 400);
    let first = data
        .iter()
        .enumerate()
        .skip(data.len() / 20)
        .find(|(_, v)| **v >= cfg.scan_threshold);
    sweep.ranges[slot] = first.map_or(f32::INFINITY, |(i, _)| ((i + 1) as f64 * resolution) as f32);
    sweep.intensities[slot] = first.map_or(0.0, |(_, v)| f32::from(*v) / 255.0);
    // The fan image, only while someone looks at it.
    if topics.image.num_subscribers() > 0 {
        paint(&mut sweep.image, cfg.image_size, radians, data);
        let period = Duration::from_secs_f64(1.0 / cfg.image_rate.max(0.01));
        if sweep.last_image.is_none_or(|last| last.elapsed() >= period) {
            sweep.last_image = Some(Instant::now());
            let image = sensor_msgs::Image {
                header: header(cfg, stamp),
                height: cfg.image_size,
                width: cfg.image_size,
                encoding: "mono8".into(),
                is_bigendian: 0,
                step: cfg.image_size,
                data: Bytes::copy_from_slice(&sweep.image),
            };
            let _ = topics.image.publish(&image);
        }
    }
    // A sweep ends when the angle wraps (or turns back at a sector's edge).
    let wrapped = sweep
        .last_angle
        .is_some_and(|last| angle < last && last - angle > 200 || angle == last);
    sweep.last_angle = Some(angle);
    if wrapped {
        let scan = sensor_msgs::LaserScan {
            header: header(cfg, sweep.started),
            angle_min: 0.0,
            angle_max: (2.0 * std::f64::consts::PI * 399.0 / 400.0) as f32,
            angle_increment: (2.0 * std::f64::consts::PI / 400.0) as f32,
            time_increment: 0.0,
            scan_time: 0.0,
            range_min: (resolution * data.len() as f64 / 20.0) as f32,
            range_max: range as f32,
            ranges: sweep.ranges.clone(),
            intensities: sweep.intensities.clone(),
        };
        let _ = topics.scan.publish(&scan);
        sweep.started = stamp;
        sweep.ranges.iter_mut().for_each(|r| *r = f32::INFINITY);
        sweep.intensities.iter_mut().for_each(|i| *i = 0.0);
    }
}

/// Paints one bearing of the fan: the sonar at the centre, range to the edge.
fn paint(image: &mut [u8], size: u32, radians: f64, data: &[u8]) {
    let centre = f64::from(size) / 2.0;
    let (s, c) = radians.sin_cos();
    let steps = (centre as usize).max(1);
    for k in 0..steps {
        let r = k as f64;
        let sample = data[(k * data.len() / steps).min(data.len() - 1)];
        for w in [-0.6, 0.0, 0.6] {
            let (ws, wc) = (radians + w * std::f64::consts::PI / 400.0).sin_cos();
            let (x, y) = (
                centre + r * if w == 0.0 { s } else { ws },
                centre - r * if w == 0.0 { c } else { wc },
            );
            if x >= 0.0 && y >= 0.0 && (x as u32) < size && (y as u32) < size {
                image[(y as u32 * size + x as u32) as usize] = sample;
            }
        }
    }
}

fn publish_diagnostics(
    node: &Node,
    cfg: &Config,
    pubs: &Publishers,
    state: &DeviceState,
    link: &Link,
    latency: &std::sync::Mutex<LatencyWindow>,
) {
    let stats = *link.stats.lock().unwrap_or_else(|e| e.into_inner());
    let window = latency.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let _ = pubs
        .diagnostics
        .publish(&diagnostics(node, cfg, state, &stats, &window));
}

fn diagnostics(
    node: &Node,
    cfg: &Config,
    state: &DeviceState,
    stats: &super::frame::DecoderStats,
    latency: &LatencyWindow,
) -> diagnostic_msgs::DiagnosticArray {
    let kv = |k: &str, v: String| diagnostic_msgs::KeyValue {
        key: k.into(),
        value: v,
    };
    let mut values = vec![
        kv("device", cfg.device.to_string()),
        kv("connected", state.connected.to_string()),
        kv(
            "device type",
            match state.kind {
                Some(DeviceKind::Ping1d) => "ping1d",
                Some(DeviceKind::Ping360) => "ping360",
                None => "not identified",
            }
            .into(),
        ),
        kv("firmware", state.firmware.clone()),
        kv("protocol", state.protocol.clone()),
        kv("frames", stats.frames.to_string()),
        kv("checksum errors", stats.checksum_errors.to_string()),
        kv("resyncs", stats.resyncs.to_string()),
        kv("skipped bytes", stats.skipped_bytes.to_string()),
        kv("messages", state.messages.to_string()),
        kv("settings confirmed", state.confirmed.to_string()),
        kv("settings refused", state.refused.to_string()),
    ];
    for (name, p) in [("latency p50 (us)", 0.5), ("latency p99 (us)", 0.99)] {
        if let Some(d) = latency.percentile(p) {
            values.push(kv(name, format!("{:.1}", d.as_secs_f64() * 1e6)));
        }
    }
    let optional = [
        ("processor temperature (C)", state.processor_temperature),
        ("pcb temperature (C)", state.pcb_temperature),
        ("voltage (V)", state.voltage),
    ];
    values.extend(
        optional
            .iter()
            .filter_map(|(k, v)| v.map(|v| kv(k, format!("{v:.2}")))),
    );
    let (level, message) = if !state.connected {
        (
            diagnostic_msgs::DiagnosticStatus::ERROR,
            format!("link down: {}", state.last_error),
        )
    } else if state.kind.is_none() {
        (
            diagnostic_msgs::DiagnosticStatus::WARN,
            "device not identified yet".to_string(),
        )
    } else {
        (
            diagnostic_msgs::DiagnosticStatus::OK,
            "streaming".to_string(),
        )
    };
    diagnostic_msgs::DiagnosticArray {
        header: udpros::msgs::std_msgs::Header {
            stamp: node.now(),
            ..Default::default()
        },
        status: vec![diagnostic_msgs::DiagnosticStatus {
            level,
            name: format!("{}: Ping sonar", node.name()),
            message,
            hardware_id: cfg.device.to_string(),
            values,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping360_settings_follow_ping_viewer() {
        let s = Ping360Settings::for_range(2.0, 1500.0);
        assert_eq!(s.number_of_samples, 1200);
        assert!(s.sample_period >= 80);
        let s = Ping360Settings::for_range(50.0, 1500.0);
        assert_eq!(s.number_of_samples, 1200);
        assert_eq!(s.sample_period, 2222);
        assert!((5..=500).contains(&s.transmit_duration));
        let short = Ping360Settings::for_range(0.75, 1500.0);
        assert!(short.number_of_samples < 1200 && short.sample_period == 80);
    }

    #[test]
    fn ping360_settings_are_total() {
        let odd = [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            5e-324,
            -1.0,
            f64::MAX,
            f64::MIN,
        ];
        for range in odd.iter().chain(&[10.0]) {
            for sos in odd.iter().chain(&[1500.0]) {
                let s = Ping360Settings::for_range(*range, *sos);
                assert!((200..=1200).contains(&s.number_of_samples), "{range} {sos}");
                assert!((80..=40000).contains(&s.sample_period), "{range} {sos}");
                assert!((5..=500).contains(&s.transmit_duration), "{range} {sos}");
            }
        }
        assert_eq!(
            Ping360Settings::for_range(f64::NAN, f64::NAN),
            Ping360Settings::for_range(10.0, 1500.0)
        );
    }
}
