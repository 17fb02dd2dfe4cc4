//! No value a dynamic_reconfigure client can send crashes a bridge (issue 33, item 1): every
//! setting of `ping_sonar` (Ping1D and Ping360) and `mavlink_bridge` (`~` and `~fit`) gets
//! NaN, infinities, subnormals, extremes and a megabyte string through the real
//! `set_parameters` service; each answer holds only finite numbers, a refused value leaves
//! the old one in place, and the node keeps answering and publishing. Debian's `dynparam`
//! sends NaN the way a user at a terminal would.

use udpros_testkit as common;

use std::time::Duration;
use udpros::master::Master;
use udpros::msgs::dynamic_reconfigure as dr;
use udpros::node::Node;
use udpros::service::ServiceClient;
use udpros_bridges::mavlink::link::FcuUrl;
use udpros_bridges::ping::link::LinkSpec;
use udpros_bridges::ping::DeviceKind;

const DOUBLES: [f64; 10] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    5e-324,
    -5e-324,
    f64::MIN_POSITIVE,
    f64::MAX,
    f64::MIN,
    0.0,
    -0.0,
];
const INTS: [i32; 5] = [i32::MIN, i32::MAX, -1, 0, 1 << 20];

fn strings() -> Vec<String> {
    vec![
        "x".repeat(1 << 20),
        String::new(),
        "\u{0}\u{FFFF}é".into(),
        "window ".into(),
    ]
}

/// The current config of a server: a call that sets nothing.
async fn current(client: &ServiceClient<dr::Reconfigure>) -> dr::Config {
    client
        .call_timeout(&dr::ReconfigureRequest::default(), Duration::from_secs(10))
        .await
        .expect("the node answers set_parameters")
        .config
}

/// One hostile value for `name` at a time; the answers stay finite and the node alive.
async fn attack(ns: &str, client: &ServiceClient<dr::Reconfigure>) -> usize {
    let before = current(client).await;
    let mut calls = 0;
    let mut requests: Vec<dr::Config> = Vec::new();
    for p in &before.doubles {
        for v in DOUBLES {
            requests.push(dr::Config {
                doubles: vec![dr::DoubleParameter {
                    name: p.name.clone(),
                    value: v,
                }],
                ..Default::default()
            });
        }
    }
    for p in &before.ints {
        for v in INTS {
            requests.push(dr::Config {
                ints: vec![dr::IntParameter {
                    name: p.name.clone(),
                    value: v,
                }],
                ..Default::default()
            });
        }
    }
    for p in &before.strs {
        for v in strings() {
            requests.push(dr::Config {
                strs: vec![dr::StrParameter {
                    name: p.name.clone(),
                    value: v,
                }],
                ..Default::default()
            });
        }
    }
    for request in requests {
        let what = format!("{ns}: {:?}", summary(&request));
        let answer = client
            .call_timeout(
                &dr::ReconfigureRequest { config: request },
                Duration::from_secs(10),
            )
            .await
            .unwrap_or_else(|e| panic!("{what}: no answer: {e}"))
            .config;
        calls += 1;
        for d in &answer.doubles {
            assert!(
                d.value.is_finite(),
                "{what}: answered {} = {}",
                d.name,
                d.value
            );
        }
        for s in &answer.strs {
            assert!(
                s.value.len() <= 4096,
                "{what}: {} kept a huge string",
                s.name
            );
        }
    }
    // NaN for a setting leaves it as it was.
    for p in &before.doubles {
        let now = current(client).await;
        let request = dr::Config {
            doubles: vec![dr::DoubleParameter {
                name: p.name.clone(),
                value: f64::NAN,
            }],
            ..Default::default()
        };
        let answer = client
            .call_timeout(
                &dr::ReconfigureRequest { config: request },
                Duration::from_secs(10),
            )
            .await
            .unwrap()
            .config;
        assert_eq!(
            answer.doubles, now.doubles,
            "{ns}: NaN for {} changed",
            p.name
        );
    }
    calls
}

fn summary(c: &dr::Config) -> String {
    let mut s = String::new();
    for d in &c.doubles {
        s += &format!("{}={} ", d.name, d.value);
    }
    for i in &c.ints {
        s += &format!("{}={} ", i.name, i.value);
    }
    for t in &c.strs {
        s += &format!("{}=<{} bytes> ", t.name, t.value.len());
    }
    s
}

async fn serving(node: &Node, service: &str) -> ServiceClient<dr::Reconfigure> {
    let client = node.service_client::<dr::Reconfigure>(service, Default::default());
    client
        .wait_for_service(Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("{service} served: {e}"));
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_setting_of_both_bridges_survives_hostile_values() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    let mut tasks = Vec::new();
    for (name, kind) in [("p360", DeviceKind::Ping360), ("p1d", DeviceKind::Ping1d)] {
        let n = common::node(&uri, name).await;
        let cfg = udpros_bridges::ping::node::Config::new(LinkSpec::Sim(kind));
        tasks.push(tokio::spawn(async move {
            udpros_bridges::ping::node::run(n, cfg)
                .await
                .map_err(|e| e.to_string())
        }));
    }
    let n = common::node(&uri, "fcu").await;
    let cfg = udpros_bridges::mavlink::node::Config::new(FcuUrl::Sim);
    tasks.push(tokio::spawn(udpros_bridges::mavlink::node::run(n, cfg)));

    let client = common::node(&uri, "attacker").await;
    let mut calls = 0;
    for service in [
        "/p360/set_parameters",
        "/p1d/set_parameters",
        "/fcu/set_parameters",
        "/fcu/fit/set_parameters",
    ] {
        let server = serving(&client, service).await;
        calls += attack(service, &server).await;
        assert!(
            tasks.iter().all(|t| !t.is_finished()),
            "a bridge stopped during {service}"
        );
    }
    println!("{calls} hostile calls answered");
    assert!(calls >= 170, "every setting was tried ({calls} calls)");

    // Still at work after the attack: the last values it took may be legal but idle (0 Hz
    // turns an exchange off), so sane rates go first, through the same service.
    let fcu = serving(&client, "/fcu/set_parameters").await;
    let sane = dr::Config {
        doubles: [
            ("ping_rate", 1.0),
            ("timesync_rate", 10.0),
            ("timeout", 2.0),
        ]
        .into_iter()
        .map(|(name, value)| dr::DoubleParameter {
            name: name.into(),
            value,
        })
        .collect(),
        ..Default::default()
    };
    let answer = fcu
        .call_timeout(
            &dr::ReconfigureRequest { config: sane },
            Duration::from_secs(10),
        )
        .await
        .unwrap()
        .config;
    assert!(answer
        .doubles
        .iter()
        .any(|d| d.name == "timesync_rate" && d.value == 10.0));
    let mut echoes = client
        .subscribe::<udpros::msgs::udpros::Ping360Echo>("/p360/echo", Default::default())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), echoes.recv())
        .await
        .expect("the Ping360 still publishes")
        .unwrap();
    let mut status = client
        .subscribe::<udpros::msgs::mavros_msgs::TimesyncStatus>(
            "/fcu/timesync_status",
            Default::default(),
        )
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), status.recv())
        .await
        .expect("the bridge still estimates the clock")
        .unwrap();

    // What was mirrored to the parameter server starts a node again.
    for key in ["/fcu/ping_rate", "/fcu/timesync_rate", "/p360/range"] {
        let v: f64 = client.param(key, f64::NAN).await.unwrap();
        assert!(v.is_finite(), "{key} mirrored as {v}");
    }

    // Stock dynparam, as a user types it.
    if let Some(python) = common::ros_python() {
        let dynparam = common::Dynparam::new(&python, &uri, "hostile");
        for (node, key) in [
            ("/p360", "range"),
            ("/p360", "speed_of_sound"),
            ("/fcu", "ping_rate"),
        ] {
            let before = current(&serving(&client, &format!("{node}/set_parameters")).await).await;
            tokio::task::block_in_place(|| dynparam.run(&["set", node, key, "nan"]));
            let after = current(&serving(&client, &format!("{node}/set_parameters")).await).await;
            assert_eq!(before.doubles, after.doubles, "dynparam {node} {key} nan");
        }
        assert!(tasks.iter().all(|t| !t.is_finished()), "a bridge stopped");
    }
    for t in tasks {
        t.abort();
    }
}
