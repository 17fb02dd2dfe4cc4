//! The master's XML-RPC methods, with rosmaster's argument checks (`apivalidate` and its
//! validators) and its exact status codes and messages.

use super::fanout::{Pacing, Task};
use super::notify::Notifier;
use super::ordered::OrderedMap;
use super::params::{compute_updates, DeleteError, Param, ParamTree};
use super::registrations::{Kind, RegistrationManager};
use crate::api::validate::{validate, Check};
use crate::api::{StatusReply, UNAUTHENTICATED_NODES};
use crate::names::resolve;
use crate::xmlrpc::{Caller, Fault, Handler, HandlerFuture, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::watch;

#[derive(Default)]
struct State {
    reg: RegistrationManager,
    params: ParamTree,
    topic_types: OrderedMap<String>,
}

pub(super) struct MasterHandler {
    uri: String,
    state: Mutex<State>,
    /// Nodes that registered something without proof of the graph key while the master
    /// checks proofs under `prefer` (stock ROS nodes, or udpros without the key), at most
    /// [`MAX_UNPROVEN`] of them.
    unproven: Mutex<std::collections::BTreeSet<String>>,
    /// The server checks proofs of the key: an unproven call is one to name.
    guarded: bool,
    notifier: Notifier,
    shutdown: watch::Sender<Option<String>>,
}

/// A validated call: its method, the caller, the arguments after the caller id, and the
/// value a failure answers with.
struct Call<'a> {
    method: &'a str,
    caller_id: &'a str,
    args: &'a [Value],
    default: Value,
}

/// Unauthenticated nodes the master names at most (each logged once): a flood of names
/// costs bounded memory.
const MAX_UNPROVEN: usize = 10_000;

fn string_list(items: Vec<String>) -> Value {
    Value::Array(items.into_iter().map(Value::String).collect())
}

fn pairs(items: impl IntoIterator<Item = (String, String)>) -> Value {
    Value::Array(
        items
            .into_iter()
            .map(|(a, b)| Value::from(vec![a, b]))
            .collect(),
    )
}

fn state_value(state: Vec<(String, Vec<String>)>) -> Value {
    Value::Array(
        state
            .into_iter()
            .map(|(k, ids)| Value::Array(vec![Value::String(k), string_list(ids)]))
            .collect(),
    )
}

fn arg(args: &[Value], i: usize) -> &str {
    args.get(i).and_then(Value::as_str).unwrap_or("")
}

impl MasterHandler {
    /// The handler of a master reached at `uri`, whose server checks proofs when
    /// `security` uses a key; its calls to nodes are signed then.
    pub(super) fn new(uri: String, security: &crate::secure::Security) -> Arc<MasterHandler> {
        Arc::new_cyclic(|me: &Weak<MasterHandler>| {
            let me = me.clone();
            let on_rejected = Arc::new(move |caller_id: &str, api: &str, key: &str| {
                if let Some(master) = me.upgrade() {
                    master
                        .lock()
                        .reg
                        .unregister(Kind::ParamSubscriber, key, caller_id, api, None);
                }
            });
            MasterHandler {
                uri,
                state: Mutex::default(),
                unproven: Mutex::default(),
                guarded: security.active_key().is_some(),
                notifier: Notifier::new(
                    Pacing::for_descriptor_limit(
                        crate::connections::descriptor_limit().unwrap_or(1024),
                    ),
                    on_rejected,
                    security,
                ),
                shutdown: watch::channel(None).0,
            }
        })
    }

    /// Resolves when a `shutdown` call asks the master to stop, with its reason.
    pub(super) fn shutdown_requests(&self) -> watch::Receiver<Option<String>> {
        self.shutdown.subscribe()
    }

    /// Nodes that registered without proof of the graph key (under `prefer`), by name.
    pub(super) fn unproven_nodes(&self) -> Vec<String> {
        let unproven = self.unproven.lock().unwrap_or_else(|e| e.into_inner());
        unproven.iter().cloned().collect()
    }

    /// Notes a registration by a caller that did not prove the key: logged once per node,
    /// so an operator sees which publishers of a secured graph are plain.
    fn note_unproven(&self, method: &str, params: &[Value]) {
        let Some(caller_id) = params.first().and_then(Value::as_str) else {
            return;
        };
        let what = params.get(1).and_then(Value::as_str).unwrap_or("");
        let mut unproven = self.unproven.lock().unwrap_or_else(|e| e.into_inner());
        if unproven.len() < MAX_UNPROVEN && unproven.insert(caller_id.to_string()) {
            tracing::warn!(
                "{caller_id} calls {method}({what}) without proof of the graph key: its \
                 registrations are unauthenticated"
            );
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn dispatch(&self, method: &str, params: Vec<Value>) -> Result<Value, Fault> {
        use Check::*;
        let zero = Value::Int(0);
        let empty = || Value::Array(Vec::new());
        let (default, checks): (Value, &[Check]) = match method {
            "getUri" => (Value::from(""), &[]),
            "getPid" => (Value::Int(-1), &[]),
            "shutdown" => (zero, &[Any]),
            "deleteParam" | "getParam" | "searchParam" => (zero, &[NonEmptyStr("key")]),
            "setParam" => (zero, &[NonEmptyStr("key"), NotNone]),
            "subscribeParam" | "unsubscribeParam" => {
                (zero, &[IsApi("caller_api"), NonEmptyStr("key")])
            }
            "hasParam" => (Value::Bool(false), &[NonEmptyStr("key")]),
            "getParamNames" | "getTopicTypes" => (empty(), &[]),
            "registerService" => (
                zero,
                &[
                    IsResource("service"),
                    IsApi("service_api"),
                    IsApi("caller_api"),
                ],
            ),
            "lookupService" => (Value::from(""), &[IsResource("service")]),
            "unregisterService" => (zero, &[IsResource("service"), IsApi("service_api")]),
            "registerSubscriber" | "registerPublisher" => (
                empty(),
                &[
                    IsResource("topic"),
                    ValidTypeName("topic_type"),
                    IsApi("caller_api"),
                ],
            ),
            "unregisterSubscriber" | "unregisterPublisher" => {
                (zero, &[IsResource("topic"), IsApi("caller_api")])
            }
            "lookupNode" => (Value::from(""), &[ValidName("node")]),
            "getPublishedTopics" => (zero, &[EmptyOrValidName("subgraph")]),
            "getSystemState" => (Value::from(vec![empty(), empty(), empty()]), &[]),
            UNAUTHENTICATED_NODES => (empty(), &[]),
            _ => {
                return Err(Fault::new(
                    1,
                    format!("<class 'Exception'>:method \"{method}\" is not supported"),
                ))
            }
        };
        let reply = match validate(params, checks) {
            Ok((caller_id, args)) => self.run(method, &caller_id, args, default),
            Err((code, message)) => StatusReply::new(code, message, default),
        };
        Ok(reply.into_value())
    }

    /// Answers a validated call. Calls that read no state never wait for the lock (a large
    /// setParam holds it); the others run under it, by the kind of state they touch.
    fn run(&self, method: &str, caller_id: &str, args: Vec<Value>, default: Value) -> StatusReply {
        match method {
            "getUri" => return StatusReply::ok("", Value::from(self.uri.as_str())),
            "getPid" => return StatusReply::ok("", Value::Int(std::process::id() as i32)),
            "shutdown" => {
                let reason = arg(&args, 0).to_string();
                self.shutdown.send_replace(Some(reason));
                return StatusReply::ok("shutdown", Value::Int(0));
            }
            UNAUTHENTICATED_NODES => {
                let names = self.unproven_nodes().into_iter().map(Value::from);
                return StatusReply::ok(
                    "nodes that registered without proof of the graph key",
                    Value::Array(names.collect()),
                );
            }
            _ => {}
        }
        // A large value is converted before the lock is taken.
        let prepared = (method == "setParam")
            .then(|| args.get(1).cloned().map(Param::from_value))
            .flatten();
        let mut state = self.lock();
        let call = Call {
            method,
            caller_id,
            args: &args,
            default,
        };
        match method {
            "getParam" | "setParam" | "deleteParam" | "hasParam" | "searchParam"
            | "subscribeParam" | "unsubscribeParam" | "getParamNames" => {
                self.parameter_call(&mut state, call, prepared)
            }
            "registerService"
            | "unregisterService"
            | "registerSubscriber"
            | "unregisterSubscriber"
            | "registerPublisher"
            | "unregisterPublisher" => self.registration_call(&mut state, call),
            _ => self.graph_query(&state, call),
        }
    }

    /// The parameter server's calls.
    fn parameter_call(
        &self,
        s: &mut State,
        call: Call<'_>,
        prepared: Option<Param>,
    ) -> StatusReply {
        let Call {
            method,
            caller_id,
            args,
            default,
        } = call;
        match method {
            "getParam" => {
                let key = resolve(arg(args, 0), caller_id);
                match s.params.get(&key) {
                    Some(v) => StatusReply::ok(format!("Parameter [{key}]"), v),
                    None => {
                        StatusReply::new(-1, format!("Parameter [{key}] is not set"), Value::Int(0))
                    }
                }
            }
            "setParam" => {
                let key = resolve(arg(args, 0), caller_id);
                let (Some(value), Some(param)) = (args.get(1), prepared) else {
                    return StatusReply::new(-1, "Error: invalid arguments: no value", default);
                };
                if let Err(e) = s.params.set_param(&key, param) {
                    return StatusReply::new(-1, format!("Error: invalid arguments: {e}"), default);
                }
                let updates =
                    compute_updates(&s.reg.param_subscribers.map, &key, value, Some(caller_id));
                self.notify_params(updates);
                StatusReply::ok(format!("parameter {key} set"), Value::Int(0))
            }
            "deleteParam" => {
                let key = resolve(arg(args, 0), caller_id);
                match s.params.delete(&key) {
                    Ok(()) => {}
                    Err(DeleteError::NotSet) => {
                        return StatusReply::new(
                            -1,
                            format!("parameter [{key}] is not set"),
                            Value::Int(0),
                        )
                    }
                    Err(DeleteError::TypeError(e)) => {
                        return StatusReply::new(
                            -1,
                            format!("Error: invalid arguments: {e}"),
                            default,
                        )
                    }
                }
                let deleted = Value::Struct(BTreeMap::new());
                self.notify_params(compute_updates(
                    &s.reg.param_subscribers.map,
                    &key,
                    &deleted,
                    None,
                ));
                StatusReply::ok(format!("parameter {key} deleted"), Value::Int(0))
            }
            "hasParam" => {
                let key = resolve(arg(args, 0), caller_id);
                let has = s.params.has(&key);
                StatusReply::ok(key, Value::Bool(has))
            }
            "searchParam" => {
                let key = arg(args, 0);
                match s.params.search(caller_id, key) {
                    Ok(Some(found)) => {
                        StatusReply::ok(format!("Found [{found}]"), Value::String(found))
                    }
                    Ok(None) => StatusReply::new(
                        -1,
                        format!("Cannot find parameter [{key}] in an upwards search"),
                        Value::from(""),
                    ),
                    Err(e) => StatusReply::new(0, format!("Internal failure: {e}"), default),
                }
            }
            "subscribeParam" | "unsubscribeParam" => {
                let (api, key) = (arg(args, 0), resolve(arg(args, 1), caller_id));
                let sub_key = if key == "/" {
                    key.clone()
                } else {
                    format!("{}/", crate::names::canonicalize(&key))
                };
                if method == "unsubscribeParam" {
                    s.reg
                        .unregister(Kind::ParamSubscriber, &sub_key, caller_id, api, None);
                    return StatusReply::ok(
                        format!("Unsubscribe to parameter [{key}]"),
                        Value::Int(1),
                    );
                }
                let value = s
                    .params
                    .get(&sub_key)
                    .unwrap_or_else(|| Value::Struct(BTreeMap::new()));
                let bumped = s
                    .reg
                    .register(Kind::ParamSubscriber, &sub_key, caller_id, api, None);
                self.bump(bumped, caller_id);
                StatusReply::ok(format!("Subscribed to parameter [{key}]"), value)
            }
            "getParamNames" => StatusReply::ok("Parameter names", string_list(s.params.names())),
            _ => StatusReply::new(0, format!("Internal failure: no method {method}"), default),
        }
    }

    /// Registrations of publishers, subscribers and services, and their notifications.
    fn registration_call(&self, s: &mut State, call: Call<'_>) -> StatusReply {
        let Call {
            method,
            caller_id,
            args,
            default,
        } = call;
        match method {
            "registerService" => {
                let (service, service_api, api) = (arg(args, 0), arg(args, 1), arg(args, 2));
                let bumped =
                    s.reg
                        .register(Kind::Service, service, caller_id, api, Some(service_api));
                self.bump(bumped, caller_id);
                StatusReply::ok(
                    format!("Registered [{caller_id}] as provider of [{service}]"),
                    Value::Int(1),
                )
            }
            "unregisterService" => {
                let (code, msg, v) = s.reg.unregister(
                    Kind::Service,
                    arg(args, 0),
                    caller_id,
                    "",
                    Some(arg(args, 1)),
                );
                StatusReply::new(code, msg, Value::Int(v))
            }
            "registerSubscriber" => {
                let (topic, topic_type, api) = (arg(args, 0), arg(args, 1), arg(args, 2));
                let bumped = s
                    .reg
                    .register(Kind::Subscriber, topic, caller_id, api, None);
                self.bump(bumped, caller_id);
                if !s.topic_types.contains(topic) && topic_type != "*" {
                    s.topic_types.insert(topic, topic_type.to_string());
                }
                StatusReply::ok(
                    format!("Subscribed to [{topic}]"),
                    string_list(s.reg.publishers.apis(topic)),
                )
            }
            "unregisterSubscriber" => {
                let (code, msg, v) = s.reg.unregister(
                    Kind::Subscriber,
                    arg(args, 0),
                    caller_id,
                    arg(args, 1),
                    None,
                );
                StatusReply::new(code, msg, Value::Int(v))
            }
            "registerPublisher" => {
                let (topic, topic_type, api) = (arg(args, 0), arg(args, 1), arg(args, 2));
                let bumped = s.reg.register(Kind::Publisher, topic, caller_id, api, None);
                self.bump(bumped, caller_id);
                if topic_type != "*" || !s.topic_types.contains(topic) {
                    s.topic_types.insert(topic, topic_type.to_string());
                }
                self.notify_subscribers(&s.reg, topic);
                StatusReply::ok(
                    format!("Registered [{caller_id}] as publisher of [{topic}]"),
                    string_list(s.reg.subscribers.apis(topic)),
                )
            }
            "unregisterPublisher" => {
                let topic = arg(args, 0);
                let (code, msg, v) =
                    s.reg
                        .unregister(Kind::Publisher, topic, caller_id, arg(args, 1), None);
                if v == 1 {
                    self.notify_subscribers(&s.reg, topic);
                }
                StatusReply::new(code, msg, Value::Int(v))
            }
            _ => StatusReply::new(0, format!("Internal failure: no method {method}"), default),
        }
    }

    /// Questions about the graph: nodes, services, topics, the whole state.
    fn graph_query(&self, s: &State, call: Call<'_>) -> StatusReply {
        let Call {
            method,
            args,
            default,
            ..
        } = call;
        match method {
            "lookupService" => match s.reg.services.service_api(arg(args, 0)) {
                Some(api) => StatusReply::ok(format!("rosrpc URI: [{api}]"), Value::from(api)),
                None => StatusReply::new(-1, "no provider", Value::from("")),
            },
            "lookupNode" => {
                let node = arg(args, 0);
                match s.reg.nodes.get(node) {
                    Some(n) => StatusReply::ok("node api", Value::from(n.api.as_str())),
                    None => StatusReply::new(-1, format!("unknown node [{node}]"), Value::from("")),
                }
            }
            "getPublishedTopics" => {
                let mut subgraph = arg(args, 0).to_string();
                if !subgraph.is_empty() && !subgraph.ends_with('/') {
                    subgraph.push('/');
                }
                let topics = s
                    .reg
                    .publishers
                    .map
                    .keys()
                    .filter(|t| t.starts_with(&subgraph))
                    .map(|t| {
                        (
                            t.to_string(),
                            s.topic_types.get(t).cloned().unwrap_or_default(),
                        )
                    });
                StatusReply::ok("current topics", pairs(topics))
            }
            "getTopicTypes" => {
                let types = s
                    .topic_types
                    .iter()
                    .map(|(t, ty)| (t.to_string(), ty.clone()));
                StatusReply::ok("current system state", pairs(types))
            }
            "getSystemState" => {
                let reg = &s.reg;
                let state = [
                    reg.publishers.state(),
                    reg.subscribers.state(),
                    reg.services.state(),
                ];
                StatusReply::ok(
                    "current system state",
                    Value::Array(state.into_iter().map(state_value).collect()),
                )
            }
            _ => StatusReply::new(0, format!("Internal failure: no method {method}"), default),
        }
    }

    /// A node re-registered from a new API: tell the old one to shut down.
    fn bump(&self, bumped: Option<String>, caller_id: &str) {
        if let Some(old_api) = bumped {
            let message = format!("[{caller_id}] Reason: new node registered with same name");
            self.notifier.queue(&old_api, Task::Shutdown { message });
        }
    }

    /// Sends every subscriber of `topic` the full list of its publishers.
    /// Tells every subscriber of `topic` its publishers, the newest registration first:
    /// registrations of nodes that died without unregistering pile up over a robot's day,
    /// so the newest are the likeliest to be there, and a fan-out that must wait out dead
    /// ones in its first lane should not make them wait behind those (10,000 stale
    /// registrations on a loaded machine held the live subscribers back 15 s).
    fn notify_subscribers(&self, reg: &RegistrationManager, topic: &str) {
        let publishers = Arc::new(reg.publishers.apis(topic));
        for api in reg.subscribers.apis(topic).into_iter().rev() {
            self.notifier.queue(
                &api,
                Task::PublisherUpdate {
                    topic: topic.to_string(),
                    publishers: publishers.clone(),
                },
            );
        }
    }

    fn notify_params(&self, updates: Vec<super::params::ParamUpdate>) {
        for update in updates {
            for (caller_id, api) in update.nodes {
                let task = Task::ParamUpdate {
                    caller_id,
                    key: update.key.clone(),
                    value: update.value.clone(),
                };
                self.notifier.queue(&api, task);
            }
        }
    }
}

impl Handler for MasterHandler {
    fn call(&self, method: &str, params: Vec<Value>) -> HandlerFuture {
        let result = self.dispatch(method, params);
        Box::pin(async move { result })
    }

    /// Behind a guard (security `prefer`), registrations without proof are taken and
    /// named; under `require` they never reach here.
    fn call_from(&self, caller: Caller, method: &str, params: Vec<Value>) -> HandlerFuture {
        if caller == Caller::Unproven && self.guarded && method.starts_with("register") {
            self.note_unproven(method, &params);
        }
        self.call(method, params)
    }
}
