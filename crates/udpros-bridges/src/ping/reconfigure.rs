//! The `ping_sonar` settings that dynamic_reconfigure changes while the node runs: which
//! ones each device has, their ranges and levels, and the way between them and [`Config`].

use super::session::Config;
use super::DeviceKind;
use udpros::reconfigure::{self as rc, Choice, Description, GroupId, GroupKind, Param};

/// Level of a setting the device takes (sent, and confirmed by ACK or read-back).
pub const LEVEL_DEVICE: u32 = 1;
/// Level of a setting the node applies itself (publishing only).
pub const LEVEL_NODE: u32 = 2;

/// The reconfigurable settings of `kind`, with the node's settings as it started for
/// defaults (clamped into each range), so a node run with a [`Config`] of its own starts
/// from that config, not from the built-in one.
pub fn description(kind: DeviceKind, defaults: &Config) -> Description {
    // The node's values, clamped into each range (a config made in code may lie outside).
    let double = |name: &str, v: f64, lo: f64, hi: f64| {
        Param::double(name, if v.is_nan() { lo } else { v.clamp(lo, hi) }, lo, hi)
    };
    let int = |name: &str, v: i64, lo: i32, hi: i32| {
        Param::int(name, v.clamp(lo.into(), hi.into()) as i32, lo, hi)
    };
    let device = |p: Param| p.level(LEVEL_DEVICE);
    let node = |p: Param| p.level(LEVEL_NODE);
    // Both devices have it, alike.
    let speed_of_sound = || {
        device(double(
            "speed_of_sound",
            defaults.speed_of_sound,
            1000.0,
            2500.0,
        ))
        .description("m/s")
    };
    let mut d = Description::new();
    match kind {
        DeviceKind::Ping1d => {
            d.add(device(Param::bool("mode_auto", defaults.mode_auto)).description(
                "the device chooses scan range and gain itself; off: range and gain below apply",
            ));
            d.add(
                device(double("range", defaults.range, 0.1, 100.0))
                    .description("scan length from the transducer, m (manual mode; 1 m and up)"),
            );
            d.add(
                device(int("gain", i64::from(defaults.gain), 0, 6)).description(
                    "gain index (manual mode): 0.6, 1.8, 5.5, 12.9, 30.2, 66.1, 144 dB",
                ),
            );
            d.add(
                device(int(
                    "ping_interval",
                    i64::from(defaults.ping_interval),
                    20,
                    10_000,
                ))
                .description("ms between pings"),
            );
            d.add(speed_of_sound());
            d.add(
                node(double("min_confidence", defaults.min_confidence, 0.0, 1.0))
                    .description("below it ~range reports +inf (REP 117: no return)"),
            );
        }
        DeviceKind::Ping360 => {
            d.add(
                device(double("range", defaults.range, 0.1, 100.0))
                    .description("range sampled, m (sample count and period follow)"),
            );
            d.add(device(int("gain", i64::from(defaults.gain), 0, 2)).choices(
                "receiver gain",
                [
                    Choice::new("low", 0, "low gain"),
                    Choice::new("normal", 1, "normal gain"),
                    Choice::new("high", 2, "high gain"),
                ],
            ));
            d.add(
                device(int(
                    "transmit_frequency",
                    i64::from(defaults.transmit_frequency),
                    500,
                    1000,
                ))
                .description("kHz"),
            );
            d.add(speed_of_sound());
            let sector = d.group(GroupId::DEFAULT, "sector", GroupKind::Box, true);
            d.add_in(
                sector,
                device(double("start_angle", defaults.start_angle, 0.0, 360.0))
                    .description("sector start, degrees"),
            );
            d.add_in(
                sector,
                device(double("stop_angle", defaults.stop_angle, 0.0, 360.0))
                    .description("sector stop, degrees"),
            );
            d.add_in(
                sector,
                device(int("num_steps", i64::from(defaults.num_steps), 1, 10))
                    .description("gradians between transmits"),
            );
            let output = d.group(GroupId::DEFAULT, "output", GroupKind::Box, true);
            d.add_in(
                output,
                node(int(
                    "scan_threshold",
                    i64::from(defaults.scan_threshold),
                    0,
                    255,
                ))
                .description("intensity that counts as the first return in ~scan"),
            );
            d.add_in(
                output,
                node(int("image_size", i64::from(defaults.image_size), 16, 2000))
                    .description("pixels of the ~image fan's side"),
            );
            d.add_in(
                output,
                node(double("image_rate", defaults.image_rate, 0.01, 100.0))
                    .description("~image messages per second"),
            );
        }
    }
    d
}

/// `base` with the values of `settings` (the ones `kind` has; the others stay).
pub fn apply(base: &Config, settings: &rc::Config) -> Config {
    fn take<T>(field: &mut T, value: Option<T>) {
        if let Some(v) = value {
            *field = v;
        }
    }
    let mut cfg = base.clone();
    let int = |name: &str, lo: i32, hi: i32| settings.int(name).map(|v| v.clamp(lo, hi));
    let double = |name: &str| settings.double(name);
    take(&mut cfg.mode_auto, settings.bool("mode_auto"));
    take(&mut cfg.range, double("range"));
    take(&mut cfg.gain, int("gain", 0, 6).map(|v| v as u32));
    take(
        &mut cfg.ping_interval,
        int("ping_interval", 20, 10_000).map(|v| v as u16),
    );
    take(&mut cfg.speed_of_sound, double("speed_of_sound"));
    take(&mut cfg.min_confidence, double("min_confidence"));
    take(
        &mut cfg.transmit_frequency,
        int("transmit_frequency", 500, 1000).map(|v| v as u16),
    );
    take(&mut cfg.start_angle, double("start_angle"));
    take(&mut cfg.stop_angle, double("stop_angle"));
    take(&mut cfg.num_steps, int("num_steps", 1, 10).map(|v| v as u8));
    take(
        &mut cfg.scan_threshold,
        int("scan_threshold", 0, 255).map(|v| v as u8),
    );
    take(
        &mut cfg.image_size,
        int("image_size", 16, 2000).map(|v| v as u32),
    );
    take(&mut cfg.image_rate, double("image_rate"));
    cfg
}

/// `settings` holding `cfg`'s values, for the config the node reports.
pub fn report(cfg: &Config, settings: &mut rc::Config) {
    settings.set("mode_auto", cfg.mode_auto);
    settings.set("range", cfg.range);
    settings.set("gain", cfg.gain as i32);
    settings.set("ping_interval", i32::from(cfg.ping_interval));
    settings.set("speed_of_sound", cfg.speed_of_sound);
    settings.set("min_confidence", cfg.min_confidence);
    settings.set("transmit_frequency", i32::from(cfg.transmit_frequency));
    settings.set("start_angle", cfg.start_angle);
    settings.set("stop_angle", cfg.stop_angle);
    settings.set("num_steps", i32::from(cfg.num_steps));
    settings.set("scan_threshold", i32::from(cfg.scan_threshold));
    settings.set("image_size", cfg.image_size as i32);
    settings.set("image_rate", cfg.image_rate);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_valid_and_round_trip_the_config() {
        for kind in [DeviceKind::Ping1d, DeviceKind::Ping360] {
            let base = Config::new(super::super::link::LinkSpec::Sim(kind));
            let space = description(kind, &base).validate().unwrap();
            let mut settings = space.defaults();
            report(&base, &mut settings);
            assert_eq!(
                settings,
                space.defaults(),
                "{kind:?}: defaults are the node's"
            );
            let mut changed = settings.clone();
            assert!(changed.set("range", 42.0));
            assert_eq!(apply(&base, &changed).range, 42.0);
        }
    }
}
