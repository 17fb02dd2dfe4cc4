//! actionlib between udpros nodes through the embedded master: goals with feedback and
//! results, rejection, cancel by id and for all, the simple server's preemption by a newer
//! goal, a server that dies mid-goal, and the bounds under a flood of goals and cancels.

use std::time::Duration;
use udpros::action::{
    status, ActionClient, ActionServer, ActionServerOptions, CommState, GoalEvent,
    SimpleActionClient, SimpleActionServer, SimpleState,
};
use udpros::master::Master;
use udpros::msgs::actionlib::{TestAction, TestFeedback, TestGoal, TestResult};
use udpros::node::Node;

const WAIT: Option<Duration> = Some(Duration::from_secs(20));

async fn master() -> Master {
    Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .expect("master starts")
}

async fn node(master: &Master, name: &str) -> Node {
    udpros_testkit::node(master.uri(), name).await
}

/// A simple server that counts up to the goal, one feedback each 20 ms, stops when
/// preempted, and aborts goals below zero.
fn counting_server(server: SimpleActionServer<TestAction>) -> tokio::task::JoinHandle<()> {
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
                    _ = tokio::time::sleep(Duration::from_millis(20)) => {}
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simple_client_gets_feedback_success_abort_and_preemption() {
    let master = master().await;
    let server_node = node(&master, "/counter").await;
    let client_node = node(&master, "/asker").await;
    let server = SimpleActionServer::<TestAction>::new(
        &server_node,
        "count",
        ActionServerOptions::default(),
    )
    .await
    .unwrap();
    let _work = counting_server(server);
    let mut client = SimpleActionClient::<TestAction>::new(&client_node, "count")
        .await
        .unwrap();
    assert!(client.wait_for_server(WAIT).await, "server connects");

    client.send_goal(&TestGoal { goal: 5 }).unwrap();
    let mut feedback = Vec::new();
    while let Some(f) = client.next_feedback().await {
        feedback.push(f.feedback);
    }
    assert_eq!(feedback, [1, 2, 3, 4, 5]);
    assert_eq!(client.get_state(), SimpleState::Succeeded);
    assert_eq!(client.get_result(), Some(TestResult { result: 5 }));
    assert_eq!(client.get_state_text(), "counted");

    client.send_goal(&TestGoal { goal: -1 }).unwrap();
    assert!(client.wait_for_result(WAIT).await);
    assert_eq!(client.get_state(), SimpleState::Aborted);
    assert_eq!(client.get_result(), Some(TestResult { result: -1 }));

    // A long goal, cancelled once active.
    client.send_goal(&TestGoal { goal: 10_000 }).unwrap();
    assert!(client.next_feedback().await.is_some());
    client.cancel_goal();
    assert!(client.wait_for_result(WAIT).await);
    assert_eq!(client.get_state(), SimpleState::Preempted);
    assert!(client.get_result().unwrap().result < 10_000);

    // A newer goal from another client preempts the running one.
    let mut other = SimpleActionClient::<TestAction>::new(&client_node, "count")
        .await
        .unwrap();
    assert!(other.wait_for_server(WAIT).await);
    client.send_goal(&TestGoal { goal: 10_000 }).unwrap();
    assert!(client.next_feedback().await.is_some());
    other.send_goal(&TestGoal { goal: 2 }).unwrap();
    assert!(client.wait_for_result(WAIT).await);
    assert_eq!(client.get_state(), SimpleState::Preempted);
    assert!(other.wait_for_result(WAIT).await);
    assert_eq!(other.get_state(), SimpleState::Succeeded);
    assert_eq!(other.get_result(), Some(TestResult { result: 2 }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goal_handles_walk_roscpp_s_states_and_cancel_all_reaches_every_goal() {
    let master = master().await;
    let server_node = node(&master, "/handles").await;
    let client_node = node(&master, "/sender").await;
    let mut server =
        ActionServer::<TestAction>::new(&server_node, "many", ActionServerOptions::default())
            .await
            .unwrap();
    let client = ActionClient::<TestAction>::new(&client_node, "many")
        .await
        .unwrap();
    assert!(client.wait_for_server(WAIT).await);

    let mut rejected = client.send_goal(&TestGoal { goal: 1 }).unwrap();
    let g = server.next_goal().await.unwrap();
    assert_eq!(g.goal().goal, 1);
    assert_eq!(g.goal_id().id, rejected.goal_id().id, "the client's id");
    g.reject(&TestResult { result: 7 }, "no thanks").unwrap();
    assert!(
        g.succeed(&TestResult::default(), "").is_err(),
        "not accepted"
    );
    let mut states = Vec::new();
    while let Some(event) = rejected.next_event().await {
        if let GoalEvent::Transition(s) = event {
            states.push(s);
        }
    }
    assert_eq!(states.last(), Some(&CommState::Done));
    assert_eq!(rejected.simple_state(), SimpleState::Rejected);
    assert_eq!(rejected.result(), Some(TestResult { result: 7 }));

    // Three goals accepted, then one cancel for all.
    let mut handles = Vec::new();
    let mut goals = Vec::new();
    for i in 0..3 {
        handles.push(client.send_goal(&TestGoal { goal: i }).unwrap());
        let g = server.next_goal().await.unwrap();
        g.accept("").unwrap();
        goals.push(g);
    }
    client.cancel_all_goals();
    for g in &goals {
        tokio::time::timeout(Duration::from_secs(20), g.cancel_requested())
            .await
            .expect("every goal hears the cancel");
        g.cancel(&TestResult::default(), "as asked").unwrap();
    }
    for h in &mut handles {
        assert!(h.wait_for_done(WAIT).await);
        assert_eq!(h.simple_state(), SimpleState::Preempted);
    }
    // Finished goals are listed until the status timeout.
    assert!(server
        .status_list()
        .iter()
        .all(|s| s.status == status::PREEMPTED || s.status == status::REJECTED));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_mid_goal_leaves_its_client_s_goal_lost() {
    let master = master().await;
    let server_node = node(&master, "/mortal").await;
    let client_node = node(&master, "/survivor").await;
    let mut server =
        ActionServer::<TestAction>::new(&server_node, "die", ActionServerOptions::default())
            .await
            .unwrap();
    let client = ActionClient::<TestAction>::new(&client_node, "die")
        .await
        .unwrap();
    assert!(client.wait_for_server(WAIT).await);
    let mut h = client.send_goal(&TestGoal { goal: 1 }).unwrap();
    let g = server.next_goal().await.unwrap();
    g.accept("").unwrap();
    while h.comm_state() != CommState::Active {
        h.next_event().await.expect("active before done");
    }
    std::mem::forget(g); // the process dies: no goodbye from the handle
    server_node.shutdown().await;
    assert!(h.wait_for_done(Some(Duration::from_secs(20))).await);
    assert_eq!(h.simple_state(), SimpleState::Lost);
}
