//! Seeded random values of any message type, for round trips against genpy and proptest.

use bytes::Bytes;
use udpros::codegen::spec::{FieldType, Primitive, Shape};
use udpros::msg::dynamic::{DynamicType, Value};
use udpros::msg::{Duration, Time};

/// splitmix64: small, seedable, good enough to vary test data.
pub struct Rng(u64);

impl Rng {
    /// A generator that starts from `seed` (the same seed, the same values).
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// One of `items` (panics on an empty slice: a test's own mistake).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

const TEXT: &[char] = &[
    'a', 'b', 'z', ' ', '_', '/', '"', '\'', '\\', ':', '#', '-', '\n', '\t', 'é', '中', '😀',
];

fn random_string(rng: &mut Rng) -> String {
    let len = rng.pick(&[0usize, 1, 6, 100]);
    (0..len).map(|_| rng.pick(TEXT)).collect()
}

/// A random value of `type_name`; arrays hold 0 to 3 elements, byte arrays up to 300.
pub fn random_value(ty: &DynamicType, type_name: &str, rng: &mut Rng) -> Value {
    let spec = ty.specs().get(type_name).expect("type in set");
    let fields = spec
        .fields
        .iter()
        .map(|f| {
            let value = match f.shape {
                Shape::Scalar => random_element(ty, &f.ty, rng),
                Shape::Vec | Shape::Array(_) => {
                    let n = match f.shape {
                        Shape::Array(n) => n,
                        _ if matches!(f.ty, FieldType::Primitive(p) if p.is_byte_like()) => {
                            rng.pick(&[0, 1, 300])
                        }
                        _ => rng.below(4) as usize,
                    };
                    match &f.ty {
                        FieldType::Primitive(p) if p.is_byte_like() => {
                            let bytes = Bytes::from(
                                (0..n).map(|_| rng.next_u64() as u8).collect::<Vec<_>>(),
                            );
                            if *p == Primitive::Char {
                                Value::Chars(bytes)
                            } else {
                                Value::Bytes(bytes)
                            }
                        }
                        elem => {
                            Value::Array((0..n).map(|_| random_element(ty, elem, rng)).collect())
                        }
                    }
                }
            };
            (f.name.clone(), value)
        })
        .collect();
    Value::Message(fields)
}

fn random_float(rng: &mut Rng) -> f64 {
    let special = [
        0.0,
        -0.0,
        1.5,
        -2.25,
        1e-7,
        1e20,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    if rng.below(2) == 0 {
        rng.pick(&special)
    } else {
        (rng.next_u64() as i64 as f64) / 1e9
    }
}

fn random_element(ty: &DynamicType, elem: &FieldType, rng: &mut Rng) -> Value {
    let p = match elem {
        FieldType::Message(m) => return random_value(ty, m, rng),
        FieldType::Primitive(p) => *p,
    };
    let bits = rng.next_u64();
    match p {
        Primitive::Bool => Value::Bool(bits & 1 == 1),
        Primitive::Int8 | Primitive::Byte => Value::I8(bits as i8),
        Primitive::Int16 => Value::I16(bits as i16),
        Primitive::Int32 => Value::I32(bits as i32),
        Primitive::Int64 => Value::I64(bits as i64),
        Primitive::UInt8 | Primitive::Char => Value::U8(bits as u8),
        Primitive::UInt16 => Value::U16(bits as u16),
        Primitive::UInt32 => Value::U32(bits as u32),
        Primitive::UInt64 => Value::U64(bits),
        Primitive::Float32 => Value::F32(random_float(rng) as f32),
        Primitive::Float64 => Value::F64(random_float(rng)),
        Primitive::String => Value::String(random_string(rng)),
        // genpy normalises nanoseconds past a second, so stay below one.
        Primitive::Time => Value::Time(Time::new(bits as u32, (bits >> 32) as u32 % 1_000_000_000)),
        Primitive::Duration => Value::Duration(Duration::new(
            bits as i32,
            ((bits >> 32) % 1_000_000_000) as i32,
        )),
    }
}
