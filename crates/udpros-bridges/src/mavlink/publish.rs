//! What `mavlink_bridge` publishes: mavros's `~timesync_status` and `~time_reference`, the
//! latency summary and `/diagnostics`, each built from the session's samples and reports
//! with offsets turned into ROS time only here.

use super::clock::ros_minus_monotonic_ns;
use super::link::Link;
use super::node::{Config, LinkState};
use super::protocol::Responder;
use super::session::{Report, TimesyncSample};
use crate::LinkSettings;
use udpros::msg::Time;
use udpros::msgs::{diagnostic_msgs, mavros_msgs, sensor_msgs, std_msgs, udpros as umsg};
use udpros::node::{Node, NodeError, Publisher};
use udpros::time::Clock;

pub(super) struct Publishers {
    pub(super) timesync_status: Publisher<mavros_msgs::TimesyncStatus>,
    pub(super) latency: Publisher<umsg::MavlinkLatency>,
    pub(super) time_reference: Publisher<sensor_msgs::TimeReference>,
    pub(super) diagnostics: Publisher<diagnostic_msgs::DiagnosticArray>,
    /// Every message the link delivers (`super::stream`), built only while subscribed.
    pub(super) messages: Publisher<umsg::MavlinkMessage>,
}

pub(super) async fn advertise(node: &Node, links: LinkSettings) -> Result<Publishers, NodeError> {
    links.apply(node);
    let opts = links.options();
    Ok(Publishers {
        timesync_status: node.advertise("~timesync_status", opts.clone()).await?,
        latency: node.advertise("~latency", opts.clone()).await?,
        time_reference: node.advertise("~time_reference", opts.clone()).await?,
        diagnostics: node.advertise("/diagnostics", opts.clone()).await?,
        messages: node.advertise("~messages", opts).await?,
    })
}

/// A CLOCK_MONOTONIC instant as ROS time, `base` being ROS time minus CLOCK_MONOTONIC,
/// sampled once per message so that its stamp and offsets agree to the nanosecond.
pub(super) fn ros_time(mono_ns: i64, base: i64) -> Time {
    Time::from_nanos((mono_ns + base).max(0) as u64)
}

/// `None` until the estimator in use has an estimate: mavros's message has no way to say
/// "not known yet", and a zero there reads as an offset decades wrong.
pub(super) fn timesync_status(
    cfg: &Config,
    s: &TimesyncSample,
    clock: &Clock,
) -> Option<mavros_msgs::TimesyncStatus> {
    // Offsets against ROS time (the node's: sim time under /use_sim_time), as mavros
    // publishes them.
    let base = ros_minus_monotonic_ns(clock);
    let estimate = if cfg.use_px4_filter {
        s.px4_offset
    } else {
        s.fit_offset
    };
    Some(mavros_msgs::TimesyncStatus {
        header: std_msgs::Header {
            stamp: ros_time(s.exchange.t3, base),
            ..Default::default()
        },
        remote_timestamp_ns: s.exchange.tc1.max(0) as u64,
        observed_offset_ns: s.observed_offset + base,
        estimated_offset_ns: estimate? + base,
        round_trip_time_ms: (s.exchange.rtt() as f64 / 1e6) as f32,
    })
}

/// The autopilot's wall clock, as mavros publishes it (ignoring clocks not set yet).
pub(super) fn time_reference(
    cfg: &Config,
    unix_usec: u64,
    at_ns: i64,
    clock: &Clock,
) -> Option<sensor_msgs::TimeReference> {
    const PLAUSIBLE_USEC: u64 = 1_234_567_890_000_000; // 2009-02-13
    (unix_usec > PLAUSIBLE_USEC).then(|| sensor_msgs::TimeReference {
        header: std_msgs::Header {
            stamp: ros_time(at_ns, ros_minus_monotonic_ns(clock)),
            ..Default::default()
        },
        time_ref: Time::from_nanos(unix_usec.saturating_mul(1000)),
        source: cfg.time_ref_source.clone(),
    })
}

pub(super) fn seconds(ns: Option<i64>) -> f64 {
    ns.map_or(f64::NAN, |v| v as f64 / 1e9)
}

pub(super) fn latency(r: &Report, now: i64, clock: &Clock) -> umsg::MavlinkLatency {
    let base = ros_minus_monotonic_ns(clock);
    let us = |v: Option<u64>| v.map_or(f64::NAN, |v| v as f64 / 1e6);
    let rtt_min = r
        .timesync_rtt
        .min
        .or(r.ping.min_rtt_us.map(|u| u as i64 * 1000));
    umsg::MavlinkLatency {
        header: std_msgs::Header {
            stamp: ros_time(now, base),
            ..Default::default()
        },
        ping_rtt: us(r.ping.last_rtt_us),
        ping_rtt_min: us(r.ping.min_rtt_us),
        ping_rtt_mean: if r.ping.replies > 0 {
            r.ping.mean_rtt_us / 1e6
        } else {
            f64::NAN
        },
        ping_sent: r.ping.sent,
        ping_received: r.ping.replies,
        ping_lost: r.ping.lost,
        ping_loss: r.ping.loss as f32,
        timesync_rtt: seconds(r.timesync_rtt.last),
        timesync_rtt_min: seconds(r.timesync_rtt.min),
        timesync_rtt_mean: if r.timesync_rtt.count > 0 {
            r.timesync_rtt.mean / 1e9
        } else {
            f64::NAN
        },
        timesync_sent: r.timesync.sent,
        timesync_received: r.timesync.replies,
        timesync_lost: r.timesync.lost,
        timesync_loss: r.timesync.loss as f32,
        responder: match r.responder {
            None => umsg::MavlinkLatency::RESPONDER_UNKNOWN,
            Some(Responder::V2) => umsg::MavlinkLatency::RESPONDER_V2,
            Some(Responder::V1) => umsg::MavlinkLatency::RESPONDER_V1,
            Some(Responder::GarbageTarget) => umsg::MavlinkLatency::RESPONDER_FOREIGN_TARGET,
        },
        one_way_delay: seconds(rtt_min.map(|m| m / 2)),
        offset_ns: r.offset.map_or(0, |o| o + base),
        px4_offset_ns: r.px4_offset.map_or(0, |o| o + base),
        skew_ppm: r.skew_ppm.unwrap_or(f64::NAN),
        converged: r.converged,
        px4_converged: r.px4_converged,
        uncertainty_ns: r.uncertainty.unwrap_or(-1),
        resets: r.resets,
        px4_resets: r.px4_resets,
    }
}

pub(super) fn diagnostics(
    node: &Node,
    cfg: &Config,
    link: &Link,
    state: &LinkState,
    r: &Report,
) -> diagnostic_msgs::DiagnosticArray {
    let kv = |k: &str, v: String| diagnostic_msgs::KeyValue {
        key: k.into(),
        value: v,
    };
    let ms = |ns: Option<i64>| ns.map_or("-".into(), |v| format!("{:.3}", v as f64 / 1e6));
    let connection = diagnostic_msgs::DiagnosticStatus {
        level: if state.connected {
            diagnostic_msgs::DiagnosticStatus::OK
        } else {
            diagnostic_msgs::DiagnosticStatus::ERROR
        },
        name: format!("{}: FCU connection", node.name()),
        message: if !state.connected {
            format!("link down: {}", state.last_error)
        } else if r.autopilot.is_none() {
            "connected, no autopilot heartbeat yet".into()
        } else {
            "connected".into()
        },
        hardware_id: cfg.fcu_url.to_string(),
        values: std::iter::once(kv(
            "autopilot",
            r.autopilot
                .map_or("-".into(), |a| format!("{}/{}", a.system, a.component)),
        ))
        .chain(link_counters(&link.stats).map(|(key, n)| kv(key, n.to_string())))
        .chain(crate::fec_diagnostics(node))
        .collect(),
    };
    let replies = r.timesync.replies;
    let (level, message) = if replies == 0 {
        (
            diagnostic_msgs::DiagnosticStatus::WARN,
            "no TIMESYNC reply yet".to_string(),
        )
    } else if r.responder == Some(Responder::V1) {
        (
            diagnostic_msgs::DiagnosticStatus::WARN,
            "v1 responder: other requesters' replies look like ours".to_string(),
        )
    } else if r.reconverging {
        (
            diagnostic_msgs::DiagnosticStatus::WARN,
            "re-converging after a clock jump: the last confirmed offset stands".to_string(),
        )
    } else if !r.converged {
        (
            diagnostic_msgs::DiagnosticStatus::WARN,
            "converging".to_string(),
        )
    } else {
        (
            diagnostic_msgs::DiagnosticStatus::OK,
            "synchronised".to_string(),
        )
    };
    let time_sync = diagnostic_msgs::DiagnosticStatus {
        level,
        name: format!("{}: Time Sync", node.name()),
        message,
        hardware_id: cfg.fcu_url.to_string(),
        values: vec![
            kv("Timesyncs", replies.to_string()),
            kv("Lost", r.timesync.lost.to_string()),
            kv("Last RTT (ms)", ms(r.timesync_rtt.last)),
            kv("Min RTT (ms)", ms(r.timesync_rtt.min)),
            kv("Mean RTT (ms)", format!("{:.3}", r.timesync_rtt.mean / 1e6)),
            kv("Estimated offset (s)", format!("{:.9}", seconds(r.offset))),
            kv(
                "PX4 filter offset (s)",
                format!("{:.9}", seconds(r.px4_offset)),
            ),
            kv("Uncertainty (ms)", ms(r.uncertainty)),
            kv("Resets", r.resets.to_string()),
            kv("Foreign replies", r.timesync.foreign.to_string()),
            kv("Unmatched replies", r.timesync.unmatched.to_string()),
            kv(
                "PING RTT (ms)",
                r.ping
                    .last_rtt_us
                    .map_or("-".into(), |u| format!("{:.3}", u as f64 / 1e3)),
            ),
            kv("PING loss", format!("{:.3}", r.ping.loss)),
        ],
    };
    diagnostic_msgs::DiagnosticArray {
        header: std_msgs::Header {
            stamp: node.now(),
            ..Default::default()
        },
        status: vec![connection, time_sync],
    }
}

/// The link's counters as `/diagnostics` names them.
fn link_counters(s: &super::link::LinkStats) -> [(&'static str, u64); 14] {
    [
        ("received", &s.received),
        ("sent", &s.sent),
        ("send errors", &s.send_errors),
        ("overflowed", &s.overflowed),
        ("connects", &s.connects),
        ("not sent, no peer yet", &s.no_peer),
        ("noise bytes skipped", &s.skipped_bytes),
        ("TCP clients refused", &s.refused_clients),
        ("TCP clients closed for silence", &s.evicted_clients),
        ("datagrams without a valid frame", &s.ignored_datagrams),
        ("signed frames verified", &s.signed),
        ("unsigned frames refused", &s.refused_unsigned),
        ("frames refused: bad signature", &s.refused_bad_signature),
        ("frames refused: replayed or stale", &s.refused_replayed),
    ]
    .map(|(key, n)| (key, n.load(std::sync::atomic::Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mavlink::estimator::Exchange;
    use crate::mavlink::protocol::Responder;
    use crate::mavlink::url::FcuUrl;

    #[test]
    fn no_timesync_status_until_the_estimator_has_an_estimate() {
        let cfg = Config::new(FcuUrl::Sim);
        let clock = Clock::wall();
        let mut sample = TimesyncSample {
            exchange: Exchange {
                t1: 1_000,
                tc1: 5_000,
                t3: 3_000,
            },
            responder: Responder::V2,
            observed_offset: -3_000,
            fit_offset: None,
            px4_offset: None,
        };
        assert!(timesync_status(&cfg, &sample, &clock).is_none());
        sample.fit_offset = Some(-3_000);
        sample.px4_offset = Some(-3_000);
        let status = timesync_status(&cfg, &sample, &clock).expect("an estimate");
        assert_eq!(status.estimated_offset_ns, status.observed_offset_ns);
    }
}
