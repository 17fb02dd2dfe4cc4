//! ROSRPC, the service protocol, without I/O: the headers a client sends and a server
//! answers, the server's verdict on a client's header, and the response frame.
//!
//! A service call runs over one TCP connection to the server node's TCPROS port:
//!
//! 1. the client sends a connection header with `callerid`, `md5sum` (the *service*
//!    md5sum, or `*`), `service`, and optionally `persistent=1` or `probe=1`;
//! 2. the server answers with its own header, or with a lone `error` field and closes;
//! 3. the client sends each request as an ordinary TCPROS frame (`u32` length, body);
//! 4. the server answers each with a response frame: a `u8` ok flag, a `u32` length and
//!    that many bytes, the response message when ok is non-zero, else an error text.
//!
//! A non-persistent connection carries one call; a persistent one carries calls until a
//! side closes it. Both roscpp and rospy clients wait for the server's header before they
//! send a request, and so does the client built on this module: rospy's server drops
//! bytes that arrive with the header.

use crate::header::ConnectionHeader;
use crate::tcpros::{FrameDecoder, FrameTooLarge};
use bytes::Bytes;
use std::fmt;

/// Who serves a service, as its reply header tells clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceIdentity {
    /// The serving node's name.
    pub node: String,
    /// The resolved service name.
    pub service: String,
    /// `pkg/Srv`.
    pub service_type: String,
    /// The service md5sum (not a message md5sum).
    pub md5sum: String,
}

/// What a server learned from a client header it accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// The header to send back.
    pub reply: ConnectionHeader,
    /// The client keeps the connection for more calls.
    pub persistent: bool,
    /// The client only wants the reply header (rosservice, `wait_for_service`).
    pub probe: bool,
}

impl ServiceIdentity {
    /// The server's verdict on a client's header: the reply to send, or the text of the
    /// `error` field to send before closing, worded as roscpp words it.
    ///
    /// The reply carries every field either ROS server sends (`request_type` and
    /// `response_type` as roscpp, `service` as rospy), so every client finds what it
    /// checks: roscpp reads `md5sum`, rospy and rosservice also `type`.
    pub fn accept(&self, header: &ConnectionHeader) -> Result<Accepted, String> {
        let (Some(md5), Some(service), Some(_caller)) = (
            header.get("md5sum"),
            header.get("service"),
            header.get("callerid"),
        ) else {
            return Err(
                "bogus tcpros header. did not have the required elements: md5sum, service, callerid"
                    .into(),
            );
        };
        if service != self.service {
            return Err(format!(
                "received a tcpros connection for a nonexistent service [{service}]."
            ));
        }
        if md5 != "*" && self.md5sum != "*" && md5 != self.md5sum {
            return Err(format!(
                "client wants service {service} to have md5sum {md5}, but it has {}. Dropping connection.",
                self.md5sum
            ));
        }
        Ok(Accepted {
            reply: self.reply_header(),
            persistent: header.get("persistent").is_some_and(is_true),
            probe: header.get("probe").is_some_and(is_true),
        })
    }

    /// The header a server sends to an accepted client.
    pub fn reply_header(&self) -> ConnectionHeader {
        ConnectionHeader::new()
            .with("callerid", self.node.as_str())
            .with("md5sum", self.md5sum.as_str())
            .with("request_type", format!("{}Request", self.service_type))
            .with("response_type", format!("{}Response", self.service_type))
            .with("service", self.service.as_str())
            .with("type", self.service_type.as_str())
    }
}

/// `1` or `true` in any case, as rospy reads `persistent` and `probe` (roscpp takes exactly
/// `1` and `true`; every client sends `1`).
fn is_true(value: &str) -> bool {
    value == "1" || value.eq_ignore_ascii_case("true")
}

/// The header a client sends to call `service`: `persistent` is sent either way, as roscpp
/// does.
pub fn call_header(
    caller_id: &str,
    service: &str,
    md5sum: &str,
    persistent: bool,
) -> ConnectionHeader {
    ConnectionHeader::new()
        .with("callerid", caller_id)
        .with("md5sum", md5sum)
        .with("persistent", if persistent { "1" } else { "0" })
        .with("service", service)
}

/// The header of a probe: it asks for the server's header (its type and md5sum) and calls
/// nothing.
pub fn probe_header(caller_id: &str, service: &str) -> ConnectionHeader {
    ConnectionHeader::new()
        .with("callerid", caller_id)
        .with("md5sum", "*")
        .with("probe", "1")
        .with("service", service)
}

/// Why a server's reply header is not one a call can go on with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyError {
    /// The server refused the connection; its `error` text.
    Refused(String),
    /// A required field is missing.
    Missing(&'static str),
}

impl std::fmt::Display for ReplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplyError::Refused(text) => write!(f, "the server refused the call: {text}"),
            ReplyError::Missing(field) => {
                write!(f, "the server's header has no {field} field")
            }
        }
    }
}

impl std::error::Error for ReplyError {}

/// Checks a server's reply header as rospy does: an `error` field refuses the call, and
/// `md5sum` and `type` must be there. As in both ROS clients, the server's md5sum is not
/// compared: the server compared ours.
pub fn check_reply(header: &ConnectionHeader) -> Result<(), ReplyError> {
    if let Some(text) = header.error() {
        return Err(ReplyError::Refused(text.to_string()));
    }
    for field in ["md5sum", "type"] {
        if header.get(field).is_none() {
            return Err(ReplyError::Missing(field));
        }
    }
    Ok(())
}

/// A response frame: `ok`, the length, then the response body (or, when the handler
/// failed, its error text).
pub fn response_frame(outcome: Result<&[u8], &str>) -> Vec<u8> {
    let (ok, body) = match outcome {
        Ok(body) => (1u8, body),
        Err(text) => (0u8, text.as_bytes()),
    };
    let mut out = Vec::with_capacity(5 + body.len());
    out.push(ok);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// What names a service connection in its keys' derivation.
pub fn service_context(service: &str) -> Vec<u8> {
    format!("rosrpc service {service}").into_bytes()
}

/// A response on a secure connection: one sealed record whose body is the `ok` byte, then
/// the response body (or the error text), so that neither can be changed on the way.
pub fn sealed_response(
    sealer: &mut crate::secure::stream::StreamSealer,
    outcome: Result<&[u8], &str>,
) -> Vec<u8> {
    let (ok, body) = match outcome {
        Ok(body) => (1u8, body),
        Err(text) => (0u8, text.as_bytes()),
    };
    let mut plain = Vec::with_capacity(1 + body.len());
    plain.push(ok);
    plain.extend_from_slice(body);
    let mut out = Vec::with_capacity(4 + plain.len() + crate::secure::stream::TAG_LEN);
    sealer.seal_into(&plain, &mut out);
    out
}

/// Why a response could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseError {
    /// It announced more than the limit.
    TooLarge(FrameTooLarge),
    /// On a secure connection, its record failed to open.
    Sealed(crate::secure::stream::StreamRefused),
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseError::TooLarge(e) => e.fmt(f),
            ResponseError::Sealed(e) => write!(f, "secure service connection: {e}"),
        }
    }
}

impl std::error::Error for ResponseError {}

/// What a server answered to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// The serialized response message.
    Ok(Bytes),
    /// The handler failed; its text (lossily decoded: it is the peer's word).
    Failed(String),
}

/// Splits a client's byte stream into response frames; bounded like [`FrameDecoder`].
#[derive(Debug)]
pub struct ResponseDecoder {
    frames: FrameDecoder,
    max_response: usize,
    /// On a secure connection: responses are sealed records ([`sealed_response`]).
    opener: Option<crate::secure::stream::StreamOpener>,
}

impl ResponseDecoder {
    /// A decoder that refuses responses longer than `max_response` bytes.
    pub fn new(max_response: usize) -> ResponseDecoder {
        ResponseDecoder {
            frames: FrameDecoder::new(max_response).reserve_whole_frames(),
            max_response,
            opener: None,
        }
    }

    /// Reads sealed responses from now on, opened with `opener`: the connection is
    /// secure (settled from the server's header).
    pub fn open_with(&mut self, opener: crate::secure::stream::StreamOpener) {
        self.opener = Some(opener);
        let record = self
            .max_response
            .saturating_add(1 + crate::secure::stream::TAG_LEN);
        self.frames.set_max_frame(record);
    }

    /// The decoder's buffer, to read the socket into (and to seed with bytes that came
    /// after the server's header).
    pub fn buffer_mut(&mut self) -> &mut bytes::BytesMut {
        self.frames.buffer_mut()
    }

    /// Bytes received but not yet returned as responses.
    pub fn buffered(&self) -> usize {
        self.frames.buffered()
    }

    /// The next complete response, `None` until one is complete.
    pub fn next_response(&mut self) -> Result<Option<Response>, ResponseError> {
        let response = |ok: Option<&u8>, body: Bytes| {
            if ok.is_some_and(|&ok| ok != 0) {
                Response::Ok(body)
            } else {
                Response::Failed(String::from_utf8_lossy(&body).into_owned())
            }
        };
        let Some(opener) = &mut self.opener else {
            return Ok(self
                .frames
                .next_frame_after(1)
                .map_err(ResponseError::TooLarge)?
                .map(|(ok, body)| response(ok.first(), body)));
        };
        let Some(record) = self.frames.next_frame().map_err(ResponseError::TooLarge)? else {
            return Ok(None);
        };
        let plain = Bytes::from(opener.open(&record).map_err(ResponseError::Sealed)?);
        let ok = plain.first().copied();
        Ok(Some(response(
            ok.as_ref(),
            plain.slice(plain.len().min(1)..),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> ServiceIdentity {
        ServiceIdentity {
            node: "/srv_node".into(),
            service: "/srv_node/set".into(),
            service_type: "std_srvs/SetBool".into(),
            md5sum: "09fb03525b03e7ea1fd3992bafd87e16".into(),
        }
    }

    #[test]
    fn a_client_header_is_accepted_and_answered_with_every_field_clients_read() {
        let hdr = call_header(
            "/c",
            "/srv_node/set",
            "09fb03525b03e7ea1fd3992bafd87e16",
            true,
        );
        let accepted = identity().accept(&hdr).unwrap();
        assert!(accepted.persistent && !accepted.probe);
        let reply = accepted.reply;
        assert_eq!(reply.get("type"), Some("std_srvs/SetBool"));
        assert_eq!(reply.get("request_type"), Some("std_srvs/SetBoolRequest"));
        assert_eq!(reply.get("response_type"), Some("std_srvs/SetBoolResponse"));
        assert_eq!(reply.get("service"), Some("/srv_node/set"));
        assert!(check_reply(&reply).is_ok());
        let probe = identity()
            .accept(&probe_header("/rosservice", "/srv_node/set"))
            .unwrap();
        assert!(probe.probe && !probe.persistent);
        // rospy's default proxy sends no `persistent` at all.
        let rospy = ConnectionHeader::new()
            .with("callerid", "/py")
            .with("md5sum", "09fb03525b03e7ea1fd3992bafd87e16")
            .with("service", "/srv_node/set");
        assert!(!identity().accept(&rospy).unwrap().persistent);
    }

    #[test]
    fn refusals_are_worded_as_roscpp_words_them() {
        let bad_md5 = call_header("/c", "/srv_node/set", "0123", false);
        assert_eq!(
            identity().accept(&bad_md5).unwrap_err(),
            "client wants service /srv_node/set to have md5sum 0123, but it has 09fb03525b03e7ea1fd3992bafd87e16. Dropping connection."
        );
        let missing = ConnectionHeader::new().with("service", "/srv_node/set");
        assert!(identity()
            .accept(&missing)
            .unwrap_err()
            .starts_with("bogus tcpros header"));
        let other = call_header("/c", "/elsewhere", "*", false);
        assert!(identity()
            .accept(&other)
            .unwrap_err()
            .contains("nonexistent service [/elsewhere]"));
        // A probe with a wrong md5 is refused too: validation comes first, as in both servers.
        let probe = probe_header("/c", "/srv_node/set").with("md5sum", "bad");
        assert!(identity().accept(&probe).is_err());
        let error = ConnectionHeader::new().with("error", "no");
        assert_eq!(check_reply(&error), Err(ReplyError::Refused("no".into())));
        let no_type = ConnectionHeader::new().with("md5sum", "*");
        assert_eq!(check_reply(&no_type), Err(ReplyError::Missing("type")));
    }

    #[test]
    fn response_frames_match_the_bytes_ros_servers_send() {
        // rospy's SetBool (true, "yes").
        let body = [1, 3, 0, 0, 0, b'y', b'e', b's'];
        assert_eq!(
            response_frame(Ok(&body)),
            [&[1, 8, 0, 0, 0][..], &body].concat()
        );
        assert_eq!(response_frame(Err("")), [0, 0, 0, 0, 0]);
        let mut decoder = ResponseDecoder::new(1 << 20);
        let stream = [
            response_frame(Ok(&body)),
            response_frame(Err("boom from roscpp")),
        ]
        .concat();
        // Byte by byte: a response is only returned whole.
        let mut got = Vec::new();
        for b in stream {
            decoder.buffer_mut().extend_from_slice(&[b]);
            while let Some(r) = decoder.next_response().unwrap() {
                got.push(r);
            }
        }
        assert_eq!(
            got,
            [
                Response::Ok(Bytes::copy_from_slice(&body)),
                Response::Failed("boom from roscpp".into())
            ]
        );
    }

    #[test]
    fn a_response_longer_than_the_limit_is_refused_before_it_arrives() {
        let mut decoder = ResponseDecoder::new(1000);
        decoder
            .buffer_mut()
            .extend_from_slice(&[1, 0xff, 0xff, 0xff, 0x7f]);
        let Err(ResponseError::TooLarge(err)) = decoder.next_response() else {
            panic!("a response over the limit was taken")
        };
        assert_eq!(err.len, 0x7fff_ffff);
        assert!(decoder.buffer_mut().capacity() < 1 << 20);
    }

    #[test]
    fn sealed_responses_open_to_their_outcome_and_a_changed_one_fails() {
        use crate::secure::stream::{StreamOpener, StreamSealer};
        use crate::secure::{Cipher, Mode};
        let key = [7u8; 32];
        let mut sealer = StreamSealer::new(&key, Cipher::Aes256Gcm, Mode::Encrypt);
        let mut decoder = ResponseDecoder::new(1024);
        decoder.open_with(StreamOpener::new(&key, Cipher::Aes256Gcm, Mode::Encrypt));
        let ok = sealed_response(&mut sealer, Ok(b"answer"));
        let failed = sealed_response(&mut sealer, Err("no such thing"));
        assert!(!ok.windows(6).any(|w| w == b"answer"), "encrypted");
        decoder.buffer_mut().extend_from_slice(&ok[..7]);
        assert_eq!(decoder.next_response(), Ok(None), "not whole yet");
        decoder.buffer_mut().extend_from_slice(&ok[7..]);
        decoder.buffer_mut().extend_from_slice(&failed);
        assert_eq!(
            decoder.next_response(),
            Ok(Some(Response::Ok(Bytes::from_static(b"answer"))))
        );
        assert_eq!(
            decoder.next_response(),
            Ok(Some(Response::Failed("no such thing".into())))
        );
        let mut changed = sealed_response(&mut sealer, Ok(b"x"));
        changed[4] ^= 1; // the ok byte, encrypted
        decoder.buffer_mut().extend_from_slice(&changed);
        assert!(matches!(
            decoder.next_response(),
            Err(ResponseError::Sealed(_))
        ));
        assert_ne!(service_context("/a"), service_context("/b"));
    }
}
