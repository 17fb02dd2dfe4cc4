//! Reads a bag from front to back, chunk by chunk, without its index: so an unindexed
//! bag (a recording that was killed) and a cut one read as far as they go, and memory
//! holds one chunk at a time, whatever the file claims.

use super::{fields, op, time_ns, MAGIC};
use crate::{Connection, ConnectionId, Item, Limits, RecordError};
use std::collections::HashSet;
use std::io::Read;

/// A record: its header (fields) and its data.
type Record = (Vec<u8>, Vec<u8>);

/// The most a record header may hold: a few fields and a topic name.
const MAX_RECORD_HEADER: usize = 1 << 20;

/// A bag read front to back.
pub struct Reader<R: Read> {
    file: R,
    limits: Limits,
    /// Where in the file the next top-level record starts (for errors that say where).
    position: u64,
    /// The records of the chunk being read, uncompressed, and how far they are read.
    chunk: Vec<u8>,
    at: usize,
    connections: HashSet<u32>,
    done: bool,
}

impl<R: Read> Reader<R> {
    /// Checks the magic line; the records follow on [`next_item`](Self::next_item).
    pub fn new(mut file: R, limits: Limits) -> Result<Reader<R>, RecordError> {
        let mut magic = [0; MAGIC.len()];
        file.read_exact(&mut magic).map_err(|_| {
            RecordError::Format("not a ROS bag: shorter than its first line".into())
        })?;
        if magic != MAGIC {
            return Err(RecordError::Format(
                "not a ROS bag v2.0 (its first line is not #ROSBAG V2.0)".into(),
            ));
        }
        Ok(Reader {
            file,
            limits,
            position: MAGIC.len() as u64,
            chunk: Vec::new(),
            at: 0,
            connections: HashSet::new(),
            done: false,
        })
    }

    /// The next connection or message; `None` at the end of the bag. An error says where
    /// the bag stops being readable; everything before it was returned.
    pub fn next_item(&mut self) -> Result<Option<Item>, RecordError> {
        loop {
            if self.at < self.chunk.len() {
                let (header, data) = self.chunk_record()?;
                if let Some(item) = self.item(&header, data)? {
                    return Ok(Some(item));
                }
                continue;
            }
            if self.done {
                return Ok(None);
            }
            let Some((header, data)) = self.file_record()? else {
                self.done = true;
                return Ok(None);
            };
            let op = op_of(&header)?;
            if op == op::CHUNK {
                self.chunk = self.decompress(&header, data)?;
                self.at = 0;
                continue;
            }
            if let Some(item) = self.item(&header, data)? {
                return Ok(Some(item));
            }
        }
    }

    /// A top-level record, or `None` at a clean end of the file.
    fn file_record(&mut self) -> Result<Option<Record>, RecordError> {
        let start = self.position;
        let mut len = [0; 4];
        match read_full(&mut self.file, &mut len)? {
            0 => return Ok(None),
            4 => {}
            _ => return Err(cut(start)),
        }
        let header_len = u32::from_le_bytes(len) as usize;
        if header_len > MAX_RECORD_HEADER {
            return Err(RecordError::TooBig {
                what: format!("the record header at byte {start}"),
                size: header_len as u64,
                limit: MAX_RECORD_HEADER as u64,
            });
        }
        let header = read_exactly(&mut self.file, header_len).ok_or_else(|| cut(start))?;
        if read_full(&mut self.file, &mut len)? != 4 {
            return Err(cut(start));
        }
        let data_len = u32::from_le_bytes(len) as usize;
        let limit = if op_of(&header)? == op::CHUNK {
            self.limits.max_chunk
        } else {
            self.limits.max_record
        };
        if data_len > limit {
            return Err(RecordError::TooBig {
                what: format!("the record at byte {start}"),
                size: data_len as u64,
                limit: limit as u64,
            });
        }
        let data = read_exactly(&mut self.file, data_len).ok_or_else(|| cut(start))?;
        self.position += 8 + header_len as u64 + data_len as u64;
        Ok(Some((header, data)))
    }

    /// The next record inside the chunk being read.
    fn chunk_record(&mut self) -> Result<Record, RecordError> {
        let rest = &self.chunk[self.at..];
        let bad = || RecordError::Format("a record inside a chunk runs past its end".into());
        let header_len = rest
            .first_chunk::<4>()
            .map(|b| u32::from_le_bytes(*b) as usize)
            .ok_or_else(bad)?;
        let header = rest.get(4..4 + header_len).ok_or_else(bad)?;
        let data_len = rest
            .get(4 + header_len..8 + header_len)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(bad)?;
        let data = rest
            .get(8 + header_len..8 + header_len + data_len)
            .ok_or_else(bad)?;
        let record = (header.to_vec(), data.to_vec());
        self.at += 8 + header_len + data_len;
        Ok(record)
    }

    /// What a connection or message record says; `None` for the records only an index
    /// reader needs, and for a connection already returned.
    fn item(&mut self, header: &[u8], data: Vec<u8>) -> Result<Option<Item>, RecordError> {
        let fields = fields(header)?;
        let field = |name: &str| fields.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        let conn = || -> Result<u32, RecordError> {
            field("conn")
                .and_then(|v| v.try_into().ok())
                .map(u32::from_le_bytes)
                .ok_or_else(|| RecordError::Format("a record without its conn field".into()))
        };
        match op_of(header)? {
            op::CONNECTION => {
                let id = conn()?;
                if !self.connections.contains(&id) {
                    if self.connections.len() >= self.limits.max_connections {
                        return Err(RecordError::TooBig {
                            what: "the connections of this bag".into(),
                            size: self.connections.len() as u64 + 1,
                            limit: self.limits.max_connections as u64,
                        });
                    }
                    self.connections.insert(id);
                    let topic = field("topic").unwrap_or_default();
                    return Ok(Some(Item::Connection {
                        id: ConnectionId(id),
                        connection: connection_of(topic, &data)?,
                    }));
                }
                Ok(None)
            }
            op::MESSAGE_DATA => {
                let time = field("time")
                    .and_then(|v| v.try_into().ok())
                    .map(time_ns)
                    .ok_or_else(|| RecordError::Format("a message without its time".into()))?;
                Ok(Some(Item::Message {
                    connection: ConnectionId(conn()?),
                    time_ns: time,
                    data,
                }))
            }
            op::BAG_HEADER | op::INDEX_DATA | op::CHUNK_INFO => Ok(None),
            other => Err(RecordError::Format(format!(
                "a record of unknown kind (op {other:#04x})"
            ))),
        }
    }

    /// A chunk's records, uncompressed: never more than its `size` field says, and that
    /// within the limits.
    fn decompress(&self, header: &[u8], data: Vec<u8>) -> Result<Vec<u8>, RecordError> {
        let fields = fields(header)?;
        let field = |name: &str| fields.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        let size = field("size")
            .and_then(|v| v.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or_else(|| RecordError::Format("a chunk without its size".into()))?
            as usize;
        if size > self.limits.max_chunk {
            return Err(RecordError::TooBig {
                what: "a chunk (uncompressed)".into(),
                size: size as u64,
                limit: self.limits.max_chunk as u64,
            });
        }
        let compression = field("compression").unwrap_or(b"none");
        let mut out = Vec::new();
        let bound = size as u64 + 1;
        let result = match compression {
            b"none" => return Ok(data),
            b"bz2" => bzip2::read::BzDecoder::new(&data[..])
                .take(bound)
                .read_to_end(&mut out),
            b"lz4" => lz4_flex::frame::FrameDecoder::new(&data[..])
                .take(bound)
                .read_to_end(&mut out),
            other => {
                return Err(RecordError::Format(format!(
                    "a chunk compressed with {:?}, which bags do not use",
                    String::from_utf8_lossy(other)
                )))
            }
        };
        result.map_err(|e| {
            RecordError::Format(format!(
                "a {} chunk does not decompress: {e}",
                String::from_utf8_lossy(compression)
            ))
        })?;
        if out.len() != size {
            return Err(RecordError::Format(format!(
                "a chunk decompresses to {} bytes where its header says {size}",
                out.len()
            )));
        }
        Ok(out)
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = Result<Item, RecordError>;

    /// Items until the end, or until the first error (then nothing more).
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_item() {
            Ok(item) => item.map(Ok),
            Err(e) => {
                self.done = true;
                self.chunk.clear();
                self.at = 0;
                Some(Err(e))
            }
        }
    }
}

fn op_of(header: &[u8]) -> Result<u8, RecordError> {
    fields(header)?
        .into_iter()
        .find(|(name, _)| *name == "op")
        .and_then(|(_, v)| v.first().copied())
        .ok_or_else(|| RecordError::Format("a record without its op field".into()))
}

/// A connection record's data (the publisher's connection header) as a [`Connection`].
fn connection_of(topic: &[u8], data: &[u8]) -> Result<Connection, RecordError> {
    let fields = fields(data)?;
    let text = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default()
    };
    Ok(Connection {
        topic: String::from_utf8_lossy(topic).into_owned(),
        msg_type: text("type"),
        md5sum: text("md5sum"),
        definition: text("message_definition"),
        callerid: text("callerid"),
        latching: text("latching") == "1",
    })
}

fn cut(start: u64) -> RecordError {
    RecordError::Format(format!(
        "the bag is cut short in the record at byte {start} (read as far as it goes)"
    ))
}

/// Reads until `buf` is full or the file ends; how much it read.
fn read_full(file: &mut impl Read, buf: &mut [u8]) -> Result<usize, RecordError> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(RecordError::Io(e)),
        }
    }
    Ok(filled)
}

/// Exactly `len` bytes, growing the buffer only as bytes arrive: a length that lies costs
/// what the file really holds, not what it claims.
fn read_exactly(file: &mut impl Read, len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(len.min(1 << 20));
    file.take(len as u64).read_to_end(&mut out).ok()?;
    (out.len() == len).then_some(out)
}
