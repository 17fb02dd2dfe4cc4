//! The node's TCPROS server: reads a subscriber's header, hands the connection to the
//! publication of its topic, or answers with an `error` header and closes.

use super::publication::Publication;
use crate::wire::header::{ConnectionHeader, HeaderLimits};
use crate::wire::tcpros::FrameDecoder;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Finds the publication of a topic.
pub type Lookup = Arc<dyn Fn(&str) -> Option<Arc<Publication>> + Send + Sync>;

/// How long a connecting subscriber has to send its header.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

pub struct TcpRosServer {
    local_addr: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

impl TcpRosServer {
    pub async fn bind(addr: SocketAddr, lookup: Lookup) -> std::io::Result<TcpRosServer> {
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(handshake(stream, peer, lookup.clone()));
            }
        });
        Ok(TcpRosServer { local_addr, accept })
    }

    pub fn port(&self) -> u16 {
        self.local_addr.port()
    }
}

impl Drop for TcpRosServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn read_header(stream: &mut TcpStream) -> Result<ConnectionHeader, String> {
    let limits = HeaderLimits::default();
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
