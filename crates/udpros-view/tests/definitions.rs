//! Publishers whose message definitions are a megabyte each: the view advertises what it
//! can afford, says what it left out and why, every new client gets in, and the view's
//! memory does not grow with the definitions. (A file of its own: it measures the
//! process's memory, which other tests running beside it would disturb.)

mod common;

use common::*;
use serde_json::Value as Json;
use std::time::Duration;
use udpros::msgs::std_msgs;
use udpros::node::AdvertiseOptions;
use udpros_view::View;

/// The resident memory of this process, in MB.
fn rss_mb() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: f64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096.0 / 1e6
}

/// A client's first frames until it has seen `topic` advertised and a status naming the
/// left-out topics; the channels it was told of, and the status.
async fn first_look(socket: &mut Socket, topic: &str) -> (Vec<Json>, String) {
    let (mut channels, mut status) = (Vec::new(), String::new());
    while status.is_empty() || !channels.iter().any(|c: &Json| c["topic"] == topic) {
        let message = next_json(socket).await;
        match message["op"].as_str() {
            Some("advertise") => channels.extend(message["channels"].as_array().unwrap().clone()),
            Some("status") => status = message["message"].as_str().unwrap().to_string(),
            _ => {}
        }
    }
    (channels, status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn megabyte_definitions_are_left_out_and_every_client_gets_in() {
    let master = local_master().await;
    let talker = node(&master, "talker").await;
    // One ordinary topic, and a hundred whose types only their publisher defines, each
    // with a definition of a megabyte.
    let _chatter = talker
        .advertise::<std_msgs::String>("/chatter", AdvertiseOptions::default())
        .await
        .unwrap();
    let huge: String = (0..35_500).map(|i| format!("int32 f{i:020}\n")).collect();
    assert!(huge.len() > 980_000);
    let mut bulky = Vec::new();
    for i in 0..100 {
        let publisher = talker
            .advertise_raw(
                &format!("/bulky{i}"),
                &format!("bulky_msgs/Bulky{i}"),
                "0123456789abcdef0123456789abcdef",
                &huge,
                AdvertiseOptions::default(),
            )
            .await
            .unwrap();
        bulky.push(publisher);
    }
    let before = rss_mb();
    let view = View::start(node(&master, "view").await, local_view())
        .await
        .unwrap();

    // The first client waits until the view has asked the publishers and left them out.
    let mut first = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
    let mut told_of = Vec::new();
    let mut said = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while said.matches("/bulky").count() < 1 || !said.contains("100 topic(s)") {
        assert!(tokio::time::Instant::now() < deadline, "never said: {said}");
        let message = tokio::time::timeout(Duration::from_secs(60), next_json(&mut first))
            .await
            .unwrap();
        match message["op"].as_str() {
            Some("advertise") => told_of.extend(message["channels"].as_array().unwrap().clone()),
            Some("status") => {
                said = message["message"].as_str().unwrap().to_string();
                if !said.contains("100 topic(s)") {
                    // Told in parts as the publishers answered: reconnect for the sum.
                    first = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
                    told_of.clear();
                }
            }
            _ => {}
        }
    }
    assert!(said.contains("over the view's 256 kB"), "{said}");

    // Every later client gets in, is told of the ordinary topic and of what was left out.
    for _ in 0..30 {
        let mut client = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
        let (channels, status) = first_look(&mut client, "/chatter").await;
        assert!(
            channels
                .iter()
                .all(|c| !c["topic"].as_str().unwrap().starts_with("/bulky")),
            "a bulky topic was advertised"
        );
        assert!(
            status.starts_with("100 topic(s) not advertised"),
            "{status}"
        );
    }
    let grown = rss_mb() - before;
    eprintln!("the view grew by {grown:.0} MB");
    assert!(grown < 100.0, "the view grew by {grown:.0} MB");
    drop(bulky);
}
