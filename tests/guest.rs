//! `udpros::guest`: udpros's links lent to a node another library runs (what `import
//! udpros.rospy` is built on; the Python tests run it inside rospy against roscpp). Here:
//! a guest's link to a udpros publisher, and the caps on the UDPROS links a flood of offers
//! can make a guest open.

use std::time::Duration;
use udpros::guest::{Guest, PublishedTopic};
use udpros::master::Master;
use udpros::msg::Message;
use udpros::msgs::std_msgs;
use udpros::node::{AdvertiseOptions, Node, SubscribeOptions, DEFAULT_MAX_LINKS_PER_HOST};
use udpros::transport::Protocol;
use udpros::wire::negotiation::{Offer, UdprosOffer};
use udpros::wire::topic::TopicIdentity;
use udpros::xmlrpc::Value;

fn string_topic(topic: &str) -> TopicIdentity {
    TopicIdentity {
        node: "/rospy_subscriber".into(),
        topic: topic.into(),
        msg_type: std_msgs::String::TYPE.into(),
        md5sum: std_msgs::String::MD5SUM.into(),
        definition: std_msgs::String::DEFINITION.into(),
    }
}

/// A master, a udpros node `talker` registered with it, and a guest beside them.
async fn master_talker_and_guest() -> (Master, Node, Guest) {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let args = vec![
        format!("__master:={}", master.uri()),
        "__ip:=127.0.0.1".into(),
    ];
    let talker = Node::new("talker", args).await.unwrap();
    let guest = Guest::new("/rospy_listener", "127.0.0.1", AdvertiseOptions::default()).unwrap();
    (master, talker, guest)
}

#[tokio::test]
async fn a_guest_links_to_a_udpros_publisher_over_udpros_and_closes_the_link() {
    let (master, talker, guest) = master_talker_and_guest().await;
    let publisher = talker
        .advertise::<std_msgs::String>("/chatter", AdvertiseOptions::default())
        .await
        .unwrap();
    let topic = string_topic("/chatter");
    let link = guest.link_to_publisher(
        talker.uri(),
        "/chatter",
        &topic.msg_type,
        &topic.md5sum,
        &topic.definition,
        SubscribeOptions::default(),
    );
    // The guest registered nothing: the master lists no subscriber.
    let state = udpros::api::MasterClient::new(
        master.uri(),
        "/guest_test",
        udpros::xmlrpc::XmlRpcClient::new(Duration::from_secs(2), Duration::from_secs(10)),
    )
    .get_system_state()
    .await
    .unwrap();
    assert!(
        state.subscribers.iter().all(|(t, _)| t != "/chatter"),
        "{:?}",
        state.subscribers
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let received = loop {
        publisher
            .publish(&std_msgs::String { data: "hi".into() })
            .unwrap();
        if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(50), link.recv()).await {
            break m;
        }
        assert!(tokio::time::Instant::now() < deadline, "nothing came");
    };
    assert_eq!(&received.body[4..], b"hi");
    assert_eq!(received.protocol, Protocol::Udp);
    assert_eq!(
        received.publisher.get("callerid"),
        Some(talker.name()),
        "the publisher's header"
    );
    let [state] = &link.links()[..] else {
        panic!("one link: {:?}", link.links())
    };
    assert_eq!(state.publisher_uri, talker.uri());
    assert!(state.connected && !state.ended);
    // Closed, the link ends: the publisher loses its subscriber, receiving ends.
    link.close();
    assert!(link.recv().await.is_none());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while publisher.num_subscribers() > 0 {
        assert!(tokio::time::Instant::now() < deadline, "the link stayed");
        publisher
            .publish(&std_msgs::String {
                data: "gone?".into(),
            })
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_guests_receive_ends_when_its_one_publisher_refuses_it_for_good() {
    // A guest links to one publisher and no master lists others: once that publisher
    // refuses the link for good (here: another message type), a `recv` waiting with no
    // deadline must end (rospy's receiving thread waits so) instead of hanging for ever.
    let (_master, talker, guest) = master_talker_and_guest().await;
    let _publisher = talker
        .advertise::<std_msgs::String>("/chatter", AdvertiseOptions::default())
        .await
        .unwrap();
    let link = guest.link_to_publisher(
        talker.uri(),
        "/chatter",
        std_msgs::Int32::TYPE,
        std_msgs::Int32::MD5SUM,
        std_msgs::Int32::DEFINITION,
        SubscribeOptions::default(),
    );
    let ended = tokio::time::timeout(Duration::from_secs(20), link.recv()).await;
    assert!(
        matches!(ended, Ok(None)),
        "the wait ends with the link: {ended:?}"
    );
    let [state] = &link.links()[..] else {
        panic!("the link stays listed: {:?}", link.links())
    };
    assert!(state.ended && !state.connected, "{state:?}");
}

/// The entry a subscriber's `requestTopic` offers UDPROS with, as XML-RPC values.
fn udpros_offer(header: udpros::wire::header::ConnectionHeader, port: u16) -> Vec<Value> {
    let offer = Offer::Udpros(UdprosOffer {
        header,
        host: "127.0.0.1".into(),
        port,
        max_datagram: 1500,
        ipv6_only: false,
    });
    match udpros::xmlrpc::entry(offer.to_params()) {
        Value::Array(items) => items,
        other => panic!("an entry is an array: {other:?}"),
    }
}

#[tokio::test]
async fn a_flood_of_udpros_offers_opens_no_more_links_than_the_caps() {
    let guest = Guest::new("/rospy_talker", "127.0.0.1", AdvertiseOptions::default()).unwrap();
    let published = PublishedTopic {
        topic: "/flooded".into(),
        msg_type: std_msgs::String::TYPE.into(),
        md5sum: std_msgs::String::MD5SUM.into(),
        definition: std_msgs::String::DEFINITION.into(),
        latch: false,
    };
    let subscriber = string_topic("/flooded");
    // One socket stands for every subscriber: a link needs no reader to open.
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    let offer = udpros_offer(subscriber.udp_subscriber_header(), port);
    let (mut links, mut refusals) = (Vec::new(), Vec::new());
    for _ in 0..2_000 {
        match guest.answer_udpros(&published, &offer).await {
            Ok((answer, link)) => {
                assert_eq!(answer.first(), Some(&Value::String("UDPROS".into())));
                links.push(link);
            }
            Err(refused) => refusals.push(refused.to_string()),
        }
    }
    assert_eq!(links.len(), DEFAULT_MAX_LINKS_PER_HOST, "one host's cap");
    assert_eq!(refusals.len(), 2_000 - DEFAULT_MAX_LINKS_PER_HOST);
    assert!(refusals[0].contains("127.0.0.1"), "{}", refusals[0]);
    // Links that close make room again.
    links.truncate(DEFAULT_MAX_LINKS_PER_HOST - 1);
    assert!(guest.answer_udpros(&published, &offer).await.is_ok());

    // An offer of another type, and entries that are no UDPROS offer, are refused with
    // a reason, not taken.
    let mut other = string_topic("/flooded");
    other.md5sum = "0123456789abcdef0123456789abcdef".into();
    let wrong = udpros_offer(other.udp_subscriber_header(), port);
    let why = guest.answer_udpros(&published, &wrong).await.unwrap_err();
    assert!(why.to_string().contains("0123456789abcdef"), "{why}");
    for bad in [
        vec![Value::String("TCPROS".into())],
        vec![Value::String("UDPROS".into()), Value::Int(1)],
        vec![],
        vec![
            Value::String("UDPROS".into()),
            Value::Base64(vec![0xff; 1 << 20]),
            Value::String("127.0.0.1".into()),
            Value::Int(port as i32),
            Value::Int(1500),
        ],
    ] {
        assert!(
            guest.answer_udpros(&published, &bad).await.is_err(),
            "{bad:?}"
        );
    }
}
