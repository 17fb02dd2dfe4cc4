//! A publisher's answer to a subscriber's UDPROS offer: the subscriber checked against the
//! publication, its address resolved, a socket toward it, the terms both ends hold to
//! (datagram size, FEC, governor, pacing), a secure link settled when both hold the key,
//! and the link that sends. A udpros node answers requestTopic with it, and so does a
//! [`Guest`](crate::guest::Guest) inside rospy.

use super::publication::{Publication, SubscriberLink, UdpLinkError};
use super::subscription::LocalNode;
use crate::secure::SettleError;
use crate::socket::{route_mtu, udp_headers, udp_socket};
use crate::wire::link_setup::{PathFacts, SenderTerms};
use crate::wire::negotiation::{Answer, UdpPlan, UdprosAnswer, UdprosOffer};
use crate::wire::secure::handshake;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Opens the UDPROS link `offer` asks of `publication` for `caller_id`, and the answer that
/// tells the subscriber where its datagrams come from and on what terms.
pub(crate) async fn open_udp_link(
    local: &LocalNode,
    publication: &Arc<Publication>,
    caller_id: &str,
    offer: UdprosOffer,
) -> Result<(Answer, Arc<SubscriberLink>), UdpLinkError> {
    let mut reply = publication.accept(&offer.header)?;
    let plan = UdpPlan::for_offer(&offer);
    let peer = super::resolve_udp_peer(local.bind, &offer.host, offer.port, !plan.udpros_peer)
        .await
        .map_err(|error| UdpLinkError::Resolve {
            host: offer.host.clone(),
            error,
        })?;
    if local.bind.is_loopback() && !peer.ip().to_canonical().is_loopback() {
        return Err(UdpLinkError::OnlyLocal { host: offer.host });
    }
    // requestTopic checked the publication's cap and the descriptors already.
    publication.admit_host(peer.ip())?;
    let (socket, _) = udp_socket(SocketAddr::new(local.bind, 0), plan.send_buffer)?;
    socket.connect(peer)?;
    let route_mtu = route_mtu(&socket);
    let loopback = peer.ip().to_canonical().is_loopback();
    let path = PathFacts {
        route_payload: route_mtu.map(|mtu| mtu.saturating_sub(udp_headers(peer))),
        route_mtu,
        loopback,
    };
    let connection_id = local.link_ids.fetch_add(1, Ordering::Relaxed);
    let mut terms = SenderTerms::settle(
        &plan,
        &offer.header,
        path,
        &publication.fec(),
        publication.governor(),
        connection_id,
        publication.max_rate(),
    );
    // A secure link when the subscriber offered one and this node holds the same key;
    // under `require` a plain subscriber is refused here, told why.
    let context = handshake::link_context(&publication.info.topic, connection_id);
    let settling = local
        .security
        .settle_offer(&offer.header, &context)
        .map_err(|e| match e {
            SettleError::Refused(refused) => UdpLinkError::Secure(refused),
            SettleError::Random(e) => UdpLinkError::Random(e),
        })?;
    settling.add_fields(&mut reply);
    terms.secure = settling.link().cloned();
    if terms.fec.is_some() && !loopback {
        super::prepare_fec_code();
    }
    // Declared in the answer: roscpp treats this port as informational, udpros
    // subscribers accept datagrams only from it.
    let source_port = socket.local_addr()?.port();
    let max_datagram = terms.max_datagram;
    for (field, value) in terms.answer_fields() {
        reply.insert(field, value);
    }
    settling.sign(&mut reply);
    let link = publication.add_udp_link(socket, caller_id, terms)?;
    let answer = Answer::Udpros(UdprosAnswer {
        host: local.host.clone(),
        port: source_port,
        connection_id: connection_id as i32,
        max_datagram,
        header: reply,
    });
    Ok((answer, link))
}
