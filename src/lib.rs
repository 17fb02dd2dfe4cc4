//! udpros: a ROS1 node library with UDPROS, byte-compatible with roscpp and rospy.
//!
//! A udpros node joins a stock ROS1 graph as an equal: it registers with `rosmaster` (or
//! the [embedded master](master)), publishes and subscribes over TCPROS and UDPROS, serves
//! the slave API that `rosnode` and `rostopic` call, reads parameters, and logs to
//! `/rosout`.
//!
//! # A first node
//!
//! Two dependencies: `udpros` and `tokio` (features `macros` and `rt`).
//!
//! ```no_run
//! use udpros::msgs::std_msgs;
//! use udpros::node::{AdvertiseOptions, Node, SubscribeOptions};
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     udpros::logging::init(); // stderr and /rosout
//!     // Name, master, host, remappings and _params from argv and the environment.
//!     let node = Node::from_env("echoer").await?;
//!     let mut heard = node
//!         .subscribe::<std_msgs::String>("chatter", SubscribeOptions::default())
//!         .await?;
//!     let echo = node
//!         .advertise::<std_msgs::String>("echo", AdvertiseOptions::default())
//!         .await?;
//!     loop {
//!         tokio::select! {
//!             Some(message) = heard.recv() => echo.publish(&message)?,
//!             _ = tokio::signal::ctrl_c() => break,
//!             reason = node.shutdown_requested() => {
//!                 udpros::tracing::info!("asked to shut down: {reason}");
//!                 break;
//!             }
//!         }
//!     }
//!     node.shutdown().await; // unregisters everything
//!     Ok(())
//! }
//! ```
//!
//! More in the repository's `examples/`: a talker and listener, a UDPROS-only listener, a
//! dynamic echo of any topic, parameters, and a package of custom messages.
//!
//! # The layers
//!
//! From the bottom up, each depending only on those below it (`.ci/check-layers` fails on
//! a module that names one of its own layer or above):
//!
//! - [`wire`] (the `udpros-core` crate): ROS1's formats and protocol state machines with no
//!   I/O: the serialization, connection headers, TCPROS frames, UDPROS fragmenter,
//!   reassembler and pacer, transport negotiation, link liveness and retry. Bytes and `now`
//!   in; bytes, events and deadlines out.
//! - [`codegen`] (the `udpros-codegen` crate): `.msg` parsing, md5sums and full definitions
//!   as genmsg computes them, Rust code generation for build scripts.
//! - [`host`], [`names`]: host names and addresses, ROS names and remappings.
//! - [`secure`]: secure links' settings: the graph key from its file, the policy, the
//!   mode (what they do on the wire is [`wire::secure`]'s).
//! - [`xmlrpc`], [`yaml`]: XML-RPC as the graph speaks it, and rosparam's YAML.
//! - [`msg`] and [`msgs`]: the [`Message`](msg::Message) and [`Service`](msg::Service)
//!   traits, ROS time, the shipped message types, and [dynamic messages](msg::dynamic)
//!   decoded from a definition learnt at run time.
//! - [`api`]: the master, parameter and slave APIs as typed calls.
//! - [`time`]: ROS time: the node's clock (wall, or sim time from `/clock` under
//!   `/use_sim_time`), sleeps that follow it, and [`Rate`](time::Rate).
//! - [`logging`]: logging to stderr, and to a sink that [`rosout`] registers into.
//! - [`transport`]: the tokio layer that drives the wire state machines over sockets: the
//!   TCPROS server and both kinds of endpoint it serves (topic links and services), UDPROS
//!   links.
//! - [`rosout`]: a node's `/rosout` publisher.
//! - [`node`]: the [`Node`](node::Node): names, parameters, publishers, subscribers and
//!   the services it advertises.
//! - [`service`] (clients and service types), [`action`], [`reconfigure`]: service
//!   clients, actionlib servers and clients, dynamic_reconfigure servers, on a node.
//! - [`master`]: an embedded master with rosmaster's semantics.
//!
//! # UDPROS and TCPROS
//!
//! TCPROS delivers every message, in order; when a link is slow, messages queue (up to
//! `queue_size`, then the oldest go). UDPROS cuts each message into datagrams: a lost
//! datagram loses its message, and nothing waits for it, so a late message never holds up
//! a newer one. For teleoperation and sensors, where fresh data matters more than complete
//! data, that is the better trade. roscpp, goroslib and iviz's roslib speak UDPROS; rospy
//! does not.
//!
//! A subscriber offers UDPROS first and TCPROS second by default
//! ([`SubscribeOptions::default`](node::SubscribeOptions)); a publisher takes the first
//! offer it can serve, so rospy publishers answer with TCPROS. A UDPROS link whose
//! messages never complete (a path that drops IP fragments) or whose udpros publisher goes
//! silent is renegotiated, and after three such links in a row the subscriber falls back
//! to TCPROS. `SubscribeOptions::udp_only()` and `tcp_only()` pin one transport.
//!
//! # Feature flags
//!
//! - `tracing-subscriber` (off): `rosout::layer()`, a `tracing-subscriber` layer for
//!   programs that build their own subscriber stack instead of calling
//!   [`logging::init`].
//!
//! The bridge nodes (Ping sonars, MAVLink) are the `udpros-bridges` crate; the `udpros`
//! command-line tool is `udpros-cli`.
//!
//! # Shutting down
//!
//! By default a node shuts down cleanly on SIGINT (Ctrl-C) and SIGTERM, as roscpp and rospy
//! nodes do, and so it does when the master or `rosnode kill` asks it to; programs that
//! handle signals themselves turn that off with
//! [`NodeOptions::handle_signals`](node::NodeOptions::handle_signals). Shutting down
//! unregisters every publication, subscription, service and parameter subscription, tells
//! udpros UDPROS peers the link closed, and stops serving; then every `recv()` returns
//! `None`, [`Node::ok`](node::Node::ok) is false, sleeps on the node's clock end with
//! [`ClockError::Shutdown`](time::ClockError::Shutdown), and
//! [`Node::shutdown_requested`](node::Node::shutdown_requested) and
//! [`Node::spin`](node::Node::spin) return, so a program written around any of them ends by
//! itself. [`Node::shutdown`](node::Node::shutdown) does the same from code. Dropping the
//! last handle of a node unregisters in the background, as far as a running tokio runtime
//! lets it. A process killed outright leaves its registrations with the master, as any ROS
//! node does, until `rosnode cleanup` or the next node of the same name.

#![warn(missing_docs, unreachable_pub)]

pub mod action;
pub mod api;
pub(crate) mod connections;
pub mod guest;
pub mod host;
pub mod logging;
pub mod master;
pub mod msg;
pub mod names;
pub mod node;
mod python;
pub mod reconfigure;
pub mod rosout;
pub mod secure;
pub mod service;
pub(crate) mod socket;
pub mod time;
pub mod transport;
pub mod xmlrpc;

/// ROS1 wire protocols without I/O: the [`udpros_core`] crate.
pub use udpros_core as wire;

/// `.msg` parsing, md5 sums as genmsg computes them, Rust code generation: the
/// [`udpros_codegen`] crate.
pub use udpros_codegen as codegen;
pub mod yaml;

/// The `tracing` crate, which udpros logs with and nodes log with: see [`logging`].
pub use tracing;

/// The message types udpros ships, generated from `msg/<package>/<Type>.msg`.
pub mod msgs {
    include!(concat!(env!("OUT_DIR"), "/msgs.rs"));
}

/// Re-exports used by generated code, so users need not depend on serde or bytes.
#[doc(hidden)]
pub mod __private {
    pub use bytes;
    pub use serde;
}
