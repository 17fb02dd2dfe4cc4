//! The embedded master against Debian's rosmaster: one scripted corpus of master and
//! parameter calls, error cases included, sent to both; every status code, message and
//! value must be equal.

use udpros_testkit as common;

use std::collections::BTreeMap;
use std::time::Duration;
use udpros::master::Master;
use udpros::xmlrpc::{CallError, Value, XmlRpcClient};

fn s(v: &str) -> Value {
    Value::from(v)
}

fn i(v: i32) -> Value {
    Value::Int(v)
}

fn a(items: Vec<Value>) -> Value {
    Value::Array(items)
}

fn d(pairs: &[(&str, Value)]) -> Value {
    Value::Struct(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
    )
}

const API_A: &str = "http://127.0.0.1:9/";
const API_A2: &str = "http://127.0.0.1:10/";
const API_B: &str = "http://127.0.0.1:11/";

/// The calls, in order: (method, params). State carries over from call to call.
fn corpus() -> Vec<(&'static str, Vec<Value>)> {
    let mut c: Vec<(&'static str, Vec<Value>)> = vec![
        // Arity and caller_id checks.
        ("getPid", vec![]),
        ("getPid", vec![s("/a"), s("extra")]),
        ("getPid", vec![i(5)]),
        ("getPid", vec![s("/a")]),
        ("getUri", vec![s("/a")]),
        ("shutdown", vec![s("/a")]),
        ("noSuchMethod", vec![s("/a")]),
        // Publishers and subscribers, valid and not.
        (
            "registerPublisher",
            vec![s("/node_a"), s("/chatter"), s("std_msgs/String"), s(API_A)],
        ),
        (
            "registerPublisher",
            vec![s("/node_a"), s("/typed"), s("*"), s(API_A)],
        ),
        (
            "registerPublisher",
            vec![s("/node_a"), s("/bad_type"), s("notype"), s(API_A)],
        ),
        (
            "registerPublisher",
            vec![s("/node_a"), s("/bad_type"), s("a/b/c"), s(API_A)],
        ),
        (
            "registerPublisher",
            vec![s("/node_a"), s("/bad_type"), s(""), s(API_A)],
        ),
        (
            "registerPublisher",
            vec![s("/node_a"), s("/"), s("std_msgs/String"), s(API_A)],
        ),
        (
            "registerPublisher",
            vec![
                s("/node_a"),
                s("/with space"),
                s("std_msgs/String"),
                s(API_A),
            ],
        ),
        (
            "registerPublisher",
            vec![
                s("/node_a"),
                s("/with:colon"),
                s("std_msgs/String"),
                s(API_A),
            ],
        ),
        (
            "registerPublisher",
            vec![s("/node_a"), s(""), s("std_msgs/String"), s(API_A)],
        ),
        (
            "registerPublisher",
            vec![s("/node_a"), i(3), s("std_msgs/String"), s(API_A)],
        ),
        (
            "registerPublisher",
            vec![s("/node_a"), s("/t"), s("std_msgs/String"), s("ftp://x/")],
        ),
        (
            "registerPublisher",
            vec![s("/node_a"), s("/t"), s("std_msgs/String"), i(0)],
        ),
        (
            "registerPublisher",
            vec![s("/node_a"), s("/t"), s("std_msgs/String")],
        ),
        (
            "registerPublisher",
            vec![
                s("/ns/node_b"),
                s("relative"),
                s("std_msgs/Int32"),
                s(API_B),
            ],
        ),
        (
            "registerPublisher",
            vec![
                s("/ns/node_b"),
                s("~private"),
                s("std_msgs/Int32"),
                s(API_B),
            ],
        ),
        (
            "registerSubscriber",
            vec![
                s("/ns/node_b"),
                s("/chatter"),
                s("std_msgs/String"),
                s(API_B),
            ],
        ),
        (
            "registerSubscriber",
            vec![s("/ns/node_b"), s("/sub_only"), s("*"), s(API_B)],
        ),
        (
            "registerSubscriber",
            vec![
                s("/ns/node_b"),
                s("/sub_typed"),
                s("std_msgs/Bool"),
                s(API_B),
            ],
        ),
        (
            "registerPublisher",
            vec![s("/node_a"), s("/typed"), s("std_msgs/Empty"), s(API_A)],
        ),
        (
            "registerPublisher",
            vec![s("/node_a"), s("/typed"), s("*"), s(API_A)],
        ),
        ("getPublishedTopics", vec![s("/a"), s("")]),
        ("getPublishedTopics", vec![s("/a"), s("/ns")]),
        ("getPublishedTopics", vec![s("/ns/x"), s("ns")]),
        ("getPublishedTopics", vec![s("/a"), i(4)]),
        ("getTopicTypes", vec![s("/a")]),
        ("getSystemState", vec![s("/a")]),
        ("lookupNode", vec![s("/a"), s("/node_a")]),
        ("lookupNode", vec![s("/ns/x"), s("node_b")]),
        ("lookupNode", vec![s("/a"), s("/nobody")]),
        ("lookupNode", vec![s("/a"), s("")]),
        ("lookupNode", vec![s("/a"), s("bad name")]),
        // Unregistering: wrong API, unknown node, then for real.
        (
            "unregisterPublisher",
            vec![s("/node_a"), s("/chatter"), s(API_B)],
        ),
        (
            "unregisterPublisher",
            vec![s("/nobody"), s("/chatter"), s(API_A)],
        ),
        (
            "unregisterPublisher",
            vec![s("/node_a"), s("/never"), s(API_A)],
        ),
        (
            "unregisterPublisher",
            vec![s("/node_a"), s("/chatter"), s(API_A)],
        ),
        (
            "unregisterPublisher",
            vec![s("/node_a"), s("/chatter"), s(API_A)],
        ),
        (
            "unregisterSubscriber",
            vec![s("/ns/node_b"), s("/sub_only"), s(API_B)],
        ),
        (
            "unregisterSubscriber",
            vec![s("/ns/node_b"), s("/sub_only"), s(API_B)],
        ),
        ("getSystemState", vec![s("/a")]),
        // Services.
        (
            "registerService",
            vec![
                s("/node_a"),
                s("/srv"),
                s("rosrpc://127.0.0.1:7/"),
                s(API_A),
            ],
        ),
        (
            "registerService",
            vec![s("/node_a"), s("/srv_bad"), s("notanapi"), s(API_A)],
        ),
        (
            "registerService",
            vec![
                s("/ns/node_b"),
                s("srv2"),
                s("rosrpc://127.0.0.1:8/"),
                s(API_B),
            ],
        ),
        ("lookupService", vec![s("/a"), s("/srv")]),
        ("lookupService", vec![s("/ns/z"), s("srv2")]),
        ("lookupService", vec![s("/a"), s("/nothing")]),
        (
            "unregisterService",
            vec![s("/node_a"), s("/srv"), s("rosrpc://127.0.0.1:99/")],
        ),
        (
            "unregisterService",
            vec![s("/nobody"), s("/srv"), s("rosrpc://127.0.0.1:7/")],
        ),
        (
            "unregisterService",
            vec![s("/node_a"), s("/srv"), s("rosrpc://127.0.0.1:7/")],
        ),
        ("lookupService", vec![s("/a"), s("/srv")]),
        ("getSystemState", vec![s("/a")]),
        // Node replacement: /node_a registers from a new API.
        (
            "registerSubscriber",
            vec![s("/node_a"), s("/other"), s("std_msgs/String"), s(API_A2)],
        ),
        ("lookupNode", vec![s("/a"), s("/node_a")]),
        ("getSystemState", vec![s("/a")]),
        (
            "unregisterSubscriber",
            vec![s("/node_a"), s("/other"), s(API_A)],
        ),
        // Parameters: types, trees, replacement, namespaces.
        ("setParam", vec![s("/a"), s("/int"), i(42)]),
        ("setParam", vec![s("/a"), s("/double"), Value::Double(-2.5)]),
        ("setParam", vec![s("/a"), s("/bool"), Value::Bool(true)]),
        (
            "setParam",
            vec![s("/a"), s("/string"), s("hello <world> & more")],
        ),
        (
            "setParam",
            vec![
                s("/a"),
                s("/list"),
                a(vec![i(1), s("two"), a(vec![Value::Double(3.0)])]),
            ],
        ),
        ("setParam", vec![s("/a"), s("/empty_list"), a(vec![])]),
        (
            "setParam",
            vec![
                s("/a"),
                s("/robot"),
                d(&[("arm", d(&[("x", i(1)), ("y", i(2))])), ("name", s("r2"))]),
            ],
        ),
        ("getParam", vec![s("/a"), s("/robot")]),
        ("getParam", vec![s("/a"), s("/robot/arm/x")]),
        (
            "setParam",
            vec![s("/a"), s("/robot/arm"), d(&[("z", i(3))])],
        ),
        ("getParam", vec![s("/a"), s("/robot")]),
        ("setParam", vec![s("/a"), s("/int/sub"), i(7)]),
        ("getParam", vec![s("/a"), s("/int")]),
        ("setParam", vec![s("/a"), s("/"), i(1)]),
        ("setParam", vec![s("/a"), s(""), i(1)]),
        ("setParam", vec![s("/a"), i(5), i(1)]),
        ("setParam", vec![s("/a"), s("/x")]),
        ("setParam", vec![s("/ns/node"), s("relative"), i(1)]),
        ("setParam", vec![s("/ns/node"), s("~private"), i(2)]),
        (
            "setParam",
            vec![s("/ns/sub/node"), s("/ns/q"), d(&[("deeper", s("found"))])],
        ),
        ("getParam", vec![s("/ns/other"), s("relative")]),
        ("getParam", vec![s("/a"), s("/ns/node/private")]),
        ("getParam", vec![s("/a"), s("/missing")]),
        ("getParam", vec![s("/a"), s("/robot/name/deeper")]),
        ("getParam", vec![s("/a"), s("")]),
        ("hasParam", vec![s("/a"), s("/robot")]),
        ("hasParam", vec![s("/a"), s("/robot/arm/z")]),
        ("hasParam", vec![s("/a"), s("/nope")]),
        ("hasParam", vec![s("/ns/n"), s("relative")]),
        ("hasParam", vec![s("/a"), s("")]),
        ("searchParam", vec![s("/ns/sub/node"), s("q")]),
        ("searchParam", vec![s("/ns/sub/node"), s("q/deeper/still")]),
        ("searchParam", vec![s("/ns/node"), s("private")]),
        ("searchParam", vec![s("/ns/node"), s("robot")]),
        ("searchParam", vec![s("/ns/node"), s("/robot")]),
        ("searchParam", vec![s("/ns/node"), s("/absent")]),
        ("searchParam", vec![s("/ns/node"), s("absent")]),
        ("searchParam", vec![s("/ns/node"), s("~priv")]),
        ("searchParam", vec![s("relative_caller"), s("robot")]),
        (
            "subscribeParam",
            vec![s("/ns/node_b"), s(API_B), s("/robot")],
        ),
        (
            "subscribeParam",
            vec![s("/ns/node_b"), s(API_B), s("/not_yet")],
        ),
        (
            "subscribeParam",
            vec![s("/ns/node_b"), s("bad"), s("/robot")],
        ),
        (
            "unsubscribeParam",
            vec![s("/ns/node_b"), s(API_B), s("/robot")],
        ),
        (
            "unsubscribeParam",
            vec![s("/ns/node_b"), s(API_B), s("/never")],
        ),
        ("deleteParam", vec![s("/a"), s("/robot/arm")]),
        ("deleteParam", vec![s("/a"), s("/robot/arm")]),
        ("deleteParam", vec![s("/a"), s("/")]),
        ("deleteParam", vec![s("/a"), s("/int/sub/deeper")]),
        ("getParam", vec![s("/a"), s("/robot")]),
        ("getParamNames", vec![s("/a")]),
        ("getParam", vec![s("/a"), s("/")]),
        ("setParam", vec![s("/a"), s("/"), d(&[("fresh", i(1))])]),
        ("getParamNames", vec![s("/a")]),
        ("getSystemState", vec![s("/a")]),
    ];
    // Multicall as rospy uses it at shutdown.
    let call = |m: &str, p: Vec<Value>| d(&[("methodName", s(m)), ("params", a(p))]);
    c.push((
        "system.multicall",
        vec![a(vec![
            call(
                "unregisterSubscriber",
                vec![s("/ns/node_b"), s("/chatter"), s(API_B)],
            ),
            call("getParam", vec![s("/a"), s("/fresh")]),
            call("noSuchMethod", vec![]),
        ])],
    ));
    c.push(("getSystemState", vec![s("/a")]));
    c
}

/// What is compared: the value, with what must differ between two masters (pids, ports)
/// masked, and faults by code and text.
fn normalise(method: &str, result: Result<Value, CallError>) -> String {
    match result {
        Ok(Value::Array(mut triplet)) if method == "getPid" || method == "getUri" => {
            if triplet.len() == 3 && triplet[0] == Value::Int(1) {
                triplet[2] = Value::from("<masked>");
            }
            format!("{triplet:?}")
        }
        Ok(v) => format!("{v:?}"),
        Err(CallError::Fault(f)) => format!("fault {} {}", f.code, f.message),
        Err(e) => format!("transport error: {e}"),
    }
}

#[test]
fn embedded_master_answers_like_rosmaster() {
    let Some((_rosmaster, ros_uri)) = common::start_rosmaster() else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let ours = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
            .await
            .expect("master");
        let client = XmlRpcClient::new(Duration::from_secs(2), Duration::from_secs(10));
        let mut differences = Vec::new();
        let calls = corpus();
        for (method, params) in &calls {
            let theirs = normalise(method, client.call(&ros_uri, method, params.clone()).await);
            let mine = normalise(
                method,
                client.call(ours.uri(), method, params.clone()).await,
            );
            if theirs != mine {
                differences.push(format!(
                    "{method}{params:?}\n  rosmaster: {theirs}\n  udpros:    {mine}"
                ));
            }
        }
        assert!(
            differences.is_empty(),
            "{} of {} calls differ:\n{}",
            differences.len(),
            calls.len(),
            differences.join("\n")
        );
    });
}
