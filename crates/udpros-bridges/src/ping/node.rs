//! The `ping_sonar` node: one Ping1D or Ping360 onto ROS topics. Data is stamped on the
//! arrival of the frame's last byte and published at once; the device is identified,
//! configured and kept streaming by a session that survives link loss.

use super::frame::Frame;
use super::link::{Link, LinkEvent, LinkSpec, Outgoing};
use super::messages::{self as m, Message};
use super::DeviceKind;
use super::{draft2017 as draft, Dialect};
use crate::Params;
use bytes::Bytes;
use std::time::{Duration, Instant};
use udpros::msg::Time;
use udpros::msgs::{diagnostic_msgs, sensor_msgs, udpros as umsg};
use udpros::node::{AdvertiseOptions, Node, NodeError, Publisher};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceType {
    Auto,
    Ping1d,
    Ping360,
}

/// The node's private parameters.
#[derive(Debug, Clone)]
pub struct Config {
    pub device: LinkSpec,
    pub device_type: DeviceType,
    pub dialect: Dialect,
    pub frame_id: String,
    pub speed_of_sound: f64,
    /// Ping1D: scan length (manual mode); Ping360: the range to sample.
    pub range: f64,
    pub gain: u32,
    pub ping_interval: u16,
    pub mode_auto: bool,
    pub min_confidence: f64,
    pub field_of_view: f32,
    pub transmit_frequency: u16,
    pub start_angle: f64,
    pub stop_angle: f64,
    pub num_steps: u8,
    pub scan_threshold: u8,
    pub use_auto_transmit: bool,
    pub image_size: u32,
    pub image_rate: f64,
}

impl Config {
    /// The defaults, for a device.
    pub fn new(device: LinkSpec) -> Config {
        Config {
            device,
            device_type: DeviceType::Auto,
            dialect: Dialect::Current,
            frame_id: "sonar".into(),
            speed_of_sound: 1500.0,
            range: 10.0,
            gain: 1,
            ping_interval: 100,
            mode_auto: true,
            min_confidence: 0.0,
            field_of_view: std::f32::consts::FRAC_PI_6, // Ping1: a 30° beam
            transmit_frequency: 750,
            start_angle: 0.0,
            stop_angle: 360.0,
            num_steps: 1,
            scan_threshold: 100,
            use_auto_transmit: true,
            image_size: 200,
            image_rate: 2.0,
        }
    }

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

/// Ping360 acquisition settings for a range, as ping-viewer derives them (reference §1.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping360Settings {
    pub number_of_samples: u16,
    pub sample_period: u16,
    pub transmit_duration: u16,
}

impl Ping360Settings {
    pub fn for_range(range_m: f64, speed_of_sound: f64) -> Ping360Settings {
        let tick = 25e-9;
        let mut samples = 1200u16;
        let period = |n: u16| 2.0 * range_m / (f64::from(n) * speed_of_sound * tick);
        while period(samples) < 80.0 && samples > 200 {
            samples -= 1;
        }
        let sample_period = period(samples).round().clamp(80.0, 40000.0) as u16;
        let period_us = f64::from(sample_period) * tick * 1e6;
        let tx = (8000.0 * range_m / speed_of_sound).max(2.5 * period_us);
        let transmit_duration = tx.clamp(5.0, 500f64.min(64.0 * period_us)).round() as u16;
        Ping360Settings {
            number_of_samples: samples,
            sample_period,
            transmit_duration,
        }
    }

    /// Metres between samples.
    pub fn resolution(sample_period: u16, speed_of_sound: f64) -> f64 {
        f64::from(sample_period) * 25e-9 * speed_of_sound / 2.0
    }
}

struct Publishers {
    range: Publisher<sensor_msgs::Range>,
    profile: Publisher<umsg::PingProfile>,
    echo: Publisher<umsg::Ping360Echo>,
    scan: Publisher<sensor_msgs::LaserScan>,
    image: Publisher<sensor_msgs::Image>,
    diagnostics: Publisher<diagnostic_msgs::DiagnosticArray>,
}

/// What the node knows of its device, for diagnostics.
#[derive(Debug, Default, Clone)]
struct DeviceState {
    connected: bool,
    kind: Option<DeviceKind>,
    firmware: String,
    protocol: String,
    processor_temperature: Option<f64>,
    pcb_temperature: Option<f64>,
    voltage: Option<f64>,
    messages: u64,
    last_error: String,
    /// (major, minor, patch) from device_information.
    firmware_version: Option<(u8, u8, u8)>,
    /// Settings sent and not yet confirmed by ACK or read-back.
    pending: Vec<PendingSet>,
    confirmed: u32,
    refused: u32,
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

/// A setting sent to the device: confirmed by its ACK, refused by its NACK, else read back
/// (as brping does) and compared.
#[derive(Debug, Clone)]
struct PendingSet {
    set_id: u16,
    /// What reading the setting back must return.
    expected: Message,
    deadline: Instant,
    read_back: bool,
}

/// How long the device has to ACK a setting, or to answer its read-back.
const SET_TIMEOUT: Duration = Duration::from_millis(250);

impl DeviceState {
    /// Whether the firmware streams `auto_transmit` (newer than 3.3.0).
    fn has_auto_transmit(&self) -> bool {
        self.firmware_version.is_some_and(|v| v > (3, 3, 0))
    }

    fn settle(&mut self, set_id: u16, ok: bool, why: &str) {
        if let Some(i) = self.pending.iter().position(|p| p.set_id == set_id) {
            self.pending.remove(i);
            if ok {
                self.confirmed += 1;
            } else {
                self.refused += 1;
                tracing::warn!("the device did not take setting {set_id}: {why}");
            }
        }
    }

    /// A reply that may be the read-back of a pending setting.
    fn read_back(&mut self, reply: &Message) {
        let Some(i) = self
            .pending
            .iter()
            .position(|p| p.read_back && p.expected.id() == reply.id())
        else {
            return;
        };
        let pending = self.pending[i].clone();
        let same = &pending.expected == reply;
        self.settle(pending.set_id, same, &format!("it reads back {reply:?}"));
    }

    /// Read-backs for settings past their ACK deadline; gives up on the silent.
    fn expire(&mut self, link: &Link, now: Instant) {
        let mut silent = Vec::new();
        for p in self.pending.iter_mut().filter(|p| p.deadline <= now) {
            if p.read_back {
                silent.push(p.set_id);
            } else {
                p.read_back = true;
                p.deadline = now + SET_TIMEOUT;
                link.send(
                    Message::GeneralRequest(m::GeneralRequest {
                        requested_id: p.expected.id(),
                    })
                    .to_frame(),
                );
            }
        }
        for id in silent {
            self.settle(id, false, "no ACK and no answer to reading it back");
        }
    }
}

/// A sweep being gathered into a LaserScan and an image.
struct Sweep {
    ranges: Vec<f32>,
    intensities: Vec<f32>,
    image: Vec<u8>,
    started: Time,
    last_angle: Option<u16>,
    last_image: Instant,
}

pub async fn run(node: Node, cfg: Config) -> Result<(), NodeError> {
    let opts = AdvertiseOptions::default();
    let pubs = std::sync::Arc::new(Publishers {
        range: node.advertise("~range", opts.clone()).await?,
        profile: node.advertise("~profile", opts.clone()).await?,
        echo: node.advertise("~echo", opts.clone()).await?,
        scan: node.advertise("~scan", opts.clone()).await?,
        image: node.advertise("~image", opts.clone()).await?,
        diagnostics: node.advertise("/diagnostics", opts).await?,
    });
    let latency = std::sync::Arc::new(std::sync::Mutex::new(LatencyWindow::default()));
    let hook = fast_path(cfg.clone(), pubs.clone(), latency.clone());
    let mut link = Link::spawn_with_hook(
        cfg.device.clone(),
        cfg.dialect,
        super::frame::DEFAULT_MAX_PAYLOAD,
        Some(hook),
    );
    let mut state = DeviceState::default();
    let mut sweep = Sweep {
        ranges: vec![f32::INFINITY; 400],
        intensities: vec![0.0; 400],
        image: vec![0; (cfg.image_size * cfg.image_size) as usize],
        started: Time::now(),
        last_angle: None,
        last_image: Instant::now() - Duration::from_secs(3600),
    };
    let mut identify_at = Instant::now();
    let mut configured = false;
    let mut last_data = Instant::now();
    let mut next_poll = Instant::now();
    let mut next_diag = Instant::now() + Duration::from_secs(1);
    let mut trouble = crate::Trouble::new(cfg.device.to_string());
    let mut awaiting_360_reply: Option<Instant> = None;
    let mut angle: u16 = angle_grad(cfg.start_angle);
    let mut direction: i32 = 1;
    let settings = Ping360Settings::for_range(cfg.range, cfg.speed_of_sound);
    let mut shutdown = std::pin::pin!(node.shutdown_requested());
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    loop {
        tokio::select! {
            event = link.events.recv() => {
                let Some(event) = event else { break };
                match event {
                    LinkEvent::Connected => {
                        state.connected = true;
                        configured = false;
                        identify_at = Instant::now();
                        if state.kind == Some(DeviceKind::Ping360) || cfg.device_type == DeviceType::Ping360 {
                            let _ = link.out.send(Outgoing::Break);
                        }
                    }
                    LinkEvent::Disconnected(why) => {
                        trouble.failed(&why, Instant::now());
                        state.connected = false;
                        state.last_error = why;
                        awaiting_360_reply = None;
                    }
                    LinkEvent::Frame(frame, arrived) => {
                        trouble.recovered();
                        state.messages += 1;
                        last_data = Instant::now();
                        let stamp = stamp_at(arrived);
                        let data = matches!(frame.id, m::DeviceData::ID | m::AutoDeviceData::ID);
                        handle_frame(&cfg, &pubs, &mut state, &mut sweep, frame, stamp, &mut awaiting_360_reply);
                        if data {
                            latency.lock().unwrap_or_else(|e| e.into_inner()).record(arrived.elapsed());
                        }
                    }
                }
            }
            _ = tick.tick() => {}
            _ = &mut shutdown => break,
        }
        let now = Instant::now();
        if now >= next_diag && (!state.connected || state.kind.is_none()) {
            // Diagnostics tell a device that does not answer, too.
            next_diag = now + Duration::from_secs(1);
            publish_diagnostics(&node, &cfg, &pubs, &state, &link, &latency);
        }
        if !state.connected {
            continue;
        }
        // Identify (and keep asking until the device answers).
        if state.kind.is_none() {
            if now >= identify_at {
                identify(&link, &cfg);
                identify_at = now + Duration::from_millis(300);
            }
            continue;
        }
        let kind = state.kind.unwrap_or(DeviceKind::Ping1d);
        if !configured {
            state.pending = configure(
                &link,
                &cfg,
                kind,
                &settings,
                use_auto_transmit(&cfg, &state),
            );
            configured = true;
            next_poll = now + Duration::from_millis(u64::from(cfg.ping_interval) * 3 + 300);
            last_data = now;
        }
        state.expire(&link, now);
        match kind {
            DeviceKind::Ping1d => {
                // Streaming stalled (or a device without continuous mode): poll.
                if now >= next_poll
                    && last_data.elapsed()
                        > Duration::from_millis(u64::from(cfg.ping_interval) * 3 + 200)
                {
                    poll_ping1d(&link, &cfg);
                    next_poll = now + Duration::from_millis(u64::from(cfg.ping_interval));
                }
            }
            DeviceKind::Ping360 if !use_auto_transmit(&cfg, &state) => {
                let waiting = awaiting_360_reply
                    .is_some_and(|sent| sent.elapsed() < Duration::from_millis(1500));
                if !waiting {
                    let t = m::Transducer {
                        mode: 1,
                        gain_setting: cfg.gain.min(2) as u8,
                        angle,
                        transmit_duration: settings.transmit_duration,
                        sample_period: settings.sample_period,
                        transmit_frequency: cfg.transmit_frequency,
                        number_of_samples: settings.number_of_samples,
                        transmit: 1,
                        reserved: 0,
                    };
                    link.send(Message::Transducer(t).to_frame());
                    awaiting_360_reply = Some(now);
                    angle = super::sweep_step(
                        angle,
                        angle_grad(cfg.start_angle),
                        angle_grad(cfg.stop_angle),
                        cfg.num_steps,
                        &mut direction,
                    );
                }
            }
            DeviceKind::Ping360 => {
                if last_data.elapsed() > Duration::from_secs(2) {
                    configured = false; // restart auto-transmit
                }
            }
        }
        if now >= next_diag {
            next_diag = now + Duration::from_secs(1);
            if kind == DeviceKind::Ping1d && cfg.dialect == Dialect::Current {
                for id in [
                    m::ProcessorTemperature::ID,
                    m::PcbTemperature::ID,
                    m::Voltage5::ID,
                ] {
                    link.send(
                        Message::GeneralRequest(m::GeneralRequest { requested_id: id }).to_frame(),
                    );
                }
            }
            publish_diagnostics(&node, &cfg, &pubs, &state, &link, &latency);
        }
    }
    if state.kind == Some(DeviceKind::Ping360) {
        link.send(Message::MotorOff(m::MotorOff {}).to_frame());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Publishes Ping1D data in the link's task, the moment a frame is decoded: the latency
/// from a frame's last byte to its ROS messages is then decode-and-serialize, with no hop
/// to another task.
fn fast_path(
    cfg: Config,
    pubs: std::sync::Arc<Publishers>,
    latency: std::sync::Arc<std::sync::Mutex<LatencyWindow>>,
) -> super::link::FrameHook {
    std::sync::Arc::new(move |frame: &Frame, arrived: Instant| {
        let stamp = stamp_at(arrived);
        let published = match cfg.dialect {
            Dialect::Draft2017 => match draft::DraftMessage::decode(frame.id, &frame.payload) {
                Ok(draft::DraftMessage::EsProfile(p)) => {
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
                        p.data,
                    );
                    true
                }
                _ => false,
            },
            Dialect::Current => match Message::decode(frame.id, &frame.payload) {
                Ok(Message::Profile(p)) => {
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
                        p.profile_data,
                    );
                    true
                }
                Ok(Message::Distance(d)) => {
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
            },
        };
        if published {
            latency
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(arrived.elapsed());
        }
    })
}

fn stamp_at(arrived: Instant) -> Time {
    let now = Time::now().as_nanos();
    Time::from_nanos(now.saturating_sub(arrived.elapsed().as_nanos() as u64))
}

fn angle_grad(degrees: f64) -> u16 {
    ((degrees / 0.9).round() as i64).rem_euclid(400) as u16
}

/// Identification: protocol_version and device_information (harmless on every firmware);
/// in draft mode, the draft's version request, but only while the device does not answer
/// the current protocol.
fn identify(link: &Link, cfg: &Config) {
    let request = |id| Message::GeneralRequest(m::GeneralRequest { requested_id: id }).to_frame();
    link.send(request(m::ProtocolVersion::ID));
    link.send(request(m::DeviceInformation::ID));
    match cfg.dialect {
        // Very old current-set firmware answers only the legacy firmware_version request.
        Dialect::Current => link.send(super::encode_frame(m::FirmwareVersion::ID, 0, 0, &[])),
        Dialect::Draft2017 => link.send(
            draft::DraftMessage::GenCmdRequest(draft::GenCmdRequest { request_id: 101 }).to_frame(),
        ),
    }
}

/// Auto-transmit needs firmware newer than 3.3.0 and a link fast enough for its stream
/// (UDP, or serial at 921600 baud or more).
fn use_auto_transmit(cfg: &Config, state: &DeviceState) -> bool {
    let fast_link = !matches!(cfg.device, LinkSpec::Serial { baud, .. } if baud < 921_600);
    cfg.use_auto_transmit && fast_link && state.has_auto_transmit()
}

/// Sends the configuration; returns the settings to confirm.
fn configure(
    link: &Link,
    cfg: &Config,
    kind: DeviceKind,
    settings: &Ping360Settings,
    auto_transmit: bool,
) -> Vec<PendingSet> {
    let mm = |metres: f64| (metres * 1000.0).round().max(0.0) as u32;
    let mut pending = Vec::new();
    let deadline = Instant::now() + SET_TIMEOUT;
    match (kind, cfg.dialect) {
        (DeviceKind::Ping1d, Dialect::Current) => {
            let speed = mm(cfg.speed_of_sound);
            let auto = u8::from(cfg.mode_auto);
            let interval = cfg.ping_interval;
            let mut sets: Vec<(Message, Message)> = vec![
                (
                    m::SetSpeedOfSound {
                        speed_of_sound: speed,
                    }
                    .into(),
                    m::SpeedOfSound {
                        speed_of_sound: speed,
                    }
                    .into(),
                ),
                (
                    m::SetModeAuto { mode_auto: auto }.into(),
                    m::ModeAuto { mode_auto: auto }.into(),
                ),
                (
                    m::SetPingInterval {
                        ping_interval: interval,
                    }
                    .into(),
                    m::PingInterval {
                        ping_interval: interval,
                    }
                    .into(),
                ),
            ];
            if !cfg.mode_auto {
                let length = mm(cfg.range).max(1000);
                let gain = cfg.gain.min(255) as u8;
                let range = (
                    m::SetRange {
                        scan_start: 0,
                        scan_length: length,
                    }
                    .into(),
                    m::Range {
                        scan_start: 0,
                        scan_length: length,
                    }
                    .into(),
                );
                sets.push(range);
                sets.push((
                    m::SetGainSetting { gain_setting: gain }.into(),
                    m::GainSetting {
                        gain_setting: u32::from(gain),
                    }
                    .into(),
                ));
            }
            for (set, expected) in sets {
                link.send(set.to_frame());
                pending.push(PendingSet {
                    set_id: set.id(),
                    expected,
                    deadline,
                    read_back: false,
                });
            }
            link.send(
                Message::ContinuousStart(m::ContinuousStart { id: m::Profile::ID }).to_frame(),
            );
        }
        (DeviceKind::Ping1d, Dialect::Draft2017) => {
            let sets: Vec<draft::DraftMessage> = vec![
                draft::SonarSetVelocity {
                    c_water: mm(cfg.speed_of_sound),
                }
                .into(),
                draft::EsMode {
                    auto_manual: u8::from(cfg.mode_auto),
                }
                .into(),
                draft::EsRate {
                    msec_per_ping: cfg.ping_interval,
                }
                .into(),
            ];
            for message in sets {
                link.send(message.to_frame());
            }
        }
        (DeviceKind::Ping360, _) if auto_transmit => {
            let _ = link.out.send(Outgoing::Break);
            let a = m::AutoTransmit {
                mode: 1,
                gain_setting: cfg.gain.min(2) as u8,
                transmit_duration: settings.transmit_duration,
                sample_period: settings.sample_period,
                transmit_frequency: cfg.transmit_frequency,
                number_of_samples: settings.number_of_samples,
                start_angle: angle_grad(cfg.start_angle),
                stop_angle: angle_grad(cfg.stop_angle).max(1) - u16::from(cfg.stop_angle >= 360.0),
                num_steps: cfg.num_steps,
                delay: 0,
            };
            link.send(Message::AutoTransmit(a).to_frame());
        }
        (DeviceKind::Ping360, _) => {}
    }
    pending
}

fn poll_ping1d(link: &Link, cfg: &Config) {
    match cfg.dialect {
        Dialect::Current => link.send(
            Message::GeneralRequest(m::GeneralRequest {
                requested_id: m::Profile::ID,
            })
            .to_frame(),
        ),
        Dialect::Draft2017 => link.send(
            draft::DraftMessage::GenCmdRequest(draft::GenCmdRequest { request_id: 1102 })
                .to_frame(),
        ),
    }
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
    let _ = pubs.range.publish(&r);
    if pubs.profile.num_subscribers() > 0 {
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
        let _ = pubs.profile.publish(&p);
    }
}

#[allow(clippy::too_many_arguments)]
fn handle_frame(
    cfg: &Config,
    pubs: &Publishers,
    state: &mut DeviceState,
    sweep: &mut Sweep,
    frame: Frame,
    stamp: Time,
    awaiting: &mut Option<Instant>,
) {
    if cfg.dialect == Dialect::Draft2017 {
        if let Ok(msg) = draft::DraftMessage::decode(frame.id, &frame.payload) {
            match msg {
                draft::DraftMessage::GenGetVersion(v) => {
                    state.kind = Some(DeviceKind::Ping1d);
                    state.firmware = format!(
                        "{}.{} (2017 draft protocol)",
                        v.fw_version_major, v.fw_version_minor
                    );
                }
                draft::DraftMessage::EsProfile(_) => {} // published by the fast path
                _ => {}
            }
            return;
        }
    }
    let Ok(msg) = Message::decode(frame.id, &frame.payload) else {
        return; // another family's message, or damaged: counted by the decoder
    };
    match msg {
        Message::ProtocolVersion(v) => {
            state.protocol = format!(
                "{}.{}.{}",
                v.version_major, v.version_minor, v.version_patch
            );
            if cfg.dialect == Dialect::Draft2017 {
                tracing::error!(
                    "the device answers the current Ping protocol ({}); ~dialect draft2017 refused",
                    state.protocol
                );
            }
        }
        Message::DeviceInformation(i) => {
            state.firmware = format!(
                "{}.{}.{}",
                i.firmware_version_major, i.firmware_version_minor, i.firmware_version_patch
            );
            state.kind = Some(match (cfg.device_type, i.device_type) {
                (DeviceType::Ping360, _) | (DeviceType::Auto, 2) => DeviceKind::Ping360,
                _ => DeviceKind::Ping1d,
            });
        }
        Message::FirmwareVersion(v) if state.kind.is_none() => {
            state.firmware = format!("{}.{}", v.firmware_version_major, v.firmware_version_minor);
            state.kind = Some(if cfg.device_type == DeviceType::Ping360 {
                DeviceKind::Ping360
            } else {
                DeviceKind::Ping1d
            });
        }
        // Published by the link's fast path.
        Message::Profile(_) | Message::Distance(_) => {}
        Message::ProcessorTemperature(t) => {
            state.processor_temperature = Some(f64::from(t.processor_temperature) / 100.0)
        }
        Message::PcbTemperature(t) => {
            state.pcb_temperature = Some(f64::from(t.pcb_temperature) / 100.0)
        }
        Message::Voltage5(v) => state.voltage = Some(f64::from(v.voltage_5) / 1000.0),
        Message::Ack(a) => state.settle(a.acked_id, true, ""),
        Message::Nack(n) => {
            tracing::warn!("device refused message {}: {}", n.nacked_id, n.nack_message);
            state.settle(n.nacked_id, false, &n.nack_message);
        }
        ref reply @ (Message::SpeedOfSound(_)
        | Message::ModeAuto(_)
        | Message::PingInterval(_)
        | Message::Range(_)
        | Message::GainSetting(_)) => state.read_back(reply),
        Message::DeviceData(d) => {
            *awaiting = None;
            publish_echo(
                cfg,
                pubs,
                sweep,
                stamp,
                d.angle,
                d.gain_setting,
                d.transmit_frequency,
                d.transmit_duration,
                d.sample_period,
                d.data,
            );
        }
        Message::AutoDeviceData(d) => {
            publish_echo(
                cfg,
                pubs,
                sweep,
                stamp,
                d.angle,
                d.gain_setting,
                d.transmit_frequency,
                d.transmit_duration,
                d.sample_period,
                d.data,
            );
        }
        _ => {}
    }
}

#[allow(clippy::too_many_arguments)]
fn publish_echo(
    cfg: &Config,
    pubs: &Publishers,
    sweep: &mut Sweep,
    stamp: Time,
    angle: u16,
    gain: u8,
    frequency: u16,
    transmit: u16,
    period: u16,
    data: Bytes,
) {
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
    let _ = pubs.echo.publish(&echo);
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
    if pubs.image.num_subscribers() > 0 {
        paint(&mut sweep.image, cfg.image_size, radians, &data);
        let period = Duration::from_secs_f64(1.0 / cfg.image_rate.max(0.01));
        if sweep.last_image.elapsed() >= period {
            sweep.last_image = Instant::now();
            let image = sensor_msgs::Image {
                header: header(cfg, stamp),
                height: cfg.image_size,
                width: cfg.image_size,
                encoding: "mono8".into(),
                is_bigendian: 0,
                step: cfg.image_size,
                data: Bytes::copy_from_slice(&sweep.image),
            };
            let _ = pubs.image.publish(&image);
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
        let _ = pubs.scan.publish(&scan);
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
            stamp: Time::now(),
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
}
