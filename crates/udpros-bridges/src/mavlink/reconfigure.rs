//! The `mavlink_bridge` settings that dynamic_reconfigure changes while the node runs: the
//! exchange rates, the timeout and the estimator published under `~`, and the window
//! estimator's settings under `~fit` (so they mirror to the `~fit/...` parameters the node
//! reads at start).

use super::estimator::FitParams;
use super::node::Config;
use udpros::reconfigure::{self as rc, Choice, Description, Param};

/// Level of a rate change (the exchange's timer restarts).
pub const LEVEL_RATES: u32 = 1;
/// Level of a timeout change.
pub const LEVEL_TIMEOUT: u32 = 2;
/// Level of a change of the estimator published.
pub const LEVEL_ESTIMATOR: u32 = 4;
/// Level of a window-estimator change (the estimator starts afresh).
pub const LEVEL_FIT: u32 = 8;

/// What a change sets, for the node's loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// The exchanges, the timeout and the estimator published.
    Main {
        /// PING Hz (0: off).
        ping_rate: f64,
        /// TIMESYNC Hz (0: off).
        timesync_rate: f64,
        /// Seconds before a request counts as lost.
        timeout: f64,
        /// Publish the PX4 filter's offset instead of the window estimator's.
        use_px4_filter: bool,
    },
    /// The window estimator's settings.
    Fit(FitParams),
}

fn clamped(v: f64, lo: f64, hi: f64) -> f64 {
    if v.is_nan() {
        lo
    } else {
        v.clamp(lo, hi)
    }
}

/// The settings under `~`, with `cfg`'s values as defaults.
pub fn main_description(cfg: &Config) -> Description {
    let mut d = Description::new();
    d.add(
        Param::double(
            "ping_rate",
            clamped(cfg.ping_rate, 0.0, 1000.0),
            0.0,
            1000.0,
        )
        .level(LEVEL_RATES)
        .description("PING requests per second (0: off)"),
    );
    d.add(
        Param::double(
            "timesync_rate",
            clamped(cfg.timesync_rate, 0.0, 1000.0),
            0.0,
            1000.0,
        )
        .level(LEVEL_RATES)
        .description("TIMESYNC requests per second (0: off)"),
    );
    let timeout = cfg.session.timeout_ns as f64 / 1e9;
    d.add(
        Param::double("timeout", clamped(timeout, 0.01, 60.0), 0.01, 60.0)
            .level(LEVEL_TIMEOUT)
            .description("seconds a request may wait for its reply before it counts as lost"),
    );
    let estimator = if cfg.use_px4_filter { "px4" } else { "window" };
    d.add(
        Param::str("timesync_estimator", estimator)
            .level(LEVEL_ESTIMATOR)
            .choices(
                "the offset published on ~timesync_status",
                [
                    Choice::new("window", "window", "udpros's window fit"),
                    Choice::new("px4", "px4", "the PX4 and mavros filter"),
                ],
            ),
    );
    d
}

/// The window estimator's settings, under `~fit`.
pub fn fit_description(fit: &FitParams) -> Description {
    let mut d = Description::new();
    d.add(
        Param::int("window", fit.window.clamp(16, 100_000) as i32, 16, 100_000)
            .level(LEVEL_FIT)
            .description("accepted samples kept"),
    );
    d.add(
        Param::double("quantile", clamped(fit.quantile, 0.01, 1.0), 0.01, 1.0)
            .level(LEVEL_FIT)
            .description("share of the window, lowest round trips first, that the fit uses"),
    );
    let gate_ms = fit.min_gate as f64 / 1e6;
    d.add(
        Param::double(
            "min_rtt_gate",
            clamped(gate_ms, 0.0, 10_000.0),
            0.0,
            10_000.0,
        )
        .level(LEVEL_FIT)
        .description("ms: the round-trip gate never closes below this"),
    );
    d
}

/// The change `settings` (under `~`) ask for, or why the node refuses it: the server has
/// clamped each number into its range, but a rate must also have a finite period
/// ([`crate::check_rate`]), which a range cannot say.
pub fn main_change(settings: &rc::Config) -> Result<Change, String> {
    let rate = |name: &str| crate::check_rate(name, settings.double(name).unwrap_or(0.0), 1000.0);
    let timeout = settings.double("timeout").unwrap_or(2.0);
    if !(0.01..=60.0).contains(&timeout) {
        return Err(format!(
            "timeout {timeout} s is out of range: expected 0.01 to 60"
        ));
    }
    let use_px4_filter = match settings.str("timesync_estimator") {
        Some("px4") => true,
        Some("window") | None => false,
        Some(other) => {
            let shown: String = other.chars().take(32).collect();
            return Err(format!("timesync_estimator '{shown}' is not window or px4"));
        }
    };
    Ok(Change::Main {
        ping_rate: rate("ping_rate")?,
        timesync_rate: rate("timesync_rate")?,
        timeout,
        use_px4_filter,
    })
}

/// The change `settings` (under `~fit`) ask for, over `base`, or why the node refuses it.
pub fn fit_change(base: &FitParams, settings: &rc::Config) -> Result<Change, String> {
    let mut fit = *base;
    if let Some(window) = settings.int("window") {
        fit.window = window.clamp(16, 100_000) as usize;
    }
    if let Some(quantile) = settings.double("quantile") {
        if !(0.01..=1.0).contains(&quantile) {
            return Err(format!(
                "quantile {quantile} is out of range: expected 0.01 to 1"
            ));
        }
        fit.quantile = quantile;
    }
    if let Some(gate) = settings.double("min_rtt_gate") {
        if !(0.0..=10_000.0).contains(&gate) {
            return Err(format!(
                "min_rtt_gate {gate} ms is out of range: expected 0 to 10000"
            ));
        }
        fit.min_gate = (gate * 1e6) as i64;
    }
    Ok(Change::Fit(fit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mavlink::link::FcuUrl;

    #[test]
    fn descriptions_hold_the_config_and_changes_read_it_back() {
        let cfg = Config::new(FcuUrl::Sim);
        let main = main_description(&cfg).validate().unwrap();
        assert_eq!(
            main_change(&main.defaults()).unwrap(),
            Change::Main {
                ping_rate: cfg.ping_rate,
                timesync_rate: cfg.timesync_rate,
                timeout: 2.0,
                use_px4_filter: false
            }
        );
        let fit = fit_description(&cfg.session.fit).validate().unwrap();
        assert_eq!(
            fit_change(&cfg.session.fit, &fit.defaults()).unwrap(),
            Change::Fit(cfg.session.fit)
        );
    }

    #[test]
    fn changes_whose_derived_values_are_not_finite_are_refused() {
        let cfg = Config::new(FcuUrl::Sim);
        let main = main_description(&cfg).validate().unwrap();
        for (name, value) in [
            ("ping_rate", 5e-324),
            ("timesync_rate", 1e-12),
            ("ping_rate", f64::NAN),
            ("timesync_rate", f64::INFINITY),
            ("timeout", f64::NAN),
            ("timeout", 0.0),
        ] {
            let mut settings = main.defaults();
            assert!(settings.set(name, value));
            let e = main_change(&settings).unwrap_err();
            assert!(e.starts_with(name), "{name} {value}: {e}");
        }
        let mut settings = main.defaults();
        assert!(settings.set("timesync_estimator", "x".repeat(1 << 20).as_str()));
        let e = main_change(&settings).unwrap_err();
        assert!(
            e.len() < 100,
            "a huge value is not echoed whole: {} bytes",
            e.len()
        );
        let fit = fit_description(&cfg.session.fit).validate().unwrap();
        for (name, value) in [("quantile", f64::NAN), ("min_rtt_gate", f64::INFINITY)] {
            let mut settings = fit.defaults();
            assert!(settings.set(name, value));
            assert!(fit_change(&cfg.session.fit, &settings).is_err(), "{name}");
        }
    }
}
