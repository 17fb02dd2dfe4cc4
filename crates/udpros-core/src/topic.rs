//! The topic handshake as pure functions, the counterpart of [`crate::service`]: what a
//! subscriber sends, what a publisher accepts and answers (or refuses, worded as roscpp
//! words it, since rostopic and roscpp's logs show that text), and what a subscriber checks
//! in the publisher's answer. Both TCPROS and UDPROS links use them.
//!
//! [`TopicReceiver`] is the receive side of a subscriber's TCPROS link: the publisher's
//! header, then its message frames, from the bytes as they arrive.

use crate::header::{ConnectionHeader, HeaderLimits};
use crate::tcpros::{FrameDecoder, FrameTooLarge};
use crate::udpros::feedback::{FEEDBACK_FIELD, FEEDBACK_VERSION};
use bytes::Bytes;
use std::fmt;

/// The header field by which udpros peers know each other (roscpp and rospy ignore it):
/// a udpros publisher then heartbeats and says goodbye, and a udpros subscriber sizes its
/// receive buffer for whole messages and checks the connection id.
pub const UDPROS_PEER_FIELD: &str = "udpros";

/// One side of a topic: who it is and what it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicIdentity {
    /// This node's name (`callerid`).
    pub node: String,
    /// The resolved topic name.
    pub topic: String,
    /// `pkg/Msg`, or `*` for any.
    pub msg_type: String,
    /// The message md5sum, or `*` for any.
    pub md5sum: String,
    /// The full message definition (sent by publishers and TCPROS subscribers).
    pub definition: String,
}

impl TopicIdentity {
    /// A publisher's verdict on a subscriber's header: the reply header, or the refusal
    /// whose text goes in the `error` field before closing. A `*` md5sum on either side
    /// matches anything (rostopic's `AnyMsg`).
    pub fn accept_subscriber(
        &self,
        header: &ConnectionHeader,
        latching: bool,
    ) -> Result<ConnectionHeader, SubscriberRefusal> {
        let (Some(md5), Some(topic), Some(caller)) = (
            header.get("md5sum"),
            header.get("topic"),
            header.get("callerid"),
        ) else {
            return Err(SubscriberRefusal::Incomplete);
        };
        if md5 != "*" && self.md5sum != "*" && md5 != self.md5sum {
            return Err(SubscriberRefusal::WrongType {
                caller: caller.into(),
                topic: topic.into(),
                theirs: format!("{}/{md5}", header.get("type").unwrap_or("")),
                ours: format!("{}/{}", self.msg_type, self.md5sum),
            });
        }
        Ok(ConnectionHeader::new()
            .with("callerid", self.node.as_str())
            .with("latching", if latching { "1" } else { "0" })
            .with("md5sum", self.md5sum.as_str())
            .with("message_definition", self.definition.as_str())
            .with("topic", self.topic.as_str())
            .with("type", self.msg_type.as_str()))
    }

    /// The header a subscriber opens a TCPROS link with.
    pub fn tcp_subscriber_header(&self, tcp_nodelay: bool) -> ConnectionHeader {
        ConnectionHeader::new()
            .with("callerid", self.node.as_str())
            .with("md5sum", self.md5sum.as_str())
            .with("message_definition", self.definition.as_str())
            .with("tcp_nodelay", if tcp_nodelay { "1" } else { "0" })
            .with("topic", self.topic.as_str())
            .with("type", self.msg_type.as_str())
    }

    /// The header a subscriber puts in a UDPROS offer (it tells a udpros publisher that
    /// the subscriber is udpros too, and will report arrivals to its governor: see
    /// [`feedback`](crate::udpros::feedback)).
    pub fn udp_subscriber_header(&self) -> ConnectionHeader {
        ConnectionHeader::new()
            .with("callerid", self.node.as_str())
            .with("md5sum", self.md5sum.as_str())
            .with("topic", self.topic.as_str())
            .with("type", self.msg_type.as_str())
            .with(UDPROS_PEER_FIELD, "1")
            .with(FEEDBACK_FIELD, FEEDBACK_VERSION)
    }
}

/// Why a subscriber gives up on a publisher's answer header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublisherRefusal {
    /// The publisher sent an `error` field.
    Refused(String),
    /// The header lacks `md5sum` or `type`.
    Incomplete,
    /// The header could not be parsed.
    Malformed(String),
}

impl fmt::Display for PublisherRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PublisherRefusal::Refused(e) => write!(f, "publisher refused the connection: {e}"),
            PublisherRefusal::Incomplete => f.write_str("publisher header lacks md5sum or type"),
            PublisherRefusal::Malformed(e) => write!(f, "bad header from publisher: {e}"),
        }
    }
}

impl std::error::Error for PublisherRefusal {}

/// Why a publisher refuses a subscriber's header. Displayed as roscpp words it, since
/// rostopic and roscpp's logs show that text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscriberRefusal {
    /// The header lacks `md5sum`, `topic` or `callerid`.
    Incomplete,
    /// The subscriber wants another type (`type/md5sum` on each side).
    WrongType {
        /// The subscriber's `callerid`.
        caller: String,
        /// The topic it asked for.
        topic: String,
        /// Its `type/md5sum`.
        theirs: String,
        /// The publisher's `type/md5sum`.
        ours: String,
    },
}

impl fmt::Display for SubscriberRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubscriberRefusal::Incomplete => f.write_str(
                "Header from subscriber did not have the required elements: md5sum, topic, callerid",
            ),
            SubscriberRefusal::WrongType {
                caller,
                topic,
                theirs,
                ours,
            } => write!(
                f,
                "Client [{caller}] wants topic {topic} to have datatype/md5sum [{theirs}], but our version has [{ours}]. Dropping connection."
            ),
        }
    }
}

impl std::error::Error for SubscriberRefusal {}

/// A subscriber's check of a publisher's answer header (TCPROS or UDPROS): a refusal, or
/// a header without what every ROS publisher sends.
pub fn check_publisher(header: &ConnectionHeader) -> Result<(), PublisherRefusal> {
    if let Some(error) = header.error() {
        return Err(PublisherRefusal::Refused(error.to_string()));
    }
    if header.get("md5sum").is_none() || header.get("type").is_none() {
        return Err(PublisherRefusal::Incomplete);
    }
    Ok(())
}

/// What a subscriber's TCPROS link received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicEvent {
    /// The publisher's header, checked by [`check_publisher`]: the link is up.
    Connected(ConnectionHeader),
    /// One message body (without its length prefix).
    Message(Bytes),
}

/// Why a subscriber's TCPROS link ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicStreamError {
    /// The publisher's header was refused or unusable: trying again will not help.
    Publisher(PublisherRefusal),
    /// A frame announced more than the size limit.
    TooLarge(FrameTooLarge),
    /// On a secure link, a record failed to open: forged, changed or out of order.
    Sealed(crate::secure::stream::StreamRefused),
}

impl fmt::Display for TopicStreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopicStreamError::Publisher(refusal) => refusal.fmt(f),
            TopicStreamError::TooLarge(e) => write!(f, "publisher sent {e}"),
            TopicStreamError::Sealed(e) => write!(f, "secure TCPROS link: {e}"),
        }
    }
}

impl std::error::Error for TopicStreamError {}

/// The receive side of a subscriber's TCPROS link: the driver reads into
/// [`buffer_mut`](Self::buffer_mut) and then drains [`poll_event`](Self::poll_event)
/// until it returns `Ok(None)`; an `Err` ends the link.
#[derive(Debug)]
pub struct TopicReceiver {
    decoder: FrameDecoder,
    limits: HeaderLimits,
    max_message_size: usize,
    connected: bool,
    /// On a secure link, what opens the publisher's records after its header.
    opener: Option<crate::secure::stream::StreamOpener>,
}

impl TopicReceiver {
    /// A link that accepts a header within `limits` and messages of up to
    /// `max_message_size` bytes.
    pub fn new(limits: HeaderLimits, max_message_size: usize) -> TopicReceiver {
        TopicReceiver {
            // The header first, within its own limit.
            decoder: FrameDecoder::new(limits.max_total),
            limits,
            max_message_size,
            connected: false,
            opener: None,
        }
    }

    /// Opens every message after the header with `opener`: the link is secure (the
    /// driver settled it from the publisher's header, [`TopicEvent::Connected`]). A
    /// record that fails to open ends the stream ([`TopicStreamError::Sealed`]).
    pub fn open_with(&mut self, opener: crate::secure::stream::StreamOpener) {
        self.opener = Some(opener);
        let tag = crate::secure::stream::TAG_LEN;
        self.decoder
            .set_max_frame(self.max_message_size.saturating_add(tag));
    }

    /// Where the driver puts the bytes it reads.
    pub fn buffer_mut(&mut self) -> &mut bytes::BytesMut {
        self.decoder.buffer_mut()
    }

    /// The next header or message from the bytes read so far.
    pub fn poll_event(&mut self) -> Result<Option<TopicEvent>, TopicStreamError> {
        let Some(mut body) = self
            .decoder
            .next_frame_mut()
            .map_err(TopicStreamError::TooLarge)?
        else {
            return Ok(None);
        };
        if self.connected {
            if let Some(opener) = &mut self.opener {
                opener
                    .open_in_place(&mut body)
                    .map_err(TopicStreamError::Sealed)?;
            }
            return Ok(Some(TopicEvent::Message(body.freeze())));
        }
        let header = ConnectionHeader::decode_fields(&body, &self.limits)
            .map_err(|e| TopicStreamError::Publisher(PublisherRefusal::Malformed(e.to_string())))?;
        check_publisher(&header).map_err(TopicStreamError::Publisher)?;
        self.connected = true;
        self.decoder.set_max_frame(self.max_message_size);
        Ok(Some(TopicEvent::Connected(header)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcpros::frame;

    fn identity(md5sum: &str) -> TopicIdentity {
        TopicIdentity {
            node: "/talker".into(),
            topic: "/chatter".into(),
            msg_type: "std_msgs/String".into(),
            md5sum: md5sum.into(),
            definition: "string data\n".into(),
        }
    }

    #[test]
    fn a_publisher_accepts_matching_and_wildcard_subscribers_and_refuses_as_roscpp_does() {
        let publisher = identity("992ce8a1687cec8c8bd883ec73ca41d1");
        let subscriber = TopicIdentity {
            node: "/listener".into(),
            ..publisher.clone()
        };
        let reply = publisher
            .accept_subscriber(&subscriber.tcp_subscriber_header(true), true)
            .unwrap();
        assert_eq!(reply.get("latching"), Some("1"));
        assert_eq!(reply.get("callerid"), Some("/talker"));
        assert_eq!(check_publisher(&reply), Ok(()));
        let any = TopicIdentity {
            md5sum: "*".into(),
            ..subscriber.clone()
        };
        assert!(publisher
            .accept_subscriber(&any.udp_subscriber_header(), false)
            .is_ok());
        let other = TopicIdentity {
            md5sum: "0123".into(),
            msg_type: "std_msgs/Int32".into(),
            ..subscriber
        };
        let refusal = publisher
            .accept_subscriber(&other.tcp_subscriber_header(false), false)
            .unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "Client [/listener] wants topic /chatter to have datatype/md5sum [std_msgs/Int32/0123], but our version has [std_msgs/String/992ce8a1687cec8c8bd883ec73ca41d1]. Dropping connection."
        );
        let bare = ConnectionHeader::new().with("topic", "/chatter");
        let incomplete = publisher.accept_subscriber(&bare, false).unwrap_err();
        assert_eq!(incomplete, SubscriberRefusal::Incomplete);
        assert!(incomplete
            .to_string()
            .starts_with("Header from subscriber did not have the required elements"));
        assert_eq!(
            identity("*").udp_subscriber_header().get(UDPROS_PEER_FIELD),
            Some("1")
        );
    }

    #[test]
    fn a_tcpros_subscriber_reads_the_header_then_frames_and_ends_on_refusals() {
        let publisher = identity("abc");
        let reply = publisher
            .accept_subscriber(&identity("abc").tcp_subscriber_header(true), false)
            .unwrap();
        let mut rx = TopicReceiver::new(HeaderLimits::default(), 1 << 20);
        let mut bytes = reply.encode_tcp().to_vec();
        bytes.extend_from_slice(&frame(b"one"));
        bytes.extend_from_slice(&frame(b"two"));
        // Byte by byte: nothing depends on how reads cut the stream.
        let mut events = Vec::new();
        for b in bytes {
            rx.buffer_mut().extend_from_slice(&[b]);
            while let Some(event) = rx.poll_event().unwrap() {
                events.push(event);
            }
        }
        assert_eq!(events.len(), 3);
        assert!(matches!(&events[0], TopicEvent::Connected(h) if h.get("md5sum") == Some("abc")));
        assert_eq!(events[1], TopicEvent::Message(Bytes::from_static(b"one")));
        assert_eq!(events[2], TopicEvent::Message(Bytes::from_static(b"two")));
        // A message over the limit ends the link.
        rx.buffer_mut()
            .extend_from_slice(&((2u32 << 20).to_le_bytes()));
        assert!(matches!(
            rx.poll_event(),
            Err(TopicStreamError::TooLarge(_))
        ));

        let refused = ConnectionHeader::new().with("error", "no such topic");
        let mut rx = TopicReceiver::new(HeaderLimits::default(), 1 << 20);
        rx.buffer_mut().extend_from_slice(&refused.encode_tcp());
        let err = rx.poll_event().unwrap_err();
        assert_eq!(
            err.to_string(),
            "publisher refused the connection: no such topic"
        );
        let incomplete = ConnectionHeader::new().with("callerid", "/x");
        let mut rx = TopicReceiver::new(HeaderLimits::default(), 1 << 20);
        rx.buffer_mut().extend_from_slice(&incomplete.encode_tcp());
        assert_eq!(
            rx.poll_event(),
            Err(TopicStreamError::Publisher(PublisherRefusal::Incomplete))
        );
    }
}
