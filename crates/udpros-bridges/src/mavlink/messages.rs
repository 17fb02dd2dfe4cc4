//! The few MAVLink messages the bridge speaks, mapped between the `mavlink` crate's types
//! and the plain structs of [`protocol`](super::protocol).

// PING is marked superseded by TIMESYNC in common.xml, yet PX4, QGC and MAVSDK answer it.
#![allow(deprecated)]

use super::protocol::{Ids, Ping, Timesync};
use mavlink::dialects::common::{
    MavAutopilot, MavMessage, MavModeFlag, MavState, MavType, HEARTBEAT_DATA, PING_DATA,
    SYSTEM_TIME_DATA, TIMESYNC_DATA,
};
use mavlink::{MavHeader, MavlinkVersion};

/// What a received message means to the bridge.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A HEARTBEAT; `autopilot` is false for GCSs, companions and other non-autopilots.
    Heartbeat {
        /// Whether the sender is an autopilot.
        autopilot: bool,
    },
    /// A PING, request or reply.
    Ping(Ping),
    /// A TIMESYNC, request or reply.
    Timesync(Timesync),
    /// SYSTEM_TIME: the sender's wall clock.
    SystemTime {
        /// Unix time (µs).
        unix_usec: u64,
        /// Time since boot (ms).
        boot_ms: u32,
    },
    /// Anything else (ignored).
    Other,
}

/// What the bridge (or the simulated autopilot) sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    /// HEARTBEAT as an onboard controller (a companion computer).
    Heartbeat,
    /// HEARTBEAT as a PX4 quadrotor (the simulated autopilot).
    AutopilotHeartbeat,
    /// A PING, request or reply.
    Ping(Ping),
    /// A TIMESYNC, request or reply.
    Timesync(Timesync),
    /// SYSTEM_TIME (the simulated autopilot's wall clock).
    SystemTime {
        /// Unix time (µs).
        unix_usec: u64,
        /// Time since boot (ms).
        boot_ms: u32,
    },
}

/// What a decoded MAVLink message means to the bridge.
pub fn from_mavlink(msg: &MavMessage) -> Incoming {
    match msg {
        MavMessage::HEARTBEAT(h) => Incoming::Heartbeat {
            autopilot: h.autopilot != MavAutopilot::MAV_AUTOPILOT_INVALID,
        },
        MavMessage::PING(p) => Incoming::Ping(Ping {
            time_usec: p.time_usec,
            seq: p.seq,
            target: Ids {
                system: p.target_system,
                component: p.target_component,
            },
        }),
        MavMessage::TIMESYNC(t) => Incoming::Timesync(Timesync {
            tc1: t.tc1,
            ts1: t.ts1,
            target: Ids {
                system: t.target_system,
                component: t.target_component,
            },
        }),
        MavMessage::SYSTEM_TIME(s) => Incoming::SystemTime {
            unix_usec: s.time_unix_usec,
            boot_ms: s.time_boot_ms,
        },
        _ => Incoming::Other,
    }
}

/// The MAVLink message to send for `out`.
pub fn to_mavlink(out: &Outgoing) -> MavMessage {
    match out {
        Outgoing::Heartbeat => MavMessage::HEARTBEAT(HEARTBEAT_DATA {
            custom_mode: 0,
            mavtype: MavType::MAV_TYPE_ONBOARD_CONTROLLER,
            autopilot: MavAutopilot::MAV_AUTOPILOT_INVALID,
            base_mode: MavModeFlag::empty(),
            system_status: MavState::MAV_STATE_ACTIVE,
            mavlink_version: 3,
        }),
        Outgoing::AutopilotHeartbeat => MavMessage::HEARTBEAT(HEARTBEAT_DATA {
            custom_mode: 0,
            mavtype: MavType::MAV_TYPE_QUADROTOR,
            autopilot: MavAutopilot::MAV_AUTOPILOT_PX4,
            base_mode: MavModeFlag::MAV_MODE_FLAG_CUSTOM_MODE_ENABLED,
            system_status: MavState::MAV_STATE_ACTIVE,
            mavlink_version: 3,
        }),
        Outgoing::Ping(p) => MavMessage::PING(PING_DATA {
            time_usec: p.time_usec,
            seq: p.seq,
            target_system: p.target.system,
            target_component: p.target.component,
        }),
        Outgoing::Timesync(t) => MavMessage::TIMESYNC(TIMESYNC_DATA {
            tc1: t.tc1,
            ts1: t.ts1,
            target_system: t.target.system,
            target_component: t.target.component,
        }),
        Outgoing::SystemTime { unix_usec, boot_ms } => MavMessage::SYSTEM_TIME(SYSTEM_TIME_DATA {
            time_unix_usec: *unix_usec,
            time_boot_ms: *boot_ms,
        }),
    }
}

/// The sender of a received frame.
pub fn sender(header: &MavHeader) -> Ids {
    Ids {
        system: header.system_id as u8,
        component: header.component_id,
    }
}

/// One frame as bytes.
pub fn frame(from: Ids, sequence: u8, version: MavlinkVersion, out: &Outgoing) -> Vec<u8> {
    let header = MavHeader {
        system_id: from.system.into(),
        component_id: from.component,
        sequence,
    };
    let mut bytes = Vec::with_capacity(64);
    // Writing into a Vec cannot fail.
    let _ = mavlink::write_versioned_msg(&mut bytes, version, header, &to_mavlink(out));
    bytes
}

/// Every well-formed frame (v1 or v2) in a datagram, with its sender; the rest is skipped.
pub fn parse_datagram(bytes: &[u8]) -> Vec<(Ids, Incoming)> {
    let mut reader = mavlink::MavlinkReader::new(bytes);
    let mut out = Vec::new();
    while let Ok((header, msg)) = reader.read_any_message::<MavMessage>() {
        out.push((sender(&header), from_mavlink(&msg)));
        if out.len() >= 64 {
            break; // a datagram holds at most a few hundred bytes of frames
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FCU: Ids = Ids::AUTOPILOT;

    #[test]
    fn a_v2_timesync_reply_keeps_its_target_and_a_v1_frame_reads_as_broadcast() {
        let reply = Outgoing::Timesync(Timesync {
            tc1: 5,
            ts1: -7,
            target: Ids::ONBOARD_COMPUTER,
        });
        let v2 = frame(FCU, 3, MavlinkVersion::V2, &reply);
        assert_eq!(v2[0], 0xFD);
        assert_eq!(v2[1], 18, "payload with both extension bytes");
        let got = parse_datagram(&v2);
        assert_eq!(got, vec![(FCU, from_mavlink(&to_mavlink(&reply)))]);
        let Incoming::Timesync(t) = &got[0].1 else {
            panic!("{got:?}")
        };
        assert_eq!((t.tc1, t.ts1, t.target.component), (5, -7, 191));
        // MAVLink 1 cannot carry extensions: the target reads as 0/0, as from a v1 responder.
        let v1 = frame(FCU, 4, MavlinkVersion::V1, &reply);
        assert_eq!(v1[0], 0xFE);
        let Incoming::Timesync(t) = &parse_datagram(&v1)[0].1 else {
            panic!()
        };
        assert_eq!(t.target, Ids::BROADCAST);
    }

    #[test]
    fn a_request_truncates_its_zero_tail_and_garbage_is_skipped() {
        let req = Outgoing::Timesync(Timesync {
            tc1: 0,
            ts1: 1 << 40,
            target: Ids::BROADCAST,
        });
        let bytes = frame(FCU, 0, MavlinkVersion::V2, &req);
        assert!(bytes[1] <= 16, "payload {}", bytes[1]);
        let mut noisy = vec![0x55, 0xFD, 0x01];
        noisy.extend_from_slice(&bytes);
        noisy.extend_from_slice(&[0xFE, 0x09]);
        let got = parse_datagram(&noisy);
        assert_eq!(got.len(), 1);
        assert!(matches!(got[0].1, Incoming::Timesync(t) if t.ts1 == 1 << 40 && t.tc1 == 0));
    }
}
