//! A forged `publisherUpdate` listing 200,000 publishers: a subscription links to at most
//! `MAX_PUBLISHER_LINKS` of them (each link holds a socket and a task), the update is
//! taken in reasonable time, and the node keeps answering.

use std::time::{Duration, Instant};
use udpros::master::Master;
use udpros::node::{Node, SubscribeOptions};
use udpros::transport::MAX_PUBLISHER_LINKS;
use udpros::xmlrpc::{Value, XmlRpcClient};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publisher_list_of_200_000_uris_links_to_the_first_thousand_and_the_node_answers() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let node = Node::new(
        "listener",
        vec![
            format!("__master:={}", master.uri()),
            "__ip:=127.0.0.1".to_string(),
        ],
    )
    .await
    .unwrap();
    let sub = node
        .subscribe_raw("/flooded", SubscribeOptions::default())
        .await
        .unwrap();
    // Nobody listens on port 1: every link's requestTopic fails, and retries later.
    let uris: Vec<Value> = (0..200_000)
        .map(|i| Value::from(format!("http://127.0.0.1:1/forged/{i}")))
        .collect();
    let client = XmlRpcClient::new(Duration::from_secs(2), Duration::from_secs(60));
    let params = vec![
        Value::from("/master"),
        Value::from("/flooded"),
        Value::Array(uris),
    ];
    let started = Instant::now();
    client
        .call(node.uri(), "publisherUpdate", params)
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the update took {:?}",
        started.elapsed()
    );
    let links = sub.links();
    assert_eq!(links.len(), MAX_PUBLISHER_LINKS);
    assert!(links.iter().all(|l| l.publisher_uri.contains("/forged/")));

    // The node still answers its slave API, and an honest update replaces the list.
    let pid = client
        .call(node.uri(), "getPid", vec![Value::from("/test")])
        .await
        .unwrap();
    assert!(udpros::api::ok_value(pid).is_ok());
    let honest = vec![
        Value::from("/master"),
        Value::from("/flooded"),
        Value::Array(vec![Value::from("http://127.0.0.1:1/real")]),
    ];
    client
        .call(node.uri(), "publisherUpdate", honest)
        .await
        .unwrap();
    let links = sub.links();
    assert_eq!(links.len(), 1, "the forged links were dropped");
    assert_eq!(links[0].publisher_uri, "http://127.0.0.1:1/real");
}
