//! An XML-RPC server on hyper: many concurrent keep-alive connections (rosmaster holds one
//! per worker thread, and deadlocks against a server that serves one at a time), bounded
//! request bodies, `system.multicall`, and a fault reply (never a hang or a panic) for
//! anything malformed.
//!
//! What a peer can make it spend is bounded (the book's Limits chapter, `docs/src/limits.md`, lists the figures):
//! - connections: at most [`ServerLimits::max_connections`], the longest-idle closed to make
//!   room, idle ones closed after [`ServerLimits::idle_timeout`];
//! - time: a request's header must arrive within [`ServerLimits::header_timeout`] and its
//!   body within [`ServerLimits::body_timeout`];
//! - memory: a body over [`ParseLimits::max_body`] is refused from its `Content-Length`
//!   before it is read (a chunked one as soon as it passes the limit); bodies over
//!   [`LARGE_BODY`] share one budget of [`ServerLimits::large_body_budget`] bytes, held from
//!   reading until the answer is written, so a few huge requests cannot together exhaust
//!   memory while small calls keep being answered; the decoded value is budgeted by
//!   [`ParseLimits`].
//!
//! Large bodies are decoded on the blocking pool, so a runtime thread never spends
//! milliseconds in the parser while other calls wait.

use super::parse::{parse_call, ParseLimits};
use super::proof::{CallGuard, Caller, Checked, PROOF_HEADER};
use super::write::{write_fault, write_response};
use super::{Fault, MethodCall, Value};
use crate::connections::{accept_with_backoff, Activity, ConnectionSet};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// What a handler returns: the call's value, or a fault.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Value, Fault>> + Send>>;

/// What the server calls for each method call.
pub trait Handler: Send + Sync + 'static {
    /// Answers one call.
    fn call(&self, method: &str, params: Vec<Value>) -> HandlerFuture;

    /// Answers one call from a caller that proved the graph key or did not (always
    /// [`Caller::Unproven`] on a server without a [`CallGuard`]): what a handler overrides
    /// when it treats them apart, as the master marks unauthenticated registrations.
    fn call_from(&self, caller: Caller, method: &str, params: Vec<Value>) -> HandlerFuture {
        let _ = caller;
        self.call(method, params)
    }
}

/// Bodies up to this size are read without taking from the large-body budget: ROS calls
/// are a few kilobytes, and they must never queue behind a peer's huge request.
pub const LARGE_BODY: usize = 64 << 10;

/// What one server lets its peers spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Bounds on one request's document.
    pub parse: ParseLimits,
    /// Connections held at once; the longest-idle one is closed to make room.
    pub max_connections: usize,
    /// A keep-alive connection with no request for this long is closed (ROS clients
    /// reconnect: XmlRpc++ once when a kept-alive socket turns out dead, Python always).
    pub idle_timeout: Duration,
    /// Time to send a request's header.
    pub header_timeout: Duration,
    /// Time to send a request's body once its header is in.
    pub body_timeout: Duration,
    /// Bytes of bodies over [`LARGE_BODY`] read and decoded at once, across connections.
    pub large_body_budget: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            parse: ParseLimits::SERVER,
            max_connections: 512,
            idle_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            large_body_budget: ParseLimits::SERVER.max_body,
        }
    }
}

/// A running server; dropping it stops it and closes its connections.
pub struct XmlRpcServer {
    local_addr: SocketAddr,
    /// Shared with the accept task, so that a drop can close it at once (below).
    listener: Arc<TcpListener>,
    connections: Arc<ConnectionSet>,
    accept: tokio::task::JoinHandle<()>,
}

impl XmlRpcServer {
    /// Binds `addr` (port 0 picks one) and serves `handler` until dropped.
    pub async fn bind(
        addr: SocketAddr,
        handler: Arc<dyn Handler>,
    ) -> std::io::Result<XmlRpcServer> {
        XmlRpcServer::serve(TcpListener::bind(addr).await?, handler)
    }

    /// Serves on a bound listener (when the handler must know the port first).
    pub fn serve(
        listener: TcpListener,
        handler: Arc<dyn Handler>,
    ) -> std::io::Result<XmlRpcServer> {
        XmlRpcServer::serve_with_limits(listener, handler, ServerLimits::default())
    }

    /// Serves with other limits than the defaults.
    pub fn serve_with_limits(
        listener: TcpListener,
        handler: Arc<dyn Handler>,
        limits: ServerLimits,
    ) -> std::io::Result<XmlRpcServer> {
        XmlRpcServer::serve_guarded(listener, handler, limits, None)
    }

    /// Serves with `guard` checking every call's proof of the graph key before its body is
    /// parsed (`None`: every call taken, as stock ROS servers do), and signing the answers
    /// to proven calls.
    pub fn serve_guarded(
        listener: TcpListener,
        handler: Arc<dyn Handler>,
        limits: ServerLimits,
        guard: Option<Arc<CallGuard>>,
    ) -> std::io::Result<XmlRpcServer> {
        let local_addr = listener.local_addr()?;
        let connections = ConnectionSet::new(limits.max_connections);
        let shared = Shared::new(handler, limits, guard);
        let listener = Arc::new(listener);
        let accept = tokio::spawn(accept_loop(listener.clone(), shared, connections.clone()));
        Ok(XmlRpcServer {
            local_addr,
            listener,
            connections,
            accept,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The URI peers call: `http://host:port/` (`http://[::1]:port/` for an IPv6 literal).
    pub fn uri(&self, host: &str) -> String {
        format!(
            "http://{}/",
            crate::host::authority(host, self.local_addr.port())
        )
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.connections.len()
    }
}

impl Drop for XmlRpcServer {
    /// Stops listening before it returns: an aborted task drops its listener only when the
    /// runtime next gets to it, and until then the port is taken (a master started again
    /// on the same port at once failed with "address in use" on a loaded machine). A shut
    /// down listening socket leaves the listening state, and the port can be bound again;
    /// an accept task that runs before its abort lands sees that and ends quietly.
    fn drop(&mut self) {
        let _ = socket2::SockRef::from(&*self.listener).shutdown(std::net::Shutdown::Both);
        self.accept.abort();
        self.connections.close_all();
    }
}

struct Shared {
    handler: Arc<dyn Handler>,
    limits: ServerLimits,
    guard: Option<Arc<CallGuard>>,
    /// Permits are bytes of large bodies.
    large_bodies: Semaphore,
}

impl Shared {
    fn new(
        handler: Arc<dyn Handler>,
        limits: ServerLimits,
        guard: Option<Arc<CallGuard>>,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            handler,
            limits,
            guard,
            large_bodies: Semaphore::new(limits.large_body_budget),
        })
    }
}

async fn accept_loop(
    listener: Arc<TcpListener>,
    shared: Arc<Shared>,
    connections: Arc<ConnectionSet>,
) {
    let limits = shared.limits;
    let mut sweep = tokio::time::interval(limits.idle_timeout.min(Duration::from_secs(5)));
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let accepted = tokio::select! {
            accepted = accept_with_backoff(&listener, "XML-RPC server", || {
                connections.close_one_idle();
            }) => accepted,
            _ = sweep.tick() => {
                connections.expire_idle(Instant::now(), limits.idle_timeout);
                continue;
            }
        };
        // None: the listener was shut down (the server is being dropped).
        let Some((stream, _)) = accepted else {
            return;
        };
        if !connections.make_room() {
            // Every connection is serving a request: this one waits for none of them.
            continue;
        }
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        connections.spawn(move |activity| serve_connection(stream, shared, Some(activity)));
    }
}

/// Serves one connection until it closes or breaks; marks it busy while a request is
/// being served.
async fn serve_connection<IO>(io: IO, shared: Arc<Shared>, activity: Option<Activity>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let header_timeout = shared.limits.header_timeout;
    let activity = activity.map(Arc::new);
    let service = hyper::service::service_fn(move |req| {
        let busy = activity.as_ref().map(|a| a.busy());
        let shared = shared.clone();
        async move {
            let response = serve(&shared, req).await;
            drop(busy);
            response
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// Serves `handler` on one connection of any byte stream, with `limits`, exactly as a
/// server serves each TCP connection it accepts: what the fuzzer feeds whole HTTP
/// requests to (feature `fuzzing`).
#[cfg(feature = "fuzzing")]
pub async fn serve_stream<IO>(io: IO, handler: Arc<dyn Handler>, limits: ServerLimits)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    serve_connection(io, Shared::new(handler, limits, None), None).await;
}

/// A refused call's answer: a ROS status triple `[-1, text, 0]`, which every ROS API
/// caller reports as one line (rospy's tools print `ERROR: text`, roscpp logs it), where a
/// fault would end a Python tool in a traceback.
fn refusal_reply(text: String) -> Response<Full<Bytes>> {
    let triple = Value::Array(vec![Value::Int(-1), Value::String(text), Value::Int(0)]);
    reply(StatusCode::OK, write_response(&triple))
}

fn fault_reply(message: impl Into<String>) -> Response<Full<Bytes>> {
    reply(StatusCode::OK, write_fault(&Fault::new(-1, message)))
}

async fn serve(
    shared: &Shared,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let limits = &shared.limits;
    if req.method() != Method::POST {
        return Ok(reply(StatusCode::METHOD_NOT_ALLOWED, String::new()));
    }
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let max_body = limits.parse.max_body;
    if let Some(len) = declared.filter(|&len| len > max_body as u64) {
        return Ok(fault_reply(format!(
            "request body of {len} bytes is over the limit of {max_body} bytes"
        )));
    }
    let proof = req
        .headers()
        .get(PROOF_HEADER)
        .map(|v| v.to_str().map(str::to_owned).map_err(|_| ()));
    // A body of unknown length counts as a large one of the largest size.
    let size = declared.map_or(max_body, |len| len as usize);
    let _permit = if size > LARGE_BODY {
        let permits = u32::try_from(size.min(limits.large_body_budget)).unwrap_or(u32::MAX);
        match shared.large_bodies.acquire_many(permits).await {
            Ok(permit) => Some(permit),
            Err(_) => return Ok(fault_reply("server is shutting down")),
        }
    } else {
        None
    };
    let read = read_body(req.into_body(), size.min(max_body), max_body);
    let body = match tokio::time::timeout(limits.body_timeout, read).await {
        Ok(Ok(body)) => body,
        Ok(Err(())) => {
            return Ok(fault_reply(format!(
                "request body over the limit of {max_body} bytes, or broken"
            )))
        }
        Err(_) => return Ok(fault_reply("request body not received in time")),
    };
    // The proof is checked before the body is parsed: under `require`, a caller without
    // the key costs an HMAC, never the parser.
    let checked = match &shared.guard {
        None => Checked::Unproven,
        Some(guard) => {
            let proof = match &proof {
                Some(Err(())) => Some(""), // not text: malformed
                Some(Ok(text)) => Some(text.as_str()),
                None => None,
            };
            match guard.check(proof, &body) {
                Ok(checked) => checked,
                Err(why) => return Ok(refusal_reply(guard.refusal_text(why))),
            }
        }
    };
    let call = match decode(body, limits.parse).await {
        Ok(call) => call,
        Err(message) => return Ok(fault_reply(message)),
    };
    let handler = &*shared.handler;
    let caller = checked.caller();
    let result = if call.method == "system.multicall" {
        multicall(handler, caller, call.params).await
    } else {
        handler.call_from(caller, &call.method, call.params).await
    };
    let text = match result {
        Ok(value) => write_response(&value),
        Err(fault) => write_fault(&fault),
    };
    let answer_proof = shared
        .guard
        .as_ref()
        .and_then(|guard| guard.sign_answer(checked, text.as_bytes()));
    let mut response = reply(StatusCode::OK, text);
    if let Some(value) = answer_proof.and_then(|p| hyper::header::HeaderValue::from_str(&p).ok()) {
        response.headers_mut().insert(PROOF_HEADER, value);
    }
    Ok(response)
}

/// Reads a body into one buffer sized from its declared length (collecting frames and
/// then joining them would hold it twice), refusing it as soon as it passes `max`.
async fn read_body(mut body: Incoming, expected: usize, max: usize) -> Result<Bytes, ()> {
    let mut out = bytes::BytesMut::with_capacity(expected);
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(drop)?.into_data() else {
            continue; // trailers
        };
        if out.len() + data.len() > max {
            return Err(());
        }
        out.extend_from_slice(&data);
    }
    Ok(out.freeze())
}

/// Parses a request; a large one on the blocking pool, so runtime threads stay free.
async fn decode(body: Bytes, limits: ParseLimits) -> Result<MethodCall, String> {
    if body.len() <= LARGE_BODY {
        return parse_call(&body, &limits).map_err(|e| e.to_string());
    }
    match tokio::task::spawn_blocking(move || parse_call(&body, &limits)).await {
        Ok(parsed) => parsed.map_err(|e| e.to_string()),
        Err(_) => Err("request could not be decoded".into()),
    }
}

fn reply(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/xml"),
    );
    response
}

/// `system.multicall([{methodName, params}, ...])`: each result wrapped in a one-element
/// array, each failure as a fault struct, as Python's and XmlRpc++'s servers do.
async fn multicall(
    handler: &dyn Handler,
    caller: Caller,
    params: Vec<Value>,
) -> Result<Value, Fault> {
    let Some(Value::Array(calls)) = params.into_iter().next() else {
        return Err(Fault::new(-1, "system.multicall expects an array of calls"));
    };
    let mut results = Vec::with_capacity(calls.len());
    for call in calls {
        let parts = call
            .as_struct()
            .and_then(|s| Some((s.get("methodName")?.as_str()?, s.get("params")?.as_array()?)));
        let result = match parts {
            Some(("system.multicall", _)) => {
                Err(Fault::new(-1, "recursive system.multicall forbidden"))
            }
            Some((method, params)) => handler.call_from(caller, method, params.to_vec()).await,
            None => Err(Fault::new(
                -1,
                "multicall entries need methodName and params",
            )),
        };
        results.push(match result {
            Ok(v) => Value::Array(vec![v]),
            Err(f) => {
                let mut s = BTreeMap::new();
                s.insert("faultCode".to_string(), Value::Int(f.code));
                s.insert("faultString".to_string(), Value::String(f.message));
                Value::Struct(s)
            }
        });
    }
    Ok(Value::Array(results))
}
