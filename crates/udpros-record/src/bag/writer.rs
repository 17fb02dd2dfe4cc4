//! Writes a bag as rosbag does: chunks of connection and message records, an index record
//! per connection after each chunk, and on close the connection and chunk-info records the
//! bag header points at.

use super::{op, put_field, put_record, time_bytes, BAG_HEADER_LEN, MAGIC};
use crate::{Compression, Connection, ConnectionId, RecordError, Tracked};
use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};

/// rosbag's default chunk threshold (`--chunksize=768`, in KiB).
const CHUNK_THRESHOLD: usize = 768 * 1024;

/// A closed chunk, as its chunk-info record describes it.
struct ChunkInfo {
    position: u64,
    start_ns: u64,
    end_ns: u64,
    /// Messages per connection in the chunk.
    counts: BTreeMap<u32, u32>,
}

/// The chunk being filled: its records, uncompressed, and each message's place in them.
#[derive(Default)]
struct OpenChunk {
    records: Vec<u8>,
    /// Per connection: (receive time, offset of the message record in `records`).
    index: BTreeMap<u32, Vec<(u64, u32)>>,
    start_ns: u64,
    end_ns: u64,
}

/// A ROS bag v2 being written.
pub struct Writer<W: Write + Seek> {
    pub(super) file: Tracked<W>,
    compression: Compression,
    chunk_threshold: usize,
    connections: Vec<(Connection, Vec<u8>)>,
    chunk: OpenChunk,
    chunks: Vec<ChunkInfo>,
    written: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<W: Write + Seek> Writer<W> {
    /// Starts a bag in `file` (at its start): the magic line and an unindexed bag header,
    /// which [`finish`](Self::finish) rewrites. `Compression::Zstd` is not a bag
    /// compression and is refused.
    pub fn new(file: W, compression: Compression) -> Result<Writer<W>, RecordError> {
        if compression == Compression::Zstd {
            return Err(RecordError::Format(
                "bag chunks are bz2, lz4 or none (zstd is for MCAP)".into(),
            ));
        }
        let file = Tracked::new(file);
        let written = file.written();
        let mut writer = Writer {
            file,
            compression,
            chunk_threshold: CHUNK_THRESHOLD,
            connections: Vec::new(),
            chunk: OpenChunk::default(),
            chunks: Vec::new(),
            written,
        };
        writer.file.write_all(MAGIC)?;
        let header = bag_header(0, 0, 0);
        writer.file.write_all(&header)?;
        Ok(writer)
    }

    /// Sets the uncompressed size at which a chunk is closed (rosbag's `--chunksize`).
    pub fn with_chunk_threshold(mut self, bytes: usize) -> Writer<W> {
        self.chunk_threshold = bytes.max(1);
        self
    }

    pub(crate) fn add_connection(
        &mut self,
        connection: &Connection,
    ) -> Result<ConnectionId, RecordError> {
        let id = u32::try_from(self.connections.len()).map_err(|_| RecordError::TooBig {
            what: "the connections of one bag".into(),
            size: self.connections.len() as u64,
            limit: u64::from(u32::MAX),
        })?;
        let record = connection_record(id, connection);
        // In the chunk where the connection first appears, so that a bag cut before its
        // index still says what each message is (rosbag does the same).
        self.chunk.records.extend_from_slice(&record);
        self.connections.push((connection.clone(), record));
        Ok(ConnectionId(id))
    }

    pub(crate) fn write(
        &mut self,
        connection: ConnectionId,
        received_ns: u64,
        data: &[u8],
    ) -> Result<(), RecordError> {
        if connection.0 as usize >= self.connections.len() {
            return Err(RecordError::Format(format!(
                "no connection {} in this bag",
                connection.0
            )));
        }
        if data.len() > u32::MAX as usize - 64 {
            return Err(RecordError::TooBig {
                what: "a message".into(),
                size: data.len() as u64,
                limit: u64::from(u32::MAX) - 64,
            });
        }
        // A chunk's offsets are u32: close it before a message would not fit.
        if self.chunk.records.len() + data.len() > u32::MAX as usize - 1024 {
            self.flush()?;
        }
        let chunk = &mut self.chunk;
        if chunk.index.is_empty() {
            chunk.start_ns = received_ns;
            chunk.end_ns = received_ns;
        }
        chunk.start_ns = chunk.start_ns.min(received_ns);
        chunk.end_ns = chunk.end_ns.max(received_ns);
        let offset = chunk.records.len() as u32;
        chunk
            .index
            .entry(connection.0)
            .or_default()
            .push((received_ns, offset));
        let mut header = Vec::with_capacity(40);
        put_field(&mut header, "op", &[op::MESSAGE_DATA]);
        put_field(&mut header, "conn", &connection.0.to_le_bytes());
        put_field(&mut header, "time", &time_bytes(received_ns));
        put_record(&mut chunk.records, &header, data);
        if chunk.records.len() >= self.chunk_threshold {
            self.flush()?;
        }
        Ok(())
    }

    /// Closes the chunk being filled (if it holds a message) and writes it with its index
    /// records: everything written so far is then readable whole.
    pub(crate) fn flush(&mut self) -> Result<(), RecordError> {
        if self.chunk.index.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::take(&mut self.chunk);
        let position = self.file.stream_position()?;
        let compressed = compress(self.compression, &chunk.records)?;
        let mut out = Vec::with_capacity(compressed.len() + 256);
        let mut header = Vec::new();
        put_field(&mut header, "op", &[op::CHUNK]);
        put_field(
            &mut header,
            "compression",
            self.compression.as_str().as_bytes(),
        );
        put_field(
            &mut header,
            "size",
            &(chunk.records.len() as u32).to_le_bytes(),
        );
        put_record(&mut out, &header, &compressed);
        let mut counts = BTreeMap::new();
        for (conn, entries) in &chunk.index {
            let mut header = Vec::new();
            put_field(&mut header, "op", &[op::INDEX_DATA]);
            put_field(&mut header, "ver", &1u32.to_le_bytes());
            put_field(&mut header, "conn", &conn.to_le_bytes());
            put_field(&mut header, "count", &(entries.len() as u32).to_le_bytes());
            let mut data = Vec::with_capacity(entries.len() * 12);
            for (time, offset) in entries {
                data.extend_from_slice(&time_bytes(*time));
                data.extend_from_slice(&offset.to_le_bytes());
            }
            put_record(&mut out, &header, &data);
            counts.insert(*conn, entries.len() as u32);
        }
        self.file.write_all(&out)?;
        self.file.flush()?;
        self.chunks.push(ChunkInfo {
            position,
            start_ns: chunk.start_ns,
            end_ns: chunk.end_ns,
            counts,
        });
        Ok(())
    }

    pub(crate) fn bytes_written(&self) -> u64 {
        self.written.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Writes the last chunk, the connection and chunk-info records, and the bag header
    /// that points at them; hands the file back.
    pub fn finish(mut self) -> Result<W, RecordError> {
        self.flush()?;
        let index_position = self.file.stream_position()?;
        let mut out = Vec::new();
        for (_, record) in &self.connections {
            out.extend_from_slice(record);
        }
        for chunk in &self.chunks {
            let mut header = Vec::new();
            put_field(&mut header, "op", &[op::CHUNK_INFO]);
            put_field(&mut header, "ver", &1u32.to_le_bytes());
            put_field(&mut header, "chunk_pos", &chunk.position.to_le_bytes());
            put_field(&mut header, "start_time", &time_bytes(chunk.start_ns));
            put_field(&mut header, "end_time", &time_bytes(chunk.end_ns));
            put_field(
                &mut header,
                "count",
                &(chunk.counts.len() as u32).to_le_bytes(),
            );
            let mut data = Vec::with_capacity(chunk.counts.len() * 8);
            for (conn, count) in &chunk.counts {
                data.extend_from_slice(&conn.to_le_bytes());
                data.extend_from_slice(&count.to_le_bytes());
            }
            put_record(&mut out, &header, &data);
        }
        self.file.write_all(&out)?;
        self.file.seek(SeekFrom::Start(MAGIC.len() as u64))?;
        self.file.write_all(&bag_header(
            index_position,
            self.connections.len() as u32,
            self.chunks.len() as u32,
        ))?;
        self.file.seek(SeekFrom::End(0))?;
        self.file.flush()?;
        Ok(self.file.into_inner())
    }
}

/// The bag header record, padded with spaces to [`BAG_HEADER_LEN`] bytes as rosbag pads it.
fn bag_header(index_position: u64, connections: u32, chunks: u32) -> Vec<u8> {
    let mut header = Vec::new();
    put_field(&mut header, "op", &[op::BAG_HEADER]);
    put_field(&mut header, "index_pos", &index_position.to_le_bytes());
    put_field(&mut header, "conn_count", &connections.to_le_bytes());
    put_field(&mut header, "chunk_count", &chunks.to_le_bytes());
    let padding = vec![b' '; BAG_HEADER_LEN - 8 - header.len()];
    let mut out = Vec::with_capacity(BAG_HEADER_LEN);
    put_record(&mut out, &header, &padding);
    out
}

/// A connection record: its number and topic in the header, the publisher's connection
/// header as the data.
fn connection_record(id: u32, connection: &Connection) -> Vec<u8> {
    let mut header = Vec::new();
    put_field(&mut header, "op", &[op::CONNECTION]);
    put_field(&mut header, "conn", &id.to_le_bytes());
    put_field(&mut header, "topic", connection.topic.as_bytes());
    let mut data = Vec::new();
    put_field(&mut data, "topic", connection.topic.as_bytes());
    put_field(&mut data, "type", connection.msg_type.as_bytes());
    put_field(&mut data, "md5sum", connection.md5sum.as_bytes());
    put_field(
        &mut data,
        "message_definition",
        connection.definition.as_bytes(),
    );
    put_field(&mut data, "callerid", connection.callerid.as_bytes());
    put_field(
        &mut data,
        "latching",
        if connection.latching { b"1" } else { b"0" },
    );
    let mut out = Vec::new();
    put_record(&mut out, &header, &data);
    out
}

/// A chunk's records, compressed as the bag says: bz2 as `rosbag record -j`, lz4 frames
/// as roslz4 reads them (independent blocks, a content checksum, no block checksums, no
/// content size; 64 KiB blocks, so a reader's buffer stays small).
fn compress(compression: Compression, records: &[u8]) -> Result<Vec<u8>, RecordError> {
    match compression {
        Compression::None => Ok(records.to_vec()),
        Compression::Bz2 => {
            let mut encoder = bzip2::write::BzEncoder::new(
                Vec::with_capacity(records.len() / 2),
                bzip2::Compression::best(),
            );
            encoder.write_all(records)?;
            Ok(encoder.finish()?)
        }
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent)
                .block_checksums(false)
                .content_checksum(true);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(
                info,
                Vec::with_capacity(records.len() / 2),
            );
            encoder.write_all(records)?;
            encoder
                .finish()
                .map_err(|e| RecordError::Format(format!("lz4: {e}")))
        }
        Compression::Zstd => Err(RecordError::Format("bags have no zstd chunks".into())),
    }
}
