//! `SubscribeOptions::links_on`: a subscription whose links run on a `DrivenRuntime`, read
//! on the thread that waits for the messages (what each Python subscriber does), and on
//! the runtime's own thread while nobody waits.

use std::sync::Arc;
use std::time::{Duration, Instant};
use udpros::master::Master;
use udpros::msgs::std_msgs;
use udpros::node::{AdvertiseOptions, Node, SubscribeOptions};
use udpros::transport::{DrivenRuntime, Protocol};

#[test]
fn a_subscription_on_a_driven_runtime_reads_on_the_waiting_thread_and_without_one() {
    let node_runtime = tokio::runtime::Runtime::new().unwrap();
    let links = Arc::new(DrivenRuntime::new("links-test").unwrap());
    let (master, talker, publisher, listener, sub) = node_runtime.block_on(async {
        let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
            .await
            .unwrap();
        let args = || {
            vec![
                format!("__master:={}", master.uri()),
                "__ip:=127.0.0.1".to_string(),
            ]
        };
        let talker = Node::new("talker", args()).await.unwrap();
        let publisher = talker
            .advertise::<std_msgs::UInt32>("/count", AdvertiseOptions::default())
            .await
            .unwrap();
        let listener = Node::new("listener", args()).await.unwrap();
        let options = SubscribeOptions {
            links_on: Some(links.clone()),
            ..SubscribeOptions::udp_only()
        };
        let sub = listener.subscribe_raw("/count", options).await.unwrap();
        (master, talker, publisher, listener, sub)
    });
    assert!(Arc::ptr_eq(sub.links_on().unwrap(), &links));

    // This thread is in no runtime: it waits in the driven runtime's `block_on`, which
    // negotiates (its XML-RPC on the node's runtime) and reads the datagrams here.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut n = 0u32;
    let first = loop {
        publisher.publish(&std_msgs::UInt32 { data: n }).unwrap();
        n += 1;
        let wait = async { tokio::time::timeout(Duration::from_millis(50), sub.recv()).await };
        if let Ok(Some(m)) = links.block_on(wait) {
            break m;
        }
        assert!(Instant::now() < deadline, "nothing came");
    };
    assert_eq!(first.protocol, Protocol::Udp);

    // Nobody waits now: the runtime's own thread keeps the link reading.
    let before = sub.links()[0].messages;
    let deadline = Instant::now() + Duration::from_secs(20);
    while sub.links()[0].messages < before + 5 {
        publisher.publish(&std_msgs::UInt32 { data: n }).unwrap();
        n += 1;
        std::thread::sleep(Duration::from_millis(20));
        assert!(Instant::now() < deadline, "the link stopped reading");
    }
    let newest = std::iter::from_fn(|| sub.try_recv()).last().unwrap();
    assert!(u32::from_le_bytes(newest.body[..4].try_into().unwrap()) > 0);

    // Closing ends the link's task, which the driven runtime cancels; the node still
    // answers (its own runtime kept the XML-RPC).
    sub.close();
    let deadline = Instant::now() + Duration::from_secs(20);
    node_runtime.block_on(async {
        while publisher.num_subscribers() > 0 {
            assert!(Instant::now() < deadline, "the link stayed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(listener.get_param("/missing").await.unwrap().is_none());
        drop((publisher, talker, listener, master));
    });
}
