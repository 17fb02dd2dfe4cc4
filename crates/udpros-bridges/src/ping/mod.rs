//! Blue Robotics Ping sonars (Ping1D echosounder, Ping360 scanning sonar): the protocol as
//! pure code (framing with resynchronisation, typed messages for the current message set
//! and the 2017 draft dialect).

pub mod discovery;
pub mod draft2017;
pub mod frame;
pub mod link;
pub mod log;
pub mod messages;
pub mod node;
mod publish;
pub mod reconfigure;
pub mod recorder;
pub mod scene;
pub mod session;
pub mod settings;
pub mod sim;

pub use frame::{encode_frame, Decoder, DecoderStats, Frame};
pub use messages::{DecodeError, Message};

/// Which sonar a device is: what it identified itself as (or what a simulator plays).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    /// The Ping1D single-beam echosounder.
    Ping1d,
    /// The Ping360 mechanical scanning sonar.
    Ping360,
}

/// Which message set a device speaks. Ids overlap between them (draft 1100 is today's
/// `goto_bootloader`), so the dialect is chosen deliberately and never mixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// The message set of today's firmware and brping.
    #[default]
    Current,
    /// The 2017 draft of old Ping1D firmware.
    Draft2017,
}

/// A frame decoded once, in the node's dialect: the link decodes each frame as it arrives,
/// and the fast path that publishes Ping1D data and the [`session::Session`] read the same
/// message.
#[derive(Debug, Clone)]
pub enum Decoded {
    /// A message of the current set.
    Current(Message),
    /// A message of the 2017 draft.
    Draft(draft2017::DraftMessage),
    /// Another family's message, or one that does not decode.
    Unknown,
}

impl Decoded {
    /// Decodes `frame`: a 2017-draft node tries the draft first (a device that answers
    /// with today's set is then noticed and reported), a current one only today's set.
    pub fn of(frame: &Frame, dialect: Dialect) -> Decoded {
        if dialect == Dialect::Draft2017 {
            if let Ok(msg) = draft2017::DraftMessage::decode(frame.id, &frame.payload) {
                return Decoded::Draft(msg);
            }
        }
        Message::decode(frame.id, &frame.payload).map_or(Decoded::Unknown, Decoded::Current)
    }
}

/// The next angle of a Ping360 sweep, in gradians (0..400), `step` gradians on: round and
/// round over the full circle (`start == stop`, or 0 to 399), back and forth over a sector
/// otherwise, `direction` (+1 or -1) turning at the sector's ends. The node and the
/// simulator step the same way.
pub fn sweep_step(angle: u16, start: u16, stop: u16, step: u8, direction: &mut i32) -> u16 {
    let step = i32::from(step.max(1));
    let full_circle = start == stop || (start.min(stop) == 0 && start.max(stop) >= 399);
    if full_circle {
        return (i32::from(angle) + step).rem_euclid(400) as u16;
    }
    let (lo, hi) = (i32::from(start.min(stop)), i32::from(start.max(stop)));
    let mut next = i32::from(angle) + *direction * step;
    if next > hi || next < lo {
        *direction = -*direction;
        next = (i32::from(angle) + *direction * step).clamp(lo, hi);
    }
    next as u16
}

#[cfg(test)]
mod sweep_tests {
    use super::sweep_step;

    #[test]
    fn full_circles_wrap_and_sectors_turn_at_their_ends() {
        let mut d = 1;
        assert_eq!(sweep_step(399, 0, 0, 1, &mut d), 0);
        assert_eq!(
            sweep_step(398, 0, 399, 3, &mut d),
            1,
            "0 to 399 is the full circle"
        );
        assert_eq!(d, 1);
        let mut angle = 100;
        let mut seen = Vec::new();
        for _ in 0..12 {
            angle = sweep_step(angle, 100, 110, 4, &mut d);
            seen.push(angle);
        }
        // A step past an end turns back from where it stood.
        assert_eq!(
            seen,
            [104, 108, 104, 100, 104, 108, 104, 100, 104, 108, 104, 100]
        );
        // A sector given backwards is the same sector.
        let mut d = 1;
        assert_eq!(sweep_step(110, 110, 100, 4, &mut d), 106);
        assert_eq!(d, -1);
    }
}
