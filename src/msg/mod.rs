//! The message layer: the [`Message`] trait of generated types, ROS time types, the table of
//! the message types udpros ships, and dynamic (untyped) messages.

pub mod dynamic;
mod time;

pub use time::{Duration, Time};

use serde::{de::DeserializeOwned, Serialize};

/// A service type: what its request and response are, and the md5sum both sides compare.
/// Generated from `.srv` files; a marker type, never instantiated for a call.
pub trait Service: Send + Sync + 'static {
    /// The message a client sends.
    type Request: Message;
    /// The message a server answers with.
    type Response: Message;
    /// `pkg/Srv`.
    const TYPE: &'static str;
    /// The service md5sum: the md5 of the request's md5 text followed by the response's,
    /// as genmsg computes it (neither message's own md5sum).
    const MD5SUM: &'static str;
    /// The `.srv` text.
    const TEXT: &'static str;
}

/// A ROS message type: a serde value plus what the connection header says about it.
pub trait Message:
    Serialize + DeserializeOwned + Clone + Default + std::fmt::Debug + Send + Sync + 'static
{
    /// `package/Type`.
    const TYPE: &'static str;
    /// The md5sum peers compare during the handshake.
    const MD5SUM: &'static str;
    /// The full definition, as sent in the `message_definition` header field.
    const DEFINITION: &'static str;
    /// This type's own `.msg` text.
    const TEXT: &'static str;
    /// True when the first field is `Header header`.
    const HAS_HEADER: bool;
}

/// What is known of a message type without its Rust type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageInfo {
    /// `pkg/Type`.
    pub type_name: &'static str,
    /// The md5sum as genmsg computes it.
    pub md5sum: &'static str,
    /// The full definition (the type's text and every nested type's), as connection headers carry it.
    pub definition: &'static str,
    /// The type's own `.msg` text.
    pub text: &'static str,
    /// Whether the first field is `std_msgs/Header header`.
    pub has_header: bool,
}

impl MessageInfo {
    /// The facts of the message type `M`.
    pub const fn of<M: Message>() -> MessageInfo {
        MessageInfo {
            type_name: M::TYPE,
            md5sum: M::MD5SUM,
            definition: M::DEFINITION,
            text: M::TEXT,
            has_header: M::HAS_HEADER,
        }
    }
}

/// The message types udpros ships, by name.
pub fn builtin(type_name: &str) -> Option<&'static MessageInfo> {
    crate::msgs::MESSAGES
        .iter()
        .find(|m| m.type_name == type_name)
}

/// A code generator for a user's own `.msg` files, whose output refers to `::udpros` and
/// reuses the message types udpros ships instead of generating them again. For programs
/// that generate code at run time; a build script uses
/// [`Generator::for_udpros_dependents`](crate::codegen::Generator::for_udpros_dependents),
/// which does the same without compiling the library into the build script.
pub fn generator() -> crate::codegen::Generator {
    crate::codegen::Generator::new("::udpros").external(
        "::udpros::msgs",
        crate::msgs::MESSAGES.iter().map(|m| (m.type_name, m.text)),
    )
}

/// A run-time description of `type_name`: from the messages udpros ships, else from the
/// `.msg` files where ROS installs them (`ROS_PACKAGE_PATH`, `CMAKE_PREFIX_PATH`,
/// `/usr/share`).
pub fn find_type(type_name: &str) -> Result<dynamic::DynamicType, dynamic::DynamicError> {
    use crate::codegen::{self, spec};
    spec::split_type_name(type_name)?;
    let mut set = spec::SpecSet::new();
    for m in crate::msgs::MESSAGES {
        set.insert(spec::MsgSpec::parse(m.type_name, m.text)?);
    }
    let search = codegen::ros_search_paths();
    if !set.contains(type_name) {
        codegen::load_message(&mut set, &search, type_name)?;
    }
    codegen::resolve_dependencies(&mut set, &search)?;
    dynamic::DynamicType::from_specs(type_name, set)
}
