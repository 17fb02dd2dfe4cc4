//! A UDPROS link's setup at both ends, without I/O: what a publisher settles with a
//! subscriber's offer ([`SenderTerms::settle`]: the datagram size for the route, FEC, the
//! governor, the fields its answer adds) and the [`UdpSender`] it sends with, and what a
//! subscriber makes of the publisher's answer ([`receiver_config`]) for its
//! [`UdpReceiver`](crate::udpros::UdpReceiver). The library's drivers and the simulated
//! pair of the core's tests build their links with these, so what is simulated is what
//! runs.

use crate::header::ConnectionHeader;
use crate::link::AllowedSources;
use crate::negotiation::UdpPlan;
use crate::secure::datagram::OVERHEAD;
use crate::secure::LinkSecurity;
use crate::topic::UDPROS_PEER_FIELD;
use crate::udpros::fec::{block_payload, FecPolicy, LinkFec, FEC_FIELD, FEC_VERSION};
use crate::udpros::feedback::{self, FEEDBACK_FIELD, FEEDBACK_VERSION};
use crate::udpros::governor::GovernorConfig;
use crate::udpros::{
    FragmentError, Fragmenter, ReassemblerConfig, UdpReceiverConfig, UdpSender, UdpSenderConfig,
    GOVERNED_BURST, HEADER_LEN, ROSCPP_MAX_DATAGRAM,
};
use std::time::Instant;

/// What a publisher knows of the path to a subscriber when it settles a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathFacts {
    /// The largest UDP payload the route carries unfragmented (its MTU less the IP and UDP
    /// headers), if the kernel knows it.
    pub route_payload: Option<usize>,
    /// The route's MTU, if known.
    pub route_mtu: Option<usize>,
    /// The subscriber is on this host: no radio to measure, so no governor.
    pub loopback: bool,
}

/// What a publisher settled with one UDPROS subscriber.
#[derive(Debug, Clone, PartialEq)]
pub struct SenderTerms {
    /// The id every datagram carries.
    pub connection_id: u32,
    /// The largest datagram, header included.
    pub max_datagram: usize,
    /// The subscriber is udpros.
    pub udpros_peer: bool,
    /// The MTU of the route to it, if known.
    pub route_mtu: Option<usize>,
    /// The FEC both ends agreed on (`None` when they did not).
    pub fec: Option<LinkFec>,
    /// The governor's limits, when the subscriber sends feedback and the link is governed.
    pub governor: Option<GovernorConfig>,
    /// The user's cap on the link's rate (bytes per second).
    pub max_rate: Option<f64>,
    /// A secure link's mode and keys, when both ends settled on one
    /// ([`secure::handshake`](crate::secure::handshake)); [`SenderTerms::settle`] leaves
    /// it to the caller, which holds the key.
    pub secure: Option<LinkSecurity>,
}

/// The bytes of a datagram that carry UDPROS (header and payload): all of `max_datagram`,
/// less the seal on a secure link. Both ends cut blocks from this.
fn unsealed(max_datagram: usize, secure: bool) -> usize {
    match secure {
        true => max_datagram.saturating_sub(OVERHEAD),
        false => max_datagram,
    }
}

/// The largest datagram a link paced at `cap` bytes per second sends: a
/// [`GOVERNED_BURST`] at the cap, at least roscpp's 1500 bytes.
fn datagram_within_cap(cap: f64) -> usize {
    ((cap * GOVERNED_BURST.as_secs_f64()) as usize).max(ROSCPP_MAX_DATAGRAM)
}

impl SenderTerms {
    /// Settles a link with a subscriber whose offer made `plan` and whose connection
    /// header is `offer`: the datagram is the plan's, within what the route carries; FEC is
    /// granted to a udpros subscriber that asked, under the publication's `fec` policy; a
    /// link off this host whose subscriber reports arrivals is governed with `governor`
    /// (on loopback there is no radio to measure, and a busy machine's late reads would
    /// read as a queue). A link capped at `max_rate` sends datagrams of at most a
    /// [`GOVERNED_BURST`] at the cap (never below roscpp's 1500): its pacer lets a datagram
    /// go whole, and one of loopback's 64 kB would be 6 s of a 10 kB/s cap at once.
    pub fn settle(
        plan: &UdpPlan,
        offer: &ConnectionHeader,
        path: PathFacts,
        fec: &FecPolicy,
        governor: Option<GovernorConfig>,
        connection_id: u32,
        max_rate: Option<f64>,
    ) -> SenderTerms {
        let fitted = plan.datagram_for_route(path.route_payload);
        let max_datagram = max_rate.map_or(fitted, |cap| fitted.min(datagram_within_cap(cap)));
        let fec = plan
            .udpros_peer
            .then(|| fec.grant(offer, max_datagram))
            .flatten();
        let governor = governor.filter(|_| plan.feedback && !path.loopback);
        SenderTerms {
            connection_id,
            max_datagram,
            udpros_peer: plan.udpros_peer,
            route_mtu: path.route_mtu,
            fec,
            governor,
            max_rate,
            secure: None,
        }
    }

    /// The fields the publisher's answer adds to its connection header: that it is
    /// udpros, and what it confirmed (FEC, reading feedback).
    pub fn answer_fields(&self) -> Vec<(&'static str, &'static str)> {
        let mut fields = vec![(UDPROS_PEER_FIELD, "1")];
        if self.fec.is_some() {
            fields.push((FEC_FIELD, FEC_VERSION));
        }
        if self.governor.is_some() {
            fields.push((FEEDBACK_FIELD, FEEDBACK_VERSION));
        }
        fields
    }

    /// The link's sender, made at `now`. `segmenting`: the socket takes many datagrams per
    /// send (GSO); `loopback`: the subscriber is on this host. On an FEC link the data
    /// blocks are the code's shards ([`block_payload`]).
    pub fn sender(
        &self,
        now: Instant,
        segmenting: bool,
        loopback: bool,
    ) -> Result<UdpSender, FragmentError> {
        let carried = unsealed(self.max_datagram, self.secure.is_some());
        let data_datagram = HEADER_LEN + block_payload(carried, self.fec.is_some());
        let fragmenter = Fragmenter::new(self.connection_id, data_datagram)?;
        let config = UdpSenderConfig {
            udpros_peer: self.udpros_peer,
            route_mtu: self.route_mtu,
            segmenting,
            loopback,
            fec: self.fec,
            governor: self.governor,
            max_rate: self.max_rate,
            secure: self.secure.clone(),
        };
        Ok(UdpSender::new(now, fragmenter, config))
    }
}

/// How a subscriber receives a link the publisher answered: `publisher` is the
/// publisher's connection header, `max_datagram` and `connection_id` its answer's; `fec`,
/// the subscription's own policy (FEC holds when this end asked and the publisher
/// confirmed); `sources`, where its datagrams may come from; `secure`, what the
/// subscriber's [`accept`](crate::secure::handshake::accept) settled.
pub fn receiver_config(
    publisher: &ConnectionHeader,
    max_datagram: usize,
    connection_id: i32,
    fec: &FecPolicy,
    sources: AllowedSources,
    max_message_size: usize,
    secure: Option<LinkSecurity>,
) -> UdpReceiverConfig {
    let udpros_peer = publisher.get(UDPROS_PEER_FIELD).is_some();
    let shard = fec.agreed(publisher, max_datagram).filter(|_| udpros_peer);
    UdpReceiverConfig {
        reassembler: ReassemblerConfig {
            max_message_size,
            // roscpp's ids are opaque; a udpros publisher sends the id it returned.
            connection_id: udpros_peer.then_some(connection_id as u32),
            // The publisher cuts the stream at the size it answered.
            block_payload: Some(block_payload(
                unsealed(max_datagram, secure.is_some()),
                shard.is_some(),
            )),
            ..ReassemblerConfig::default()
        },
        sources,
        expects_heartbeats: udpros_peer,
        fec: shard.is_some(),
        // The publisher confirmed it reads the arrivals this end reports.
        feedback: udpros_peer && feedback::agreed(publisher),
        secure: secure.filter(|_| udpros_peer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiation::UdprosOffer;

    fn offer_header(fec: &FecPolicy, feedback: bool) -> ConnectionHeader {
        let mut header = fec.ask(ConnectionHeader::new());
        header.insert(UDPROS_PEER_FIELD, "1");
        if feedback {
            header.insert(FEEDBACK_FIELD, FEEDBACK_VERSION);
        }
        header
    }

    fn plan(header: &ConnectionHeader, max_datagram: usize) -> UdpPlan {
        UdpPlan::for_offer(&UdprosOffer {
            header: header.clone(),
            host: "10.0.0.1".into(),
            port: 4000,
            max_datagram,
            ipv6_only: false,
        })
    }

    fn sources() -> AllowedSources {
        AllowedSources::new(vec!["10.0.0.2".parse().unwrap()], Some(4000))
    }

    /// Carries what `sender` has to send into `receiver` (from the publisher's address),
    /// as the drivers would, pacing on the sender's clock from `at`; each datagram goes
    /// through `on_the_way` (its number and bytes) first. The datagrams carried and the
    /// time reached.
    fn carry(
        sender: &mut UdpSender,
        receiver: &mut crate::udpros::UdpReceiver,
        mut at: Instant,
        mut on_the_way: impl FnMut(usize, &mut Vec<u8>),
    ) -> (usize, Instant) {
        let from = "10.0.0.2:4000".parse().unwrap();
        let mut sent = 0;
        while sender.is_sending() && sent < 1000 {
            let Some(t) = sender.poll_transmit(at) else {
                // Paced: on at the sender's next instant, as its driver would.
                at = sender
                    .poll_timeout()
                    .expect("a sending link says when")
                    .max(at);
                if sender.wants_reports(at) {
                    sender.handle_reports(at, std::iter::empty());
                }
                continue;
            };
            let datagrams: Vec<Vec<u8>> = t
                .datagrams
                .chunks(t.segment_size)
                .map(<[u8]>::to_vec)
                .collect();
            sender.on_transmitted(at);
            for mut datagram in datagrams {
                on_the_way(sent, &mut datagram);
                receiver.handle(at, from, bytes::Bytes::from(datagram));
                sent += 1;
            }
        }
        (sent, at)
    }

    /// Both ends agree from each other's headers alone: the publisher's answer fields
    /// are what the subscriber's receiver reads, FEC and feedback included, and the
    /// sender's data blocks are the receiver's.
    #[test]
    fn a_udpros_pair_agrees_on_fec_feedback_and_block_size() {
        let policy = FecPolicy::default();
        let offer = offer_header(&policy, true);
        let path = PathFacts {
            route_payload: Some(1472),
            route_mtu: Some(1500),
            loopback: false,
        };
        let terms = SenderTerms::settle(
            &plan(&offer, 65_000),
            &offer,
            path,
            &policy,
            Some(GovernorConfig::default()),
            7,
            None,
        );
        assert_eq!(terms.max_datagram, 1472, "within the route");
        assert!(terms.fec.is_some() && terms.governor.is_some());
        let mut answer = ConnectionHeader::new();
        for (field, value) in terms.answer_fields() {
            answer.insert(field, value);
        }
        let config = receiver_config(
            &answer,
            terms.max_datagram,
            7,
            &policy,
            sources(),
            1 << 20,
            None,
        );
        assert!(config.fec && config.feedback && config.expects_heartbeats);
        assert_eq!(config.reassembler.connection_id, Some(7));
        // What one end sends, the other takes whole: 30 kB in datagrams of the settled size.
        let now = Instant::now();
        let mut sender = terms.sender(now, true, false).unwrap();
        let mut receiver = crate::udpros::UdpReceiver::new(now, config);
        let body: Vec<u8> = (0..30_000u32).map(|i| i as u8).collect();
        // A frame, as the link's queue holds it: the body after its length.
        let mut frame = (body.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(&body);
        let frame = bytes::Bytes::from(frame);
        assert_eq!(sender.push_queued(now, std::slice::from_ref(&frame)), Ok(1));
        let (sent, _) = carry(&mut sender, &mut receiver, now, |_, datagram| {
            assert!(datagram.len() <= terms.max_datagram);
        });
        assert!(sent > 20, "{sent} datagrams");
        let delivered = std::iter::from_fn(|| receiver.poll_event())
            .any(|event| matches!(event, crate::udpros::ReceiverEvent::Message(m) if m == body));
        assert!(delivered, "the message did not arrive whole");
    }

    /// Two udpros ends with the graph key: the handshake settles the same keys at both
    /// ends, every datagram leaves sealed within the settled size, a datagram changed on
    /// the way is refused and FEC rebuilds the message without it, and one forged
    /// outright is refused and counted.
    #[test]
    fn a_secure_pair_seals_every_datagram_and_fec_rebuilds_around_a_forged_one() {
        use crate::secure::handshake::{self, Settled, Side};
        use crate::secure::proof::{self, Role};
        use crate::secure::{Cipher, GraphKey, Mode, Policy};
        let key = GraphKey::from_bytes([42; 32]);
        let side = Side {
            policy: Policy::Require,
            key: Some(&key),
            mode: Mode::Encrypt,
            cipher: Cipher::of_this_host(),
        };
        let policy = FecPolicy::default();
        let mut offer = offer_header(&policy, false);
        let sub_nonce = [1; 16];
        for (field, value) in handshake::offer_fields(side, &sub_nonce) {
            offer.insert(field, value);
        }
        proof::sign(&key, Role::Subscriber, &mut offer, None);
        let path = PathFacts {
            route_payload: Some(1472),
            route_mtu: Some(1500),
            loopback: false,
        };
        let mut terms =
            SenderTerms::settle(&plan(&offer, 65_000), &offer, path, &policy, None, 7, None);
        let pub_nonce = [2; 16];
        let (settled, peer) = handshake::settle(side, &offer, b"/t 7", &pub_nonce).unwrap();
        let Settled::Secure(link) = settled else {
            panic!("plain")
        };
        terms.secure = Some(link.clone());
        let mut answer = ConnectionHeader::new();
        for (field, value) in terms.answer_fields() {
            answer.insert(field, value);
        }
        for (field, value) in handshake::answer_fields(&key, &link, &pub_nonce) {
            answer.insert(field, value);
        }
        proof::sign(&key, Role::Publisher, &mut answer, peer.as_ref());
        let accepted = handshake::accept(side, &sub_nonce, &answer, b"/t 7").unwrap();
        assert_eq!(
            accepted,
            Settled::Secure(link.clone()),
            "the same keys at both ends"
        );
        let config = receiver_config(
            &answer,
            terms.max_datagram,
            7,
            &policy,
            sources(),
            1 << 20,
            Some(link),
        );
        let now = Instant::now();
        let mut sender = terms.sender(now, true, false).unwrap();
        let mut receiver = crate::udpros::UdpReceiver::new(now, config);
        let body: Vec<u8> = (0..30_000u32).map(|i| (i * 7) as u8).collect();
        let mut frame = (body.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(&body);
        let frame = bytes::Bytes::from(frame);
        // Three messages: enough datagrams for the receiver to report the link's loss.
        let (mut sent, mut at) = (0, now);
        for _ in 0..3 {
            assert_eq!(sender.push_queued(at, std::slice::from_ref(&frame)), Ok(1));
            let (carried, reached) = carry(&mut sender, &mut receiver, at, |n, datagram| {
                assert!(datagram.len() <= terms.max_datagram, "{}", datagram.len());
                // Nothing of the body is readable on the wire.
                assert!(!datagram
                    .windows(16)
                    .any(|w| body.windows(16).next() == Some(w)));
                if sent + n == 3 {
                    let last = datagram.len() - 1;
                    datagram[last] ^= 1; // changed on the way: an erasure
                }
            });
            sent += carried;
            at = reached;
        }
        let from = "10.0.0.2:4000".parse().unwrap();
        // A datagram forged with the link's header and no seal.
        let mut forged = crate::udpros::DatagramHeader {
            connection_id: 7,
            opcode: crate::udpros::Opcode::Data0,
            message_id: 9,
            block: 1,
        }
        .encode()
        .to_vec();
        // A counter ahead of all sent, so that the window lets it through to its tag.
        forged.extend_from_slice(&[0x7f; 8]);
        forged.extend_from_slice(&[0u8; 64]);
        receiver.handle(at, from, bytes::Bytes::from(forged));
        let delivered: Vec<_> = std::iter::from_fn(|| receiver.poll_event()).collect();
        let whole = delivered
            .iter()
            .filter(|e| matches!(e, crate::udpros::ReceiverEvent::Message(m) if *m == body));
        assert_eq!(
            whole.count(),
            3,
            "not every message arrived whole: {delivered:?}"
        );
        assert_eq!(delivered.len(), 3, "{delivered:?}");
        let refused = receiver.secure_stats().unwrap();
        assert_eq!((refused.bad_tag, refused.opened), (2, sent as u64 - 1));
        assert!(
            receiver.stats().rebuilt >= 1,
            "FEC rebuilt what the tag refused"
        );
        // The receiver's loss report goes back sealed, and the sender opens it; the same
        // bytes again are a replay.
        let later = at + std::time::Duration::from_secs(1);
        let report = receiver.poll_transmit(later).expect("a loss report is due");
        assert!(sender.handle_report(later, &report));
        assert!(!sender.handle_report(later, &report));
        let stats = sender.secure_stats().unwrap();
        assert_eq!((stats.reports.opened, stats.reports.replayed), (1, 1));
        assert!(stats.sealed >= sent as u64, "{stats:?}");
    }

    /// Toward roscpp (no udpros field) nothing is granted; a loopback subscriber is not
    /// governed; a subscriber that did not ask for FEC gets none.
    #[test]
    fn roscpp_loopback_and_plain_subscribers_get_plain_links() {
        let policy = FecPolicy::default();
        let loopback = PathFacts {
            route_payload: None,
            route_mtu: None,
            loopback: true,
        };
        let roscpp = ConnectionHeader::new();
        let terms = SenderTerms::settle(
            &plan(&roscpp, 1500),
            &roscpp,
            loopback,
            &policy,
            Some(GovernorConfig::default()),
            1,
            None,
        );
        assert!(!terms.udpros_peer && terms.fec.is_none() && terms.governor.is_none());
        let udpros = offer_header(&policy, true);
        let terms = SenderTerms::settle(
            &plan(&udpros, 65_000),
            &udpros,
            loopback,
            &policy,
            Some(GovernorConfig::default()),
            2,
            None,
        );
        assert!(terms.governor.is_none(), "no radio on loopback");
        assert!(terms.fec.is_some());
        assert_eq!(terms.max_datagram, 65_000);
        // A capped link's datagrams are a 2 ms burst at the cap, not below 1500.
        let capped = |cap| {
            SenderTerms::settle(
                &plan(&udpros, 65_000),
                &udpros,
                loopback,
                &policy,
                None,
                2,
                Some(cap),
            )
            .max_datagram
        };
        assert_eq!(capped(10_000.0), 1500);
        assert_eq!(capped(10_000_000.0), 20_000);
        assert_eq!(capped(1e12), 65_000);
        assert_eq!(capped(f64::NAN), 1500);
        let plain = offer_header(&FecPolicy::Off, false);
        let terms = SenderTerms::settle(
            &plan(&plain, 65_000),
            &plain,
            loopback,
            &policy,
            None,
            3,
            None,
        );
        assert_eq!(terms.fec, None);
        // A roscpp publisher's answer: no heartbeats expected, its ids not checked.
        let config = receiver_config(&roscpp, 1500, 99, &policy, sources(), 1 << 20, None);
        assert!(!config.expects_heartbeats && !config.fec && !config.feedback);
        assert_eq!(config.reassembler.connection_id, None);
    }

    /// A datagram too small for a header is refused, not a panic.
    #[test]
    fn an_impossible_datagram_size_is_an_error() {
        let terms = SenderTerms {
            connection_id: 1,
            max_datagram: 3,
            udpros_peer: true,
            route_mtu: None,
            fec: None,
            governor: None,
            max_rate: None,
            secure: None,
        };
        assert!(terms.sender(Instant::now(), false, false).is_err());
    }
}
