//! Proof of the graph key on XML-RPC calls (issue 50): under `require` the master and
//! every node take no call without it — a fake publisher registered at the master,
//! `setParam`, `shutdown`, `requestTopic`, `publisherUpdate` from a keyless client, another
//! key's calls, a replayed call, a changed body — while the graph's own traffic keeps
//! flowing; under `prefer` stock callers are taken and the master names them; a node under
//! `require` takes no unsigned answer; Debian's ROS tools are refused in one clear line.

use udpros_testkit as common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use udpros::msgs::std_msgs;
use udpros::node::{AdvertiseOptions, Node, NodeOptions, SubscribeOptions};
use udpros::secure::{GraphKey, Mode, Policy, Security};
use udpros::xmlrpc::{write_call, CallSigner, Value, XmlRpcClient};

const WAIT: Duration = Duration::from_secs(20);

fn security(policy: Policy, key: [u8; 32]) -> Security {
    Security {
        policy,
        mode: Mode::Encrypt,
        key: Some(Arc::new(GraphKey::from_bytes(key))),
        cipher: None,
    }
}

const KEY: [u8; 32] = [21; 32];

async fn master(policy: Policy) -> udpros::master::Master {
    udpros::master::Master::start_with(
        "127.0.0.1:0".parse().unwrap(),
        "127.0.0.1",
        &security(policy, KEY),
    )
    .await
    .unwrap()
}

async fn node(master: &str, name: &str, security: Security) -> Node {
    let options = NodeOptions {
        security: Some(security),
        ..NodeOptions::default()
    };
    common::node_with(master, name, options).await
}

/// The text of a call's refusal (a ROS status triple of code -1, as every ROS caller
/// reports in one line); panics if it was taken.
async fn refused(client: &XmlRpcClient, uri: &str, method: &str, params: Vec<Value>) -> String {
    match client.call(uri, method, params).await {
        Ok(Value::Array(triple)) if triple.first() == Some(&Value::Int(-1)) => {
            triple[1].as_str().unwrap_or_default().to_string()
        }
        other => panic!("{method} was not refused: {other:?}"),
    }
}

/// One HTTP POST of `body` with `proof` as the proof header, on a connection of its own;
/// the answer's body.
async fn post(uri: &str, body: &[u8], proof: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let authority = uri
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: {authority}\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\
         x-udpros-proof: {proof}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut answer))
        .await
        .expect("an answer")
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_require_no_keyless_forged_or_replayed_call_is_taken_while_traffic_flows() {
    let master = master(Policy::Require).await;
    let uri = master.uri().to_string();
    let talker = node(&uri, "talker", security(Policy::Require, KEY)).await;
    let publisher = talker
        .advertise::<std_msgs::String>("/secret", AdvertiseOptions::default())
        .await
        .unwrap();
    let sending = tokio::spawn(async move {
        for n in 0u32.. {
            let message = std_msgs::String {
                data: format!("order {n}"),
            };
            if publisher.publish(&message).is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let listener = node(&uri, "listener", security(Policy::Require, KEY)).await;
    let mut sub = listener
        .subscribe::<std_msgs::String>("/secret", SubscribeOptions::udp_only())
        .await
        .unwrap();
    let heard = Arc::new(AtomicUsize::new(0));
    let counting = {
        let heard = heard.clone();
        tokio::spawn(async move {
            while let Some(m) = sub.recv().await {
                assert!(m.data.starts_with("order "), "{m:?}");
                heard.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    assert!(
        common::wait_for(WAIT, || heard.load(Ordering::Relaxed) >= 5),
        "the secured graph's own traffic flows"
    );

    let keyless = XmlRpcClient::default();
    let other_key = XmlRpcClient::default().signed(&security(Policy::Require, [22; 32]));
    let owner = XmlRpcClient::default().signed(&security(Policy::Require, KEY));
    let before = heard.load(Ordering::Relaxed);
    for client in [&keyless, &other_key] {
        let fake = refused(
            client,
            &uri,
            "registerPublisher",
            vec![
                "/fake".into(),
                "/secret".into(),
                "std_msgs/String".into(),
                "http://127.0.0.1:9/".into(),
            ],
        )
        .await;
        assert!(fake.contains("call refused"), "{fake}");
        let set = refused(
            client,
            &uri,
            "setParam",
            vec!["/fake".into(), "/evil".into(), Value::Int(1)],
        )
        .await;
        assert!(set.contains("call refused"), "{set}");
        for (node, method, params) in [
            (&talker, "shutdown", vec!["/fake".into(), "bye".into()]),
            (
                &talker,
                "requestTopic",
                vec![
                    "/fake".into(),
                    "/secret".into(),
                    Value::Array(vec![Value::Array(vec!["TCPROS".into()])]),
                ],
            ),
            (
                &listener,
                "publisherUpdate",
                vec![
                    "/master".into(),
                    "/secret".into(),
                    Value::Array(vec!["http://127.0.0.1:9/".into()]),
                ],
            ),
            (
                &listener,
                "paramUpdate",
                vec!["/master".into(), "/evil/".into(), Value::Int(1)],
            ),
        ] {
            let text = refused(client, node.uri(), method, params).await;
            assert!(text.contains("call refused"), "{method}: {text}");
        }
    }
    let keyless_text = refused(&keyless, &uri, "getPid", vec!["/fake".into()]).await;
    assert!(
        keyless_text.contains("carries no proof of the graph key")
            && keyless_text.contains("UDPROS_KEY_FILE"),
        "one line that says what to do: {keyless_text}"
    );
    let wrong_text = refused(&other_key, &uri, "getPid", vec!["/fake".into()]).await;
    assert!(wrong_text.contains("is wrong"), "{wrong_text}");

    // A call signed with the key, sent twice: taken once.
    let signer = CallSigner::new(&security(Policy::Require, KEY)).unwrap();
    let body = write_call(
        "setParam",
        &["/owner".into(), "/replayed".into(), Value::Int(7)],
    );
    let signed = signer.sign(body.as_bytes()).unwrap();
    let first = post(&uri, body.as_bytes(), &signed.header).await;
    assert!(!first.contains("faultString"), "{first}");
    let deleted = owner
        .call(
            &uri,
            "deleteParam",
            vec!["/owner".into(), "/replayed".into()],
        )
        .await
        .unwrap();
    assert_eq!(deleted.as_array().unwrap()[0], Value::Int(1));
    let again = post(&uri, body.as_bytes(), &signed.header).await;
    assert!(again.contains("replayed"), "{again}");
    // The same proof on a changed body: refused.
    let changed = body.replace("<i4>7</i4>", "<i4>8</i4>");
    assert_ne!(changed, body);
    let forged = post(&uri, changed.as_bytes(), &signed.header).await;
    assert!(forged.contains("is wrong"), "{forged}");

    // Nothing was taken: no fake publisher, no parameter, both nodes alive and linked.
    let state = owner
        .call(&uri, "getSystemState", vec!["/owner".into()])
        .await
        .unwrap();
    let state = format!("{state:?}");
    assert!(!state.contains("/fake"), "{state}");
    let has = owner
        .call(&uri, "hasParam", vec!["/owner".into(), "/evil".into()])
        .await
        .unwrap();
    assert_eq!(has.as_array().unwrap()[2], Value::Bool(false));
    let has = owner
        .call(&uri, "hasParam", vec!["/owner".into(), "/replayed".into()])
        .await
        .unwrap();
    assert_eq!(has.as_array().unwrap()[2], Value::Bool(false));
    assert!(!talker.is_shutdown() && !listener.is_shutdown());
    assert!(
        common::wait_for(WAIT, || heard.load(Ordering::Relaxed) >= before + 20),
        "traffic kept flowing through the attacks"
    );
    assert!(master.unproven_nodes().is_empty());
    sending.abort();
    counting.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_prefer_stock_callers_are_taken_and_the_master_names_them() {
    let master = master(Policy::Prefer).await;
    let uri = master.uri().to_string();
    let _secured = node(&uri, "secured", security(Policy::Prefer, KEY)).await;
    // A node with security off is a stock peer to the master.
    let _plain = node(&uri, "plain", Security::default()).await;
    let keyless = XmlRpcClient::default();
    let taken = keyless
        .call(
            &uri,
            "registerSubscriber",
            vec![
                "/stock_tool".into(),
                "/chatter".into(),
                "std_msgs/String".into(),
                "http://127.0.0.1:9/".into(),
            ],
        )
        .await
        .unwrap();
    assert_eq!(taken.as_array().unwrap()[0], Value::Int(1));
    let named = master.unproven_nodes();
    assert!(named.contains(&"/stock_tool".to_string()), "{named:?}");
    assert!(named.contains(&"/plain".to_string()), "{named:?}");
    assert!(!named.contains(&"/secured".to_string()), "{named:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_under_require_takes_no_unsigned_answer_from_a_stock_master() {
    let stock = udpros::master::Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let options = NodeOptions {
        security: Some(security(Policy::Require, KEY)),
        ..NodeOptions::default()
    };
    let error = common::try_node_with(stock.uri(), "strict", options)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        error.contains("carries no proof of the graph key") && error.contains("require"),
        "{error}"
    );
}

fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
}

/// Debian's rosparam and rosnode against a graph under `require`: each fails, and the line
/// it ends on says the call was refused for want of the key (these tools end any master
/// error in a traceback; the refusal is a ROS status of -1, so its text is that line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ros_tools_fail_on_a_line_that_names_the_refusal_under_require() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let master = master(Policy::Require).await;
    let uri = master.uri().to_string();
    let _talker = node(&uri, "talker", security(Policy::Require, KEY)).await;
    for args in [vec!["set", "/evil", "1"], vec!["get", "/rosdistro"]] {
        let ran = common::run_tool(common::ros_tool(&python, "rosparam", &uri).args(&args));
        println!("rosparam {args:?}: {ran:?}");
        assert!(!ran.ok, "rosparam {args:?} was taken: {ran:?}");
        assert!(
            last_line(&ran.stderr).contains("call refused: the call carries no proof"),
            "rosparam {args:?}: {ran:?}"
        );
    }
    let ran =
        common::run_tool(common::ros_tool(&python, "rosnode", &uri).args(["kill", "/talker"]));
    println!("rosnode kill: {ran:?}");
    assert!(!ran.ok, "{ran:?}");
    assert!(
        last_line(&ran.stderr).contains("call refused: the call carries no proof"),
        "{ran:?}"
    );
    let owner = XmlRpcClient::default().signed(&security(Policy::Require, KEY));
    let has = owner
        .call(&uri, "hasParam", vec!["/owner".into(), "/evil".into()])
        .await
        .unwrap();
    assert_eq!(has.as_array().unwrap()[2], Value::Bool(false));
}
