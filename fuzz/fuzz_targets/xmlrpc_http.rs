//! Whole HTTP requests, as any peer can send them, into the XML-RPC server code (hyper,
//! the body limits, the parser, the writer) with a handler that runs the master's
//! parameter tree: no panic, no hang, and whatever comes back is an HTTP response.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use udpros::master::ParamTree;
use udpros::xmlrpc::{serve_stream, Handler, HandlerFuture, ParseLimits, ServerLimits, Value};

/// The parameter server's methods on a tree, without the network (a fuzzer must not make
/// the master call out to the URIs it invents).
struct Params(Mutex<ParamTree>);

impl Handler for Params {
    fn call(&self, method: &str, params: Vec<Value>) -> HandlerFuture {
        let mut tree = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = params
            .get(1)
            .and_then(Value::as_str)
            .unwrap_or("/")
            .to_string();
        let result = match method {
            "setParam" => {
                let value = params.get(2).cloned().unwrap_or(Value::Int(0));
                Value::Bool(tree.set(&key, value).is_ok())
            }
            "getParam" => tree.get(&key).unwrap_or(Value::Int(0)),
            "deleteParam" => Value::Bool(tree.delete(&key).is_ok()),
            "hasParam" => Value::Bool(tree.has(&key)),
            "searchParam" => Value::from(
                tree.search("/ns/node", &key)
                    .ok()
                    .flatten()
                    .unwrap_or_default(),
            ),
            "getParamNames" => Value::from(tree.names()),
            _ => Value::Array(params),
        };
        Box::pin(async move { Ok(result) })
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    else {
        return;
    };
    let limits = ServerLimits {
        parse: ParseLimits {
            max_body: 1 << 16,
            max_depth: 32,
            max_values: 10_000,
        },
        large_body_budget: 1 << 16,
        header_timeout: Duration::from_secs(1),
        body_timeout: Duration::from_secs(1),
        ..ServerLimits::default()
    };
    let handler: Arc<dyn Handler> = Arc::new(Params(Mutex::new(ParamTree::default())));
    runtime.block_on(async move {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let served = tokio::spawn(serve_stream(server, handler, limits));
        // Time is paused: these limits pass in an instant once everything waits.
        let _ = tokio::time::timeout(Duration::from_secs(5), client.write_all(data)).await;
        let _ = client.shutdown().await;
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut out)).await;
        served.abort();
        assert!(
            out.is_empty() || out.starts_with(b"HTTP/1."),
            "not HTTP: {:?}",
            &out[..out.len().min(64)]
        );
    });
});
