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
    /// Serves on `addr` (port 0 picks a free one). `host` is the name other nodes reach it
    /// by, written into its URI (`http://host:port/`).
    pub async fn start(addr: SocketAddr, host: &str) -> std::io::Result<Master> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let uri = format!(
            "http://{}/",
            crate::host::authority(host, listener.local_addr()?.port())
        );
        let handler = MasterHandler::new(uri.clone());
        let server = XmlRpcServer::serve(listener, handler.clone())?;
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
