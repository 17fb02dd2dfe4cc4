//! HTTP and WebSocket: the console page at `/`, and the Foxglove protocol on an upgrade.

use crate::hub::{Client, Hub};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, UPGRADE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use udpros::wire::foxglove::{choose_subprotocol, Outgoing};

/// The console: its page, its script and the ROS1 decoder it imports, shipped inside the
/// binary (no CDN, no build step: it works on a vehicle's network without the internet).
const PAGES: [(&str, &str, &str); 3] = [
    (
        "/",
        "text/html; charset=utf-8",
        include_str!("web/index.html"),
    ),
    (
        "/console.js",
        "text/javascript; charset=utf-8",
        include_str!("web/console.js"),
    ),
    (
        "/ros1msg.js",
        "text/javascript; charset=utf-8",
        include_str!("web/ros1msg.js"),
    ),
];

/// The largest frame or message a client may send: a request names channels and
/// subscriptions, never bulk data.
const MAX_CLIENT_MESSAGE: usize = 1 << 20;

/// How long a session's closing handshake may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a connection may take to send its request's header.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) async fn accept(listener: TcpListener, hub: Arc<Hub>) {
    // Connections that are not (yet) WebSocket clients are bounded too.
    let connections = Arc::new(tokio::sync::Semaphore::new(
        hub.options.max_clients.saturating_mul(2) + 8,
    ));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::debug!("the view cannot accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            continue; // dropped: too many connections
        };
        let _ = stream.set_nodelay(true);
        let hub = hub.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req| {
                let hub = hub.clone();
                async move { Ok::<_, std::convert::Infallible>(respond(hub, req)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
        });
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_string())));
    *response.status_mut() = status;
    response
}

fn typed(content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    response
}

/// The view's counters as JSON: clients, and each forwarded topic's UDPROS links.
fn stats(hub: &Hub) -> String {
    let topics: Vec<serde_json::Value> = hub
        .link_summaries()
        .into_iter()
        .map(|(topic, l)| {
            serde_json::json!({
                "topic": topic,
                "protocol": l.protocol,
                "publishers": l.publishers,
                "delivered": l.delivered,
                "lost": l.lost,
            })
        })
        .collect();
    serde_json::json!({
        "clients": hub.clients(),
        "buffered_bytes": hub.buffered_bytes(),
        "topics": topics,
    })
    .to_string()
}

fn respond(hub: Arc<Hub>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let upgrade = req
        .headers()
        .get(UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if !upgrade {
        if req.method() != Method::GET {
            return plain(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
        }
        let path = match req.uri().path() {
            "/index.html" => "/",
            path => path,
        };
        if path == "/stats.json" {
            return typed("application/json", Bytes::from(stats(&hub)));
        }
        return match PAGES.iter().find(|(p, _, _)| *p == path) {
            Some((_, content_type, text)) => {
                typed(content_type, Bytes::from_static(text.as_bytes()))
            }
            None => plain(StatusCode::NOT_FOUND, "not found\n"),
        };
    }
    let headers = req.headers();
    let Some(key) = headers.get("sec-websocket-key") else {
        return plain(StatusCode::BAD_REQUEST, "no Sec-WebSocket-Key\n");
    };
    if headers.get("sec-websocket-version").map(|v| v.as_bytes()) != Some(b"13") {
        let mut refused = plain(StatusCode::BAD_REQUEST, "WebSocket version 13 only\n");
        refused
            .headers_mut()
            .insert("sec-websocket-version", HeaderValue::from_static("13"));
        return refused;
    }
    let offered: Vec<&str> = headers
        .get_all("sec-websocket-protocol")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let Some(protocol) = choose_subprotocol(&offered.join(",")) else {
        return plain(
            StatusCode::BAD_REQUEST,
            "offer the subprotocol foxglove.websocket.v1 (or foxglove.sdk.v1)\n",
        );
    };
    let accept = derive_accept_key(key.as_bytes());
    let Some((id, client)) = hub.join() else {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "too many clients\n");
    };
    tokio::spawn(async move {
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => session(&hub, id, &client, TokioIo::new(upgraded)).await,
            Err(e) => tracing::debug!("a view client's upgrade failed: {e}"),
        }
        hub.leave(id);
    });
    let mut switching = Response::new(Full::new(Bytes::new()));
    *switching.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = switching.headers_mut();
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert("sec-websocket-protocol", HeaderValue::from_static(protocol));
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        h.insert("sec-websocket-accept", accept);
    }
    switching
}

/// One client's session: its frames to the hub, its outbox to the socket, until either
/// side ends it.
async fn session<IO>(hub: &Arc<Hub>, id: u64, client: &Client, io: IO)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_CLIENT_MESSAGE))
        .max_frame_size(Some(MAX_CLIENT_MESSAGE));
    let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    let (mut sink, mut stream) = socket.split();
    let write = async {
        while !client.is_closed() {
            let next = client.outbox().pop();
            let sent = match next {
                Some(frame) => sink.send(message(frame)).await,
                None => {
                    // The reader's replies (pong, close) are queued inside tungstenite and
                    // leave only with a write or a flush: flush before sleeping.
                    let flushed = sink.flush().await;
                    if flushed.is_ok() {
                        client.notified().await;
                    }
                    flushed
                }
            };
            if sent.is_err() {
                break;
            }
        }
    };
    let read = async {
        while let Some(Ok(frame)) = stream.next().await {
            let handled = match &frame {
                Message::Text(text) => hub.handle_text(id, text.as_str()),
                Message::Binary(data) => hub.handle_binary(id, data),
                Message::Close(_) => break,
                Message::Ping(_) => {
                    client.wake(); // so that the writer flushes the pong
                    Ok(())
                }
                _ => Ok(()),
            };
            if let Err(e) = handled {
                tracing::debug!("closing a view client that sent garbage: {e}");
                break;
            }
        }
    };
    tokio::select! {
        _ = write => {}
        _ = read => {}
    }
    // A closing handshake either way (the answer to the client's, or ours), but never a
    // wait on a client that reads nothing.
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, sink.close()).await;
}

fn message(frame: Outgoing) -> Message {
    match frame {
        Outgoing::Text(text) => Message::text(text),
        Outgoing::Binary(data) => Message::binary(data),
        Outgoing::Message { header, body } => {
            let mut data = Vec::with_capacity(header.len() + body.len());
            data.extend_from_slice(&header);
            data.extend_from_slice(&body);
            Message::binary(data)
        }
    }
}
