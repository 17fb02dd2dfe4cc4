//! A forwarded topic's publisher links, summed for the console's topic table.

use udpros::node::SentPath;
use udpros::transport::{Protocol, PublisherLinkStats};

/// A forwarded topic's publisher links, summed: what the console's topic table shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LinkSummary {
    /// `UDP`, `TCP`, `UDP+TCP` (publishers on both), or empty before any link is up.
    pub protocol: String,
    pub publishers: usize,
    pub delivered: u64,
    /// UDPROS messages lost (by message id); TCPROS loses none.
    pub lost: u64,
    /// Whether a UDPROS link has FEC, and the messages it rebuilt from repair.
    pub fec: bool,
    pub rebuilt: u64,
    /// What the publisher says of its link to the view (see [`SentPath`]).
    pub path: Option<SentPath>,
}

impl LinkSummary {
    /// The connected links of `links`, summed.
    pub(crate) fn of(links: &[PublisherLinkStats]) -> LinkSummary {
        let mut summary = LinkSummary::default();
        let (mut udp, mut tcp) = (false, false);
        for link in links.iter().filter(|l| l.connected) {
            summary.publishers += 1;
            summary.delivered += link.messages;
            match link.protocol {
                Some(Protocol::Udp) => {
                    udp = true;
                    summary.lost += link.udp.lost();
                    summary.fec |= link.udp.repairs + link.udp.checksums > 0;
                    summary.rebuilt += link.udp.rebuilt;
                }
                Some(Protocol::Tcp) => tcp = true,
                _ => {}
            }
        }
        summary.protocol = match (udp, tcp) {
            (true, true) => "UDP+TCP",
            (true, false) => "UDP",
            (false, true) => "TCP",
            (false, false) => "",
        }
        .into();
        summary
    }
}
