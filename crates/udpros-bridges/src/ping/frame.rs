//! Ping framing: `BR`, u16 payload length, u16 message id, u8 source, u8 destination, the
//! payload, and a u16 checksum (the wrapping sum of every byte before it), little-endian.
//!
//! The decoder resynchronises after noise, truncation and bad checksums by skipping one
//! byte and scanning again, caps the payload length it believes (so a corrupted length
//! cannot make it swallow 64 kB of good frames), and never panics.

use bytes::{Buf, Bytes, BytesMut};

/// `BR`, payload length, id, source and destination device ids.
pub const HEADER_LEN: usize = 8;
/// The header and the two-byte checksum around a payload.
pub const OVERHEAD: usize = HEADER_LEN + 2;
/// The largest real payload is a Ping360 `auto_device_data` of 1200 samples (1220 bytes).
pub const DEFAULT_MAX_PAYLOAD: usize = 4096;

/// One checked frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The message id.
    pub id: u16,
    /// The sender's device id.
    pub src: u8,
    /// The receiver's device id.
    pub dst: u8,
    /// The message's fields, little-endian.
    pub payload: Bytes,
}

/// A frame's bytes.
pub fn encode_frame(id: u16, src: u8, dst: u8, payload: &[u8]) -> Vec<u8> {
    let len = u16::try_from(payload.len()).unwrap_or(u16::MAX);
    let mut out = Vec::with_capacity(OVERHEAD + payload.len());
    out.extend_from_slice(b"BR");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
    out.push(src);
    out.push(dst);
    out.extend_from_slice(&payload[..usize::from(len)]);
    let sum = checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn checksum(bytes: &[u8]) -> u16 {
    bytes
        .iter()
        .fold(0u16, |s, b| s.wrapping_add(u16::from(*b)))
}

/// What the decoder has seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Frames whose checksum matched.
    pub frames: u64,
    /// Frames whose checksum did not (dropped).
    pub checksum_errors: u64,
    /// Bytes skipped while looking for a frame start.
    pub skipped_bytes: u64,
    /// Times the decoder gave up on a candidate frame and rescanned.
    pub resyncs: u64,
    /// Candidate frames whose length exceeded the cap.
    pub oversize: u64,
}

/// Splits a byte stream into frames.
#[derive(Debug)]
pub struct Decoder {
    buf: BytesMut,
    max_payload: usize,
    stats: DecoderStats,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(DEFAULT_MAX_PAYLOAD)
    }
}

impl Decoder {
    /// A decoder that takes payloads up to `max_payload` bytes (longer ones are skipped as damage).
    pub fn new(max_payload: usize) -> Decoder {
        Decoder {
            buf: BytesMut::with_capacity(4096),
            max_payload,
            stats: DecoderStats::default(),
        }
    }

    /// What it has seen so far.
    pub fn stats(&self) -> &DecoderStats {
        &self.stats
    }

    /// Bytes held while a frame is incomplete (at most one capped frame's worth).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Takes bytes as they arrive, in any pieces.
    pub fn extend(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete, checksum-valid frame; `None` until more bytes arrive.
    pub fn next_frame(&mut self) -> Option<Frame> {
        loop {
            // Find "BR"; keep a trailing 'B' that may start one.
            match self.buf.windows(2).position(|w| w == b"BR") {
                Some(0) => {}
                Some(i) => self.skip(i),
                None => {
                    let keep = usize::from(self.buf.last() == Some(&b'B'));
                    let drop = self.buf.len() - keep;
                    self.skip(drop);
                    return None;
                }
            }
            if self.buf.len() < HEADER_LEN {
                return None;
            }
            let len = usize::from(u16::from_le_bytes([self.buf[2], self.buf[3]]));
            if len > self.max_payload {
                self.stats.oversize += 1;
                self.resync();
                continue;
            }
            if self.buf.len() < OVERHEAD + len {
                return None;
            }
            let end = HEADER_LEN + len;
            let expected = u16::from_le_bytes([self.buf[end], self.buf[end + 1]]);
            if checksum(&self.buf[..end]) != expected {
                self.stats.checksum_errors += 1;
                self.resync();
                continue;
            }
            let id = u16::from_le_bytes([self.buf[4], self.buf[5]]);
            let (src, dst) = (self.buf[6], self.buf[7]);
            self.buf.advance(HEADER_LEN);
            let payload = self.buf.split_to(len).freeze();
            self.buf.advance(2);
            self.stats.frames += 1;
            return Some(Frame {
                id,
                src,
                dst,
                payload,
            });
        }
    }

    fn skip(&mut self, n: usize) {
        self.buf.advance(n);
        self.stats.skipped_bytes += n as u64;
    }

    /// Gives up on the candidate at the front: skip its 'B' and rescan from the next byte.
    fn resync(&mut self) {
        self.stats.resyncs += 1;
        self.skip(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_the_specs_worked_examples() {
        // general_request(5) and a legacy request for distance_simple (1211).
        assert_eq!(
            encode_frame(6, 0, 0, &[5, 0]),
            [0x42, 0x52, 0x02, 0x00, 0x06, 0x00, 0x00, 0x00, 0x05, 0x00, 0xa1, 0x00]
        );
        assert_eq!(
            encode_frame(1211, 0, 0, &[]),
            [0x42, 0x52, 0, 0, 0xbb, 0x04, 0, 0, 0x53, 0x01]
        );
    }

    #[test]
    fn recovers_from_noise_truncation_and_bad_checksums() {
        let a = encode_frame(1211, 1, 0, &[1, 2, 3, 4, 90]);
        let b = encode_frame(5, 0, 0, &[1, 0, 0, 0]);
        let mut corrupt = b.clone();
        corrupt[9] ^= 0xff;
        let mut stream = vec![0x00, b'B', 0xff, b'B'];
        stream.extend_from_slice(&a[..7]); // truncated
        stream.extend_from_slice(&corrupt);
        stream.extend_from_slice(&a);
        stream.push(b'B');
        stream.extend_from_slice(&b);
        let mut d = Decoder::default();
        let mut frames = Vec::new();
        for chunk in stream.chunks(3) {
            d.extend(chunk);
            while let Some(f) = d.next_frame() {
                frames.push(f.id);
            }
        }
        assert_eq!(frames, [1211, 5]);
        assert!(d.stats().checksum_errors >= 1 && d.stats().resyncs >= 1);
    }

    #[test]
    fn a_corrupted_length_costs_only_its_own_frame() {
        let good = encode_frame(1300, 0, 0, &[0; 30]);
        let mut stream = vec![b'B', b'R', 0xff, 0xff, 0, 0, 0, 0]; // claims 65535 bytes
        stream.extend_from_slice(&good);
        let mut d = Decoder::new(4096);
        d.extend(&stream);
        assert_eq!(d.next_frame().map(|f| f.id), Some(1300));
        assert_eq!(d.stats().oversize, 1);
    }
}
