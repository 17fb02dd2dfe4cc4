//! MCAP with the `ros1` profile, through Foxglove's `mcap` crate: a `ros1msg` schema per
//! message type and definition, a `ros1` channel per publisher's stream, messages stamped
//! with the time they arrived.

use crate::{Compression, Connection, ConnectionId, RecordError, Tracked};
use std::collections::{BTreeMap, HashMap};
use std::io::{Seek, Write};

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
}
