//! The April 2017 draft message set (the project's seed), spoken by Ping1D firmware before
//! 3.13. Its ids collide with today's (draft 1100 `es_distance_simple` is now
//! `goto_bootloader`), so it is a separate dialect, chosen by configuration and never
//! emitted in `current` mode.

use super::messages::{ping_messages, split, DecodeError, Field, Tail};
use bytes::Bytes;
use serde::Serialize;

ping_messages!(DraftMessage {
    GenGotoBootloader = 100 {};
    GenGetVersion = 101 { device_type: u8, device_model: u8, fw_version_major: u16, fw_version_minor: u16 };
    GenReset = 102 {};
    GenDeviceId = 110 { id: u8 };
    GenNewData = 112 { is_new_data: u8 };
    /// The draft's way to ask for a message.
    GenCmdRequest = 120 { request_id: u16 };
    SonarSetVelocity = 1000 { c_water: u32 };
    EsDistanceSimple = 1100 { distance: u32, confidence: u8 };
    EsDistance = 1101 { distance: u32, confidence: u8, pulse_usec: u16, ping_number: u32, start_mm: u32, length_mm: u32, gain_index: u32 };
    EsProfile = 1102 { distance: u32, confidence: u8, pulse_usec: u16, ping_number: u32, start_mm: u32, length_mm: u32, gain_index: u32 } vec data;
    EsRange = 1110 { start_mm: u32, length_mm: u32 };
    EsMode = 1111 { auto_manual: u8 };
    EsRate = 1112 { msec_per_ping: u16 };
    EsGain = 1113 { gain_index: u32 };
    EsPulse = 1114 { pulse_usec: u16 };
    EsVoltage = 1115 { voltage: u16 };
    MssAngleProfile = 1201 { angle: u16, pulse_usec: u16, range_mm: u32, gain_index: u32 } vec data;
    MssRange = 1210 { range_mm: u32 };
    MssMode = 1211 { auto_manual: u8 };
    MssGain = 1212 { gain_index: u32 };
    MssSector = 1213 { train_angle: i16, sector_width: u16, step_size: u8, pulse_usec: u16, sample_size: u16 };
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draft_profile_round_trips_and_collides_with_current_ids() {
        let p = EsProfile {
            distance: 2500,
            confidence: 90,
            data: Bytes::from(vec![7; 200]),
            ..Default::default()
        };
        let payload = p.encode();
        assert_eq!(payload.len(), 23 + 2 + 200);
        assert_eq!(
            DraftMessage::decode(1102, &payload),
            Ok(DraftMessage::EsProfile(p))
        );
        // The same id means something else in the current set.
        assert!(DraftMessage::knows(1100) && super::super::Message::knows(1100));
        let current = super::super::Message::decode(1100, &[]);
        assert!(matches!(
            current,
            Ok(super::super::Message::GotoBootloader(_))
        ));
    }
}
