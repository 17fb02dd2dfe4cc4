//! `ping360_node`: a drop-in for the ROS1 `ping360_sonar` driver (1.4), on `ping_sonar`'s
//! link and session. Its launch files, rviz configs and subscribers work unchanged: the same
//! private parameters with the same defaults, the same three topics under the same absolute
//! names (`/ping360_node/sonar/images`, `…/data`, `…/scan`), `ping360_sonar/SonarEcho` with
//! the same md5sum, the same dynamic_reconfigure settings and ranges, and its emulator
//! switch (`emulated_sonar=true` in the environment) playing udpros's simulated Ping360.
//!
//! Where it differs, on purpose: a scan beam with no return above the threshold is +inf
//! (REP 117), where the driver repeats the last beam's range; messages are stamped when the
//! echo's last byte arrived, not when published; a parameter it does not know is refused by
//! name at start, where the driver ignores it; `~device` also takes `ping_sonar`'s forms
//! (`udp:HOST:PORT`, `discover`, `replay:FILE`, `sim:ping360`).

use super::link::{Link, LinkSpec};
use super::node::{run_with, Config, DeviceType, Front, Ping360Settings, Settings};
use super::session::{ConfigWatch, DeviceState, Echo};
use super::{DeviceKind, SweepPattern};
use crate::Params;
use std::f64::consts::PI;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use udpros::msg::Time;
use udpros::msgs::{ping360_sonar, sensor_msgs, std_msgs};
use udpros::node::{AdvertiseOptions, Node, Publisher};
use udpros::reconfigure::{self as rc, Description, Param};

/// What `--help` prints.
pub const HELP: &str = include_str!("ping360_sonar_help.txt");

/// The frame every message names, as the driver's.
pub const FRAME_ID: &str = "sonar_frame";

/// The driver's parameters (`~name`), and the ones udpros adds; any other private
/// parameter stops the node, naming it.
const PARAMETERS: &[&str] = &[
    "device",
    "baudrate",
    "gain",
    "numberOfSamples",
    "transmitFrequency",
    "sonarRange",
    "speedOfSound",
    "debug",
    "threshold",
    "enableImageTopic",
    "enableScanTopic",
    "enableDataTopic",
    "maxAngle",
    "minAngle",
    "oscillate",
    "step",
    "imgSize",
    "queueSize",
    // dynamic_reconfigure's mirror of its settings (sonar.cfg).
    "range",
    // udpros's own.
    "fec",
    "max_rate",
    "max_rate_per_host",
    "governor",
    "record",
    "replay_rate",
    "replay_loop",
];

/// The node's settings: the session's, and what only this profile has.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The device and how to drive it.
    pub cfg: Config,
    /// `~debug`: print each detection, as the driver does.
    pub debug: bool,
    /// `~enableImageTopic`, `~enableScanTopic`, `~enableDataTopic`.
    pub enable: [bool; 3],
    /// `~minAngle`, `~maxAngle`: the sector, gradians.
    pub angles: (u16, u16),
    /// `~queueSize` of the three publishers.
    pub queue_size: usize,
}

impl Profile {
    /// The driver's defaults for `device`.
    pub fn new(device: LinkSpec) -> Profile {
        let mut cfg = Config::new(device);
        cfg.device_type = DeviceType::Ping360;
        cfg.frame_id = FRAME_ID.into();
        cfg.gain = 0;
        cfg.number_of_samples = Some(200);
        cfg.transmit_frequency = 740;
        cfg.range = 1.0;
        cfg.speed_of_sound = 1500.0;
        cfg.scan_threshold = 200;
        cfg.num_steps = 1;
        cfg.image_size = 500;
        cfg.sweep = SweepPattern::BackAndForth;
        // One transmit per step, as the driver asks.
        cfg.use_auto_transmit = false;
        Profile {
            cfg,
            debug: true,
            enable: [true; 3],
            angles: (0, 400),
            queue_size: 1,
        }
    }

    /// Reads the driver's parameters, refusing what it would not run with (a sector of no
    /// width, a step as wide as the sector, values outside the device's ranges) and
    /// parameters it does not have, each in one line naming it.
    pub async fn from_node(node: &Node) -> Result<Profile, String> {
        refuse_unknown(node).await?;
        let p = Params(node);
        let device = if std::env::var("emulated_sonar").is_ok_and(|v| v == "true") {
            LinkSpec::Sim(DeviceKind::Ping360)
        } else {
            let path: String = p.get("~device", "/dev/ttyUSB0".to_string()).await?;
            let baud = p.within("~baudrate", 115_200u32, 300, 10_000_000).await?;
            device(&path, baud)?
        };
        let mut profile = Profile::new(device);
        let cfg = &mut profile.cfg;
        if let LinkSpec::Replay(replay) = &mut cfg.device {
            let rate: f64 = p.within("~replay_rate", 1.0, 0.01, 100.0).await?;
            replay.speed_permille = (rate * 1000.0).round() as u32;
            replay.looped = p.get("~replay_loop", false).await?;
        }
        cfg.links = p.link_settings().await?;
        let record: String = p.get("~record", String::new()).await?;
        cfg.record = (!record.is_empty()).then(|| record.into());
        // The driver's own graph unless asked: a drop-in publishes what it publishes.
        cfg.frames = p.get("~frames", false).await?;
        cfg.gain = p.within("~gain", 0u32, 0, 2).await?;
        cfg.number_of_samples = Some(p.within("~numberOfSamples", 200u32, 1, 1200).await? as u16);
        cfg.transmit_frequency = p.within("~transmitFrequency", 740u32, 500, 1000).await? as u16;
        cfg.range = f64::from(p.within("~sonarRange", 1u32, 1, 60).await?);
        cfg.speed_of_sound = f64::from(p.within("~speedOfSound", 1500u32, 1000, 2500).await?);
        profile.debug = p.get("~debug", true).await?;
        cfg.scan_threshold = p.within("~threshold", 200u32, 0, 255).await? as u8;
        profile.enable = [
            p.get("~enableImageTopic", true).await?,
            p.get("~enableScanTopic", true).await?,
            p.get("~enableDataTopic", true).await?,
        ];
        let max = p.within("~maxAngle", 400u32, 0, 400).await? as u16;
        let min = p.within("~minAngle", 0u32, 0, 400).await? as u16;
        if min >= max {
            return Err(format!(
                "~minAngle {min} must be below ~maxAngle {max} (gradians)"
            ));
        }
        cfg.sweep = if p.get("~oscillate", true).await? {
            SweepPattern::BackAndForth
        } else {
            SweepPattern::Round
        };
        let step = p.within("~step", 1u32, 1, 10).await?;
        if step >= u32::from(max - min) {
            return Err(format!(
                "~step {step} must be below the sector's width, ~maxAngle - ~minAngle = {}",
                max - min
            ));
        }
        cfg.num_steps = step as u8;
        cfg.image_size = p.within("~imgSize", 500u32, 16, 2000).await?;
        profile.queue_size = p.within("~queueSize", 1u32, 0, 10).await? as usize;
        profile.angles = (min, max);
        cfg.start_angle = f64::from(min) * 0.9;
        cfg.stop_angle = f64::from(max) * 0.9;
        Ok(profile)
    }
}

/// `~device` as the driver takes it (a serial port's path, at `~baudrate`), or in
/// `ping_sonar`'s forms.
fn device(text: &str, baud: u32) -> Result<LinkSpec, String> {
    let ours = ["serial:", "udp:", "sim:", "replay:"]
        .iter()
        .any(|scheme| text.starts_with(scheme))
        || text == "discover";
    if ours {
        return text.parse().map_err(|e| format!("~device: {e}"));
    }
    if text.is_empty() {
        return Err("~device is empty: a serial port (/dev/ttyUSB0) or udp:HOST:PORT".into());
    }
    Ok(LinkSpec::Serial {
        path: text.into(),
        baud,
    })
}

/// Stops the node when a private parameter is set that neither the driver nor udpros has:
/// a typo, or the ROS2 driver's names, would otherwise be ignored without a word.
async fn refuse_unknown(node: &Node) -> Result<(), crate::ParamError> {
    crate::refuse_unknown_parameters(
        node,
        PARAMETERS,
        "ping360_sonar's ROS1 driver (1.4) or of udpros's",
    )
    .await
}

/// Runs `ping360_node` until it is asked to shut down.
pub async fn run(node: Node, profile: Profile) -> Result<(), String> {
    let front = Ping360SonarFront::advertise(&node, &profile).await?;
    run_with(node, profile.cfg, front).await
}

/// The driver's three topics, advertised at once as it does.
struct Ping360SonarFront {
    images: Publisher<sensor_msgs::Image>,
    data: Publisher<ping360_sonar::SonarEcho>,
    scan: Publisher<sensor_msgs::LaserScan>,
    enable: [bool; 3],
    angles: (u16, u16),
    debug: Arc<AtomicBool>,
    image: Vec<u8>,
    image_size: u32,
}

impl Ping360SonarFront {
    async fn advertise(node: &Node, profile: &Profile) -> Result<Ping360SonarFront, String> {
        let opts = AdvertiseOptions {
            // rospy's queue_size 0 is unbounded; ours is bounded by bytes all the same.
            queue_size: if profile.queue_size == 0 {
                usize::MAX
            } else {
                profile.queue_size
            },
            ..profile.cfg.links.options()
        };
        let fail = |e: udpros::node::NodeError| e.to_string();
        let size = profile.cfg.image_size;
        Ok(Ping360SonarFront {
            images: node
                .advertise("/ping360_node/sonar/images", opts.clone())
                .await
                .map_err(fail)?,
            data: node
                .advertise("/ping360_node/sonar/data", opts.clone())
                .await
                .map_err(fail)?,
            scan: node
                .advertise("/ping360_node/sonar/scan", opts)
                .await
                .map_err(fail)?,
            enable: profile.enable,
            angles: profile.angles,
            debug: Arc::new(AtomicBool::new(profile.debug)),
            image: vec![0; (size * size) as usize],
            image_size: size,
        })
    }
}

impl Front for Ping360SonarFront {
    fn hook(&self, _live: ConfigWatch) -> Option<super::link::FrameHook> {
        None
    }

    async fn device_known(&mut self, _node: &Node, _kind: DeviceKind) -> Result<(), String> {
        Ok(()) // advertised at start, as the driver does
    }

    fn echo(&mut self, cfg: &Config, stamp: Time, echo: &Echo, _arrived: Instant) {
        let [image, scan, data] = self.enable;
        let header = || std_msgs::Header {
            seq: 0,
            stamp,
            frame_id: FRAME_ID.into(),
        };
        if data {
            let _ = self.data.publish(&ping360_sonar::SonarEcho {
                header: header(),
                // Gradians, as the driver fills it in.
                angle: f32::from(echo.angle),
                gain: echo.gain_setting,
                number_of_samples: echo.data.len() as u16,
                transmit_frequency: echo.transmit_frequency,
                speed_of_sound: cfg.speed_of_sound.round() as u16,
                range: cfg.range.round().clamp(0.0, 255.0) as u8,
                intensities: echo.data.clone(),
            });
        }
        if scan {
            let resolution = Ping360Settings::resolution(echo.sample_period, cfg.speed_of_sound);
            let found = first_return(&echo.data, cfg.scan_threshold, resolution, cfg.range);
            if let (Some((distance, intensity)), true) = (found, self.debug.load(Ordering::Relaxed))
            {
                println!(
                    "Object at {} grad : {distance}m - {}%",
                    echo.angle,
                    f32::from(intensity) * 100.0 / 255.0
                );
            }
            let (min, max) = self.angles;
            let gradians = |g: f64| (2.0 * PI * g / 400.0) as f32;
            let _ = self.scan.publish(&sensor_msgs::LaserScan {
                header: header(),
                angle_min: gradians(f64::from(min)),
                angle_max: gradians(f64::from(max)),
                angle_increment: gradians(f64::from(cfg.num_steps)),
                time_increment: 0.0,
                scan_time: 0.0,
                range_min: 0.75,
                range_max: cfg.range as f32,
                ranges: vec![found.map_or(f32::INFINITY, |(d, _)| d)],
                intensities: vec![found.map_or(0.0, |(_, i)| f32::from(i))],
            });
        }
        if image {
            if cfg.image_size != self.image_size {
                self.image_size = cfg.image_size;
                self.image = vec![0; (cfg.image_size * cfg.image_size) as usize];
            }
            paint(
                &mut self.image,
                self.image_size,
                echo.angle,
                cfg.num_steps,
                &echo.data,
            );
            if self.images.num_subscribers() > 0 {
                let _ = self.images.publish(&sensor_msgs::Image {
                    header: header(),
                    height: self.image_size,
                    width: self.image_size,
                    encoding: "mono8".into(),
                    is_bigendian: 0,
                    step: self.image_size,
                    data: self.image.clone().into(),
                });
            }
        }
    }

    fn reconfiguring(&mut self, _from: &Config, _to: &Config) {}

    fn diagnostics(&mut self, _: &Node, _: &Config, _: &DeviceState, _: &Link) {
        // The driver publishes none, and a drop-in adds no topic.
    }

    fn settings(&self) -> Settings {
        let debug = self.debug.clone();
        let reported = self.debug.clone();
        Settings {
            describe,
            apply: Arc::new(move |base, settings| apply(base, settings, &debug)),
            report: Arc::new(move |cfg, settings| report(cfg, settings, &reported)),
        }
    }
}

/// The first sample at or above `threshold`, as the driver finds it: its distance (the
/// sample's far edge) and intensity, if that distance lies in 0.75 m..=`range`.
fn first_return(data: &[u8], threshold: u8, resolution: f64, range: f64) -> Option<(f32, u8)> {
    let (i, &v) = data.iter().enumerate().find(|(_, v)| **v >= threshold)?;
    let distance = (i + 1) as f64 * resolution;
    (0.75..=range)
        .contains(&distance)
        .then_some((distance as f32, v))
}

/// The echo at `angle` painted into the driver's fan image, as the driver paints it: from
/// the centre outwards, sample `i` of `size / 2` radii at row `centre + i cos θ`, column
/// `centre + i sin θ`, for 8 angles a step across the `step` gradians the echo stands for.
fn paint(image: &mut [u8], size: u32, angle: u16, step: u8, data: &[u8]) {
    if data.is_empty() || size == 0 {
        return;
    }
    let centre = f64::from(size / 2);
    let radii = centre as usize;
    let per_radius = data.len() as f64 / centre;
    let fans = 8 * usize::from(step.max(1));
    for i in 0..radii {
        // The driver's index, including its wrap of -1 to the last sample at the centre.
        let index = (i as f64 * per_radius - 1.0) as isize;
        let colour = data[index.rem_euclid(data.len() as isize) as usize];
        for k in 0..fans {
            let offset = f64::from(step) * k as f64 / (fans - 1).max(1) as f64;
            let theta = 2.0 * PI * (f64::from(angle) + offset) / 400.0;
            let row = (centre + i as f64 * theta.cos()) as i64;
            let col = (centre + i as f64 * theta.sin()) as i64;
            if (0..i64::from(size)).contains(&row) && (0..i64::from(size)).contains(&col) {
                image[(row * i64::from(size) + col) as usize] = colour;
            }
        }
    }
}

/// sonar.cfg's settings, defaulting to the node's own (clamped into each range).
fn describe(_kind: DeviceKind, cfg: &Config) -> Description {
    let int = |name: &str, v: f64, lo: i32, hi: i32, what: &str| {
        let v = if v.is_nan() {
            lo
        } else {
            (v.round() as i32).clamp(lo, hi)
        };
        Param::int(name, v, lo, hi).description(what)
    };
    let mut d = Description::new();
    d.add(Param::bool("debug", true).description("Display Images"));
    d.add(int("range", cfg.range, 1, 60, "Sonar range (m)"));
    d.add(int(
        "gain",
        f64::from(cfg.gain),
        0,
        2,
        "Receiver Gain (Low:0 , Medium: 1, High: 2)",
    ));
    d.add(int(
        "numberOfSamples",
        f64::from(Ping360Settings::of(cfg).number_of_samples),
        1,
        2000,
        "Number of samples",
    ));
    d.add(int(
        "transmitFrequency",
        f64::from(cfg.transmit_frequency),
        500,
        1000,
        "Transmit Frequency (kHz)",
    ));
    d.add(int(
        "speedOfSound",
        cfg.speed_of_sound,
        1450,
        1550,
        "Speed of sound (m/s)",
    ));
    d.add(int("step", f64::from(cfg.num_steps), 1, 10, "Filling Step"));
    d.add(int("queueSize", 1.0, 0, 10, "Queue Size"));
    d.add(int(
        "threshold",
        f64::from(cfg.scan_threshold),
        0,
        255,
        "Intensity threshold",
    ));
    d
}

/// A dynamic_reconfigure call's settings applied to `base` (and `debug`). `queueSize`
/// changes nothing once the publishers exist, in the driver too: said, not hidden.
fn apply(base: &Config, settings: &rc::Config, debug: &AtomicBool) -> Config {
    let mut cfg = base.clone();
    let int = |name: &str, lo: i32, hi: i32| settings.int(name).map(|v| v.clamp(lo, hi));
    if let Some(v) = int("range", 1, 60) {
        cfg.range = f64::from(v);
    }
    if let Some(v) = int("gain", 0, 2) {
        cfg.gain = v as u32;
    }
    if let Some(v) = int("numberOfSamples", 1, 1200) {
        cfg.number_of_samples = Some(v as u16);
    }
    if let Some(v) = int("transmitFrequency", 500, 1000) {
        cfg.transmit_frequency = v as u16;
    }
    if let Some(v) = int("speedOfSound", 1000, 2500) {
        cfg.speed_of_sound = f64::from(v);
    }
    if let Some(v) = int("step", 1, 10) {
        cfg.num_steps = v as u8;
    }
    if let Some(v) = int("threshold", 0, 255) {
        cfg.scan_threshold = v as u8;
    }
    if let Some(v) = settings.bool("debug") {
        debug.store(v, Ordering::Relaxed);
    }
    cfg
}

/// The node's settings, for the config it reports.
fn report(cfg: &Config, settings: &mut rc::Config, debug: &AtomicBool) {
    settings.set("range", cfg.range.round() as i32);
    settings.set("gain", cfg.gain as i32);
    settings.set(
        "numberOfSamples",
        i32::from(Ping360Settings::of(cfg).number_of_samples),
    );
    settings.set("transmitFrequency", i32::from(cfg.transmit_frequency));
    settings.set("speedOfSound", cfg.speed_of_sound.round() as i32);
    settings.set("step", i32::from(cfg.num_steps));
    settings.set("threshold", i32::from(cfg.scan_threshold));
    settings.set("debug", debug.load(Ordering::Relaxed));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_s_settings_are_valid_and_round_trip() {
        let profile = Profile::new(LinkSpec::Sim(DeviceKind::Ping360));
        let space = describe(DeviceKind::Ping360, &profile.cfg)
            .validate()
            .unwrap();
        let debug = AtomicBool::new(true);
        let mut settings = space.defaults();
        report(&profile.cfg, &mut settings, &debug);
        assert_eq!(settings, space.defaults());
        let mut changed = settings.clone();
        assert!(changed.set("range", 25));
        assert!(changed.set("numberOfSamples", 600));
        assert!(changed.set("debug", false));
        let cfg = apply(&profile.cfg, &changed, &debug);
        assert_eq!(cfg.range, 25.0);
        assert_eq!(Ping360Settings::of(&cfg).number_of_samples, 600);
        assert!(!debug.load(Ordering::Relaxed));
    }

    #[test]
    fn devices_are_paths_or_ping_sonar_s_forms() {
        assert_eq!(
            device("/dev/ttyUSB0", 115200),
            Ok(LinkSpec::Serial {
                path: "/dev/ttyUSB0".into(),
                baud: 115200
            })
        );
        assert_eq!(
            device("sim:ping360", 1),
            Ok(LinkSpec::Sim(DeviceKind::Ping360))
        );
        assert_eq!(device("discover", 1), Ok(LinkSpec::Discover));
        assert!(device("udp:nohost", 1).is_err());
        assert!(device("", 1).is_err());
    }

    #[test]
    fn the_first_return_is_the_driver_s_and_the_fan_is_painted_within_the_image() {
        let mut data = vec![0u8; 200];
        data[99] = 250;
        // Sample 99 at 5 cm a sample is 5 m out.
        assert_eq!(first_return(&data, 200, 0.05, 10.0), Some((5.0, 250)));
        assert_eq!(first_return(&data, 200, 0.05, 4.0), None, "past the range");
        assert_eq!(first_return(&data, 251, 0.05, 10.0), None);
        let mut image = vec![0u8; 100 * 100];
        for angle in (0..400).step_by(7) {
            paint(&mut image, 100, angle, 10, &[255; 1200]);
            paint(&mut image, 100, angle, 1, &[]);
        }
        assert!(image.iter().filter(|p| **p == 255).count() > 5000);
    }
}
