//! Bridges from devices onto ROS topics.

#[cfg(feature = "ping")]
pub mod ping;

#[cfg(feature = "mavlink")]
pub mod mavlink;
