//! Services (capability `services`): the graph's services advertised with their request
//! and response definitions, and calls from clients made as a ROS service client would,
//! with the serialized bytes passed through both ways.
//!
//! A service's type comes from probing its server (the header roscpp and rospy answer
//! with, as `rosservice type` reads it), once per service; its definitions from the
//! service types udpros ships and the `.srv` files ROS installs. A service whose type no
//! definition is found for is not advertised (said once in the log), as with topics.

use crate::client::Client;
use crate::foxglove::server::{service_call_response, ServerMessage, Service};
use crate::table::Description;
use std::time::Duration;
use udpros::node::Node;
use udpros::service::ClientOptions;

/// How long a probe of a new service may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a client's call may wait for its answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A service's type and definitions, probed and looked up.
pub(crate) async fn describe(node: &Node, name: &str) -> Option<Description> {
    let options = ClientOptions::default().with_timeout(PROBE_TIMEOUT);
    let client = node.service_client_raw(name, "*", options);
    let header = match client.probe().await {
        Ok(header) => header,
        Err(e) => {
            tracing::debug!("the view cannot probe {name}: {e}");
            return None;
        }
    };
    let service_type = header.get("type")?.to_string();
    let looked_up = service_type.clone();
    let definitions = tokio::task::spawn_blocking(move || {
        let service = udpros::service::find_type(&looked_up).ok()?;
        Some((
            service.request.definition().ok()?,
            service.response.definition().ok()?,
        ))
    })
    .await
    .ok()
    .flatten();
    match definitions {
        Some((request_schema, response_schema)) => Some(Description {
            service_type,
            request_schema,
            response_schema,
        }),
        None => {
            tracing::info!("the view cannot advertise {name}: no definition of {service_type}");
            None
        }
    }
}

/// A client's call of `service` (`call` is the client's id for it): the response frame,
/// or `serviceCallFailure`. The answer may be at most `max_response` bytes: it must fit
/// in the client's send buffer with room to spare.
pub(crate) async fn call(
    node: &Node,
    max_response: usize,
    client: &Client,
    service: Service,
    call: u32,
    encoding: &str,
    request: &[u8],
) {
    let fail = |message: String| ServerMessage::ServiceCallFailure {
        service_id: service.id,
        call_id: call,
        message,
    };
    if encoding != "ros1" {
        client.say(&fail(format!(
            "encoding {encoding:?}: this server takes ros1 only"
        )));
        return;
    }
    let options = ClientOptions {
        max_response,
        ..ClientOptions::default().with_timeout(CALL_TIMEOUT)
    };
    let caller = node.service_client_raw(&service.name, "*", options);
    match caller.call(request).await {
        Ok(response) => {
            let frame = service_call_response(service.id, call, "ros1", &response);
            client.send_binary(frame);
        }
        Err(e) => client.say(&fail(e.to_string())),
    }
}
