//! `uint8[]` fields as [`Bytes`] that share the received buffer instead of copying it.
//!
//! Serde visitors only ever see borrowed slices, so [`crate::from_bytes`] records the
//! buffer it decodes in a thread-local for the duration of the call; a slice handed to
//! [`deserialize`] that lies inside that buffer becomes a reference-counted view of it.
//! Anything else (another format, another buffer) is copied, so the helper is correct with
//! any serde format.
//!
//! Use on a field as `#[serde(with = "udpros::wire::zero_copy")]`.

use bytes::Bytes;
use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserializer, Serializer};
use std::cell::RefCell;
use std::fmt;

thread_local! {
    static SOURCE: RefCell<Option<Bytes>> = const { RefCell::new(None) };
}

/// Makes `input` the buffer zero-copy fields may share, until dropped (restoring what was
/// there before, so decodes may nest).
pub(crate) struct SourceGuard {
    previous: Option<Bytes>,
}

impl SourceGuard {
    pub(crate) fn set(input: &Bytes) -> SourceGuard {
        let previous = SOURCE.with(|s| s.borrow_mut().replace(input.clone()));
        SourceGuard { previous }
    }
}

impl Drop for SourceGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        SOURCE.with(|s| *s.borrow_mut() = previous);
    }
}

fn share_or_copy(slice: &[u8]) -> Bytes {
    SOURCE.with(|s| match s.borrow().as_ref() {
        Some(source) if contains(source, slice) => source.slice_ref(slice),
        _ => Bytes::copy_from_slice(slice),
    })
}

fn contains(source: &[u8], slice: &[u8]) -> bool {
    let outer = source.as_ptr_range();
    let inner = slice.as_ptr_range();
    !slice.is_empty() && outer.start <= inner.start && inner.end <= outer.end
}

/// Writes bytes as ROS1's `uint8[]`: a `u32` length, then the bytes.
pub fn serialize<S: Serializer>(bytes: &Bytes, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_bytes(bytes)
}

/// Reads a `uint8[]` as a view of the buffer [`crate::from_bytes`] decodes (a copy for
/// any other input).
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Bytes, D::Error> {
    deserializer.deserialize_bytes(BytesVisitor)
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Bytes;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("bytes")
    }

    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Bytes, E> {
        Ok(share_or_copy(v))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
        Ok(Bytes::copy_from_slice(v))
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
        Ok(Bytes::from(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Bytes, E> {
        Ok(Bytes::copy_from_slice(v.as_bytes()))
    }

    /// Self-describing formats (JSON, YAML) write bytes as a list of numbers.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        Ok(Bytes::from(out))
    }
}
