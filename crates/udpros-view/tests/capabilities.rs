//! What the view offers beyond topics, each against a graph of its own: parameters (get,
//! set, updates), services (advertised with their definitions, called with ROS1 bytes),
//! client publishing (only on the topics the operator allowed, only messages that decode),
//! and the clock under sim time.

mod common;

use common::*;
use futures_util::SinkExt;
use serde_json::json;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;
use udpros::msg::Message as _;
use udpros::msgs::{rosgraph_msgs, std_msgs, std_srvs};
use udpros::node::{AdvertiseOptions, SubscribeOptions};
use udpros::xmlrpc::Value;
use udpros_view::{View, ViewOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_are_read_set_and_watched() {
    let master = local_master().await;
    let other = node(&master, "other").await;
    other
        .set_param("/sonar/range", Value::Double(20.0))
        .await
        .unwrap();
    other.set_param("/sonar/gain", Value::Int(1)).await.unwrap();
    let view = View::start(node(&master, "view").await, local_view())
        .await
        .unwrap();
    let mut client = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
    let info = next_op(&mut client, "serverInfo").await;
    let capabilities = info["capabilities"].as_array().unwrap();
    for expected in ["parameters", "parametersSubscribe", "services"] {
        assert!(capabilities.contains(&json!(expected)), "{info}");
    }
    assert!(
        !capabilities.contains(&json!("clientPublish")),
        "off by default"
    );
    assert!(!capabilities.contains(&json!("time")), "wall time");

    send(&mut client, json!({"op": "getParameters", "parameterNames": ["/sonar/range", "/sonar/gain", "/nope"], "id": "a"})).await;
    let values = next_op(&mut client, "parameterValues").await;
    assert_eq!(values["id"], "a");
    assert_eq!(
        values["parameters"],
        json!([{"name": "/sonar/range", "value": 20.0, "type": "float64"},
               {"name": "/sonar/gain", "value": 1}])
    );
    // All of them when none is named.
    send(
        &mut client,
        json!({"op": "getParameters", "parameterNames": []}),
    )
    .await;
    let all = next_op(&mut client, "parameterValues").await;
    let names: Vec<&str> = all["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"/sonar/range") && names.contains(&"/sonar/gain"),
        "{names:?}"
    );

    // Set, answered with the value as it now stands; the master has it.
    send(&mut client, json!({"op": "setParameters", "parameters": [{"name": "/sonar/range", "value": 30.5}], "id": "b"})).await;
    let set = next_op(&mut client, "parameterValues").await;
    assert_eq!(set["parameters"][0]["value"], 30.5);
    assert_eq!(
        other.get_param("/sonar/range").await.unwrap(),
        Some(Value::Double(30.5))
    );
    // A value of a type that does not fit is refused with a status; nothing changes.
    send(&mut client, json!({"op": "setParameters", "parameters": [{"name": "/sonar/range", "value": "far", "type": "float64"}]})).await;
    assert_eq!(next_op(&mut client, "status").await["level"], 2);
    assert_eq!(
        other.get_param("/sonar/range").await.unwrap(),
        Some(Value::Double(30.5))
    );

    // Watched: a change made elsewhere in the graph comes as parameterValues.
    send(
        &mut client,
        json!({"op": "subscribeParameterUpdates", "parameterNames": ["/sonar/gain"]}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await; // the view's first look
    other.set_param("/sonar/gain", Value::Int(2)).await.unwrap();
    let update = next_op(&mut client, "parameterValues").await;
    assert_eq!(
        update["parameters"],
        json!([{"name": "/sonar/gain", "value": 2}])
    );
}

/// A client's Service Call Request frame: `call` of service `id` with a ros1 `request`.
fn service_call(id: u32, call: u32, request: &[u8]) -> Vec<u8> {
    let mut frame = vec![2u8];
    frame.extend_from_slice(&id.to_le_bytes());
    frame.extend_from_slice(&call.to_le_bytes());
    frame.extend_from_slice(&4u32.to_le_bytes());
    frame.extend_from_slice(b"ros1");
    frame.extend_from_slice(request);
    frame
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_are_advertised_with_definitions_and_called_with_ros1_bytes() {
    let master = local_master().await;
    let server = node(&master, "server").await;
    let _service = server
        .advertise_service::<std_srvs::SetBool, _, _>("/lights", |req| async move {
            Ok(std_srvs::SetBoolResponse {
                success: req.data,
                message: format!("lights {}", if req.data { "on" } else { "off" }),
            })
        })
        .await
        .unwrap();
    let view = View::start(node(&master, "view").await, local_view())
        .await
        .unwrap();
    let mut client = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
    let service = loop {
        let advertised = next_op(&mut client, "advertiseServices").await;
        let services = advertised["services"].as_array().unwrap();
        if let Some(s) = services.iter().find(|s| s["name"] == "/lights") {
            break s.clone();
        }
    };
    assert_eq!(service["type"], "std_srvs/SetBool");
    // The definitions as the .srv has them, as a ROS1 client's schema parser reads them.
    assert_eq!(
        service["requestSchema"],
        std_srvs::SetBoolRequest::DEFINITION
    );
    assert_eq!(
        service["responseSchema"],
        std_srvs::SetBoolResponse::DEFINITION
    );

    let id = service["id"].as_u64().unwrap() as u32;
    let request = udpros::wire::to_vec(&std_srvs::SetBoolRequest { data: true }).unwrap();
    let call = service_call(id, 77, &request);
    client.send(Message::binary(call)).await.unwrap();
    let answer = next_binary(&mut client).await;
    assert_eq!(answer[0], 3, "a Service Call Response");
    assert_eq!(u32::from_le_bytes(answer[1..5].try_into().unwrap()), id);
    assert_eq!(u32::from_le_bytes(answer[5..9].try_into().unwrap()), 77);
    assert_eq!(&answer[9..13], &4u32.to_le_bytes());
    assert_eq!(&answer[13..17], b"ros1");
    let response: std_srvs::SetBoolResponse = udpros::wire::from_slice(&answer[17..]).unwrap();
    assert!(response.success);
    assert_eq!(response.message, "lights on");

    // A service that is not there: a failure naming the call, and the client stays.
    let call = service_call(9999, 78, &[]);
    client.send(Message::binary(call)).await.unwrap();
    let failure = next_op(&mut client, "serviceCallFailure").await;
    assert_eq!(failure["callId"], 78);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_publish_only_where_the_operator_allows_and_only_what_decodes() {
    let master = local_master().await;
    let listener = node(&master, "listener").await;
    let mut heard = listener
        .subscribe::<std_msgs::String>("/joystick", SubscribeOptions::default())
        .await
        .unwrap();
    let options = ViewOptions {
        client_topics: vec!["/joystick".into()],
        ..local_view()
    };
    let view = View::start(node(&master, "view").await, options)
        .await
        .unwrap();
    let mut client = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
    let info = next_op(&mut client, "serverInfo").await;
    assert!(info["capabilities"]
        .as_array()
        .unwrap()
        .contains(&json!("clientPublish")));
    assert_eq!(info["supportedEncodings"], json!(["ros1"]));

    send(
        &mut client,
        json!({"op": "advertise", "channels": [
        {"id": 5, "topic": "/joystick", "encoding": "ros1", "schemaName": "std_msgs/String",
         "schema": std_msgs::String::DEFINITION},
        {"id": 6, "topic": "/thrusters", "encoding": "ros1", "schemaName": "std_msgs/String"}]}),
    )
    .await;
    let refused = next_op(&mut client, "status").await;
    assert!(
        refused["message"].as_str().unwrap().contains("/thrusters"),
        "{refused}"
    );
    let publishing = async {
        // Until the listener is linked to the view's new publisher.
        for _ in 0..100 {
            let mut frame = vec![1u8];
            frame.extend_from_slice(&5u32.to_le_bytes());
            frame.extend_from_slice(
                &udpros::wire::to_vec(&std_msgs::String {
                    data: "forward".into(),
                })
                .unwrap(),
            );
            client.send(Message::binary(frame)).await.unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let got = tokio::select! {
        got = heard.recv() => got,
        _ = publishing => None,
    };
    assert_eq!(got.map(|m| m.data).as_deref(), Some("forward"));

    // Bytes that are not a std_msgs/String: a status, and nothing reaches the listener.
    let mut frame = vec![1u8];
    frame.extend_from_slice(&5u32.to_le_bytes());
    frame.extend_from_slice(&[200, 0, 0, 0, b'x']); // a string of 200 bytes that has one
    client.send(Message::binary(frame)).await.unwrap();
    let status = next_op(&mut client, "status").await;
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("not a std_msgs/String"),
        "{status}"
    );
    let later = tokio::time::timeout(Duration::from_millis(500), async {
        loop {
            if let Some(m) = heard.recv().await {
                if m.data != "forward" {
                    return m;
                }
            }
        }
    })
    .await;
    assert!(
        later.is_err(),
        "the bad message was not published: {later:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_sim_time_clients_get_the_graph_s_clock() {
    let master = local_master().await;
    let clock_node = node(&master, "player").await;
    clock_node
        .set_param("/use_sim_time", Value::Bool(true))
        .await
        .unwrap();
    let clock = clock_node
        .advertise::<rosgraph_msgs::Clock>("/clock", AdvertiseOptions::default())
        .await
        .unwrap();
    let view = View::start(node(&master, "view").await, local_view())
        .await
        .unwrap();
    let ticking = tokio::spawn(async move {
        for second in 1000u32..1600 {
            let _ = clock.publish(&rosgraph_msgs::Clock {
                clock: udpros::time::Time {
                    sec: second,
                    nsec: 5,
                },
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let mut client = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
    let info = next_op(&mut client, "serverInfo").await;
    assert!(
        info["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("time")),
        "{info}"
    );
    let frame = next_binary(&mut client).await;
    assert_eq!(frame[0], 2, "a Time frame");
    let ns = u64::from_le_bytes(frame[1..9].try_into().unwrap());
    assert!(
        (1_000_000_000_000..1_600_000_000_000).contains(&ns) && ns % 1_000_000_000 == 5,
        "{ns}"
    );
    ticking.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_type_nothing_here_defines_is_learned_from_its_publisher() {
    let master = local_master().await;
    let talker = node(&master, "talker").await;
    // A type of a package this machine does not have: only its publisher knows it.
    let definition = "float64 depth\nstring site\n";
    let publisher = talker
        .advertise_raw(
            "/survey",
            "harbour_msgs/Sounding",
            "0123456789abcdef0123456789abcdef",
            definition,
            AdvertiseOptions::default(),
        )
        .await
        .unwrap();
    let view = View::start(node(&master, "view").await, local_view())
        .await
        .unwrap();
    let mut client = connect(&view, Some("foxglove.websocket.v1")).await.unwrap();
    let channel = channel_of(&mut client, "/survey").await;
    assert_eq!(channel["schemaName"], "harbour_msgs/Sounding");
    assert_eq!(channel["schema"], definition);
    // The short subscription that asked is gone: nobody wants the topic yet.
    assert!(eventually(|| publisher.num_subscribers() == 0).await);
    assert!(view.forwarded_topics().is_empty());
}
