//! Bridges from devices onto ROS topics.

#[cfg(feature = "ping")]
pub mod ping;
