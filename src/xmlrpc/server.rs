//! An XML-RPC server on hyper: many concurrent keep-alive connections (rosmaster holds one
//! per worker thread, and deadlocks against a server that serves one at a time), bounded
//! request bodies, `system.multicall`, and a fault reply (never a hang or a panic) for
//! anything malformed.

use super::parse::{parse_call, ParseLimits};
use super::write::{write_fault, write_response};
use super::{Fault, Value};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Value, Fault>> + Send>>;

/// What the server calls for each method call.
pub trait Handler: Send + Sync + 'static {
    fn call(&self, method: &str, params: Vec<Value>) -> HandlerFuture;
}

/// A running server; dropping it stops it and closes its connections.
pub struct XmlRpcServer {
    local_addr: SocketAddr,
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
        let local_addr = listener.local_addr()?;
        let accept = tokio::spawn(accept_loop(listener, handler));
        Ok(XmlRpcServer { local_addr, accept })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The URI peers call: `http://host:port/`.
    pub fn uri(&self, host: &str) -> String {
        format!("http://{}:{}/", host, self.local_addr.port())
    }
}

impl Drop for XmlRpcServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn accept_loop(listener: TcpListener, handler: Arc<dyn Handler>) {
    // Owned here, so aborting this task drops every connection with it.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let handler = handler.clone();
                connections.spawn(async move {
                    let service = hyper::service::service_fn(move |req| serve(handler.clone(), req));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve(
    handler: Arc<dyn Handler>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let limits = ParseLimits::default();
    if req.method() != Method::POST {
        return Ok(reply(StatusCode::METHOD_NOT_ALLOWED, String::new()));
    }
    let body = match Limited::new(req.into_body(), limits.max_body)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return Ok(reply(
                StatusCode::OK,
                write_fault(&Fault::new(-1, "request body too large or broken")),
            ))
        }
    };
    let call = match parse_call(&body, &limits) {
        Ok(call) => call,
        Err(e) => {
            return Ok(reply(
                StatusCode::OK,
                write_fault(&Fault::new(-1, e.to_string())),
            ))
        }
    };
    let result = if call.method == "system.multicall" {
        multicall(&*handler, call.params).await
    } else {
        handler.call(&call.method, call.params).await
    };
    let text = match result {
        Ok(value) => write_response(&value),
        Err(fault) => write_fault(&fault),
    };
    Ok(reply(StatusCode::OK, text))
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
