//! The few MAVLink messages the bridge speaks, mapped between the `mavlink` crate's types
//! and the plain structs of [`protocol`](super::protocol).

// PING is marked superseded by TIMESYNC in common.xml, yet PX4, QGC and MAVSDK answer it.
#![allow(deprecated)]

use super::protocol::{Ids, Ping, Timesync};
use mavlink::dialects::common::{
    MavAutopilot, MavMessage, MavModeFlag, MavState, MavType, ATTITUDE_DATA, HEARTBEAT_DATA,
    PING_DATA, SYSTEM_TIME_DATA, TIMESYNC_DATA,
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
    /// ATTITUDE (the simulated autopilot's, stamped on its boot clock).
    Attitude {
        /// When the attitude was sampled: time since boot (ms).
        boot_ms: u32,
        /// Roll (rad).
        roll: f32,
        /// Pitch (rad).
        pitch: f32,
        /// Yaw (rad).
        yaw: f32,
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
        Outgoing::Attitude {
            boot_ms,
            roll,
            pitch,
            yaw,
        } => MavMessage::ATTITUDE(ATTITUDE_DATA {
            time_boot_ms: *boot_ms,
            roll: *roll,
            pitch: *pitch,
            yaw: *yaw,
            ..ATTITUDE_DATA::DEFAULT
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

/// The message of one whole frame (v1 or v2), as the `mavlink` crate reads it: `None` for a
/// message common.xml does not define or a frame that does not hold.
pub fn decode(frame: &[u8]) -> Option<MavMessage> {
    let mut reader = mavlink::MavlinkReader::new(frame);
    reader
        .read_any_message::<MavMessage>()
        .ok()
        .map(|(_, msg)| msg)
}

/// Longest MAVLink frame: a v2 header (10), 255 bytes of payload, the checksum (2) and a
/// signature (13).
pub const MAX_FRAME: usize = 10 + 255 + 2 + 13;

/// Frames out of a byte stream (TCP, serial), where reads cut frames anywhere: bytes are
/// kept until a frame is whole, then it is checked (CRC, known message) and handed on;
/// a start byte that does not begin a good frame is skipped, so the parser finds its way
/// back after noise. It never holds more than one frame's worth of bytes past a read.
#[derive(Debug, Default)]
pub struct StreamParser {
    pending: Vec<u8>,
    /// Bytes skipped as noise (not the start of a good frame).
    pub skipped: u64,
}

impl StreamParser {
    /// Takes `bytes` from the stream and calls `frame` with each good frame now complete,
    /// its sender and meaning.
    pub fn push(&mut self, bytes: &[u8], mut frame: impl FnMut(&[u8], Ids, Incoming)) {
        self.pending.extend_from_slice(bytes);
        let mut at = 0;
        loop {
            let Some(start) = self.pending[at..]
                .iter()
                .position(|&b| b == 0xFD || b == 0xFE)
            else {
                self.skipped += (self.pending.len() - at) as u64;
                at = self.pending.len();
                break;
            };
            self.skipped += start as u64;
            at += start;
            let rest = &self.pending[at..];
            let whole = frame_len(rest).filter(|&len| rest.len() >= len);
            let Some(len) = whole else {
                // Incomplete, or a noise byte whose "length" runs far ahead: a good frame
                // already whole behind it wins, rather than waiting up to 280 bytes for
                // the first to prove itself (fresh data matters more than a frame that
                // is most likely noise).
                match (1..rest.len()).find(|&k| good_frame(&rest[k..]).is_some()) {
                    Some(k) => {
                        self.skipped += k as u64;
                        at += k;
                        continue;
                    }
                    None => break, // the rest of this frame is still on its way
                }
            };
            match good_frame(rest) {
                Some((from, msg)) => {
                    frame(&rest[..len], from, msg);
                    at += len;
                }
                None => {
                    self.skipped += 1;
                    at += 1;
                }
            }
        }
        self.pending.drain(..at);
    }
}

/// The frame `bytes` starts with, if it is whole, its checksum holds and it decodes. The
/// checksum first: on noise, a full parse would scan the candidate for further start
/// bytes, frame-length work per skipped byte.
fn good_frame(bytes: &[u8]) -> Option<(Ids, Incoming)> {
    if bytes.first().is_none_or(|b| *b != 0xFD && *b != 0xFE) {
        return None;
    }
    let len = frame_len(bytes).filter(|&len| bytes.len() >= len)?;
    let candidate = &bytes[..len];
    if !checksum_holds(candidate) {
        return None;
    }
    parse_datagram(candidate).pop()
}

/// Whether a whole frame's checksum is right for its message (an unknown message fails).
fn checksum_holds(frame: &[u8]) -> bool {
    use mavlink::Message as _;
    let (id, header) = if frame[0] == 0xFE {
        (u32::from(frame[5]), 6)
    } else {
        (u32::from_le_bytes([frame[7], frame[8], frame[9], 0]), 10)
    };
    let end = header + usize::from(frame[1]);
    let crc = super::signing::frame_crc(&frame[1..end], MavMessage::extra_crc(id));
    frame[end..end + 2] == crc.to_le_bytes()
}

/// The checksum seed (`CRC_EXTRA`) of the message `out` becomes.
pub fn crc_extra(out: &Outgoing) -> u8 {
    use mavlink::Message as _;
    MavMessage::extra_crc(to_mavlink(out).message_id())
}

/// The length of the frame `bytes` starts with (a start byte first), once its header says.
fn frame_len(bytes: &[u8]) -> Option<usize> {
    let payload = usize::from(*bytes.get(1)?);
    if bytes[0] == 0xFE {
        return Some(6 + payload + 2);
    }
    let signed = bytes.get(2)? & 0x01 != 0;
    Some(10 + payload + 2 + if signed { 13 } else { 0 })
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

    #[test]
    fn a_stream_cut_anywhere_and_laced_with_noise_gives_every_frame_once() {
        let frames: Vec<Vec<u8>> = (0..20u8)
            .map(|i| {
                let version = if i % 3 == 0 {
                    MavlinkVersion::V1
                } else {
                    MavlinkVersion::V2
                };
                frame(
                    FCU,
                    i,
                    version,
                    &Outgoing::Ping(Ping {
                        time_usec: u64::from(i),
                        seq: u32::from(i),
                        target: Ids::BROADCAST,
                    }),
                )
            })
            .collect();
        let mut stream = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            // Noise that looks like start bytes, and a frame with a broken checksum.
            stream.extend_from_slice(&[0xFD, 0x05, 0x00, 0xFE]);
            if i == 7 {
                let mut broken = f.clone();
                *broken.last_mut().unwrap() ^= 0xFF;
                stream.extend_from_slice(&broken);
            }
            stream.extend_from_slice(f);
        }
        for chunk in [1, 2, 7, 64, stream.len()] {
            let mut parser = StreamParser::default();
            let mut seqs = Vec::new();
            for piece in stream.chunks(chunk) {
                parser.push(piece, |bytes, from, msg| {
                    assert_eq!(from, FCU);
                    assert!(frames.iter().any(|f| f == bytes));
                    let Incoming::Ping(p) = msg else {
                        panic!("{msg:?}")
                    };
                    seqs.push(p.seq);
                });
                assert!(
                    parser.pending.len() <= MAX_FRAME + chunk,
                    "{}",
                    parser.pending.len()
                );
            }
            assert_eq!(seqs, (0..20).collect::<Vec<u32>>(), "chunks of {chunk}");
            assert!(parser.skipped > 0);
        }
    }

    #[test]
    fn a_signed_frame_is_whole_to_the_stream_parser_and_decodes() {
        use crate::mavlink::signing::{Signer, SigningKey};
        let out = Outgoing::Timesync(Timesync {
            tc1: 0,
            ts1: 99,
            target: Ids::BROADCAST,
        });
        let mut signed = frame(FCU, 1, MavlinkVersion::V2, &out);
        Signer::new(SigningKey([1; 32]), 0).sign(
            &mut signed,
            1_795_900_000_000_000,
            crc_extra(&out),
        );
        let mut parser = StreamParser::default();
        let mut got = Vec::new();
        parser.push(&signed, |bytes, from, msg| {
            got.push((bytes.to_vec(), from, msg))
        });
        assert_eq!(got.len(), 1, "skipped {}", parser.skipped);
        assert_eq!(got[0].0, signed, "the whole frame, signature and all");
        assert!(matches!(got[0].2, Incoming::Timesync(t) if t.ts1 == 99));
    }

    #[test]
    fn megabytes_of_noise_keep_the_parser_small() {
        let mut parser = StreamParser::default();
        let noise: Vec<u8> = (0..1_000_000u32)
            .map(|i| [0xFD, 0xFF, 0x00, 0x42][i as usize % 4])
            .collect();
        let mut got = 0;
        for piece in noise.chunks(4096) {
            parser.push(piece, |_, _, _| got += 1);
            assert!(
                parser.pending.len() <= MAX_FRAME,
                "{}",
                parser.pending.len()
            );
        }
        assert_eq!(got, 0);
        assert!(parser.skipped > 900_000);
    }
}
