//! Services between udpros nodes through the embedded master: typed and raw calls,
//! persistent and not, handler errors, md5 refusals, concurrency, big requests, limits,
//! and the logger services every node serves.

use std::time::{Duration, Instant};
use udpros::master::Master;
use udpros::msgs::std_srvs::{
    SetBool, SetBoolRequest, SetBoolResponse, Trigger, TriggerRequest, TriggerResponse,
};
use udpros::node::Node;
use udpros::service::{ClientOptions, ServiceError};

async fn master() -> Master {
    Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .expect("master starts")
}

async fn node(master: &Master, name: &str) -> Node {
    udpros_testkit::node(master.uri(), name).await
}

async fn set_bool_server(node: &Node, name: &str) -> udpros::service::ServiceServer<SetBool> {
    node.advertise_service::<SetBool, _, _>(name, |req: SetBoolRequest| async move {
        if req.data {
            Ok(SetBoolResponse {
                success: true,
                message: "on".into(),
            })
        } else {
            Err("refusing to switch off".into())
        }
    })
    .await
    .expect("advertise")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_calls_persistent_and_not_with_handler_errors() {
    let master = master().await;
    let server_node = node(&master, "server").await;
    let _server = set_bool_server(&server_node, "/switch").await;
    let client_node = node(&master, "client").await;
    for options in [ClientOptions::default(), ClientOptions::persistent()] {
        let client = client_node.service_client::<SetBool>("/switch", options.clone());
        for _ in 0..3 {
            let answer = client.call(&SetBoolRequest { data: true }).await.unwrap();
            assert_eq!((answer.success, answer.message.as_str()), (true, "on"));
            match client.call(&SetBoolRequest { data: false }).await {
                Err(ServiceError::Failed(text)) => assert_eq!(text, "refusing to switch off"),
                other => panic!("expected the handler's error, got {other:?}"),
            }
        }
    }
    let missing = client_node.service_client::<Trigger>("/nobody", ClientOptions::default());
    assert!(matches!(
        missing.call(&TriggerRequest {}).await,
        Err(ServiceError::NotFound(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_md5_mismatch_is_refused_with_the_reason() {
    let master = master().await;
    let server_node = node(&master, "server").await;
    let _server = set_bool_server(&server_node, "/switch").await;
    let client_node = node(&master, "client").await;
    let wrong = client_node.service_client::<Trigger>("/switch", ClientOptions::default());
    match wrong.call(&TriggerRequest {}).await {
        Err(ServiceError::Refused(text)) => {
            assert!(text.contains("to have md5sum 937c9679"), "{text}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handler_delays_only_its_own_client() {
    let master = master().await;
    let server_node = node(&master, "server").await;
    let _server = server_node
        .advertise_service::<SetBool, _, _>("/maybe_slow", |req: SetBoolRequest| async move {
            if req.data {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Ok(SetBoolResponse::default())
        })
        .await
        .unwrap();
    let client_node = node(&master, "client").await;
    let slow = client_node.service_client::<SetBool>("/maybe_slow", ClientOptions::default());
    let fast = client_node.service_client::<SetBool>("/maybe_slow", ClientOptions::default());
    let slow_call = tokio::spawn(async move { slow.call(&SetBoolRequest { data: true }).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    fast.call(&SetBoolRequest { data: false }).await.unwrap();
    let fast_took = started.elapsed();
    println!("a fast call while a 2 s call runs took {fast_took:?}");
    assert!(fast_took < Duration::from_millis(1500), "{fast_took:?}");
    slow_call.await.unwrap().unwrap();
    // And a call that takes longer than its timeout fails with Timeout.
    let impatient = client_node.service_client::<SetBool>(
        "/maybe_slow",
        ClientOptions::default().with_timeout(Duration::from_millis(300)),
    );
    assert!(matches!(
        impatient.call(&SetBoolRequest { data: true }).await,
        Err(ServiceError::Timeout(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn megabyte_requests_and_responses_and_the_request_limit() {
    let master = master().await;
    let server_node = node(&master, "server").await;
    let options = udpros::service::ServerOptions {
        max_request: 4 << 20,
        ..Default::default()
    };
    let _echo = server_node
        .advertise_service_raw("/echo", "pkg/Echo", "*", options, |body| async move {
            Ok(body.to_vec())
        })
        .await
        .unwrap();
    let client_node = node(&master, "client").await;
    let client = client_node.service_client_raw("/echo", "*", ClientOptions::persistent());
    let big: Vec<u8> = (0..(1 << 20)).map(|i| (i % 251) as u8).collect();
    assert_eq!(&client.call(&big).await.unwrap()[..], &big[..]);
    // Over the limit: the server drops the connection without reading the bytes.
    let huge = vec![0u8; 5 << 20];
    assert!(matches!(client.call(&huge).await, Err(ServiceError::Io(_))));
    // The persistent client opens a new connection for the next call.
    assert_eq!(&client.call(b"small").await.unwrap()[..], b"small");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_client_reconnects_to_a_restarted_server_and_a_dead_one_fails() {
    let master = master().await;
    let client_node = node(&master, "client").await;
    let client = client_node.service_client::<Trigger>(
        "/restart",
        ClientOptions::persistent().with_timeout(Duration::from_secs(5)),
    );
    for round in 0..2 {
        let server_node = node(&master, "server").await;
        let _server = server_node
            .advertise_service::<Trigger, _, _>("/restart", move |_| async move {
                Ok(TriggerResponse {
                    success: true,
                    message: format!("round {round}"),
                })
            })
            .await
            .unwrap();
        for _ in 0..2 {
            let answer = client.call(&TriggerRequest {}).await.unwrap();
            assert_eq!(answer.message, format!("round {round}"));
        }
        server_node.shutdown().await;
    }
    // Gone: the call fails (not found, or refused), well within its timeout.
    let started = Instant::now();
    assert!(client.call(&TriggerRequest {}).await.is_err());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_are_listed_unregistered_on_drop_and_refuse_duplicates() {
    let master = master().await;
    let server_node = node(&master, "server").await;
    let server = set_bool_server(&server_node, "~switch").await;
    assert_eq!(server.service(), "/server/switch");
    assert!(server.uri().starts_with("rosrpc://127.0.0.1:"));
    assert!(matches!(
        server_node
            .advertise_service::<SetBool, _, _>("~switch", |_| async {
                Ok(SetBoolResponse::default())
            })
            .await,
        Err(udpros::node::NodeError::ServiceExists(_))
    ));
    let state = server_node.master().get_system_state().await.unwrap();
    let services: Vec<&str> = state.services.iter().map(|(s, _)| s.as_str()).collect();
    assert!(services.contains(&"/server/switch"), "{services:?}");
    assert!(services.contains(&"/server/get_loggers"), "{services:?}");
    assert!(
        services.contains(&"/server/set_logger_level"),
        "{services:?}"
    );
    drop(server);
    let gone = udpros_testkit::wait_for(Duration::from_secs(5), || {
        futures_lite_block(server_node.master().lookup_service("/server/switch")).is_err()
    });
    assert!(gone, "the dropped service is unregistered");
    let client_node = node(&master, "client").await;
    client_node
        .wait_for_service("/server/get_loggers", Duration::from_secs(5))
        .await
        .unwrap();
    assert!(client_node
        .wait_for_service("/server/switch", Duration::from_millis(300))
        .await
        .is_err());
}

fn futures_lite_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// Opens a client connection to `service` at `uri` and exchanges headers.
async fn raw_connection(uri: &str, service: &str) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = uri.trim_start_matches("rosrpc://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let header = udpros::wire::service::call_header("/attacker", service, "*", true);
    stream.write_all(&header.encode_tcp()).await.unwrap();
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.unwrap();
    let mut reply = vec![0u8; u32::from_le_bytes(len) as usize];
    stream.read_exact(&mut reply).await.unwrap();
    stream
}

/// A service of any type that answers a request with its length (a `u64`, little-endian).
async fn length_server(node: &Node, name: &str) -> udpros::service::RawServiceServer {
    node.advertise_service_raw(
        name,
        "pkg/Echo",
        "*",
        udpros::service::ServerOptions::default(),
        |body| async move { Ok(body.len().to_le_bytes().to_vec()) },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_and_large_requests_stay_bounded() {
    use tokio::io::AsyncWriteExt;
    let master = master().await;
    let server_node = node(&master, "server").await;
    let server = length_server(&server_node, "/bounded").await;
    let uri = server.uri().to_string();
    let client_node = node(&master, "client").await;
    let client = client_node.service_client_raw(
        "/bounded",
        "*",
        ClientOptions::default().with_timeout(Duration::from_secs(10)),
    );

    // 600 connections that send a header and then nothing (the cap is 256: the longest
    // idle make room for newcomers), then a real call.
    let mut idle = Vec::new();
    for _ in 0..600 {
        idle.push(raw_connection(&uri, "/bounded").await);
    }
    assert_eq!(
        &client.call(b"hello").await.unwrap()[..],
        &5usize.to_le_bytes()
    );
    drop(idle);

    // 12 connections each announce a 60 MB request and push 16 MB of it: together 192 MB,
    // three times the 64 MiB budget for large requests. What the server holds stays near
    // the budget, and a small call is answered meanwhile.
    let before = udpros_testkit::peak_rss_mb(std::process::id());
    let chunk = bytes::Bytes::from(vec![7u8; 16 << 20]);
    let mut pushers = Vec::new();
    for _ in 0..12 {
        let mut stream = raw_connection(&uri, "/bounded").await;
        let chunk = chunk.clone();
        pushers.push(tokio::spawn(async move {
            let announce = (60u32 << 20).to_le_bytes();
            let _ = stream.write_all(&announce).await;
            let _ = tokio::time::timeout(Duration::from_secs(3), stream.write_all(&chunk)).await;
            stream
        }));
    }
    let started = Instant::now();
    assert_eq!(
        &client.call(b"small").await.unwrap()[..],
        &5usize.to_le_bytes()
    );
    println!(
        "a small call among 12 large requests took {:?}",
        started.elapsed()
    );
    let mut streams = Vec::new();
    for p in pushers {
        streams.push(p.await.unwrap());
    }
    let grown = udpros_testkit::peak_rss_mb(std::process::id()) - before;
    println!("peak RSS grew by {grown:.1} MB for 192 MB of large requests pushed");
    assert!(grown < 150.0, "peak RSS grew by {grown:.1} MB");
}

/// One call over an open raw connection: a request frame out, the response body back.
async fn raw_call(stream: &mut tokio::net::TcpStream, request: &[u8]) -> std::io::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(&(request.len() as u32).to_le_bytes())
        .await?;
    stream.write_all(request).await?;
    let mut ok = [0u8; 1];
    stream.read_exact(&mut ok).await?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await?;
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    stream.read_exact(&mut body).await?;
    Ok(body)
}

/// Issue 33, item 2: two connections announce 40 MB requests and trickle a byte a second;
/// a legitimate 100 kB request is still answered (it waited until the tricklers fell
/// under the rate floor), and an idle flood does not evict a persistent client in use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tricklers_cannot_hold_the_budget_and_floods_do_not_evict_a_client_in_use() {
    use tokio::io::AsyncWriteExt;
    let master = master().await;
    let server_node = node(&master, "server").await;
    let server = length_server(&server_node, "/starved").await;
    let uri = server.uri().to_string();

    // A persistent client in use: one call answered before the flood.
    let mut in_use = raw_connection(&uri, "/starved").await;
    assert_eq!(
        raw_call(&mut in_use, b"first").await.unwrap(),
        5usize.to_le_bytes()
    );

    let mut tricklers = Vec::new();
    for _ in 0..2 {
        let mut stream = raw_connection(&uri, "/starved").await;
        tricklers.push(tokio::spawn(async move {
            stream
                .write_all(&(40u32 << 20).to_le_bytes())
                .await
                .unwrap();
            let started = Instant::now();
            // One byte a second, for at most 30 s: the server should cut us off.
            for _ in 0..30 {
                if stream.write_all(&[1]).await.is_err() {
                    return Some(started.elapsed());
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            None
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let client_node = node(&master, "client").await;
    let client = client_node.service_client_raw(
        "/starved",
        "*",
        ClientOptions::default().with_timeout(Duration::from_secs(20)),
    );
    let started = Instant::now();
    let answer = client.call(&vec![3u8; 100_000]).await;
    let took = started.elapsed();
    println!("a 100 kB call beside two tricklers of 40 MB took {took:?}");
    assert_eq!(&answer.unwrap()[..], &100_000usize.to_le_bytes());
    assert!(took < Duration::from_secs(10), "took {took:?}");
    for t in tricklers {
        let cut = t.await.unwrap();
        println!("a trickler was cut off after {cut:?}");
        assert!(cut.is_some(), "a trickler held its connection for 30 s");
    }

    // 1000 connections that never ask anything (the cap is 256): the client in use stays.
    let mut flood = Vec::new();
    for _ in 0..1000 {
        flood.push(raw_connection(&uri, "/starved").await);
    }
    assert_eq!(
        raw_call(&mut in_use, b"second").await.unwrap(),
        6usize.to_le_bytes(),
        "the persistent client in use was evicted by the flood"
    );
}
