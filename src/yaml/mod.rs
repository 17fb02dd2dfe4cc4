//! YAML as ROS's Python tools read and write it (PyYAML, YAML 1.1): scalars typed as
//! `safe_load` types them (`_rate:=10` is an int, `_on:=yes` a bool, `_name:='10'` a
//! string), rosparam files and command-line values read with [`load`] (a maintained
//! parser, `saphyr-parser`, under this module's YAML 1.1 resolver), and the emitters that
//! write `rosparam dump` files ([`params`]) and `rostopic echo` output byte for byte as
//! PyYAML does.
//!
//! The layering is one way: XML-RPC values know nothing of YAML; this module converts YAML
//! to them ([`Yaml::to_xmlrpc`]) and writes them ([`params`]); dynamic messages read and
//! print YAML through it.

pub(crate) mod emit;
mod load;
pub mod params;

pub use load::{load, load_all, MAX_DEPTH, MAX_TEXT, MAX_VALUES};

use crate::xmlrpc::Value;
use std::fmt;

/// A YAML value as ROS tools read it (YAML 1.1 scalars, as PyYAML resolves them).
#[derive(Debug, Clone, PartialEq)]
pub enum Yaml {
    /// `~`, `null` or nothing.
    Null,
    /// `true`, `yes`, `on` and the like.
    Bool(bool),
    /// An integer (decimal, `0x`, `0o`/octal, `0b`, with `_` separators).
    Int(i64),
    /// A float, `.inf` and `.nan` included.
    Float(f64),
    /// Any other scalar, or a quoted one.
    Str(String),
    /// `!!binary` (base64 in the text; Python's `bytes`, and a parameter's XML-RPC base64).
    Binary(Vec<u8>),
    /// A sequence.
    Seq(Vec<Yaml>),
    /// A mapping, in document order.
    Map(Vec<(String, Yaml)>),
}

/// Why a text is not YAML this reader takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError(pub String);

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid YAML: {}", self.0)
    }
}

impl std::error::Error for YamlError {}

impl Yaml {
    /// As a parameter value. Null has no XML-RPC form (rosmaster refuses it); integers
    /// beyond 32 bits become doubles, since XmlRpc++ cannot carry them.
    pub fn to_xmlrpc(&self) -> Result<Value, YamlError> {
        Ok(match self {
            Yaml::Null => return Err(YamlError("null has no parameter value".into())),
            Yaml::Bool(b) => Value::Bool(*b),
            Yaml::Int(i) => i32::try_from(*i).map_or(Value::Double(*i as f64), Value::Int),
            Yaml::Float(f) => Value::Double(*f),
            Yaml::Str(s) => Value::String(s.clone()),
            Yaml::Binary(b) => Value::Base64(b.clone()),
            Yaml::Seq(items) => Value::Array(
                items
                    .iter()
                    .map(Yaml::to_xmlrpc)
                    .collect::<Result<_, _>>()?,
            ),
            Yaml::Map(pairs) => Value::Struct(
                pairs
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), v.to_xmlrpc()?)))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }
}

/// What a plain (unquoted) scalar means under PyYAML's YAML 1.1 resolvers.
pub fn resolve_plain(s: &str) -> Yaml {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Yaml::Null,
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Yaml::Bool(true)
        }
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Yaml::Bool(false)
        }
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Yaml::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Yaml::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Yaml::Float(f64::NAN),
        _ => {}
    }
    if let Some(i) = resolve_int(s) {
        return Yaml::Int(i);
    }
    if let Some(f) = resolve_float(s) {
        return Yaml::Float(f);
    }
    Yaml::Str(s.to_string())
}

/// Whether PyYAML would read `s`, unquoted, as something other than a string (timestamps
/// and merge keys included), so that writing it as a string needs quotes.
pub fn plain_is_not_a_string(s: &str) -> bool {
    !matches!(resolve_plain(s), Yaml::Str(_)) || is_timestamp(s) || s == "<<" || s == "="
}

fn digits(t: &str, radix: u32) -> bool {
    !t.is_empty() && t.chars().all(|c| c == '_' || c.is_digit(radix))
}

fn parse_radix(t: &str, radix: u32) -> Option<i64> {
    i64::from_str_radix(&t.replace('_', ""), radix).ok()
}

fn split_sign(s: &str) -> (i64, &str) {
    match s.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, s.strip_prefix('+').unwrap_or(s)),
    }
}

fn resolve_int(s: &str) -> Option<i64> {
    let (sign, u) = split_sign(s);
    let value = if let Some(b) = u.strip_prefix("0b") {
        digits(b, 2).then(|| parse_radix(b, 2))?
    } else if let Some(h) = u.strip_prefix("0x") {
        digits(h, 16).then(|| parse_radix(h, 16))?
    } else if u == "0" {
        Some(0)
    } else if let Some(octal) = u.strip_prefix('0') {
        digits(octal, 8).then(|| parse_radix(octal, 8))?
    } else if u.starts_with(|c: char| c.is_ascii_digit()) && digits(u, 10) {
        parse_radix(u, 10)
    } else {
        sexagesimal(u)
            .filter(|_| !u.contains('.'))
            .map(|v| v as i64)
    }?;
    value.checked_mul(sign)
}

/// `1:30` = 90, `1:30.5` = 90.5 (base 60), as YAML 1.1 reads them.
fn sexagesimal(u: &str) -> Option<f64> {
    let (head, frac) = u.split_once('.').unwrap_or((u, ""));
    let mut parts = head.split(':');
    let first = parts.next()?;
    if !first.starts_with(|c: char| ('1'..='9').contains(&c)) || !digits(first, 10) {
        return None;
    }
    let mut value = first.replace('_', "").parse::<f64>().ok()?;
    let mut any = false;
    for p in parts {
        let b = p.as_bytes();
        let ok = matches!(b, [d] if d.is_ascii_digit())
            || matches!(b, [b'0'..=b'5', d] if d.is_ascii_digit());
        if !ok {
            return None;
        }
        value = value * 60.0 + p.parse::<f64>().ok()?;
        any = true;
    }
    if !any || !frac.chars().all(|c| c == '_' || c.is_ascii_digit()) {
        return None;
    }
    let frac: f64 = format!("0.{}", frac.replace('_', ""))
        .parse()
        .unwrap_or(0.0);
    Some(value + frac)
}

fn resolve_float(s: &str) -> Option<f64> {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    if let Some(e) = exponent {
        let d = e.strip_prefix(['+', '-'])?;
        if d.is_empty() || !d.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
    }
    let ok = if let Some(frac) = mantissa.strip_prefix('.') {
        digits(frac, 10)
    } else {
        let (sign, u) = split_sign(mantissa);
        if exponent.is_none() {
            if let Some(v) = sexagesimal(u).filter(|_| u.contains('.')) {
                return Some(sign as f64 * v);
            }
        }
        match u.split_once('.') {
            Some((int, frac)) => {
                int.starts_with(|c: char| c.is_ascii_digit())
                    && digits(int, 10)
                    && frac.chars().all(|c| c == '_' || c.is_ascii_digit())
            }
            None => false,
        }
    };
    ok.then(|| s.replace('_', "").parse().ok()).flatten()
}

fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 8 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[5].is_ascii_digit()
}

/// A scalar as Python's `str()` writes it (how a non-string mapping key becomes a parameter name).
pub(crate) fn scalar_text(y: &Yaml) -> String {
    match y {
        Yaml::Null => "null".into(),
        Yaml::Bool(b) => if *b { "True" } else { "False" }.into(),
        Yaml::Int(i) => i.to_string(),
        Yaml::Float(f) => crate::python::float_repr(*f),
        Yaml::Str(s) => s.clone(),
        // Python's str() of bytes.
        Yaml::Binary(b) => format!("b'{}'", b.escape_ascii()),
        Yaml::Seq(_) | Yaml::Map(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_typed_as_pyyaml_does() {
        assert_eq!(resolve_plain("10"), Yaml::Int(10));
        assert_eq!(resolve_plain("-0x1F"), Yaml::Int(-31));
        assert_eq!(resolve_plain("017"), Yaml::Int(15));
        assert_eq!(resolve_plain("1_000"), Yaml::Int(1000));
        assert_eq!(resolve_plain("1:30"), Yaml::Int(90));
        assert_eq!(resolve_plain("09"), Yaml::Str("09".into()));
        assert_eq!(resolve_plain("1.5"), Yaml::Float(1.5));
        assert_eq!(resolve_plain("1.0e+3"), Yaml::Float(1000.0));
        assert_eq!(resolve_plain("1e3"), Yaml::Str("1e3".into()));
        assert_eq!(resolve_plain(".5"), Yaml::Float(0.5));
        assert_eq!(resolve_plain("yes"), Yaml::Bool(true));
        assert_eq!(resolve_plain("Off"), Yaml::Bool(false));
        assert_eq!(resolve_plain("~"), Yaml::Null);
        assert_eq!(
            resolve_plain("hello world"),
            Yaml::Str("hello world".into())
        );
        assert!(plain_is_not_a_string("2001-01-01") && !plain_is_not_a_string("abc"));
    }

    #[test]
    fn flow_collections_and_quotes() {
        assert_eq!(
            load("[1, 'two', \"th\\\"ree\", {a: 1.5, b: [x, yes]}]").unwrap(),
            Yaml::Seq(vec![
                Yaml::Int(1),
                Yaml::Str("two".into()),
                Yaml::Str("th\"ree".into()),
                Yaml::Map(vec![
                    ("a".into(), Yaml::Float(1.5)),
                    (
                        "b".into(),
                        Yaml::Seq(vec![Yaml::Str("x".into()), Yaml::Bool(true)])
                    )
                ]),
            ])
        );
        assert_eq!(load("'it''s'").unwrap(), Yaml::Str("it's".into()));
        assert_eq!(load("{}").unwrap(), Yaml::Map(vec![]));
        assert_eq!(
            load("plain text # comment").unwrap(),
            Yaml::Str("plain text".into())
        );
        assert!(load("[1, 2").is_err());
        assert!(load(&"[".repeat(100)).is_err());
    }

    #[test]
    fn converts_to_parameter_values() {
        let v = load("{n: 5, big: 10000000000, l: [true]}")
            .unwrap()
            .to_xmlrpc()
            .unwrap();
        let s = v.as_struct().unwrap();
        assert_eq!(s["n"], Value::Int(5));
        assert_eq!(s["big"], Value::Double(1e10));
        assert!(Yaml::Null.to_xmlrpc().is_err());
    }
}
