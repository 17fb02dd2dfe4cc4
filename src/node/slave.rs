//! The slave API's view of a node ([`SlaveBackend`]): who it is, what it publishes and
//! subscribes, requestTopic's answers (TCPROS, or a UDPROS link planned by the core), and
//! the bus statistics and bus info that `rosnode info` reads.

use super::{Node, NodeInner, SentPath};
use crate::api::{SlaveBackend, StatusReply};
use crate::transport::subscription::LinkStatus;
use crate::transport::udp_answer::open_udp_link;
use crate::transport::{FecSendStats, LinkTotals, Protocol, SecureSendLink};
use crate::wire::header::HeaderLimits;
use crate::wire::negotiation::{Answer, Offer};
use crate::wire::secure::handshake;
use crate::wire::udpros::fec::{FEC_FIELD, FEC_VERSION};
use crate::xmlrpc::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

impl crate::transport::tcp_server::Endpoints for Weak<NodeInner> {
    fn publication(&self, topic: &str) -> Option<Arc<crate::transport::publication::Publication>> {
        self.upgrade()?.publication(topic)
    }

    fn service(
        &self,
        service: &str,
    ) -> Option<Arc<crate::transport::service_endpoint::ServicePublication>> {
        self.upgrade()?.service(service)
    }

    fn security(&self) -> crate::secure::Security {
        self.upgrade()
            .map(|node| node.security.clone())
            .unwrap_or_default()
    }
}

/// The slave API's view of a node; weak, so the server does not keep the node alive.
pub(super) struct Backend(pub(super) Weak<NodeInner>);

impl SlaveBackend for Backend {
    fn name(&self) -> String {
        self.0
            .upgrade()
            .map(|n| n.id.name.clone())
            .unwrap_or_default()
    }

    fn uri(&self) -> String {
        self.0
            .upgrade()
            .and_then(|n| n.uri.get().cloned())
            .unwrap_or_default()
    }

    fn master_uri(&self) -> String {
        self.0
            .upgrade()
            .map(|n| n.id.master_uri.clone())
            .unwrap_or_default()
    }

    fn publications(&self) -> Vec<(String, String)> {
        let Some(n) = self.0.upgrade() else {
            return Vec::new();
        };
        n.publication_list()
            .iter()
            .map(|p| (p.info.topic.clone(), p.info.msg_type.clone()))
            .collect()
    }

    fn subscriptions(&self) -> Vec<(String, String)> {
        let Some(n) = self.0.upgrade() else {
            return Vec::new();
        };
        n.subscription_list()
            .iter()
            .map(|s| (s.config.topic.clone(), s.config.msg_type.clone()))
            .collect()
    }

    fn bus_stats(&self) -> Value {
        self.0
            .upgrade()
            .map_or_else(|| Value::Array(vec![]), |n| n.bus_stats())
    }

    fn bus_info(&self) -> Value {
        self.0
            .upgrade()
            .map_or_else(|| Value::Array(vec![]), |n| n.bus_info())
    }

    fn publisher_update(&self, topic: &str, publishers: Vec<String>) -> bool {
        self.0
            .upgrade()
            .is_some_and(|n| n.publisher_update(topic, publishers))
    }

    fn param_update(&self, key: &str, value: Value) -> bool {
        self.0
            .upgrade()
            .is_some_and(|n| n.params.update(key, value))
    }

    fn request_topic(
        &self,
        caller_id: &str,
        topic: &str,
        protocols: Vec<Value>,
    ) -> Pin<Box<dyn Future<Output = StatusReply> + Send>> {
        let Some(node) = self.0.upgrade() else {
            let reply = StatusReply::new(
                -1,
                format!("Not a publisher of [{topic}]"),
                Value::Array(vec![]),
            );
            return Box::pin(async move { reply });
        };
        Box::pin(node.request_topic(caller_id.to_string(), topic.to_string(), protocols))
    }

    fn shutdown(&self, reason: &str) {
        if let Some(node) = self.0.upgrade() {
            tracing::info!("shutdown requested: {reason}");
            node.shutdown.send_replace(Some(reason.to_string()));
            tokio::spawn(async move { Node { inner: node }.shutdown().await });
        }
    }
}

/// What `getBusInfo` (and so `rosnode info`) adds to a publisher's UDPROS link with FEC.
fn fec_sent(fec: FecSendStats) -> String {
    let reported = fec
        .reported_loss
        .map_or("none yet".to_string(), |p| format!("{:.2} %", 100.0 * p));
    let mode = match fec.link.target {
        Some(target) => format!("adaptive, target {}", target.get()),
        None => format!("fixed, ratio {}", fec.link.floor.get()),
    };
    format!(
        "; FEC {mode}: loss reported {reported}, last message {} blocks + {} repair, {} repair datagrams sent",
        fec.last_blocks, fec.last_repairs, fec.repairs_sent
    )
}

/// What `getBusInfo` adds to a subscriber's UDPROS link with FEC.
fn fec_received(status: &LinkStatus) -> String {
    let on = status
        .header
        .as_ref()
        .is_some_and(|h| h.get(FEC_FIELD) == Some(FEC_VERSION));
    if status.protocol != Some(Protocol::Udp) || !on {
        return String::new();
    }
    let udp = &status.udp;
    format!(
        "; FEC: loss seen {:.2} %, {} repair datagrams, {} checksums, {} messages rebuilt, {} failed their checksum",
        udp.loss_ppm as f64 / 1e4,
        udp.repairs,
        udp.checksums,
        udp.rebuilt,
        udp.corrupt
    )
}

/// What `getBusInfo` adds to a publisher's secure link: its mode and cipher and, on
/// UDPROS, what it sealed and what it refused of the subscriber's reports. Never a key.
fn secure_sent(link: SecureSendLink) -> String {
    let SecureSendLink {
        mode,
        cipher,
        datagrams,
    } = link;
    let Some(sent) = datagrams else {
        return format!("; sealed ({mode}, {cipher})");
    };
    let reports = sent.reports;
    format!(
        "; sealed ({mode}, {cipher}): {} datagrams sealed, {} reports opened, {} refused ({} forged, {} replayed, {} too old, {} too short)",
        sent.sealed,
        reports.opened,
        reports.refused(),
        reports.bad_tag,
        reports.replayed,
        reports.too_old,
        reports.too_short
    )
}

/// What `getBusInfo` adds to a subscriber's secure link: its mode and cipher and, on
/// UDPROS, what it opened and refused (an attack on the link shows here, by kind; on
/// TCPROS a refused record ends the stream). Never a key.
fn secure_received(status: &LinkStatus) -> String {
    let said = |field| status.header.as_ref().and_then(|h| h.get(field));
    let Some(mode) = said(handshake::SECURE_FIELD) else {
        return String::new();
    };
    // An answer that names no cipher settled ChaCha20-Poly1305.
    let cipher = said(handshake::CIPHER_FIELD).unwrap_or("chacha20poly1305");
    let Some(stats) = status.secure else {
        return format!("; sealed ({mode}, {cipher})");
    };
    format!(
        "; sealed ({mode}, {cipher}): {} datagrams opened, {} refused ({} forged, {} replayed, {} too old, {} too short)",
        stats.opened,
        stats.refused(),
        stats.bad_tag,
        stats.replayed,
        stats.too_old,
        stats.too_short
    )
}

impl NodeInner {
    /// `[pubStats, subStats, serviceStats]` as rospy reports them.
    pub(crate) fn bus_stats(&self) -> Value {
        let publications = self.publication_list();
        let pubs = publications.iter().map(|p| {
            let conns = p.subscriber_links().into_iter().map(|l| {
                let LinkTotals {
                    bytes, messages, ..
                } = l.stats.totals();
                Value::Array(vec![
                    Value::Int(l.id as i32),
                    Value::Int(bytes as i32),
                    Value::Int(messages as i32),
                    Value::Bool(true),
                ])
            });
            Value::Array(vec![
                Value::from(p.info.topic.as_str()),
                Value::Int(p.messages_sent() as i32),
                Value::Array(conns.collect()),
            ])
        });
        let subscriptions = self.subscription_list();
        let subs = subscriptions.iter().map(|s| {
            let conns = s.publisher_links().into_iter().map(|l| {
                let LinkTotals {
                    bytes, messages, ..
                } = l.stats.totals();
                let status = l.status();
                Value::Array(vec![
                    Value::Int(l.id as i32),
                    Value::Int(bytes as i32),
                    Value::Int(messages as i32),
                    Value::Int(status.udp.lost() as i32),
                    Value::Bool(status.connected),
                ])
            });
            Value::Array(vec![
                Value::from(s.config.topic.as_str()),
                Value::Array(conns.collect()),
            ])
        });
        Value::Array(vec![
            Value::Array(pubs.collect()),
            Value::Array(subs.collect()),
            Value::Array(vec![]),
        ])
    }

    /// getBusInfo rows, in the form `rosnode info` parses.
    pub(crate) fn bus_info(&self) -> Value {
        let mut rows = Vec::new();
        for p in self.publication_list() {
            for l in p.subscriber_links() {
                rows.push(Value::Array(vec![
                    Value::Int(l.id as i32),
                    Value::from(l.caller_id.as_str()),
                    Value::from("o"),
                    Value::from(l.protocol.ros_name()),
                    Value::from(p.info.topic.as_str()),
                    Value::Bool(true),
                    Value::String(format!(
                        "{} connection on port {} to [{} on socket {}]{}",
                        l.protocol.ros_name(),
                        l.local_port,
                        l.peer,
                        l.id,
                        {
                            let snapshot = l.snapshot();
                            let fec = snapshot.fec.map(fec_sent).unwrap_or_default();
                            let secure = snapshot.secure.map(secure_sent).unwrap_or_default();
                            format!("{fec}{}{secure}", SentPath::describe(&snapshot))
                        }
                    )),
                ]));
            }
        }
        for s in self.subscription_list() {
            for l in s.publisher_links() {
                let status = l.status();
                let protocol = status.protocol.unwrap_or(Protocol::Tcp);
                let peer = status.peer.map(|p| p.to_string()).unwrap_or_default();
                rows.push(Value::Array(vec![
                    Value::Int(l.id as i32),
                    Value::from(l.uri.as_str()),
                    Value::from("i"),
                    Value::from(protocol.ros_name()),
                    Value::from(s.config.topic.as_str()),
                    Value::Bool(status.connected),
                    Value::String(format!(
                        "{} connection on port {} to [{peer} on socket {}]{}{}",
                        protocol.ros_name(),
                        status.local_port,
                        l.id,
                        fec_received(&status),
                        secure_received(&status)
                    )),
                ]));
            }
        }
        Value::Array(rows)
    }

    /// Answers requestTopic: the first offered protocol this node can serve.
    pub(crate) async fn request_topic(
        self: Arc<Self>,
        caller_id: String,
        topic: String,
        protocols: Vec<Value>,
    ) -> StatusReply {
        let Some(publication) = self.publication(&topic) else {
            return StatusReply::new(
                -1,
                format!("Not a publisher of [{topic}]"),
                Value::Array(vec![]),
            );
        };
        // Past the publication's cap no transport will do: say so rather than offer TCPROS.
        if let Err(refusal) = publication.admit_any() {
            tracing::warn!("requestTopic from {caller_id}: {refusal}");
            return StatusReply::new(0, refusal.to_string(), Value::Array(vec![]));
        }
        let mut udp_refused = None;
        for entry in &protocols {
            let Some(items) = entry.as_array() else {
                continue;
            };
            let offer = Offer::from_params(
                &crate::xmlrpc::entry_params(items),
                &HeaderLimits::default(),
            );
            match offer {
                // Under `require` the TCPROS handshake itself refuses a plain subscriber
                // (its header has no offer to settle), and says why.
                Ok(Some(Offer::Tcpros)) => {
                    let host = self.id.host.clone();
                    let port = self.tcp_port.get().copied().unwrap_or(0);
                    let answer = Answer::Tcpros {
                        host: host.clone(),
                        port,
                    };
                    let reply = crate::xmlrpc::entry(answer.to_params());
                    return StatusReply::ok(format!("ready on {host}:{port}"), reply);
                }
                Ok(Some(Offer::Udpros(offer))) => {
                    let local = self.local();
                    match open_udp_link(&local, &publication, &caller_id, offer).await {
                        Ok((answer, _)) => {
                            return StatusReply::ok("", crate::xmlrpc::entry(answer.to_params()))
                        }
                        // The next offer (TCPROS, usually) may still work: an IPv4-only node
                        // cannot send to an IPv6-only subscriber, but it can accept its TCP.
                        Err(e) => {
                            tracing::info!("UDPROS request for {topic} from {caller_id}: {e}");
                            udp_refused = Some(e);
                        }
                    }
                }
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!("requestTopic for {topic} from {caller_id}: {e}");
                    return StatusReply::new(0, e.to_string(), Value::Array(vec![]));
                }
            }
        }
        let why = udp_refused.map_or_else(
            || "no supported protocol implementations".into(),
            |e| e.to_string(),
        );
        StatusReply::new(0, why, Value::Array(vec![]))
    }
}
