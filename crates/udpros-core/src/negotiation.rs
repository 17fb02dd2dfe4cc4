//! Transport negotiation, typed: the protocol lists of the slave API's `requestTopic`.
//!
//! A subscriber calls `requestTopic(caller_id, topic, protocols)` on a publisher, where
//! `protocols` lists what it offers, best first; the publisher answers with the one entry
//! it picked. On the XML-RPC wire each entry is an array whose first item names the
//! protocol and whose other items are positional:
//!
//! | entry | items after the name |
//! | --- | --- |
//! | TCPROS offer | none |
//! | TCPROS answer | host, port |
//! | UDPROS offer | connection header (base64), host, port the subscriber reads on, largest datagram |
//! | UDPROS6 offer (udpros) | as a UDPROS offer, for a host with no IPv4 address |
//! | UDPROS answer | host, port the publisher sends from, connection id, largest datagram, connection header (base64) |
//!
//! [`Offer`] and [`Answer`] hold those entries as types, and convert them to and from
//! [`Param`] lists (the node library maps a `Param` to an XML-RPC value one to one), so the
//! meaning of each position lives here, once, and both sides are tested without sockets.
//!
//! roscpp's UDPROS is IPv4 only, and a roscpp publisher offered UDPROS toward a host with no
//! IPv4 address does not refuse: it aborts (a failed assertion as the half-made transport
//! is destroyed). A subscriber whose host has no IPv4 address therefore names its offer
//! [`UDPROS6`], which roscpp and rospy skip as an unknown protocol, picking the TCPROS offer
//! after it, and which udpros publishers serve as UDPROS.

use crate::header::{ConnectionHeader, HeaderError, HeaderLimits};
use crate::topic::UDPROS_PEER_FIELD;
use crate::udpros::{HEADER_LEN, MAX_UDP_PAYLOAD, ROSCPP_MAX_DATAGRAM};
use bytes::Bytes;
use std::fmt;

/// One positional item of a protocol entry: an XML-RPC string, int or base64 value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    /// A string (protocol names, host names).
    Str(String),
    /// A 32-bit integer (ports, ids, sizes).
    Int(i32),
    /// Base64 data (connection headers).
    Bytes(Bytes),
    /// Any other XML-RPC value, which no entry of these protocols holds.
    Other,
}

/// The protocol name of TCPROS entries.
pub const TCPROS: &str = "TCPROS";
/// The protocol name of UDPROS entries.
pub const UDPROS: &str = "UDPROS";
/// The protocol name of a UDPROS offer toward a host with no IPv4 address, which only
/// udpros publishers take (see the [module docs](self)).
pub const UDPROS6: &str = "UDPROS6";

/// Why an entry could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NegotiationError {
    /// The entry's items do not have the protocol's shape.
    Malformed {
        /// The protocol the entry names.
        protocol: &'static str,
        /// What is wrong.
        why: String,
    },
    /// The connection header inside the entry does not decode.
    Header(HeaderError),
}

impl fmt::Display for NegotiationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NegotiationError::Malformed { protocol, why } => {
                write!(f, "malformed {protocol} entry: {why}")
            }
            NegotiationError::Header(e) => write!(f, "bad connection header in entry: {e}"),
        }
    }
}

impl std::error::Error for NegotiationError {}

/// A transport a subscriber offers.
#[derive(Debug, Clone, PartialEq)]
pub enum Offer {
    /// TCPROS: the publisher answers where to connect.
    Tcpros,
    /// UDPROS: where the subscriber reads datagrams, and its connection header.
    Udpros(UdprosOffer),
}

/// A subscriber's UDPROS offer.
#[derive(Debug, Clone, PartialEq)]
pub struct UdprosOffer {
    /// The subscriber's connection header (callerid, topic, type, md5sum; udpros peers add
    /// their marker field).
    pub header: ConnectionHeader,
    /// The host the publisher should send to.
    pub host: String,
    /// The port the subscriber reads on.
    pub port: u16,
    /// The largest datagram the subscriber asks for, UDPROS header included.
    pub max_datagram: usize,
    /// The host has no IPv4 address: offered as [`UDPROS6`], which roscpp cannot take.
    pub ipv6_only: bool,
}

/// The transport a publisher picked, and where it is.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// TCPROS: connect to `host:port` and exchange connection headers.
    Tcpros {
        /// The publisher's host.
        host: String,
        /// Its TCPROS port.
        port: u16,
    },
    /// UDPROS: the publisher already sends to the offered port.
    Udpros(UdprosAnswer),
}

/// A publisher's UDPROS answer.
#[derive(Debug, Clone, PartialEq)]
pub struct UdprosAnswer {
    /// The publisher's host.
    pub host: String,
    /// The port the publisher sends from (roscpp treats it as informational; udpros
    /// subscribers accept datagrams from udpros publishers only from it).
    pub port: u16,
    /// The link's connection id, which every datagram carries.
    pub connection_id: i32,
    /// The largest datagram the publisher will send, UDPROS header included.
    pub max_datagram: usize,
    /// The publisher's connection header (type, md5sum, latching; or `error`).
    pub header: ConnectionHeader,
}

/// The smallest datagram a publisher shrinks to so that its datagrams fit the route's MTU.
/// Below it the per-packet cost of many small datagrams outweighs what fitting saves
/// (measured toward roscpp at MTU 576: 3 of 20 100 kB messages arrived with 548-byte
/// datagrams, 14 of 20 with IP-fragmented 1500-byte ones).
pub const MIN_UNFRAGMENTED: usize = 1000;

/// What a publisher makes of a subscriber's UDPROS offer before it opens a socket: what
/// kind of peer it is, the largest datagram it may send, and the send buffer to ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPlan {
    /// The subscriber is udpros (its header carries [`UDPROS_PEER_FIELD`]).
    pub udpros_peer: bool,
    /// The largest datagram, UDPROS header included: what the subscriber asked for, and
    /// toward roscpp never more than [`ROSCPP_MAX_DATAGRAM`], since roscpp reads into a
    /// 1500-byte buffer whatever it asked for.
    pub max_datagram: usize,
    /// The send buffer to ask the kernel for: room for bursts of whole large messages
    /// toward udpros peers, less toward roscpp, whose pacing keeps bursts small.
    pub send_buffer: usize,
    /// The subscriber reports arrivals to the publisher's governor (a udpros subscriber
    /// that offered [`feedback`](crate::udpros::feedback)).
    pub feedback: bool,
}

impl UdpPlan {
    /// The plan for `offer`.
    pub fn for_offer(offer: &UdprosOffer) -> UdpPlan {
        let udpros_peer = offer.header.get(UDPROS_PEER_FIELD).is_some();
        let limit = if udpros_peer {
            MAX_UDP_PAYLOAD
        } else {
            ROSCPP_MAX_DATAGRAM
        };
        UdpPlan {
            udpros_peer,
            max_datagram: offer.max_datagram.min(limit),
            send_buffer: if udpros_peer { 4 << 20 } else { 1 << 20 },
            feedback: udpros_peer && crate::udpros::feedback::agreed(&offer.header),
        }
    }

    /// The datagram size on a route that carries `route_payload` bytes of UDP payload per
    /// packet (the MTU less the IP and UDP headers), if known. Datagrams that fit leave as
    /// one packet each: IP fragments of a larger one each take a packet's share of the
    /// subscriber's receive buffer, and one lost fragment loses the datagram. The answer
    /// says the size, and the subscriber reads blocks of it (roscpp reads any size). Routes
    /// below [`MIN_UNFRAGMENTED`] keep the planned size and IP fragments.
    pub fn datagram_for_route(&self, route_payload: Option<usize>) -> usize {
        route_payload
            .filter(|&fits| fits >= MIN_UNFRAGMENTED)
            .map_or(self.max_datagram, |fits| self.max_datagram.min(fits))
    }
}

/// Where a subscriber's UDPROS offer goes, as the route toward the publisher tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublisherRoute {
    /// The publisher is on this host: its address is a loopback one or one of this host's
    /// own, so its datagrams cross the loopback device.
    pub same_host: bool,
    /// The UDP payload one packet on the route carries (its MTU less the IP and UDP
    /// headers), when the kernel says.
    pub payload: Option<usize>,
}

/// The datagram size a subscriber asks a publisher for: the one its user `chosen`, else the
/// largest one packet carries toward a publisher on this host, else roscpp's 1500.
///
/// On this host a datagram is neither IP-fragmented nor lost to a radio nor paced, and
/// every datagram costs a read, a header and a reassembly step: 100 kB messages from a
/// udpros publisher came in 2 datagrams instead of 68, and the subscriber's CPU per message
/// fell from 124 to 84-89 µs (S3). Toward another host the size stays roscpp's default,
/// which a udpros publisher fits to its route and which keeps roscpp publishers, who send
/// whatever size is asked, from sending datagrams the network must fragment.
pub fn datagram_to_ask(chosen: Option<usize>, route: Option<PublisherRoute>) -> usize {
    match (chosen, route) {
        (Some(chosen), _) => chosen,
        (
            None,
            Some(PublisherRoute {
                same_host: true,
                payload,
            }),
        ) => payload
            .map_or(MAX_UDP_PAYLOAD, |fits| fits.min(MAX_UDP_PAYLOAD))
            .max(ROSCPP_MAX_DATAGRAM),
        (None, _) => ROSCPP_MAX_DATAGRAM,
    }
}

/// A publisher's `requestTopic` reply as the subscriber received it.
#[derive(Debug, Clone, PartialEq)]
pub enum TopicReply {
    /// Status 1 with the chosen entry's items (empty when the publisher chose nothing).
    Chosen(Vec<Param>),
    /// A status other than 1: `code` 0 means no offered transport would do.
    Refused {
        /// The status code.
        code: i32,
        /// The text that goes with it (or what was wrong with the reply's shape).
        message: String,
    },
}

/// What a subscriber does with a publisher's reply.
#[derive(Debug, Clone, PartialEq)]
pub enum SubscriberDecision {
    /// Connect over TCPROS.
    Tcp {
        /// The publisher's host.
        host: String,
        /// Its TCPROS port.
        port: u16,
    },
    /// Read the offered UDP socket: the publisher already sends to it.
    Udp(UdprosAnswer),
    /// Nothing to connect to until the master lists the publisher anew.
    GiveUp(GiveUpReason),
}

/// Why a subscriber gives up on a publisher's reply.
#[derive(Debug, Clone, PartialEq)]
pub enum GiveUpReason {
    /// The subscription allows only UDP and the publisher gave it no UDPROS link: it
    /// answered nothing, or status 0 with what it said (rospy has no UDPROS; a udpros
    /// publisher at its cap of links says so).
    NoUdpros(Option<String>),
    /// The publisher chose nothing that was offered.
    NoCommonTransport,
    /// The publisher refused the request.
    Refused(String),
    /// The chosen entry does not read.
    BadAnswer(NegotiationError),
    /// The publisher chose UDPROS, which was not offered.
    UdpNotOffered,
}

impl fmt::Display for GiveUpReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GiveUpReason::NoUdpros(None) => f.write_str(
                "the publisher does not support UDPROS, and this subscription allows only UDP",
            ),
            GiveUpReason::NoUdpros(Some(said)) => write!(
                f,
                "the publisher gave no UDPROS link ({said}), and this subscription allows only UDP"
            ),
            GiveUpReason::NoCommonTransport => f.write_str("no common transport"),
            GiveUpReason::Refused(why) => write!(f, "publisher refused: {why}"),
            GiveUpReason::BadAnswer(e) => write!(f, "publisher answered an unreadable entry: {e}"),
            GiveUpReason::UdpNotOffered => {
                f.write_str("publisher chose UDPROS, which was not offered")
            }
        }
    }
}

/// What a subscriber offered in one `requestTopic` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriberOffer {
    /// A UDPROS entry (with a socket waiting for the answer).
    pub udp: bool,
    /// The subscription allows UDP only (no TCPROS entry, ever).
    pub udp_only: bool,
}

impl SubscriberOffer {
    /// The subscriber's decision on `reply`.
    pub fn decide(&self, reply: TopicReply, limits: &HeaderLimits) -> SubscriberDecision {
        let chosen = match reply {
            TopicReply::Chosen(items) if !items.is_empty() => items,
            TopicReply::Chosen(_) if self.udp_only => {
                return SubscriberDecision::GiveUp(GiveUpReason::NoUdpros(None))
            }
            TopicReply::Refused { code: 0, message } if self.udp_only => {
                let said = Some(message).filter(|m| !m.trim().is_empty());
                return SubscriberDecision::GiveUp(GiveUpReason::NoUdpros(said));
            }
            TopicReply::Chosen(_) => {
                return SubscriberDecision::GiveUp(GiveUpReason::NoCommonTransport)
            }
            TopicReply::Refused { message, .. } => {
                return SubscriberDecision::GiveUp(GiveUpReason::Refused(message))
            }
        };
        match Answer::from_params(&chosen, limits) {
            Ok(Answer::Tcpros { host, port }) => SubscriberDecision::Tcp { host, port },
            Ok(Answer::Udpros(answer)) if self.udp => SubscriberDecision::Udp(answer),
            Ok(Answer::Udpros(_)) => SubscriberDecision::GiveUp(GiveUpReason::UdpNotOffered),
            Err(e) => SubscriberDecision::GiveUp(GiveUpReason::BadAnswer(e)),
        }
    }
}

/// The receive buffer a subscriber asks for on a UDPROS link: two of its largest messages,
/// within 1 to 4 MiB (the kernel may cap it lower: `net.core.rmem_max`).
pub fn subscriber_receive_buffer(max_message_size: usize) -> usize {
    max_message_size.saturating_mul(2).clamp(1 << 20, 4 << 20)
}

impl Offer {
    /// The entry as `requestTopic` carries it.
    pub fn to_params(&self) -> Vec<Param> {
        match self {
            Offer::Tcpros => vec![Param::Str(TCPROS.into())],
            Offer::Udpros(o) => vec![
                Param::Str(if o.ipv6_only { UDPROS6 } else { UDPROS }.into()),
                Param::Bytes(o.header.encode_fields().into()),
                Param::Str(o.host.clone()),
                Param::Int(i32::from(o.port)),
                Param::Int(clamp_i32(o.max_datagram)),
            ],
        }
    }

    /// Reads one offered entry; `Ok(None)` for a protocol this crate does not know, which a
    /// publisher skips. The header is decoded under `limits`.
    pub fn from_params(
        params: &[Param],
        limits: &HeaderLimits,
    ) -> Result<Option<Offer>, NegotiationError> {
        match params.first() {
            Some(Param::Str(name)) if name == TCPROS => Ok(Some(Offer::Tcpros)),
            Some(Param::Str(name)) if name == UDPROS || name == UDPROS6 => {
                let protocol = if name == UDPROS { UDPROS } else { UDPROS6 };
                let [_, Param::Bytes(header), Param::Str(host), Param::Int(port), Param::Int(max)] =
                    params
                else {
                    return malformed(protocol, "expected header, host, port, datagram size");
                };
                Ok(Some(Offer::Udpros(UdprosOffer {
                    header: ConnectionHeader::decode_fields(header, limits)
                        .map_err(NegotiationError::Header)?,
                    host: host.clone(),
                    port: port_of(protocol, *port)?,
                    max_datagram: datagram_size(protocol, *max)?,
                    ipv6_only: protocol == UDPROS6,
                })))
            }
            _ => Ok(None),
        }
    }
}

impl Answer {
    /// The entry as `requestTopic`'s answer carries it.
    pub fn to_params(&self) -> Vec<Param> {
        match self {
            Answer::Tcpros { host, port } => vec![
                Param::Str(TCPROS.into()),
                Param::Str(host.clone()),
                Param::Int(i32::from(*port)),
            ],
            Answer::Udpros(a) => vec![
                Param::Str(UDPROS.into()),
                Param::Str(a.host.clone()),
                Param::Int(i32::from(a.port)),
                Param::Int(a.connection_id),
                Param::Int(clamp_i32(a.max_datagram)),
                Param::Bytes(a.header.encode_fields().into()),
            ],
        }
    }

    /// Reads a publisher's answer. The header is decoded under `limits`.
    pub fn from_params(
        params: &[Param],
        limits: &HeaderLimits,
    ) -> Result<Answer, NegotiationError> {
        match params.first() {
            Some(Param::Str(name)) if name == TCPROS => {
                let [_, Param::Str(host), Param::Int(port), ..] = params else {
                    return malformed(TCPROS, "expected host and port");
                };
                Ok(Answer::Tcpros {
                    host: host.clone(),
                    port: port_of(TCPROS, *port)?,
                })
            }
            Some(Param::Str(name)) if name == UDPROS => {
                let [_, Param::Str(host), Param::Int(port), Param::Int(id), Param::Int(max), Param::Bytes(header), ..] =
                    params
                else {
                    return malformed(
                        UDPROS,
                        "expected host, port, connection id, datagram size, header",
                    );
                };
                Ok(Answer::Udpros(UdprosAnswer {
                    host: host.clone(),
                    // roscpp answers the port it sends from, which may be 0 before it sent.
                    port: u16::try_from(*port).unwrap_or(0),
                    connection_id: *id,
                    max_datagram: datagram_size(UDPROS, *max)?,
                    header: ConnectionHeader::decode_fields(header, limits)
                        .map_err(NegotiationError::Header)?,
                }))
            }
            Some(Param::Str(other)) => Err(NegotiationError::Malformed {
                protocol: "requestTopic",
                why: format!("unknown protocol {other:?}"),
            }),
            _ => malformed("requestTopic", "the answer names no protocol"),
        }
    }

    /// The protocol's name.
    pub fn protocol(&self) -> &'static str {
        match self {
            Answer::Tcpros { .. } => TCPROS,
            Answer::Udpros(_) => UDPROS,
        }
    }
}

fn malformed<T>(protocol: &'static str, why: &str) -> Result<T, NegotiationError> {
    Err(NegotiationError::Malformed {
        protocol,
        why: why.to_string(),
    })
}

fn port_of(protocol: &'static str, port: i32) -> Result<u16, NegotiationError> {
    u16::try_from(port).map_err(|_| NegotiationError::Malformed {
        protocol,
        why: format!("port {port} is out of range"),
    })
}

/// A datagram size from the wire: it must hold the UDPROS header and a byte of payload;
/// anything above the largest UDP payload is that payload.
fn datagram_size(protocol: &'static str, size: i32) -> Result<usize, NegotiationError> {
    match usize::try_from(size) {
        Ok(n) if n > HEADER_LEN => Ok(n.min(MAX_UDP_PAYLOAD)),
        _ => Err(NegotiationError::Malformed {
            protocol,
            why: format!("datagram size {size} cannot carry a fragment"),
        }),
    }
}

fn clamp_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_publisher_plans_datagrams_by_peer_and_route() {
        let offer = |udpros: bool, max_datagram| UdprosOffer {
            header: if udpros {
                ConnectionHeader::new().with(UDPROS_PEER_FIELD, "1")
            } else {
                ConnectionHeader::new()
            },
            host: "h".into(),
            port: 1,
            max_datagram,
            ipv6_only: false,
        };
        let roscpp = UdpPlan::for_offer(&offer(false, 65_000));
        assert_eq!(
            roscpp.max_datagram, ROSCPP_MAX_DATAGRAM,
            "roscpp reads 1500 bytes"
        );
        assert!(!roscpp.udpros_peer);
        let udpros = UdpPlan::for_offer(&offer(true, 65_000));
        assert!(udpros.udpros_peer && udpros.send_buffer > roscpp.send_buffer);
        assert_eq!(udpros.max_datagram, 65_000);
        assert_eq!(
            UdpPlan::for_offer(&offer(true, 1 << 20)).max_datagram,
            MAX_UDP_PAYLOAD
        );
        // Fitting the route: 1472 bytes of UDP payload at MTU 1500; not below 1000.
        assert_eq!(udpros.datagram_for_route(Some(1472)), 1472);
        assert_eq!(udpros.datagram_for_route(Some(548)), 65_000);
        assert_eq!(udpros.datagram_for_route(None), 65_000);
        assert_eq!(roscpp.datagram_for_route(Some(8972)), ROSCPP_MAX_DATAGRAM);
        assert_eq!(subscriber_receive_buffer(100), 1 << 20);
    }

    #[test]
    fn a_subscriber_asks_for_big_datagrams_only_on_this_host_unless_told() {
        let here = |payload| {
            Some(PublisherRoute {
                same_host: true,
                payload,
            })
        };
        let elsewhere = Some(PublisherRoute {
            same_host: false,
            payload: Some(8972),
        });
        // Loopback's MTU 65536 carries more than a UDP datagram can.
        assert_eq!(datagram_to_ask(None, here(Some(65_508))), MAX_UDP_PAYLOAD);
        assert_eq!(datagram_to_ask(None, here(None)), MAX_UDP_PAYLOAD);
        assert_eq!(datagram_to_ask(None, here(Some(16_356))), 16_356);
        // A loopback device set below Ethernet's MTU does not shrink the default.
        assert_eq!(datagram_to_ask(None, here(Some(548))), ROSCPP_MAX_DATAGRAM);
        // Another host (even over jumbo frames) or an unknown route: roscpp's size.
        assert_eq!(datagram_to_ask(None, elsewhere), ROSCPP_MAX_DATAGRAM);
        assert_eq!(datagram_to_ask(None, None), ROSCPP_MAX_DATAGRAM);
        // The user's choice wins everywhere.
        assert_eq!(datagram_to_ask(Some(576), here(Some(65_508))), 576);
        assert_eq!(datagram_to_ask(Some(8000), elsewhere), 8000);
    }

    #[test]
    fn a_subscriber_decides_on_the_reply_and_says_why_it_gives_up() {
        let limits = HeaderLimits::default();
        let both = SubscriberOffer {
            udp: true,
            udp_only: false,
        };
        let tcp_only = SubscriberOffer {
            udp: false,
            udp_only: false,
        };
        let udp_only = SubscriberOffer {
            udp: true,
            udp_only: true,
        };
        let tcp = Answer::Tcpros {
            host: "h".into(),
            port: 7,
        };
        let chosen = |a: &Answer| TopicReply::Chosen(a.to_params());
        assert_eq!(
            both.decide(chosen(&tcp), &limits),
            SubscriberDecision::Tcp {
                host: "h".into(),
                port: 7
            }
        );
        let udp = Answer::Udpros(UdprosAnswer {
            host: "h".into(),
            port: 9,
            connection_id: 3,
            max_datagram: 1500,
            header: ConnectionHeader::new().with("type", "t"),
        });
        assert!(
            matches!(both.decide(chosen(&udp), &limits), SubscriberDecision::Udp(a) if a.connection_id == 3)
        );
        let gave_up = |offer: SubscriberOffer, reply| match offer.decide(reply, &limits) {
            SubscriberDecision::GiveUp(why) => why,
            other => panic!("{other:?}"),
        };
        assert_eq!(gave_up(tcp_only, chosen(&udp)), GiveUpReason::UdpNotOffered);
        assert_eq!(
            gave_up(udp_only, TopicReply::Chosen(vec![])),
            GiveUpReason::NoUdpros(None)
        );
        let status_0 = TopicReply::Refused {
            code: 0,
            message: "no supported protocol implementations".into(),
        };
        assert_eq!(
            gave_up(udp_only, status_0.clone()).to_string(),
            "the publisher gave no UDPROS link (no supported protocol implementations), and this subscription allows only UDP"
        );
        assert_eq!(
            gave_up(both, status_0).to_string(),
            "publisher refused: no supported protocol implementations"
        );
        assert_eq!(
            gave_up(both, TopicReply::Chosen(vec![])),
            GiveUpReason::NoCommonTransport
        );
        let garbage = TopicReply::Chosen(vec![Param::Str(TCPROS.into()), Param::Int(1)]);
        assert!(matches!(gave_up(both, garbage), GiveUpReason::BadAnswer(_)));
        assert_eq!(subscriber_receive_buffer(usize::MAX), 4 << 20);
    }

    fn header() -> ConnectionHeader {
        ConnectionHeader::new()
            .with("callerid", "/listener")
            .with("topic", "/chatter")
            .with("md5sum", "992ce8a1687cec8c8bd883ec73ca41d1")
            .with("type", "std_msgs/String")
    }

    #[test]
    fn an_offer_toward_an_ipv6_only_host_is_named_so_roscpp_skips_it() {
        let mut offer = UdprosOffer {
            header: header(),
            host: "fd00::2".into(),
            port: 40000,
            max_datagram: 1500,
            ipv6_only: true,
        };
        let params = Offer::Udpros(offer.clone()).to_params();
        assert_eq!(params[0], Param::Str("UDPROS6".into()));
        offer.ipv6_only = false;
        let params = Offer::Udpros(offer).to_params();
        assert_eq!(params[0], Param::Str("UDPROS".into()));
    }

    #[test]
    fn offers_and_answers_round_trip_through_their_params() {
        let limits = HeaderLimits::default();
        let offers = [
            Offer::Tcpros,
            Offer::Udpros(UdprosOffer {
                header: header(),
                host: "robot".into(),
                port: 40000,
                max_datagram: 1500,
                ipv6_only: false,
            }),
            Offer::Udpros(UdprosOffer {
                header: header(),
                host: "fd00::2".into(),
                port: 40000,
                max_datagram: 1500,
                ipv6_only: true,
            }),
        ];
        for offer in offers {
            assert_eq!(
                Offer::from_params(&offer.to_params(), &limits),
                Ok(Some(offer))
            );
        }
        let answers = [
            Answer::Tcpros {
                host: "robot".into(),
                port: 11411,
            },
            Answer::Udpros(UdprosAnswer {
                host: "robot".into(),
                port: 40001,
                connection_id: -7,
                max_datagram: 1472,
                header: header().with("udpros", "1"),
            }),
        ];
        for answer in answers {
            assert_eq!(
                Answer::from_params(&answer.to_params(), &limits),
                Ok(answer)
            );
        }
    }

    #[test]
    fn positions_are_as_roscpp_writes_them() {
        let answer = Answer::Udpros(UdprosAnswer {
            host: "h".into(),
            port: 1,
            connection_id: 2,
            max_datagram: 1500,
            header: ConnectionHeader::new(),
        });
        assert_eq!(
            answer.to_params(),
            [
                Param::Str("UDPROS".into()),
                Param::Str("h".into()),
                Param::Int(1),
                Param::Int(2),
                Param::Int(1500),
                Param::Bytes(Bytes::new()),
            ]
        );
    }

    #[test]
    fn malformed_entries_are_errors_and_unknown_offers_are_skipped() {
        let limits = HeaderLimits::default();
        let s = |v: &str| Param::Str(v.into());
        assert_eq!(Offer::from_params(&[s("QUICROS")], &limits), Ok(None));
        assert_eq!(Offer::from_params(&[], &limits), Ok(None));
        let bad_offers = [
            vec![s("UDPROS")],
            vec![
                s("UDPROS"),
                Param::Bytes(Bytes::new()),
                s("h"),
                Param::Int(70000),
                Param::Int(1500),
            ],
            vec![
                s("UDPROS"),
                Param::Bytes(Bytes::new()),
                s("h"),
                Param::Int(1),
                Param::Int(8),
            ],
            vec![
                s("UDPROS"),
                Param::Bytes(Bytes::from_static(&[9, 0, 0, 0])),
                s("h"),
                Param::Int(1),
                Param::Int(1500),
            ],
        ];
        for params in bad_offers {
            assert!(Offer::from_params(&params, &limits).is_err(), "{params:?}");
        }
        let bad_answers = [
            vec![],
            vec![s("TCPROS"), s("h")],
            vec![s("TCPROS"), s("h"), Param::Int(-1)],
            vec![
                s("UDPROS"),
                s("h"),
                Param::Int(1),
                Param::Int(2),
                Param::Int(-5),
                Param::Bytes(Bytes::new()),
            ],
            vec![s("SCTPROS"), s("h"), Param::Int(1)],
        ];
        for params in bad_answers {
            assert!(Answer::from_params(&params, &limits).is_err(), "{params:?}");
        }
        let huge = [
            s("UDPROS"),
            s("h"),
            Param::Int(1),
            Param::Int(2),
            Param::Int(i32::MAX),
            Param::Bytes(Bytes::new()),
        ];
        let Ok(Answer::Udpros(a)) = Answer::from_params(&huge, &limits) else {
            panic!("a large size is capped, not refused");
        };
        assert_eq!(a.max_datagram, MAX_UDP_PAYLOAD);
    }
}
