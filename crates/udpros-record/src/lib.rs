//! Recordings of ROS1 topics, in the two formats ROS users open: MCAP with the `ros1`
//! profile (Foxglove, the `mcap` tools and libraries) and ROS bag v2 (`rosbag info`,
//! `rosbag play`, Foxglove).
//!
//! A [`Writer`] takes what a subscriber received (a [`Connection`] once per publisher, then
//! each message's serialized bytes and the time it arrived) and writes it in chunks, with the
//! indexes a reader seeks by when the recording is [finished](Writer::finish). Until then
//! each chunk is whole on disk as soon as it is written: a recording cut by a crash or a full
//! disk keeps every chunk before the cut, and [`bag::Reader`] reads such a bag as far as it
//! goes.
//!
//! Nothing here opens a file or reads a clock: writers take any `Write + Seek`, readers any
//! `Read`, and times come in as nanoseconds since the epoch. Every length read from a file is
//! checked against [`Limits`] before anything is allocated for it.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod bag;
mod mcap_file;

use std::fmt;
use std::io::{Seek, Write};

pub use mcap_file::{McapReader, McapWriter};

/// One publisher's stream on one topic, as its connection header describes it: what a
/// reader needs to decode and to republish its messages.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Connection {
    /// The topic, resolved (`/sonar/range`).
    pub topic: String,
    /// The message type (`sensor_msgs/Range`).
    pub msg_type: String,
    /// The type's MD5 sum, as ROS computes it.
    pub md5sum: String,
    /// The full message definition, dependencies included, as the connection header's
    /// `message_definition` carries it.
    pub definition: String,
    /// The publishing node (`callerid`).
    pub callerid: String,
    /// Whether the publisher latches: a player republishes the topic latched.
    pub latching: bool,
}

/// What a recording holds, in the order it was written (both readers' items).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A publisher's stream, before its first message.
    Connection {
        /// Its number in this bag.
        id: ConnectionId,
        /// What its connection header said.
        connection: Connection,
    },
    /// One message.
    Message {
        /// The connection it came over.
        connection: ConnectionId,
        /// When it was recorded, in nanoseconds since the epoch.
        time_ns: u64,
        /// The serialized message.
        data: Vec<u8>,
    },
}

/// Opens a recording of either format, told apart by its first bytes, as one stream of
/// [`Item`]s (connections before their messages, messages in the order written).
pub fn read_recording<R: std::io::BufRead + Send + 'static>(
    mut file: R,
    limits: Limits,
) -> Result<Box<dyn Iterator<Item = Result<Item, RecordError>> + Send>, RecordError> {
    let start = file.fill_buf()?;
    if start.starts_with(mcap::MAGIC) {
        Ok(Box::new(McapReader::new(file, limits)))
    } else if start.starts_with(bag::MAGIC) || start.starts_with(b"#ROSBAG") {
        Ok(Box::new(bag::Reader::new(file, limits)?))
    } else {
        Err(RecordError::Format(
            "neither MCAP nor a ROS bag v2.0 (by its first bytes)".into(),
        ))
    }
}

/// A connection's number in one recording, from [`Writer::add_connection`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId(pub u32);

/// How much a reader accepts from a file before it allocates: a length field of 4 GB in a
/// damaged or hostile file is refused in one line, not allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest message (and the largest record of any kind) read whole.
    pub max_record: usize,
    /// The largest chunk, compressed or not.
    pub max_chunk: usize,
    /// The most connections one recording may declare.
    pub max_connections: usize,
}

impl Default for Limits {
    /// 256 MiB per message, 512 MiB per chunk, 65,536 connections: far above what a robot
    /// records (a 4K image is 25 MB), far below what would exhaust a laptop.
    fn default() -> Limits {
        Limits {
            max_record: 256 << 20,
            max_chunk: 512 << 20,
            max_connections: 1 << 16,
        }
    }
}

/// What went wrong reading or writing a recording, in one line.
#[derive(Debug)]
pub enum RecordError {
    /// The file could not be read or written (a full disk says so here).
    Io(std::io::Error),
    /// The file is not what it claims, or is cut short; says where and what.
    Format(String),
    /// A length in the file, or a message given to a writer, is over a [`Limits`] bound.
    TooBig {
        /// What was too big (`a chunk`, `a message on /camera`).
        what: String,
        /// Its size in bytes.
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// The MCAP library refused (its own words).
    Mcap(String),
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Io(e) => write!(f, "{e}"),
            RecordError::Format(what) => f.write_str(what),
            RecordError::TooBig { what, size, limit } => {
                write!(
                    f,
                    "{what} of {size} bytes is over the limit of {limit} bytes"
                )
            }
            RecordError::Mcap(e) => write!(f, "MCAP: {e}"),
        }
    }
}

impl std::error::Error for RecordError {}

impl From<std::io::Error> for RecordError {
    fn from(e: std::io::Error) -> RecordError {
        RecordError::Io(e)
    }
}

/// Chunk compression, as each format names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Stored as it is.
    None,
    /// LZ4 frames: fast, the light choice for a robot's own disk.
    Lz4,
    /// Zstandard (MCAP only): MCAP's default, smaller files for little more CPU.
    #[default]
    Zstd,
    /// bzip2 (bags only): `rosbag record -j`.
    Bz2,
}

impl Compression {
    /// The name in a bag's chunk header or an MCAP chunk (`none`, `lz4`, `zstd`, `bz2`).
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
            Compression::Bz2 => "bz2",
        }
    }
}

/// A recording being written, in either format.
pub enum Writer<W: Write + Seek> {
    /// MCAP, `ros1` profile (boxed: the MCAP writer's state is large, and one recording
    /// holds one writer).
    Mcap(Box<McapWriter<W>>),
    /// ROS bag v2.
    Bag(bag::Writer<W>),
}

impl<W: Write + Seek> Writer<W> {
    /// Declares a publisher's stream; its messages are then written with the id returned.
    pub fn add_connection(&mut self, connection: &Connection) -> Result<ConnectionId, RecordError> {
        match self {
            Writer::Mcap(w) => w.add_connection(connection),
            Writer::Bag(w) => w.add_connection(connection),
        }
    }

    /// Writes one message: its serialized bytes (without the 4-byte length prefix of the
    /// wire) and the time it was received, in nanoseconds since the epoch.
    pub fn write(
        &mut self,
        connection: ConnectionId,
        received_ns: u64,
        data: &[u8],
    ) -> Result<(), RecordError> {
        match self {
            Writer::Mcap(w) => w.write(connection, received_ns, data),
            Writer::Bag(w) => w.write(connection, received_ns, data),
        }
    }

    /// Writes the chunk being filled, so that everything given so far is on disk whole
    /// (called on a timer: a crash then loses at most that long).
    pub fn flush(&mut self) -> Result<(), RecordError> {
        match self {
            Writer::Mcap(w) => w.flush(),
            Writer::Bag(w) => w.flush(),
        }
    }

    /// Bytes written to the file so far (what `--split --size` measures).
    pub fn bytes_written(&self) -> u64 {
        match self {
            Writer::Mcap(w) => w.bytes_written(),
            Writer::Bag(w) => w.bytes_written(),
        }
    }

    /// Writes the last chunk and the indexes and hands the file back.
    pub fn finish(self) -> Result<W, RecordError> {
        match self {
            Writer::Mcap(w) => w.finish(),
            Writer::Bag(w) => w.finish(),
        }
    }
}

/// A file that counts how far it has been written (the furthest byte, whatever seeks
/// came between), readable while a writer owns it.
pub(crate) struct Tracked<W> {
    inner: W,
    position: u64,
    end: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<W: Seek> Tracked<W> {
    pub(crate) fn new(inner: W) -> Tracked<W> {
        Tracked {
            inner,
            position: 0,
            end: Default::default(),
        }
    }

    /// The furthest byte written, shared.
    pub(crate) fn written(&self) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        self.end.clone()
    }

    pub(crate) fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: Write> Write for Tracked<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.position += n as u64;
        self.end
            .fetch_max(self.position, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Seek> Seek for Tracked<W> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        self.position = self.inner.seek(to)?;
        Ok(self.position)
    }
}
