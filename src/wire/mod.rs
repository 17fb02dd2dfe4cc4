//! Wire formats, as pure code with no I/O: the ROS1 binary serialization (a serde format)
//! and, as the transports arrive, connection headers, TCPROS frames and UDPROS datagrams.

pub mod fixed_array;
pub mod header;
pub mod ros1;
pub mod tcpros;
pub mod udpros;
pub mod zero_copy;

pub use ros1::{from_bytes, from_slice, serialized_len, to_frame, to_vec, to_writer, Error};
