//! The client side: looking a service up, connecting, the header exchange, and calls
//! over a connection used once or kept (persistent).

use super::Service;
use crate::api::ApiError;
use crate::node::{Node, WeakNode};
use crate::wire::header::{ConnectionHeader, HeaderLimits};
use crate::wire::secure::stream::StreamSealer;
use crate::wire::service::{self as rosrpc, ReplyError, Response, ResponseDecoder};
use crate::wire::tcpros::{FrameClock, FrameDecoder, RateFloor};
use bytes::Bytes;
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How a client calls.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Keep one connection for every call (looked up and opened at the first call, opened
    /// again after it fails); otherwise each call looks the service up and connects anew,
    /// as roscpp and rospy do by default.
    pub persistent: bool,
    /// How long a whole call may take, connection included; `None`: only the deadlines
    /// below apply.
    pub timeout: Option<Duration>,
    /// How long connecting and the header exchange may take (a server that accepts and
    /// says nothing, or trickles its header, fails the call then). Default 5 s, about
    /// when rosservice gives up on a silent server.
    pub connect_timeout: Duration,
    /// How long the handler may take, from the request sent to the response's first
    /// byte; `None` waits as long as the server takes (as roscpp and rospy always do).
    /// Default 60 s: set `None` for services that run longer.
    pub response_timeout: Option<Duration>,
    /// How fast a response must come once it has begun: a server that trickles it is
    /// given up on after the grace.
    pub response_rate_floor: RateFloor,
    /// The largest response accepted, in bytes.
    pub max_response: usize,
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            persistent: false,
            timeout: None,
            connect_timeout: Duration::from_secs(5),
            response_timeout: Some(Duration::from_secs(60)),
            response_rate_floor: super::DEFAULT_REQUEST_RATE_FLOOR,
            max_response: 256 << 20,
        }
    }
}

impl ClientOptions {
    /// Persistent calls, each with at most `timeout`.
    pub fn persistent() -> ClientOptions {
        ClientOptions {
            persistent: true,
            ..ClientOptions::default()
        }
    }

    /// These options with a call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> ClientOptions {
        self.timeout = Some(timeout);
        self
    }

    /// These options with a handler deadline (`None`: wait as long as the server takes).
    pub fn with_response_timeout(mut self, timeout: Option<Duration>) -> ClientOptions {
        self.response_timeout = timeout;
        self
    }
}

/// Why a call failed.
#[derive(Debug)]
pub enum ServiceError {
    /// The master knows no provider of the service.
    NotFound(String),
    /// The master could not be asked.
    Master(ApiError),
    /// The server refused the connection; its reason (an md5 mismatch, an unknown
    /// service, a full server).
    Refused(String),
    /// The handler failed; the text the server sent (may be empty).
    Failed(String),
    /// The call took longer than its timeout.
    Timeout(Duration),
    /// Connecting, sending or receiving failed (the server went away, for one).
    Io(std::io::Error),
    /// The server sent something that is not a valid header or response.
    Protocol(String),
    /// The request could not be serialized, or the response not decoded.
    Codec(crate::wire::Error),
    /// The node was shut down.
    Shutdown,
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceError::NotFound(s) => write!(f, "service [{s}] is not available"),
            ServiceError::Master(e) => write!(f, "cannot look the service up: {e}"),
            ServiceError::Refused(text) => write!(f, "the server refused the call: {text}"),
            ServiceError::Failed(text) => write!(f, "service responded with an error: {text}"),
            ServiceError::Timeout(t) => write!(f, "no response within {t:?}"),
            ServiceError::Io(e) => write!(f, "transport error: {e}"),
            ServiceError::Protocol(what) => write!(f, "protocol error: {what}"),
            ServiceError::Codec(e) => write!(f, "cannot encode or decode the message: {e}"),
            ServiceError::Shutdown => f.write_str("the node is shut down"),
        }
    }
}

impl std::error::Error for ServiceError {}

impl From<std::io::Error> for ServiceError {
    fn from(e: std::io::Error) -> Self {
        ServiceError::Io(e)
    }
}

/// An open connection to a server, past the header exchange.
struct Connection {
    stream: TcpStream,
    responses: ResponseDecoder,
    /// The server's reply header.
    header: ConnectionHeader,
    /// On a secure connection, what seals the requests (the decoder opens the responses).
    sealer: Option<StreamSealer>,
}

/// A client's offer of a secure connection: its node's security and its fresh nonce.
struct SecureOffer {
    security: crate::secure::Security,
    nonce: [u8; crate::secure::NONCE_LEN],
}

impl SecureOffer {
    /// The offer for a client of `node` (a plain one when the node's policy is off).
    fn of(node: &WeakNode) -> Result<SecureOffer, ServiceError> {
        let security = node.security().ok_or(ServiceError::Shutdown)?;
        let nonce = security
            .link_nonce()
            .map_err(|e| ServiceError::Protocol(e.to_string()))?;
        Ok(SecureOffer { security, nonce })
    }

    /// Adds the offer to the client's `header` and signs it (nothing with security off).
    fn add_to(&self, header: &mut ConnectionHeader) {
        use crate::wire::secure::{handshake, proof};
        let side = self.security.side();
        for (field, value) in handshake::offer_fields(side, &self.nonce) {
            header.insert(field, value);
        }
        if let Some(key) = side.key {
            proof::sign(key, proof::Role::Subscriber, header, None);
        }
    }
}

impl Connection {
    /// Whether the server closed a kept connection (it restarted, or it dropped idle
    /// clients) since the last call: then a call opens a new one instead of failing.
    fn closed_by_server(&self) -> bool {
        let mut probe = [0u8; 1];
        match self.stream.try_read(&mut probe) {
            Ok(_) => true, // EOF, or bytes nobody asked for: either way, start afresh
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        }
    }

    /// Sends `request` and reads its response: the first byte within `response_timeout`
    /// (if any), the rest at `floor` or faster.
    async fn call(
        &mut self,
        request: &[u8],
        response_timeout: Option<Duration>,
        floor: RateFloor,
    ) -> Result<Bytes, ServiceError> {
        let mut frame = Vec::with_capacity(4 + request.len() + 16);
        match &mut self.sealer {
            Some(sealer) => sealer.seal_into(request, &mut frame),
            None => {
                frame.extend_from_slice(&(request.len() as u32).to_le_bytes());
                frame.extend_from_slice(request);
            }
        }
        self.stream.write_all(&frame).await?;
        let sent = tokio::time::Instant::now();
        let mut clock = FrameClock::new(floor);
        loop {
            match self.responses.next_response() {
                Ok(Some(Response::Ok(body))) => return Ok(body),
                Ok(Some(Response::Failed(text))) => return Err(ServiceError::Failed(text)),
                Ok(None) => {}
                Err(e) => return Err(ServiceError::Protocol(e.to_string())),
            }
            let buffered = self.responses.buffered();
            // Before the first byte the handler's time counts; after it, the floor.
            let deadline = match clock.deadline(std::time::Instant::now(), buffered) {
                Some(deadline) => Some(deadline.into()),
                None => response_timeout.and_then(|limit| sent.checked_add(limit)),
            };
            let read = self.stream.read_buf(self.responses.buffer_mut());
            let read = match deadline {
                Some(deadline) => match tokio::time::timeout_at(deadline, read).await {
                    Ok(read) => read,
                    Err(_) if clock.started().is_some() => {
                        return Err(ServiceError::Protocol(format!(
                            "the response came slower than {} bytes/s ({buffered} bytes so far)",
                            floor.min_rate
                        )))
                    }
                    Err(_) => {
                        return Err(ServiceError::Timeout(response_timeout.unwrap_or_default()))
                    }
                },
                None => read.await,
            };
            if read? == 0 {
                return Err(ServiceError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the server closed the connection before responding",
                )));
            }
        }
    }
}

/// `host` and `port` of a `rosrpc://host:port` URI (an IPv6 host in brackets).
pub(crate) fn parse_rosrpc_uri(uri: &str) -> Option<(String, u16)> {
    let rest = uri.strip_prefix("rosrpc://")?;
    let authority = rest.split('/').next()?;
    let (host, port) = authority.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = port.parse().ok()?;
    (!host.is_empty()).then(|| (host.to_string(), port))
}

/// Connects to the server at `uri` and exchanges headers, within `limit`; `offer` makes
/// the connection secure when the server holds the key too.
async fn connect(
    uri: &str,
    header: &ConnectionHeader,
    offer: &SecureOffer,
    max_response: usize,
    limit: Duration,
) -> Result<Connection, ServiceError> {
    tokio::time::timeout(limit, connect_now(uri, header, offer, max_response))
        .await
        .unwrap_or_else(|_| {
            Err(ServiceError::Protocol(format!(
                "{uri} did not complete the connection header within {limit:?}"
            )))
        })
}

async fn connect_now(
    uri: &str,
    header: &ConnectionHeader,
    offer: &SecureOffer,
    max_response: usize,
) -> Result<Connection, ServiceError> {
    use crate::wire::secure::handshake::{self, Settled};
    let (host, port) = parse_rosrpc_uri(uri)
        .ok_or_else(|| ServiceError::Protocol(format!("not a rosrpc URI: {uri}")))?;
    let mut stream = TcpStream::connect((host.as_str(), port)).await?;
    let _ = stream.set_nodelay(true);
    crate::socket::set_keepalive(&stream);
    let mut header = header.clone();
    offer.add_to(&mut header);
    stream.write_all(&header.encode_tcp()).await?;
    let (reply, leftover) = crate::transport::read_header(&mut stream, &HeaderLimits::default())
        .await
        .map_err(|e| ServiceError::Protocol(e.to_string()))?;
    rosrpc::check_reply(&reply).map_err(|e| match e {
        ReplyError::Refused(text) => ServiceError::Refused(text),
        other => ServiceError::Protocol(other.to_string()),
    })?;
    let service = header.get("service").unwrap_or_default();
    let context = rosrpc::service_context(service);
    let mut responses = ResponseDecoder::new(max_response);
    let sealer = match handshake::accept(offer.security.side(), &offer.nonce, &reply, &context) {
        Ok(Settled::Secure(link)) => {
            let (opener, sealer) = link.subscriber_stream();
            responses.open_with(opener);
            Some(sealer)
        }
        Ok(Settled::Plain) => None,
        Err(refused) => {
            return Err(ServiceError::Refused(format!(
                "secure link refused: {refused}"
            )))
        }
    };
    seed(&mut responses, leftover);
    Ok(Connection {
        stream,
        responses,
        header: reply,
        sealer,
    })
}

/// Hands bytes read past the header to the response decoder.
fn seed(responses: &mut ResponseDecoder, mut leftover: FrameDecoder) {
    let rest = leftover.buffer_mut().split();
    responses.buffer_mut().extend_from_slice(&rest);
}

/// A client of one service, with serialized requests and responses (the md5sum may be
/// `*`, which every server accepts).
pub struct RawServiceClient {
    node: WeakNode,
    caller_id: String,
    service: String,
    md5sum: String,
    options: ClientOptions,
    /// The kept connection of a persistent client; calls on it take turns.
    kept: tokio::sync::Mutex<Option<Connection>>,
}

impl RawServiceClient {
    /// The resolved service name.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// Calls with a serialized request; the serialized response.
    pub async fn call(&self, request: &[u8]) -> Result<Bytes, ServiceError> {
        match self.options.timeout {
            Some(t) => tokio::time::timeout(t, self.call_now(request))
                .await
                .unwrap_or(Err(ServiceError::Timeout(t))),
            None => self.call_now(request).await,
        }
    }

    /// The server's header (its `type` and `md5sum`) without calling: the probe that
    /// `rosservice type` and `wait_for_service` make.
    pub async fn probe(&self) -> Result<ConnectionHeader, ServiceError> {
        let uri = self.lookup().await?;
        let header = rosrpc::probe_header(&self.caller_id, &self.service);
        let offer = SecureOffer::of(&self.node)?;
        Ok(
            connect(&uri, &header, &offer, 0, self.options.connect_timeout)
                .await?
                .header,
        )
    }

    /// Waits until the service is registered and answers a probe, or `timeout` passes
    /// (the last error then).
    pub async fn wait_for_service(&self, timeout: Duration) -> Result<(), ServiceError> {
        let now = tokio::time::Instant::now();
        let deadline = now
            .checked_add(timeout)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let error = match tokio::time::timeout(left, self.probe()).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) => e,
                Err(_) => ServiceError::Timeout(timeout),
            };
            if tokio::time::Instant::now() + PROBE_INTERVAL >= deadline {
                return Err(error);
            }
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
    }

    async fn lookup(&self) -> Result<String, ServiceError> {
        let master = self.node.master().ok_or(ServiceError::Shutdown)?;
        match master.lookup_service(&self.service).await {
            Ok(uri) => Ok(uri),
            Err(ApiError::Status { .. }) => Err(ServiceError::NotFound(self.service.clone())),
            Err(e) => Err(ServiceError::Master(e)),
        }
    }

    async fn open(&self) -> Result<Connection, ServiceError> {
        let uri = self.lookup().await?;
        let header = rosrpc::call_header(
            &self.caller_id,
            &self.service,
            &self.md5sum,
            self.options.persistent,
        );
        let offer = SecureOffer::of(&self.node)?;
        connect(
            &uri,
            &header,
            &offer,
            self.options.max_response,
            self.options.connect_timeout,
        )
        .await
    }

    async fn exchange(
        &self,
        connection: &mut Connection,
        request: &[u8],
    ) -> Result<Bytes, ServiceError> {
        let o = &self.options;
        connection
            .call(request, o.response_timeout, o.response_rate_floor)
            .await
    }

    async fn call_now(&self, request: &[u8]) -> Result<Bytes, ServiceError> {
        if !self.options.persistent {
            let mut connection = self.open().await?;
            return self.exchange(&mut connection, request).await;
        }
        let mut kept = self.kept.lock().await;
        if kept.as_ref().is_some_and(Connection::closed_by_server) {
            *kept = None;
        }
        let connection = match kept.as_mut() {
            Some(c) => c,
            None => kept.insert(self.open().await?),
        };
        let outcome = self.exchange(connection, request).await;
        // A failed handler leaves the connection usable; anything else ends it, and the
        // next call opens a new one.
        if matches!(outcome, Err(ref e) if !matches!(e, ServiceError::Failed(_))) {
            *kept = None;
        }
        outcome
    }
}

/// Between probes of `wait_for_service`.
const PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// A client of a service of type `S`.
pub struct ServiceClient<S: Service> {
    raw: RawServiceClient,
    _type: PhantomData<fn() -> S>,
}

impl<S: Service> ServiceClient<S> {
    /// Calls the service.
    pub async fn call(&self, request: &S::Request) -> Result<S::Response, ServiceError> {
        let body = crate::wire::to_vec(request).map_err(ServiceError::Codec)?;
        let response = self.raw.call(&body).await?;
        crate::wire::from_bytes(&response).map_err(ServiceError::Codec)
    }

    /// Calls the service, failing after `timeout` whatever the client's options say.
    pub async fn call_timeout(
        &self,
        request: &S::Request,
        timeout: Duration,
    ) -> Result<S::Response, ServiceError> {
        tokio::time::timeout(timeout, self.call(request))
            .await
            .unwrap_or(Err(ServiceError::Timeout(timeout)))
    }

    /// Waits until the service is registered and answers a probe, or `timeout` passes.
    pub async fn wait_for_service(&self, timeout: Duration) -> Result<(), ServiceError> {
        self.raw.wait_for_service(timeout).await
    }

    /// The resolved service name.
    pub fn service(&self) -> &str {
        self.raw.service()
    }

    /// The untyped client underneath.
    pub fn raw(&self) -> &RawServiceClient {
        &self.raw
    }
}

impl Node {
    /// A client of the service `name` (resolved as a node name: `~x` is this node's own)
    /// of type `S`. Nothing is looked up before the first call.
    pub fn service_client<S: Service>(
        &self,
        name: &str,
        options: ClientOptions,
    ) -> ServiceClient<S> {
        ServiceClient {
            raw: self.service_client_raw(name, S::MD5SUM, options),
            _type: PhantomData,
        }
    }

    /// A client of the service `name` with serialized requests and responses, which
    /// declares the service md5sum `md5sum` (`*` for any).
    pub fn service_client_raw(
        &self,
        name: &str,
        md5sum: &str,
        options: ClientOptions,
    ) -> RawServiceClient {
        RawServiceClient {
            node: self.downgrade(),
            caller_id: self.name().to_string(),
            service: self.resolve_name(name),
            md5sum: md5sum.to_string(),
            options,
            kept: tokio::sync::Mutex::new(None),
        }
    }

    /// Waits until `name` is served, or `timeout` passes.
    pub async fn wait_for_service(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<(), ServiceError> {
        self.service_client_raw(name, "*", ClientOptions::default())
            .wait_for_service(timeout)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rosrpc_uris_parse_as_rospy_reads_them_and_ipv6_too() {
        assert_eq!(
            parse_rosrpc_uri("rosrpc://host:1234"),
            Some(("host".into(), 1234))
        );
        assert_eq!(
            parse_rosrpc_uri("rosrpc://127.0.0.1:80/"),
            Some(("127.0.0.1".into(), 80))
        );
        assert_eq!(
            parse_rosrpc_uri("rosrpc://[::1]:99"),
            Some(("::1".into(), 99))
        );
        for bad in [
            "http://h:1",
            "rosrpc://h",
            "rosrpc://:5",
            "rosrpc://h:99999",
            "rosrpc://h:x",
        ] {
            assert_eq!(parse_rosrpc_uri(bad), None, "{bad}");
        }
    }
}
