//! What the subscriber tells a udpros publisher about the path between them: when
//! datagrams arrived and how many bytes did, so that the publisher's
//! [`Governor`](super::governor::Governor) can tell the rate the path carries and whether
//! a queue is building on it.
//!
//! The subscriber never knows when a datagram left; the publisher does. So the subscriber
//! reports *arrival* times of a few datagrams it names by message id and block, in its own
//! clock, with its running count of bytes received, and the publisher pairs each with the
//! time it sent that datagram (as WebRTC's transport-wide feedback does). The difference of
//! the two clocks cancels in the growth of the one-way delay, which is what a queue is.
//!
//! A FEEDBACK datagram (opcode 6) goes back on the link's own path, from the socket the
//! subscriber reads on to the port the publisher sends from, every [`FEEDBACK_INTERVAL`]
//! while datagrams arrive (whether or not messages complete: on a link too narrow for its
//! messages none do), and only on links where both ends agreed ([`FEEDBACK_FIELD`]):
//!
//! | bytes | field |
//! | --- | --- |
//! | 0..8 | UDPROS header: connection id, opcode 6, message id 0, block = `n`, the samples (at most [`MAX_SAMPLES`]) |
//! | 8..12 | the report's sequence number, `u32` |
//! | 12..16 | datagrams of the link received so far, `u32`, wrapping |
//! | 16..24 | bytes of them (whole datagrams), `u64`, wrapping |
//! | 24.. | `n` samples of 12 bytes: message id `u8`, 0 `u8`, block `u16`, arrival in µs of the subscriber's clock `u32` (wrapping), bytes received up to and with it `u32` (wrapping) |
//! | last 4 | CRC-32 of everything before |
//!
//! All little-endian. Samples name data datagrams (DATA0 is block 0): they are the ones the
//! publisher keeps send times for.

use super::{DatagramHeader, Opcode, HEADER_LEN};
use crate::header::ConnectionHeader;
use std::time::{Duration, Instant};

/// The connection header field in which a udpros subscriber offers feedback and a udpros
/// publisher confirms it will read it, with the version of this format as its value.
pub const FEEDBACK_FIELD: &str = "udpros_feedback";
/// The version of the feedback format this crate speaks.
pub const FEEDBACK_VERSION: &str = "1";
/// Whether `header` (a subscriber's offer, or a publisher's answer) speaks this crate's
/// feedback: a udpros subscriber offers it, a publisher that reads it confirms it.
pub fn agreed(header: &ConnectionHeader) -> bool {
    header.get(FEEDBACK_FIELD) == Some(FEEDBACK_VERSION)
}

/// How often the subscriber reports while datagrams arrive. A report a publisher waits
/// for is a queue it cannot see: at 50 ms a link starting into a 4 Mbit/s radio had
/// doubled its rate past the radio's before the report that showed it came. Four reports
/// of 124 bytes every 100 ms are 40 kbit/s the other way.
pub const FEEDBACK_INTERVAL: Duration = Duration::from_millis(25);
/// How often the subscriber reports over the first [`START_SPAN`] of a link's datagrams:
/// a publisher's governor doubles its rate every two reports while no queue shows, so
/// reports five times as often find a wide path five times sooner (a 1 MB message at the
/// start of a wide link took 0.46 s at the 25 ms interval) and a narrow one's queue
/// sooner too.
pub const START_FEEDBACK_INTERVAL: Duration = Duration::from_millis(5);
/// How long after a link's first datagram its reports come every
/// [`START_FEEDBACK_INTERVAL`]: long enough for a start to grow from a few Mbit/s to a
/// gigabit.
pub const START_SPAN: Duration = Duration::from_millis(200);
/// Most samples one report carries.
pub const MAX_SAMPLES: usize = 8;
/// Bytes of a report's fixed part, header included.
const FIXED_LEN: usize = 24;
/// Bytes of one sample.
const SAMPLE_LEN: usize = 12;
/// Bytes of the largest report.
pub const MAX_FEEDBACK_LEN: usize = FIXED_LEN + MAX_SAMPLES * SAMPLE_LEN + 4;
/// Samples are at least this far apart within a report, so that eight of them span the
/// interval rather than its first datagrams.
fn sample_spacing(interval: Duration) -> Duration {
    interval / (MAX_SAMPLES as u32 + 1)
}

/// One datagram's arrival, as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The datagram's message id.
    pub message_id: u8,
    /// Its block (0 for DATA0).
    pub block: u16,
    /// When it arrived: µs of the subscriber's clock, wrapping (about every 71 minutes).
    pub arrival_us: u32,
    /// The subscriber's count of bytes received, this datagram included, wrapping.
    pub bytes: u32,
}

/// A FEEDBACK datagram's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feedback {
    /// Increases by one with each report: an older one arriving late is ignored.
    pub sequence: u32,
    /// Datagrams received so far, wrapping.
    pub datagrams: u32,
    /// Bytes received so far, wrapping.
    pub bytes: u64,
    /// Arrivals of some of the datagrams since the last report, oldest first.
    pub samples: Vec<Sample>,
}

impl Feedback {
    /// The FEEDBACK datagram of connection `connection_id`, appended to `out`; at most
    /// [`MAX_SAMPLES`] samples are written.
    pub fn encode(&self, connection_id: u32, out: &mut Vec<u8>) {
        let start = out.len();
        let samples = &self.samples[..self.samples.len().min(MAX_SAMPLES)];
        let header = DatagramHeader {
            connection_id,
            opcode: Opcode::Feedback,
            message_id: 0,
            block: samples.len() as u16,
        };
        out.extend_from_slice(&header.encode());
        out.extend_from_slice(&self.sequence.to_le_bytes());
        out.extend_from_slice(&self.datagrams.to_le_bytes());
        out.extend_from_slice(&self.bytes.to_le_bytes());
        for s in samples {
            out.extend_from_slice(&[s.message_id, 0]);
            out.extend_from_slice(&s.block.to_le_bytes());
            out.extend_from_slice(&s.arrival_us.to_le_bytes());
            out.extend_from_slice(&s.bytes.to_le_bytes());
        }
        let crc = crc32fast::hash(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }

    /// Reads a FEEDBACK of connection `connection_id`; `None` for anything else (another
    /// opcode or link, a length that does not match its sample count, a bad checksum).
    pub fn parse(datagram: &[u8], connection_id: u32) -> Option<Feedback> {
        let header = DatagramHeader::parse(datagram)?;
        if header.opcode != Opcode::Feedback || header.connection_id != connection_id {
            return None;
        }
        let n = usize::from(header.block);
        if n > MAX_SAMPLES || datagram.len() != FIXED_LEN + n * SAMPLE_LEN + 4 {
            return None;
        }
        let (body, crc) = datagram.split_at(datagram.len() - 4);
        if crc32fast::hash(body).to_le_bytes() != crc {
            return None;
        }
        let u32_at =
            |i: usize| u32::from_le_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
        let samples = (0..n)
            .map(|i| FIXED_LEN + i * SAMPLE_LEN)
            .map(|at| Sample {
                message_id: body[at],
                block: u16::from_le_bytes([body[at + 2], body[at + 3]]),
                arrival_us: u32_at(at + 4),
                bytes: u32_at(at + 8),
            })
            .collect();
        Some(Feedback {
            sequence: u32_at(HEADER_LEN),
            datagrams: u32_at(12),
            bytes: u64::from(u32_at(16)) | (u64::from(u32_at(20)) << 32),
            samples,
        })
    }
}

/// The subscriber's side: counts what arrives on a link and samples arrival times, and
/// says when a report is due.
#[derive(Debug, Clone)]
pub struct ArrivalLog {
    epoch: Instant,
    sequence: u32,
    datagrams: u32,
    bytes: u64,
    samples: Vec<Sample>,
    /// When the sample being filled was opened: later datagrams within a sample's
    /// spacing replace it, so each sample is the newest of its stretch.
    sample_opened: Option<Instant>,
    last_report: Option<Instant>,
    /// When the link's first datagram arrived: reports come every
    /// [`START_FEEDBACK_INTERVAL`] for [`START_SPAN`] after it.
    first_datagram: Option<Instant>,
}

impl ArrivalLog {
    /// A log whose clock starts at `now`.
    pub fn new(now: Instant) -> ArrivalLog {
        ArrivalLog {
            epoch: now,
            sequence: 0,
            datagrams: 0,
            bytes: 0,
            samples: Vec::with_capacity(MAX_SAMPLES),
            sample_opened: None,
            last_report: None,
            first_datagram: None,
        }
    }

    /// How often reports are due at `now`.
    fn interval(&self, now: Instant) -> Duration {
        match self.first_datagram {
            Some(first) if now.saturating_duration_since(first) < START_SPAN => {
                START_FEEDBACK_INTERVAL
            }
            Some(_) => FEEDBACK_INTERVAL,
            None => START_FEEDBACK_INTERVAL,
        }
    }

    /// A datagram of the link (`len` bytes, its header `header`) arrived at `now`.
    pub fn on_datagram(&mut self, now: Instant, header: &DatagramHeader, len: usize) {
        self.datagrams = self.datagrams.wrapping_add(1);
        self.bytes = self.bytes.wrapping_add(len as u64);
        self.first_datagram.get_or_insert(now);
        let Some(block) = header.sampled_block(len) else {
            return;
        };
        // A datagram the kernel took before the link began (it waited in the socket for
        // the publisher's answer) is counted, not sampled: its time is before the clock's
        // start, and read as the start it would seem to have crossed faster than it did.
        let Some(since) = now.checked_duration_since(self.epoch) else {
            return;
        };
        let sample = Sample {
            message_id: header.message_id,
            block,
            arrival_us: since.as_micros() as u32,
            bytes: self.bytes as u32,
        };
        let spacing = sample_spacing(self.interval(now));
        let fresh = self
            .sample_opened
            .is_none_or(|at| now.saturating_duration_since(at) >= spacing);
        let full = self.samples.len() == MAX_SAMPLES;
        match self.samples.last_mut() {
            Some(last) if !fresh || full => *last = sample,
            _ => {
                self.samples.push(sample);
                self.sample_opened = Some(now);
            }
        }
    }

    /// The report due at `now`, if any: [`FEEDBACK_INTERVAL`] since the last one
    /// ([`START_FEEDBACK_INTERVAL`] at the link's start) and datagrams sampled since.
    pub fn poll_feedback(&mut self, now: Instant) -> Option<Feedback> {
        let interval = self.interval(now);
        let due = self
            .last_report
            .is_none_or(|at| now.saturating_duration_since(at) >= interval);
        if !due || self.samples.is_empty() {
            return None;
        }
        self.last_report = Some(now);
        self.sequence = self.sequence.wrapping_add(1);
        self.sample_opened = None;
        Some(Feedback {
            sequence: self.sequence,
            datagrams: self.datagrams,
            bytes: self.bytes,
            samples: std::mem::take(&mut self.samples),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(id: u8, block: u16) -> DatagramHeader {
        DatagramHeader {
            connection_id: 7,
            opcode: if block == 0 {
                Opcode::Data0
            } else {
                Opcode::DataN
            },
            message_id: id,
            block,
        }
    }

    #[test]
    fn a_report_reads_back_as_written_and_nothing_else_reads() {
        let report = Feedback {
            sequence: 9,
            datagrams: 70,
            bytes: (5 << 32) + 1234,
            samples: (0..8)
                .map(|i| Sample {
                    message_id: 3,
                    block: i * 9,
                    arrival_us: u32::MAX - 10 + u32::from(i),
                    bytes: 1500 * u32::from(i),
                })
                .collect(),
        };
        let mut wire = Vec::new();
        report.encode(7, &mut wire);
        assert_eq!(wire.len(), MAX_FEEDBACK_LEN);
        assert_eq!(Feedback::parse(&wire, 7), Some(report.clone()));
        assert_eq!(Feedback::parse(&wire, 8), None, "another link's");
        for cut in [0, 8, 24, wire.len() - 1] {
            assert_eq!(Feedback::parse(&wire[..cut], 7), None, "cut at {cut}");
        }
        let mut flipped = wire.clone();
        flipped[30] ^= 1;
        assert_eq!(Feedback::parse(&flipped, 7), None, "bad CRC");
        // A sample count past the limit, with a matching length and checksum.
        let mut many = report;
        many.samples.extend(many.samples.clone());
        let mut wire = Vec::new();
        many.encode(7, &mut wire);
        assert_eq!(wire.len(), MAX_FEEDBACK_LEN, "written: the first eight");
    }

    #[test]
    fn the_log_spreads_its_samples_over_the_interval_and_reports_on_time() {
        let t0 = Instant::now();
        let mut log = ArrivalLog::new(t0);
        assert_eq!(log.poll_feedback(t0), None, "nothing arrived");
        // Past the link's start: reports every FEEDBACK_INTERVAL.
        log.on_datagram(t0, &data(1, 0), 1000);
        assert_eq!(log.poll_feedback(t0).map(|r| r.sequence), Some(1));
        let t1 = t0 + START_SPAN;
        // A datagram of 1000 bytes every 100 µs for an interval.
        let n = (FEEDBACK_INTERVAL.as_micros() / 100) as u16;
        for i in 1..=n {
            let at = t1 + Duration::from_micros(100 * u64::from(i - 1));
            log.on_datagram(at, &data(1, i), 1000);
        }
        let report = log
            .poll_feedback(t1 + FEEDBACK_INTERVAL)
            .expect("due after an interval");
        assert_eq!(
            (report.sequence, report.datagrams, report.bytes),
            (2, u32::from(n) + 1, (u64::from(n) + 1) * 1000)
        );
        assert_eq!(report.samples.len(), MAX_SAMPLES);
        let last = report.samples.last().unwrap();
        assert_eq!(
            (last.block, last.bytes),
            (n, (u32::from(n) + 1) * 1000),
            "the newest is kept"
        );
        let gaps: Vec<u32> = report
            .samples
            .windows(2)
            .map(|w| w[1].arrival_us - w[0].arrival_us)
            .collect();
        let spacing = (sample_spacing(FEEDBACK_INTERVAL).as_micros() * 9 / 10) as u32;
        assert!(gaps.iter().all(|&g| g >= spacing), "spread out: {gaps:?}");
        assert_eq!(
            log.poll_feedback(t1 + FEEDBACK_INTERVAL),
            None,
            "nothing new"
        );
        log.on_datagram(t1 + FEEDBACK_INTERVAL, &data(2, 0), 64);
        assert_eq!(
            log.poll_feedback(t1 + FEEDBACK_INTERVAL + FEEDBACK_INTERVAL / 2),
            None,
            "not yet due"
        );
        let next = log.poll_feedback(t1 + 2 * FEEDBACK_INTERVAL).unwrap();
        assert_eq!((next.sequence, next.samples.len()), (3, 1));
    }

    /// For the first START_SPAN of a link's datagrams its reports come every
    /// START_FEEDBACK_INTERVAL, then every FEEDBACK_INTERVAL.
    #[test]
    fn a_link_reports_often_at_its_start() {
        let t0 = Instant::now();
        let mut log = ArrivalLog::new(t0);
        let ms = Duration::from_millis;
        let mut reports = Vec::new();
        // A datagram every millisecond for 400 ms, the log polled as each arrives.
        for i in 0..400u16 {
            let at = t0 + ms(u64::from(i));
            log.on_datagram(at, &data(1, i), 1000);
            if log.poll_feedback(at).is_some() {
                reports.push(at - t0);
            }
        }
        let early = reports.iter().filter(|&&at| at < START_SPAN).count();
        let late = reports.len() - early;
        let expected = |span: Duration, every: Duration| span.as_millis() / every.as_millis();
        assert_eq!(
            early as u128,
            expected(START_SPAN, START_FEEDBACK_INTERVAL),
            "{reports:?}"
        );
        assert_eq!(
            late as u128,
            expected(ms(400) - START_SPAN, FEEDBACK_INTERVAL),
            "{reports:?}"
        );
    }

    #[test]
    fn datagrams_from_before_the_log_began_are_counted_not_sampled() {
        let t0 = Instant::now();
        let mut log = ArrivalLog::new(t0 + Duration::from_millis(5));
        log.on_datagram(t0, &data(1, 0), 1000);
        assert_eq!(log.poll_feedback(t0 + Duration::from_millis(5)), None);
        log.on_datagram(t0 + Duration::from_millis(6), &data(1, 1), 1000);
        let report = log.poll_feedback(t0 + Duration::from_millis(6)).unwrap();
        assert_eq!((report.bytes, report.samples.len()), (2000, 1));
        assert_eq!(report.samples[0].arrival_us, 1000);
    }

    #[test]
    fn repair_and_heartbeats_count_but_are_not_sampled() {
        let t0 = Instant::now();
        let mut log = ArrivalLog::new(t0);
        let repair = DatagramHeader {
            opcode: Opcode::Repair,
            ..data(1, 3)
        };
        log.on_datagram(t0, &repair, 1500);
        assert_eq!(log.poll_feedback(t0), None, "no sample yet");
        log.on_datagram(t0, &data(1, 0), 1500);
        let report = log.poll_feedback(t0).unwrap();
        assert_eq!((report.datagrams, report.bytes), (2, 3000));
        assert_eq!(report.samples[0].bytes, 3000);
    }

    /// Filler (a PING padded to a datagram, from a probing link) is sampled as data is: it
    /// is what the probe sends while the link holds a message back.
    #[test]
    fn filler_is_sampled_and_a_heartbeat_only_counted() {
        use crate::udpros::FILLER_FIRST_BLOCK;
        let t0 = Instant::now();
        let mut log = ArrivalLog::new(t0);
        let ping = |block| DatagramHeader {
            opcode: Opcode::Ping,
            ..data(1, block)
        };
        log.on_datagram(t0, &ping(0), HEADER_LEN);
        assert_eq!(log.poll_feedback(t0), None, "no sample yet");
        log.on_datagram(t0, &ping(FILLER_FIRST_BLOCK | 5), 1500);
        let report = log.poll_feedback(t0).unwrap();
        assert_eq!((report.datagrams, report.bytes), (2, 1508));
        assert_eq!(report.samples[0].block, FILLER_FIRST_BLOCK | 5);
    }
}
