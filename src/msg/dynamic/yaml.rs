//! `rostopic echo`'s YAML: genpy's `strify_message`, rule for rule.

use super::Value;
use crate::python::{bytes_repr, float_repr};
use crate::yaml::emit::{yaml_double_quoted, yaml_list_item};
use std::fmt::Write;

pub(super) fn to_yaml(value: &Value) -> String {
    strify(value, "")
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

fn strify(value: &Value, indent: &str) -> String {
    if let Some(s) = scalar(value) {
        return s;
    }
    match value {
        Value::String(s) if s.is_empty() => "''".into(),
        Value::String(s) => yaml_double_quoted(s),
        Value::Time(t) => format!("\n{indent}secs: {}\n{indent}nsecs: {:9}", t.sec, t.nsec),
        Value::Duration(d) => format!("\n{indent}secs: {}\n{indent}nsecs: {:9}", d.sec, d.nsec),
        // rostopic turns uint8[] back into a list of numbers; char[] stays Python bytes.
        Value::Bytes(b) => number_list(b.iter().map(u8::to_string)),
        Value::Chars(b) => bytes_repr(b),
        Value::Array(items) => match items.first() {
            None => "[]".into(),
            Some(first) if scalar(first).is_some() => number_list(items.iter().filter_map(scalar)),
            Some(Value::String(_)) => {
                // genpy runs `yaml.dump` on the list and indents every line it writes.
                let mut out = String::new();
                for item in items {
                    let Value::String(s) = item else { continue };
                    for line in yaml_list_item(s).split('\n') {
                        let _ = write!(out, "\n{indent}{line}");
                    }
                }
                out
            }
            Some(_) => {
                let inner = format!("{indent}  ");
                let mut out = String::new();
                for item in items {
                    let _ = write!(out, "\n{indent}- {}", strify(item, &inner));
                }
                out
            }
        },
        Value::Message(fields) => {
            let inner = format!("  {indent}");
            let lines: Vec<String> = fields
                .iter()
                .map(|(name, v)| format!("{indent}{name}: {}", strify(v, &inner)))
                .collect();
            let body = lines.join("\n");
            if indent.is_empty() {
                body
            } else {
                format!("\n{body}")
            }
        }
        _ => String::new(),
    }
}

/// Python's `str(list)` of numbers.
fn number_list(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    if items.is_empty() {
        "[]".into()
    } else {
        format!("[{}]", items.join(", "))
    }
}
