//! The node's settings as the session applies them: the parameters ([`Config`]), the
//! Ping360 acquisition settings a range implies, and the set messages a Ping1D is
//! configured with (each with what reading it back returns).

use super::link::LinkSpec;
use super::messages::{self as m, Message};
use super::Dialect;

/// Which device the node expects (`~device_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceType {
    /// Whatever the device says it is.
    Auto,
    /// A Ping1D, whatever it says.
    Ping1d,
    /// A Ping360, whatever it says (old firmware does not say).
    Ping360,
}

/// The node's private parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where the device is (`~device`).
    pub device: LinkSpec,
    /// `~fec`, `~max_rate` and `~max_rate_per_host`: how the topics go to their
    /// subscribers.
    pub links: crate::LinkSettings,
    /// `~device_type`.
    pub device_type: DeviceType,
    /// `~dialect`: the current protocol or the 2017 draft.
    pub dialect: Dialect,
    /// `~frame_id` of the published headers.
    pub frame_id: String,
    /// `~speed_of_sound`, m/s.
    pub speed_of_sound: f64,
    /// Ping1D: scan length (manual mode); Ping360: the range to sample.
    pub range: f64,
    /// `~gain`: Ping1D gain index 0-6, Ping360 0-2.
    pub gain: u32,
    /// `~ping_interval`, ms between Ping1D pings.
    pub ping_interval: u16,
    /// `~mode_auto`: the Ping1D chooses range and gain itself.
    pub mode_auto: bool,
    /// `~min_confidence`: below it, `range` is reported as +inf (REP 117).
    pub min_confidence: f64,
    /// `~field_of_view` of `sensor_msgs/Range`, radians.
    pub field_of_view: f32,
    /// `~transmit_frequency` of the Ping360, kHz.
    pub transmit_frequency: u16,
    /// `~start_angle` of the Ping360 sector, degrees.
    pub start_angle: f64,
    /// `~stop_angle` of the Ping360 sector, degrees.
    pub stop_angle: f64,
    /// `~num_steps`: gradians between Ping360 transmits.
    pub num_steps: u8,
    /// `~scan_threshold`: the intensity that counts as the first return in the scan.
    pub scan_threshold: u8,
    /// `~use_auto_transmit`: let a Ping360 that can sweep by itself do so.
    pub use_auto_transmit: bool,
    /// `~image_size`: pixels of the fan image's side.
    pub image_size: u32,
    /// `~image_rate`: fan images per second, while subscribed.
    pub image_rate: f64,
    /// `~record`: a Ping Viewer log of everything the device sends.
    pub record: Option<std::path::PathBuf>,
    /// `~frames`: publish every frame the device sends, whole, on `~frames`
    /// (`udpros/PingFrame`), for recordings.
    pub frames: bool,
    /// How a Ping360 sweep goes round (ping360_sonar's `oscillate`).
    pub sweep: super::SweepPattern,
    /// Ping360 samples per transmit as asked (ping360_sonar's `numberOfSamples`); else as
    /// many as the range allows, up to 1200, as Ping Viewer takes.
    pub number_of_samples: Option<u16>,
}

impl Config {
    /// The defaults, for a device.
    pub fn new(device: LinkSpec) -> Config {
        Config {
            device,
            links: crate::LinkSettings::default(),
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
            record: None,
            frames: true,
            sweep: super::SweepPattern::Natural,
            number_of_samples: None,
        }
    }
}

/// Ping360 acquisition settings for a range, as ping-viewer derives them (reference §1.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping360Settings {
    /// Samples per transmit.
    pub number_of_samples: u16,
    /// Sample period, in 25 ns ticks.
    pub sample_period: u16,
    /// Transmit duration, µs.
    pub transmit_duration: u16,
}

impl Ping360Settings {
    /// The settings that sample out to `range_m` metres. Total: the node's settings are
    /// checked where they enter, but a value outside the Ping360's range (or not a number)
    /// is taken here as the nearest it has (10 m and 1500 m/s for NaN), never a panic.
    pub fn for_range(range_m: f64, speed_of_sound: f64) -> Ping360Settings {
        Ping360Settings::sampled(range_m, speed_of_sound, None)
    }

    /// The settings `cfg` asks for: its number of samples if it names one (the sample
    /// period then follows from the range, as ping360_sonar computes it), else as
    /// [`for_range`](Ping360Settings::for_range).
    pub fn of(cfg: &Config) -> Ping360Settings {
        Ping360Settings::sampled(cfg.range, cfg.speed_of_sound, cfg.number_of_samples)
    }

    fn sampled(range_m: f64, speed_of_sound: f64, samples: Option<u16>) -> Ping360Settings {
        let sane = |v: f64, lo: f64, hi: f64, fallback: f64| {
            if v.is_nan() {
                fallback
            } else {
                v.clamp(lo, hi)
            }
        };
        let range_m = sane(range_m, 0.1, 100.0, 10.0);
        let speed_of_sound = sane(speed_of_sound, 1000.0, 2500.0, 1500.0);
        let tick = 25e-9;
        let period = |n: u16| 2.0 * range_m / (f64::from(n) * speed_of_sound * tick);
        let samples = match samples {
            Some(n) => n.clamp(1, 1200),
            None => {
                let mut n = 1200u16;
                while period(n) < 80.0 && n > 200 {
                    n -= 1;
                }
                n
            }
        };
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

/// A Ping1D's settings in the current protocol, each with what reading it back returns.
pub(super) fn ping1d_settings(cfg: &Config) -> Vec<(Message, Message)> {
    let mm = |metres: f64| (metres * 1000.0).round().max(0.0) as u32;
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
        // Sent as asked: a Ping1D refuses under 1 m (NACK), and the refusal is reported
        // and undone instead of the setting being changed behind the user's back.
        let length = mm(cfg.range);
        let gain = cfg.gain.min(255) as u8;
        sets.push((
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
        ));
        sets.push((
            m::SetGainSetting { gain_setting: gain }.into(),
            m::GainSetting {
                gain_setting: u32::from(gain),
            }
            .into(),
        ));
    }
    sets
}

/// Puts the setting that the set message `set_id` carries back as in `before`.
pub(super) fn revert(cfg: &mut Config, before: &Config, set_id: u16) {
    match set_id {
        m::SetSpeedOfSound::ID => cfg.speed_of_sound = before.speed_of_sound,
        m::SetModeAuto::ID => cfg.mode_auto = before.mode_auto,
        m::SetPingInterval::ID => cfg.ping_interval = before.ping_interval,
        m::SetRange::ID => cfg.range = before.range,
        m::SetGainSetting::ID => cfg.gain = before.gain,
        _ => {}
    }
}

/// The name of the setting a set message carries, for the log.
pub(super) fn setting_of(set_id: u16) -> &'static str {
    match set_id {
        m::SetSpeedOfSound::ID => "speed_of_sound",
        m::SetModeAuto::ID => "mode_auto",
        m::SetPingInterval::ID => "ping_interval",
        m::SetRange::ID => "range",
        m::SetGainSetting::ID => "gain",
        _ => "a setting",
    }
}

/// Degrees as the Ping360's gradians (400 a turn).
pub(crate) fn angle_grad(degrees: f64) -> u16 {
    ((degrees / 0.9).round() as i64).rem_euclid(400) as u16
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
