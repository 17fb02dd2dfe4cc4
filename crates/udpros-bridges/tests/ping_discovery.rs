//! Ping360 Ethernet discovery across hosts of a network made of namespaces (the broadcast
//! never leaves them): a stand-in Ping360 (the discovery reply as the protocol documents
//! it, and the simulated device on UDP 12345) on one host; on another, `discover` lists it,
//! and `ping_sonar _device:=discover` publishes its pings, then follows it when it comes
//! back at another address.

use udpros_testkit as common;

use common::netns::Network;
use common::node;
use std::net::Ipv4Addr;
use std::sync::mpsc;
use std::time::Duration;
use udpros::master::Master;
use udpros::msgs::udpros as umsg;
use udpros::node::SubscribeOptions;
use udpros_bridges::ping::discovery;
use udpros_bridges::ping::link::LinkSpec;
use udpros_bridges::ping::node::{run, Config};

#[test]
fn discover_finds_a_ping360_and_the_node_follows_it_to_its_new_address() {
    let Some(net) = Network::new(&["topside", "sonar", "sonar2"], 1500) else {
        return;
    };
    let address = |host: &str| -> Ipv4Addr { net.host(host).ipv4.parse().unwrap() };
    let (first, second) = (address("sonar"), address("sonar2"));
    let (stop_first, stopped) = mpsc::channel();
    let sonar = net
        .host("sonar")
        .spawn_inside(move || discovery::run_simulated(first, "02-00-00-00-00-01", stopped));

    // The topside: discovery lists the sonar; the node finds it and publishes its pings;
    // when it moves, the node finds it again.
    let (moved_tx, moved) = mpsc::channel::<()>();
    let (move_it, move_asked) = mpsc::channel::<()>();
    let topside = net.host("topside").spawn_inside(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let found = discovery::discover(Duration::from_secs(2)).await.unwrap();
            assert_eq!(found.len(), 1, "{found:?}");
            assert_eq!(found[0].address, first);
            assert_eq!(found[0].mac, "02-00-00-00-00-01");
            assert!(found[0].name.contains("PING360"), "{found:?}");

            let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
                .await
                .unwrap();
            let sonar = node(master.uri(), "ping_sonar").await;
            let task = tokio::spawn(run(sonar.clone(), Config::new(LinkSpec::Discover)));
            let listener = node(master.uri(), "listener").await;
            let mut echoes = listener
                .subscribe::<umsg::Ping360Echo>("/ping_sonar/echo", SubscribeOptions::default())
                .await
                .unwrap();
            let count = async |echoes: &mut udpros::node::Subscriber<umsg::Ping360Echo>| {
                for i in 0..10 {
                    tokio::time::timeout(Duration::from_secs(30), echoes.recv())
                        .await
                        .unwrap_or_else(|_| panic!("echo {i}"))
                        .unwrap();
                }
            };
            count(&mut echoes).await;
            // The sonar goes away and comes back elsewhere.
            move_it.send(()).unwrap();
            tokio::task::spawn_blocking(move || moved.recv().unwrap())
                .await
                .unwrap();
            // What the first sonar sent before it stopped.
            while let Ok(Some(_)) =
                tokio::time::timeout(Duration::from_millis(300), echoes.recv()).await
            {}
            count(&mut echoes).await;
            sonar.shutdown().await;
            task.await.unwrap().unwrap();
        });
    });
    move_asked
        .recv_timeout(Duration::from_secs(60))
        .expect("the node published the first sonar's pings");
    stop_first.send(()).unwrap();
    sonar.join().unwrap();
    let (_stop_second, stopped) = mpsc::channel();
    let _second = net
        .host("sonar2")
        .spawn_inside(move || discovery::run_simulated(second, "02-00-00-00-00-02", stopped));
    moved_tx.send(()).unwrap();
    topside.join().expect("the node followed the sonar");
}
