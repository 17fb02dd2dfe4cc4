//! TCPROS framing: each message (and the connection header) is a `u32 LE` length and that
//! many bytes. The decoder is incremental and bounded: a frame over the limit is an error,
//! and the link is to be dropped, before anything is allocated for it.

use bytes::{Buf, Bytes, BytesMut};
use std::fmt;
use std::time::{Duration, Instant};

/// The default frame limit: far above any real message, far below what would hurt.
pub const DEFAULT_MAX_FRAME: usize = 256 << 20;

/// Memory reserved ahead for a large frame before its bytes arrive: the claimed length is
/// the peer's word, so larger frames grow with what actually comes in.
const MAX_RESERVE: usize = 8 << 20;

/// A frame whose length prefix exceeds the decoder's maximum: the link should be dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTooLarge {
    /// The length the prefix announced.
    pub len: usize,
    /// The largest frame the decoder accepts.
    pub max: usize,
}

impl fmt::Display for FrameTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "frame of {} bytes exceeds the limit of {} bytes",
            self.len, self.max
        )
    }
}

impl std::error::Error for FrameTooLarge {}

/// Splits a byte stream into frame bodies.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    max_frame: usize,
    reserve_whole: bool,
}

impl FrameDecoder {
    /// A decoder that refuses frames whose body is longer than `max_frame` bytes.
    pub fn new(max_frame: usize) -> FrameDecoder {
        FrameDecoder {
            buf: BytesMut::with_capacity(8 << 10),
            max_frame,
            reserve_whole: false,
        }
    }

    /// Reserves a frame's whole announced length (within the limit) once its prefix is
    /// here, instead of growing with what arrives: for an answer the caller asked for
    /// (a service response), where growing by doubling would copy a 100 MB response
    /// several times and hold two copies at once. A length that lies costs address space,
    /// not memory: untouched pages are never resident.
    pub fn reserve_whole_frames(mut self) -> FrameDecoder {
        self.reserve_whole = true;
        self
    }

    /// Changes the limit, e.g. from the header's to the messages' after the handshake.
    pub fn set_max_frame(&mut self, max_frame: usize) {
        self.max_frame = max_frame;
    }

    /// Appends received bytes.
    pub fn extend(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The buffer to read the socket into directly (`AsyncReadExt::read_buf`).
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Bytes received but not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The length the next frame's prefix announces, once its four bytes are here.
    pub fn announced(&self) -> Option<usize> {
        let prefix = self.buf.first_chunk::<4>()?;
        Some(u32::from_le_bytes(*prefix) as usize)
    }

    /// The next complete frame's body, `None` until one is complete.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameTooLarge> {
        Ok(self.next_frame_after(0)?.map(|(_, body)| body))
    }

    /// The next complete frame that starts with `lead` bytes before its length prefix
    /// (a service response's `ok` byte), with those bytes; `None` until one is complete.
    pub(crate) fn next_frame_after(
        &mut self,
        lead: usize,
    ) -> Result<Option<(Bytes, Bytes)>, FrameTooLarge> {
        let frame = self.next_frame_after_mut(lead)?;
        Ok(frame.map(|(lead, body)| (lead.freeze(), body.freeze())))
    }

    /// [`next_frame`](Self::next_frame), the body still writable (a sealed record is
    /// opened where it lies).
    pub fn next_frame_mut(&mut self) -> Result<Option<BytesMut>, FrameTooLarge> {
        Ok(self.next_frame_after_mut(0)?.map(|(_, body)| body))
    }

    fn next_frame_after_mut(
        &mut self,
        lead: usize,
    ) -> Result<Option<(BytesMut, BytesMut)>, FrameTooLarge> {
        let Some(prefix) = self.buf.get(lead..lead + 4) else {
            return Ok(None);
        };
        let len = u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
        if len > self.max_frame {
            return Err(FrameTooLarge {
                len,
                max: self.max_frame,
            });
        }
        if self.buf.len() < lead + 4 + len {
            let missing = lead + 4 + len - self.buf.len();
            let ahead = if self.reserve_whole {
                missing
            } else {
                missing.min(MAX_RESERVE)
            };
            self.buf.reserve(ahead);
            return Ok(None);
        }
        let lead_bytes = self.buf.split_to(lead);
        self.buf.advance(4);
        Ok(Some((lead_bytes, self.buf.split_to(len))))
    }
}

/// How long a peer may take over a frame it has begun: a grace for the first bytes, then at
/// least `min_rate` bytes a second on average. A peer that trickles (one byte a second into
/// a 40 MB request) is cut off after the grace instead of holding a connection, and the
/// memory reserved for its frame, for as long as it likes; a peer that sends at any rate
/// above the floor is never cut off, however large its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateFloor {
    /// Time allowed before the floor applies (counted from `start` in [`RateFloor::deadline`]).
    pub grace: Duration,
    /// Bytes a second the peer must average after the grace.
    pub min_rate: u64,
}

impl RateFloor {
    /// The instant by which the peer must have sent more than `received` bytes of a frame
    /// begun at `start`; a read still waiting then is given up.
    pub fn deadline(&self, start: Instant, received: usize) -> Instant {
        let year = Duration::from_secs(86_400 * 365);
        let earned = Duration::try_from_secs_f64(received as f64 / self.min_rate.max(1) as f64)
            .map_or(year, |d| d.min(year));
        let far = start.checked_add(year).unwrap_or(start);
        start
            .checked_add(self.grace)
            .and_then(|t| t.checked_add(earned))
            .map_or(far, |t| t.min(far))
    }
}

/// One frame's arrival timed against a [`RateFloor`]: the clock starts at the frame's first
/// byte (or when the reader says, after waiting on its own account), and each read is given
/// the floor's deadline for the bytes that came since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameClock {
    floor: RateFloor,
    /// When the frame began, and how many bytes were buffered then.
    began: Option<(Instant, usize)>,
}

impl FrameClock {
    /// A clock for one frame, not started.
    pub fn new(floor: RateFloor) -> FrameClock {
        FrameClock { floor, began: None }
    }

    /// Starts the clock afresh at `now` with `buffered` bytes in (the time before was not
    /// the peer's to spend: a wait for a budget, say).
    pub fn restart(&mut self, now: Instant, buffered: usize) {
        self.began = Some((now, buffered));
    }

    /// The deadline for the next read with `buffered` bytes in; `None` while nothing has
    /// come (the clock starts at the first byte).
    pub fn deadline(&mut self, now: Instant, buffered: usize) -> Option<Instant> {
        if self.began.is_none() && buffered > 0 {
            self.began = Some((now, buffered));
        }
        let (start, before) = self.began?;
        Some(self.floor.deadline(start, buffered.saturating_sub(before)))
    }

    /// When the frame began, once it has.
    pub fn started(&self) -> Option<Instant> {
        self.began.map(|(start, _)| start)
    }

    /// The floor it times against.
    pub fn floor(&self) -> RateFloor {
        self.floor
    }
}

/// A frame (`u32 LE` length, then `body`) in one buffer, ready to be shared by every link.
pub fn frame(body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_clock_starts_at_the_first_byte_or_when_restarted() {
        let floor = RateFloor {
            grace: Duration::from_secs(2),
            min_rate: 1000,
        };
        let mut clock = FrameClock::new(floor);
        let t0 = Instant::now();
        assert_eq!(clock.deadline(t0, 0), None, "nothing came: no deadline");
        let t1 = t0 + Duration::from_secs(5);
        assert_eq!(clock.deadline(t1, 10), Some(t1 + Duration::from_secs(2)));
        // 1000 bytes more earn a second.
        assert_eq!(
            clock.deadline(t1 + Duration::from_millis(1), 1010),
            Some(t1 + Duration::from_secs(3))
        );
        let t2 = t1 + Duration::from_secs(60);
        clock.restart(t2, 1010);
        assert_eq!(clock.started(), Some(t2));
        assert_eq!(clock.deadline(t2, 1010), Some(t2 + Duration::from_secs(2)));
    }

    #[test]
    fn a_rate_floor_extends_with_what_arrived() {
        let floor = RateFloor {
            grace: Duration::from_secs(2),
            min_rate: 1000,
        };
        let t0 = Instant::now();
        assert_eq!(floor.deadline(t0, 0), t0 + Duration::from_secs(2));
        assert_eq!(floor.deadline(t0, 3000), t0 + Duration::from_secs(5));
        // A trickler's few bytes buy it nothing worth having.
        assert!(floor.deadline(t0, 10) < t0 + Duration::from_millis(2011));
        // No overflow for absurd sizes or a zero rate.
        let zero = RateFloor {
            min_rate: 0,
            ..floor
        };
        assert!(zero.deadline(t0, usize::MAX) > t0 + Duration::from_secs(86_400));
    }

    #[test]
    fn splits_frames_fed_byte_by_byte() {
        let stream = [frame(b"hello"), frame(b""), frame(&[7u8; 300])].concat();
        let mut decoder = FrameDecoder::new(1000);
        let mut bodies = Vec::new();
        for b in stream {
            decoder.extend(&[b]);
            while let Some(body) = decoder.next_frame().unwrap() {
                bodies.push(body);
            }
        }
        assert_eq!(bodies, [&b"hello"[..], b"", &[7u8; 300][..]]);
        assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn refuses_frames_over_the_limit_without_allocating() {
        let mut decoder = FrameDecoder::new(1 << 20);
        decoder.extend(&u32::MAX.to_le_bytes());
        assert_eq!(
            decoder.next_frame(),
            Err(FrameTooLarge {
                len: u32::MAX as usize,
                max: 1 << 20
            })
        );
        assert!(decoder.buffer_mut().capacity() < 1 << 20);
    }

    #[test]
    fn frame_prefixes_the_length() {
        assert_eq!(&frame(b"abc")[..], &[3, 0, 0, 0, b'a', b'b', b'c']);
    }
}
