//! Simulated devices' surroundings: seeded network [faults], a [delay line](delay_line)
//! that releases items after their delays, and the UDP [fault proxy](proxy) built from them
//! (`udpros proxy`). The simulated sonars and autopilot live beside their bridges
//! ([`crate::ping::sim`], [`crate::mavlink::sim`]).

pub mod delay_line;
pub mod faults;
pub mod proxy;

pub use delay_line::DelayLine;
pub use faults::{Fate, FaultModel, Faults};
pub use proxy::{Proxy, ProxyStats};
