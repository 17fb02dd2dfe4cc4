//! UDPROS datagrams: an 8-byte little-endian header (`u32` connection id, `u8` opcode,
//! `u8` message id, `u16` block) and a slice of the message frame (its `u32` length prefix
//! included). DATA0 opens a message and carries the block count; DATAN carries block
//! `1..count`. PING and ERR are the heartbeat and the close notice, which roscpp never sends
//! and treats as errors, so they go only to udpros peers, as REPAIR does (forward error
//! correction, on links where both ends agreed: see [`fec`]). REPORT and FEEDBACK go the
//! other way, from a udpros subscriber to its publisher: the link's loss, for FEC, and
//! the arrival times that tell the publisher's [`governor`] what the path carries.

pub mod fec;
pub mod feedback;
mod fragment;
pub mod governor;
pub mod liveness;
pub mod loss;
mod pacing;
mod reassemble;
mod receiver;
mod sender;

pub use fragment::{Datagram, ExtraPlace, FragmentError, Fragmenter, Fragments};
pub use pacing::Pacer;
pub use reassemble::{
    room_after, Event, Reassembler, ReassemblerConfig, UdpStats, MAX_STASH_BYTES,
};
pub use receiver::{ReceiverEvent, UdpReceiver, UdpReceiverConfig, FEC_QUIET};
pub use sender::{
    max_send, AfterError, SecureSendStats, SendError, Transmit, UdpSender, UdpSenderConfig,
    DIRECT_MAX_DATAGRAMS, DIRECT_MAX_SENDS, FEEDBACK_CHECK, FRESHNESS, GOVERNED_BURST,
    MAX_SEGMENTS, MAX_SEND, REPORT_CHECK, START_FEEDBACK_CHECK,
};

/// Bytes of the datagram header.
pub const HEADER_LEN: usize = 8;
/// roscpp's default `max_datagram_size`, and the size of its receive buffer whatever it asks
/// for: never send a roscpp subscriber a larger datagram.
pub const ROSCPP_MAX_DATAGRAM: usize = 1500;
/// The largest UDP payload over IPv4.
pub const MAX_UDP_PAYLOAD: usize = 65507;
/// Filler's block numbers count up from here, wrapping within the upper half (see
/// [`DatagramHeader::sampled_block`]): data blocks that high belong only to messages of
/// 48 MB and more (at 1472 bytes a datagram), and a sample paired with the wrong one of
/// the two is one rate sample off, no more.
pub const FILLER_FIRST_BLOCK: u16 = 0x8000;

/// What a datagram carries (the header's opcode byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// The first block of a message; its `block` field is the message's block count.
    Data0 = 0,
    /// A later block; its `block` field is its index (1..count).
    DataN = 1,
    /// A heartbeat (udpros peers only: roscpp drops a link on it).
    Ping = 2,
    /// The link is closing (udpros peers only).
    Err = 3,
    /// A repair shard or a message's checksum (udpros peers that agreed on [`fec`] only).
    Repair = 4,
    /// The subscriber's report of the link's datagram loss, to the publisher (the same
    /// links only; see [`loss`]).
    Report = 5,
    /// The subscriber's arrival times and byte counts, to the publisher (links where
    /// both ends agreed on [`feedback`] only).
    Feedback = 6,
}

impl Opcode {
    /// The opcode of a header byte, or `None` for an unknown one.
    pub fn from_u8(v: u8) -> Option<Opcode> {
        Some(match v {
            0 => Opcode::Data0,
            1 => Opcode::DataN,
            2 => Opcode::Ping,
            3 => Opcode::Err,
            4 => Opcode::Repair,
            5 => Opcode::Report,
            6 => Opcode::Feedback,
            _ => return None,
        })
    }
}

/// The 8-byte header at the front of every UDPROS datagram, all fields little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramHeader {
    /// The link's id, from the publisher's `requestTopic` answer.
    pub connection_id: u32,
    /// What the datagram carries.
    pub opcode: Opcode,
    /// The message this datagram belongs to; 0 is never sent (roscpp reads it as idle).
    pub message_id: u8,
    /// DATA0: the message's block count; DATAN: this block's index.
    pub block: u16,
}

impl DatagramHeader {
    /// The header's 8 bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..4].copy_from_slice(&self.connection_id.to_le_bytes());
        out[4] = self.opcode as u8;
        out[5] = self.message_id;
        out[6..].copy_from_slice(&self.block.to_le_bytes());
        out
    }

    /// The block under which a governed link's subscriber samples the arrival of this
    /// datagram, `len` bytes long, and its publisher pairs the sample with the send (see
    /// [`feedback`], [`governor`]), the message id being the header's: a data block's index
    /// (DATA0's is 0), or filler's own number (a PING longer than a header, which a probing
    /// link sends while it holds a message back: see
    /// [`UdpSender::load_filler`](sender::UdpSender::load_filler)); `None` for the rest.
    pub fn sampled_block(&self, len: usize) -> Option<u16> {
        match self.opcode {
            Opcode::Data0 => Some(0),
            Opcode::DataN => Some(self.block),
            Opcode::Ping if len > HEADER_LEN => Some(self.block),
            _ => None,
        }
    }

    /// `None` for datagrams shorter than a header or with an unknown opcode.
    pub fn parse(datagram: &[u8]) -> Option<DatagramHeader> {
        let h = datagram.first_chunk::<HEADER_LEN>()?;
        Some(DatagramHeader {
            connection_id: u32::from_le_bytes([h[0], h[1], h[2], h[3]]),
            opcode: Opcode::from_u8(h[4])?,
            message_id: h[5],
            block: u16::from_le_bytes([h[6], h[7]]),
        })
    }
}

/// The message id after `id`: 1 to 255, never 0 (roscpp reads 0 as "no message").
pub fn next_message_id(id: u8) -> u8 {
    if id == 255 {
        1
    } else {
        id + 1
    }
}

/// How many ids `later` is past `earlier` in the 1..=255 cycle (0 when equal).
pub fn message_id_distance(earlier: u8, later: u8) -> u8 {
    let (a, b) = (earlier.max(1) - 1, later.max(1) - 1);
    ((u16::from(b) + 255 - u16::from(a)) % 255) as u8
}

/// Whether id `b` comes after id `a`: at most half the cycle past it. A receiver takes
/// anything further as older, from before the ids came round.
pub fn is_newer(a: u8, b: u8) -> bool {
    (1..128).contains(&message_id_distance(a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_little_endian() {
        let h = DatagramHeader {
            connection_id: 0x0403_0201,
            opcode: Opcode::DataN,
            message_id: 9,
            block: 0x0201,
        };
        assert_eq!(h.encode(), [1, 2, 3, 4, 1, 9, 1, 2]);
        assert_eq!(DatagramHeader::parse(&h.encode()), Some(h));
        assert_eq!(
            DatagramHeader::parse(&[0, 0, 0, 0, 7, 1, 1, 0]),
            None,
            "unknown opcode"
        );
        assert_eq!(DatagramHeader::parse(&[0; 7]), None, "short");
    }

    /// Data blocks and filler are sampled for the governor; a heartbeat, which is a
    /// header alone, and the rest are not.
    #[test]
    fn data_and_filler_are_sampled_and_heartbeats_are_not() {
        let header = |opcode, block| DatagramHeader {
            connection_id: 1,
            opcode,
            message_id: 4,
            block,
        };
        assert_eq!(header(Opcode::Data0, 70).sampled_block(1500), Some(0));
        assert_eq!(header(Opcode::DataN, 69).sampled_block(1500), Some(69));
        let filler = header(Opcode::Ping, FILLER_FIRST_BLOCK | 3);
        assert_eq!(filler.sampled_block(1500), Some(FILLER_FIRST_BLOCK | 3));
        assert_eq!(filler.sampled_block(HEADER_LEN), None, "a heartbeat");
        for opcode in [
            Opcode::Err,
            Opcode::Repair,
            Opcode::Report,
            Opcode::Feedback,
        ] {
            assert_eq!(header(opcode, 1).sampled_block(1500), None);
        }
    }

    #[test]
    fn message_ids_cycle_through_1_to_255() {
        assert_eq!(next_message_id(1), 2);
        assert_eq!(next_message_id(255), 1);
        assert_eq!(message_id_distance(255, 1), 1);
        assert_eq!(message_id_distance(3, 3), 0);
        assert_eq!(message_id_distance(1, 255), 254);
    }
}
