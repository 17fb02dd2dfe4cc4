//! The operator's view of a ROS1 graph: a node that serves the Foxglove WebSocket protocol
//! (which Foxglove, Lichtblick and the console page speak) and forwards the graph's topics
//! to browsers as the publishers serialized them.
//!
//! ```text
//! publisher ──UDPROS──▶ udpros-view node ──WebSocket (ros1 bytes)──▶ browser
//! ```
//!
//! Every topic the master lists is advertised as a channel (`ros1` encoding, its type and
//! full definition as the schema); the node subscribes to a topic only while a client
//! wants it, and stops when the last one leaves. Each client has a bounded send buffer
//! that keeps the newest message of each subscription when the client falls behind
//! ([`crate::foxglove::Outbox`]); a client that sends garbage is closed, and the
//! others never notice.
//!
//! Beyond topics: parameters (get, set, watch), services (advertised with their
//! definitions, called with ROS1 bytes), the clock under sim time, and publishing by
//! clients on the topics the operator allows ([`ViewOptions::client_topics`]). The same
//! port serves the console page, which speaks the same protocol.
//!
//! Built on hyper (which the library already uses for XML-RPC) and tokio-tungstenite: the
//! handshake is a plain HTTP upgrade, and tungstenite reads and bounds what a client may
//! send (frame and message sizes) before any of it is parsed. The view writes its own
//! frames, so that a message leaves in one vectored write without being copied into a
//! frame buffer. A web framework would add a router for four routes.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod access;
mod client;
mod client_publish;
mod forward;
pub mod foxglove;
mod frame;
mod graph;
mod hub;
mod links;
mod params;
mod serve;
mod services;
mod table;
pub mod tls;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use udpros::node::Node;

/// The port Foxglove's bridges listen on, and the clients' default.
pub const DEFAULT_PORT: u16 = 8765;

/// How a view serves.
#[derive(Debug, Clone)]
pub struct ViewOptions {
    /// Where to listen; `None`: by the node's rule (loopback only when `ROS_IP` or
    /// `ROS_HOSTNAME` names loopback, else every address).
    pub address: Option<IpAddr>,
    /// The port (0: any free one).
    pub port: u16,
    /// WebSocket clients at once; more are refused with 503.
    pub max_clients: usize,
    /// Bytes one client's send buffer holds (see [`crate::foxglove::Outbox`]).
    pub send_limit: usize,
    /// How often the master is asked for the graph's topics.
    pub graph_poll: Duration,
    /// Topics clients may publish to (capability `clientPublish`); empty: none.
    pub client_topics: Vec<String>,
    /// The token a client presents (`?token=` in the URL, or `Authorization: Bearer`)
    /// to use the WebSocket or `/stats.json`; `None`: an open view, as Foxglove's bridge
    /// is. `udpros view` and the demo make a random one unless told otherwise. See
    /// [`access`].
    pub token: Option<String>,
    /// Serve over TLS with this configuration ([`tls::server_config`] makes one from the
    /// user's PEM certificate and key); `None`: plain HTTP and WebSocket.
    pub tls: Option<std::sync::Arc<rustls::ServerConfig>>,
}

impl Default for ViewOptions {
    fn default() -> Self {
        ViewOptions {
            address: None,
            port: DEFAULT_PORT,
            max_clients: 16,
            send_limit: 10 << 20,
            graph_poll: Duration::from_secs(1),
            client_topics: Vec::new(),
            token: None,
            tls: None,
        }
    }
}

/// A running view; dropping it stops the server and every subscription it made.
pub struct View {
    local_addr: SocketAddr,
    hub: Arc<hub::Hub>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl View {
    /// Starts serving on `node`'s graph.
    pub async fn start(node: Node, options: ViewOptions) -> std::io::Result<View> {
        let address = options.address.unwrap_or_else(|| {
            let overrides = udpros::host::HostOverrides::from_env();
            udpros::host::bind_address(&overrides)
        });
        let listener = tokio::net::TcpListener::bind((address, options.port)).await?;
        let local_addr = listener.local_addr()?;
        let hub = hub::Hub::new(node, options.clone());
        let tasks = vec![
            tokio::spawn(graph::track(hub.clone(), options.graph_poll)),
            tokio::spawn(graph::track_clock(hub.clone())),
            tokio::spawn(serve::accept(listener, hub.clone())),
        ];
        Ok(View {
            local_addr,
            hub,
            tasks,
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// WebSocket clients connected now.
    pub fn clients(&self) -> usize {
        self.hub.clients()
    }

    /// Bytes waiting in the clients' send buffers now.
    pub fn buffered_bytes(&self) -> usize {
        self.hub.buffered_bytes()
    }

    /// Topics the view subscribes to now (those some client wants).
    pub fn forwarded_topics(&self) -> Vec<String> {
        self.hub.forwarded_topics()
    }
}

impl Drop for View {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.hub.close();
    }
}
