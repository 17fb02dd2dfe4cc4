//! The view against clients and connections that try to take it: idle TCP connections,
//! idle WebSocket clients, subscribe floods and a client that re-types a topic. Each case
//! has a graph of its own; a legitimate client must get in and be served throughout.

mod common;

use common::*;
use futures_util::SinkExt;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use udpros::msgs::std_msgs;
use udpros::node::{AdvertiseOptions, NodeError, SubscribeOptions};
use udpros_view::{View, ViewOptions};

/// A client that got in: its serverInfo came.
async fn joins(view: &View) -> bool {
    let Ok(mut client) = connect(view, Some("foxglove.websocket.v1")).await else {
        return false;
    };
    next_op(&mut client, "serverInfo").await["op"] == "serverInfo"
}

/// Forty TCP connections that never send a request hold every connection slot the view
/// has (2 × 16 clients + 8); new clients still get in, because the idlest connection
/// gives way to a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_give_way_to_new_clients() {
    let master = local_master().await;
    let view = View::start(node(&master, "view").await, local_view())
        .await
        .unwrap();
    let mut idle = Vec::new();
    for _ in 0..40 {
        idle.push(TcpStream::connect(view.local_addr()).await.unwrap());
    }
    // Older than the grace a connection has before it counts as idle.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut joined = 0;
    for _ in 0..21 {
        if joins(&view).await {
            joined += 1;
        }
    }
    assert_eq!(joined, 21, "every probe got in past 40 idle connections");
}

/// Sixteen WebSocket clients that connect and then say nothing fill every client slot;
/// once they have been silent a while, a new client takes the idlest one's place. A
/// client that subscribed is never the one that gives way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clients_give_way_and_busy_ones_do_not() {
    let master = local_master().await;
    let talker = node(&master, "talker").await;
    let _chatter = talker
        .advertise::<std_msgs::String>("/chatter", AdvertiseOptions::default())
        .await
        .unwrap();
    let view = View::start(node(&master, "view").await, local_view())
        .await
        .unwrap();
    // Eight clients that subscribe (busy), eight that only connect (idle).
    let mut busy = Vec::new();
    for i in 0..8 {
        let mut client = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
        let channel = channel_of(&mut client, "/chatter").await;
        send(
            &mut client,
            json!({"op": "subscribe", "subscriptions": [{"id": i, "channelId": channel["id"]}]}),
        )
        .await;
        busy.push(client);
    }
    let mut idle = Vec::new();
    for _ in 0..8 {
        idle.push(connect(&view, Some("foxglove.websocket.v1")).await.unwrap());
    }
    assert!(eventually(|| view.clients() == 16).await);
    assert!(
        connect(&view, Some("foxglove.websocket.v1")).await.is_err(),
        "full, and nobody idle long enough yet: refused"
    );
    tokio::time::sleep(Duration::from_secs(6)).await;
    // Each new client takes an idle one's place; after eight, only busy ones are left.
    let mut newcomers = Vec::new();
    for _ in 0..8 {
        let mut client = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
        next_op(&mut client, "serverInfo").await;
        newcomers.push(client);
    }
    assert_eq!(view.clients(), 16);
    // The newcomers are not idle long enough, the busy ones are busy: no more room.
    assert!(connect(&view, Some("foxglove.websocket.v1")).await.is_err());
    // The busy clients were kept: each still gets the topic's messages.
    let _ = busy;
}

/// Subscribe frames of nearly a megabyte, each naming the same channel tens of thousands
/// of times, cost the attacker one status per reason, while a legitimate client keeps
/// getting its stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribe_flood_is_refused_in_a_few_statuses_and_the_stream_goes_on() {
    let master = local_master().await;
    let talker = node(&master, "talker").await;
    let chatter = talker
        .advertise::<std_msgs::String>("/chatter", AdvertiseOptions::default())
        .await
        .unwrap();
    let view = View::start(node(&master, "view").await, local_view())
        .await
        .unwrap();
    let mut operator = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
    let channel = channel_of(&mut operator, "/chatter").await["id"].clone();
    send(
        &mut operator,
        json!({"op": "subscribe", "subscriptions": [{"id": 1, "channelId": channel}]}),
    )
    .await;

    let mut attackers = Vec::new();
    for _ in 0..13 {
        let mut attacker = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
        next_op(&mut attacker, "serverInfo").await;
        attackers.push(attacker);
    }
    // ~960 kB: 36,000 subscriptions of one channel.
    let flood = |base: u64| {
        let subscriptions: Vec<serde_json::Value> = (0..36_000)
            .map(|i| json!({"id": base + i, "channelId": channel}))
            .collect();
        json!({"op": "subscribe", "subscriptions": subscriptions}).to_string()
    };
    assert!(flood(0).len() > 900_000, "{}", flood(0).len());
    let publishing = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        // 50 Hz, for at most a minute.
        for i in 0..3000 {
            tick.tick().await;
            let _ = chatter.publish(&std_msgs::String {
                data: format!("m{i}"),
            });
        }
    });
    // The stream flows before the flood.
    while next_binary(&mut operator).await[0] != 1 {}
    let floods: Vec<String> = (0..3).map(|round| flood(round * 36_000)).collect();
    for flood in &floods {
        for attacker in attackers.iter_mut() {
            attacker.send(Message::text(flood.clone())).await.unwrap();
        }
    }
    // The operator's stream: messages keep coming while the floods are handled.
    let started = Instant::now();
    let mut heard = 0;
    while started.elapsed() < Duration::from_secs(4) {
        let frame = next_binary(&mut operator).await;
        if frame[0] == 1 {
            heard += 1;
        }
    }
    publishing.abort();
    eprintln!("the operator heard {heard} messages in 4 s during the flood");
    assert!(
        heard >= 100,
        "the operator heard {heard} messages in 4 s of a 50 Hz topic"
    );
    // Each attacker: its first frame took one subscription, then one status per reason
    // per frame (already subscribed), nothing per subscription.
    let attacker = &mut attackers[0];
    let mut statuses = Vec::new();
    while statuses.len() < 3 {
        let status = next_op(attacker, "status").await;
        statuses.push(status["message"].as_str().unwrap().to_string());
    }
    assert!(statuses[0].starts_with("35999 subscription(s) refused, already subscribed"));
    assert!(statuses[1].starts_with("36000 subscription(s) refused, already subscribed"));
    let more = tokio::time::timeout(Duration::from_millis(500), next_op(attacker, "status")).await;
    assert!(more.is_err(), "no status per subscription: {more:?}");
}

/// A client allowed to publish on a topic cannot change the topic's type: its channel of
/// another type is refused, the master keeps the topic's type, and a new subscriber of
/// the real type still hears the real publisher.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cannot_re_type_a_topic() {
    let master = local_master().await;
    let talker = node(&master, "talker").await;
    let real = talker
        .advertise::<std_msgs::String>("/t", AdvertiseOptions::default())
        .await
        .unwrap();
    let options = ViewOptions {
        client_topics: vec!["/t".into()],
        ..local_view()
    };
    let view_node = node(&master, "view").await;
    let view = View::start(view_node.clone(), options).await.unwrap();
    let mut client = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
    next_op(&mut client, "serverInfo").await;
    send(
        &mut client,
        json!({"op": "advertise", "channels": [
        {"id": 5, "topic": "/t", "encoding": "ros1", "schemaName": "evil_msgs/Evil",
         "schema": "int32 x\n"}]}),
    )
    .await;
    let refused = next_op(&mut client, "status").await;
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("/t is a std_msgs/String"), "{refused}");
    let types = talker.master().get_topic_types().await.unwrap();
    assert!(
        types.contains(&("/t".into(), "std_msgs/String".into())),
        "{types:?}"
    );

    let listener = node(&master, "listener").await;
    let mut heard = listener
        .subscribe::<std_msgs::String>("/t", SubscribeOptions::default())
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let _ = real.publish(&std_msgs::String {
                data: "real".into(),
            });
            tokio::select! {
                got = heard.recv() => return got,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(got.map(|m| m.data).as_deref(), Some("real"));

    // The library itself refuses a second type for a topic a node already publishes.
    let second = talker
        .advertise_raw(
            "/t",
            "evil_msgs/Evil",
            "0123456789abcdef0123456789abcdef",
            "int32 x\n",
            AdvertiseOptions::default(),
        )
        .await;
    assert!(
        matches!(second, Err(NodeError::TypeMismatch(..))),
        "{:?}",
        second.err().map(|e| e.to_string())
    );
    let types = talker.master().get_topic_types().await.unwrap();
    assert!(
        types.contains(&("/t".into(), "std_msgs/String".into())),
        "{types:?}"
    );
    drop(view_node);
}

/// A view with a token: a client without it, or with another, is refused (401) and gets
/// nothing; wrong tries from one address are limited (429), even for the right token
/// then; `/stats.json` asks for it too; the right token gets in, from the URL or as a
/// bearer header. The page itself stays open (it holds no data).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_with_a_token_lets_in_only_who_presents_it() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let master = local_master().await;
    let options = ViewOptions {
        token: Some("tok-3f9a".into()),
        ..local_view()
    };
    let view = View::start(node(&master, "view").await, options)
        .await
        .unwrap();
    let at = view.local_addr();
    let subprotocol = Some("foxglove.websocket.v1");
    let refused = |e: Result<Socket, String>| match e {
        Ok(_) => panic!("a client got in"),
        Err(e) => e,
    };
    let missing = refused(connect_to(&format!("ws://{at}/"), subprotocol).await);
    assert!(missing.contains("401"), "{missing}");
    let get = |path: String, header: &'static str| async move {
        let mut stream = TcpStream::connect(at).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {at}\r\n{header}Connection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    };
    assert!(get("/".into(), "").await.starts_with("HTTP/1.1 200"));
    assert!(get("/stats.json".into(), "")
        .await
        .starts_with("HTTP/1.1 401"));
    let stats = get("/stats.json".into(), "Authorization: Bearer tok-3f9a\r\n").await;
    assert!(
        stats.starts_with("HTTP/1.1 200") && stats.contains("clients"),
        "{stats}"
    );
    let mut client = connect_to(&format!("ws://{at}/?token=tok-3f9a"), subprotocol)
        .await
        .expect("the right token gets in");
    assert_eq!(next_op(&mut client, "serverInfo").await["op"], "serverInfo");
    // Guessing: the burst of wrong tries, then even the right token waits.
    let mut wrong = 0;
    for n in 0..udpros_view::access::TRIES_BURST {
        let e = refused(connect_to(&format!("ws://{at}/?token=guess{n}"), subprotocol).await);
        assert!(e.contains("401"), "{e}");
        wrong += 1;
    }
    assert_eq!(wrong, udpros_view::access::TRIES_BURST);
    let held = refused(connect_to(&format!("ws://{at}/?token=tok-3f9a"), subprotocol).await);
    assert!(held.contains("429"), "{held}");
    // The client already in is served throughout.
    client
        .send(Message::text(
            json!({"op": "subscribe", "subscriptions": []}).to_string(),
        ))
        .await
        .unwrap();
    tokio::time::sleep(udpros_view::access::TRY_EVERY * 2).await;
    let mut again = connect_to(&format!("ws://{at}/?token=tok-3f9a"), subprotocol)
        .await
        .expect("tries come back with time");
    assert_eq!(next_op(&mut again, "serverInfo").await["op"], "serverInfo");
}
