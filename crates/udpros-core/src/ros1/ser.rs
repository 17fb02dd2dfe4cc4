use super::Error;
use serde::ser::{self, Serialize};

/// Where the serializer puts what it writes.
pub trait Output {
    /// Appends `bytes` (writes them, or only counts them).
    fn put(&mut self, bytes: &[u8]);
}

impl Output for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Counts the bytes instead of keeping them: a message's serialized size, found by the
/// same code that writes it, so the buffer can be allocated once at its final size.
#[derive(Debug, Default, Clone, Copy)]
pub struct ByteCount(pub usize);

impl Output for ByteCount {
    fn put(&mut self, bytes: &[u8]) {
        self.0 = self.0.saturating_add(bytes.len());
    }
}

/// Writes ROS1 binary form into an [`Output`], a `Vec<u8>` unless told otherwise.
pub struct Serializer<'a, W: Output = Vec<u8>> {
    out: &'a mut W,
    /// Inside a numeric block (crate::numeric_array): its count was written as the array's
    /// length prefix, and its chunks go out as bare bytes, without prefixes of their own.
    raw: bool,
}

impl<'a, W: Output> Serializer<'a, W> {
    /// A serializer that writes ROS1's format to `out`.
    pub fn new(out: &'a mut W) -> Self {
        Serializer { out, raw: false }
    }

    fn write_len(&mut self, len: usize) -> Result<(), Error> {
        if self.raw {
            return Ok(());
        }
        let len = u32::try_from(len).map_err(|_| Error::TooLong(len))?;
        self.out.put(&len.to_le_bytes());
        Ok(())
    }
}

macro_rules! le_bytes {
    ($($method:ident: $ty:ty),*) => {
        $(fn $method(self, v: $ty) -> Result<(), Error> {
            self.out.put(&v.to_le_bytes());
            Ok(())
        })*
    };
}

impl<W: Output> ser::Serializer for &mut Serializer<'_, W> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = ser::Impossible<(), Error>;
    type SerializeStruct = Self;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out.put(&[u8::from(v)]);
        Ok(())
    }

    le_bytes!(serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
              serialize_u8: u8, serialize_u16: u16, serialize_u32: u32, serialize_u64: u64,
              serialize_f32: f32, serialize_f64: f64);

    fn serialize_char(self, _: char) -> Result<(), Error> {
        Err(Error::Unsupported("a Rust char (use u8 or String)"))
    }

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.serialize_bytes(v.as_bytes())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        self.write_len(v.len())?;
        self.out.put(v);
        Ok(())
    }

    fn serialize_none(self) -> Result<(), Error> {
        Err(Error::Unsupported("optional values"))
    }

    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<(), Error> {
        Err(Error::Unsupported("optional values"))
    }

    fn serialize_unit(self) -> Result<(), Error> {
        Ok(())
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        Ok(())
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Error> {
        Err(Error::Unsupported("enums"))
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        if crate::numeric_array::block_size(name).is_some() {
            let outer = std::mem::replace(&mut self.raw, true);
            let written = value.serialize(&mut *self);
            self.raw = outer;
            return written;
        }
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(Error::Unsupported("enums"))
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<Self, Error> {
        let len = len.ok_or(Error::Unsupported("sequences of unknown length"))?;
        self.write_len(len)?;
        Ok(self)
    }

    fn serialize_tuple(self, _: usize) -> Result<Self, Error> {
        Ok(self)
    }

    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, Error> {
        Ok(self)
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(Error::Unsupported("enums"))
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(Error::Unsupported("maps"))
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Error> {
        Ok(self)
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(Error::Unsupported("enums"))
    }

    fn is_human_readable(&self) -> bool {
        false
    }
}

impl<W: Output> ser::SerializeSeq for &mut Serializer<'_, W> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

impl<W: Output> ser::SerializeTuple for &mut Serializer<'_, W> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

impl<W: Output> ser::SerializeTupleStruct for &mut Serializer<'_, W> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

impl<W: Output> ser::SerializeStruct for &mut Serializer<'_, W> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}
