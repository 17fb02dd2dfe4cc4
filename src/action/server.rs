//! The action server: the core's [`GoalTable`] driven by the action's topics.

use super::{stamp, status_msg, Action, ActionError};
use crate::msg::Message;
use crate::msgs::actionlib_msgs::{GoalID, GoalStatus};
use crate::node::{AdvertiseOptions, Node, RawPublisher, RawSubscriber, SubscribeOptions};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch, Notify};
use udpros_core::action::server::{Arrival, GoalKey, GoalTable, Limits};
use udpros_core::action::{self as core, status};

/// How an [`ActionServer`] is set up.
#[derive(Debug, Clone)]
pub struct ActionServerOptions {
    /// Status arrays per second; `None` reads `<ns>/status_frequency`, else the
    /// `actionlib_status_frequency` parameter found by searching up from the node's
    /// namespace, else 5, as roscpp's server does.
    pub status_frequency: Option<f64>,
    /// How long finished goals stay listed; `None` reads `<ns>/status_list_timeout`, else
    /// 5 s.
    pub status_list_timeout: Option<Duration>,
    /// The most goals listed at once (see the [module bounds](super#bounds)).
    pub max_goals: usize,
    /// The most goals waiting for [`ActionServer::next_goal`]; more are rejected.
    pub goal_queue: usize,
    /// The most bytes of encoded goals waiting for [`ActionServer::next_goal`]; more are
    /// rejected.
    pub goal_queue_bytes: usize,
    /// Queue size of the result and feedback publishers (actionlib's
    /// `actionlib_server_pub_queue_size`, 50).
    pub pub_queue_size: usize,
}

impl Default for ActionServerOptions {
    fn default() -> Self {
        ActionServerOptions {
            status_frequency: None,
            status_list_timeout: None,
            max_goals: Limits::default().max_goals,
            goal_queue: 1024,
            goal_queue_bytes: 64 << 20,
            pub_queue_size: 50,
        }
    }
}

/// What the goal handles and the server's task share.
pub(super) struct Shared {
    table: Mutex<GoalTable>,
    result_pub: RawPublisher,
    feedback_pub: RawPublisher,
    node: Node,
    /// Wakes the task when the table changed, so the status array goes out soon.
    changed: Notify,
    /// Counts cancel requests that reached a goal, so handles can wait for theirs.
    cancels: watch::Sender<u64>,
    /// An encoded default result, sent with goals that end without one of the code's.
    default_result: Vec<u8>,
    /// Bytes of encoded goals waiting for the code, and their bound.
    queued_bytes: AtomicUsize,
    max_queued_bytes: usize,
}

impl Shared {
    fn table(&self) -> MutexGuard<'_, GoalTable> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends every unfinished goal with a result, so that clients (roscpp's and rospy's
    /// too) hear that the server is gone instead of waiting.
    fn end_every_goal(&self, text: &str) {
        let ended = self.table().abandon_all(text, Instant::now());
        for status in &ended {
            self.publish_result(status, &self.default_result);
        }
    }

    fn publish_result(&self, status: &core::GoalStatus, result: &[u8]) {
        match core::status_message(stamp(self.node.now()), status, result) {
            Ok(body) => self.result_pub.publish_body(&body),
            Err(e) => tracing::warn!("action result not sent: {e}"),
        }
        self.changed.notify_one();
    }
}

/// The text of the goals a server's node shutting down ends.
const NODE_SHUT_DOWN: &str = "the action server's node shut down";

/// An action server: receives goals on `<ns>/goal` and cancel requests on `<ns>/cancel`,
/// publishes status, feedback and results. Goals reach the code through
/// [`ActionServer::next_goal`], one [`ServerGoalHandle`] each.
///
/// Dropping the server stops it: its topics are unadvertised and unsubscribed.
pub struct ActionServer<A: Action> {
    shared: Arc<Shared>,
    /// Goals for the code, with their encoded sizes.
    goals: mpsc::Receiver<(ServerGoalHandle<A>, usize)>,
    task: tokio::task::JoinHandle<()>,
    namespace: String,
}

impl<A: Action> Drop for ActionServer<A> {
    fn drop(&mut self) {
        self.task.abort();
        self.shared.end_every_goal("the action server was dropped");
    }
}

impl<A: Action> ActionServer<A> {
    /// Starts serving action `namespace` (resolved as a topic name) on `node`.
    pub async fn new(
        node: &Node,
        namespace: &str,
        options: ActionServerOptions,
    ) -> Result<ActionServer<A>, ActionError> {
        let ns = node.resolve_name(namespace);
        let limits = Limits {
            max_goals: options.max_goals,
            status_list_timeout: match options.status_list_timeout {
                Some(t) => t,
                None => {
                    let key = format!("{ns}/status_list_timeout");
                    let seconds: f64 = node.param(&key, 5.0).await.unwrap_or(5.0);
                    Duration::try_from_secs_f64(seconds.clamp(0.0, 1e6))
                        .unwrap_or(Duration::from_secs(5))
                }
            },
            status_frequency: match options.status_frequency {
                Some(f) => f,
                None => status_frequency(node, &ns).await,
            },
        };
        let publish = |latch: bool| AdvertiseOptions {
            latch,
            queue_size: options.pub_queue_size.max(1),
            ..AdvertiseOptions::default()
        };
        let info = |m: crate::msg::MessageInfo| (m.type_name, m.md5sum, m.definition);
        let (t, m, d) = info(crate::msg::MessageInfo::of::<A::ActionResult>());
        let result_pub = node
            .advertise_raw(&format!("{ns}/result"), t, m, d, publish(false))
            .await?;
        let (t, m, d) = info(crate::msg::MessageInfo::of::<A::ActionFeedback>());
        let feedback_pub = node
            .advertise_raw(&format!("{ns}/feedback"), t, m, d, publish(false))
            .await?;
        let (t, m, d) = info(crate::msg::MessageInfo::of::<
            crate::msgs::actionlib_msgs::GoalStatusArray,
        >());
        let status_pub = node
            .advertise_raw(&format!("{ns}/status"), t, m, d, publish(true))
            .await?;
        let subscribe = SubscribeOptions {
            queue_size: 1024,
            ..SubscribeOptions::tcp_only()
        };
        let goal_sub = node
            .subscribe_raw_as(
                &format!("{ns}/goal"),
                A::ActionGoal::TYPE,
                A::ActionGoal::MD5SUM,
                A::ActionGoal::DEFINITION,
                subscribe.clone(),
            )
            .await?;
        let cancel_sub = node
            .subscribe_raw_as(
                &format!("{ns}/cancel"),
                GoalID::TYPE,
                GoalID::MD5SUM,
                GoalID::DEFINITION,
                subscribe,
            )
            .await?;
        let shared = Arc::new(Shared {
            table: Mutex::new(GoalTable::new(node.name(), limits, Instant::now())),
            result_pub,
            feedback_pub,
            node: node.clone(),
            changed: Notify::new(),
            cancels: watch::channel(0).0,
            default_result: crate::wire::to_vec(&A::Result::default())?,
            queued_bytes: AtomicUsize::new(0),
            max_queued_bytes: options.goal_queue_bytes,
        });
        // Ends the goals as the node's shutdown begins, before its publications close: the
        // serve task below does it too, but may not run in time on a busy machine.
        let weak = Arc::downgrade(&shared);
        node.before_shutdown(move || {
            if let Some(shared) = weak.upgrade() {
                shared.end_every_goal(NODE_SHUT_DOWN);
            }
        });
        let (goal_tx, goals) = mpsc::channel(options.goal_queue.max(1));
        let task = tokio::spawn(serve::<A>(
            shared.clone(),
            goal_sub,
            cancel_sub,
            status_pub,
            goal_tx,
        ));
        Ok(ActionServer {
            shared,
            goals,
            task,
            namespace: ns,
        })
    }

    /// The next goal a client sent, PENDING until the code accepts or rejects it. `None`
    /// once the server's task ended (the node shut down).
    pub async fn next_goal(&mut self) -> Option<ServerGoalHandle<A>> {
        let (goal, size) = self.goals.recv().await?;
        self.shared.queued_bytes.fetch_sub(size, Ordering::Relaxed);
        Some(goal)
    }

    /// Ticks each time a cancel request reached a goal.
    pub(super) fn cancel_watch(&self) -> watch::Receiver<u64> {
        self.shared.cancels.subscribe()
    }

    /// The action's resolved namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Every goal listed now, as the next status array will show them.
    pub fn status_list(&self) -> Vec<GoalStatus> {
        self.shared.table().statuses().map(status_msg).collect()
    }
}

async fn status_frequency(node: &Node, ns: &str) -> f64 {
    if let Ok(Some(v)) = node.get_param(&format!("{ns}/status_frequency")).await {
        if let Some(f) = <f64 as crate::node::params::FromParam>::from_param(&v) {
            return f;
        }
    }
    match node.search_param("actionlib_status_frequency").await {
        Ok(Some(key)) => node.param(&key, 5.0).await.unwrap_or(5.0),
        _ => 5.0,
    }
}

/// The server's task: goals and cancels in, status arrays out at their time.
async fn serve<A: Action>(
    shared: Arc<Shared>,
    goal_sub: RawSubscriber,
    cancel_sub: RawSubscriber,
    status_pub: RawPublisher,
    goals: mpsc::Sender<(ServerGoalHandle<A>, usize)>,
) {
    let mut undecodable = 0u64;
    loop {
        let due = shared.table().next_status_at();
        let sleep = crate::time::sleep_until_due(due);
        tokio::select! {
            received = goal_sub.recv() => {
                let Some(received) = received else { break };
                if !goal_arrived::<A>(&shared, &goals, &received.body) {
                    undecodable += 1;
                    tracing::debug!("{}: undecodable goal ({undecodable} so far)", goal_sub.topic());
                }
            }
            received = cancel_sub.recv() => {
                let Some(received) = received else { break };
                match crate::wire::from_slice::<core::GoalId>(&received.body) {
                    Ok(cancel) => {
                        let reached = shared.table().cancel_requested(
                            &cancel,
                            stamp(shared.node.now()),
                            Instant::now(),
                        );
                        if !reached.is_empty() {
                            shared.cancels.send_modify(|n| *n += 1);
                        }
                    }
                    Err(e) => tracing::debug!("{}: undecodable cancel: {e}", cancel_sub.topic()),
                }
            }
            _ = sleep => {
                let list = shared.table().status_list(Instant::now());
                let array = core::StatusArray {
                    header: core::Header {
                        seq: 0,
                        stamp: stamp(shared.node.now()),
                        frame_id: String::new(),
                    },
                    status_list: list,
                };
                match crate::wire::to_vec(&array) {
                    Ok(body) => status_pub.publish_body(&body),
                    Err(e) => tracing::warn!("status array not sent: {e}"),
                }
            }
            _ = shared.changed.notified() => {}
            _ = shared.node.shutdown_requested() => {
                // Before the node closes its publications: the results still go out.
                shared.end_every_goal(NODE_SHUT_DOWN);
                break;
            }
        }
    }
}

/// Handles one message of `<ns>/goal`; false when it did not decode.
fn goal_arrived<A: Action>(
    shared: &Arc<Shared>,
    goals: &mpsc::Sender<(ServerGoalHandle<A>, usize)>,
    body: &[u8],
) -> bool {
    let Ok((_, goal_id, payload)) = core::split_goal(body) else {
        return false;
    };
    let Ok(goal) = crate::wire::from_slice::<A::Goal>(payload) else {
        return false;
    };
    let arrival = shared
        .table()
        .goal_arrived(goal_id, stamp(shared.node.now()), Instant::now());
    match arrival {
        Arrival::New(key) => {
            let handle = ServerGoalHandle {
                shared: shared.clone(),
                key,
                goal,
                _action: PhantomData,
            };
            let size = payload.len();
            let queued = shared.queued_bytes.fetch_add(size, Ordering::Relaxed) + size;
            let sent = if queued > shared.max_queued_bytes {
                Err(handle)
            } else {
                goals
                    .try_send((handle, size))
                    .map_err(|full| full.into_inner().0)
            };
            if let Err(handle) = sent {
                shared.queued_bytes.fetch_sub(size, Ordering::Relaxed);
                let refused = shared.table().reject(
                    handle.key,
                    "the action server's code is not taking goals as fast as they come",
                    Instant::now(),
                );
                if let Ok(result) = refused {
                    shared.publish_result(&result, &shared.default_result);
                }
            }
        }
        Arrival::Recalled(result) | Arrival::Refused(result) => {
            shared.publish_result(&result, &shared.default_result)
        }
        Arrival::Duplicate {
            recalled: Some(result),
        } => shared.publish_result(&result, &shared.default_result),
        Arrival::Duplicate { recalled: None } => {}
    }
    true
}

/// One goal on an [`ActionServer`]: the goal, and the calls that move it on. Each call is
/// checked against the goal's state as actionlib's rules say (a goal is accepted once,
/// succeeds or aborts only after it was accepted...); a call the state does not allow
/// returns [`ActionError::Transition`] and changes nothing.
///
/// A handle dropped before its goal finished ends the goal (REJECTED or RECALLED before it
/// was accepted, ABORTED or PREEMPTED after), so that no client waits for it forever.
pub struct ServerGoalHandle<A: Action> {
    shared: Arc<Shared>,
    key: GoalKey,
    goal: A::Goal,
    _action: PhantomData<fn() -> A>,
}

impl<A: Action> std::fmt::Debug for ServerGoalHandle<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerGoalHandle")
            .field("status", &self.status())
            .field("goal", &self.goal)
            .finish()
    }
}

impl<A: Action> ServerGoalHandle<A> {
    /// The goal.
    pub fn goal(&self) -> &A::Goal {
        &self.goal
    }

    /// The goal's id and stamp (the server's own when the client sent none).
    pub fn goal_id(&self) -> GoalID {
        self.status().goal_id
    }

    /// The goal's status now.
    pub fn status(&self) -> GoalStatus {
        self.shared
            .table()
            .status(self.key)
            .map(status_msg)
            .unwrap_or_else(|| GoalStatus {
                status: status::LOST,
                ..GoalStatus::default()
            })
    }

    /// True once a client asked to cancel the goal (RECALLING or PREEMPTING).
    pub fn is_cancel_requested(&self) -> bool {
        matches!(self.status().status, status::RECALLING | status::PREEMPTING)
    }

    /// Waits until a client asks to cancel the goal (at once if one has). Never returns
    /// for a goal that finishes first: use it in a `select!` beside the work.
    pub async fn cancel_requested(&self) {
        let mut cancels = self.shared.cancels.subscribe();
        loop {
            if self.is_cancel_requested() {
                return;
            }
            if cancels.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Accepts the goal: PENDING → ACTIVE (RECALLING → PREEMPTING: the client's cancel
    /// still stands).
    pub fn accept(&self, text: &str) -> Result<(), ActionError> {
        self.shared.table().accept(self.key, text)?;
        self.shared.changed.notify_one();
        Ok(())
    }

    /// Refuses a goal not yet accepted.
    pub fn reject(&self, result: &A::Result, text: &str) -> Result<(), ActionError> {
        self.finish(result, |t| t.reject(self.key, text, Instant::now()))
    }

    /// Ends an accepted goal with success.
    pub fn succeed(&self, result: &A::Result, text: &str) -> Result<(), ActionError> {
        self.finish(result, |t| t.succeed(self.key, text, Instant::now()))
    }

    /// Ends an accepted goal with failure.
    pub fn abort(&self, result: &A::Result, text: &str) -> Result<(), ActionError> {
        self.finish(result, |t| t.abort(self.key, text, Instant::now()))
    }

    /// Ends the goal cancelled: RECALLED if it was never accepted, PREEMPTED if it was.
    pub fn cancel(&self, result: &A::Result, text: &str) -> Result<(), ActionError> {
        self.finish(result, |t| t.set_canceled(self.key, text, Instant::now()))
    }

    /// Publishes feedback for the goal, with its current status.
    pub fn publish_feedback(&self, feedback: &A::Feedback) -> Result<(), ActionError> {
        let Some(current) = self.shared.table().status(self.key).cloned() else {
            return Err(ActionError::NoGoal);
        };
        let payload = crate::wire::to_vec(feedback)?;
        let body = core::status_message(stamp(self.shared.node.now()), &current, &payload)?;
        self.shared.feedback_pub.publish_body(&body);
        Ok(())
    }

    fn finish(
        &self,
        result: &A::Result,
        step: impl FnOnce(
            &mut GoalTable,
        )
            -> Result<core::GoalStatus, udpros_core::action::server::BadTransition>,
    ) -> Result<(), ActionError> {
        let payload = crate::wire::to_vec(result)?;
        let ended = step(&mut self.shared.table())?;
        self.shared.publish_result(&ended, &payload);
        Ok(())
    }
}

impl<A: Action> Drop for ServerGoalHandle<A> {
    fn drop(&mut self) {
        let abandoned = self.shared.table().abandon(self.key, Instant::now());
        if let Some(ended) = abandoned {
            self.shared
                .publish_result(&ended, &self.shared.default_result);
        }
    }
}
