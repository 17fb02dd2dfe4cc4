//! `~messages`: every message the autopilot sends, as `udpros/MavlinkMessage` (its frame,
//! its fields as JSON), stamped on the ROS clock with the autopilot's own time where the
//! message carries one. A recording then holds ATTITUDE beside a sonar's echoes on one
//! clock, each where it happened rather than where the link delivered it.
//!
//! The stamping rule ([`stamp`]) is pure: the message's own time, the TIMESYNC offset, the
//! arrival and the ROS clock's base come in; a stamp and its source come out.

use super::protocol::Ids;
use mavlink::Message as _;
use udpros::msg::Time;
use udpros::msgs::{std_msgs, udpros as umsg};

/// The time a message carries of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnTime {
    /// Since the autopilot's boot, on the clock TIMESYNC's `tc1` counts (ns).
    Boot(i64),
    /// Unix time (ns).
    Unix(i64),
}

/// A `time_usec` above this (2009-02-13) is Unix time; below, time since boot: MAVLink
/// leaves the choice to the sender and tells receivers to tell them apart by magnitude.
const UNIX_USEC_FROM: u64 = 1_234_567_890_000_000;

/// A message's own time from its fields: `time_boot_ms` (ATTITUDE, SYSTEM_TIME, most
/// telemetry), else `time_usec` (HIGHRES_IMU, GPS_RAW_INT, ...), since boot or Unix time by
/// its magnitude.
pub fn own_time(fields: &serde_json::Value) -> Option<OwnTime> {
    if let Some(ms) = fields.get("time_boot_ms").and_then(|v| v.as_u64()) {
        return Some(OwnTime::Boot(ms as i64 * 1_000_000));
    }
    let usec = fields.get("time_usec").and_then(|v| v.as_u64())?;
    let ns = i64::try_from(usec.checked_mul(1000)?).ok()?;
    Some(if usec >= UNIX_USEC_FROM {
        OwnTime::Unix(ns)
    } else {
        OwnTime::Boot(ns)
    })
}

/// How far a message's corrected time may lie from its arrival and still be believed (ns).
/// Beyond it the offset is stale (the autopilot rebooted, its clock stepped, and the
/// estimator has not caught up) or the field is not a clock: the arrival is the better
/// stamp. Five seconds leaves room for a radio that queues.
pub const BELIEVABLE_NS: i64 = 5_000_000_000;

/// The stamp of a message that arrived at `arrival_ns` (CLOCK_MONOTONIC) carrying `own`,
/// with `offset_ns` (local − remote, from TIMESYNC) if known, on a ROS clock that is
/// CLOCK_MONOTONIC + `ros_minus_mono_ns`; `wall_clock` is false under sim time, where a
/// Unix time says nothing about ROS time. Returns the ROS time (ns) and its
/// `MavlinkMessage::STAMP_*` source.
pub fn stamp(
    own: Option<OwnTime>,
    offset_ns: Option<i64>,
    arrival_ns: i64,
    ros_minus_mono_ns: i64,
    wall_clock: bool,
) -> (i64, u8) {
    let arrival = arrival_ns.saturating_add(ros_minus_mono_ns);
    let believable = |ros: i64| (ros - arrival).abs() <= BELIEVABLE_NS;
    match (own, offset_ns) {
        (Some(OwnTime::Boot(boot)), Some(offset)) => {
            let ros = boot
                .saturating_add(offset)
                .saturating_add(ros_minus_mono_ns);
            if believable(ros) {
                return (ros, umsg::MavlinkMessage::STAMP_BOOT_TIME);
            }
        }
        (Some(OwnTime::Unix(unix)), _) if wall_clock && believable(unix) => {
            return (unix, umsg::MavlinkMessage::STAMP_UNIX_TIME);
        }
        _ => {}
    }
    (arrival, umsg::MavlinkMessage::STAMP_ARRIVAL)
}

/// What stamps a message: the offset and the ROS clock's base at its arrival.
#[derive(Debug, Clone, Copy)]
pub struct Stamping {
    /// Local − remote (ns), if TIMESYNC has an estimate.
    pub offset_ns: Option<i64>,
    /// ROS time − CLOCK_MONOTONIC (ns).
    pub ros_minus_mono_ns: i64,
    /// The ROS clock is the wall clock (not sim time).
    pub wall_clock: bool,
}

/// `frame` (a whole frame from `from`, arrived at `arrival_ns`) as a `MavlinkMessage`.
/// A frame the `mavlink` crate cannot read (a message common.xml lacks) keeps its bytes
/// and id, with no name or fields, stamped on arrival.
pub fn message(frame: &[u8], from: Ids, arrival_ns: i64, how: Stamping) -> umsg::MavlinkMessage {
    let decoded = super::messages::decode(frame);
    let fields = decoded
        .as_ref()
        .and_then(|m| serde_json::to_value(m).ok())
        .unwrap_or(serde_json::Value::Null);
    let (stamp, stamp_source) = stamp(
        own_time(&fields),
        how.offset_ns,
        arrival_ns,
        how.ros_minus_mono_ns,
        how.wall_clock,
    );
    let time = |ns: i64| Time::from_nanos(ns.max(0) as u64);
    umsg::MavlinkMessage {
        header: std_msgs::Header {
            stamp: time(stamp),
            frame_id: "fcu".into(),
            ..Default::default()
        },
        stamp_source,
        received: time(arrival_ns.saturating_add(how.ros_minus_mono_ns)),
        msgid: frame_msgid(frame),
        name: decoded
            .as_ref()
            .map_or_else(String::new, |m| m.message_name().to_string()),
        sysid: from.system,
        compid: from.component,
        frame: frame.to_vec().into(),
        json: if fields.is_null() {
            String::new()
        } else {
            fields.to_string()
        },
    }
}

/// The message id a frame's header names (v1: one byte; v2: three).
fn frame_msgid(frame: &[u8]) -> u32 {
    match frame {
        [0xFE, _, _, _, _, id, ..] => u32::from(*id),
        [0xFD, _, _, _, _, _, _, a, b, c, ..] => u32::from_le_bytes([*a, *b, *c, 0]),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mavlink::messages::{frame, Outgoing};
    use mavlink::MavlinkVersion;
    use umsg::MavlinkMessage as M;

    const SEC: i64 = 1_000_000_000;

    #[test]
    fn boot_time_moves_onto_the_ros_clock_with_the_offset() {
        // The autopilot's boot clock is 100 s behind ours (offset = local − remote), and
        // ROS time is CLOCK_MONOTONIC + 1.7e9 s.
        let base = 1_700_000_000 * SEC;
        let own = Some(OwnTime::Boot(50 * SEC));
        let arrival = 150 * SEC + 3_000_000; // 3 ms on the link
        assert_eq!(
            stamp(own, Some(100 * SEC), arrival, base, true),
            (base + 150 * SEC, M::STAMP_BOOT_TIME)
        );
        // No offset yet: the arrival.
        assert_eq!(
            stamp(own, None, arrival, base, true),
            (base + arrival, M::STAMP_ARRIVAL)
        );
        // An offset from before a reboot puts it an hour off: the arrival.
        assert_eq!(
            stamp(own, Some(3600 * SEC), arrival, base, true),
            (base + arrival, M::STAMP_ARRIVAL)
        );
    }

    #[test]
    fn unix_time_is_taken_as_is_under_a_wall_clock_only() {
        let base = 1_700_000_000 * SEC;
        let arrival = 10 * SEC;
        let unix = base + arrival - 2_000_000;
        let own = Some(OwnTime::Unix(unix));
        assert_eq!(
            stamp(own, None, arrival, base, true),
            (unix, M::STAMP_UNIX_TIME)
        );
        assert_eq!(
            stamp(own, None, arrival, base, false),
            (base + arrival, M::STAMP_ARRIVAL),
            "under sim time"
        );
        assert_eq!(
            stamp(None, Some(SEC), arrival, base, true).1,
            M::STAMP_ARRIVAL
        );
    }

    #[test]
    fn own_time_is_read_from_the_fields_by_name_and_magnitude() {
        let json = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
        assert_eq!(
            own_time(&json(r#"{"time_boot_ms": 1500, "time_unix_usec": 9}"#)),
            Some(OwnTime::Boot(1_500_000_000))
        );
        assert_eq!(
            own_time(&json(r#"{"time_usec": 2500}"#)),
            Some(OwnTime::Boot(2_500_000))
        );
        assert_eq!(
            own_time(&json(r#"{"time_usec": 1764000000000000}"#)),
            Some(OwnTime::Unix(1_764_000_000_000_000_000))
        );
        assert_eq!(
            own_time(&json(r#"{"time_usec": 18446744073709551615}"#)),
            None
        );
        assert_eq!(own_time(&json(r#"{"seq": 3}"#)), None);
        assert_eq!(own_time(&serde_json::Value::Null), None);
    }

    #[test]
    fn an_attitude_frame_becomes_a_message_with_its_bytes_and_fields() {
        let attitude = Outgoing::Attitude {
            boot_ms: 20_000,
            roll: 0.25,
            pitch: -0.5,
            yaw: 1.0,
        };
        for version in [MavlinkVersion::V1, MavlinkVersion::V2] {
            let bytes = frame(Ids::AUTOPILOT, 7, version, &attitude);
            let how = Stamping {
                offset_ns: Some(5 * SEC),
                ros_minus_mono_ns: 0,
                wall_clock: true,
            };
            let m = message(&bytes, Ids::AUTOPILOT, 25 * SEC + 1_000_000, how);
            assert_eq!((m.msgid, m.name.as_str()), (30, "ATTITUDE"));
            assert_eq!((m.sysid, m.compid), (1, 1));
            assert_eq!(m.frame[..], bytes[..]);
            assert_eq!(m.stamp_source, M::STAMP_BOOT_TIME);
            assert_eq!(m.header.stamp, Time::from_nanos(25 * SEC as u64));
            assert_eq!(m.received, Time::from_nanos(25 * SEC as u64 + 1_000_000));
            let fields: serde_json::Value = serde_json::from_str(&m.json).unwrap();
            assert_eq!(fields["type"], "ATTITUDE");
            assert_eq!(fields["time_boot_ms"], 20_000);
            assert_eq!(fields["roll"], 0.25);
        }
    }

    #[test]
    fn a_frame_it_cannot_read_keeps_its_bytes_and_id() {
        // A v2 frame of message 0x123456, which common.xml does not define.
        let bytes = [0xFD, 1, 0, 0, 9, 1, 1, 0x56, 0x34, 0x12, 0xAA, 0, 0];
        let how = Stamping {
            offset_ns: None,
            ros_minus_mono_ns: SEC,
            wall_clock: true,
        };
        let m = message(&bytes, Ids::AUTOPILOT, SEC, how);
        assert_eq!(m.msgid, 0x123456);
        assert!(m.name.is_empty() && m.json.is_empty());
        assert_eq!(m.frame[..], bytes[..]);
        assert_eq!(m.stamp_source, M::STAMP_ARRIVAL);
        assert_eq!(m.header.stamp, Time::from_nanos(2 * SEC as u64));
        assert_eq!(frame_msgid(&[]), 0);
    }
}
