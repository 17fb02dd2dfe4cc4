//! udpros nodes for tests: one on a master, a publisher that keeps publishing, a simulated
//! `/clock`.

/// A udpros node named `name` on `master`, on loopback.
pub async fn node(master: &str, name: &str) -> udpros::node::Node {
    udpros::node::Node::new(name, node_args(master, name))
        .await
        .expect("node starts")
}

/// A node named `name` on `master`, on loopback, with `options` of the test's own.
pub async fn node_with(
    master: &str,
    name: &str,
    options: udpros::node::NodeOptions,
) -> udpros::node::Node {
    try_node_with(master, name, options)
        .await
        .expect("node starts")
}

/// As [`node_with`], for a test of a node that must fail to start.
pub async fn try_node_with(
    master: &str,
    name: &str,
    options: udpros::node::NodeOptions,
) -> Result<udpros::node::Node, udpros::node::NodeError> {
    use udpros::node::args::{NodeArgs, NodeIdentity};
    let args = NodeArgs::parse(node_args(master, name)).expect("ROS arguments");
    let id = NodeIdentity::from_args(name, &args).expect("a node identity");
    udpros::node::Node::with_options(id, options).await
}

fn node_args(master: &str, name: &str) -> [String; 3] {
    [
        format!("__master:={master}"),
        "__ip:=127.0.0.1".to_string(),
        format!("__name:={name}"),
    ]
}

/// Publishes `message` every `period` on the current runtime until the returned task is
/// aborted or the node shuts down: what a test runs while a ROS tool or peer listens.
pub fn publish_every<M: udpros::msg::Message + Send + Sync + 'static>(
    publisher: udpros::node::Publisher<M>,
    message: M,
    period: std::time::Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while publisher.publish(&message).is_ok() {
            tokio::time::sleep(period).await;
        }
    })
}

/// `/clock` published from `node` as a simulator publishes it: `start` first, then at wall
/// speed, every 10 ms, until the task is aborted. Also gives the simulated time now.
pub async fn simulated_clock(
    node: &udpros::node::Node,
    start: udpros::msg::Time,
) -> (
    tokio::task::JoinHandle<()>,
    impl Fn() -> udpros::msg::Time + Clone + Send + 'static,
) {
    use udpros::msgs::rosgraph_msgs::Clock;
    let clock = node
        .advertise::<Clock>("/clock", Default::default())
        .await
        .expect("advertise /clock");
    let started = std::time::Instant::now();
    let now = move || start + started.elapsed().into();
    let ticking = tokio::spawn(async move {
        loop {
            let _ = clock.publish(&Clock { clock: now() });
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    });
    (ticking, now)
}

/// Works goals of actionlib's Test action as the test peers (`peers/*_action_peer*`) do:
/// counts up to the goal, one feedback each 20 ms, ends SUCCEEDED with result = goal, or
/// PREEMPTED (result = reached) when preempted; goals below zero are ABORTED (result =
/// goal).
pub fn counting_action_server(
    server: udpros::action::SimpleActionServer<udpros::msgs::actionlib::TestAction>,
) -> tokio::task::JoinHandle<()> {
    use udpros::msgs::actionlib::{TestFeedback, TestResult};
    tokio::spawn(async move {
        while let Ok(goal) = server.accept_new_goal().await {
            if goal.goal < 0 {
                let _ = server.set_aborted(&TestResult { result: goal.goal }, "below zero");
                continue;
            }
            let mut reached = 0;
            let preempted = loop {
                if reached >= goal.goal {
                    break false;
                }
                tokio::select! {
                    _ = server.preempt_requested() => break true,
                    _ = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
                }
                reached += 1;
                let _ = server.publish_feedback(&TestFeedback { feedback: reached });
            };
            let result = TestResult { result: reached };
            if preempted {
                let _ = server.set_preempted(&result, "preempted");
            } else {
                let _ = server.set_succeeded(&result, "counted");
            }
        }
    })
}

/// Waits up to 20 s for a `/diagnostics` value named `key` (any status) to satisfy
/// `ready`; returns the last value seen (empty if none).
pub async fn diagnostic(
    listener: &udpros::node::Node,
    key: &str,
    ready: impl Fn(&str) -> bool,
) -> String {
    let mut sub = listener
        .subscribe::<udpros::msgs::diagnostic_msgs::DiagnosticArray>(
            "/diagnostics",
            udpros::node::SubscribeOptions::default(),
        )
        .await
        .unwrap();
    let mut last = String::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while let Ok(Some(d)) = tokio::time::timeout_at(deadline, sub.recv()).await {
        let value = d
            .status
            .iter()
            .flat_map(|s| &s.values)
            .find(|kv| kv.key == key)
            .map(|kv| kv.value.clone());
        last = value.unwrap_or_default();
        if ready(&last) {
            break;
        }
    }
    last
}

/// A latched `std_msgs/String` publisher of `topic` on `node` that has published `data`
/// once: what a subscriber connecting later must still get.
pub async fn latched_string(
    node: &udpros::node::Node,
    topic: &str,
    data: &str,
) -> udpros::node::Publisher<udpros::msgs::std_msgs::String> {
    let publisher = node
        .advertise::<udpros::msgs::std_msgs::String>(
            topic,
            udpros::node::AdvertiseOptions::latched(),
        )
        .await
        .expect("advertise a latched topic");
    publisher
        .publish(&udpros::msgs::std_msgs::String { data: data.into() })
        .expect("publish the latched message");
    publisher
}

/// Whether the master at `master` knows `node` (its `lookupNode` succeeds).
pub async fn registered(master: &str, node: &str) -> bool {
    use udpros::xmlrpc::{Value, XmlRpcClient};
    let reply = XmlRpcClient::default()
        .call(
            master,
            "lookupNode",
            vec![Value::from("/udpros_testkit"), Value::from(node)],
        )
        .await;
    matches!(reply, Ok(Value::Array(r)) if r.first() == Some(&Value::Int(1)))
}

/// A master in front of a real one that holds every `registerPublisher` for `delay` before
/// passing it on (everything else goes through at once), and says on `arrived` when one
/// came: for what a node does while a registration is on its way (a Ctrl-C, a shutdown).
pub struct SlowRegistrations {
    /// The relay, serving until dropped; point a node's `__master:=` at its URI.
    pub server: udpros::xmlrpc::XmlRpcServer,
    /// Notified (one permit kept) as each `registerPublisher` arrives.
    pub arrived: std::sync::Arc<tokio::sync::Notify>,
}

impl SlowRegistrations {
    /// Relays to `master` on a loopback port.
    pub async fn start(master: &str, delay: std::time::Duration) -> SlowRegistrations {
        let arrived = std::sync::Arc::new(tokio::sync::Notify::new());
        let relay = Relay {
            master: master.to_string(),
            client: udpros::xmlrpc::XmlRpcClient::default(),
            arrived: arrived.clone(),
            delay,
        };
        let server = udpros::xmlrpc::XmlRpcServer::bind(
            "127.0.0.1:0".parse().expect("address"),
            std::sync::Arc::new(relay),
        )
        .await
        .expect("relay binds");
        SlowRegistrations { server, arrived }
    }

    /// The URI nodes take as their master.
    pub fn uri(&self) -> String {
        self.server.uri("127.0.0.1")
    }
}

struct Relay {
    master: String,
    client: udpros::xmlrpc::XmlRpcClient,
    arrived: std::sync::Arc<tokio::sync::Notify>,
    delay: std::time::Duration,
}

impl udpros::xmlrpc::Handler for Relay {
    fn call(
        &self,
        method: &str,
        params: Vec<udpros::xmlrpc::Value>,
    ) -> udpros::xmlrpc::HandlerFuture {
        let delay = (method == "registerPublisher").then_some(self.delay);
        if delay.is_some() {
            self.arrived.notify_one();
        }
        let (master, client) = (self.master.clone(), self.client.clone());
        let method = method.to_string();
        Box::pin(async move {
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
            client
                .call(&master, &method, params)
                .await
                .map_err(|e| match e {
                    udpros::xmlrpc::CallError::Fault(fault) => fault,
                    other => udpros::xmlrpc::Fault::new(-1, other.to_string()),
                })
        })
    }
}
