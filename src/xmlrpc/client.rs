//! An XML-RPC client on hyper: pooled keep-alive connections, connect and request timeouts,
//! and no `Accept-Encoding` (Python servers gzip large replies for clients that ask).

use super::parse::{parse_response, ParseError, ParseLimits};
use super::proof::{CallRefused, CallSigner, PROOF_HEADER};
use super::write::write_call;
use super::{Fault, Value};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::fmt;
use std::time::Duration;

/// Why an XML-RPC call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The URI does not parse as `http://host:port/`.
    InvalidUri(String),
    /// No connection, or it broke (the peer is down or unreachable).
    Transport(String),
    /// No answer within the request timeout.
    Timeout,
    /// This process is out of file descriptors (EMFILE, ENFILE): the peer was never tried,
    /// and the same call may well work a moment later.
    OutOfDescriptors,
    /// The server answered with this HTTP status instead of 200.
    Http(u16),
    /// The answer is not XML-RPC.
    Parse(ParseError),
    /// The server answered with a fault.
    Fault(Fault),
    /// The answer's proof of the graph key is wrong, or missing where the policy is
    /// `require`: it is not taken.
    Unproven(CallRefused),
    /// No random nonce could be drawn to sign the call.
    NoRandomness(String),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::InvalidUri(u) => write!(f, "invalid XML-RPC URI '{u}'"),
            CallError::Transport(e) => write!(f, "cannot reach the XML-RPC server: {e}"),
            CallError::Timeout => f.write_str("XML-RPC call timed out"),
            CallError::OutOfDescriptors => {
                f.write_str("no file descriptor left to reach the XML-RPC server")
            }
            CallError::Http(status) => write!(f, "XML-RPC server answered HTTP {status}"),
            CallError::Parse(e) => write!(f, "bad XML-RPC response: {e}"),
            CallError::Fault(fault) => fault.fmt(f),
            CallError::Unproven(CallRefused::Missing) => f.write_str(
                "XML-RPC answer refused: it carries no proof of the graph key (a stock ROS \
                 peer, or udpros without the key) and this node's security policy is require",
            ),
            CallError::Unproven(why) => write!(f, "XML-RPC answer refused: {why}"),
            CallError::NoRandomness(e) => write!(f, "cannot sign the XML-RPC call: {e}"),
        }
    }
}

impl std::error::Error for CallError {}

/// Cheap to clone; clones share the connection pool.
#[derive(Clone)]
pub struct XmlRpcClient {
    client: Client<HttpConnector, Full<Bytes>>,
    request_timeout: Duration,
    signer: Option<CallSigner>,
}

impl fmt::Debug for XmlRpcClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XmlRpcClient")
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

impl Default for XmlRpcClient {
    fn default() -> Self {
        XmlRpcClient::new(Duration::from_secs(2), Duration::from_secs(10))
    }
}

impl XmlRpcClient {
    /// A client with these timeouts; connections are pooled and kept alive.
    pub fn new(connect_timeout: Duration, request_timeout: Duration) -> XmlRpcClient {
        Self::build(connect_timeout, request_timeout, usize::MAX)
    }

    /// A client that closes each connection after its call: for a caller that reaches
    /// thousands of servers once each (the master notifying nodes), where a pool would hold
    /// one idle descriptor per server.
    pub fn unpooled(connect_timeout: Duration, request_timeout: Duration) -> XmlRpcClient {
        Self::build(connect_timeout, request_timeout, 0)
    }

    fn build(connect_timeout: Duration, request_timeout: Duration, idle: usize) -> XmlRpcClient {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(idle)
            .build(connector);
        XmlRpcClient {
            client,
            request_timeout,
            signer: None,
        }
    }

    /// The same pool with another request timeout.
    pub fn with_timeout(&self, request_timeout: Duration) -> XmlRpcClient {
        XmlRpcClient {
            client: self.client.clone(),
            request_timeout,
            signer: self.signer.clone(),
        }
    }

    /// The same pool, signing every call with the graph key and checking the answers as
    /// `security`'s policy says ([`super::proof`]); with security off, unchanged.
    pub fn signed(mut self, security: &crate::secure::Security) -> XmlRpcClient {
        self.signer = CallSigner::new(security);
        self
    }

    /// Calls `method` at `uri` (`http://host:port/`) and returns its value, or the fault.
    pub async fn call(
        &self,
        uri: &str,
        method: &str,
        params: Vec<Value>,
    ) -> Result<Value, CallError> {
        let parsed: hyper::Uri = crate::host::bracket_ipv6_uri(uri)
            .parse()
            .map_err(|_| CallError::InvalidUri(uri.to_string()))?;
        if parsed.scheme_str() != Some("http") || parsed.authority().is_none() {
            return Err(CallError::InvalidUri(uri.to_string()));
        }
        let body = Bytes::from(write_call(method, &params));
        let signed = match &self.signer {
            Some(signer) => Some(
                signer
                    .sign(&body)
                    .map_err(|e| CallError::NoRandomness(e.to_string()))?,
            ),
            None => None,
        };
        let mut request = hyper::Request::post(parsed)
            .header(hyper::header::CONTENT_TYPE, "text/xml")
            .header(hyper::header::USER_AGENT, "udpros");
        if let Some(signed) = &signed {
            request = request.header(PROOF_HEADER, signed.header.as_str());
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| CallError::InvalidUri(e.to_string()))?;
        let limits = ParseLimits::CLIENT;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| transport_error(&e))?;
            let status = response.status();
            let proof = response
                .headers()
                .get(PROOF_HEADER)
                .map(|v| v.to_str().unwrap_or("").to_string());
            let body = Limited::new(response.into_body(), limits.max_body)
                .collect()
                .await
                .map_err(|e| CallError::Transport(e.to_string()))?
                .to_bytes();
            if !status.is_success() {
                return Err(CallError::Http(status.as_u16()));
            }
            Ok((proof, body))
        };
        let (proof, body) = tokio::time::timeout(self.request_timeout, exchange)
            .await
            .map_err(|_| CallError::Timeout)??;
        let answer = parse_response(&body, &limits).map_err(CallError::Parse)?;
        if let (Some(signer), Some(signed)) = (&self.signer, &signed) {
            signer
                .check_answer(signed, proof.as_deref(), &body, is_refusal(&answer))
                .map_err(CallError::Unproven)?;
        }
        answer.map_err(CallError::Fault)
    }
}

/// Whether an answer says the call failed (a fault, or a ROS status triple whose code is
/// not 1): such an answer is passed on unsigned, as the peer's word, never as data.
fn is_refusal(answer: &Result<Value, super::Fault>) -> bool {
    match answer {
        Err(_) => true,
        Ok(Value::Array(triple)) => triple.first().and_then(Value::as_i32) != Some(1),
        Ok(_) => false,
    }
}

/// A failed request as a [`CallError`]: [`CallError::OutOfDescriptors`] when the cause is
/// this process's descriptor limit, [`CallError::Transport`] with the whole chain otherwise.
fn transport_error(e: &(dyn std::error::Error + 'static)) -> CallError {
    let mut source = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                return CallError::OutOfDescriptors;
            }
        }
        source = s.source();
    }
    CallError::Transport(error_chain(e))
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
