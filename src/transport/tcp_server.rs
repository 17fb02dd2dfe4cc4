//! The node's TCPROS server: reads a subscriber's header, hands the connection to the
//! publication of its topic, or answers with an `error` header and closes.

use super::publication::Publication;
use crate::connections::{accept_with_backoff, ConnectionSet};
use crate::wire::header::{ConnectionHeader, HeaderLimits};
use crate::wire::tcpros::FrameDecoder;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Finds the publication of a topic.
pub(crate) type Lookup = Arc<dyn Fn(&str) -> Option<Arc<Publication>> + Send + Sync>;

/// How long a connecting subscriber has to send its header.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// Handshakes in progress at once; the oldest is dropped to make room for a new one, so
/// connections that never send a header cannot lock out subscribers that do.
pub(crate) const MAX_PENDING_HANDSHAKES: usize = 64;

/// The largest connection header a subscriber may send. roscpp allows a field up to 1 MB;
/// a header is a few hundred bytes plus the message definition, which even for large
/// message trees stays far below this. With [`MAX_PENDING_HANDSHAKES`] it bounds what
/// pending handshakes can hold to 64 MiB, and a header's buffer grows only with bytes
/// that actually arrived.
pub(crate) const MAX_HANDSHAKE_HEADER: usize = 1 << 20;

pub(crate) struct TcpRosServer {
    local_addr: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

impl TcpRosServer {
    pub(crate) async fn bind(addr: SocketAddr, lookup: Lookup) -> std::io::Result<TcpRosServer> {
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let accept = tokio::spawn(async move {
            // Owned here, so stopping the server drops the handshakes in progress with it.
            let pending = ConnectionSet::new(MAX_PENDING_HANDSHAKES);
            loop {
                let (stream, peer) = accept_with_backoff(&listener, "TCPROS server", || {
                    pending.close_one_idle();
                })
                .await;
                pending.make_room();
                let lookup = lookup.clone();
                pending.spawn(move |_| handshake(stream, peer, lookup));
            }
        });
        Ok(TcpRosServer { local_addr, accept })
    }

    pub(crate) fn port(&self) -> u16 {
        self.local_addr.port()
    }
}

impl Drop for TcpRosServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn read_header(stream: &mut TcpStream) -> Result<ConnectionHeader, String> {
    let limits = HeaderLimits {
        max_total: MAX_HANDSHAKE_HEADER,
        ..HeaderLimits::default()
    };
    let mut decoder = FrameDecoder::new(limits.max_total);
    loop {
        match decoder.next_frame() {
            Ok(Some(body)) => {
                return ConnectionHeader::decode_fields(&body, &limits).map_err(|e| e.to_string())
            }
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
        match stream.read_buf(decoder.buffer_mut()).await {
            Ok(0) => return Err("connection closed before its header".into()),
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

async fn handshake(mut stream: TcpStream, peer: SocketAddr, lookup: Lookup) {
    let header = match tokio::time::timeout(HEADER_TIMEOUT, read_header(&mut stream)).await {
        Ok(Ok(header)) => header,
        Ok(Err(e)) => return tracing::debug!("TCPROS connection from {peer}: {e}"),
        Err(_) => return tracing::debug!("TCPROS connection from {peer} sent no header"),
    };
    let caller = header.get("callerid").unwrap_or("").to_string();
    let verdict = if header.get("service").is_some() {
        Err("udpros nodes provide no services".to_string())
    } else {
        let topic = header.get("topic").unwrap_or("");
        match lookup(topic) {
            None => Err(format!(
                "received a connection for a nonexistent topic [{topic}] from [{peer}] [{caller}]."
            )),
            Some(publication) => publication
                .accept(&header)
                .map(|reply| (publication, reply)),
        }
    };
    match verdict {
        Ok((publication, reply)) => {
            if stream.write_all(&reply.encode_tcp()).await.is_ok() {
                publication.add_tcp_link(stream, &caller, header.get("tcp_nodelay") == Some("1"));
            }
        }
        Err(text) => {
            tracing::warn!("refused a subscriber: {text}");
            let _ = stream
                .write_all(&ConnectionHeader::new().with("error", text).encode_tcp())
                .await;
            let _ = stream.shutdown().await;
        }
    }
}
