//! Variable arrays of fixed-size numbers (`float32[]`, `int32[]`, `float64[]`, …) written
//! and read as one block: a `sensor_msgs/LaserScan` or `PointCloud2`-sized array costs about
//! a memory copy, not a serde call per element.
//!
//! Serde hands a serializer one value at a time, so a `Vec<f32>` normally reaches the ROS1
//! serializer as a length and then a call per element. This helper wraps the array in a
//! newtype whose name the ROS1 [`Serializer`](crate::ros1::Serializer) and
//! [`Deserializer`](crate::ros1::Deserializer) recognise: the serializer then takes the array's
//! little-endian bytes in chunks converted on the stack (one `put` per 4 KiB), and the
//! deserializer hands the visitor the whole block, converted in one pass. Other serde
//! formats get a plain sequence of numbers when human-readable (JSON, YAML) and a
//! `(count, chunks)` pair otherwise, which this helper reads back; either round-trips.
//!
//! Use on a field as `#[serde(with = "udpros::wire::numeric_array")]` (the code generator
//! does, for every variable array of a fixed-size number type except `uint8`/`char`, which
//! are [`zero_copy`](crate::zero_copy)).

use serde::de::{self, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, SerializeTuple};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::marker::PhantomData;

/// The prefix of the newtype names the ROS1 serializer and deserializer recognise; the
/// element size follows it (`…:4` for `float32[]`). No message type can have such a name.
pub(crate) const BLOCK_PREFIX: &str = "\0udpros:numeric_block:";

/// Bytes converted per chunk on the serializing side: small enough for the stack and L1.
const CHUNK_BYTES: usize = 4096;

/// A fixed-size number as ROS1 writes it: little-endian, `SIZE` bytes.
pub trait Numeric: Copy + Serialize + for<'de> Deserialize<'de> + 'static {
    /// Its size on the wire.
    const SIZE: usize;
    /// The newtype name that carries `SIZE` to the ROS1 format.
    const BLOCK: &'static str;
    /// Writes `self` into `out`, which is `SIZE` bytes long.
    fn write_le(self, out: &mut [u8]);
    /// Reads one from `bytes`, which are `SIZE` long.
    fn read_le(bytes: &[u8]) -> Self;
}

macro_rules! numeric {
    ($($ty:ty: $size:literal),*) => {
        $(impl Numeric for $ty {
            const SIZE: usize = $size;
            const BLOCK: &'static str = concat!("\0udpros:numeric_block:", $size);
            #[inline]
            fn write_le(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn read_le(bytes: &[u8]) -> Self {
                let mut raw = [0u8; $size];
                raw.copy_from_slice(bytes);
                <$ty>::from_le_bytes(raw)
            }
        })*
    };
}

numeric!(i8: 1, i16: 2, u16: 2, i32: 4, u32: 4, i64: 8, u64: 8, f32: 4, f64: 8);

/// The element size a block name carries, if `name` is one.
pub(crate) fn block_size(name: &str) -> Option<usize> {
    name.strip_prefix(BLOCK_PREFIX)?.parse().ok()
}

/// Serializes `values` as one block (see the [module docs](self)).
pub fn serialize<T: Numeric, S: Serializer>(values: &[T], s: S) -> Result<S::Ok, S::Error> {
    if s.is_human_readable() {
        return s.collect_seq(values);
    }
    s.serialize_newtype_struct(T::BLOCK, &Counted(values))
}

/// The element count (which is ROS1's length prefix), then the bytes in chunks.
struct Counted<'a, T>(&'a [T]);

impl<T: Numeric> Serialize for Counted<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let count = u32::try_from(self.0.len())
            .map_err(|_| serde::ser::Error::custom("array longer than 2^32 - 1"))?;
        let mut pair = s.serialize_tuple(2)?;
        pair.serialize_element(&count)?;
        pair.serialize_element(&Chunks(self.0))?;
        pair.end()
    }
}

struct Chunks<'a, T>(&'a [T]);

impl<T: Numeric> Serialize for Chunks<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let per_chunk = CHUNK_BYTES / T::SIZE;
        let mut seq = s.serialize_seq(Some(self.0.len().div_ceil(per_chunk)))?;
        let mut buf = [0u8; CHUNK_BYTES];
        for chunk in self.0.chunks(per_chunk) {
            let bytes = &mut buf[..chunk.len() * T::SIZE];
            for (out, value) in bytes.chunks_exact_mut(T::SIZE).zip(chunk) {
                value.write_le(out);
            }
            seq.serialize_element(&RawBytes(bytes))?;
        }
        seq.end()
    }
}

/// Bytes that serialize with `serialize_bytes` (a `&[u8]` alone would be a sequence).
struct RawBytes<'a>(&'a [u8]);

impl Serialize for RawBytes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// Reads an array written by [`serialize`] (or by any ROS1 publisher: the block is the
/// plain ROS1 array).
pub fn deserialize<'de, T: Numeric, D: Deserializer<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    if d.is_human_readable() {
        return Vec::<T>::deserialize(d);
    }
    d.deserialize_newtype_struct(T::BLOCK, BlockVisitor(PhantomData))
}

struct BlockVisitor<T>(PhantomData<T>);

impl<'de, T: Numeric> Visitor<'de> for BlockVisitor<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an array of {}-byte numbers", T::SIZE)
    }

    /// The ROS1 deserializer's block: the array's bytes, whole.
    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Vec<T>, E> {
        if !bytes.len().is_multiple_of(T::SIZE) {
            return Err(E::invalid_length(bytes.len(), &self));
        }
        Ok(bytes.chunks_exact(T::SIZE).map(T::read_le).collect())
    }

    /// Another binary format: the `(count, chunks)` pair [`serialize`] wrote.
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Vec<T>, D::Error> {
        let (count, chunks): (u32, Vec<ByteChunk>) = Deserialize::deserialize(d)?;
        let mut values = Vec::with_capacity((count as usize).min(1 << 20));
        for chunk in chunks {
            if !chunk.0.len().is_multiple_of(T::SIZE) {
                return Err(de::Error::custom("a chunk of partial numbers"));
            }
            values.extend(chunk.0.chunks_exact(T::SIZE).map(T::read_le));
        }
        if values.len() != count as usize {
            return Err(de::Error::invalid_length(values.len(), &self));
        }
        Ok(values)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(v) = seq.next_element()? {
            values.push(v);
        }
        Ok(values)
    }
}

/// One chunk's bytes, from a format that keeps byte strings.
struct ByteChunk(Vec<u8>);

impl<'de> Deserialize<'de> for ByteChunk {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ByteChunk, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ByteChunk;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<ByteChunk, E> {
                Ok(ByteChunk(b.to_vec()))
            }
            fn visit_byte_buf<E: de::Error>(self, b: Vec<u8>) -> Result<ByteChunk, E> {
                Ok(ByteChunk(b))
            }
        }
        d.deserialize_byte_buf(V)
    }
}

#[cfg(test)]
mod tests {
    use crate::{from_slice, serialized_len, to_vec};
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Scan {
        #[serde(with = "crate::numeric_array")]
        ranges: Vec<f32>,
        #[serde(with = "crate::numeric_array")]
        counts: Vec<i16>,
        #[serde(with = "crate::numeric_array")]
        stamps: Vec<f64>,
        #[serde(with = "crate::numeric_array")]
        small: Vec<i8>,
        /// After the blocks: strings and arrays keep their own length prefixes.
        frame_id: String,
        plain: Vec<u32>,
    }

    /// What ROS1 writes for the scan, built by hand: a u32 count, then each element LE.
    fn by_hand(s: &Scan) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(s.ranges.len() as u32).to_le_bytes());
        s.ranges
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        out.extend_from_slice(&(s.counts.len() as u32).to_le_bytes());
        s.counts
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        out.extend_from_slice(&(s.stamps.len() as u32).to_le_bytes());
        s.stamps
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        out.extend_from_slice(&(s.small.len() as u32).to_le_bytes());
        s.small
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        out.extend_from_slice(&(s.frame_id.len() as u32).to_le_bytes());
        out.extend_from_slice(s.frame_id.as_bytes());
        out.extend_from_slice(&(s.plain.len() as u32).to_le_bytes());
        s.plain
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        out
    }

    fn scan(n: usize) -> Scan {
        Scan {
            ranges: (0..n).map(|i| i as f32 * 0.25 - 3.0).collect(),
            counts: (0..n).map(|i| (i as i16).wrapping_mul(-7)).collect(),
            stamps: (0..n / 3).map(|i| i as f64 * 1e-9).collect(),
            small: (0..n % 9).map(|i| -(i as i8)).collect(),
            frame_id: "laser".into(),
            plain: vec![1, 2, 3],
        }
    }

    #[test]
    fn blocks_are_the_plain_ros1_arrays_across_chunk_boundaries() {
        // 0, 1, one short of a 4 KiB chunk of f32s, exactly one, one more, and many.
        for n in [0, 1, 1023, 1024, 1025, 250_000] {
            let s = scan(n);
            let bytes = to_vec(&s).unwrap();
            assert_eq!(bytes, by_hand(&s), "n = {n}");
            assert_eq!(serialized_len(&s).unwrap(), bytes.len());
            assert_eq!(from_slice::<Scan>(&bytes).unwrap(), s, "n = {n}");
        }
    }

    #[test]
    fn a_count_beyond_the_input_is_refused_before_allocating() {
        let mut bytes = by_hand(&scan(4));
        bytes[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(from_slice::<Scan>(&bytes).is_err());
        // Truncated in the middle of a block.
        let bytes = by_hand(&scan(100));
        for cut in [3, 5, 203, 399] {
            assert!(from_slice::<Scan>(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }
}
