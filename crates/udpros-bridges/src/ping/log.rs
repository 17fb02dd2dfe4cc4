//! Ping Viewer's sensor logs (`.bin`): what the device sent, frame by frame, with the time
//! since the log began. Big-endian throughout; a string is a u32 byte length and its bytes
//! (UTF-8, or UTF-16BE from Windows builds).
//!
//! ```text
//! header  "PingViewer sensor log file", i32 version (1), five strings (commit hash, build
//!         date, tag, OS name, OS version), i32 sensor family (1: Ping), i32 sensor type
//!         (1: Ping1D, 2: Ping360)
//! record  timestamp string "hh:mm:ss.zzz", u32 length, one Ping frame of that length
//! ```
//!
//! The reader takes what a damaged log still holds: a record whose length is corrupt is
//! skipped by scanning for the next timestamp, as Ping Viewer's reader does, and a log cut
//! short ends at its last whole record; either way [`LogReader::problem`] says in one line
//! where and why. Its buffers are bounded whatever the file holds.

use super::frame::{DEFAULT_MAX_PAYLOAD, OVERHEAD};
use super::DeviceKind;
use std::io::{self, Read, Write};
use std::time::Duration;

/// The header string Ping Viewer writes first.
pub const MAGIC: &str = "PingViewer sensor log file";
/// The log structure version this module reads and writes.
pub const VERSION: i32 = 1;
/// Ping Viewer's sensor family of Ping protocol devices.
pub const FAMILY_PING: i32 = 1;
/// The longest record frame believed: a Ping360's 1200 samples are 1230 bytes.
pub const MAX_FRAME: usize = DEFAULT_MAX_PAYLOAD + OVERHEAD;
/// The longest header string believed (build strings are a few dozen bytes).
const MAX_STRING: usize = 4096;
/// Bytes searched for the next timestamp after damage before the rest of the input is
/// given up on.
pub const MAX_SCAN: u64 = 16 << 20;

/// Opens a log to read: a regular file only (a device such as `/dev/urandom` never ends,
/// and a reader looking for timestamps in it would never stop).
pub fn open(path: &std::path::Path) -> Result<std::fs::File, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    match file.metadata() {
        Ok(m) if m.is_file() => Ok(file),
        Ok(_) => Err("not a regular file".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// What a log's header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogHeader {
    /// The log structure version.
    pub version: i32,
    /// The writer's commit hash, build date, tag, OS name and OS version.
    pub build: [String; 5],
    /// The sensor family (1: Ping).
    pub family: i32,
    /// The sensor type within the family (1: Ping1D, 2: Ping360).
    pub sensor_type: i32,
}

impl LogHeader {
    /// The header udpros writes for `kind` (`None`: not known).
    pub fn for_device(kind: Option<DeviceKind>) -> LogHeader {
        LogHeader {
            version: VERSION,
            build: [
                String::new(),
                String::new(),
                format!("udpros {}", env!("CARGO_PKG_VERSION")),
                std::env::consts::OS.into(),
                String::new(),
            ],
            family: FAMILY_PING,
            sensor_type: match kind {
                None => 0,
                Some(DeviceKind::Ping1d) => 1,
                Some(DeviceKind::Ping360) => 2,
            },
        }
    }

    /// The device the log is of, if its header says.
    pub fn device(&self) -> Option<DeviceKind> {
        match (self.family, self.sensor_type) {
            (FAMILY_PING, 1) => Some(DeviceKind::Ping1d),
            (FAMILY_PING, 2) => Some(DeviceKind::Ping360),
            _ => None,
        }
    }
}

/// One frame of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Since the log began (ms resolution).
    pub at: Duration,
    /// The Ping frame as the device sent it.
    pub frame: Vec<u8>,
}

/// Writes a log: the header at once, then records.
pub struct LogWriter<W: Write> {
    out: W,
}

impl<W: Write> LogWriter<W> {
    /// Starts a log on `out` with `header`.
    pub fn new(mut out: W, header: &LogHeader) -> io::Result<LogWriter<W>> {
        write_string(&mut out, MAGIC)?;
        out.write_all(&header.version.to_be_bytes())?;
        for s in &header.build {
            write_string(&mut out, s)?;
        }
        out.write_all(&header.family.to_be_bytes())?;
        out.write_all(&header.sensor_type.to_be_bytes())?;
        Ok(LogWriter { out })
    }

    /// Appends a frame received `at` after the log began.
    pub fn record(&mut self, at: Duration, frame: &[u8]) -> io::Result<()> {
        write_string(&mut self.out, &timestamp(at))?;
        let len = u32::try_from(frame.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
        self.out.write_all(&len.to_be_bytes())?;
        self.out.write_all(frame)
    }

    /// Flushes what is buffered.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The output, flushed.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

fn write_string(out: &mut impl Write, s: &str) -> io::Result<()> {
    out.write_all(&(s.len() as u32).to_be_bytes())?;
    out.write_all(s.as_bytes())
}

/// `hh:mm:ss.zzz`, as Qt's QTime writes it: hours past 23 wrap, as they do there.
pub fn timestamp(at: Duration) -> String {
    let ms = at.as_millis();
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        (ms / 3_600_000) % 24,
        (ms / 60_000) % 60,
        (ms / 1000) % 60,
        ms % 1000
    )
}

/// `hh:mm:ss.zzz` as a duration, if `text` is one.
pub fn parse_timestamp(text: &[u8]) -> Option<Duration> {
    let digits = |r: std::ops::Range<usize>| -> Option<u64> {
        text[r].iter().try_fold(0u64, |n, &b| {
            b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
        })
    };
    if text.len() != 12 || text[2] != b':' || text[5] != b':' || text[8] != b'.' {
        return None;
    }
    let (h, m, s, ms) = (digits(0..2)?, digits(3..5)?, digits(6..8)?, digits(9..12)?);
    (m < 60 && s < 60).then(|| Duration::from_millis(((h * 60 + m) * 60 + s) * 1000 + ms))
}

/// A string's bytes as text: UTF-16BE when it looks so (even length, a NUL before each
/// ASCII character), UTF-8 otherwise, lossily either way.
fn decode_text(bytes: &[u8]) -> String {
    let utf16 = bytes.len() >= 2
        && bytes.len().is_multiple_of(2)
        && bytes.chunks(2).all(|c| c[0] == 0 || c[1] == 0)
        && bytes[0] == 0;
    if utf16 {
        let units: Vec<u16> = bytes
            .chunks(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        String::from_utf16_lossy(&units)
    } else {
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// A UTF-16BE timestamp's bytes as the 12 ASCII bytes of its UTF-8 form.
fn narrow(utf16: &[u8]) -> Option<[u8; 12]> {
    let mut out = [0u8; 12];
    for (o, c) in out.iter_mut().zip(utf16.chunks(2)) {
        if c[0] != 0 {
            return None;
        }
        *o = c[1];
    }
    Some(out)
}

/// Reads a log record by record, never holding more than a record and a read's worth of
/// bytes.
pub struct LogReader<R: Read> {
    input: R,
    buf: Vec<u8>,
    start: usize,
    /// Offset in the file of `buf[start]`.
    offset: u64,
    eof: bool,
    header: Option<LogHeader>,
    /// The last record's time within its day, and the days passed before it: timestamps
    /// wrap at 24 h, as QTime's do.
    last_at: Duration,
    days: u32,
    /// The first problem met, and how many there were in all.
    first_problem: Option<String>,
    problems: u64,
    records: u64,
    ended: bool,
}

impl<R: Read> LogReader<R> {
    /// Reads the header from `input`. A header that cannot be read is noted in
    /// [`problem`](LogReader::problem) and the records are looked for after it all the same
    /// (by their timestamps); only an I/O error fails.
    pub fn new(input: R) -> io::Result<LogReader<R>> {
        let mut reader = LogReader {
            input,
            buf: Vec::with_capacity(64 * 1024),
            start: 0,
            offset: 0,
            eof: false,
            header: None,
            last_at: Duration::ZERO,
            days: 0,
            first_problem: None,
            problems: 0,
            records: 0,
            ended: false,
        };
        match reader.read_header()? {
            Ok(header) => reader.header = Some(header),
            Err(why) => {
                let line = format!("header unreadable at byte {}: {why}", reader.offset);
                reader.note(line);
            }
        }
        Ok(reader)
    }

    /// The header, if it could be read.
    pub fn header(&self) -> Option<&LogHeader> {
        self.header.as_ref()
    }

    /// What went wrong, in one line, if anything did: where the log was damaged or cut and
    /// how much was skipped.
    pub fn problem(&self) -> Option<String> {
        let first = self.first_problem.as_ref()?;
        Some(match self.problems {
            0 | 1 => first.clone(),
            n => format!("{first}; {} more damaged places", n - 1),
        })
    }

    /// Records read so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The next record; `None` at the end of what can be read (see
    /// [`problem`](LogReader::problem)).
    pub fn next_record(&mut self) -> io::Result<Option<Record>> {
        while !self.ended {
            let at_byte = self.offset;
            match self.read_record()? {
                Ok(mut record) => {
                    self.records += 1;
                    // A time far behind the last is the next day's (a log past midnight of
                    // its own clock); a little behind is jitter, kept as it is.
                    if record.at + Duration::from_secs(12 * 3600) < self.last_at {
                        self.days += 1;
                    }
                    self.last_at = record.at;
                    record.at += Duration::from_secs(24 * 3600) * self.days;
                    return Ok(Some(record));
                }
                Err(Damage::End) => self.ended = true,
                Err(Damage::Truncated(why)) => {
                    self.note(format!(
                        "cut short at byte {at_byte} after {} records: {why}",
                        self.records
                    ));
                    self.ended = true;
                }
                Err(Damage::Corrupt(why)) => {
                    // Ping Viewer's way: look for the next timestamp.
                    let skipped_from = at_byte;
                    self.advance(1);
                    let found = self.scan_for_timestamp()?;
                    self.note(format!(
                        "damaged at byte {skipped_from} ({why}); {} bytes skipped {}, {} records read",
                        self.offset - skipped_from,
                        if found {
                            "to the next timestamp"
                        } else if self.offset - skipped_from >= MAX_SCAN {
                            "with no timestamp in them; the rest is not read"
                        } else {
                            "to the end"
                        },
                        self.records,
                    ));
                    if !found {
                        self.ended = true;
                    }
                }
            }
        }
        Ok(None)
    }

    /// Keeps the first problem's line and counts the rest.
    fn note(&mut self, line: String) {
        self.problems += 1;
        self.first_problem.get_or_insert(line);
    }

    fn read_header(&mut self) -> io::Result<Result<LogHeader, String>> {
        let magic = match self.read_string()? {
            Ok(s) => s,
            Err(why) => return Ok(Err(why)),
        };
        if decode_text(&magic) != MAGIC {
            return Ok(Err(format!(
                "not a Ping Viewer log (it begins {:?})",
                decode_text(&magic[..magic.len().min(40)])
            )));
        }
        let Some(version) = self.read_i32()? else {
            return Ok(Err("cut short in the version".into()));
        };
        let mut build: [String; 5] = Default::default();
        for field in &mut build {
            match self.read_string()? {
                Ok(s) => *field = decode_text(&s),
                Err(why) => return Ok(Err(why)),
            }
        }
        let (Some(family), Some(sensor_type)) = (self.read_i32()?, self.read_i32()?) else {
            return Ok(Err("cut short in the sensor family and type".into()));
        };
        Ok(Ok(LogHeader {
            version,
            build,
            family,
            sensor_type,
        }))
    }

    fn read_i32(&mut self) -> io::Result<Option<i32>> {
        if !self.fill(4)? {
            return Ok(None);
        }
        let b = &self.buf[self.start..self.start + 4];
        let v = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        self.advance(4);
        Ok(Some(v))
    }

    /// A header string's bytes.
    fn read_string(&mut self) -> io::Result<Result<Vec<u8>, String>> {
        if !self.fill(4)? {
            return Ok(Err("cut short in a string's length".into()));
        }
        let len = self.u32_at(0) as usize;
        if len > MAX_STRING {
            return Ok(Err(format!("a string of {len} bytes")));
        }
        if !self.fill(4 + len)? {
            return Ok(Err("cut short in a string".into()));
        }
        let s = self.buf[self.start + 4..self.start + 4 + len].to_vec();
        self.advance(4 + len);
        Ok(Ok(s))
    }

    fn read_record(&mut self) -> io::Result<Result<Record, Damage>> {
        if !self.fill(1)? {
            return Ok(Err(Damage::End));
        }
        let Some(stamp_len) = self.available_u32(0)? else {
            return Ok(Err(Damage::Truncated("in a timestamp's length".into())));
        };
        let at = match stamp_len {
            12 | 24 => {
                let n = stamp_len as usize;
                if !self.fill(4 + n)? {
                    return Ok(Err(Damage::Truncated("in a timestamp".into())));
                }
                let text = &self.buf[self.start + 4..self.start + 4 + n];
                let ascii = if n == 24 {
                    narrow(text)
                } else {
                    text.try_into().ok()
                };
                match ascii.and_then(|a| parse_timestamp(&a)) {
                    Some(at) => at,
                    None => {
                        return Ok(Err(Damage::Corrupt(format!(
                            "{:?} is not a timestamp",
                            decode_text(text)
                        ))))
                    }
                }
            }
            other => {
                return Ok(Err(Damage::Corrupt(format!(
                    "a timestamp of {other} bytes"
                ))))
            }
        };
        let head = 4 + stamp_len as usize;
        let Some(frame_len) = self.available_u32(head)? else {
            return Ok(Err(Damage::Truncated("in a frame's length".into())));
        };
        let frame_len = frame_len as usize;
        if frame_len > MAX_FRAME {
            return Ok(Err(Damage::Corrupt(format!(
                "a frame of {frame_len} bytes (at most {MAX_FRAME} believed)"
            ))));
        }
        if !self.fill(head + 4 + frame_len)? {
            let got = self.buf.len() - self.start - head - 4;
            return Ok(Err(Damage::Truncated(format!(
                "a frame of {frame_len} bytes has only {got}"
            ))));
        }
        let at_frame = self.start + head + 4;
        let frame = self.buf[at_frame..at_frame + frame_len].to_vec();
        self.advance(head + 4 + frame_len);
        Ok(Ok(Record { at, frame }))
    }

    /// The u32 at `at` past the cursor, if the input has it.
    fn available_u32(&mut self, at: usize) -> io::Result<Option<u32>> {
        Ok(self.fill(at + 4)?.then(|| self.u32_at(at)))
    }

    fn u32_at(&self, at: usize) -> u32 {
        let b = &self.buf[self.start + at..self.start + at + 4];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Moves the cursor to the next `u32 12` + `hh:mm:ss.zzz` (or its UTF-16 form);
    /// whether one was found before the end.
    fn scan_for_timestamp(&mut self) -> io::Result<bool> {
        let from = self.offset;
        loop {
            // A log is records back to back: this much without a timestamp is no log any
            // more (a sparse file of gigabytes, a disk image), and is not read to its end.
            if self.offset - from >= MAX_SCAN {
                return Ok(false);
            }
            if !self.fill(28)? {
                // Fewer than a UTF-16 timestamp's bytes are left: look in them all the same.
                while self.buf.len() - self.start >= 16 {
                    if self.timestamp_here() {
                        return Ok(true);
                    }
                    self.advance(1);
                }
                let rest = self.buf.len() - self.start;
                self.advance(rest);
                return Ok(false);
            }
            if self.timestamp_here() {
                return Ok(true);
            }
            self.advance(1);
        }
    }

    fn timestamp_here(&self) -> bool {
        let here = &self.buf[self.start..];
        match self.u32_at(0) {
            12 => here.len() >= 16 && parse_timestamp(&here[4..16]).is_some(),
            24 => {
                here.len() >= 28
                    && narrow(&here[4..28]).is_some_and(|a| parse_timestamp(&a).is_some())
            }
            _ => false,
        }
    }

    fn advance(&mut self, n: usize) {
        self.start += n;
        self.offset += n as u64;
    }

    /// Makes `n` bytes available past the cursor, reading more as needed; false if the
    /// input ends first. What is behind the cursor is dropped, so the buffer stays within a
    /// record and a read.
    fn fill(&mut self, n: usize) -> io::Result<bool> {
        while self.buf.len() - self.start < n {
            if self.eof {
                return Ok(false);
            }
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            let have = self.buf.len();
            self.buf.resize(have + 64 * 1024, 0);
            let got = loop {
                match self.input.read(&mut self.buf[have..]) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    other => break other,
                }
            };
            let got = match got {
                Ok(got) => got,
                Err(e) => {
                    self.buf.truncate(have);
                    return Err(e);
                }
            };
            self.buf.truncate(have + got);
            if got == 0 {
                self.eof = true;
            }
        }
        Ok(true)
    }
}

/// Why a record could not be read.
enum Damage {
    /// The log ends cleanly here.
    End,
    /// The log ends inside a record.
    Truncated(String),
    /// The record's lengths or timestamp are wrong.
    Corrupt(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ping::frame::encode_frame;

    fn frames(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| encode_frame(2300, 2, 0, &vec![i as u8; 20 + i % 50]))
            .collect()
    }

    fn log_of(frames: &[Vec<u8>]) -> Vec<u8> {
        let header = LogHeader::for_device(Some(DeviceKind::Ping360));
        let mut w = LogWriter::new(Vec::new(), &header).unwrap();
        for (i, f) in frames.iter().enumerate() {
            w.record(Duration::from_millis(i as u64 * 37), f).unwrap();
        }
        w.into_inner().unwrap()
    }

    fn read_all(bytes: &[u8]) -> (LogReader<&[u8]>, Vec<Record>) {
        let mut r = LogReader::new(bytes).unwrap();
        let mut out = Vec::new();
        while let Some(rec) = r.next_record().unwrap() {
            out.push(rec);
        }
        (r, out)
    }

    #[test]
    fn timestamps_are_qt_s_and_read_back() {
        assert_eq!(timestamp(Duration::from_millis(3_723_004)), "01:02:03.004");
        assert_eq!(
            parse_timestamp(b"01:02:03.004"),
            Some(Duration::from_millis(3_723_004))
        );
        for bad in [
            &b"01:02:03,004"[..],
            b"1:02:03.004",
            b"01:62:03.004",
            b"aa:02:03.004",
        ] {
            assert_eq!(parse_timestamp(bad), None);
        }
    }

    #[test]
    fn a_log_round_trips_with_its_header_and_every_frame() {
        let sent = frames(300);
        let log = log_of(&sent);
        let (r, got) = read_all(&log);
        assert_eq!(r.header().unwrap().device(), Some(DeviceKind::Ping360));
        assert_eq!(r.header().unwrap().version, VERSION);
        assert_eq!(r.problem(), None);
        assert_eq!(got.len(), 300);
        for (i, (rec, f)) in got.iter().zip(&sent).enumerate() {
            assert_eq!(&rec.frame, f);
            assert_eq!(rec.at, Duration::from_millis(i as u64 * 37));
        }
    }

    #[test]
    fn a_log_cut_anywhere_gives_its_whole_records_and_says_where() {
        let sent = frames(5);
        let log = log_of(&sent);
        for cut in 0..log.len() {
            let (r, got) = read_all(&log[..cut]);
            assert!(got.len() <= 5);
            for (rec, f) in got.iter().zip(&sent) {
                assert_eq!(&rec.frame, f, "cut at {cut}");
            }
            if got.len() < 5 && r.header().is_some() {
                // A cut between records is a clean end; inside one, it is said.
                let boundary = (0..=5).any(|n| log_of(&sent[..n]).len() == cut);
                assert_eq!(
                    r.problem().is_some(),
                    !boundary,
                    "cut at {cut}: {:?}",
                    r.problem()
                );
            }
            if let Some(p) = r.problem() {
                assert!(!p.contains('\n') && p.contains("byte"), "{p}");
            }
        }
    }

    #[test]
    fn corrupt_lengths_are_skipped_to_the_next_timestamp() {
        let sent = frames(10);
        let mut log = log_of(&sent);
        let header_len = log_of(&[]).len();
        // Record 3's frame length made absurd, record 6's timestamp length too.
        let offsets: Vec<usize> = (0..=10).map(|n| log_of(&sent[..n]).len()).collect();
        let r3 = offsets[3] + 4 + 12;
        log[r3..r3 + 4].copy_from_slice(&0x7fff_ffffu32.to_be_bytes());
        let r6 = offsets[6];
        log[r6..r6 + 4].copy_from_slice(&0x0100_0000u32.to_be_bytes());
        assert!(header_len < r3);
        let (r, got) = read_all(&log);
        let want: Vec<&Vec<u8>> = sent
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 3 && *i != 6)
            .map(|(_, f)| f)
            .collect();
        assert_eq!(got.iter().map(|r| &r.frame).collect::<Vec<_>>(), want);
        let p = r.problem().unwrap();
        assert!(
            p.contains(&format!("damaged at byte {}", offsets[3])),
            "{p}"
        );
        assert!(p.contains("1 more damaged places"), "{p}");
    }

    #[test]
    fn a_log_longer_than_a_day_keeps_its_times_going_forward() {
        let frame = encode_frame(1211, 1, 0, &[0; 8]);
        let hours = |h: u64| Duration::from_secs(h * 3600);
        let mut w = LogWriter::new(Vec::new(), &LogHeader::for_device(None)).unwrap();
        for at in [hours(1), hours(23), hours(25), hours(47), hours(49)] {
            w.record(at, &frame).unwrap();
        }
        let log = w.into_inner().unwrap();
        let (_, got) = read_all(&log);
        let times: Vec<Duration> = got.iter().map(|r| r.at).collect();
        assert_eq!(
            times,
            [hours(1), hours(23), hours(25), hours(47), hours(49)]
        );
    }

    #[test]
    fn a_windows_log_with_utf16_strings_reads() {
        let utf16 = |s: &str| -> Vec<u8> {
            let mut out = Vec::new();
            let units: Vec<u8> = s.encode_utf16().flat_map(|u| u.to_be_bytes()).collect();
            out.extend_from_slice(&(units.len() as u32).to_be_bytes());
            out.extend_from_slice(&units);
            out
        };
        let mut log = utf16(MAGIC);
        log.extend_from_slice(&1i32.to_be_bytes());
        for s in ["abc123", "Jan 1 2020", "v2.3.0", "windows", "10"] {
            log.extend_from_slice(&utf16(s));
        }
        log.extend_from_slice(&1i32.to_be_bytes());
        log.extend_from_slice(&1i32.to_be_bytes());
        let frame = encode_frame(1211, 1, 0, &[1, 2, 3, 4, 5, 6, 7, 8]);
        for i in 0..3u64 {
            log.extend_from_slice(&utf16(&timestamp(Duration::from_millis(i * 100))));
            log.extend_from_slice(&(frame.len() as u32).to_be_bytes());
            log.extend_from_slice(&frame);
        }
        let (r, got) = read_all(&log);
        let header = r.header().unwrap();
        assert_eq!(header.device(), Some(DeviceKind::Ping1d));
        assert_eq!(header.build[3], "windows");
        assert_eq!(r.problem(), None);
        assert_eq!(got.len(), 3);
        assert_eq!(got[2].at, Duration::from_millis(200));
        assert_eq!(got[2].frame, frame);
    }

    #[test]
    fn a_file_that_is_not_a_log_is_said_so_and_megabytes_of_it_stay_bounded() {
        let noise: Vec<u8> = (0..8_000_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut r = LogReader::new(&noise[..]).unwrap();
        assert!(
            r.problem().unwrap().contains("header unreadable"),
            "{:?}",
            r.problem()
        );
        let mut n = 0;
        while r.next_record().unwrap().is_some() {
            n += 1;
            assert!(r.buf.capacity() <= 256 * 1024, "{}", r.buf.capacity());
        }
        assert!(r.buf.capacity() <= 256 * 1024, "{}", r.buf.capacity());
        assert!(n < 10, "{n} records found in noise");
        // A header whose strings claim gigabytes is refused, not allocated.
        let mut huge = (u32::MAX).to_be_bytes().to_vec();
        huge.extend_from_slice(&[0; 64]);
        let r = LogReader::new(&huge[..]).unwrap();
        assert!(
            r.problem().unwrap().contains("a string of"),
            "{:?}",
            r.problem()
        );
    }

    #[test]
    fn gigabytes_of_zeros_after_a_record_are_not_read_to_their_end() {
        let frame = encode_frame(1211, 1, 0, &[0; 8]);
        let mut w = LogWriter::new(Vec::new(), &LogHeader::for_device(None)).unwrap();
        w.record(Duration::from_millis(5), &frame).unwrap();
        let log = w.into_inner().unwrap();
        // A record whose length is corrupt, then 4 GiB of zeros (a sparse file).
        let mut damaged = log.clone();
        damaged.extend_from_slice(&[0, 0, 0, 12]);
        damaged.extend_from_slice(b"00:00:00.010");
        damaged.extend_from_slice(&u32::MAX.to_be_bytes());
        let read = std::cell::Cell::new(0u64);
        struct Counting<'a, R>(R, &'a std::cell::Cell<u64>);
        impl<R: std::io::Read> std::io::Read for Counting<'_, R> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.read(buf)?;
                self.1.set(self.1.get() + n as u64);
                Ok(n)
            }
        }
        let zeros = std::io::Read::take(std::io::repeat(0), 4 << 30);
        let input = Counting(std::io::Read::chain(&damaged[..], zeros), &read);
        let mut r = LogReader::new(input).unwrap();
        let mut records = 0;
        while r.next_record().unwrap().is_some() {
            records += 1;
        }
        assert_eq!(records, 1);
        assert!(read.get() < 2 * MAX_SCAN, "{} bytes read", read.get());
        let problem = r.problem().unwrap();
        assert!(problem.contains("the rest is not read"), "{problem}");
    }
}
