use super::Error;
use serde::de::{self, DeserializeSeed, Visitor};

/// Reads ROS1 binary form from a byte slice.
pub struct Deserializer<'de> {
    input: &'de [u8],
}

impl<'de> Deserializer<'de> {
    /// A deserializer reading ROS1's format from `input`, from its first byte.
    pub fn new(input: &'de [u8]) -> Self {
        Deserializer { input }
    }

    /// Succeeds only when the whole input was consumed.
    pub fn finish(&self) -> Result<(), Error> {
        match self.input.len() {
            0 => Ok(()),
            n => Err(Error::TrailingBytes(n)),
        }
    }

    /// The bytes not read yet.
    pub fn remaining(&self) -> &'de [u8] {
        self.input
    }

    fn take(&mut self, n: usize) -> Result<&'de [u8], Error> {
        if n > self.input.len() {
            return Err(Error::UnexpectedEnd {
                needed: n,
                remaining: self.input.len(),
            });
        }
        let (head, tail) = self.input.split_at(n);
        self.input = tail;
        Ok(head)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// Reads a `u32` length prefix and checks it against what is left: every element of a
    /// ROS array takes at least one byte (arrays of empty messages aside, which no real
    /// type carries), so a larger count can only be garbage.
    fn read_len(&mut self) -> Result<usize, Error> {
        let len = u32::from_le_bytes(self.take_array()?);
        if len as usize > self.input.len() {
            return Err(Error::LengthPrefix {
                len,
                remaining: self.input.len(),
            });
        }
        Ok(len as usize)
    }
}

macro_rules! le_read {
    ($($method:ident: $ty:ty => $visit:ident),*) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            visitor.$visit(<$ty>::from_le_bytes(self.take_array()?))
        })*
    };
}

impl<'de> de::Deserializer<'de> for &mut Deserializer<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error::Unsupported(
            "self-describing decoding (the format has no type tags)",
        ))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // Like genpy and roscpp: any non-zero byte is true.
        visitor.visit_bool(self.take(1)?[0] != 0)
    }

    le_read!(deserialize_i8: i8 => visit_i8, deserialize_i16: i16 => visit_i16,
             deserialize_i32: i32 => visit_i32, deserialize_i64: i64 => visit_i64,
             deserialize_u8: u8 => visit_u8, deserialize_u16: u16 => visit_u16,
             deserialize_u32: u32 => visit_u32, deserialize_u64: u64 => visit_u64,
             deserialize_f32: f32 => visit_f32, deserialize_f64: f64 => visit_f64);

    fn deserialize_char<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error::Unsupported("a Rust char (use u8 or String)"))
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let len = self.read_len()?;
        let raw = self.take(len)?;
        match std::str::from_utf8(raw) {
            Ok(s) => visitor.visit_borrowed_str(s),
            // roscpp strings are bytes; keep the message rather than lose it.
            Err(_) => visitor.visit_string(String::from_utf8_lossy(raw).into_owned()),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let len = self.read_len()?;
        visitor.visit_borrowed_bytes(self.take(len)?)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error::Unsupported("optional values"))
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        // A numeric array read as one block (crate::numeric_array): the ROS1 array's bytes,
        // whole, for the visitor to convert in one pass.
        if let Some(size) = crate::numeric_array::block_size(name) {
            let count = u32::from_le_bytes(self.take_array()?) as usize;
            let len = count.checked_mul(size).ok_or(Error::LengthPrefix {
                len: count as u32,
                remaining: self.input.len(),
            })?;
            if len > self.input.len() {
                return Err(Error::LengthPrefix {
                    len: count as u32,
                    remaining: self.input.len(),
                });
            }
            return visitor.visit_borrowed_bytes(self.take(len)?);
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let len = self.read_len()?;
        visitor.visit_seq(Elements {
            de: self,
            left: len,
        })
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_seq(Elements {
            de: self,
            left: len,
        })
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error::Unsupported("maps"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_tuple(fields.len(), visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Error> {
        Err(Error::Unsupported("enums"))
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error::Unsupported("field identifiers"))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error::Unsupported("skipping values"))
    }

    fn is_human_readable(&self) -> bool {
        false
    }
}

/// The elements of a struct, tuple or array: a count known in advance.
struct Elements<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    left: usize,
}

impl<'de> de::SeqAccess<'de> for Elements<'_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.de).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}
