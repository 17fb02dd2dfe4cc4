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
pub mod ping360_sonar;
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

/// How a Ping360 sweep goes round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SweepPattern {
    /// Round and round over the full circle, back and forth over a sector.
    #[default]
    Natural,
    /// Back and forth, over the full circle too (ping360_sonar's `oscillate`).
    BackAndForth,
    /// Round: past the end, from the start again (ping360_sonar without `oscillate`).
    Round,
}

/// The next angle of a Ping360 sweep, in gradians (0..400), `step` gradians on, as `pattern`
/// says: the full circle is `start == stop`, or 0 to 399; a sector is `start..=stop` (given
/// either way round), and `direction` (+1 or -1) turns at its ends when it goes back and
/// forth. The node and the simulator step the same way.
pub fn sweep_step(
    angle: u16,
    start: u16,
    stop: u16,
    step: u8,
    pattern: SweepPattern,
    direction: &mut i32,
) -> u16 {
    let step = i32::from(step.max(1));
    let full_circle = start == stop || (start.min(stop) == 0 && start.max(stop) >= 399);
    let (lo, hi) = if full_circle {
        (0, 399)
    } else {
        (i32::from(start.min(stop)), i32::from(start.max(stop)))
    };
    let round = match pattern {
        SweepPattern::Natural => full_circle,
        SweepPattern::BackAndForth => false,
        SweepPattern::Round => true,
    };
    if round {
        *direction = 1;
        let next = i32::from(angle) + step;
        return if full_circle {
            next.rem_euclid(400) as u16
        } else if next > hi || next < lo {
            lo as u16
        } else {
            next as u16
        };
    }
    let mut next = i32::from(angle) + *direction * step;
    if next > hi || next < lo {
        *direction = -*direction;
        next = (i32::from(angle) + *direction * step).clamp(lo, hi);
    }
    next as u16
}

#[cfg(test)]
mod sweep_tests {
    use super::{sweep_step, SweepPattern};

    #[test]
    fn full_circles_wrap_and_sectors_turn_at_their_ends() {
        let mut d = 1;
        assert_eq!(sweep_step(399, 0, 0, 1, SweepPattern::Natural, &mut d), 0);
        assert_eq!(
            sweep_step(398, 0, 399, 3, SweepPattern::Natural, &mut d),
            1,
            "0 to 399 is the full circle"
        );
        assert_eq!(d, 1);
        let mut angle = 100;
        let mut seen = Vec::new();
        for _ in 0..12 {
            angle = sweep_step(angle, 100, 110, 4, SweepPattern::Natural, &mut d);
            seen.push(angle);
        }
        // A step past an end turns back from where it stood.
        assert_eq!(
            seen,
            [104, 108, 104, 100, 104, 108, 104, 100, 104, 108, 104, 100]
        );
        // A sector given backwards is the same sector.
        let mut d = 1;
        assert_eq!(
            sweep_step(110, 110, 100, 4, SweepPattern::Natural, &mut d),
            106
        );
        assert_eq!(d, -1);
    }

    #[test]
    fn ping360_sonar_s_patterns_go_back_and_forth_over_the_circle_or_round_a_sector() {
        let walk = |from, (start, stop), step, pattern, n| {
            let (mut angle, mut d, mut seen) = (from, 1, Vec::new());
            for _ in 0..n {
                angle = sweep_step(angle, start, stop, step, pattern, &mut d);
                seen.push(angle);
            }
            seen
        };
        // The full circle back and forth: 396, 398, then back down.
        let turns = walk(394, (0, 0), 2, SweepPattern::BackAndForth, 4);
        assert_eq!(turns, [396, 398, 396, 394]);
        // A sector round: past its end, from its start again.
        assert_eq!(
            walk(100, (100, 110), 4, SweepPattern::Round, 4),
            [104, 108, 100, 104]
        );
        assert_eq!(walk(398, (0, 0), 1, SweepPattern::Round, 3), [399, 0, 1]);
    }
}
