//! MAVLink link timing: PING round trips and TIMESYNC clock offsets with an autopilot, as
//! pure state machines and estimators (PX4's filter and ours, side by side), a thin tokio
//! link (UDP, TCP, serial, as mavros opens them), a simulated autopilot, and the `mavlink_bridge` node.

pub mod clock;
pub mod estimator;
pub mod link;
pub mod messages;
pub mod node;
pub mod protocol;
mod publish;
pub mod reconfigure;
pub mod scenario;
pub mod session;
pub mod signing;
pub mod sim;
pub mod stream;
pub mod url;
