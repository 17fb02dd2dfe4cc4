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
        let local_addr = listener.local_addr()?;
        let connections = ConnectionSet::new(limits.max_connections);
        let shared = Shared::new(handler, limits);
        let accept = tokio::spawn(accept_loop(listener, shared, connections.clone()));
        Ok(XmlRpcServer {
            local_addr,
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
    fn drop(&mut self) {
        self.accept.abort();
        self.connections.close_all();
    }
}

struct Shared {
    handler: Arc<dyn Handler>,
    limits: ServerLimits,
    /// Permits are bytes of large bodies.
    large_bodies: Semaphore,
}

impl Shared {
    fn new(handler: Arc<dyn Handler>, limits: ServerLimits) -> Arc<Shared> {
        Arc::new(Shared {
            handler,
            limits,
            large_bodies: Semaphore::new(limits.large_body_budget),
        })
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, connections: Arc<ConnectionSet>) {
    let limits = shared.limits;
    let mut sweep = tokio::time::interval(limits.idle_timeout.min(Duration::from_secs(5)));
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let (stream, _) = tokio::select! {
            accepted = accept_with_backoff(&listener, "XML-RPC server", || {
                connections.close_one_idle();
            }) => accepted,
            _ = sweep.tick() => {
                connections.expire_idle(Instant::now(), limits.idle_timeout);
                continue;
            }
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
    serve_connection(io, Shared::new(handler, limits), None).await;
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
    let call = match decode(body, limits.parse).await {
        Ok(call) => call,
        Err(message) => return Ok(fault_reply(message)),
    };
    let handler = &*shared.handler;
    let result = if call.method == "system.multicall" {
        multicall(handler, call.params).await
    } else {
        handler.call(&call.method, call.params).await
    };
    let text = match result {
        Ok(value) => write_response(&value),
        Err(fault) => write_fault(&fault),
    };
    Ok(reply(StatusCode::OK, text))
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
async fn multicall(handler: &dyn Handler, params: Vec<Value>) -> Result<Value, Fault> {
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
            Some((method, params)) => handler.call(method, params.to_vec()).await,
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
