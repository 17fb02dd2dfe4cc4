//! The slave API every node serves, with rospy's strict argument checks, return shapes and
//! status messages (roscpp is laxer: it lacks getMasterUri and arity checks).

use super::validate::{validate, Check};
use super::StatusReply;
use crate::xmlrpc::{Fault, Handler, HandlerFuture, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What a node tells its slave API.
pub trait SlaveBackend: Send + Sync + 'static {
    /// The node's name.
    fn name(&self) -> String;
    /// The node's XML-RPC URI.
    fn uri(&self) -> String;
    /// The master's URI.
    fn master_uri(&self) -> String;
    /// `(topic, type)` pairs, `/rosout` included.
    fn publications(&self) -> Vec<(String, String)>;
    /// Subscribed topics with their types.
    fn subscriptions(&self) -> Vec<(String, String)>;
    /// `[pubStats, subStats, serviceStats]` in rospy's layout.
    fn bus_stats(&self) -> Value;
    /// `[[id, peer, direction, transport, topic, connected, info]...]`.
    fn bus_info(&self) -> Value;
    /// A master's new publisher list; false when not subscribed to `topic`.
    fn publisher_update(&self, topic: &str, publishers: Vec<String>) -> bool;
    /// A subscribed parameter changed; false when not subscribed to `key`.
    fn param_update(&self, key: &str, value: Value) -> bool;
    /// Negotiates a connection for a subscriber (`protocols` is known to be non-empty).
    fn request_topic(
        &self,
        caller_id: &str,
        topic: &str,
        protocols: Vec<Value>,
    ) -> Pin<Box<dyn Future<Output = StatusReply> + Send>>;
    /// Asked to shut down (by `rosnode kill`, or the master replacing this node).
    fn shutdown(&self, reason: &str);
}

/// Serves a [`SlaveBackend`] over XML-RPC.
pub struct SlaveHandler {
    backend: Arc<dyn SlaveBackend>,
}

impl SlaveHandler {
    /// The handler of the slave API calls, answering from `backend`.
    pub fn new(backend: Arc<dyn SlaveBackend>) -> SlaveHandler {
        SlaveHandler { backend }
    }
}

fn pairs(items: Vec<(String, String)>) -> Value {
    Value::Array(
        items
            .into_iter()
            .map(|(a, b)| Value::from(vec![a, b]))
            .collect(),
    )
}

impl Handler for SlaveHandler {
    fn call(&self, method: &str, params: Vec<Value>) -> HandlerFuture {
        use Check::*;
        let empty = || Value::Array(Vec::new());
        let (default, checks): (Value, &[Check]) = match method {
            "getUri" | "getName" | "getMasterUri" => (Value::from(""), &[]),
            "getBusStats" | "getBusInfo" | "getSubscriptions" | "getPublications" => (empty(), &[]),
            "getPid" => (Value::Int(-1), &[]),
            "shutdown" => (Value::Int(0), &[Any]),
            "paramUpdate" => (Value::Int(-1), &[GlobalName("parameter_key"), Any]),
            "publisherUpdate" => (
                Value::Int(-1),
                &[IsResource("topic"), PublishersList("publishers")],
            ),
            "requestTopic" => (empty(), &[IsResource("topic"), NonEmpty("protocols")]),
            _ => {
                let fault = Fault::new(
                    1,
                    format!("<class 'Exception'>:method \"{method}\" is not supported"),
                );
                return Box::pin(async move { Err(fault) });
            }
        };
        let reply = |answer: StatusReply| Ok(answer.into_value());
        let (caller_id, args) = match validate(params, checks) {
            Ok(ok) => ok,
            Err((code, message)) => {
                return Box::pin(async move { reply(StatusReply::new(code, message, default)) })
            }
        };
        let b = &self.backend;
        let text = |i: usize| {
            args.get(i)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let answer: StatusReply = match method {
            "getUri" => StatusReply::ok("", Value::String(b.uri())),
            "getName" => StatusReply::ok("", Value::String(b.name())),
            "getMasterUri" => {
                let uri = b.master_uri();
                StatusReply::ok(uri.clone(), Value::String(uri))
            }
            "getBusStats" => StatusReply::ok("", b.bus_stats()),
            "getBusInfo" => StatusReply::ok("bus info", b.bus_info()),
            "getPid" => StatusReply::ok("", Value::Int(std::process::id() as i32)),
            "getSubscriptions" => StatusReply::ok("subscriptions", pairs(b.subscriptions())),
            "getPublications" => StatusReply::ok("publications", pairs(b.publications())),
            "shutdown" => {
                b.shutdown(&text(0));
                StatusReply::ok("shutdown", Value::Int(0))
            }
            "paramUpdate" => match b.param_update(&text(0), args[1].clone()) {
                true => StatusReply::ok("", Value::Int(0)),
                false => StatusReply::new(-1, "not subscribed", Value::Int(0)),
            },
            "publisherUpdate" => {
                let publishers = args[1]
                    .as_array()
                    .unwrap_or(&[])
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string));
                b.publisher_update(&text(0), publishers.collect());
                StatusReply::ok("", Value::Int(0))
            }
            "requestTopic" => {
                let topic = text(0);
                let protocols = args[1]
                    .as_array()
                    .map(<[Value]>::to_vec)
                    .unwrap_or_default();
                let pending = b.request_topic(&caller_id, &topic, protocols);
                return Box::pin(async move { reply(pending.await) });
            }
            _ => StatusReply::new(0, format!("Internal failure: no method {method}"), default),
        };
        Box::pin(async move { reply(answer) })
    }
}
