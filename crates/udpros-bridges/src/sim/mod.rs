//! Simulated devices' surroundings: seeded network [faults], a [delay line](delay_line)
//! that releases items after their delays, and the UDP [fault proxy](proxy) built from them
//! (`udpros proxy`), with its [`transparent`] form for a router's path. The simulated sonars and autopilot live beside their bridges
//! ([`crate::ping::sim`], [`crate::mavlink::sim`]).

pub mod delay_line;
pub mod faults;
pub mod proxy;
#[cfg(target_os = "linux")]
pub mod transparent;

pub use delay_line::DelayLine;
pub use faults::{Fate, FaultModel, Faults};
pub use proxy::{Proxy, ProxyStats};
#[cfg(target_os = "linux")]
pub use transparent::{TransparentProxy, TransparentStats};
