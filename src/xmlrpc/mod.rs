//! XML-RPC as the ROS graph speaks it: a value model, a tolerant codec that reads every
//! dialect in the graph (XmlRpc++'s untyped strings and NUL-damaged base64, Python's typed
//! values), a writer that emits only what XmlRpc++ accepts, and HTTP glue on hyper.

mod base64;
mod client;
mod parse;
pub mod proof;
mod server;
mod value;
mod write;

pub use base64::{decode_base64, encode_base64};
pub use client::{CallError, XmlRpcClient};
pub use parse::{parse_call, parse_response, ParseError, ParseLimits};
pub use proof::{CallGuard, CallSigner, Caller};
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use server::serve_stream;
pub use server::{Handler, HandlerFuture, ServerLimits, XmlRpcServer, LARGE_BODY};
pub use value::{entry, entry_params};
pub use value::{Fault, MethodCall, Value};
pub use write::{write_call, write_fault, write_response};
