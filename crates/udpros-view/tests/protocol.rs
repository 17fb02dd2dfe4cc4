//! The view against a WebSocket client speaking the Foxglove protocol, on a graph of its
//! own (embedded master, a talker): the handshake, the advertisement of a topic with its
//! schema, a subscription whose frames carry the publisher's bytes, an unsubscribe that
//! ends the view's udpros subscription, and garbage that closes only the client sending it.

mod common;

use common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;
use udpros::msg::Message as _;
use udpros::msgs::std_msgs;
use udpros::node::{AdvertiseOptions, Node};
use udpros_view::{View, ViewOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foxglove_client_sees_the_graph_and_gets_the_publishers_bytes() {
    let master = local_master().await;
    let talker = node(&master, "talker").await;
    let publisher = talker
        .advertise::<std_msgs::String>("/chatter", AdvertiseOptions::default())
        .await
        .unwrap();
    let publishing = tokio::spawn(async move {
        for n in 0u64.. {
            let msg = std_msgs::String {
                data: format!("hello {n}"),
            };
            let _ = publisher.publish(&msg);
            tokio::time::sleep(Duration::from_millis(20)).await;
            if n > 3000 {
                break;
            }
        }
        publisher
    });
    let options = local_view();
    let view = View::start(node(&master, "view").await, options)
        .await
        .unwrap();

    // No subprotocol of this protocol: refused before the upgrade.
    let refused = connect(&view, Some("chat")).await.unwrap_err();
    assert!(refused.contains("400"), "{refused}");

    let mut client = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
    let info = next_json(&mut client).await;
    assert_eq!(info["op"], "serverInfo");
    assert_eq!(info["name"], "/view");
    let channel = channel_of(&mut client, "/chatter").await;
    assert_eq!(channel["encoding"], "ros1");
    assert_eq!(channel["schemaName"], "std_msgs/String");
    assert_eq!(channel["schemaEncoding"], "ros1msg");
    assert_eq!(channel["schema"], std_msgs::String::DEFINITION);
    assert!(view.forwarded_topics().is_empty(), "nothing asked yet");

    // Subscribe: frames of opcode 1 with the subscription id and the message as the
    // publisher serialized it.
    let subscribe = json!({"op": "subscribe",
        "subscriptions": [{"id": 7, "channelId": channel["id"]}]});
    client
        .send(Message::text(subscribe.to_string()))
        .await
        .unwrap();
    let frame = next_binary(&mut client).await;
    assert_eq!(frame[0], 1);
    assert_eq!(u32::from_le_bytes(frame[1..5].try_into().unwrap()), 7);
    let received: std_msgs::String = udpros::wire::from_slice(&frame[13..]).unwrap();
    assert!(received.data.starts_with("hello "), "{received:?}");
    assert_eq!(
        udpros::wire::to_vec(&received).unwrap(),
        frame[13..].to_vec(),
        "the bytes are the publisher's, not re-encoded"
    );
    assert_eq!(view.forwarded_topics(), ["/chatter"]);
    assert!(view_subscribes(&talker).await, "the view subscribed in ROS");

    // The console's files, and the view's counters of the link it forwards from: UDPROS.
    let (status, page) = http_get(&view, "/").await;
    assert_eq!(status, 200);
    assert!(page.contains("/console.js"), "{page}");
    for script in ["/console.js", "/ros1msg.js"] {
        let (status, text) = http_get(&view, script).await;
        assert_eq!(status, 200, "{script}");
        assert!(
            text.contains("import") || text.contains("export"),
            "{script}"
        );
    }
    assert_eq!(http_get(&view, "/etc/passwd").await.0, 404);
    let mut link = Value::Null;
    for _ in 0..50 {
        let (status, body) = http_get(&view, "/stats.json").await;
        assert_eq!(status, 200);
        let stats: Value = serde_json::from_str(&body).unwrap();
        link = stats["topics"][0].clone();
        if link["delivered"].as_u64().unwrap_or(0) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(link["topic"], "/chatter", "{link}");
    assert_eq!(link["protocol"], "UDP", "{link}");
    assert_eq!(link["publishers"], 1, "{link}");

    // A ping is answered with its payload, between the messages.
    client
        .send(Message::Ping(b"are you there".to_vec().into()))
        .await
        .unwrap();
    let pong = next_frame(&mut client, |frame| match frame {
        Message::Pong(data) => Some(data.to_vec()),
        _ => None,
    })
    .await;
    assert_eq!(pong, b"are you there");

    // A second client that sends garbage is closed; the first goes on.
    let mut rude = connect(&view, Some("foxglove.sdk.v1")).await.unwrap();
    assert_eq!(next_json(&mut rude).await["op"], "serverInfo");
    rude.send(Message::text("{\"op\": ")).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(frame)) = rude.next().await {
            if matches!(frame, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the rude client was closed");
    assert!(eventually(|| view.clients() == 1).await);
    let frame = next_binary(&mut client).await;
    assert_eq!(frame[0], 1, "the first client still receives");

    // Unsubscribe: the view drops its udpros subscription.
    client
        .send(Message::text(
            json!({"op": "unsubscribe", "subscriptionIds": [7]}).to_string(),
        ))
        .await
        .unwrap();
    assert!(eventually(|| view.forwarded_topics().is_empty()).await);
    let mut unregistered = false;
    for _ in 0..100 {
        if !view_subscribes(&talker).await {
            unregistered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        unregistered,
        "the view's ROS subscription ended with the last client's"
    );
    publishing.abort();
}

/// Whether the master lists the node /view as a subscriber of /chatter.
async fn view_subscribes(any_node: &Node) -> bool {
    let state = any_node.master().get_system_state().await.unwrap();
    state
        .subscribers
        .iter()
        .any(|(topic, nodes)| topic == "/chatter" && nodes.iter().any(|n| n == "/view"))
}

/// The resident memory of this process, in MB.
fn rss_mb() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: f64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096.0 / 1e6
}

/// Twenty clients that subscribe to a 1 MB topic at 20 Hz and never read, beside one that
/// does: the send buffers stay within their bound (newest message only), the process does
/// not grow with what the slow clients miss, and the reading client keeps getting fresh
/// messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_cost_a_bounded_buffer_and_never_hold_up_a_fast_one() {
    let master = local_master().await;
    let talker = node(&master, "camera").await;
    let publisher = talker
        .advertise::<std_msgs::UInt8MultiArray>("/image", AdvertiseOptions::default())
        .await
        .unwrap();
    const LIMIT: usize = 2 << 20;
    let options = ViewOptions {
        max_clients: 32,
        send_limit: LIMIT,
        ..local_view()
    };
    let view = View::start(node(&master, "view").await, options)
        .await
        .unwrap();
    let mut fast = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
    let channel = channel_of(&mut fast, "/image").await;
    let subscribe = |id: u32| {
        Message::text(
            json!({"op": "subscribe", "subscriptions": [{"id": id, "channelId": channel["id"]}]})
                .to_string(),
        )
    };
    let mut slow = Vec::new();
    for _ in 0..20 {
        let mut client = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
        client.send(subscribe(1)).await.unwrap();
        slow.push(client); // never read again
    }
    fast.send(subscribe(2)).await.unwrap();
    let before = rss_mb();
    let mut most_buffered = 0;
    let mut fresh = 0;
    // 60 messages of 1 MB at 20 Hz: 1.2 GB offered to the slow clients.
    for n in 0..60u32 {
        let mut data = vec![(n % 251) as u8; 1 << 20];
        data[..4].copy_from_slice(&n.to_le_bytes());
        let msg = std_msgs::UInt8MultiArray {
            data: bytes::Bytes::from(data),
            ..Default::default()
        };
        publisher.publish(&msg).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        most_buffered = most_buffered.max(view.buffered_bytes());
        // The fast client reads whatever arrived meanwhile.
        while let Ok(Some(Ok(frame))) =
            tokio::time::timeout(Duration::from_millis(1), fast.next()).await
        {
            if let Message::Binary(data) = frame {
                let got: std_msgs::UInt8MultiArray = udpros::wire::from_slice(&data[13..]).unwrap();
                let seq = u32::from_le_bytes(got.data[..4].try_into().unwrap());
                if n.saturating_sub(seq) <= 2 {
                    fresh += 1;
                }
            }
        }
    }
    let grown = rss_mb() - before;
    println!(
        "20 slow clients: most buffered {:.1} MB (bound {} MB), RSS grew {grown:.0} MB, fast client got {fresh} fresh of 60",
        most_buffered as f64 / 1e6,
        (21 * LIMIT) >> 20,
    );
    assert!(
        most_buffered <= 21 * LIMIT,
        "{most_buffered} bytes buffered"
    );
    assert!(grown < 300.0, "RSS grew {grown:.0} MB");
    assert!(
        fresh >= 30,
        "the fast client got {fresh} fresh messages of 60"
    );
    assert_eq!(view.clients(), 21);
}

/// The view's `/stats.json` carries what the publisher says of its link to the view (the
/// console's "path" column): a publisher capped at 2000 B/s that offers a hundred times
/// that drops most of its messages before they leave, and says so in its getBusInfo.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_publishers_view_of_its_link_reaches_the_stats() {
    let master = local_master().await;
    let talker = node(&master, "capped_talker").await;
    let options = AdvertiseOptions {
        max_rate: Some(2_000.0),
        ..AdvertiseOptions::default()
    };
    let publisher = talker
        .advertise::<std_msgs::String>("/capped", options)
        .await
        .unwrap();
    let publishing = tokio::spawn(async move {
        let msg = std_msgs::String {
            data: "x".repeat(1_000),
        };
        for _ in 0..4_000 {
            let _ = publisher.publish(&msg);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let view = View::start(node(&master, "view").await, local_view())
        .await
        .unwrap();
    let mut client = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
    let channel = channel_of(&mut client, "/capped").await;
    let subscribe = json!({"op": "subscribe",
        "subscriptions": [{"id": 1, "channelId": channel["id"]}]});
    client
        .send(Message::text(subscribe.to_string()))
        .await
        .unwrap();
    let mut path = Value::Null;
    for _ in 0..150 {
        let (_, body) = http_get(&view, "/stats.json").await;
        let stats: Value = serde_json::from_str(&body).unwrap();
        path = stats["topics"][0]["path"].clone();
        if path["dropped"].as_u64().unwrap_or(0) > 50 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(path["dropped"].as_u64().unwrap_or(0) > 50, "{path}");
    assert!(path["capacity_bps"].is_null(), "not governed: {path}");
    publishing.abort();
}
