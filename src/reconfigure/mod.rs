//! dynamic_reconfigure: settings that `rqt_reconfigure`, `dynparam` and
//! `dynamic_reconfigure.client.Client` change while the node runs.
//!
//! A node describes its settings once ([`Description`]: each [`Param`]'s type, range,
//! default, level, text, enum choices, and the groups rqt draws), then starts a
//! [`ReconfigureServer`] with a callback. The server does what the C++ and Python servers
//! do, on the same names and wire (`<ns>/set_parameters`, the latched
//! `<ns>/parameter_descriptions` and `<ns>/parameter_updates`, `<ns>` being the node's
//! private namespace by default):
//!
//! - At start it takes the defaults, overrides each from the parameter server
//!   (`<ns>/<name>`), clamps, calls the callback with level `0xFFFFFFFF` (every level), and
//!   writes every value back to the parameter server.
//! - On a call it overlays the request by name (each value from the array of its own type;
//!   unknown names and values of the wrong type are ignored, as the C++ server ignores them,
//!   and group states are accepted, which the Python server cannot do), clamps numbers to
//!   their range (strings are never clamped), ORs the levels of the parameters that changed,
//!   and calls the callback with the new config and that level. The callback returns the
//!   config the node **applied**: a value it refused goes back to what it was. That config
//!   is stored, written to the parameter server, published on `parameter_updates`, and is
//!   the service's answer.
//! - Calls are applied one at a time.
//!
//! [`ConfigSpace`] is the part without I/O (overlaying, clamping, levels, the messages),
//! for tests and for other transports.

mod description;
mod server;
mod space;
mod value;

pub use description::{Choice, Description, DescriptionError, GroupId, GroupKind, Param};
pub use server::{ReconfigureError, ReconfigureServer};
pub use space::{Config, ConfigSpace};
pub use value::ParamValue;

use crate::msgs::dynamic_reconfigure as msg;
use crate::python::{float_repr, str_repr};
use crate::xmlrpc::Value;
use std::collections::HashMap;
use std::fmt;

/// The longest string a `str` setting takes, in bytes: a setting is a name, a frame or a
/// choice, and a client must not make every node hold (and mirror, and publish) megabytes.
pub const MAX_STR_LEN: usize = 4096;

/// A value that a request or the parameter server carried and that the setting did not
/// take; the setting keeps its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The setting's name.
    pub name: String,
    /// Why, in words: the value and what the setting takes.
    pub why: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name, self.why)
    }
}

/// What [`ConfigSpace::overlay`] did not take from a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overlay {
    /// Entries that named no setting of their type (ignored, as the C++ server does).
    pub ignored: usize,
    /// Values a setting cannot take ([`Param::admits`]).
    pub refused: Vec<Refusal>,
}

#[cfg(test)]
mod tests;
