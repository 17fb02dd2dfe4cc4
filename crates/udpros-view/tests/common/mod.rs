//! What the view's tests share: a graph of their own on loopback, a WebSocket client of
//! the view, and ways to wait for its frames.
#![allow(dead_code)] // each test file uses its own part

use futures_util::StreamExt;
use serde_json::Value;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use udpros::master::Master;
use udpros::node::Node;
use udpros_view::{View, ViewOptions};

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// An embedded master on loopback, of this test's own.
pub async fn local_master() -> Master {
    Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap()
}

/// A view on a free loopback port that reads the graph ten times a second.
pub fn local_view() -> ViewOptions {
    ViewOptions {
        address: Some("127.0.0.1".parse().unwrap()),
        port: 0,
        graph_poll: Duration::from_millis(100),
        ..ViewOptions::default()
    }
}

pub async fn node(master: &Master, name: &str) -> Node {
    Node::new(
        name,
        [
            format!("__master:={}", master.uri()),
            "__ip:=127.0.0.1".into(),
            format!("__name:={name}"),
        ],
    )
    .await
    .unwrap()
}

pub async fn connect(view: &View, subprotocol: Option<&str>) -> Result<Socket, String> {
    connect_to(&format!("ws://{}/", view.local_addr()), subprotocol).await
}

/// A client of the view at `url` (which may carry `?token=`).
pub async fn connect_to(url: &str, subprotocol: Option<&str>) -> Result<Socket, String> {
    let mut request = url.into_client_request().unwrap();
    if let Some(protocol) = subprotocol {
        request
            .headers_mut()
            .insert("sec-websocket-protocol", protocol.parse().unwrap());
    }
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(socket, _)| socket)
        .map_err(|e| e.to_string())
}

/// The next frame that `pick` takes, skipping the others, within 10 s each.
pub async fn next_frame<T>(socket: &mut Socket, pick: impl Fn(Message) -> Option<T>) -> T {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("a frame within 10 s")
            .expect("the connection stays open")
            .unwrap();
        if let Some(picked) = pick(frame) {
            return picked;
        }
    }
}

/// Sends a text request.
pub async fn send(socket: &mut Socket, request: Value) {
    use futures_util::SinkExt;
    socket
        .send(Message::text(request.to_string()))
        .await
        .unwrap();
}

/// Reads text frames until one has `op`.
pub async fn next_op(socket: &mut Socket, op: &str) -> Value {
    loop {
        let message = next_json(socket).await;
        if message["op"] == op {
            return message;
        }
    }
}

/// The next text frame as JSON, skipping binary ones.
pub async fn next_json(socket: &mut Socket) -> Value {
    next_frame(socket, |frame| match frame {
        Message::Text(text) => Some(serde_json::from_str(text.as_str()).unwrap()),
        _ => None,
    })
    .await
}

/// The next binary frame, skipping text ones.
pub async fn next_binary(socket: &mut Socket) -> Vec<u8> {
    next_frame(socket, |frame| match frame {
        Message::Binary(data) => Some(data.to_vec()),
        _ => None,
    })
    .await
}

/// Reads advertisements until one has `topic`; its channel.
pub async fn channel_of(socket: &mut Socket, topic: &str) -> Value {
    loop {
        let message = next_json(socket).await;
        if message["op"] == "advertise" {
            let channels = message["channels"].as_array().unwrap();
            if let Some(channel) = channels.iter().find(|c| c["topic"] == topic) {
                return channel.clone();
            }
        }
    }
}

pub async fn eventually(mut ready: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if ready() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ready()
}

/// A plain HTTP GET of `path`: the status line's code and the body.
pub async fn http_get(view: &View, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = TcpStream::connect(view.local_addr()).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: view\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}
