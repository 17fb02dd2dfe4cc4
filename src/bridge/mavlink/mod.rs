//! MAVLink link timing: clock-offset estimation from TIMESYNC (PX4's filter and ours, side
//! by side), as pure code with a seeded scenario bench. The link, PING, the node and the
//! simulated autopilot build on these.

pub mod estimator;
pub mod protocol;
pub mod scenario;
