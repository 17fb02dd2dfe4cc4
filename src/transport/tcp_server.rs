//! The node's TCPROS server: reads a subscriber's header, hands the connection to the
//! publication of its topic, or answers with an `error` header and closes.

use super::publication::Publication;
use super::service_endpoint::{serve_connection, ServicePublication};
use crate::connections::{accept_with_backoff, ConnectionSet};
use crate::wire::header::{ConnectionHeader, HeaderLimits};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// What a connecting peer may ask for: a node's publications and services.
pub(crate) trait Endpoints: Send + Sync {
    /// The publication of a topic.
    fn publication(&self, topic: &str) -> Option<Arc<Publication>>;
    /// An advertised service.
    fn service(&self, service: &str) -> Option<Arc<ServicePublication>>;
    /// How the node secures its links.
    fn security(&self) -> crate::secure::Security;
}

pub(crate) type Lookup = Arc<dyn Endpoints>;

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
            while let Some((stream, peer)) = accept_with_backoff(&listener, "TCPROS server", || {
                pending.close_one_idle();
            })
            .await
            {
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

async fn handshake(mut stream: TcpStream, peer: SocketAddr, lookup: Lookup) {
    let limits = HeaderLimits {
        max_total: MAX_HANDSHAKE_HEADER,
        ..HeaderLimits::default()
    };
    let (header, leftover) = match tokio::time::timeout(
        HEADER_TIMEOUT,
        super::read_header(&mut stream, &limits),
    )
    .await
    {
        Ok(Ok(read)) => read,
        Ok(Err(e)) => return tracing::debug!("TCPROS connection from {peer}: {e}"),
        Err(_) => return tracing::debug!("TCPROS connection from {peer} sent no header"),
    };
    let caller = header.get("callerid").unwrap_or("").to_string();
    // A topic first, then a service, as both ROS servers dispatch.
    let verdict = match (header.get("topic"), header.get("service")) {
        (Some(topic), _) => match lookup.publication(topic) {
            None => Err(format!(
                "received a connection for a nonexistent topic [{topic}] from [{peer}] [{caller}]."
            )),
            Some(publication) => publication
                .accept(&header)
                .and_then(|reply| {
                    publication.admit_any()?;
                    publication.admit_host(peer.ip())?;
                    Ok(reply)
                })
                .map_err(|refusal| refusal.to_string())
                .and_then(|mut reply| {
                    // A secure link when the subscriber offered one with the same key;
                    // under `require` a plain subscriber is refused, told why.
                    let context = crate::wire::secure::stream::tcp_context(topic);
                    let settling = lookup
                        .security()
                        .settle_offer(&header, &context)
                        .map_err(|e| e.to_string())?;
                    settling.add_fields(&mut reply);
                    settling.sign(&mut reply);
                    Ok((publication, reply, settling.link().cloned()))
                }),
        },
        (None, Some(service)) => match lookup.service(service) {
            Some(service) => {
                let security = lookup.security();
                return serve_connection(service, stream, peer, &header, leftover, security).await;
            }
            None => Err(format!(
                "received a tcpros connection for a nonexistent service [{service}]."
            )),
        },
        (None, None) => Err("no topic or service name detected".into()),
    };
    match verdict {
        Ok((publication, reply, secure)) => {
            if stream.write_all(&reply.encode_tcp()).await.is_ok() {
                publication.add_tcp_link(stream, &caller, &header, secure.as_ref());
            }
        }
        Err(text) => {
            tracing::warn!("refused a TCPROS connection: {text}");
            let _ = stream
                .write_all(&ConnectionHeader::new().with("error", text).encode_tcp())
                .await;
            let _ = stream.shutdown().await;
        }
    }
}
