//! The ROS master, parameter and slave APIs as typed calls over XML-RPC.

mod master;
mod slave;
pub(crate) mod validate;

pub use master::{MasterClient, SystemState, TopicType, UNAUTHENTICATED_NODES};
pub use slave::{SlaveBackend, SlaveHandler};

use crate::xmlrpc::{CallError, Value};
use std::fmt;

/// Why an API call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiError {
    /// The call did not complete (unreachable, timeout, fault, bad XML).
    Call(CallError),
    /// The peer answered with a failure status (code 0 or -1) and its message.
    Status {
        /// The status code: 0 is a failure, -1 an error in the call.
        code: i32,
        /// What the peer said.
        message: String,
    },
    /// The answer did not have the documented shape.
    Shape(String),
    /// A parameter holds a value of another type than the one asked for: the whole
    /// sentence, naming the parameter, what it must be and what it is.
    WrongType(String),
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Call(e) => e.fmt(f),
            ApiError::Status { code, message } => write!(f, "{message} (status {code})"),
            ApiError::Shape(what) => write!(f, "unexpected answer: {what}"),
            ApiError::WrongType(sentence) => f.write_str(sentence),
        }
    }
}

impl std::error::Error for ApiError {}

impl From<CallError> for ApiError {
    fn from(e: CallError) -> Self {
        ApiError::Call(e)
    }
}

/// A master or slave API answer, `[code, statusMessage, value]` on the wire: code 1 is
/// success, 0 a failure to do what was asked, -1 an error in the call.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusReply {
    /// 1, 0 or -1.
    pub code: i32,
    /// The status message (rospy's wording; tools print it).
    pub status: String,
    /// The answer proper.
    pub value: Value,
}

impl StatusReply {
    /// Success: code 1.
    pub fn ok(status: impl Into<String>, value: Value) -> StatusReply {
        StatusReply::new(1, status, value)
    }

    /// Any code.
    pub fn new(code: i32, status: impl Into<String>, value: Value) -> StatusReply {
        StatusReply {
            code,
            status: status.into(),
            value,
        }
    }

    /// The answer as the XML-RPC array it travels as.
    pub fn into_value(self) -> Value {
        Value::Array(vec![
            Value::Int(self.code),
            Value::String(self.status),
            self.value,
        ])
    }
}

/// Splits a `[code, message, value]` status triplet; codes other than 1 are errors.
pub fn ok_value(reply: Value) -> Result<Value, ApiError> {
    let Value::Array(mut parts) = reply else {
        return Err(ApiError::Shape(format!(
            "a {} instead of [code, message, value]",
            reply.kind()
        )));
    };
    if !(2..=3).contains(&parts.len()) {
        return Err(ApiError::Shape(format!(
            "{} elements instead of [code, message, value]",
            parts.len()
        )));
    }
    let value = if parts.len() == 3 {
        parts.pop().unwrap_or(Value::Int(0))
    } else {
        Value::Int(0)
    };
    let message = parts
        .pop()
        .and_then(|m| m.as_str().map(str::to_string))
        .unwrap_or_default();
    match parts.pop() {
        Some(Value::Int(1)) => Ok(value),
        Some(Value::Int(code)) => Err(ApiError::Status { code, message }),
        _ => Err(ApiError::Shape("status code is not an int".into())),
    }
}

pub(crate) fn strings(v: &Value) -> Result<Vec<String>, ApiError> {
    v.as_array()
        .ok_or_else(|| ApiError::Shape(format!("expected a list of strings, got a {}", v.kind())))?
        .iter()
        .map(|s| {
            s.as_str()
                .map(str::to_string)
                .ok_or_else(|| ApiError::Shape("expected a string".into()))
        })
        .collect()
}
