//! The action client: one core [`CommStateMachine`] per goal, fed by the action's topics.
//! [`RawActionClient`] works with encoded goals, results and feedback, for types learnt at
//! run time (`udpros action send`); [`ActionClient`] is the typed one on top.

use super::{
    goal_id_msg, stamp, status_msg, Action, ActionError, FEEDBACK_QUEUE, FEEDBACK_QUEUE_BYTES,
};
use crate::msg::{Message, Time};
use crate::msgs::actionlib_msgs::{GoalID, GoalStatus, GoalStatusArray};
use crate::node::{AdvertiseOptions, Node, RawPublisher, RawSubscriber, SubscribeOptions};
use crate::wire::header::ConnectionHeader;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};
use udpros_core::action as core;
use udpros_core::action::client::{CommState, SimpleState};
use udpros_core::action::client_goals::{ClientGoals, FeedbackBound};
pub use udpros_core::action::client_goals::{GoalEvent, SERVER_GONE_AFTER};

/// Goal ids are unique per process, as roscpp's counter is.
static GOAL_COUNT: AtomicU64 = AtomicU64::new(0);

/// The goals a client follows (the core's table) and how to wake each goal's handles.
struct Goals {
    table: ClientGoals<Bytes>,
    /// One per followed goal; its handle and views wait on receivers of it.
    changed: HashMap<String, watch::Sender<()>>,
}

impl Goals {
    /// Tells the handles of the goals the table changed.
    fn wake(&mut self) {
        for id in self.table.take_woken() {
            if let Some(changed) = self.changed.get(&id) {
                changed.send_replace(());
            }
        }
    }
}

/// The message types of an action's goal, result and feedback topics, as connection
/// headers name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionTypes {
    /// `<Name>ActionGoal`: type, md5sum, full definition.
    pub goal: (String, String, String),
    /// `<Name>ActionResult`; `("*", "*", "")` takes whatever the server publishes.
    pub result: (String, String, String),
    /// `<Name>ActionFeedback`; `("*", "*", "")` as for results.
    pub feedback: (String, String, String),
}

impl ActionTypes {
    /// The types of action `A`.
    pub fn of<A: Action>() -> ActionTypes {
        fn info<M: Message>() -> (String, String, String) {
            (M::TYPE.into(), M::MD5SUM.into(), M::DEFINITION.into())
        }
        ActionTypes {
            goal: info::<A::ActionGoal>(),
            result: info::<A::ActionResult>(),
            feedback: info::<A::ActionFeedback>(),
        }
    }
}

pub(super) struct Shared {
    goals: Mutex<Goals>,
    /// Wakes the client's task: a goal was sent, so its links are to be watched.
    sent: Notify,
    goal_pub: RawPublisher,
    cancel_pub: RawPublisher,
    node: Node,
    /// The connection headers of the last result's and feedback's publishers: what they
    /// carry, when the client took any type.
    last_headers: Mutex<PublisherHeaders>,
}

/// The connection headers of the publishers of the last result and the last feedback a
/// client heard: their `type` and `message_definition` describe what they sent.
#[derive(Debug, Clone, Default)]
pub struct PublisherHeaders {
    /// The last result's publisher.
    pub result: Option<Arc<ConnectionHeader>>,
    /// The last feedback's publisher.
    pub feedback: Option<Arc<ConnectionHeader>>,
}

impl Shared {
    fn goals(&self) -> MutexGuard<'_, Goals> {
        self.goals.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send_cancel(&self, cancel: &core::GoalId) {
        match crate::wire::to_vec(cancel) {
            Ok(body) => self.cancel_pub.publish_body(&body),
            Err(e) => tracing::warn!("cancel request not sent: {e}"),
        }
    }
}

/// An action client on encoded messages: sends goals on `<ns>/goal` and follows each
/// through roscpp's communication state machine from `<ns>/status`, `<ns>/result` and
/// `<ns>/feedback`.
///
/// It keeps state only for goals whose handle lives. When no status publisher has been
/// linked for [`SERVER_GONE_AFTER`] while goals are in flight (the server died, or its
/// node was killed), those goals end LOST; roscpp's client would wait for them forever.
pub struct RawActionClient {
    shared: Arc<Shared>,
    /// The caller ids of the publishers this client hears both results and feedback from.
    heard_callers: Arc<dyn Fn() -> Vec<String> + Send + Sync>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RawActionClient {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RawActionClient {
    /// A client of action `namespace` (resolved as a topic name) on `node`, for messages
    /// of `types`.
    pub async fn new(
        node: &Node,
        namespace: &str,
        types: &ActionTypes,
    ) -> Result<RawActionClient, ActionError> {
        let ns = node.resolve_name(namespace);
        let publish = AdvertiseOptions {
            queue_size: 10,
            ..AdvertiseOptions::default()
        };
        let (goal_type, goal_md5, goal_definition) = &types.goal;
        let goal_pub = node
            .advertise_raw(
                &format!("{ns}/goal"),
                goal_type,
                goal_md5,
                goal_definition,
                publish.clone(),
            )
            .await?;
        let cancel_pub = node
            .advertise_raw(
                &format!("{ns}/cancel"),
                GoalID::TYPE,
                GoalID::MD5SUM,
                GoalID::DEFINITION,
                publish,
            )
            .await?;
        let subscribe = SubscribeOptions {
            queue_size: 1024,
            ..SubscribeOptions::tcp_only()
        };
        let status_sub = node
            .subscribe_raw_as(
                &format!("{ns}/status"),
                GoalStatusArray::TYPE,
                GoalStatusArray::MD5SUM,
                GoalStatusArray::DEFINITION,
                subscribe.clone(),
            )
            .await?;
        let (t, m, d) = &types.result;
        let result_sub = node
            .subscribe_raw_as(&format!("{ns}/result"), t, m, d, subscribe.clone())
            .await?;
        let (t, m, d) = &types.feedback;
        let feedback_sub = node
            .subscribe_raw_as(&format!("{ns}/feedback"), t, m, d, subscribe)
            .await?;
        let bound = FeedbackBound {
            count: FEEDBACK_QUEUE,
            bytes: FEEDBACK_QUEUE_BYTES,
        };
        let shared = Arc::new(Shared {
            goals: Mutex::new(Goals {
                table: ClientGoals::new(bound),
                changed: HashMap::new(),
            }),
            sent: Notify::new(),
            goal_pub,
            cancel_pub,
            node: node.clone(),
            last_headers: Mutex::new(PublisherHeaders::default()),
        });
        let result_links = result_sub.linked_callers();
        let feedback_links = feedback_sub.linked_callers();
        let heard_callers: Arc<dyn Fn() -> Vec<String> + Send + Sync> = Arc::new(move || {
            let feedback = feedback_links();
            result_links()
                .into_iter()
                .filter(|caller| feedback.contains(caller))
                .collect()
        });
        let task = tokio::spawn(follow(shared.clone(), status_sub, result_sub, feedback_sub));
        Ok(RawActionClient {
            shared,
            heard_callers,
            task,
        })
    }

    /// The connection headers of the publishers of the last result and the last feedback.
    pub fn last_headers(&self) -> PublisherHeaders {
        self.shared
            .last_headers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// True when a server is linked both ways: its status arrived, it subscribes to this
    /// client's goals and cancels, and this client hears its results and feedback (what
    /// rospy's `wait_for_server` checks).
    pub fn is_server_connected(&self) -> bool {
        let Some(server) = self
            .shared
            .goals()
            .table
            .status_caller()
            .map(str::to_string)
        else {
            return false;
        };
        let subscribes = |p: &RawPublisher| p.links().iter().any(|l| l.caller_id == server);
        subscribes(&self.shared.goal_pub)
            && subscribes(&self.shared.cancel_pub)
            && (self.heard_callers)().contains(&server)
    }

    /// Waits until [`is_server_connected`](Self::is_server_connected), at most `timeout`
    /// (`None`: for ever). True when connected.
    pub async fn wait_for_server(&self, timeout: Option<Duration>) -> bool {
        // A timeout past what an Instant can hold waits for ever.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            if self.is_server_connected() {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) || !self.shared.node.ok() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Sends a goal (an encoded `<Name>Goal`); follow it with the handle.
    pub fn send_goal(&self, goal: &[u8]) -> Result<RawGoalHandle, ActionError> {
        let now = self.shared.node.now();
        let n = GOAL_COUNT.fetch_add(1, Ordering::Relaxed) + 1;
        let goal_id = core::GoalId {
            stamp: stamp(now),
            id: format!("{}-{n}-{}.{}", self.shared.node.name(), now.sec, now.nsec),
        };
        let body = core::goal_message(stamp(now), &goal_id, goal)?;
        let changed = {
            let mut goals = self.shared.goals();
            goals.table.track(Instant::now(), &goal_id.id);
            let (changed, receiver) = watch::channel(());
            goals.changed.insert(goal_id.id.clone(), changed);
            receiver
        };
        self.shared.sent.notify_one();
        self.shared.goal_pub.publish_body(&body);
        Ok(RawGoalHandle {
            view: RawGoalView {
                goal: Arc::new(GoalRef {
                    shared: self.shared.clone(),
                    goal_id,
                }),
            },
            changed,
        })
    }

    /// Asks the server to cancel every goal, this client's or not.
    pub fn cancel_all_goals(&self) {
        self.shared.send_cancel(&core::GoalId::default());
    }

    /// Asks the server to cancel every goal stamped at or before `time`.
    pub fn cancel_goals_at_and_before_time(&self, time: Time) {
        self.shared.send_cancel(&core::GoalId {
            stamp: stamp(time),
            id: String::new(),
        });
    }
}

/// A result's or feedback's goal status and its encoded result or feedback (sharing the
/// received buffer), its publisher's header kept as the last of its kind (`slot`); `None`
/// for a body that does not start as actionlib's do.
fn take_apart(
    shared: &Shared,
    received: &crate::transport::Received,
    slot: fn(&mut PublisherHeaders) -> &mut Option<Arc<ConnectionHeader>>,
) -> Option<(core::GoalStatus, Bytes)> {
    let (_, status, payload) = core::split_status_message(&received.body).ok()?;
    *slot(
        &mut shared
            .last_headers
            .lock()
            .unwrap_or_else(|e| e.into_inner()),
    ) = Some(received.publisher.clone());
    Some((status, received.body.slice_ref(payload)))
}

/// A status array: the entries of followed goals, to the table.
fn take_status(goals: &mut Goals, received: &crate::transport::Received) {
    let caller = received.publisher.get("callerid").unwrap_or("");
    let mut listed: HashMap<String, core::GoalStatus> = HashMap::new();
    let read = core::for_each_status(&received.body, |entry| {
        if let Ok(id) = std::str::from_utf8(entry.id) {
            if goals.table.is_tracked(id) {
                listed.insert(id.to_string(), entry.to_owned_status());
            }
        }
    });
    if read.is_ok() {
        goals.table.on_status(caller, &listed);
    }
}

fn take_feedback(shared: &Shared, goals: &mut Goals, received: &crate::transport::Received) {
    if let Some((status, payload)) = take_apart(shared, received, |h| &mut h.feedback) {
        goals.table.on_feedback(&status, payload);
    }
}

/// The client's task: status arrays, results and feedback in, goal states out; the rules
/// (who owns a goal, when a result is applied, when goals are lost) are the core table's.
async fn follow(
    shared: Arc<Shared>,
    status_sub: RawSubscriber,
    result_sub: RawSubscriber,
    feedback_sub: RawSubscriber,
) {
    loop {
        let due = {
            let now = Instant::now();
            let mut goals = shared.goals();
            if goals.table.wants_link_check(now) {
                goals
                    .table
                    .on_status_links(now, status_sub.num_publishers());
            }
            if goals.table.results_due(now) {
                // What the feedback links have read is older than the result: taken first.
                while let Some(received) = feedback_sub.try_recv() {
                    take_feedback(&shared, &mut goals, &received);
                }
            }
            goals.table.handle_timeout(now);
            goals.wake();
            goals.table.poll_timeout()
        };
        tokio::select! {
            _ = shared.sent.notified() => {}
            _ = crate::time::sleep_until_due(due) => {}
            received = status_sub.recv() => {
                let Some(received) = received else { break };
                take_status(&mut shared.goals(), &received);
            }
            received = result_sub.recv() => {
                let Some(received) = received else { break };
                if let Some((status, payload)) = take_apart(&shared, &received, |h| &mut h.result) {
                    shared.goals().table.on_result(Instant::now(), status, payload);
                }
            }
            received = feedback_sub.recv() => {
                let Some(received) = received else { break };
                take_feedback(&shared, &mut shared.goals(), &received);
            }
        }
    }
    // The node shut down: what was held is applied, and every handle's wait ends.
    let mut goals = shared.goals();
    goals.table.finish();
    goals.wake();
}

/// One goal sent by a [`RawActionClient`]. Dropping it (and every [`RawGoalView`] of it)
/// stops following the goal; the goal itself goes on at the server.
pub struct RawGoalHandle {
    view: RawGoalView,
    /// Marked changed when the goal has something new.
    changed: watch::Receiver<()>,
}

/// A goal's state without its events, shared: what a handle reads.
#[derive(Clone)]
pub struct RawGoalView {
    goal: Arc<GoalRef>,
}

/// The tracked goal's key; the last reference stops the tracking.
struct GoalRef {
    shared: Arc<Shared>,
    goal_id: core::GoalId,
}

impl Drop for GoalRef {
    fn drop(&mut self) {
        let mut goals = self.shared.goals();
        goals.table.forget(&self.goal_id.id);
        goals.changed.remove(&self.goal_id.id);
    }
}

impl std::fmt::Debug for RawGoalView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoalView")
            .field("goal_id", &self.goal.goal_id.id)
            .field("comm_state", &self.comm_state())
            .finish()
    }
}

impl std::ops::Deref for RawGoalHandle {
    type Target = RawGoalView;

    fn deref(&self) -> &RawGoalView {
        &self.view
    }
}

impl RawGoalView {
    /// Reads the goal's entry in its client's table.
    fn with<T>(&self, f: impl FnOnce(&mut ClientGoals<Bytes>, &str) -> T) -> T {
        f(&mut self.goal.shared.goals().table, &self.goal.goal_id.id)
    }

    /// The goal's id, as sent.
    pub fn goal_id(&self) -> GoalID {
        goal_id_msg(&self.goal.goal_id)
    }

    /// The communication state now.
    pub fn comm_state(&self) -> CommState {
        self.with(|goals, id| goals.comm_state(id))
    }

    /// The simple client's state now (PENDING, ACTIVE, or how the goal ended).
    pub fn simple_state(&self) -> SimpleState {
        self.with(|goals, id| goals.simple_state(id))
    }

    /// The server's latest status for the goal (LOST once the client lost it).
    pub fn goal_status(&self) -> Option<GoalStatus> {
        self.with(|goals, id| goals.latest_status(id).map(status_msg))
    }

    /// The encoded result, once it came.
    pub fn result_bytes(&self) -> Option<Bytes> {
        self.with(|goals, id| goals.result(id).cloned())
    }

    /// True when the goal is DONE: its result came, or it was lost.
    pub fn is_done(&self) -> bool {
        self.comm_state() == CommState::Done
    }

    /// Waits until the goal is DONE, at most `timeout` (`None`: for ever), leaving its
    /// events to its handle. True when it is done.
    pub async fn wait_until_done(&self, timeout: Option<Duration>) -> bool {
        let changed = self
            .goal
            .shared
            .goals()
            .changed
            .get(&self.goal.goal_id.id)
            .map(watch::Sender::subscribe);
        let Some(mut changed) = changed else {
            return self.is_done();
        };
        let wait = async {
            while !self.is_done() && self.goal.shared.node.ok() {
                if changed.changed().await.is_err() {
                    break;
                }
            }
        };
        match timeout {
            Some(t) => {
                let _ = tokio::time::timeout(t, wait).await;
            }
            None => wait.await,
        }
        self.is_done()
    }

    /// Asks the server to cancel this goal; false when the goal is finished or already
    /// being cancelled, and nothing was sent.
    pub fn cancel(&self) -> bool {
        let send = self.with(|goals, id| goals.cancel(id));
        if send {
            self.goal.shared.send_cancel(&core::GoalId {
                stamp: core::Stamp::ZERO,
                id: self.goal.goal_id.id.clone(),
            });
        }
        send
    }
}

impl RawGoalHandle {
    /// A view of the goal's state that can be kept apart from the handle.
    pub fn view(&self) -> RawGoalView {
        self.view.clone()
    }

    /// The next transition or encoded feedback, in the order they came; `None` after DONE
    /// once every event was taken, or when the node shut down.
    pub async fn next_event(&mut self) -> Option<GoalEvent<Bytes>> {
        loop {
            self.changed.borrow_and_update();
            let (event, done) = self.view.with(|goals, id| {
                let event = goals.next_event(id);
                (event, goals.comm_state(id) == CommState::Done)
            });
            match event {
                Some(event) => return Some(event),
                None if done || !self.goal.shared.node.ok() => return None,
                None => {
                    if self.changed.changed().await.is_err() {
                        return None;
                    }
                }
            }
        }
    }

    /// Waits until the goal is DONE (taking its events), at most `timeout` (`None`: for
    /// ever). True when it is done.
    pub async fn wait_for_done(&mut self, timeout: Option<Duration>) -> bool {
        let wait = async { while self.next_event().await.is_some() {} };
        match timeout {
            Some(t) => {
                let _ = tokio::time::timeout(t, wait).await;
            }
            None => wait.await,
        }
        self.is_done()
    }
}
