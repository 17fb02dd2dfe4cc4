//! What a publisher says of its link to one subscriber: the path as its governor sees it
//! and what the link dropped, written into `getBusInfo`'s text (where `rosnode info` and
//! `udpros node info` show it) and read back by the subscriber's side (`udpros topic
//! hz`/`bw`, the view's `/stats.json` and console), where the operator is.
//!
//! ROS has one way to ask a node about its links, `getBusInfo`, and its last field is free
//! text; the publisher's numbers travel there in a fixed shape that [`SentPath::parse`]
//! reads (a round trip is tested), so nothing but udpros's own text is ever parsed and a
//! roscpp publisher's text simply says nothing.

use super::Node;
use crate::transport::{Protocol, PublisherLinkStats, SubscriberLinkStats};
use crate::wire::udpros::governor::GovernorStats;
use crate::xmlrpc::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest [`Node::sent_path`] waits for a publisher's answer.
pub const SENT_PATH_TIMEOUT: Duration = Duration::from_secs(1);

/// A publisher's view of its link to this subscriber (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SentPath {
    /// The path's capacity as the link's governor estimates it, bits per second
    /// (governed links, once measured).
    pub capacity_bps: Option<f64>,
    /// The queueing delay the governor's last report showed (governed links).
    pub queue: Option<Duration>,
    /// The rate the governor paces the link at, bits per second (governed links).
    pub pacing_bps: Option<f64>,
    /// Messages the link dropped before their first byte: stale (they would have arrived
    /// older than the link's freshness bound) or pushed out of a full queue.
    pub dropped: u64,
}

/// A number the text may hold: finite and not negative.
fn number(text: &str) -> Option<f64> {
    text.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
}

impl SentPath {
    /// What `getBusInfo` adds to a publisher's link: the governor's view on governed
    /// links, the messages dropped on others that dropped any; empty otherwise.
    pub(crate) fn describe(link: &SubscriberLinkStats) -> String {
        if let Some(governor) = link.governor {
            return governed(governor);
        }
        match (link.drops, link.protocol) {
            (0, _) => String::new(),
            // A TCPROS link drops only what would arrive stale.
            (n, Protocol::Tcp) => format!("; {n} dropped stale"),
            (n, Protocol::Udp) => format!("; {n} dropped stale or queue full"),
        }
    }

    /// Reads what a udpros publisher wrote of a link at the end of its `getBusInfo` text;
    /// `None` if it says nothing of the path (a roscpp publisher, a link that dropped
    /// nothing and is not governed).
    pub fn parse(info: &str) -> Option<SentPath> {
        let mut path = SentPath::default();
        if let Some((_, governed)) = info.split_once("; governed: ") {
            for part in governed.split(", ") {
                let mut words = part.split_whitespace();
                match (words.next(), words.next(), words.next(), words.next()) {
                    (Some("capacity"), Some(x), Some("Mbit/s"), None) => {
                        path.capacity_bps = number(x).map(|x| x * 1e6)
                    }
                    (Some("queue"), Some(x), Some("ms"), None) => {
                        path.queue =
                            number(x).and_then(|ms| Duration::try_from_secs_f64(ms / 1e3).ok())
                    }
                    (Some("pacing"), Some(x), Some("Mbit/s"), None) => {
                        path.pacing_bps = number(x).map(|x| x * 1e6)
                    }
                    (Some(n), Some("stale"), Some("dropped"), None) => {
                        path.dropped = n.parse().unwrap_or(0)
                    }
                    _ => {}
                }
            }
            return Some(path);
        }
        let (_, dropped) = info.rsplit_once("; ")?;
        let (n, why) = dropped.split_once(' ')?;
        why.starts_with("dropped").then_some(())?;
        path.dropped = n.parse().ok()?;
        Some(path)
    }

    /// One line for a terminal: what is known, in the units `rostopic bw` users read.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = self.capacity_bps {
            parts.push(format!("capacity {:.2} Mbit/s", c * 1e-6));
        }
        if let Some(q) = self.queue {
            parts.push(format!("queue {:.1} ms", q.as_secs_f64() * 1e3));
        }
        if let Some(p) = self.pacing_bps {
            parts.push(format!("pacing {:.2} Mbit/s", p * 1e-6));
        }
        parts.push(format!("{} dropped", self.dropped));
        parts.join(", ")
    }
}

/// The governor's view of the path, as `getBusInfo` text.
fn governed(governor: GovernorStats) -> String {
    let capacity = governor
        .capacity
        .map_or("not measured yet".to_string(), |c| {
            format!("{:.2} Mbit/s", c * 8e-6)
        });
    format!(
        "; governed: capacity {capacity}, queue {:.1} ms, pacing {:.2} Mbit/s, {} reports, {} overuses, {} stale dropped",
        governor.queue.as_secs_f64() * 1e3,
        governor.rate * 8e-6,
        governor.reports,
        governor.overuses,
        governor.stale
    )
}

impl Node {
    /// What the publisher at `publisher_uri` says of its link to this node on `topic`
    /// (its `getBusInfo`, asked with a timeout of [`SENT_PATH_TIMEOUT`]): `None` if it did
    /// not answer, has no such link, or says nothing of its path (roscpp and rospy
    /// publishers, links that are not governed and dropped nothing).
    pub async fn sent_path(&self, publisher_uri: &str, topic: &str) -> Option<SentPath> {
        let topic = self.resolve_name(topic);
        let call = self
            .inner
            .client
            .call(publisher_uri, "getBusInfo", vec![self.name().into()]);
        let reply = tokio::time::timeout(SENT_PATH_TIMEOUT, call)
            .await
            .ok()?
            .ok()?;
        let rows = reply.as_array()?.get(2)?.as_array()?;
        rows.iter().filter_map(Value::as_array).find_map(|row| {
            let text = |i: usize| row.get(i).and_then(Value::as_str);
            let ours = text(1) == Some(self.name())
                && text(2) == Some("o")
                && text(4) == Some(topic.as_str());
            ours.then(|| text(6).and_then(SentPath::parse)).flatten()
        })
    }
}

/// The latest [`SentPath`] of each publisher of a subscription, asked in the background
/// (one round at a time, each answer within [`SENT_PATH_TIMEOUT`]) so that a publisher
/// slow to answer never holds up the caller: what `udpros topic hz` and the view show.
#[derive(Debug, Default)]
pub struct SentPaths {
    known: Arc<Mutex<HashMap<String, SentPath>>>,
    asking: Arc<AtomicBool>,
}

impl SentPaths {
    /// The known paths of the connected publishers among `links`, in their order.
    pub fn known(&self, links: &[PublisherLinkStats]) -> Vec<(String, SentPath)> {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        links
            .iter()
            .filter(|l| l.connected)
            .filter_map(|l| {
                Some((
                    l.publisher_uri.clone(),
                    known.get(&l.publisher_uri)?.clone(),
                ))
            })
            .collect()
    }

    /// Asks the connected publishers among `links` what they say of their links to `node`
    /// on `topic`, unless the last round is still under way; the answers replace the
    /// known paths when all are in.
    pub fn refresh(&self, node: &Node, topic: &str, links: &[PublisherLinkStats]) {
        if self.asking.swap(true, Ordering::AcqRel) {
            return;
        }
        let uris: Vec<String> = links
            .iter()
            .filter(|l| l.connected)
            .map(|l| l.publisher_uri.clone())
            .collect();
        let (node, topic) = (node.clone(), topic.to_string());
        let (known, asking) = (self.known.clone(), self.asking.clone());
        tokio::spawn(async move {
            let mut found = HashMap::new();
            for uri in uris {
                if let Some(path) = node.sent_path(&uri, &topic).await {
                    found.insert(uri, path);
                }
            }
            *known.lock().unwrap_or_else(|e| e.into_inner()) = found;
            asking.store(false, Ordering::Release);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(
        protocol: Protocol,
        drops: u64,
        governor: Option<GovernorStats>,
    ) -> SubscriberLinkStats {
        SubscriberLinkStats {
            caller_id: "/operator".into(),
            protocol,
            peer: "10.0.0.2:5000".parse().unwrap(),
            messages: 10,
            bytes: 1000,
            drops,
            fec: None,
            governor,
            subscriber_type: None,
            secure: None,
            max_datagram: None,
        }
    }

    #[test]
    fn what_is_written_is_read_back() {
        let governor = GovernorStats {
            capacity: Some(487_500.0),
            queue: Duration::from_micros(2_400),
            rate: 462_500.0,
            reports: 300,
            ignored: 1,
            overuses: 4,
            stale: 17,
            filler: 0,
        };
        let info = format!(
            "UDPROS connection on port 1 to [x on socket 2]; FEC adaptive{}",
            SentPath::describe(&link(Protocol::Udp, 17, Some(governor)))
        );
        assert_eq!(
            SentPath::parse(&info),
            Some(SentPath {
                capacity_bps: Some(3_900_000.0),
                queue: Some(Duration::from_micros(2_400)),
                pacing_bps: Some(3_700_000.0),
                dropped: 17,
            })
        );
        let unmeasured = GovernorStats {
            capacity: None,
            ..governor
        };
        let path = SentPath::parse(&SentPath::describe(&link(
            Protocol::Udp,
            0,
            Some(unmeasured),
        )));
        assert_eq!(path.and_then(|p| p.capacity_bps), None);
        for protocol in [Protocol::Tcp, Protocol::Udp] {
            let info = format!(
                "TCPROS connection{}",
                SentPath::describe(&link(protocol, 5, None))
            );
            assert_eq!(SentPath::parse(&info).map(|p| p.dropped), Some(5), "{info}");
            assert_eq!(SentPath::describe(&link(protocol, 0, None)), "");
        }
    }

    #[test]
    fn other_texts_say_nothing() {
        for info in [
            "",
            "TCPROS connection on port 5 to [127.0.0.1:4000 on socket 9]",
            "UDPROS connection on port 5 to [x on socket 2]; FEC adaptive: loss 1.0 %",
            "; governed",
            "; x dropped",
            "; 5 apples",
            "; governed: capacity NaN Mbit/s, queue -1 ms, pacing 1e999 Mbit/s, z stale dropped",
        ] {
            let path = SentPath::parse(info);
            assert!(
                path.as_ref()
                    .is_none_or(|p| p.queue.is_none() && p.dropped == 0),
                "{info}: {path:?}"
            );
        }
    }
}
