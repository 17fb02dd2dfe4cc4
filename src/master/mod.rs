//! An embedded ROS master with rosmaster's semantics: registrations, node replacement,
//! publisherUpdate notifications, the parameter server with subscriptions, and rosmaster's
//! argument checks and status messages, so stock roscpp and rospy nodes and tools work
//! against it unchanged. [`Roscore`] adds what `roscore` adds: its parameters and the
//! `/rosout` node.

mod fanout;
mod handler;
mod notify;
mod ordered;
mod params;
mod registrations;
mod roscore;

pub use params::{compute_updates, Param, ParamTree, ParamUpdate};
pub use roscore::{Roscore, RoscoreOptions};

use crate::secure::Security;
use crate::xmlrpc::XmlRpcServer;
use handler::MasterHandler;
use std::net::SocketAddr;

/// A running master; dropping it stops it.
pub struct Master {
    server: XmlRpcServer,
    handler: std::sync::Arc<MasterHandler>,
    uri: String,
}

impl Master {
    /// Serves on `addr` (port 0 picks a free one), with security off. `host` is the name
    /// other nodes reach it by, written into its URI (`http://host:port/`).
    pub async fn start(addr: SocketAddr, host: &str) -> std::io::Result<Master> {
        Master::start_with(addr, host, &Security::default()).await
    }

    /// Serves as [`Master::start`] does, under `security`: with a key, every call must
    /// prove it (`require`: a registration, `setParam` or `shutdown` without proof is
    /// refused with a fault that says why) or is taken and its node named as
    /// unauthenticated (`prefer`, [`Master::unproven_nodes`]); the master's own calls to
    /// nodes (`publisherUpdate`, `paramUpdate`, `shutdown`) are signed.
    pub async fn start_with(
        addr: SocketAddr,
        host: &str,
        security: &Security,
    ) -> std::io::Result<Master> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let uri = format!(
            "http://{}/",
            crate::host::authority(host, listener.local_addr()?.port())
        );
        let handler = MasterHandler::new(uri.clone(), security);
        let server = XmlRpcServer::serve_guarded(
            listener,
            handler.clone(),
            Default::default(),
            crate::xmlrpc::CallGuard::new(security),
        )?;
        Ok(Master {
            server,
            handler,
            uri,
        })
    }

    /// The master's URI (`ROS_MASTER_URI` for its nodes).
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Nodes that registered something without proof of the graph key while the master
    /// checks proofs under `prefer`: stock ROS nodes and tools, or udpros without the key.
    pub fn unproven_nodes(&self) -> Vec<String> {
        self.handler.unproven_nodes()
    }

    /// The address its XML-RPC server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Completes when a client calls the master's `shutdown`, with the reason given.
    pub async fn shutdown_requested(&self) -> String {
        let mut requests = self.handler.shutdown_requests();
        loop {
            if let Some(reason) = requests.borrow_and_update().clone() {
                return reason;
            }
            if requests.changed().await.is_err() {
                return String::new();
            }
        }
    }
}
