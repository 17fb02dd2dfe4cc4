//! Nodes: how a node learns its name, namespace, master and host from its arguments and
//! environment.

pub mod args;
pub mod host;
