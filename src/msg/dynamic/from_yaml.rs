//! Message values from YAML, as `rostopic pub` takes them: a map of field names (missing
//! fields take their defaults) or a list of field values in order; `time` and `duration`
//! as `{secs, nsecs}` or a number of seconds; a `time` as `now` (or `auto`), and a
//! `std_msgs/Header` as `auto` (stamped now), as rostopic's keywords.

use super::{DynamicError, DynamicType, Value};
use crate::codegen::spec::{FieldType, Primitive, Shape, MAX_NESTING};
use crate::msg::{Duration, Time};
use crate::yaml::Yaml;
use bytes::Bytes;

fn mismatch(what: String) -> DynamicError {
    DynamicError::Mismatch(what)
}

impl DynamicType {
    /// Builds a message value from YAML (`None`: all defaults); `now` is the wall clock.
    pub fn value_from_yaml(&self, yaml: Option<&Yaml>) -> Result<Value, DynamicError> {
        self.value_from_yaml_at(yaml, Time::now())
    }

    /// Builds a message value from YAML, with `now` for the `now` and `auto` keywords (a
    /// node's ROS time, as rostopic uses `rospy.get_rostime()`).
    pub fn value_from_yaml_at(
        &self,
        yaml: Option<&Yaml>,
        now: Time,
    ) -> Result<Value, DynamicError> {
        self.message_from_yaml(self.type_name(), yaml, 0, now)
    }

    fn message_from_yaml(
        &self,
        name: &str,
        yaml: Option<&Yaml>,
        depth: usize,
        now: Time,
    ) -> Result<Value, DynamicError> {
        if depth > MAX_NESTING {
            return Err(mismatch("nesting too deep".into()));
        }
        let spec = self.spec(name)?;
        let fields = &spec.fields;
        let given = |i: usize, field: &str| -> Result<Option<&Yaml>, DynamicError> {
            Ok(match yaml {
                None | Some(Yaml::Null) => None,
                Some(Yaml::Map(pairs)) => pairs.iter().find(|(k, _)| k == field).map(|(_, v)| v),
                Some(Yaml::Seq(items)) => items.get(i),
                Some(other) if fields.len() == 1 => Some(other),
                Some(other) => {
                    return Err(mismatch(format!(
                        "{name} needs a map of fields, not {other:?}"
                    )))
                }
            })
        };
        if let Some(Yaml::Map(pairs)) = yaml {
            if let Some((unknown, _)) = pairs
                .iter()
                .find(|(k, _)| !fields.iter().any(|f| &f.name == k))
            {
                return Err(mismatch(format!("{name} has no field '{unknown}'")));
            }
        }
        let mut out = Vec::with_capacity(fields.len());
        for (i, field) in fields.iter().enumerate() {
            let y = given(i, &field.name)?;
            let value = match field.shape {
                Shape::Scalar => self.element_from_yaml(&field.ty, y, depth, now)?,
                shape => {
                    // Text or bytes for a byte array, whole: a megabyte image is not a
                    // million list items.
                    let byte_like = matches!(field.ty, FieldType::Primitive(p) if p.is_byte_like());
                    if let Some(raw) = y.and_then(text_or_bytes).filter(|_| byte_like) {
                        check_length(shape, &field.name, raw.len())?;
                        let bytes = Bytes::copy_from_slice(raw);
                        let value = match field.ty {
                            FieldType::Primitive(Primitive::Char) => Value::Chars(bytes),
                            _ => Value::Bytes(bytes),
                        };
                        out.push((field.name.clone(), value));
                        continue;
                    }
                    let items: Vec<Option<&Yaml>> = match y {
                        None => match shape {
                            Shape::Array(n) => vec![None; n],
                            _ => Vec::new(),
                        },
                        Some(Yaml::Seq(items)) => items.iter().map(Some).collect(),
                        Some(other) => {
                            return Err(mismatch(format!(
                                "field {} needs a list, not {other:?}",
                                field.name
                            )))
                        }
                    };
                    check_length(shape, &field.name, items.len())?;
                    match &field.ty {
                        FieldType::Primitive(p) if p.is_byte_like() => {
                            let bytes: Result<Vec<u8>, _> = items
                                .iter()
                                .map(|y| match y {
                                    None => Ok(0),
                                    Some(Yaml::Int(i)) => u8::try_from(*i)
                                        .map_err(|_| mismatch(format!("{i} is not a byte"))),
                                    Some(other) => {
                                        Err(mismatch(format!("{other:?} is not a byte")))
                                    }
                                })
                                .collect();
                            let bytes = Bytes::from(bytes?);
                            if *p == Primitive::Char {
                                Value::Chars(bytes)
                            } else {
                                Value::Bytes(bytes)
                            }
                        }
                        ty => Value::Array(
                            items
                                .into_iter()
                                .map(|y| self.element_from_yaml(ty, y, depth, now))
                                .collect::<Result<_, _>>()?,
                        ),
                    }
                }
            };
            out.push((field.name.clone(), value));
        }
        Ok(Value::Message(out))
    }

    fn element_from_yaml(
        &self,
        ty: &FieldType,
        y: Option<&Yaml>,
        depth: usize,
        now: Time,
    ) -> Result<Value, DynamicError> {
        let p = match ty {
            FieldType::Message(m)
                if m == "std_msgs/Header" && matches!(y, Some(Yaml::Str(s)) if s == "auto") =>
            {
                let stamped = Yaml::Map(vec![("stamp".into(), Yaml::Str("now".into()))]);
                return self.message_from_yaml(m, Some(&stamped), depth + 1, now);
            }
            FieldType::Message(m) => return self.message_from_yaml(m, y, depth + 1, now),
            FieldType::Primitive(p) => *p,
        };
        let int = |lo: i128, hi: i128| -> Result<i128, DynamicError> {
            match y {
                None => Ok(0),
                Some(Yaml::Int(i)) if (lo..=hi).contains(&i128::from(*i)) => Ok(i128::from(*i)),
                Some(Yaml::Bool(b)) => Ok(i128::from(*b)),
                Some(other) => Err(mismatch(format!("{other:?} is not a {}", p.ros_name()))),
            }
        };
        let float = || -> Result<f64, DynamicError> {
            match y {
                None => Ok(0.0),
                Some(Yaml::Int(i)) => Ok(*i as f64),
                Some(Yaml::Float(f)) => Ok(*f),
                Some(other) => Err(mismatch(format!("{other:?} is not a {}", p.ros_name()))),
            }
        };
        Ok(match p {
            Primitive::Bool => Value::Bool(match y {
                None => false,
                Some(Yaml::Bool(b)) => *b,
                Some(Yaml::Int(i)) => *i != 0,
                Some(other) => return Err(mismatch(format!("{other:?} is not a bool"))),
            }),
            Primitive::Int8 | Primitive::Byte => {
                Value::I8(int(i8::MIN.into(), i8::MAX.into())? as i8)
            }
            Primitive::Int16 => Value::I16(int(i16::MIN.into(), i16::MAX.into())? as i16),
            Primitive::Int32 => Value::I32(int(i32::MIN.into(), i32::MAX.into())? as i32),
            Primitive::Int64 => Value::I64(int(i64::MIN.into(), i64::MAX.into())? as i64),
            Primitive::UInt8 | Primitive::Char => Value::U8(int(0, u8::MAX.into())? as u8),
            Primitive::UInt16 => Value::U16(int(0, u16::MAX.into())? as u16),
            Primitive::UInt32 => Value::U32(int(0, u32::MAX.into())? as u32),
            Primitive::UInt64 => Value::U64(int(0, i64::MAX.into())? as u64),
            Primitive::Float32 => Value::F32(float()? as f32),
            Primitive::Float64 => Value::F64(float()?),
            Primitive::String => Value::String(match y {
                None | Some(Yaml::Null) => String::new(),
                Some(Yaml::Str(s)) => s.clone(),
                Some(Yaml::Int(i)) => i.to_string(),
                Some(Yaml::Float(f)) => crate::python::float_repr(*f),
                Some(Yaml::Bool(b)) => if *b { "True" } else { "False" }.into(),
                Some(other) => return Err(mismatch(format!("{other:?} is not a string"))),
            }),
            Primitive::Time => {
                let (sec, nsec) = time_parts(y)?;
                if y.is_some_and(|y| matches!(y, Yaml::Str(s) if s == "now" || s == "auto")) {
                    Value::Time(now)
                } else {
                    Value::Time(Time::new(sec as u32, nsec as u32))
                }
            }
            Primitive::Duration => {
                let (sec, nsec) = time_parts(y)?;
                Value::Duration(Duration::new(sec as i32, nsec as i32))
            }
        })
    }
}

/// The bytes of a string or of `!!binary`, which fill a byte array whole.
fn text_or_bytes(y: &Yaml) -> Option<&[u8]> {
    match y {
        Yaml::Str(s) => Some(s.as_bytes()),
        Yaml::Binary(b) => Some(b),
        _ => None,
    }
}

/// A fixed-size array's `n` elements are all given.
fn check_length(shape: Shape, field: &str, given: usize) -> Result<(), DynamicError> {
    match shape {
        Shape::Array(n) if given != n => Err(mismatch(format!(
            "field {field} needs {n} elements, got {given}"
        ))),
        _ => Ok(()),
    }
}

/// `{secs, nsecs}`, a number of seconds, or `now`/`auto` (handled by the caller).
fn time_parts(y: Option<&Yaml>) -> Result<(i64, i64), DynamicError> {
    Ok(match y {
        None => (0, 0),
        Some(Yaml::Map(pairs)) => {
            let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v);
            let part = |v: Option<&Yaml>| match v {
                None => Ok(0),
                Some(Yaml::Int(i)) => Ok(*i),
                Some(other) => Err(mismatch(format!("{other:?} is not a whole number"))),
            };
            (part(get("secs"))?, part(get("nsecs"))?)
        }
        Some(Yaml::Int(i)) => (*i, 0),
        Some(Yaml::Float(f)) => (f.floor() as i64, ((f - f.floor()) * 1e9).round() as i64),
        Some(Yaml::Str(s)) if s == "now" || s == "auto" => (0, 0),
        Some(other) => return Err(mismatch(format!("{other:?} is not a time"))),
    })
}

#[cfg(test)]
mod tests {
    use crate::msg::dynamic::DynamicType;
    use crate::yaml::load as parse_flow;

    fn ty(name: &str) -> DynamicType {
        let info = crate::msg::builtin(name).unwrap();
        DynamicType::from_definition(name, info.definition).unwrap()
    }

    #[test]
    fn maps_lists_defaults_and_errors() {
        let string = ty("std_msgs/String");
        let v = string
            .value_from_yaml(Some(&parse_flow("{data: hi}").unwrap()))
            .unwrap();
        assert_eq!(v.to_yaml(), "data: \"hi\"");
        let range = ty("sensor_msgs/Range");
        let v = range
            .value_from_yaml(Some(
                &parse_flow("{range: 2.5, header: {frame_id: sonar}}").unwrap(),
            ))
            .unwrap();
        assert_eq!(
            v.path(["header", "frame_id"]),
            Some(&crate::msg::dynamic::Value::String("sonar".into()))
        );
        assert!(range.encode(&v).is_ok());
        assert!(range
            .value_from_yaml(Some(&parse_flow("{nope: 1}").unwrap()))
            .is_err());
        assert!(ty("std_msgs/UInt8")
            .value_from_yaml(Some(&parse_flow("{data: 300}").unwrap()))
            .is_err());
        let arr = ty("std_msgs/Float64MultiArray");
        let v = arr
            .value_from_yaml(Some(&parse_flow("{data: [1, 2.5]}").unwrap()))
            .unwrap();
        assert_eq!(
            v.to_json(),
            "{\"layout\":{\"dim\":[],\"data_offset\":0},\"data\":[1.0,2.5]}"
        );
    }

    #[test]
    fn bytes_fill_byte_arrays_whole() {
        use crate::msg::dynamic::Value;
        use crate::yaml::Yaml;
        let image = ty("sensor_msgs/CompressedImage");
        let data = vec![0xffu8, 0, 7];
        let given = Yaml::Map(vec![("data".into(), Yaml::Binary(data.clone()))]);
        let v = image.value_from_yaml(Some(&given)).unwrap();
        assert_eq!(v.path(["data"]), Some(&Value::Bytes(data.into())));
        // A fixed-size array takes exactly its length; other arrays take no bytes.
        let mac =
            DynamicType::from_definition("my_pkg/Mac", "uint8[4] mac\nchar[2] tag\n").unwrap();
        let given = |mac: &[u8]| {
            Yaml::Map(vec![
                ("mac".into(), Yaml::Binary(mac.to_vec())),
                ("tag".into(), Yaml::Binary(b"ab".to_vec())),
            ])
        };
        let v = mac.value_from_yaml(Some(&given(&[1, 2, 3, 4]))).unwrap();
        assert_eq!(v.path(["tag"]), Some(&Value::Chars((&b"ab"[..]).into())));
        assert_eq!(mac.encode(&v).unwrap(), b"\x01\x02\x03\x04ab");
        assert!(mac.value_from_yaml(Some(&given(&[1, 2, 3]))).is_err());
        // Text fills them alike, as `rostopic pub` takes it.
        let text = |mac: &str| Yaml::Map(vec![("mac".into(), Yaml::Str(mac.into()))]);
        let v = mac.value_from_yaml(Some(&text("abcd"))).unwrap();
        assert_eq!(v.path(["mac"]), Some(&Value::Bytes((&b"abcd"[..]).into())));
        assert!(mac.value_from_yaml(Some(&text("abcde"))).is_err());
        let floats = ty("std_msgs/Float64MultiArray");
        let wrong = Yaml::Map(vec![("data".into(), Yaml::Binary(vec![1, 2]))]);
        assert!(floats.value_from_yaml(Some(&wrong)).is_err());
    }

    #[test]
    fn now_and_auto_take_the_given_time() {
        use crate::msg::dynamic::Value;
        use crate::msg::Time;
        let at = Time::new(42, 7);
        let range = ty("sensor_msgs/Range");
        let v = range
            .value_from_yaml_at(Some(&parse_flow("{header: auto, range: 1}").unwrap()), at)
            .unwrap();
        assert_eq!(v.path(["header", "stamp"]), Some(&Value::Time(at)));
        let v = range
            .value_from_yaml_at(
                Some(&parse_flow("{header: {stamp: now, frame_id: f}}").unwrap()),
                at,
            )
            .unwrap();
        assert_eq!(v.path(["header", "stamp"]), Some(&Value::Time(at)));
        assert_eq!(
            v.path(["header", "frame_id"]),
            Some(&Value::String("f".into()))
        );
        // Any other string for a header is an error, not an empty header.
        assert!(range
            .value_from_yaml_at(Some(&parse_flow("{header: later}").unwrap()), at)
            .is_err());
    }
}
