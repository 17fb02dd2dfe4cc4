//! Stock ROS tools and clients on udpros topics and nodes: rostopic echo/hz/info, rosnode
//! info/ping, Python's xmlrpc.client against the slave API, and latched topics reaching
//! late subscribers of every kind.

use udpros_testkit as common;

use common::node;

use common::{ros_tool, spawn_lines};
use std::process::Command;
use std::time::Duration;
use udpros::msgs::std_msgs;
use udpros::node::{AdvertiseOptions, SubscribeOptions};

const WAIT: Duration = Duration::from_secs(30);

fn output(mut cmd: Command) -> String {
    let out = cmd.output().expect("run tool");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rostopic_and_rosnode_on_a_udpros_node() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let talker = node(&uri, "udpros_talker").await;
    let publisher = talker
        .advertise::<std_msgs::String>("/chatter", AdvertiseOptions::default())
        .await
        .unwrap();
    let message = std_msgs::String {
        data: "from udpros".into(),
    };
    let sending = common::publish_every(publisher, message, Duration::from_millis(50));
    tokio::task::block_in_place(|| {
        let mut echo = ros_tool(&python, "rostopic", &uri);
        echo.args(["echo", "-n", "2", "/chatter"]);
        let text = output(echo);
        assert_eq!(
            text,
            "data: \"from udpros\"\n---\ndata: \"from udpros\"\n---\n"
        );

        let mut hz = ros_tool(&python, "rostopic", &uri);
        hz.args(["hz", "/chatter"]);
        let (_hz, mut lines) = spawn_lines(hz);
        let rate = lines
            .wait_for(WAIT, |l| l.starts_with("average rate: "))
            .expect("rostopic hz reports");
        let rate: f64 = rate["average rate: ".len()..].parse().unwrap();
        assert!((10.0..30.0).contains(&rate), "rate {rate}");

        let mut info = ros_tool(&python, "rostopic", &uri);
        info.args(["info", "/chatter"]);
        let text = output(info);
        assert!(text.contains("Type: std_msgs/String"), "{text}");
        assert!(
            text.contains(" * /udpros_talker (http://127.0.0.1:"),
            "{text}"
        );

        let mut node_info = ros_tool(&python, "rosnode", &uri);
        node_info.args(["info", "/udpros_talker"]);
        let text = output(node_info);
        assert!(text.contains("Node [/udpros_talker]"), "{text}");
        assert!(
            text.contains(" * /chatter [std_msgs/String]")
                && text.contains(" * /rosout [rosgraph_msgs/Log]"),
            "{text}"
        );
        assert!(
            text.contains(&format!("Pid: {}", std::process::id())),
            "{text}"
        );

        let mut ping = ros_tool(&python, "rosnode", &uri);
        ping.args(["ping", "-c", "2", "/udpros_talker"]);
        let text = output(ping);
        assert_eq!(
            text.matches("reply from http://127.0.0.1:").count(),
            2,
            "{text}"
        );
    });
    sending.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rosnode_info_shows_udpros_connections() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some(roscpp) = common::roscpp_peer() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let talker = node(&uri, "udpros_talker").await;
    let publisher = talker
        .advertise::<std_msgs::String>("/chatter", AdvertiseOptions::default())
        .await
        .unwrap();
    let mut sub = Command::new(roscpp);
    sub.args(["sub", "/chatter", "--hints", "udp"]);
    common::ros_env(&mut sub, &uri);
    let (_sub, mut lines) = spawn_lines(sub);
    let message = std_msgs::String { data: "x".into() };
    let sending = common::publish_every(publisher, message, Duration::from_millis(50));
    tokio::task::block_in_place(|| {
        assert!(lines.wait_for(WAIT, |l| l.starts_with("RECV ")).is_some());
        let mut node_info = ros_tool(&python, "rosnode", &uri);
        node_info.args(["info", "/udpros_talker"]);
        let text = output(node_info);
        assert!(text.contains("    * transport: UDPROS"), "{text}");
    });
    sending.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slave_api_answers_python_with_rospys_shapes() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let master = udpros::master::Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let n = node(master.uri(), "checked").await;
    let _p = n
        .advertise::<std_msgs::String>("/published", AdvertiseOptions::default())
        .await
        .unwrap();
    let _s = n
        .subscribe::<std_msgs::String>("/subscribed", SubscribeOptions::default())
        .await
        .unwrap();
    let out = tokio::task::block_in_place(|| {
        Command::new(&python)
            .arg(common::peer_script("slave_api_check.py"))
            .args([n.uri(), "/published", "/subscribed"])
            .output()
            .expect("run checker")
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let json = |s: &str| -> serde_json::Value { serde_json::from_str(s).unwrap() };
    assert_eq!(r["getBusStats"][0], 1);
    assert_eq!(r["getBusStats"][2].as_array().unwrap().len(), 3);
    assert_eq!(r["getBusInfo"][0], 1);
    assert_eq!(r["getBusInfo"][1], "bus info");
    assert_eq!(
        r["getMasterUri"],
        json(&format!("[1, \"{0}\", \"{0}\"]", master.uri()))
    );
    assert_eq!(
        r["getPid"],
        json(&format!("[1, \"\", {}]", std::process::id()))
    );
    assert_eq!(
        r["getSubscriptions"],
        json(r#"[1, "subscriptions", [["/subscribed", "std_msgs/String"]]]"#)
    );
    assert_eq!(
        r["getPublications"],
        json(
            r#"[1, "publications", [["/published", "std_msgs/String"], ["/rosout", "rosgraph_msgs/Log"]]]"#
        )
    );
    assert_eq!(r["getUri"], json(&format!("[1, \"\", \"{}\"]", n.uri())));
    assert_eq!(r["getName"], json(r#"[1, "", "/checked"]"#));
    assert_eq!(r["paramUpdate"], json(r#"[-1, "not subscribed", 0]"#));
    assert_eq!(
        r["paramUpdate_relative"],
        json(r#"[-1, "ERROR: parameter [parameter_key] must be a globally referenced name", -1]"#)
    );
    assert_eq!(r["publisherUpdate"], json(r#"[1, "", 0]"#));
    assert_eq!(
        r["publisherUpdate_bad"],
        json(r#"[-1, "ERROR: param [publishers] must be a list", -1]"#)
    );
    assert_eq!(
        r["requestTopic_unknown"],
        json(r#"[-1, "Not a publisher of [/not_published]", []]"#)
    );
    assert_eq!(
        r["requestTopic_empty"],
        json(r#"[-1, "ERROR: parameter [protocols] must be specified and non-empty", []]"#)
    );
    assert_eq!(r["requestTopic_tcp"][0], 1);
    assert_eq!(r["requestTopic_tcp"][2][0], "TCPROS");
    assert_eq!(r["requestTopic_tcp"][2].as_array().unwrap().len(), 3);
    assert_eq!(
        r["requestTopic_none"],
        json(r#"[0, "no supported protocol implementations", []]"#)
    );
    assert_eq!(
        r["getPid_arity"],
        json(r#"[-1, "Error: bad call arity", -1]"#)
    );
    assert_eq!(
        r["getPid_callerid"],
        json(r#"[-1, "caller_id must be a string", -1]"#)
    );
    assert_eq!(
        r["shutdown_arity"],
        json(r#"[-1, "Error: bad call arity", 0]"#)
    );
    assert_eq!(r["unknown_method"], json(r#"{"fault": 1}"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latched_topics_reach_late_subscribers_of_every_kind() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some(roscpp) = common::roscpp_peer() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let talker = node(&uri, "latcher").await;
    // Kept by the publication as it is published: a subscriber that connects later gets it.
    let _publisher = common::latched_string(&talker, "/latched", "once").await;
    tokio::task::block_in_place(|| {
        for hints in ["udp", "tcp"] {
            let mut sub = Command::new(&roscpp);
            sub.args(["sub", "/latched", "--hints", hints]);
            common::ros_env(&mut sub, &uri);
            let (_sub, mut lines) = spawn_lines(sub);
            assert!(
                lines.wait_for(WAIT, |l| l == "RECV once 4 ok").is_some(),
                "roscpp {hints}: {:?}",
                lines.seen
            );
        }
        let mut sub = Command::new(&python);
        sub.arg(common::peer_script("rospy_peer.py"))
            .args(["sub", "/latched"]);
        common::ros_env(&mut sub, &uri);
        let (_sub, mut lines) = spawn_lines(sub);
        assert!(
            lines.wait_for(WAIT, |l| l == "RECV once 4 ok").is_some(),
            "rospy: {:?}",
            lines.seen
        );
    });
    let listener = node(&uri, "late").await;
    let mut sub = listener
        .subscribe::<std_msgs::String>("/latched", SubscribeOptions::udp_only())
        .await
        .unwrap();
    let got = tokio::time::timeout(WAIT, sub.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.data, "once");
}

/// `header.seq` is filled in as rospy fills it: the first message a subscriber can receive
/// is 1, publishing to nobody uses no number, and the caller's value is replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_seq_counts_as_rospy_counts_it() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let talker = node(&uri, "stamper").await;
    let publisher = talker
        .advertise::<udpros::msgs::geometry_msgs::PointStamped>(
            "/stamped",
            AdvertiseOptions::default(),
        )
        .await
        .unwrap();
    let mut message = udpros::msgs::geometry_msgs::PointStamped::default();
    message.header.seq = 777;
    let sending = common::publish_every(publisher, message, Duration::from_millis(50));
    // Published to nobody for a while: no number is used up.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let text = tokio::task::block_in_place(|| {
        let mut echo = ros_tool(&python, "rostopic", &uri);
        echo.args(["echo", "-n", "3", "/stamped/header/seq"]);
        output(echo)
    });
    assert_eq!(text, "1\n---\n2\n---\n3\n---\n");
    sending.abort();
}
