//! What a server says: JSON text frames, each an object with an `op` field, and binary
//! frames whose first byte is an opcode (integers little-endian).

use super::{ChannelId, SubscriptionId};
use serde::Serialize;
use std::collections::BTreeMap;

/// Capabilities a server can announce in `serverInfo`.
pub mod capability {
    /// Clients may advertise channels and publish on them.
    pub const CLIENT_PUBLISH: &str = "clientPublish";
    /// Clients may get and set parameters.
    pub const PARAMETERS: &str = "parameters";
    /// Clients may subscribe to parameter updates.
    pub const PARAMETERS_SUBSCRIBE: &str = "parametersSubscribe";
    /// The server sends its clock (sim time) in binary Time frames.
    pub const TIME: &str = "time";
    /// Clients may call services.
    pub const SERVICES: &str = "services";
    /// Clients may subscribe to the graph of publishers, subscribers and services.
    pub const CONNECTION_GRAPH: &str = "connectionGraph";
}

/// A topic as a channel: for ROS1, encoding `ros1`, the message type as the schema name,
/// its full definition (as the connection header's `message_definition` carries it) as
/// the schema, schema encoding `ros1msg`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Channel {
    /// The channel's id, unique for the server's lifetime.
    pub id: ChannelId,
    /// The topic.
    pub topic: String,
    /// How messages are encoded: `ros1`.
    pub encoding: String,
    /// The message type, such as `sensor_msgs/Image`.
    pub schema_name: String,
    /// The full message definition.
    pub schema: String,
    /// How the schema is written: `ros1msg`.
    pub schema_encoding: String,
}

impl Channel {
    /// A ROS1 topic of type `msg_type` with definition `definition`.
    pub fn ros1(id: ChannelId, topic: &str, msg_type: &str, definition: &str) -> Channel {
        Channel {
            id,
            topic: topic.to_string(),
            encoding: "ros1".to_string(),
            schema_name: msg_type.to_string(),
            schema: definition.to_string(),
            schema_encoding: "ros1msg".to_string(),
        }
    }
}

/// A service as the protocol lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    /// The service's id, unique for the server's lifetime.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Its type, such as `std_srvs/SetBool`.
    #[serde(rename = "type")]
    pub service_type: String,
    /// The request's definition (`ros1msg`).
    pub request_schema: String,
    /// The response's definition (`ros1msg`).
    pub response_schema: String,
}

/// A parameter's value as the protocol carries it: JSON, with a type only where JSON
/// cannot say it (`float64` for a double that happens to be whole, `byte_array` for
/// base64).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parameter {
    /// The parameter's name.
    pub name: String,
    /// Its value.
    pub value: serde_json::Value,
    /// `byte_array`, `float64` or `float64_array`, where the value alone is ambiguous.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub value_type: Option<String>,
}

/// How bad a status is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// For information.
    Info = 0,
    /// Something the operator should know.
    Warning = 1,
    /// A request failed or the server is in trouble.
    Error = 2,
}

impl Serialize for Level {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(*self as u8)
    }
}

/// A text frame from the server.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum ServerMessage {
    /// The first frame on every connection.
    ServerInfo {
        /// The server's name (the node's).
        name: String,
        /// What it supports, from [`capability`].
        capabilities: Vec<String>,
        /// Encodings it takes from publishing clients: `ros1`.
        supported_encodings: Vec<String>,
        /// Free-form facts (the ROS distribution, the master's URI).
        metadata: BTreeMap<String, String>,
        /// Tells a client that reconnects whether it reached the same server.
        session_id: String,
    },
    /// Something the operator should see.
    Status {
        /// How bad.
        level: Level,
        /// What happened.
        message: String,
        /// An id a later `removeStatus` names.
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
    /// Statuses that no longer hold.
    RemoveStatus {
        /// Their ids.
        status_ids: Vec<String>,
    },
    /// New channels.
    Advertise {
        /// The channels.
        channels: Vec<Channel>,
    },
    /// Channels that went away.
    Unadvertise {
        /// Their ids.
        channel_ids: Vec<ChannelId>,
    },
    /// Parameter values: the answer to `getParameters` (with its id) or an update.
    ParameterValues {
        /// The values.
        parameters: Vec<Parameter>,
        /// The request's id, if it had one.
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
    /// New services.
    AdvertiseServices {
        /// The services.
        services: Vec<Service>,
    },
    /// Services that went away.
    UnadvertiseServices {
        /// Their ids.
        service_ids: Vec<u32>,
    },
    /// A service call that got no response.
    ServiceCallFailure {
        /// The service.
        service_id: u32,
        /// The client's id for the call.
        call_id: u32,
        /// Why.
        message: String,
    },
}

impl ServerMessage {
    /// The message as the text of a frame.
    pub fn to_json(&self) -> String {
        // Serializing these types cannot fail: no maps with non-string keys, no floats
        // that JSON cannot hold (NaN and infinities become null).
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Binary opcode: a message on a subscription.
pub const MESSAGE_DATA: u8 = 0x01;
/// Binary opcode: the server's clock.
pub const TIME: u8 = 0x02;
/// Binary opcode: a service's response.
pub const SERVICE_CALL_RESPONSE: u8 = 0x03;

/// Bytes of a Message Data frame before the message.
pub const MESSAGE_DATA_HEADER_LEN: usize = 13;

/// The start of a Message Data frame: opcode, the client's subscription id, and the time
/// the message was received in nanoseconds; the message's bytes follow (ROS1 serialized,
/// without TCPROS's length prefix).
pub fn message_data_header(
    subscription: SubscriptionId,
    received_ns: u64,
) -> [u8; MESSAGE_DATA_HEADER_LEN] {
    let mut header = [0; MESSAGE_DATA_HEADER_LEN];
    header[0] = MESSAGE_DATA;
    header[1..5].copy_from_slice(&subscription.to_le_bytes());
    header[5..13].copy_from_slice(&received_ns.to_le_bytes());
    header
}

/// A Time frame: the server's clock (sim time) in nanoseconds.
pub fn time(now_ns: u64) -> [u8; 9] {
    let mut frame = [0; 9];
    frame[0] = TIME;
    frame[1..9].copy_from_slice(&now_ns.to_le_bytes());
    frame
}

/// A Service Call Response frame.
pub fn service_call_response(service: u32, call: u32, encoding: &str, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(13 + encoding.len() + payload.len());
    frame.push(SERVICE_CALL_RESPONSE);
    frame.extend_from_slice(&service.to_le_bytes());
    frame.extend_from_slice(&call.to_le_bytes());
    frame.extend_from_slice(&(encoding.len() as u32).to_le_bytes());
    frame.extend_from_slice(encoding.as_bytes());
    frame.extend_from_slice(payload);
    frame
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(message: &ServerMessage) -> serde_json::Value {
        serde_json::from_str(&message.to_json()).unwrap()
    }

    #[test]
    fn text_frames_are_the_specs_objects() {
        let info = ServerMessage::ServerInfo {
            name: "/udpros_view".into(),
            capabilities: vec![capability::TIME.into()],
            supported_encodings: vec!["ros1".into()],
            metadata: BTreeMap::from([("ROS_DISTRO".into(), "noetic".into())]),
            session_id: "42".into(),
        };
        assert_eq!(
            parsed(&info),
            json!({"op": "serverInfo", "name": "/udpros_view", "capabilities": ["time"],
                "supportedEncodings": ["ros1"], "metadata": {"ROS_DISTRO": "noetic"},
                "sessionId": "42"})
        );
        let advertise = ServerMessage::Advertise {
            channels: vec![Channel::ros1(
                3,
                "/ping",
                "std_msgs/String",
                "string data\n",
            )],
        };
        assert_eq!(
            parsed(&advertise),
            json!({"op": "advertise", "channels": [{"id": 3, "topic": "/ping",
                "encoding": "ros1", "schemaName": "std_msgs/String",
                "schema": "string data\n", "schemaEncoding": "ros1msg"}]})
        );
        let status = ServerMessage::Status {
            level: Level::Warning,
            message: "slow".into(),
            id: None,
        };
        assert_eq!(
            parsed(&status),
            json!({"op": "status", "level": 1, "message": "slow"})
        );
        let gone = ServerMessage::Unadvertise {
            channel_ids: vec![3],
        };
        assert_eq!(
            parsed(&gone),
            json!({"op": "unadvertise", "channelIds": [3]})
        );
        let service = ServerMessage::AdvertiseServices {
            services: vec![Service {
                id: 1,
                name: "/set".into(),
                service_type: "std_srvs/SetBool".into(),
                request_schema: "bool data".into(),
                response_schema: "bool success\nstring message".into(),
            }],
        };
        assert_eq!(
            parsed(&service)["services"][0]["type"],
            json!("std_srvs/SetBool")
        );
        let values = ServerMessage::ParameterValues {
            parameters: vec![Parameter {
                name: "/gain".into(),
                value: json!(f64::NAN),
                value_type: None,
            }],
            id: Some("q".into()),
        };
        assert_eq!(
            parsed(&values),
            json!({"op": "parameterValues", "parameters": [{"name": "/gain", "value": null}],
                "id": "q"})
        );
    }

    #[test]
    fn binary_frames_are_little_endian_after_their_opcode() {
        assert_eq!(
            message_data_header(0x0102_0304, 5),
            [1, 4, 3, 2, 1, 5, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(time(256), [2, 0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            service_call_response(1, 2, "ros1", b"\x01"),
            [3, 1, 0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, b'r', b'o', b's', b'1', 1]
        );
    }
}
