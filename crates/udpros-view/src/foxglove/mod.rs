//! The Foxglove WebSocket protocol (`foxglove.websocket.v1`, as its last published spec
//! describes it; the Foxglove SDK's servers call the same protocol `foxglove.sdk.v1`),
//! without I/O: what a server says in text (JSON) and binary frames, what a client asks,
//! and what a server owes each client.
//!
//! A web visualizer (Foxglove, Lichtblick, the console `udpros view` serves) learns the
//! graph's topics as *channels* (`advertise`: topic, `ros1` encoding, the type and its full
//! definition as the schema), subscribes to some of them, and receives each message as the
//! publisher serialized it, in a binary frame. Nothing is re-encoded: a ROS1 message's
//! bytes go to the browser as they came off the UDPROS link.
//!
//! - [`server`]: the server's messages, text and binary.
//! - [`client`]: a client's requests, parsed with bounds.
//! - [`Outbox`]: one client's send buffer, bounded in bytes, which keeps only the newest
//!   message of each subscription when the client falls behind.

pub mod client;
mod outbox;
pub mod server;

pub use outbox::{Outbox, OutboxStats, Outgoing, Overflow};

/// The WebSocket subprotocols a server of this protocol accepts: the spec's name, which
/// Foxglove's ROS1 bridge and most clients offer, and the Foxglove SDK's, which newer
/// clients offer (some only it).
pub const SUBPROTOCOLS: [&str; 2] = ["foxglove.websocket.v1", "foxglove.sdk.v1"];

/// The subprotocol to answer a client's `Sec-WebSocket-Protocol` offer (a comma-separated
/// list) with: the first of [`SUBPROTOCOLS`] it offers, `None` if it offers neither.
pub fn choose_subprotocol(offered: &str) -> Option<&'static str> {
    let offered: Vec<&str> = offered.split(',').map(str::trim).collect();
    SUBPROTOCOLS
        .into_iter()
        .find(|known| offered.contains(known))
}

/// A channel's id: one per topic the server advertises.
pub type ChannelId = u32;
/// A client's id for one of its subscriptions.
pub type SubscriptionId = u32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_subprotocol_is_accepted_and_the_spec_name_preferred() {
        assert_eq!(
            choose_subprotocol("foxglove.websocket.v1"),
            Some("foxglove.websocket.v1")
        );
        assert_eq!(
            choose_subprotocol("foxglove.sdk.v1"),
            Some("foxglove.sdk.v1")
        );
        assert_eq!(
            choose_subprotocol("foxglove.sdk.v1, foxglove.websocket.v1"),
            Some("foxglove.websocket.v1")
        );
        assert_eq!(choose_subprotocol("chat, superchat"), None);
        assert_eq!(choose_subprotocol(""), None);
    }
}
