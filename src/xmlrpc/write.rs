//! Writing XML-RPC that XmlRpc++ (roscpp) accepts as well as Python: `<i4>` integers (never
//! `<i8>`), no `<nil/>`, no self-closing tags, no character references.

use super::base64::encode_base64;
use super::{Fault, Value};
use crate::python::float_repr;
use std::fmt::Write;

/// A `<methodCall>` document.
pub fn write_call(method: &str, params: &[Value]) -> String {
    let mut out = String::with_capacity(256);
    out.push_str("<?xml version=\"1.0\"?>\n<methodCall><methodName>");
    escape_into(method, &mut out);
    out.push_str("</methodName>\n<params>");
    for p in params {
        out.push_str("<param>");
        write_value(p, &mut out);
        out.push_str("</param>");
    }
    out.push_str("</params></methodCall>\n");
    out
}

/// A `<methodResponse>` document carrying `value`.
pub fn write_response(value: &Value) -> String {
    let mut out = String::with_capacity(256);
    out.push_str("<?xml version=\"1.0\"?>\n<methodResponse><params><param>\n");
    write_value(value, &mut out);
    out.push_str("\n</param></params></methodResponse>\n");
    out
}

/// A `<methodResponse>` document carrying `fault`.
pub fn write_fault(fault: &Fault) -> String {
    let mut out = String::with_capacity(256);
    out.push_str("<?xml version=\"1.0\"?>\n<methodResponse><fault>\n<value><struct><member><name>faultCode</name><value><i4>");
    let _ = write!(out, "{}", fault.code);
    out.push_str("</i4></value></member><member><name>faultString</name><value><string>");
    escape_into(&fault.message, &mut out);
    out.push_str("</string></value></member></struct></value>\n</fault></methodResponse>\n");
    out
}

pub(super) fn write_value(value: &Value, out: &mut String) {
    out.push_str("<value>");
    match value {
        Value::Int(i) => {
            let _ = write!(out, "<i4>{i}</i4>");
        }
        Value::Bool(b) => out.push_str(if *b {
            "<boolean>1</boolean>"
        } else {
            "<boolean>0</boolean>"
        }),
        Value::String(s) => {
            out.push_str("<string>");
            escape_into(s, out);
            out.push_str("</string>");
        }
        Value::Double(d) => {
            out.push_str("<double>");
            out.push_str(&float_repr(*d));
            out.push_str("</double>");
        }
        Value::DateTime(t) => {
            out.push_str("<dateTime.iso8601>");
            escape_into(t, out);
            out.push_str("</dateTime.iso8601>");
        }
        Value::Base64(b) => {
            out.push_str("<base64>");
            out.push_str(&encode_base64(b));
            out.push_str("</base64>");
        }
        Value::Array(items) => {
            out.push_str("<array><data>");
            for item in items {
                write_value(item, out);
            }
            out.push_str("</data></array>");
        }
        Value::Struct(members) => {
            out.push_str("<struct>");
            for (name, v) in members {
                out.push_str("<member><name>");
                escape_into(name, out);
                out.push_str("</name>");
                write_value(v, out);
                out.push_str("</member>");
            }
            out.push_str("</struct>");
        }
    }
    out.push_str("</value>");
}

fn escape_into(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse_call, parse_response, ParseLimits};
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn writes_only_what_xmlrpcpp_reads() {
        let mut s = BTreeMap::new();
        s.insert("k".to_string(), Value::from(""));
        let v = Value::from(vec![
            Value::Int(-3),
            Value::from("a<&>"),
            Value::Struct(s),
            Value::Array(vec![]),
        ]);
        let text = write_call("m", std::slice::from_ref(&v));
        assert!(!text.contains("/>"), "no self-closing tags: {text}");
        assert!(!text.contains("<i8>") && !text.contains("<nil") && !text.contains("&#"));
        assert!(
            text.contains("<string></string>") && text.contains("<array><data></data></array>")
        );
        assert_eq!(
            parse_call(text.as_bytes(), &ParseLimits::default())
                .unwrap()
                .params,
            [v]
        );
    }

    #[test]
    fn values_round_trip() {
        let v = Value::from(vec![
            Value::Bool(true),
            Value::Double(0.1),
            Value::Double(-1e-7),
            Value::Base64(vec![0, 1, 255]),
            Value::from("multi\nline"),
        ]);
        let parsed =
            parse_response(write_response(&v).as_bytes(), &ParseLimits::default()).unwrap();
        assert_eq!(parsed, Ok(v));
        let fault = Fault::new(-1, "bad <thing>");
        assert_eq!(
            parse_response(write_fault(&fault).as_bytes(), &ParseLimits::default()).unwrap(),
            Err(fault)
        );
    }
}
