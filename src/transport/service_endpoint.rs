//! The serving end of a service on the node's TCPROS port: its publication (identity,
//! handler, limits, the connections it serves) and the task that serves one client
//! connection (header, then requests until the client leaves or the call was not
//! persistent). The TCPROS server hands it the connections that ask for a service, as it
//! hands topic connections to their publications.

use crate::connections::ConnectionSet;
use crate::wire::header::ConnectionHeader;
use crate::wire::service::{response_frame, sealed_response, service_context, ServiceIdentity};
use crate::wire::tcpros::{FrameClock, FrameDecoder, RateFloor};
use bytes::Bytes;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// What a raw handler gets (a serialized request) and returns (a serialized response, or
/// the error text sent to the client with `ok = 0`).
pub(crate) type RawHandler = Arc<
    dyn Fn(Bytes) -> Pin<Box<dyn Future<Output = Result<Vec<u8>, String>> + Send>> + Send + Sync,
>;

/// Limits of one advertised service.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The largest request accepted, in bytes; a client that announces a larger one is
    /// disconnected before its bytes are read.
    pub max_request: usize,
    /// Client connections held at once. When all are taken, the one idle longest is closed
    /// to make room (a connection whose call is being handled is never closed); when all
    /// are busy, the newcomer is refused.
    pub max_connections: usize,
    /// Bytes of requests larger than 64 KiB that may be read and handled at once, over all
    /// connections; a large request waits for its share before its bytes are read, so
    /// memory stays bounded however many clients send large requests.
    pub large_request_budget: usize,
    /// How fast a request's bytes must come once it has begun (or once its share of the
    /// budget was granted): a grace, then an average rate. A client below it is
    /// disconnected, so one that trickles a large request cannot hold the budget (or a
    /// connection) that other clients' requests wait for.
    pub request_rate_floor: RateFloor,
}

impl Default for ServerOptions {
    fn default() -> ServerOptions {
        ServerOptions {
            max_request: 64 << 20,
            max_connections: 256,
            large_request_budget: 64 << 20,
            request_rate_floor: DEFAULT_REQUEST_RATE_FLOOR,
        }
    }
}

/// Two seconds for a request's first bytes, then 256 KiB/s: roscpp and rospy clients write
/// a request in one go right after the header, and 256 KiB/s is a slow radio link.
pub const DEFAULT_REQUEST_RATE_FLOOR: RateFloor = RateFloor {
    grace: std::time::Duration::from_secs(2),
    min_rate: 256 << 10,
};

/// Requests up to this size never wait for the large-request budget.
const SMALL_REQUEST: usize = 64 << 10;

/// One advertised service of a node: what it is, its handler and its connections.
pub(crate) struct ServicePublication {
    pub(crate) identity: ServiceIdentity,
    /// The `rosrpc://host:port` URI registered with the master, kept byte for byte:
    /// unregistering needs the same string.
    pub(crate) uri: String,
    handler: RawHandler,
    options: ServerOptions,
    connections: Arc<ConnectionSet>,
    large_requests: Arc<Semaphore>,
    pub(crate) calls: AtomicU64,
}

impl ServicePublication {
    pub(crate) fn new(
        identity: ServiceIdentity,
        uri: String,
        handler: RawHandler,
        options: ServerOptions,
    ) -> ServicePublication {
        ServicePublication {
            identity,
            uri,
            handler,
            connections: ConnectionSet::new(options.max_connections),
            large_requests: Arc::new(Semaphore::new(
                options
                    .large_request_budget
                    .clamp(1, Semaphore::MAX_PERMITS),
            )),
            options,
            calls: AtomicU64::new(0),
        }
    }

    /// Closes every client connection (the service is going away).
    pub(crate) fn close(&self) {
        self.connections.close_all();
    }
}

/// Takes a client connection whose header named this service: answers the header and,
/// unless it was refused or a probe, serves its calls in a task of the service's own.
/// `leftover` holds bytes that came after the header (a roscpp client may not wait).
pub(crate) async fn serve_connection(
    service: Arc<ServicePublication>,
    mut stream: TcpStream,
    peer: SocketAddr,
    header: &ConnectionHeader,
    leftover: FrameDecoder,
    security: crate::secure::Security,
) {
    let mut accepted = match service.identity.accept(header) {
        Ok(accepted) => accepted,
        Err(text) => {
            tracing::warn!("refused a service client from {peer}: {text}");
            return refuse(&mut stream, text).await;
        }
    };
    // A secure connection when the client offered one with the same key; under
    // `require` a plain client (roscpp's, rospy's, a probe of rosservice) is refused.
    let context = service_context(&service.identity.service);
    let settling = match security.settle_offer(header, &context) {
        Ok(settling) => settling,
        Err(e) => {
            let text = e.to_string();
            tracing::warn!("refused a service client from {peer}: {text}");
            return refuse(&mut stream, text).await;
        }
    };
    settling.add_fields(&mut accepted.reply);
    settling.sign(&mut accepted.reply);
    let mut sealed = settling.link().map(|link| link.publisher_stream());
    if !service.connections.make_room() {
        let text = format!(
            "service {} is busy with {} calls",
            service.identity.service, service.options.max_connections
        );
        tracing::warn!("refused a service client from {peer}: {text}");
        return refuse(&mut stream, text).await;
    }
    if stream
        .write_all(&accepted.reply.encode_tcp())
        .await
        .is_err()
        || accepted.probe
    {
        return;
    }
    let _ = stream.set_nodelay(true);
    let connections = service.connections.clone();
    connections.spawn(move |activity| async move {
        let mut requests = leftover;
        let tag = sealed
            .as_ref()
            .map_or(0, |_| crate::wire::secure::stream::TAG_LEN);
        requests.set_max_frame(service.options.max_request.saturating_add(tag));
        loop {
            let body = match read_request(&service, &mut stream, &mut requests).await {
                Ok(Some(request)) => request,
                Ok(None) => return,
                Err(e) => return tracing::debug!("service client {peer}: {e}"),
            };
            let _busy = activity.busy();
            let (request, _budget) = body;
            let request = match &mut sealed {
                Some((_, opener)) => match opener.open(&request) {
                    Ok(opened) => Bytes::from(opened),
                    Err(e) => return tracing::warn!("service client {peer}: {e}"),
                },
                None => request,
            };
            service.calls.fetch_add(1, Ordering::Relaxed);
            let outcome = call_handler(&service.handler, request).await;
            let outcome = outcome.as_deref().map_err(String::as_str);
            let frame = match &mut sealed {
                Some((sealer, _)) => sealed_response(sealer, outcome),
                None => response_frame(outcome),
            };
            if let Err(e) = stream.write_all(&frame).await {
                return tracing::debug!("service client {peer}: {e}");
            }
            if !accepted.persistent {
                let _ = stream.shutdown().await;
                return;
            }
        }
    });
}

async fn refuse(stream: &mut TcpStream, text: String) {
    let _ = stream
        .write_all(&ConnectionHeader::new().with("error", text).encode_tcp())
        .await;
    let _ = stream.shutdown().await;
}

/// Reads the next request; `None` when the client closed between requests. A request
/// over [`SMALL_REQUEST`] first takes its share of the large-request budget (held, with
/// the returned permit, until its response is written). Once a request has begun (or its
/// share was granted), its bytes must keep up with [`ServerOptions::request_rate_floor`].
async fn read_request(
    service: &ServicePublication,
    stream: &mut TcpStream,
    requests: &mut FrameDecoder,
) -> Result<Option<(Bytes, Option<tokio::sync::OwnedSemaphorePermit>)>, String> {
    let mut clock = FrameClock::new(service.options.request_rate_floor);
    let mut permit = None;
    loop {
        if let Some(body) = requests.next_frame().map_err(|e| e.to_string())? {
            return Ok(Some((body, permit)));
        }
        let announced = requests.announced().unwrap_or(0);
        if permit.is_none() && announced > SMALL_REQUEST {
            let share = announced.min(service.options.large_request_budget);
            let share = u32::try_from(share).unwrap_or(u32::MAX);
            permit = Some(
                service
                    .large_requests
                    .clone()
                    .acquire_many_owned(share)
                    .await
                    .map_err(|e| e.to_string())?,
            );
            // Waiting for the budget is not the client's delay: the floor starts now.
            clock.restart(std::time::Instant::now(), requests.buffered());
        }
        let buffered = requests.buffered();
        let read = stream.read_buf(requests.buffer_mut());
        let read = match clock.deadline(std::time::Instant::now(), buffered) {
            Some(deadline) => match tokio::time::timeout_at(deadline.into(), read).await {
                Ok(read) => read,
                Err(_) => {
                    let waited = clock.started().map_or(0.0, |s| s.elapsed().as_secs_f64());
                    return Err(format!(
                        "request of {announced} bytes came slower than {} bytes/s \
                         ({buffered} bytes after {waited:.1} s); disconnected",
                        clock.floor().min_rate,
                    ));
                }
            },
            None => read.await,
        };
        match read {
            Ok(0) if requests.buffered() == 0 => return Ok(None),
            Ok(0) => return Err("closed in the middle of a request".into()),
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Runs the handler in a task of its own, so a handler that panics costs its client an
/// error response, not the connection.
async fn call_handler(handler: &RawHandler, request: Bytes) -> Result<Vec<u8>, String> {
    match tokio::spawn(handler(request)).await {
        Ok(outcome) => outcome,
        Err(e) if e.is_panic() => Err("service handler panicked".into()),
        Err(_) => Err("service handler was cancelled".into()),
    }
}
