//! ROS bag format 2.0, as `rosbag record` writes it and `rosbag info`, `rosbag play` and
//! Foxglove read it.
//!
//! A bag is the line `#ROSBAG V2.0`, a bag header record padded to 4096 bytes, then chunks.
//! Each chunk holds (compressed) connection and message records and is followed by one
//! index record per connection it holds. After the last chunk come the connection records
//! again and a chunk-info record per chunk; the bag header, rewritten when the bag is
//! closed, points at them. A bag whose header points nowhere (index position 0) was not
//! closed: `rosbag reindex` repairs it, and [`Reader`] reads it chunk by chunk as far as it
//! goes.
//!
//! Every record is `header_len u32 | header | data_len u32 | data`, little-endian; a header
//! is fields `len u32 | name=value`, the record's kind in its `op` field.

mod reader;
mod writer;

pub use reader::Reader;

#[cfg(test)]
use crate::Item;
pub use writer::Writer;

use crate::RecordError;

/// The first line of every bag.
pub const MAGIC: &[u8] = b"#ROSBAG V2.0\n";

/// The bag header record's size, padding included: rosbag rewrites it in place on close.
pub(crate) const BAG_HEADER_LEN: usize = 4096;

/// Record kinds (`op`).
pub(crate) mod op {
    pub(crate) const MESSAGE_DATA: u8 = 0x02;
    pub(crate) const BAG_HEADER: u8 = 0x03;
    pub(crate) const INDEX_DATA: u8 = 0x04;
    pub(crate) const CHUNK: u8 = 0x05;
    pub(crate) const CHUNK_INFO: u8 = 0x06;
    pub(crate) const CONNECTION: u8 = 0x07;
}

/// Appends one header field, `len u32 | name=value`.
pub(crate) fn put_field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    let len = name.len() + 1 + value.len();
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.push(b'=');
    out.extend_from_slice(value);
}

/// Appends one record: its header (fields) and its data, each with its length.
pub(crate) fn put_record(out: &mut Vec<u8>, header: &[u8], data: &[u8]) {
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(header);
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
}

/// A ROS time, as bags store it: seconds then nanoseconds, both u32.
pub(crate) fn time_bytes(ns: u64) -> [u8; 8] {
    let secs = (ns / 1_000_000_000).min(u64::from(u32::MAX)) as u32;
    let nsecs = (ns % 1_000_000_000) as u32;
    let mut out = [0; 8];
    out[..4].copy_from_slice(&secs.to_le_bytes());
    out[4..].copy_from_slice(&nsecs.to_le_bytes());
    out
}

/// The nanoseconds of a stored ROS time.
pub(crate) fn time_ns(bytes: [u8; 8]) -> u64 {
    let secs = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let nsecs = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    u64::from(secs) * 1_000_000_000 + u64::from(nsecs)
}

/// The fields of a record header (or of a connection header stored as a record's data), in
/// order, each split at its first `=`.
pub(crate) fn fields(mut bytes: &[u8]) -> Result<Vec<(&str, &[u8])>, RecordError> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let Some((len, rest)) = bytes.split_first_chunk::<4>() else {
            return Err(RecordError::Format("a header field is cut short".into()));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if len > rest.len() {
            return Err(RecordError::Format(format!(
                "a header field of {len} bytes where {} remain",
                rest.len()
            )));
        }
        let (field, after) = rest.split_at(len);
        let Some(eq) = field.iter().position(|&b| b == b'=') else {
            return Err(RecordError::Format("a header field without '='".into()));
        };
        let name = std::str::from_utf8(&field[..eq])
            .map_err(|_| RecordError::Format("a header field name is not UTF-8".into()))?;
        out.push((name, &field[eq + 1..]));
        bytes = after;
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
