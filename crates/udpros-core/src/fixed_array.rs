//! Fixed-length arrays (`T[N]`) of any length as serde tuples: serde's own impls stop at
//! 32 elements, and ROS has `float64[36]` covariances.
//!
//! Use on a field as `#[serde(with = "udpros::wire::fixed_array")]`.

use serde::de::{self, Deserialize, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeTuple, Serializer};
use std::fmt;
use std::marker::PhantomData;

/// Writes a fixed-size array `T[N]` as ROS1 does: its elements, with no length prefix.
pub fn serialize<S, T, const N: usize>(array: &[T; N], serializer: S) -> Result<S::Ok, S::Error>
where
    S: Serializer,
    T: Serialize,
{
    let mut tuple = serializer.serialize_tuple(N)?;
    for item in array {
        tuple.serialize_element(item)?;
    }
    tuple.end()
}

/// Reads a fixed-size array `T[N]`: exactly `N` elements, no length prefix.
pub fn deserialize<'de, D, T, const N: usize>(deserializer: D) -> Result<[T; N], D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    deserializer.deserialize_tuple(N, ArrayVisitor(PhantomData))
}

struct ArrayVisitor<T, const N: usize>(PhantomData<T>);

impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for ArrayVisitor<T, N> {
    type Value = [T; N];

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an array of {N} elements")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<[T; N], A::Error> {
        let mut items = Vec::with_capacity(N.min(1 << 12));
        while items.len() < N {
            match seq.next_element()? {
                Some(item) => items.push(item),
                None => return Err(de::Error::invalid_length(items.len(), &self)),
            }
        }
        items
            .try_into()
            .map_err(|_| de::Error::invalid_length(N, &self))
    }
}
