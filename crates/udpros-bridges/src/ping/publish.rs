//! What the `ping_sonar` node publishes and how: its topics per device, the Ping1D fast
//! path (in the link's task, the moment a frame is decoded), Ping360 echoes gathered into
//! a LaserScan and a sweep image, and `/diagnostics`.

use super::frame::{encode_frame, Frame};
use super::link::{FrameHook, Link};
use super::messages::Message;
use super::node::{Config, Ping360Settings};
use super::session::{ConfigWatch, DeviceState, Echo};
use super::{draft2017 as draft, Decoded, DeviceKind};
use crate::LinkSettings;
use bytes::Bytes;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use udpros::msg::Time;
use udpros::msgs::{diagnostic_msgs, sensor_msgs, udpros as umsg};
use udpros::node::{AdvertiseOptions, Node, NodeError, Publisher};

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
pub(super) struct Publishers {
    ping1d: OnceLock<Ping1dTopics>,
    ping360: OnceLock<Ping360Topics>,
    diagnostics: Publisher<diagnostic_msgs::DiagnosticArray>,
    /// How the device's topics are sent (`~fec`, `~max_rate`, `~max_rate_per_host`).
    links: LinkSettings,
}

impl Publishers {
    /// `/diagnostics` now; a device's topics once it is known.
    pub(super) async fn advertise(
        node: &Node,
        links: LinkSettings,
    ) -> Result<Publishers, NodeError> {
        links.apply(node);
        Ok(Publishers {
            ping1d: OnceLock::new(),
            ping360: OnceLock::new(),
            diagnostics: node
                .advertise("/diagnostics", AdvertiseOptions::default())
                .await?,
            links,
        })
    }

    /// Advertises `kind`'s topics, the first time only.
    pub(super) async fn advertise_for(
        &self,
        node: &Node,
        kind: DeviceKind,
    ) -> Result<(), NodeError> {
        let opts = self.links.options();
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

/// The latest data-path latencies, for percentiles in /diagnostics.
#[derive(Debug, Default, Clone)]
pub(super) struct LatencyWindow {
    samples: std::collections::VecDeque<Duration>,
}

impl LatencyWindow {
    const SIZE: usize = 1000;

    pub(super) fn record(&mut self, d: Duration) {
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
pub(super) struct Sweep {
    ranges: Vec<f32>,
    intensities: Vec<f32>,
    image: Vec<u8>,
    started: Time,
    last_angle: Option<u16>,
    last_image: Option<Instant>,
}

impl Sweep {
    pub(super) fn new(image_size: u32, now: Time) -> Sweep {
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

/// Publishes Ping1D data in the link's task, the moment a frame is decoded: the latency
/// from a frame's last byte to its ROS messages is then decode-and-serialize, with no hop
/// to another task.
pub(super) fn fast_path(
    live: ConfigWatch,
    pubs: Arc<Publishers>,
    latency: Arc<std::sync::Mutex<LatencyWindow>>,
    clock: udpros::time::Clock,
) -> FrameHook {
    Arc::new(move |_: &Frame, message: &Decoded, arrived: Instant| {
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

/// `~frames`: every frame the device sends, whole, as `udpros/PingFrame` (built only while
/// someone subscribes, so a recording holds the sonar's own bytes), then `then`, the
/// front's own hook. Stamped, like the data topics, when the frame's last byte arrived.
pub(super) fn with_frames(
    frames: Publisher<umsg::PingFrame>,
    then: Option<FrameHook>,
    live: ConfigWatch,
    clock: udpros::time::Clock,
) -> FrameHook {
    Arc::new(move |frame: &Frame, message: &Decoded, arrived: Instant| {
        if frames.num_subscribers() > 0 {
            let whole = encode_frame(frame.id, frame.src, frame.dst, &frame.payload);
            let _ = frames.publish(&umsg::PingFrame {
                header: header(&live.borrow(), stamp_at(&clock, arrived)),
                message_id: frame.id,
                src_device_id: frame.src,
                dst_device_id: frame.dst,
                frame: whole.into(),
            });
        }
        if let Some(then) = &then {
            then(frame, message, arrived);
        }
    })
}

/// The node's time (ROS time: sim time under `/use_sim_time`) when the frame's last byte
/// `arrived`.
pub(super) fn stamp_at(clock: &udpros::time::Clock, arrived: Instant) -> Time {
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
pub(super) fn publish_echo(
    cfg: &Config,
    pubs: &Publishers,
    sweep: &mut Sweep,
    stamp: Time,
    echo: &Echo,
) {
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
    // The fan image is painted always (a few hundred pixels a ping), so that whoever
    // subscribes sees the whole picture at once, not a sweep's worth of waiting; it is
    // sent only while someone looks.
    paint(&mut sweep.image, cfg.image_size, radians, data);
    if topics.image.num_subscribers() > 0 {
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

pub(super) fn publish_diagnostics(
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
    values.extend(crate::fec_diagnostics(node));
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
