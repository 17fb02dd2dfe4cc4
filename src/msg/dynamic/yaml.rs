//! `rostopic echo`'s YAML: genpy's `strify_message`, rule for rule.

use super::Value;
use crate::python::{bytes_repr, float_repr};
use crate::yaml::emit::{push_yaml_double_quoted, yaml_list_item};
use std::fmt::Write;

pub(super) fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    strify(value, "", &mut out);
    out
}

/// Scalars as Python's `str()` of genpy's field values.
fn scalar(value: &Value) -> Option<String> {
    Some(match value {
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::I8(x) => x.to_string(),
        Value::I16(x) => x.to_string(),
        Value::I32(x) => x.to_string(),
        Value::I64(x) => x.to_string(),
        Value::U8(x) => x.to_string(),
        Value::U16(x) => x.to_string(),
        Value::U32(x) => x.to_string(),
        Value::U64(x) => x.to_string(),
        Value::F32(x) => float_repr(f64::from(*x)),
        Value::F64(x) => float_repr(*x),
        _ => return None,
    })
}

/// Appends `value` as genpy's `strify_message` writes it. Everything goes into one
/// buffer: a 100 MB string field is escaped once into `out`, not copied per nesting level.
fn strify(value: &Value, indent: &str, out: &mut String) {
    if let Some(s) = scalar(value) {
        out.push_str(&s);
        return;
    }
    match value {
        Value::String(s) if s.is_empty() => out.push_str("''"),
        Value::String(s) => push_yaml_double_quoted(s, out),
        Value::Time(t) => {
            let _ = write!(
                out,
                "\n{indent}secs: {}\n{indent}nsecs: {:9}",
                t.sec, t.nsec
            );
        }
        Value::Duration(d) => {
            let _ = write!(
                out,
                "\n{indent}secs: {}\n{indent}nsecs: {:9}",
                d.sec, d.nsec
            );
        }
        // rostopic turns uint8[] back into a list of numbers; char[] stays Python bytes.
        Value::Bytes(b) => number_list(b.iter().map(u8::to_string), out),
        Value::Chars(b) => out.push_str(&bytes_repr(b)),
        Value::Array(items) => match items.first() {
            None => out.push_str("[]"),
            Some(first) if scalar(first).is_some() => {
                number_list(items.iter().filter_map(scalar), out)
            }
            Some(Value::String(_)) => {
                // genpy runs `yaml.dump` on the list and indents every line it writes.
                for item in items {
                    let Value::String(s) = item else { continue };
                    for line in yaml_list_item(s).split('\n') {
                        let _ = write!(out, "\n{indent}{line}");
                    }
                }
            }
            Some(_) => {
                let inner = format!("{indent}  ");
                for item in items {
                    let _ = write!(out, "\n{indent}- ");
                    strify(item, &inner, out);
                }
            }
        },
        Value::Message(fields) => {
            let inner = format!("  {indent}");
            if fields.is_empty() && !indent.is_empty() {
                out.push('\n');
            }
            for (i, (name, v)) in fields.iter().enumerate() {
                if i > 0 || !indent.is_empty() {
                    out.push('\n');
                }
                let _ = write!(out, "{indent}{name}: ");
                strify(v, &inner, out);
            }
        }
        _ => {}
    }
}

/// Python's `str(list)` of numbers.
fn number_list(items: impl Iterator<Item = String>, out: &mut String) {
    out.push('[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&item);
    }
    out.push(']');
}
