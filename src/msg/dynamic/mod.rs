//! Dynamic messages: decode any message from its type name and full definition (as a
//! connection header carries them) into a value tree, encode a value tree back, and print
//! it as `rostopic echo` does ([`Value::to_yaml`]) or as one line of JSON
//! ([`Value::to_json`]).

mod from_yaml;
mod json;
mod yaml;

use crate::codegen::spec::{FieldType, MsgSpec, Primitive, Shape, SpecError, SpecSet, MAX_NESTING};
use crate::msg::{Duration, Time};
use bytes::Bytes;
use std::fmt;

/// A decoded value. Messages keep their fields in definition order.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// `int8` (and `byte`).
    I8(i8),
    /// `int16`.
    I16(i16),
    /// `int32`.
    I32(i32),
    /// `int64`.
    I64(i64),
    /// `uint8` (and `char`).
    U8(u8),
    /// `uint16`.
    U16(u16),
    /// `uint32`.
    U32(u32),
    /// `uint64`.
    U64(u64),
    /// `float32`.
    F32(f32),
    /// `float64`.
    F64(f64),
    /// `string` (bytes that are not UTF-8 are replaced, as rostopic shows them).
    String(String),
    /// `time`.
    Time(Time),
    /// `duration`.
    Duration(Duration),
    /// `uint8[]` and `uint8[N]`.
    Bytes(Bytes),
    /// `char[]` and `char[N]` (genpy keeps these as bytes too, but prints them differently).
    Chars(Bytes),
    /// An array of any other element type.
    Array(Vec<Value>),
    /// A nested message: its fields, in order.
    Message(Vec<(String, Value)>),
}

impl Value {
    /// Turns every `time` in this value into a `duration`, its offset from `now` (`time -
    /// now`, negative for a stamp in the past), as `rostopic echo --offset` shows them.
    pub fn offset_times(&mut self, now: Time) {
        match self {
            Value::Time(t) => *self = Value::Duration(*t - now),
            Value::Array(items) => items.iter_mut().for_each(|v| v.offset_times(now)),
            Value::Message(fields) => fields.iter_mut().for_each(|(_, v)| v.offset_times(now)),
            _ => {}
        }
    }

    /// The field `name` of a message value.
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Message(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Follows a path of field names (`["header", "stamp"]`).
    pub fn path<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Option<&Value> {
        names.into_iter().try_fold(self, |v, n| v.field(n))
    }

    /// The value as `rostopic echo` prints it (without the `---` separator).
    pub fn to_yaml(&self) -> String {
        yaml::to_yaml(self)
    }

    /// The value as one line of JSON: messages as objects keyed by field name, `time` and
    /// `duration` as `{"secs":..,"nsecs":..}`, byte arrays as arrays of numbers,
    /// non-finite floats as `null`.
    pub fn to_json(&self) -> String {
        json::to_json(self)
    }
}

/// Why a dynamic message could not be decoded or encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DynamicError {
    /// The definition does not parse, or names a type it does not define.
    Definition(SpecError),
    /// The input ended early or a length prefix was impossible, at this field path.
    Truncated(String),
    /// The message ended with this many bytes left over.
    TrailingBytes(usize),
    /// The message would describe more values than its size allows.
    TooManyValues,
    /// A value tree does not fit the type (when encoding).
    Mismatch(String),
}

impl fmt::Display for DynamicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DynamicError::Definition(e) => write!(f, "bad message definition: {e}"),
            DynamicError::Truncated(at) => {
                write!(f, "message too short or corrupt at field '{at}'")
            }
            DynamicError::TrailingBytes(n) => write!(f, "{n} bytes left over after the message"),
            DynamicError::TooManyValues => {
                f.write_str("message describes more values than it could hold")
            }
            DynamicError::Mismatch(why) => write!(f, "value does not fit the message type: {why}"),
        }
    }
}

impl std::error::Error for DynamicError {}

impl From<SpecError> for DynamicError {
    fn from(e: SpecError) -> Self {
        DynamicError::Definition(e)
    }
}

/// A message type known only at run time.
#[derive(Debug, Clone)]
pub struct DynamicType {
    type_name: String,
    md5sum: String,
    specs: SpecSet,
}

impl DynamicType {
    /// From a type name and its full definition, as in a connection header.
    pub fn from_definition(
        type_name: &str,
        full_definition: &str,
    ) -> Result<DynamicType, DynamicError> {
        let specs = SpecSet::from_full_definition(type_name, full_definition)?;
        DynamicType::from_specs(type_name, specs)
    }

    /// From a closed set of specifications containing `type_name`.
    pub fn from_specs(type_name: &str, specs: SpecSet) -> Result<DynamicType, DynamicError> {
        let md5sum = specs.md5sum(type_name)?;
        Ok(DynamicType {
            type_name: type_name.to_string(),
            md5sum,
            specs,
        })
    }

    /// The type's full name (`pkg/Type`).
    pub fn type_name(&self) -> &str {
        &self.type_name
    }

    /// The md5sum computed from the definition (compare it with the header's `md5sum`).
    pub fn md5sum(&self) -> &str {
        &self.md5sum
    }

    /// The full definition text, rebuilt as genmsg writes it.
    pub fn definition(&self) -> Result<String, DynamicError> {
        Ok(self.specs.full_text(&self.type_name)?)
    }

    /// The definitions of the type and everything it contains.
    pub fn specs(&self) -> &SpecSet {
        &self.specs
    }

    /// Whether a value of `elem` (a type this one uses) can take no bytes: a message
    /// whose every field is one that can, or a fixed array of none (`std_msgs/Empty`,
    /// `T[0]`). An array of such values can claim more elements than its bytes, and only
    /// a bound on the values decoded ([`Cursor::spend`]) stops a count in the billions.
    pub fn can_be_empty(&self, elem: &FieldType) -> bool {
        self.may_be_empty(elem, 0)
    }

    fn may_be_empty(&self, elem: &FieldType, depth: usize) -> bool {
        let FieldType::Message(name) = elem else {
            return false;
        };
        let Ok(spec) = self.spec(name) else {
            return false;
        };
        depth <= MAX_NESTING
            && spec.fields.iter().all(|f| match f.shape {
                Shape::Vec => false,
                Shape::Array(0) => true,
                Shape::Scalar | Shape::Array(_) => self.may_be_empty(&f.ty, depth + 1),
            })
    }

    fn spec(&self, name: &str) -> Result<&MsgSpec, DynamicError> {
        self.specs
            .get(name)
            .ok_or_else(|| DynamicError::Definition(SpecError(format!("{name} is not defined"))))
    }

    /// Decodes one message body (without the frame's length prefix). Byte arrays share
    /// `data`. Never panics; never builds more values than the input could hold.
    pub fn decode(&self, data: &Bytes) -> Result<Value, DynamicError> {
        let mut reader = Reader {
            data,
            cursor: Cursor::new(data),
            path: Vec::new(),
        };
        let value = reader.message(self, &self.type_name, 0)?;
        match reader.cursor.left() {
            0 => Ok(value),
            n => Err(DynamicError::TrailingBytes(n)),
        }
    }

    /// Encodes a value tree of this type (fields matched by position and name).
    pub fn encode(&self, value: &Value) -> Result<Vec<u8>, DynamicError> {
        let mut out = Vec::new();
        self.encode_message(&self.type_name, value, &mut out, 0)?;
        Ok(out)
    }

    fn encode_message(
        &self,
        name: &str,
        value: &Value,
        out: &mut Vec<u8>,
        depth: usize,
    ) -> Result<(), DynamicError> {
        let spec = self.spec(name)?;
        let Value::Message(values) = value else {
            return Err(DynamicError::Mismatch(format!(
                "{name} needs a message value"
            )));
        };
        if depth > MAX_NESTING || values.len() != spec.fields.len() {
            return Err(DynamicError::Mismatch(format!(
                "{name} has {} fields",
                spec.fields.len()
            )));
        }
        for (field, (vname, v)) in spec.fields.iter().zip(values) {
            if &field.name != vname {
                return Err(DynamicError::Mismatch(format!(
                    "expected field {} of {name}, got {vname}",
                    field.name
                )));
            }
            let mismatch = || DynamicError::Mismatch(format!("field {} of {name}", field.name));
            match (field.shape, v) {
                (Shape::Scalar, _) => self.encode_element(&field.ty, v, out, depth)?,
                (_, Value::Bytes(b) | Value::Chars(b)) => {
                    if let Shape::Array(n) = field.shape {
                        if b.len() != n {
                            return Err(mismatch());
                        }
                    } else {
                        put_len(out, b.len())?;
                    }
                    out.extend_from_slice(b);
                }
                (_, Value::Array(items)) => {
                    match field.shape {
                        Shape::Array(n) if items.len() != n => return Err(mismatch()),
                        Shape::Array(_) => {}
                        _ => put_len(out, items.len())?,
                    }
                    for item in items {
                        self.encode_element(&field.ty, item, out, depth)?;
                    }
                }
                _ => return Err(mismatch()),
            }
        }
        Ok(())
    }

    fn encode_element(
        &self,
        ty: &FieldType,
        v: &Value,
        out: &mut Vec<u8>,
        depth: usize,
    ) -> Result<(), DynamicError> {
        let p = match ty {
            FieldType::Message(m) => return self.encode_message(m, v, out, depth + 1),
            FieldType::Primitive(p) => *p,
        };
        let mismatch = || DynamicError::Mismatch(format!("{v:?} is not a {}", p.ros_name()));
        match (p, v) {
            (Primitive::Bool, Value::Bool(b)) => out.push(u8::from(*b)),
            (Primitive::Int8 | Primitive::Byte, Value::I8(x)) => {
                out.extend_from_slice(&x.to_le_bytes())
            }
            (Primitive::Int16, Value::I16(x)) => out.extend_from_slice(&x.to_le_bytes()),
            (Primitive::Int32, Value::I32(x)) => out.extend_from_slice(&x.to_le_bytes()),
            (Primitive::Int64, Value::I64(x)) => out.extend_from_slice(&x.to_le_bytes()),
            (Primitive::UInt8 | Primitive::Char, Value::U8(x)) => out.push(*x),
            (Primitive::UInt16, Value::U16(x)) => out.extend_from_slice(&x.to_le_bytes()),
            (Primitive::UInt32, Value::U32(x)) => out.extend_from_slice(&x.to_le_bytes()),
            (Primitive::UInt64, Value::U64(x)) => out.extend_from_slice(&x.to_le_bytes()),
            (Primitive::Float32, Value::F32(x)) => out.extend_from_slice(&x.to_le_bytes()),
            (Primitive::Float64, Value::F64(x)) => out.extend_from_slice(&x.to_le_bytes()),
            (Primitive::String, Value::String(s)) => {
                put_len(out, s.len())?;
                out.extend_from_slice(s.as_bytes());
            }
            (Primitive::Time, Value::Time(t)) => {
                out.extend_from_slice(&t.sec.to_le_bytes());
                out.extend_from_slice(&t.nsec.to_le_bytes());
            }
            (Primitive::Duration, Value::Duration(d)) => {
                out.extend_from_slice(&d.sec.to_le_bytes());
                out.extend_from_slice(&d.nsec.to_le_bytes());
            }
            _ => return Err(mismatch()),
        }
        Ok(())
    }
}

fn put_len(out: &mut Vec<u8>, len: usize) -> Result<(), DynamicError> {
    let len = u32::try_from(len).map_err(|_| DynamicError::Mismatch("array too long".into()))?;
    out.extend_from_slice(&len.to_le_bytes());
    Ok(())
}

/// A message's bytes read from the front, with the number of values they may still make:
/// one per byte and a few over, so that bytes claiming a count in the billions of elements
/// that take no bytes (empty messages) make none. [`DynamicType::decode`] reads through
/// it, and so does the Python package's genpy builder.
#[derive(Debug)]
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    budget: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the first byte of `data`.
    pub fn new(data: &'a [u8]) -> Cursor<'a> {
        Cursor {
            data,
            pos: 0,
            budget: 1024 + 8 * data.len(),
        }
    }

    /// The next `n` bytes; `None` when fewer are left.
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len())?;
        let taken = &self.data[self.pos..end];
        self.pos = end;
        Some(taken)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Some(out)
    }

    /// A time's or duration's two 4-byte halves, taken in one read.
    fn halves(&mut self) -> Option<([u8; 4], [u8; 4])> {
        let [a, b, c, d, e, f, g, h] = self.array()?;
        Some(([a, b, c, d], [e, f, g, h]))
    }

    /// A `u32` count (of an array's elements, or of a string's bytes), unchecked.
    pub fn count(&mut self) -> Option<usize> {
        Some(u32::from_le_bytes(self.array()?) as usize)
    }

    /// Takes `values` from the budget; `false`, with nothing taken, when it has fewer.
    #[must_use]
    pub fn spend(&mut self, values: usize) -> bool {
        match self.budget.checked_sub(values) {
            Some(left) => {
                self.budget = left;
                true
            }
            None => false,
        }
    }

    /// How many bytes are not read yet.
    pub fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    /// A primitive of fixed size (any but `string`, whose text each decoder reads its own
    /// way); `None`, with nothing taken, when its bytes are not all there, and for
    /// `string`.
    pub fn fixed(&mut self, primitive: Primitive) -> Option<Value> {
        Some(match primitive {
            Primitive::Bool => Value::Bool(self.take(1)?[0] != 0),
            Primitive::Int8 | Primitive::Byte => Value::I8(i8::from_le_bytes(self.array()?)),
            Primitive::Int16 => Value::I16(i16::from_le_bytes(self.array()?)),
            Primitive::Int32 => Value::I32(i32::from_le_bytes(self.array()?)),
            Primitive::Int64 => Value::I64(i64::from_le_bytes(self.array()?)),
            Primitive::UInt8 | Primitive::Char => Value::U8(self.take(1)?[0]),
            Primitive::UInt16 => Value::U16(u16::from_le_bytes(self.array()?)),
            Primitive::UInt32 => Value::U32(u32::from_le_bytes(self.array()?)),
            Primitive::UInt64 => Value::U64(u64::from_le_bytes(self.array()?)),
            Primitive::Float32 => Value::F32(f32::from_le_bytes(self.array()?)),
            Primitive::Float64 => Value::F64(f64::from_le_bytes(self.array()?)),
            Primitive::Time => {
                let (sec, nsec) = self.halves()?;
                Value::Time(Time {
                    sec: u32::from_le_bytes(sec),
                    nsec: u32::from_le_bytes(nsec),
                })
            }
            Primitive::Duration => {
                let (sec, nsec) = self.halves()?;
                Value::Duration(Duration {
                    sec: i32::from_le_bytes(sec),
                    nsec: i32::from_le_bytes(nsec),
                })
            }
            Primitive::String => return None,
        })
    }
}

/// Decoding state: the cursor, the message's bytes (which byte arrays share), and the
/// field path for errors.
struct Reader<'a> {
    data: &'a Bytes,
    cursor: Cursor<'a>,
    path: Vec<String>,
}

impl Reader<'_> {
    fn truncated(&self) -> DynamicError {
        DynamicError::Truncated(self.path.join("."))
    }

    fn take(&mut self, n: usize) -> Result<&[u8], DynamicError> {
        match self.cursor.take(n) {
            Some(taken) => Ok(taken),
            None => Err(self.truncated()),
        }
    }

    fn spend(&mut self, values: usize) -> Result<(), DynamicError> {
        match self.cursor.spend(values) {
            true => Ok(()),
            false => Err(DynamicError::TooManyValues),
        }
    }

    /// An array's `u32` count of `elem`s: no more than the bytes left, unless its elements
    /// can take none (empty messages), whose count only the value budget bounds.
    fn count(&mut self, ty: &DynamicType, elem: &FieldType) -> Result<usize, DynamicError> {
        match self.cursor.count() {
            Some(n) if n <= self.cursor.left() || ty.may_be_empty(elem, 0) => Ok(n),
            _ => Err(self.truncated()),
        }
    }

    /// A string's `u32` length, which cannot exceed the bytes left.
    fn len(&mut self) -> Result<usize, DynamicError> {
        match self.cursor.count() {
            Some(len) if len <= self.cursor.left() => Ok(len),
            _ => Err(self.truncated()),
        }
    }

    fn message(
        &mut self,
        ty: &DynamicType,
        name: &str,
        depth: usize,
    ) -> Result<Value, DynamicError> {
        if depth > MAX_NESTING {
            return Err(DynamicError::TooManyValues);
        }
        let spec = ty.spec(name)?;
        self.spend(1)?;
        let mut fields = Vec::with_capacity(spec.fields.len());
        for field in &spec.fields {
            self.path.push(field.name.clone());
            let value = match field.shape {
                Shape::Scalar => self.element(ty, &field.ty, depth)?,
                Shape::Vec => {
                    let n = self.count(ty, &field.ty)?;
                    self.sequence(ty, &field.ty, n, depth)?
                }
                Shape::Array(n) => self.sequence(ty, &field.ty, n, depth)?,
            };
            self.path.pop();
            fields.push((field.name.clone(), value));
        }
        Ok(Value::Message(fields))
    }

    fn sequence(
        &mut self,
        ty: &DynamicType,
        elem: &FieldType,
        n: usize,
        depth: usize,
    ) -> Result<Value, DynamicError> {
        if let FieldType::Primitive(p) = elem {
            if p.is_byte_like() {
                let start = self.data.len() - self.cursor.left();
                self.take(n)?;
                let bytes = self.data.slice(start..start + n);
                return Ok(if *p == Primitive::Char {
                    Value::Chars(bytes)
                } else {
                    Value::Bytes(bytes)
                });
            }
        }
        self.spend(n)?;
        let mut items = Vec::with_capacity(n.min(self.cursor.left() + 1));
        for _ in 0..n {
            items.push(self.element(ty, elem, depth)?);
        }
        Ok(Value::Array(items))
    }

    fn element(
        &mut self,
        ty: &DynamicType,
        elem: &FieldType,
        depth: usize,
    ) -> Result<Value, DynamicError> {
        let p = match elem {
            FieldType::Message(m) => return self.message(ty, m, depth + 1),
            FieldType::Primitive(p) => *p,
        };
        if p == Primitive::String {
            let n = self.len()?;
            return Ok(Value::String(
                String::from_utf8_lossy(self.take(n)?).into_owned(),
            ));
        }
        self.cursor.fixed(p).ok_or_else(|| self.truncated())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_each_fixed_primitive_little_endian_and_never_past_the_end() {
        let bytes = [1u8, 0xfe, 0xff, 2, 0, 0, 0, 3, 0, 0, 0];
        let mut cursor = Cursor::new(&bytes);
        assert_eq!(cursor.fixed(Primitive::Bool), Some(Value::Bool(true)));
        assert_eq!(cursor.fixed(Primitive::Int16), Some(Value::I16(-2)));
        assert_eq!(
            cursor.fixed(Primitive::Time),
            Some(Value::Time(Time { sec: 2, nsec: 3 }))
        );
        assert_eq!(cursor.left(), 0);
        assert_eq!(cursor.fixed(Primitive::UInt8), None);
        let mut short = Cursor::new(&bytes[..3]);
        assert_eq!(short.fixed(Primitive::UInt32), None);
        assert_eq!(short.left(), 3, "a failed read takes nothing");
        let mut half_a_time = Cursor::new(&bytes[..5]);
        assert_eq!(half_a_time.fixed(Primitive::Duration), None);
        assert_eq!(half_a_time.left(), 5, "not even a time's seconds");
        assert_eq!(
            short.fixed(Primitive::String),
            None,
            "text is each decoder's own"
        );
    }

    #[test]
    fn a_cursor_budgets_values_by_the_bytes_it_reads() {
        let bytes = [0u8; 16];
        let mut cursor = Cursor::new(&bytes);
        let budget = 1024 + 8 * bytes.len();
        assert!(!cursor.spend(budget + 1));
        assert!(cursor.spend(budget), "a refused spend takes nothing");
        assert!(!cursor.spend(1));
    }

    #[test]
    fn billions_of_empty_messages_claimed_by_four_bytes_are_refused() {
        let text = format!(
            "std_msgs/Empty[] many\n{}\nMSG: std_msgs/Empty\n",
            "=".repeat(80)
        );
        let ty = DynamicType::from_definition("test/ManyEmpty", &text).unwrap();
        let few = Bytes::from_static(&[3, 0, 0, 0]);
        let Value::Message(fields) = ty.decode(&few).unwrap() else {
            panic!("a message")
        };
        assert!(matches!(&fields[0].1, Value::Array(items) if items.len() == 3));
        let many = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]);
        assert!(ty.decode(&many).is_err());
    }
}
