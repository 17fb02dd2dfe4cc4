//! MCAP with the `ros1` profile, through Foxglove's `mcap` crate: a `ros1msg` schema per
//! message type and definition, a `ros1` channel per publisher's stream, messages stamped
//! with the time they arrived.

use crate::{Compression, Connection, ConnectionId, Item, Limits, RecordError, Tracked};
use mcap::sans_io::linear_reader::{LinearReadEvent, LinearReader, LinearReaderOptions};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, Write};

/// Chunks of about 1 MiB uncompressed, as the MCAP CLI writes them: big enough to
/// compress, small enough that a crash loses little.
const CHUNK_SIZE: u64 = 1 << 20;

/// An MCAP recording being written.
pub struct McapWriter<W: Write + Seek> {
    inner: mcap::Writer<Tracked<W>>,
    /// Schema ids by (type, definition): publishers of one type share a schema.
    schemas: HashMap<(String, String), u16>,
    /// Channel ids by connection id, and each channel's next sequence number.
    channels: Vec<(u16, u32)>,
    written: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// A reading error in one line that says what it means for the file.
fn mcap_read_error(e: mcap::McapError, limits: &Limits) -> RecordError {
    match e {
        mcap::McapError::UnexpectedEof => RecordError::Format(
            "the MCAP file is cut short (read as far as its last whole record)".into(),
        ),
        // The writer leaves a chunk's length at u64::MAX until the chunk is done: a file
        // cut while it wrote one (a crash, a full disk) ends there.
        mcap::McapError::RecordTooLarge { len: u64::MAX, .. } => RecordError::Format(
            "the MCAP file is cut short in a chunk that was never finished (read as far as it goes)"
                .into(),
        ),
        mcap::McapError::RecordTooLarge { len, .. } | mcap::McapError::ChunkTooLarge(len) => {
            RecordError::TooBig {
                what: "a record".into(),
                size: len,
                limit: limits.max_record.max(limits.max_chunk) as u64,
            }
        }
        other => mcap_error(other),
    }
}

fn mcap_error(e: mcap::McapError) -> RecordError {
    match e {
        mcap::McapError::Io(e) => RecordError::Io(e),
        other => RecordError::Mcap(other.to_string()),
    }
}

impl<W: Write + Seek> McapWriter<W> {
    /// Starts a recording in `file`: the header now, chunks of `compression` as messages
    /// come. `Compression::Bz2` is not an MCAP compression and is refused.
    pub fn new(file: W, compression: Compression) -> Result<McapWriter<W>, RecordError> {
        let compression = match compression {
            Compression::None => None,
            Compression::Lz4 => Some(mcap::Compression::Lz4),
            Compression::Zstd => Some(mcap::Compression::Zstd),
            Compression::Bz2 => {
                return Err(RecordError::Format(
                    "MCAP chunks are zstd, lz4 or none (bz2 is for bags)".into(),
                ))
            }
        };
        let tracked = Tracked::new(file);
        let written = tracked.written();
        let inner = mcap::WriteOptions::new()
            .profile("ros1")
            .library(concat!("udpros-record ", env!("CARGO_PKG_VERSION")))
            .compression(compression)
            .chunk_size(Some(CHUNK_SIZE))
            .create(tracked)
            .map_err(mcap_error)?;
        Ok(McapWriter {
            inner,
            schemas: HashMap::new(),
            channels: Vec::new(),
            written,
        })
    }

    pub(crate) fn add_connection(
        &mut self,
        connection: &Connection,
    ) -> Result<ConnectionId, RecordError> {
        if self.channels.len() >= usize::from(u16::MAX) {
            return Err(RecordError::TooBig {
                what: "the channels of one MCAP file".into(),
                size: self.channels.len() as u64 + 1,
                limit: u64::from(u16::MAX),
            });
        }
        let key = (connection.msg_type.clone(), connection.definition.clone());
        let schema = match self.schemas.get(&key) {
            Some(id) => *id,
            None => {
                let id = self
                    .inner
                    .add_schema(
                        &connection.msg_type,
                        "ros1msg",
                        connection.definition.as_bytes(),
                    )
                    .map_err(mcap_error)?;
                self.schemas.insert(key, id);
                id
            }
        };
        let metadata = BTreeMap::from([
            ("md5sum".to_string(), connection.md5sum.clone()),
            ("callerid".to_string(), connection.callerid.clone()),
            (
                "latching".to_string(),
                if connection.latching { "1" } else { "0" }.to_string(),
            ),
        ]);
        let channel = self
            .inner
            .add_channel(schema, &connection.topic, "ros1", &metadata)
            .map_err(mcap_error)?;
        self.channels.push((channel, 0));
        Ok(ConnectionId(self.channels.len() as u32 - 1))
    }

    pub(crate) fn write(
        &mut self,
        connection: ConnectionId,
        received_ns: u64,
        data: &[u8],
    ) -> Result<(), RecordError> {
        let Some((channel_id, sequence)) = self.channels.get_mut(connection.0 as usize) else {
            return Err(RecordError::Format(format!(
                "no connection {} in this recording",
                connection.0
            )));
        };
        let header = mcap::records::MessageHeader {
            channel_id: *channel_id,
            sequence: *sequence,
            log_time: received_ns,
            publish_time: received_ns,
        };
        *sequence = sequence.wrapping_add(1);
        self.inner
            .write_to_known_channel(&header, data)
            .map_err(mcap_error)
    }

    pub(crate) fn flush(&mut self) -> Result<(), RecordError> {
        self.inner.flush().map_err(mcap_error)
    }

    pub(crate) fn bytes_written(&self) -> u64 {
        self.written.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn finish(mut self) -> Result<W, RecordError> {
        self.inner.finish().map_err(mcap_error)?;
        Ok(self.inner.into_inner().into_inner())
    }
}

/// An MCAP recording read front to back (Foxglove's sans-io reader), one record in memory
/// at a time: a file cut short reads up to its last whole chunk, and a record longer than
/// [`Limits::max_record`] (a 100 MB schema, a 4 GB chunk) is refused before it is read.
pub struct McapReader<R: Read> {
    file: R,
    reader: LinearReader,
    limits: Limits,
    /// Schemas by id: (type name, definition).
    schemas: HashMap<u16, (String, String)>,
    /// The channels returned (the summary and each chunk may repeat them).
    channels: std::collections::HashSet<u16>,
    /// Bytes held by the schemas, bounded by [`Limits::max_record`] in all.
    schema_bytes: usize,
    failed: bool,
    /// The records of the chunk being read, uncompressed, and how far they are read.
    chunk: Vec<u8>,
    at: usize,
}

impl<R: Read> McapReader<R> {
    /// Reads `file` from its start (its magic is checked with the first record).
    pub fn new(file: R, limits: Limits) -> McapReader<R> {
        let options = LinearReaderOptions::default()
            .with_record_length_limit(limits.max_record.max(limits.max_chunk))
            // A file cut before its footer still plays up to the cut.
            .with_skip_end_magic(true)
            // Chunks come whole and are opened here (see `Parsed`).
            .with_emit_chunks(true);
        McapReader {
            file,
            reader: LinearReader::new_with_options(options),
            limits,
            schemas: HashMap::new(),
            channels: Default::default(),
            schema_bytes: 0,
            failed: false,
            chunk: Vec::new(),
            at: 0,
        }
    }

    /// The next connection (an MCAP channel) or message; `None` at the end. An error says
    /// where the file stops being readable; everything before it was returned.
    pub fn next_item(&mut self) -> Result<Option<Item>, RecordError> {
        if self.failed {
            return Ok(None);
        }
        loop {
            let (opcode, data) = if self.at < self.chunk.len() {
                let (opcode, range) = inner_record(&self.chunk, self.at)?;
                self.at = range.end;
                (opcode, self.chunk[range].to_vec())
            } else {
                let event = match self.reader.next_event() {
                    None => return Ok(None),
                    Some(event) => event.map_err(|e| mcap_read_error(e, &self.limits))?,
                };
                match event {
                    LinearReadEvent::ReadRequest(need) => {
                        let buf = self.reader.insert(need);
                        let read = loop {
                            match self.file.read(buf) {
                                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                                other => break other?,
                            }
                        };
                        self.reader.notify_read(read);
                        continue;
                    }
                    LinearReadEvent::Record { opcode, data } => {
                        if opcode == mcap::records::op::CHUNK {
                            self.chunk = open_chunk(data, &self.limits)?;
                            self.at = 0;
                            continue;
                        }
                        (opcode, data.to_vec())
                    }
                }
            };
            if opcode == mcap::records::op::MESSAGE && data.len() > self.limits.max_record {
                return Err(RecordError::TooBig {
                    what: "a message".into(),
                    size: data.len() as u64,
                    limit: self.limits.max_record as u64,
                });
            }
            let record = parse(opcode, &data)?;
            match record {
                Parsed::Schema { id, name, data } => {
                    if self.schemas.contains_key(&id) {
                        continue;
                    }
                    self.schema_bytes += data.len() + name.len();
                    if self.schema_bytes > self.limits.max_record
                        || self.schemas.len() >= self.limits.max_connections
                    {
                        return Err(RecordError::TooBig {
                            what: "the schemas of this file".into(),
                            size: self.schema_bytes as u64,
                            limit: self.limits.max_record as u64,
                        });
                    }
                    let definition = String::from_utf8_lossy(data).into_owned();
                    self.schemas.insert(id, (name, definition));
                }
                Parsed::Channel {
                    id,
                    schema_id,
                    topic,
                    encoding,
                    metadata,
                } => {
                    if self.channels.contains(&id) {
                        continue;
                    }
                    if self.channels.len() >= self.limits.max_connections {
                        return Err(RecordError::TooBig {
                            what: "the channels of this file".into(),
                            size: self.channels.len() as u64 + 1,
                            limit: self.limits.max_connections as u64,
                        });
                    }
                    if encoding != "ros1" {
                        return Err(RecordError::Format(format!(
                            "channel {id} of {topic} is {encoding:?}, not ros1"
                        )));
                    }
                    let Some((msg_type, definition)) = self.schemas.get(&schema_id) else {
                        return Err(RecordError::Format(format!(
                            "channel {id} of {topic} names schema {schema_id}, which the file has not given"
                        )));
                    };
                    self.channels.insert(id);
                    let meta = |name: &str| {
                        metadata
                            .iter()
                            .find(|(k, _)| k == name)
                            .map(|(_, v)| v.clone())
                            .unwrap_or_default()
                    };
                    let connection = Connection {
                        topic,
                        msg_type: msg_type.clone(),
                        md5sum: meta("md5sum"),
                        definition: definition.clone(),
                        callerid: meta("callerid"),
                        latching: matches!(meta("latching").as_str(), "1" | "true"),
                    };
                    return Ok(Some(Item::Connection {
                        id: ConnectionId(u32::from(id)),
                        connection,
                    }));
                }
                Parsed::Message {
                    channel_id,
                    log_time,
                    data,
                } => {
                    return Ok(Some(Item::Message {
                        connection: ConnectionId(u32::from(channel_id)),
                        time_ns: log_time,
                        data: data.to_vec(),
                    }))
                }
                Parsed::Other => {}
            }
        }
    }
}

/// The three records a player needs, read here rather than by the `mcap` crate's parser,
/// which allocates a string's stated length before checking it against the record (a
/// 30-byte record could ask for 4 GB); chunks are opened here too, since its linear
/// reader's arithmetic on a record longer than its chunk overflows.
enum Parsed<'a> {
    Schema {
        id: u16,
        name: String,
        data: &'a [u8],
    },
    Channel {
        id: u16,
        schema_id: u16,
        topic: String,
        encoding: String,
        metadata: Vec<(String, String)>,
    },
    Message {
        channel_id: u16,
        log_time: u64,
        data: &'a [u8],
    },
    Other,
}

/// A record's fields, each length checked against what is left of the record.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if n > self.0.len() {
            return Err(RecordError::Format(format!(
                "an MCAP record field of {n} bytes where {} remain",
                self.0.len()
            )));
        }
        let (field, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(field)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RecordError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16, RecordError> {
        self.array().map(u16::from_le_bytes)
    }

    fn u32(&mut self) -> Result<u32, RecordError> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64, RecordError> {
        self.array().map(u64::from_le_bytes)
    }

    /// A `u32` length and that many bytes.
    fn bytes(&mut self) -> Result<&'a [u8], RecordError> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    fn string(&mut self) -> Result<String, RecordError> {
        Ok(String::from_utf8_lossy(self.bytes()?).into_owned())
    }
}

/// The record at `at` in a chunk's records: its opcode and where its data lies.
fn inner_record(records: &[u8], at: usize) -> Result<(u8, std::ops::Range<usize>), RecordError> {
    let mut f = Fields(&records[at..]);
    let opcode = f.array::<1>()?[0];
    let len = f.u64()?;
    if len > f.0.len() as u64 {
        return Err(RecordError::Format(format!(
            "an MCAP record of {len} bytes where its chunk has {} left",
            f.0.len()
        )));
    }
    let start = at + 9;
    Ok((opcode, start..start + len as usize))
}

/// A chunk's records, uncompressed: never more than its stated size, and that within the
/// limits.
fn open_chunk(data: &[u8], limits: &Limits) -> Result<Vec<u8>, RecordError> {
    let mut f = Fields(data);
    let _start = f.u64()?;
    let _end = f.u64()?;
    let size = f.u64()?;
    let _crc = f.u32()?;
    let compression = f.string()?;
    let len = f.u64()?;
    let records = f.take(usize::try_from(len).unwrap_or(usize::MAX))?;
    if size > limits.max_chunk as u64 {
        return Err(RecordError::TooBig {
            what: "an MCAP chunk (uncompressed)".into(),
            size,
            limit: limits.max_chunk as u64,
        });
    }
    let size = size as usize;
    let mut out = Vec::new();
    let bound = size as u64 + 1;
    let result = match compression.as_str() {
        "" => {
            out = records.to_vec();
            Ok(out.len())
        }
        "zstd" => zstd::stream::read::Decoder::new(records)
            .and_then(|d| d.take(bound).read_to_end(&mut out)),
        "lz4" => lz4_flex::frame::FrameDecoder::new(records)
            .take(bound)
            .read_to_end(&mut out),
        other => {
            return Err(RecordError::Format(format!(
                "an MCAP chunk compressed with {other:?}"
            )))
        }
    };
    result.map_err(|e| RecordError::Format(format!("an MCAP {compression} chunk: {e}")))?;
    if out.len() != size {
        return Err(RecordError::Format(format!(
            "an MCAP chunk opens to {} bytes where it says {size}",
            out.len()
        )));
    }
    Ok(out)
}

fn parse(opcode: u8, data: &[u8]) -> Result<Parsed<'_>, RecordError> {
    let mut f = Fields(data);
    Ok(match opcode {
        mcap::records::op::SCHEMA => Parsed::Schema {
            id: f.u16()?,
            name: f.string()?,
            // The encoding, then the definition.
            data: {
                f.bytes()?;
                f.bytes()?
            },
        },
        mcap::records::op::CHANNEL => {
            let id = f.u16()?;
            let schema_id = f.u16()?;
            let topic = f.string()?;
            let encoding = f.string()?;
            let mut map = Fields(f.bytes()?);
            let mut metadata = Vec::new();
            while !map.0.is_empty() {
                metadata.push((map.string()?, map.string()?));
            }
            Parsed::Channel {
                id,
                schema_id,
                topic,
                encoding,
                metadata,
            }
        }
        mcap::records::op::MESSAGE => {
            let channel_id = f.u16()?;
            let _sequence = f.u32()?;
            let log_time = f.u64()?;
            let _publish_time = f.u64()?;
            Parsed::Message {
                channel_id,
                log_time,
                data: f.0,
            }
        }
        _ => Parsed::Other,
    })
}

impl<R: Read> Iterator for McapReader<R> {
    type Item = Result<Item, RecordError>;

    /// Items until the end, or until the first error (then nothing more).
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_item() {
            Ok(item) => item.map(Ok),
            Err(e) => {
                // Nothing after an error: the reader's state is not trusted past it.
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn messages_read_back_with_their_schema_channel_and_times() {
        for compression in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let mut writer = McapWriter::new(Cursor::new(Vec::new()), compression).unwrap();
            let connection = Connection {
                topic: "/depth".into(),
                msg_type: "std_msgs/Float64".into(),
                md5sum: "fdb28210bfa9d7c91146260178d9a584".into(),
                definition: "float64 data\n".into(),
                callerid: "/ping1d".into(),
                latching: true,
            };
            let id = writer.add_connection(&connection).unwrap();
            // A second publisher of the same type shares the schema.
            let other = Connection {
                callerid: "/other".into(),
                ..connection.clone()
            };
            let id2 = writer.add_connection(&other).unwrap();
            for i in 0..1000u64 {
                let conn = if i % 2 == 0 { id } else { id2 };
                writer
                    .write(conn, 1_000 + i, &(i as f64).to_le_bytes())
                    .unwrap();
            }
            assert!(writer.bytes_written() > 0);
            let bytes = writer.finish().unwrap().into_inner();
            let summary = mcap::Summary::read(&bytes).unwrap().expect("a summary");
            assert_eq!(summary.schemas.len(), 1, "{compression:?}");
            assert_eq!(summary.channels.len(), 2);
            let stats = summary.stats.expect("statistics");
            assert_eq!(stats.message_count, 1000);
            let messages: Vec<_> = mcap::MessageStream::new(&bytes)
                .unwrap()
                .map(|m| m.unwrap())
                .collect();
            assert_eq!(messages.len(), 1000);
            for (i, m) in messages.iter().enumerate() {
                assert_eq!(m.log_time, 1_000 + i as u64);
                assert_eq!(&m.data[..], &(i as f64).to_le_bytes());
                let schema = m.channel.schema.as_ref().unwrap();
                assert_eq!(schema.name, "std_msgs/Float64");
                assert_eq!(schema.encoding, "ros1msg");
                assert_eq!(&schema.data[..], b"float64 data\n");
                assert_eq!(m.channel.message_encoding, "ros1");
                assert_eq!(m.channel.metadata["latching"], "1");
                let caller = if i % 2 == 0 { "/ping1d" } else { "/other" };
                assert_eq!(m.channel.metadata["callerid"], caller);
            }
        }
    }

    #[test]
    fn a_full_disk_is_an_error_not_a_panic() {
        /// A disk with room for `room` bytes.
        struct Small {
            file: Cursor<Vec<u8>>,
            room: usize,
        }
        impl Write for Small {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let left = self.room.saturating_sub(self.file.get_ref().len());
                if left == 0 {
                    return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
                }
                self.file.write(&buf[..buf.len().min(left)])
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        impl Seek for Small {
            fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
                self.file.seek(to)
            }
        }
        for compression in [Compression::None, Compression::Zstd] {
            let disk = Small {
                file: Cursor::new(Vec::new()),
                room: 100_000,
            };
            let mut writer = McapWriter::new(disk, compression).unwrap();
            let id = writer
                .add_connection(&Connection {
                    topic: "/image".into(),
                    msg_type: "std_msgs/String".into(),
                    md5sum: "992ce8a1687cec8c8bd883ec73ca41d1".into(),
                    definition: "string data\n".into(),
                    callerid: "/camera".into(),
                    latching: false,
                })
                .unwrap();
            let noise: Vec<u8> = (0..50_000u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect();
            let mut failed = None;
            for i in 0..100 {
                if let Err(e) = writer.write(id, i, &noise).and_then(|()| writer.flush()) {
                    failed = Some(e);
                    break;
                }
            }
            let error = failed.expect("the disk fills").to_string();
            assert!(error.contains("No space left"), "{error}");
        }
    }

    fn recording(messages: u64, definition: &str) -> Vec<u8> {
        let mut writer = McapWriter::new(Cursor::new(Vec::new()), Compression::Zstd).unwrap();
        let id = writer
            .add_connection(&Connection {
                topic: "/attitude".into(),
                msg_type: "geometry_msgs/Vector3".into(),
                md5sum: "4a842b65f413084dc2b10fb484ea7f17".into(),
                definition: definition.into(),
                callerid: "/mavlink_bridge".into(),
                latching: false,
            })
            .unwrap();
        for i in 0..messages {
            writer.write(id, 10 + i, &[i as u8; 24]).unwrap();
            if i % 10 == 9 {
                writer.flush().unwrap(); // a chunk per 10 messages
            }
        }
        writer.finish().unwrap().into_inner()
    }

    fn read(bytes: &[u8], limits: Limits) -> (Vec<Item>, Option<RecordError>) {
        let mut items = Vec::new();
        for item in McapReader::new(bytes, limits) {
            match item {
                Ok(item) => items.push(item),
                Err(e) => return (items, Some(e)),
            }
        }
        (items, None)
    }

    #[test]
    fn the_reader_gives_back_connections_and_messages() {
        let bytes = recording(50, "float64 x\nfloat64 y\nfloat64 z\n");
        let (items, error) = read(&bytes, Limits::default());
        assert!(error.is_none(), "{error:?}");
        let Item::Connection { connection, .. } = &items[0] else {
            panic!("a connection first: {:?}", items[0]);
        };
        assert_eq!(connection.msg_type, "geometry_msgs/Vector3");
        assert_eq!(connection.callerid, "/mavlink_bridge");
        assert_eq!(connection.definition, "float64 x\nfloat64 y\nfloat64 z\n");
        let messages: Vec<_> = items[1..]
            .iter()
            .map(|i| match i {
                Item::Message { time_ns, data, .. } => (*time_ns, data[0]),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            messages,
            (0..50).map(|i| (10 + i, i as u8)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_file_cut_anywhere_in_its_last_chunks_reads_a_prefix() {
        let bytes = recording(40, "float64 x\n");
        let (whole, _) = read(&bytes, Limits::default());
        let mut last = usize::MAX;
        for cut in (8..bytes.len()).rev() {
            let (items, error) = read(&bytes[..cut], Limits::default());
            assert_eq!(items[..], whole[..items.len()], "cut at {cut}");
            assert!(items.len() <= last);
            last = items.len();
            // A cut inside a record is said; one between records reads as a shorter file.
            if items.len() < whole.len() && error.is_none() {
                assert!(bytes[..cut].len() >= 8, "cut at {cut}");
            }
        }
        assert_eq!(last, 0);
    }

    #[test]
    fn records_over_the_limit_are_refused_in_one_line() {
        let limits = Limits {
            max_record: 1 << 20,
            max_chunk: 1 << 20,
            ..Limits::default()
        };
        // A schema of 2 MB.
        let big = "float64 x\n".repeat(200_000);
        let (_, error) = read(&recording(1, &big), limits);
        let error = error.expect("refused");
        assert!(matches!(error, RecordError::TooBig { .. }), "{error}");
        // A record that claims 100 MB and holds nothing.
        let mut bytes = mcap::MAGIC.to_vec();
        bytes.push(mcap::records::op::SCHEMA);
        bytes.extend_from_slice(&(100u64 << 20).to_le_bytes());
        bytes.extend_from_slice(&[0; 64]);
        let (_, error) = read(&bytes, limits);
        let error = error.expect("refused").to_string();
        assert!(error.contains("over the limit"), "{error}");
        // A small schema record whose name claims 4 GB (the fuzzer's find: a parser that
        // believed it would allocate the 4 GB).
        let mut bytes = mcap::MAGIC.to_vec();
        bytes.push(mcap::records::op::SCHEMA);
        bytes.extend_from_slice(&30u64.to_le_bytes());
        bytes.extend_from_slice(&1u16.to_le_bytes());
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(&[b'x'; 24]);
        let (_, error) = read(&bytes, limits);
        let error = error.expect("refused").to_string();
        assert!(error.contains("field of 4294967295 bytes"), "{error}");
    }
}
