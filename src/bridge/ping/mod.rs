//! Blue Robotics Ping sonars (Ping1D echosounder, Ping360 scanning sonar): the protocol as
//! pure code (framing with resynchronisation, typed messages for the current message set
//! and the 2017 draft dialect).

pub mod draft2017;
pub mod frame;
pub mod link;
pub mod messages;
pub mod node;
pub mod sim;

pub use frame::{encode_frame, Decoder, DecoderStats, Frame};
pub use messages::{DecodeError, Message};

/// Which message set a device speaks. Ids overlap between them (draft 1100 is today's
/// `goto_bootloader`), so the dialect is chosen deliberately and never mixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    #[default]
    Current,
    Draft2017,
}
