use crate::wire::negotiation::Param;
use std::collections::BTreeMap;
use std::fmt;

/// An XML-RPC value. Integers are 32-bit: XmlRpc++ knows no `<i8>`, so neither does the graph.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `<int>` / `<i4>`.
    Int(i32),
    /// `<boolean>`.
    Bool(bool),
    /// `<string>`, or untyped text.
    String(String),
    /// `<double>`.
    Double(f64),
    /// `<dateTime.iso8601>`, kept as text (ROS never sends one).
    DateTime(String),
    /// `<base64>`, decoded.
    Base64(Vec<u8>),
    /// `<array>`.
    Array(Vec<Value>),
    /// `<struct>`.
    Struct(BTreeMap<String, Value>),
}

impl Value {
    /// Python's truth value (`bool(x)`), which rosmaster's validators and rospy's
    /// `/use_sim_time` check use: false, 0, 0.0 and empty strings, lists and structs are
    /// false; everything else is true.
    pub fn is_truthy(&self) -> bool {
        match self {
            Value::Int(i) => *i != 0,
            Value::Bool(b) => *b,
            Value::String(s) | Value::DateTime(s) => !s.is_empty(),
            Value::Double(d) => *d != 0.0,
            Value::Base64(b) => !b.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Struct(s) => !s.is_empty(),
        }
    }

    /// The integer, if this is one.
    pub fn as_i32(&self) -> Option<i32> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number, if this is a double or an integer.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Double(d) => Some(*d),
            Value::Int(i) => Some(f64::from(*i)),
            _ => None,
        }
    }

    /// The items, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The members, if this is a struct.
    pub fn as_struct(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Struct(s) => Some(s),
            _ => None,
        }
    }

    /// The decoded bytes, if this is base64.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Base64(b) => Some(b),
            _ => None,
        }
    }

    /// A short name of the kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Int(_) => "int",
            Value::Bool(_) => "boolean",
            Value::String(_) => "string",
            Value::Double(_) => "double",
            Value::DateTime(_) => "dateTime",
            Value::Base64(_) => "base64",
            Value::Array(_) => "array",
            Value::Struct(_) => "struct",
        }
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::String(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::String(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Double(v)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(v: Vec<T>) -> Self {
        Value::Array(v.into_iter().map(Into::into).collect())
    }
}

/// An XML-RPC fault: the call failed as a call (unknown method, bad request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// `faultCode`.
    pub code: i32,
    /// `faultString`.
    pub message: String,
}

impl Fault {
    /// A fault with this code and message.
    pub fn new(code: i32, message: impl Into<String>) -> Fault {
        Fault {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "XML-RPC fault {}: {}", self.code, self.message)
    }
}

impl std::error::Error for Fault {}

/// A parsed `<methodCall>`.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodCall {
    /// `methodName`.
    pub method: String,
    /// The parameters, in order.
    pub params: Vec<Value>,
}

/// A `requestTopic` protocol entry as XML-RPC: an array of its params (from
/// [`Offer::to_params`](crate::wire::negotiation::Offer::to_params) or
/// [`Answer::to_params`](crate::wire::negotiation::Answer::to_params)).
pub fn entry(params: Vec<Param>) -> Value {
    Value::Array(
        params
            .into_iter()
            .map(|p| match p {
                Param::Str(s) => Value::String(s),
                Param::Int(i) => Value::Int(i),
                Param::Bytes(b) => Value::Base64(b.to_vec()),
                Param::Other => Value::Array(Vec::new()),
            })
            .collect(),
    )
}

/// The params of a `requestTopic` protocol entry (an XML-RPC array's items).
pub fn entry_params(items: &[Value]) -> Vec<Param> {
    items
        .iter()
        .map(|v| match v {
            Value::String(s) => Param::Str(s.clone()),
            Value::Int(i) => Param::Int(*i),
            Value::Base64(b) => Param::Bytes(b.clone().into()),
            _ => Param::Other,
        })
        .collect()
}
