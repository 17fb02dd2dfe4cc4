//! Cutting a message frame into datagrams.

use super::{next_message_id, DatagramHeader, Opcode, HEADER_LEN, MAX_UDP_PAYLOAD};
use bytes::Bytes;
use std::fmt;

/// Why a message cannot be cut into UDPROS datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FragmentError {
    /// A datagram size that leaves no room for payload (or exceeds what UDP carries).
    InvalidDatagramSize(usize),
    /// The message needs more blocks than the 16-bit block field counts.
    TooManyBlocks {
        /// The frame's length, prefix included.
        frame_len: usize,
        /// The datagram size it was to be cut at.
        max_datagram_size: usize,
    },
}

impl fmt::Display for FragmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FragmentError::InvalidDatagramSize(n) => {
                write!(f, "max_datagram_size {n} is outside {}..={MAX_UDP_PAYLOAD}", HEADER_LEN + 1)
            }
            FragmentError::TooManyBlocks { frame_len, max_datagram_size } => write!(
                f,
                "a {frame_len}-byte message needs more than 65535 datagrams of {max_datagram_size} bytes"
            ),
        }
    }
}

impl std::error::Error for FragmentError {}

/// One connection's sending side: its id, datagram size and message counter.
#[derive(Debug, Clone)]
pub struct Fragmenter {
    connection_id: u32,
    max_datagram_size: usize,
    last_message_id: u8,
}

/// Where [`Fragmenter::write_datagrams_with`] writes the link's own datagram among a
/// message's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtraPlace {
    /// After the first this many blocks, in order (after all of them if the message has
    /// fewer).
    AfterBlocks(u16),
    /// After the message's last block, which is written first; the other blocks follow in
    /// order. A message's short last block and a short datagram can then leave in one
    /// segmented send (its segments all of one size but the last).
    AfterLastBlockFirst,
}

impl Fragmenter {
    /// A fragmenter for the link `connection_id` with datagrams of at most
    /// `max_datagram_size` bytes (header included).
    pub fn new(connection_id: u32, max_datagram_size: usize) -> Result<Fragmenter, FragmentError> {
        if !(HEADER_LEN + 1..=MAX_UDP_PAYLOAD).contains(&max_datagram_size) {
            return Err(FragmentError::InvalidDatagramSize(max_datagram_size));
        }
        Ok(Fragmenter {
            connection_id,
            max_datagram_size,
            last_message_id: 0,
        })
    }

    /// The largest datagram, header included.
    pub fn max_datagram_size(&self) -> usize {
        self.max_datagram_size
    }

    /// The connection id every datagram carries.
    pub fn connection_id(&self) -> u32 {
        self.connection_id
    }

    /// The id of the message fragmented last (0 before the first).
    pub fn last_message_id(&self) -> u8 {
        self.last_message_id
    }

    /// The id the next message will take.
    pub fn next_message_id(&self) -> u8 {
        next_message_id(self.last_message_id)
    }

    fn payload_size(&self) -> usize {
        self.max_datagram_size - HEADER_LEN
    }

    /// How many datagrams a frame of `frame_len` bytes takes.
    pub fn blocks_for(&self, frame_len: usize) -> usize {
        frame_len.div_ceil(self.payload_size()).max(1)
    }

    /// The datagrams of one message. `frame` is the serialized message with its `u32`
    /// length prefix; the datagrams' payloads are slices of it (no copy).
    pub fn fragment(&mut self, frame: &Bytes) -> Result<Fragments, FragmentError> {
        let blocks = self.start_message(frame.len())?;
        Ok(Fragments {
            connection_id: self.connection_id,
            message_id: self.last_message_id,
            frame: frame.clone(),
            payload_size: self.payload_size(),
            blocks,
            next: 0,
        })
    }

    /// Appends the datagrams of one message to `out`, each header followed by its slice of
    /// `frame`, back to back as one segmented send takes them: the datagrams of
    /// [`fragment`](Self::fragment), without a reference-counted slice per datagram. Returns
    /// how many.
    pub fn write_datagrams(
        &mut self,
        frame: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<u16, FragmentError> {
        let blocks = self.start_message(frame.len())?;
        out.reserve(frame.len() + usize::from(blocks) * HEADER_LEN);
        for index in 0..blocks {
            self.write_block(frame, blocks, index, out);
        }
        Ok(blocks)
    }

    /// Like [`write_datagrams`](Self::write_datagrams), with `extra` (a datagram of the
    /// link's own, such as FEC metadata) written among the message's datagrams where
    /// `place` says, so that it can leave in one segmented send with some of them.
    pub fn write_datagrams_with(
        &mut self,
        frame: &[u8],
        out: &mut Vec<u8>,
        extra: &[u8],
        place: ExtraPlace,
    ) -> Result<u16, FragmentError> {
        let blocks = self.start_message(frame.len())?;
        out.reserve(frame.len() + usize::from(blocks) * HEADER_LEN + extra.len());
        let (before, after) = match place {
            ExtraPlace::AfterBlocks(n) => (0..n.min(blocks), n.min(blocks)..blocks),
            ExtraPlace::AfterLastBlockFirst => (blocks - 1..blocks, 0..blocks - 1),
        };
        for index in before {
            self.write_block(frame, blocks, index, out);
        }
        out.extend_from_slice(extra);
        for index in after {
            self.write_block(frame, blocks, index, out);
        }
        Ok(blocks)
    }

    /// Appends block `index` of the current message of `blocks` blocks: its header and its
    /// slice of `frame`.
    fn write_block(&self, frame: &[u8], blocks: u16, index: u16, out: &mut Vec<u8>) {
        let payload_size = self.payload_size();
        let start = usize::from(index) * payload_size;
        let end = (start + payload_size).min(frame.len());
        out.extend_from_slice(&data_header(
            self.connection_id,
            self.last_message_id,
            blocks,
            index,
        ));
        out.extend_from_slice(&frame[start..end]);
    }

    /// Takes the next message id for a frame of `frame_len` bytes; its block count.
    fn start_message(&mut self, frame_len: usize) -> Result<u16, FragmentError> {
        let blocks = u16::try_from(self.blocks_for(frame_len)).map_err(|_| {
            FragmentError::TooManyBlocks {
                frame_len,
                max_datagram_size: self.max_datagram_size,
            }
        })?;
        self.last_message_id = next_message_id(self.last_message_id);
        Ok(blocks)
    }

    /// A heartbeat. It reuses the last message id, so a receiver counting ids for loss is
    /// not misled.
    pub fn ping(&self) -> [u8; HEADER_LEN] {
        self.control(Opcode::Ping)
    }

    /// The close notice.
    pub fn err(&self) -> [u8; HEADER_LEN] {
        self.control(Opcode::Err)
    }

    /// The header of a filler datagram numbered `block` (a PING the sender pads; see
    /// [`DatagramHeader::sampled_block`]).
    pub fn filler(&self, block: u16) -> [u8; HEADER_LEN] {
        self.header(Opcode::Ping, block)
    }

    fn control(&self, opcode: Opcode) -> [u8; HEADER_LEN] {
        self.header(opcode, 0)
    }

    fn header(&self, opcode: Opcode, block: u16) -> [u8; HEADER_LEN] {
        DatagramHeader {
            connection_id: self.connection_id,
            opcode,
            message_id: self.last_message_id,
            block,
        }
        .encode()
    }
}

/// One datagram: its header and a slice of the frame, copied into one buffer with
/// [`Datagram::to_vec`]. (Publishers lay datagrams out with
/// [`Fragmenter::write_datagrams`] instead; this form serves tests and tools.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// The 8-byte UDPROS header.
    pub header: [u8; HEADER_LEN],
    /// This datagram's part of the frame (a slice of it, not a copy).
    pub payload: Bytes,
}

impl Datagram {
    /// The datagram's size on the wire, header included.
    pub fn len(&self) -> usize {
        HEADER_LEN + self.payload.len()
    }

    /// Never true: a datagram always has its header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The datagram as one buffer: header, then payload.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        out.extend_from_slice(&self.header);
        out.extend_from_slice(&self.payload);
        out
    }
}

/// The datagrams of one message, in block order.
#[derive(Debug, Clone)]
pub struct Fragments {
    connection_id: u32,
    message_id: u8,
    frame: Bytes,
    payload_size: usize,
    blocks: u16,
    next: u16,
}

impl Fragments {
    /// The message id all of this message's datagrams carry (1..=255).
    pub fn message_id(&self) -> u8 {
        self.message_id
    }

    /// How many datagrams the message takes.
    pub fn blocks(&self) -> u16 {
        self.blocks
    }
}

impl Iterator for Fragments {
    type Item = Datagram;

    fn next(&mut self) -> Option<Datagram> {
        if self.next >= self.blocks {
            return None;
        }
        let index = self.next;
        self.next += 1;
        let start = usize::from(index) * self.payload_size;
        let end = (start + self.payload_size).min(self.frame.len());
        Some(Datagram {
            header: data_header(self.connection_id, self.message_id, self.blocks, index),
            payload: self.frame.slice(start..end),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::from(self.blocks - self.next);
        (left, Some(left))
    }
}

impl ExactSizeIterator for Fragments {}

/// The header of block `index` of a `blocks`-block message: DATA0 carries the block count,
/// DATAN its own index.
fn data_header(connection_id: u32, message_id: u8, blocks: u16, index: u16) -> [u8; HEADER_LEN] {
    let (opcode, block) = if index == 0 {
        (Opcode::Data0, blocks)
    } else {
        (Opcode::DataN, index)
    };
    DatagramHeader {
        connection_id,
        opcode,
        message_id,
        block,
    }
    .encode()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference's capture: a 3012-byte body at 1500 bytes is DATA0 (3 blocks), DATAN 1,
    /// DATAN 2, with payloads of 1492, 1492 and 32 bytes.
    #[test]
    fn matches_roscpps_wire_example() {
        let frame = crate::tcpros::frame(&[0xab; 3012]);
        let mut f = Fragmenter::new(0, 1500).unwrap();
        let datagrams: Vec<Datagram> = f.fragment(&frame).unwrap().collect();
        let headers: Vec<[u8; 8]> = datagrams.iter().map(|d| d.header).collect();
        assert_eq!(
            headers,
            [
                [0, 0, 0, 0, 0, 1, 3, 0],
                [0, 0, 0, 0, 1, 1, 1, 0],
                [0, 0, 0, 0, 1, 1, 2, 0]
            ]
        );
        let sizes: Vec<usize> = datagrams.iter().map(|d| d.payload.len()).collect();
        assert_eq!(sizes, [1492, 1492, 32]);
        assert_eq!(&datagrams[0].payload[..4], &[0xc4, 0x0b, 0, 0]);
        assert_eq!(
            datagrams.iter().map(Datagram::len).collect::<Vec<_>>(),
            [1500, 1500, 40]
        );
    }

    #[test]
    fn small_messages_are_one_data0_with_count_1() {
        let mut f = Fragmenter::new(7, 1500).unwrap();
        let d: Vec<Datagram> = f.fragment(&crate::tcpros::frame(b"hi")).unwrap().collect();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].header, [7, 0, 0, 0, 0, 1, 1, 0]);
        assert_eq!(&d[0].payload[..], &[2, 0, 0, 0, b'h', b'i']);
    }

    #[test]
    fn message_ids_run_1_to_255_and_wrap_past_0() {
        let mut f = Fragmenter::new(0, 100).unwrap();
        let frame = crate::tcpros::frame(b"");
        let ids: Vec<u8> = (0..300)
            .map(|_| f.fragment(&frame).unwrap().message_id())
            .collect();
        assert_eq!(ids[0], 1);
        assert_eq!(ids[254], 255);
        assert_eq!(ids[255], 1);
        assert!(!ids.contains(&0));
        assert_eq!(f.ping(), [0, 0, 0, 0, 2, ids[299], 0, 0]);
        assert_eq!(f.err()[4], 3);
    }

    #[test]
    fn refuses_sizes_without_payload_and_too_many_blocks() {
        assert_eq!(
            Fragmenter::new(0, 8).unwrap_err(),
            FragmentError::InvalidDatagramSize(8)
        );
        assert!(Fragmenter::new(0, 65508).is_err());
        let mut f = Fragmenter::new(0, 9).unwrap();
        assert_eq!(
            f.fragment(&Bytes::from(vec![0; 65535])).unwrap().count(),
            65535
        );
        assert!(matches!(
            f.fragment(&Bytes::from(vec![0; 65536])),
            Err(FragmentError::TooManyBlocks { .. })
        ));
        let mut out = Vec::new();
        assert!(f.write_datagrams(&vec![0; 65536], &mut out).is_err());
        assert!(out.is_empty());
    }

    proptest::proptest! {
        #[test]
        fn written_datagrams_are_the_fragments_back_to_back(
            len in 0usize..20_000,
            size in 9usize..3000,
            connection_id in proptest::prelude::any::<u32>(),
            earlier in 0usize..300,
        ) {
            let frame = Bytes::from((0..len).map(|i| i as u8).collect::<Vec<u8>>());
            let mut by_slices = Fragmenter::new(connection_id, size).unwrap();
            for _ in 0..earlier {
                by_slices.fragment(&frame).unwrap();
            }
            let mut written = by_slices.clone();
            let expected: Vec<u8> =
                by_slices.fragment(&frame).unwrap().flat_map(|d| d.to_vec()).collect();
            let mut out = vec![0xee];
            let blocks = written.write_datagrams(&frame, &mut out).unwrap();
            proptest::prop_assert_eq!(out[0], 0xee);
            proptest::prop_assert_eq!(&out[1..], &expected[..]);
            proptest::prop_assert_eq!(usize::from(blocks), by_slices.blocks_for(len));
            // Both took the same message id, so the next heartbeats agree.
            proptest::prop_assert_eq!(written.ping(), by_slices.ping());
        }

        #[test]
        fn an_extra_datagram_goes_where_it_is_placed_and_the_blocks_stay_whole(
            len in 0usize..20_000,
            size in 9usize..3000,
            after in 0u16..40,
            last_first in proptest::prelude::any::<bool>(),
        ) {
            let frame = Bytes::from((0..len).map(|i| i as u8).collect::<Vec<u8>>());
            let mut by_slices = Fragmenter::new(3, size).unwrap();
            let mut written = by_slices.clone();
            let mut blocks: Vec<Vec<u8>> =
                by_slices.fragment(&frame).unwrap().map(|d| d.to_vec()).collect();
            let extra = [0xfe; 24];
            let place = if last_first {
                ExtraPlace::AfterLastBlockFirst
            } else {
                ExtraPlace::AfterBlocks(after)
            };
            let mut out = Vec::new();
            written.write_datagrams_with(&frame, &mut out, &extra, place).unwrap();
            let at = match place {
                ExtraPlace::AfterBlocks(n) => usize::from(n).min(blocks.len()),
                ExtraPlace::AfterLastBlockFirst => {
                    let last = blocks.pop().unwrap();
                    blocks.insert(0, last);
                    1
                }
            };
            blocks.insert(at, extra.to_vec());
            proptest::prop_assert_eq!(out, blocks.concat());
            proptest::prop_assert_eq!(written.ping(), by_slices.ping());
        }
    }
}
