//! udpros: a ROS1 node library with UDPROS, byte-compatible with roscpp and rospy.
//!
//! Layers, bottom up: [`wire`] (formats and protocol state machines, no I/O), [`msg`]
//! (message types, generated in [`msgs`], and dynamic messages), [`codegen`] (the `.msg`
//! code generator, also for users' own messages).

pub mod api;
pub mod connections;
pub mod logging;
pub mod master;
pub mod msg;
pub mod names;
pub mod node;
pub mod param_yaml;
pub mod rosout;
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
