//! udpros to udpros over UDPROS and TCPROS, through the embedded master: small and large
//! messages, datagram sizes, latching, and the transports getBusInfo reports.

use bytes::Bytes;
use std::time::Duration;
use udpros::master::Master;
use udpros::msgs::std_msgs;
use udpros::node::{AdvertiseOptions, Node, SubscribeOptions};
use udpros::transport::Protocol;

async fn graph() -> (Master, Node, Node) {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let args = |name: &str| {
        vec![
            format!("__master:={}", master.uri()),
            "__ip:=127.0.0.1".into(),
            format!("__name:={name}"),
        ]
    };
    let talker = Node::new("talker", args("talker")).await.unwrap();
    let listener = Node::new("listener", args("listener")).await.unwrap();
    (master, talker, listener)
}

/// Waits (up to 10 s) until `publisher` has a subscriber link.
async fn linked<M: udpros::msg::Message>(publisher: &udpros::node::Publisher<M>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while publisher.num_subscribers() == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn bytes_msg(n: u32, size: usize) -> std_msgs::UInt8MultiArray {
    let mut data: Vec<u8> = (0..size).map(|i| (n as usize * 31 + i * 7) as u8).collect();
    data[..4].copy_from_slice(&n.to_le_bytes());
    std_msgs::UInt8MultiArray {
        data: Bytes::from(data),
        ..Default::default()
    }
}

/// Publishes numbered messages until the subscriber has received `count`, within 20 s.
async fn exchange(
    talker: &Node,
    listener: &Node,
    options: SubscribeOptions,
    size: usize,
    count: usize,
) -> (usize, Vec<String>) {
    let publisher = talker
        .advertise::<std_msgs::UInt8MultiArray>("/data", AdvertiseOptions::default())
        .await
        .unwrap();
    let mut subscriber = listener
        .subscribe::<std_msgs::UInt8MultiArray>("/data", options)
        .await
        .unwrap();
    let sending = tokio::spawn(async move {
        for n in 0u32.. {
            publisher.publish(&bytes_msg(n, size)).unwrap();
            tokio::time::sleep(Duration::from_millis(if size > 100_000 { 50 } else { 10 })).await;
        }
    });
    let mut good = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while good < count {
        let Ok(Some(m)) = tokio::time::timeout_at(deadline, subscriber.recv()).await else {
            break;
        };
        let n = u32::from_le_bytes(m.data[..4].try_into().unwrap());
        assert_eq!(
            m.data,
            bytes_msg(n, size).data,
            "message {n} arrived corrupt"
        );
        good += 1;
    }
    let transports = bus_transports(listener).await;
    sending.abort();
    (good, transports)
}

async fn bus_transports(node: &Node) -> Vec<String> {
    let client = udpros::xmlrpc::XmlRpcClient::default();
    let info = client
        .call(node.uri(), "getBusInfo", vec!["/t".into()])
        .await
        .unwrap();
    let rows = info.as_array().unwrap()[2].as_array().unwrap().to_vec();
    rows.iter()
        .map(|r| r.as_array().unwrap()[3].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_messages_over_udp() {
    let (_m, talker, listener) = graph().await;
    let (good, transports) =
        exchange(&talker, &listener, SubscribeOptions::udp_only(), 64, 20).await;
    assert_eq!(good, 20);
    assert_eq!(transports, ["UDPROS"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_messages_over_tcp() {
    let (_m, talker, listener) = graph().await;
    let (good, transports) =
        exchange(&talker, &listener, SubscribeOptions::tcp_only(), 64, 20).await;
    assert_eq!(good, 20);
    assert_eq!(transports, ["TCPROS"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_over_udp_at_several_datagram_sizes() {
    for (size, datagram) in [
        (100_000, 576),
        (1_000_000, 1500),
        (1_000_000, 8000),
        (1_000_000, 65000),
    ] {
        let (_m, talker, listener) = graph().await;
        let options = SubscribeOptions {
            max_datagram_size: Some(datagram),
            ..SubscribeOptions::udp_only()
        };
        let (good, transports) = exchange(&talker, &listener, options, size, 5).await;
        assert_eq!(good, 5, "{size} B at {datagram}");
        assert_eq!(transports, ["UDPROS"]);
    }
}

/// A subscriber asks a publisher on its own host for the largest datagram loopback
/// carries, unless told a size: a 100 kB message then crosses in 2 datagrams, not 68.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publisher_on_this_host_is_asked_for_the_largest_datagram_unless_told() {
    for (chosen, expected) in [(None, 65_507), (Some(1500), 1500), (Some(9000), 9000)] {
        let (_m, talker, listener) = graph().await;
        let publisher = talker
            .advertise::<std_msgs::UInt8MultiArray>("/data", AdvertiseOptions::default())
            .await
            .unwrap();
        let options = SubscribeOptions {
            max_datagram_size: chosen,
            ..SubscribeOptions::udp_only()
        };
        let mut subscriber = listener
            .subscribe::<std_msgs::UInt8MultiArray>("/data", options)
            .await
            .unwrap();
        linked(&publisher).await;
        let links = publisher.links();
        assert_eq!(links.len(), 1, "{chosen:?}");
        assert_eq!(links[0].protocol, Protocol::Udp);
        assert_eq!(links[0].max_datagram, Some(expected), "{chosen:?}");
        // And a message larger than a datagram crosses whole at that size.
        let sent = bytes_msg(7, 100_000);
        let got = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                publisher.publish(&sent).unwrap();
                tokio::select! {
                    got = subscriber.recv() => break got,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        })
        .await
        .expect("a message within 10 s")
        .expect("the subscription is open");
        assert_eq!(got.data, sent.data, "{chosen:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latched_message_reaches_a_late_udp_subscriber() {
    let (_m, talker, listener) = graph().await;
    let _publisher = udpros_testkit::latched_string(&talker, "/latched", "kept").await;
    for options in [SubscribeOptions::udp_only(), SubscribeOptions::tcp_only()] {
        let mut sub = listener
            .subscribe::<std_msgs::String>("/latched", options)
            .await
            .unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), sub.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.data, "kept");
        drop(sub);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = Protocol::Udp;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_are_streams_and_take_callbacks() {
    use std::future::poll_fn;
    use std::pin::Pin;
    let (_m, talker, listener) = graph().await;
    let publisher = talker
        .advertise::<std_msgs::Int32>("/n", AdvertiseOptions::default())
        .await
        .unwrap();
    let mut stream = listener
        .subscribe::<std_msgs::Int32>("/n", SubscribeOptions::default())
        .await
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let callback = listener
        .subscribe::<std_msgs::Int32>("/n", SubscribeOptions::tcp_only())
        .await
        .unwrap()
        .for_each(move |m| {
            let _ = tx.send(m.data);
        });
    let sending = tokio::spawn(async move {
        for n in 0.. {
            publisher.publish(&std_msgs::Int32 { data: n }).unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let next = poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut stream), cx));
    let first = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .unwrap()
        .unwrap();
    assert!(first.data >= 0);
    assert!(tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .is_some());
    sending.abort();
    callback.abort();
}

/// `publish_when_room` queues, so the link's task sends what piles up together: runs of
/// equal small messages in one segmented send, large ones fragmented. Every message must
/// still arrive whole, once, and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_burst_of_mixed_sizes_arrives_whole_and_in_order_over_udp() {
    let (_m, talker, listener) = graph().await;
    let publisher = talker
        .advertise::<std_msgs::UInt8MultiArray>("/burst", AdvertiseOptions::default())
        .await
        .unwrap();
    let options = SubscribeOptions {
        queue_size: 10_000,
        ..SubscribeOptions::udp_only()
    };
    let mut subscriber = listener
        .subscribe::<std_msgs::UInt8MultiArray>("/burst", options)
        .await
        .unwrap();
    linked(&publisher).await;
    // Runs of one size, a change of size, and a message of many datagrams between them.
    let size_of = |n: u32| match n % 500 {
        0..=199 => 64,
        200..=399 => 300,
        400 => 20_000,
        _ => 1400,
    };
    const COUNT: u32 = 2000;
    let sending = tokio::spawn(async move {
        for n in 0..COUNT {
            publisher
                .publish_when_room(&bytes_msg(n, size_of(n)))
                .await
                .unwrap();
        }
        publisher // kept alive until every message is read
    });
    for expected in 0..COUNT {
        let m = tokio::time::timeout(Duration::from_secs(10), subscriber.recv())
            .await
            .unwrap_or_else(|_| panic!("message {expected} never came"))
            .unwrap();
        let n = u32::from_le_bytes(m.data[..4].try_into().unwrap());
        assert_eq!(n, expected, "out of order or lost");
        assert_eq!(m.data, bytes_msg(n, size_of(n)).data, "message {n} corrupt");
    }
    drop(sending.await.unwrap());
}

/// std_msgs/String whose serializations are counted.
#[derive(Debug, Clone, Default, serde::Deserialize)]
struct CountedString {
    data: String,
}

static SERIALIZED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl serde::Serialize for CountedString {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        SERIALIZED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        s.serialize_str(&self.data)
    }
}

impl udpros::msg::Message for CountedString {
    const TYPE: &'static str = <std_msgs::String as udpros::msg::Message>::TYPE;
    const MD5SUM: &'static str = <std_msgs::String as udpros::msg::Message>::MD5SUM;
    const DEFINITION: &'static str = <std_msgs::String as udpros::msg::Message>::DEFINITION;
    const TEXT: &'static str = <std_msgs::String as udpros::msg::Message>::TEXT;
    const HAS_HEADER: bool = false;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishing_to_nobody_serializes_nothing_unless_latched() {
    use std::sync::atomic::Ordering::SeqCst;
    let (_master, talker, listener) = graph().await;
    let quiet = talker
        .advertise::<CountedString>("/nobody", AdvertiseOptions::default())
        .await
        .unwrap();
    let msg = CountedString { data: "x".into() };
    let before = SERIALIZED.load(SeqCst);
    for _ in 0..100 {
        quiet.publish(&msg).unwrap();
    }
    assert_eq!(
        SERIALIZED.load(SeqCst),
        before,
        "no subscriber, no serializing"
    );
    // Latched: the last message must wait for late subscribers, so it is serialized.
    let latched = talker
        .advertise::<CountedString>("/latched_nobody", AdvertiseOptions::latched())
        .await
        .unwrap();
    latched.publish(&msg).unwrap();
    assert!(SERIALIZED.load(SeqCst) > before, "latched: serialized");
    let mut late = listener
        .subscribe::<std_msgs::String>("/latched_nobody", SubscribeOptions::default())
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), late.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.data, "x");
    // With a subscriber, each message is serialized (sized, then written).
    let mut sub = listener
        .subscribe::<std_msgs::String>("/nobody", SubscribeOptions::default())
        .await
        .unwrap();
    let linked = tokio::time::timeout(Duration::from_secs(10), async {
        while quiet.num_subscribers() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(linked.is_ok(), "the subscriber links");
    let before = SERIALIZED.load(SeqCst);
    quiet.publish(&msg).unwrap();
    assert!(SERIALIZED.load(SeqCst) > before, "linked: serialized");
    let got = tokio::time::timeout(Duration::from_secs(10), sub.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.data, "x");
}

/// The nodes registered at the master for `topic`, as publishers and as subscribers.
async fn registered(node: &Node, topic: &str) -> (Vec<String>, Vec<String>) {
    let state = node.master().get_system_state().await.unwrap();
    let of = |list: &[(String, Vec<String>)]| {
        list.iter()
            .find(|(t, _)| t == topic)
            .map(|(_, nodes)| nodes.clone())
            .unwrap_or_default()
    };
    (of(&state.publishers), of(&state.subscribers))
}

/// A node named `name` on `master` that registers nothing of its own (no /rosout, no
/// logger services) and leaves signals alone: what a shutdown test sees is only its own.
async fn bare_node(master: &str, name: &str) -> Node {
    let options = udpros::node::NodeOptions {
        rosout: false,
        logger_services: false,
        handle_signals: false,
        ..Default::default()
    };
    udpros_testkit::node_with(master, name, options).await
}

/// `publish` works from any thread, so publishers (and subscribers) end up dropped on
/// threads without a runtime; they must still unregister, on the node's runtime.
#[tokio::test(flavor = "current_thread")]
async fn handles_dropped_on_a_plain_thread_still_unregister() {
    let (_master, talker, listener) = graph().await;
    let publisher = talker
        .advertise::<std_msgs::String>("/plain", AdvertiseOptions::default())
        .await
        .unwrap();
    let subscriber = listener
        .subscribe::<std_msgs::String>("/plain", SubscribeOptions::default())
        .await
        .unwrap();
    assert_eq!(
        registered(&talker, "/plain").await,
        (vec!["/talker".to_string()], vec!["/listener".to_string()])
    );
    std::thread::spawn(move || {
        publisher
            .publish(&std_msgs::String { data: "x".into() })
            .unwrap();
        drop(publisher);
        drop(subscriber);
    })
    .join()
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut now = registered(&talker, "/plain").await;
    while now != (vec![], vec![]) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        now = registered(&talker, "/plain").await;
    }
    assert_eq!(now, (vec![], vec![]), "both unregistered");
}

/// A program that drops its handles and then shuts its node down (`udpros topic hz | head`
/// does) must leave nothing registered, even when its runtime ends right after the
/// shutdown: the unregistrations the dropped handles started are part of the shutdown.
/// With nothing else to unregister, on a current-thread runtime, those background tasks
/// never ran before `shutdown()` returned, so this failed every time before the shutdown
/// waited for them.
#[test]
fn shutdown_waits_for_the_unregistrations_of_dropped_handles() {
    let master_runtime = tokio::runtime::Runtime::new().unwrap();
    let master = master_runtime
        .block_on(Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1"))
        .unwrap();
    let uri = master.uri().to_string();
    let node_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let observer = node_runtime.block_on(async {
        // Nothing of its own to unregister at shutdown: then only the dropped handles'
        // unregistrations are left to wait for.
        let node = bare_node(&uri, "leaver").await;
        let publisher = node
            .advertise::<std_msgs::String>("/leaving_pub", AdvertiseOptions::default())
            .await
            .unwrap();
        let subscriber = node
            .subscribe::<std_msgs::String>("/leaving_sub", SubscribeOptions::default())
            .await
            .unwrap();
        let before = registered(&node, "/leaving_pub").await.0.len()
            + registered(&node, "/leaving_sub").await.1.len();
        assert_eq!(before, 2, "both registered to begin with");
        drop(publisher);
        drop(subscriber);
        node.shutdown().await;
        node.master().clone()
    });
    drop(node_runtime);
    let state = master_runtime
        .block_on(observer.get_system_state())
        .unwrap();
    let mentions = |list: &[(String, Vec<String>)]| {
        list.iter()
            .any(|(topic, _)| topic == "/leaving_pub" || topic == "/leaving_sub")
    };
    assert!(
        !mentions(&state.publishers) && !mentions(&state.subscribers),
        "left registered: {state:?}"
    );
    drop(master);
}

/// A shutdown while an advertisement is still on its way to the master waits for its
/// answer before it unregisters: sent at once, the unregistration reaches the master
/// first (it answers each request on its own), and the late registration then lists a
/// node that is gone. That is how a Ctrl-C right after start left an action server's
/// topics registered. Once shut down, the node registers nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_a_registration_under_way() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let relay =
        udpros_testkit::SlowRegistrations::start(master.uri(), Duration::from_millis(300)).await;
    let node = bare_node(&relay.uri(), "hasty").await;
    let advertising = node.clone();
    let advertised = tokio::spawn(async move {
        advertising
            .advertise::<std_msgs::String>("/hasty", AdvertiseOptions::default())
            .await
            .map(drop)
    });
    relay.arrived.notified().await;
    node.shutdown().await;
    advertised.await.unwrap().unwrap();
    // As roscpp's NodeHandle after shutdown: handles that are closed and registered
    // nowhere, so a program that is ending needs no error path for them.
    let later = node
        .advertise::<std_msgs::String>("/too_late", AdvertiseOptions::default())
        .await
        .unwrap();
    later
        .publish(&std_msgs::String {
            data: "gone".into(),
        })
        .expect("publishing on it does nothing, and is no error");
    assert_eq!(later.num_subscribers(), 0);
    let mut too_late = node
        .subscribe::<std_msgs::String>("/too_late", SubscribeOptions::default())
        .await
        .unwrap();
    assert!(too_late.recv().await.is_none(), "a closed subscription");
    let observer = udpros::api::MasterClient::new(
        master.uri(),
        "/observer",
        udpros::xmlrpc::XmlRpcClient::default(),
    );
    let state = observer.get_system_state().await.unwrap();
    let listed = |list: &[(String, Vec<String>)]| {
        list.iter()
            .any(|(_, nodes)| nodes.iter().any(|n| n == "/hasty"))
    };
    assert!(
        !listed(&state.publishers) && !listed(&state.subscribers),
        "left registered: {state:?}"
    );
}

/// The info strings of the node's getBusInfo rows.
async fn bus_info_strings(node: &Node) -> Vec<String> {
    let info = udpros::xmlrpc::XmlRpcClient::default()
        .call(node.uri(), "getBusInfo", vec!["/t".into()])
        .await
        .unwrap();
    let rows = info.as_array().unwrap()[2].as_array().unwrap().to_vec();
    rows.iter()
        .filter_map(|r| r.as_array()?.get(6)?.as_str().map(str::to_string))
        .collect()
}

/// Between udpros peers FEC is on by default (adaptive): both ends say so in getBusInfo,
/// the publisher's links show what the subscriber reported (nothing lost on loopback) and
/// the redundancy in use, and large messages arrive whole. A subscriber that turns it off
/// gets today's wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fec_is_negotiated_between_udpros_peers_and_shown() {
    let (_m, talker, listener) = graph().await;
    let publisher = talker
        .advertise::<std_msgs::UInt8MultiArray>("/fec", AdvertiseOptions::default())
        .await
        .unwrap();
    let mut subscriber = listener
        .subscribe::<std_msgs::UInt8MultiArray>("/fec", SubscribeOptions::udp_only())
        .await
        .unwrap();
    linked(&publisher).await;
    for n in 0..20u32 {
        publisher.publish(&bytes_msg(n, 100_000)).unwrap();
        let m = tokio::time::timeout(Duration::from_secs(5), subscriber.recv())
            .await
            .expect("a message")
            .unwrap();
        assert_eq!(
            m.data,
            bytes_msg(u32::from_le_bytes(m.data[..4].try_into().unwrap()), 100_000).data
        );
        // Spaced so that the subscriber's reports (every 200 ms at most) come back.
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let links = publisher.links();
    let fec = links[0].fec.expect("FEC between udpros peers");
    assert!(fec.link.target.is_some(), "adaptive by default");
    assert_eq!(fec.reported_loss, Some(0.0), "{fec:?}");
    // Over loopback a 100 kB message is 2 shards of the largest datagram.
    assert!(fec.last_blocks >= 2, "{fec:?}");
    assert!(
        fec.last_repairs <= 4,
        "a clean link, the prior fading: {fec:?}"
    );
    let received = subscriber.links();
    assert_eq!(received[0].udp.corrupt, 0);
    // Every message of several blocks carries its checksum in a metadata datagram: those
    // are counted as checksums, not as repair (only shards are repair).
    assert!(
        received[0].udp.checksums >= 19,
        "checksums came: {:?}",
        received[0].udp
    );
    assert!(
        received[0].udp.repairs <= fec.repairs_sent,
        "{:?} {fec:?}",
        received[0].udp
    );
    let talker_info = bus_info_strings(&talker).await;
    assert!(
        talker_info.iter().any(|s| s.contains("; FEC adaptive")),
        "{talker_info:?}"
    );
    let listener_info = bus_info_strings(&listener).await;
    assert!(
        listener_info
            .iter()
            .any(|s| s.contains("; FEC: loss seen 0.00 %")),
        "{listener_info:?}"
    );

    // Off on the subscriber's side: no FEC on the link.
    let off = SubscribeOptions {
        fec: udpros::node::FecPolicy::Off,
        ..SubscribeOptions::udp_only()
    };
    let mut plain = listener
        .subscribe::<std_msgs::UInt8MultiArray>("/fec_off", off)
        .await
        .unwrap();
    let plain_publisher = talker
        .advertise::<std_msgs::UInt8MultiArray>("/fec_off", AdvertiseOptions::default())
        .await
        .unwrap();
    linked(&plain_publisher).await;
    plain_publisher.publish(&bytes_msg(1, 100_000)).unwrap();
    tokio::time::timeout(Duration::from_secs(5), plain.recv())
        .await
        .expect("a message")
        .unwrap();
    assert_eq!(plain_publisher.links()[0].fec, None);
    assert_eq!(plain.links()[0].udp.repairs, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_dropped_and_made_again_at_once_stay_registered() {
    // The unregistration of the dropped handle runs in the background; the new
    // registration waits for it, or the master would hear them in the wrong order and
    // forget the new one.
    let (_master, talker, _listener) = graph().await;
    for _ in 0..20 {
        let publisher = talker
            .advertise::<std_msgs::String>("again", AdvertiseOptions::default())
            .await
            .unwrap();
        drop(publisher);
        let subscriber = talker
            .subscribe::<std_msgs::String>("again_in", SubscribeOptions::default())
            .await
            .unwrap();
        drop(subscriber);
    }
    let _publisher = talker
        .advertise::<std_msgs::String>("again", AdvertiseOptions::default())
        .await
        .unwrap();
    let _subscriber = talker
        .subscribe::<std_msgs::String>("again_in", SubscribeOptions::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await; // any late unregistration lands
    let state = talker.master().get_system_state().await.unwrap();
    let lists = |table: &[(String, Vec<String>)], topic: &str| {
        table
            .iter()
            .any(|(t, nodes)| t == topic && nodes.iter().any(|n| n == "/talker"))
    };
    assert!(lists(&state.publishers, "/again"), "{state:?}");
    assert!(lists(&state.subscribers, "/again_in"), "{state:?}");
}
