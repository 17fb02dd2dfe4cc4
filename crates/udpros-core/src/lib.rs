//! ROS1's wire protocols as pure code, with no I/O: the ROS1 binary serialization (a serde
//! format), connection headers, TCPROS frames, and UDPROS datagrams (fragmenter,
//! reassembler, pacer).
//!
//! Nothing here opens a socket, reads a clock or spawns a task: state machines take bytes
//! and the current `Instant` and return bytes, events and deadlines, so they are tested with
//! property tests, fuzzers and simulated time. The `udpros` node library drives them with
//! tokio and re-exports this crate as `udpros::wire`.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod action;
pub mod fixed_array;
pub mod freshness;
pub mod header;
pub mod host_budget;
pub mod link;
pub mod link_setup;
pub mod negotiation;
pub mod numeric_array;
pub mod ros1;
pub mod secure;
pub mod service;
pub mod tcpros;
pub mod topic;
pub mod udpros;
pub mod zero_copy;

pub use ros1::{from_bytes, from_slice, serialized_len, to_frame, to_vec, to_writer, Error};
