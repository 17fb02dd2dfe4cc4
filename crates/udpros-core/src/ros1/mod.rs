//! ROS1 binary serialization as a serde format.
//!
//! Little-endian primitives; `string` and variable arrays carry a `u32` length prefix, fixed
//! arrays (serde tuples) and messages (serde structs) none; `time`/`duration` are two 32-bit
//! integers. Decoding is bounds-checked: a length prefix that claims more than the remaining
//! input is an error before anything is allocated, so no input can make it allocate more
//! than the input itself could describe, and none can make it panic.

mod de;
mod error;
mod ser;

pub use de::Deserializer;
pub use error::Error;
pub use ser::{ByteCount, Output, Serializer};

use bytes::Bytes;
use serde::{de::DeserializeOwned, Serialize};

/// Serializes `value` (the message body, without the frame's length prefix).
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(serialized_len(value)?);
    to_writer(value, &mut out)?;
    Ok(out)
}

/// Appends the serialized `value` to `out`.
pub fn to_writer<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), Error> {
    value.serialize(&mut Serializer::new(out))
}

/// The size of `value`'s body. A walk over the message that copies nothing (a `uint8[]`
/// adds its length only), so that a buffer can be allocated once at its final size rather
/// than grown, each growth a reallocation and, past the first, a copy of what was written.
pub fn serialized_len<T: Serialize + ?Sized>(value: &T) -> Result<usize, Error> {
    let mut count = ByteCount::default();
    value.serialize(&mut Serializer::new(&mut count))?;
    Ok(count.0)
}

/// Serializes `value` as a TCPROS/UDPROS frame: `u32 LE` body length, then the body. The
/// result is what every subscriber link sends, shared without copying.
pub fn to_frame<T: Serialize + ?Sized>(value: &T) -> Result<Bytes, Error> {
    let len = serialized_len(value)?;
    if u32::try_from(len).is_err() {
        return Err(Error::TooLong(len)); // before allocating it
    }
    let mut out = Vec::with_capacity(4 + len);
    out.extend_from_slice(&[0; 4]);
    to_writer(value, &mut out)?;
    // The length written is the one found, whatever the count said.
    let len = u32::try_from(out.len() - 4).map_err(|_| Error::TooLong(out.len() - 4))?;
    out[..4].copy_from_slice(&len.to_le_bytes());
    Ok(Bytes::from(out))
}

/// Decodes a message body. `uint8[]` fields become slices of `input` (no copy).
pub fn from_bytes<T: DeserializeOwned>(input: &Bytes) -> Result<T, Error> {
    let _source = crate::zero_copy::SourceGuard::set(input);
    from_slice(input)
}

/// Decodes a message body; `uint8[]` fields are copied out of `input`.
pub fn from_slice<T: DeserializeOwned>(input: &[u8]) -> Result<T, Error> {
    let mut de = Deserializer::new(input);
    let value = T::deserialize(&mut de)?;
    de.finish()?;
    Ok(value)
}

/// Decodes a value from the start of `input` and returns it with the bytes after it: how
/// a message that wraps another (an actionlib `ActionGoal` is a header, a goal id, then
/// the goal) is taken apart without knowing the type of its last part.
pub fn from_prefix<T: DeserializeOwned>(input: &[u8]) -> Result<(T, &[u8]), Error> {
    let mut de = Deserializer::new(input);
    let value = T::deserialize(&mut de)?;
    Ok((value, de.remaining()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serializes as 5000 copies of one 1 MB array: 5 GB on the wire, 1 MB in memory.
    struct Huge(Vec<u8>);

    impl Serialize for Huge {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeTuple;
            let mut t = s.serialize_tuple(5000)?;
            for _ in 0..5000 {
                t.serialize_element(&AsBytes(&self.0))?;
            }
            t.end()
        }
    }

    struct AsBytes<'a>(&'a [u8]);

    impl Serialize for AsBytes<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }

    #[test]
    fn a_frame_over_4_gb_is_refused_from_its_counted_size() {
        let huge = Huge(vec![0; 1 << 20]);
        assert_eq!(
            serialized_len(&huge).expect("counts"),
            5000 * ((1 << 20) + 4)
        );
        assert!(matches!(to_frame(&huge), Err(Error::TooLong(_))));
    }
}
