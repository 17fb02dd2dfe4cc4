//! What a client asks: JSON text frames with an `op`, and binary frames (a message on a
//! channel the client advertised, a service call). Parsing takes only what the frame holds;
//! the transport bounds a frame's size.

use super::{ChannelId, SubscriptionId};
use serde::Deserialize;
use std::fmt;

/// One subscription a client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscribe {
    /// The client's id for it.
    pub id: SubscriptionId,
    /// The channel.
    pub channel_id: ChannelId,
}

/// A channel a client advertises, to publish on.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientChannel {
    /// The client's id for it.
    pub id: ChannelId,
    /// The topic.
    pub topic: String,
    /// How its messages are encoded (`ros1` is the only one a ROS1 server takes).
    pub encoding: String,
    /// The message type.
    pub schema_name: String,
    /// The message definition, if the client sent one.
    #[serde(default)]
    pub schema: Option<String>,
}

/// A parameter a client sets; `value` absent (or null) deletes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ClientParameter {
    /// The parameter's name.
    pub name: String,
    /// Its new value.
    #[serde(default)]
    pub value: Option<serde_json::Value>,
    /// `byte_array`, `float64` or `float64_array`, where the value alone is ambiguous.
    #[serde(rename = "type", default)]
    pub value_type: Option<String>,
}

/// A text frame from a client.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Request {
    /// Subscribe to channels.
    Subscribe {
        /// The subscriptions.
        subscriptions: Vec<Subscribe>,
    },
    /// End subscriptions.
    Unsubscribe {
        /// Their ids.
        subscription_ids: Vec<SubscriptionId>,
    },
    /// Advertise channels to publish on.
    Advertise {
        /// The channels.
        channels: Vec<ClientChannel>,
    },
    /// Stop publishing on channels.
    Unadvertise {
        /// Their ids.
        channel_ids: Vec<ChannelId>,
    },
    /// Read parameters (all of them when the list is empty).
    GetParameters {
        /// Their names.
        parameter_names: Vec<String>,
        /// An id the answer repeats.
        #[serde(default)]
        id: Option<String>,
    },
    /// Set parameters.
    SetParameters {
        /// Names and values.
        parameters: Vec<ClientParameter>,
        /// An id the answer repeats.
        #[serde(default)]
        id: Option<String>,
    },
    /// Be told when parameters change.
    SubscribeParameterUpdates {
        /// Their names.
        parameter_names: Vec<String>,
    },
    /// Stop being told.
    UnsubscribeParameterUpdates {
        /// Their names.
        parameter_names: Vec<String>,
    },
    /// Be sent the graph of publishers, subscribers and services.
    SubscribeConnectionGraph,
    /// Stop being sent it.
    UnsubscribeConnectionGraph,
}

impl Request {
    /// The request's `op`, as the client wrote it.
    pub fn op(&self) -> &'static str {
        match self {
            Request::Subscribe { .. } => "subscribe",
            Request::Unsubscribe { .. } => "unsubscribe",
            Request::Advertise { .. } => "advertise",
            Request::Unadvertise { .. } => "unadvertise",
            Request::GetParameters { .. } => "getParameters",
            Request::SetParameters { .. } => "setParameters",
            Request::SubscribeParameterUpdates { .. } => "subscribeParameterUpdates",
            Request::UnsubscribeParameterUpdates { .. } => "unsubscribeParameterUpdates",
            Request::SubscribeConnectionGraph => "subscribeConnectionGraph",
            Request::UnsubscribeConnectionGraph => "unsubscribeConnectionGraph",
        }
    }
}

/// A binary frame from a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryRequest<'a> {
    /// A message to publish on a channel the client advertised.
    MessageData {
        /// The client's channel.
        channel: ChannelId,
        /// The message, ROS1 serialized (without a length prefix).
        payload: &'a [u8],
    },
    /// A service call.
    ServiceCallRequest {
        /// The service.
        service: u32,
        /// The client's id for the call, which the response repeats.
        call: u32,
        /// The request's encoding (`ros1`).
        encoding: &'a str,
        /// The request, serialized.
        payload: &'a [u8],
    },
}

/// Why a client's frame was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// Not JSON, or not an object the protocol defines; the parser's words.
    Json(String),
    /// An `op` this server does not take.
    UnknownOp(String),
    /// A binary frame with no opcode, or an opcode clients do not send.
    UnknownOpcode(Option<u8>),
    /// A binary frame shorter than its fields.
    Truncated,
    /// A service call's encoding is not UTF-8.
    Encoding,
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Json(e) => write!(f, "not a request: {e}"),
            RequestError::UnknownOp(op) => write!(f, "unsupported op {op:?}"),
            RequestError::UnknownOpcode(Some(op)) => write!(f, "unknown binary opcode {op}"),
            RequestError::UnknownOpcode(None) => f.write_str("empty binary frame"),
            RequestError::Truncated => f.write_str("binary frame shorter than its fields"),
            RequestError::Encoding => f.write_str("service call encoding is not UTF-8"),
        }
    }
}

impl std::error::Error for RequestError {}

/// The longest `op` quoted back in an error.
const QUOTED_OP: usize = 64;

/// Parses a text frame.
pub fn parse_text(text: &str) -> Result<Request, RequestError> {
    serde_json::from_str(text).map_err(|e| {
        // Say which op was refused when the frame named one this server does not take.
        #[derive(Deserialize)]
        struct Op {
            op: String,
        }
        match serde_json::from_str::<Op>(text) {
            Ok(Op { op }) if !KNOWN_OPS.contains(&op.as_str()) => {
                RequestError::UnknownOp(op.chars().take(QUOTED_OP).collect())
            }
            _ => RequestError::Json(e.to_string()),
        }
    })
}

/// The ops [`Request`] parses.
const KNOWN_OPS: [&str; 10] = [
    "subscribe",
    "unsubscribe",
    "advertise",
    "unadvertise",
    "getParameters",
    "setParameters",
    "subscribeParameterUpdates",
    "unsubscribeParameterUpdates",
    "subscribeConnectionGraph",
    "unsubscribeConnectionGraph",
];

/// Parses a binary frame.
pub fn parse_binary(frame: &[u8]) -> Result<BinaryRequest<'_>, RequestError> {
    let u32_at = |at: usize| -> Result<u32, RequestError> {
        let bytes = frame.get(at..at + 4).ok_or(RequestError::Truncated)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    };
    match frame.first() {
        Some(0x01) => Ok(BinaryRequest::MessageData {
            channel: u32_at(1)?,
            payload: &frame[5..],
        }),
        Some(0x02) => {
            let (service, call, len) = (u32_at(1)?, u32_at(5)?, u32_at(9)? as usize);
            let encoding = frame
                .get(13..13usize.saturating_add(len))
                .ok_or(RequestError::Truncated)?;
            let encoding = std::str::from_utf8(encoding).map_err(|_| RequestError::Encoding)?;
            Ok(BinaryRequest::ServiceCallRequest {
                service,
                call,
                encoding,
                payload: &frame[13 + len..],
            })
        }
        other => Err(RequestError::UnknownOpcode(other.copied())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_the_op_it_was_parsed_from() {
        for text in [
            r#"{"op":"subscribe","subscriptions":[]}"#,
            r#"{"op":"unsubscribe","subscriptionIds":[]}"#,
            r#"{"op":"advertise","channels":[]}"#,
            r#"{"op":"unadvertise","channelIds":[]}"#,
            r#"{"op":"getParameters","parameterNames":[]}"#,
            r#"{"op":"setParameters","parameters":[]}"#,
            r#"{"op":"subscribeParameterUpdates","parameterNames":[]}"#,
            r#"{"op":"unsubscribeParameterUpdates","parameterNames":[]}"#,
            r#"{"op":"subscribeConnectionGraph"}"#,
            r#"{"op":"unsubscribeConnectionGraph"}"#,
        ] {
            let request = parse_text(text).unwrap();
            assert!(
                text.contains(&format!(r#""op":"{}""#, request.op())),
                "{text}"
            );
        }
    }

    #[test]
    fn requests_parse_as_the_spec_writes_them() {
        assert_eq!(
            parse_text(r#"{"op":"subscribe","subscriptions":[{"id":7,"channelId":3}]}"#),
            Ok(Request::Subscribe {
                subscriptions: vec![Subscribe {
                    id: 7,
                    channel_id: 3
                }]
            })
        );
        assert_eq!(
            parse_text(r#"{"op":"unsubscribe","subscriptionIds":[7]}"#),
            Ok(Request::Unsubscribe {
                subscription_ids: vec![7]
            })
        );
        assert_eq!(
            parse_text(r#"{"op":"getParameters","parameterNames":[],"id":"a"}"#),
            Ok(Request::GetParameters {
                parameter_names: vec![],
                id: Some("a".into())
            })
        );
        let Ok(Request::Advertise { channels }) = parse_text(
            r#"{"op":"advertise","channels":[{"id":1,"topic":"/joy","encoding":"ros1","schemaName":"sensor_msgs/Joy"}]}"#,
        ) else {
            panic!("advertise");
        };
        assert_eq!(channels[0].schema, None);
        assert_eq!(
            parse_text(r#"{"op":"subscribeConnectionGraph"}"#),
            Ok(Request::SubscribeConnectionGraph)
        );
    }

    #[test]
    fn garbage_is_an_error_that_says_why() {
        assert!(matches!(parse_text("{"), Err(RequestError::Json(_))));
        assert!(matches!(parse_text("[]"), Err(RequestError::Json(_))));
        assert!(matches!(
            parse_text(r#"{"op":"subscribe","subscriptions":[{"id":-1,"channelId":3}]}"#),
            Err(RequestError::Json(_))
        ));
        assert_eq!(
            parse_text(r#"{"op":"fetchAsset","uri":"x","requestId":1}"#),
            Err(RequestError::UnknownOp("fetchAsset".into()))
        );
        let long = format!(r#"{{"op":"{}"}}"#, "x".repeat(10_000));
        let Err(RequestError::UnknownOp(op)) = parse_text(&long) else {
            panic!("unknown op");
        };
        assert_eq!(op.len(), QUOTED_OP);
    }

    #[test]
    fn binary_frames_are_checked_against_their_lengths() {
        assert_eq!(
            parse_binary(&[1, 2, 0, 0, 0, 9, 9]),
            Ok(BinaryRequest::MessageData {
                channel: 2,
                payload: &[9, 9]
            })
        );
        let call = [
            2, 1, 0, 0, 0, 5, 0, 0, 0, 4, 0, 0, 0, b'r', b'o', b's', b'1', 7,
        ];
        assert_eq!(
            parse_binary(&call),
            Ok(BinaryRequest::ServiceCallRequest {
                service: 1,
                call: 5,
                encoding: "ros1",
                payload: &[7]
            })
        );
        assert_eq!(parse_binary(&call[..15]), Err(RequestError::Truncated));
        let mut lying = call;
        lying[9..13].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse_binary(&lying), Err(RequestError::Truncated));
        assert_eq!(parse_binary(&[1, 0]), Err(RequestError::Truncated));
        assert_eq!(parse_binary(&[]), Err(RequestError::UnknownOpcode(None)));
        assert_eq!(
            parse_binary(&[9]),
            Err(RequestError::UnknownOpcode(Some(9)))
        );
    }
}
