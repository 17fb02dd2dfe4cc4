//! One-line JSON for `udpros topic echo --json`.

use super::Value;
use crate::python::float_repr;
use std::fmt::Write;

pub(super) fn to_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, &mut out);
    out
}

fn write_float(x: f64, out: &mut String) {
    if x.is_finite() {
        out.push_str(&float_repr(x));
    } else {
        out.push_str("null");
    }
}

fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::I8(x) => push_display(out, x),
        Value::I16(x) => push_display(out, x),
        Value::I32(x) => push_display(out, x),
        Value::I64(x) => push_display(out, x),
        Value::U8(x) => push_display(out, x),
        Value::U16(x) => push_display(out, x),
        Value::U32(x) => push_display(out, x),
        Value::U64(x) => push_display(out, x),
        Value::F32(x) => write_float(f64::from(*x), out),
        Value::F64(x) => write_float(*x, out),
        Value::String(s) => write_string(s, out),
        Value::Time(t) => push_display(
            out,
            format_args!("{{\"secs\":{},\"nsecs\":{}}}", t.sec, t.nsec),
        ),
        Value::Duration(d) => push_display(
            out,
            format_args!("{{\"secs\":{},\"nsecs\":{}}}", d.sec, d.nsec),
        ),
        Value::Bytes(b) | Value::Chars(b) => {
            write_list(b.iter(), out, |x, out| push_display(out, x))
        }
        Value::Array(items) => write_list(items.iter(), out, write_value),
        Value::Message(fields) => {
            out.push('{');
            for (i, (name, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(name, out);
                out.push(':');
                write_value(v, out);
            }
            out.push('}');
        }
    }
}

fn push_display(out: &mut String, x: impl std::fmt::Display) {
    let _ = write!(out, "{x}");
}

fn write_list<T>(
    items: impl Iterator<Item = T>,
    out: &mut String,
    mut each: impl FnMut(T, &mut String),
) {
    out.push('[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        each(item, out);
    }
    out.push(']');
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
