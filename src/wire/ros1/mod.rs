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

/// The size of `value`'s body. A walk over the message that copies nothing: a `uint8[]`
/// counts its length only, so it costs little beside the copy it saves, which is every
/// regrowth of a buffer that started small (a 1 MB image was copied about twice more).
pub fn serialized_len<T: Serialize + ?Sized>(value: &T) -> Result<usize, Error> {
    let mut count = ByteCount::default();
    value.serialize(&mut Serializer::new(&mut count))?;
    Ok(count.0)
}

/// Serializes `value` as a TCPROS/UDPROS frame: `u32 LE` body length, then the body. The
/// result is what every subscriber link sends, shared without copying.
pub fn to_frame<T: Serialize + ?Sized>(value: &T) -> Result<Bytes, Error> {
    let mut out = Vec::with_capacity(4 + serialized_len(value)?);
    out.extend_from_slice(&[0; 4]);
    to_writer(value, &mut out)?;
    // The length written is the one found, whatever the count said.
    let len = u32::try_from(out.len() - 4).map_err(|_| Error::TooLong(out.len() - 4))?;
    out[..4].copy_from_slice(&len.to_le_bytes());
    Ok(Bytes::from(out))
}

/// Decodes a message body. `uint8[]` fields become slices of `input` (no copy).
pub fn from_bytes<T: DeserializeOwned>(input: &Bytes) -> Result<T, Error> {
    let _source = crate::wire::zero_copy::SourceGuard::set(input);
    from_slice(input)
}

/// Decodes a message body; `uint8[]` fields are copied out of `input`.
pub fn from_slice<T: DeserializeOwned>(input: &[u8]) -> Result<T, Error> {
    let mut de = Deserializer::new(input);
    let value = T::deserialize(&mut de)?;
    de.finish()?;
    Ok(value)
}
