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
use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use udpros_core::action as core;
use udpros_core::action::client::{CommState, CommStateMachine, HeldResults, SimpleState};

/// How long a client with goals in flight waits, with no status publisher linked, before
/// it takes the server for gone and its goals for LOST.
pub const SERVER_GONE_AFTER: Duration = Duration::from_secs(2);

/// Goal ids are unique per process, as roscpp's counter is.
static GOAL_COUNT: AtomicU64 = AtomicU64::new(0);

/// What happened to a goal, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum GoalEvent<F> {
    /// The goal's communication state changed.
    Transition(CommState),
    /// The server sent feedback.
    Feedback(F),
}

/// One goal's state as the client's task keeps it.
struct Tracked {
    machine: CommStateMachine,
    result: Option<Bytes>,
    /// Transitions (never dropped; a goal passes through few) and feedback (the oldest go
    /// past [`FEEDBACK_QUEUE`] or [`FEEDBACK_QUEUE_BYTES`]), not yet taken by the handle.
    events: VecDeque<GoalEvent<Bytes>>,
    feedback_queued: usize,
    feedback_bytes: usize,
    /// The caller id of the status publisher that first listed the goal: only its arrays
    /// can say the goal is gone (another node publishing on the same status topic, by
    /// mistake or malice, cannot make it LOST).
    server: Option<String>,
    /// Feedback came for the goal: its result is held for
    /// [`RESULT_GRACE`](udpros_core::action::client::RESULT_GRACE).
    had_feedback: bool,
    wake: Arc<Notify>,
}

impl Tracked {
    fn push_transitions(&mut self, passed: Vec<CommState>) {
        if passed.is_empty() {
            return;
        }
        self.events
            .extend(passed.into_iter().map(GoalEvent::Transition));
        self.wake.notify_one();
    }

    fn push_feedback(&mut self, payload: Bytes) {
        while self.feedback_queued >= FEEDBACK_QUEUE
            || self.feedback_bytes + payload.len() > FEEDBACK_QUEUE_BYTES
        {
            let Some(i) = self
                .events
                .iter()
                .position(|e| matches!(e, GoalEvent::Feedback(_)))
            else {
                break; // the newest is kept, however large
            };
            if let Some(GoalEvent::Feedback(old)) = self.events.remove(i) {
                self.feedback_queued -= 1;
                self.feedback_bytes -= old.len();
            }
        }
        self.feedback_queued += 1;
        self.feedback_bytes += payload.len();
        self.events.push_back(GoalEvent::Feedback(payload));
        self.wake.notify_one();
    }

    /// The handle took an event.
    fn took(&mut self, event: &GoalEvent<Bytes>) {
        if let GoalEvent::Feedback(bytes) = event {
            self.feedback_queued -= 1;
            self.feedback_bytes -= bytes.len();
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
    goals: Mutex<HashMap<String, Tracked>>,
    goal_pub: RawPublisher,
    cancel_pub: RawPublisher,
    node: Node,
    /// The caller id of the last status array's publisher.
    status_caller: Mutex<Option<String>>,
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
    fn goals(&self) -> MutexGuard<'_, HashMap<String, Tracked>> {
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
            .subscribe_with(
                &format!("{ns}/status"),
                GoalStatusArray::TYPE,
                GoalStatusArray::MD5SUM,
                GoalStatusArray::DEFINITION,
                subscribe.clone(),
            )
            .await?;
        let (t, m, d) = &types.result;
        let result_sub = node
            .subscribe_with(&format!("{ns}/result"), t, m, d, subscribe.clone())
            .await?;
        let (t, m, d) = &types.feedback;
        let feedback_sub = node
            .subscribe_with(&format!("{ns}/feedback"), t, m, d, subscribe)
            .await?;
        let shared = Arc::new(Shared {
            goals: Mutex::new(HashMap::new()),
            goal_pub,
            cancel_pub,
            node: node.clone(),
            status_caller: Mutex::new(None),
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
            .status_caller
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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
        let wake = Arc::new(Notify::new());
        self.shared.goals().insert(
            goal_id.id.clone(),
            Tracked {
                machine: CommStateMachine::new(),
                result: None,
                events: VecDeque::new(),
                feedback_queued: 0,
                feedback_bytes: 0,
                server: None,
                had_feedback: false,
                wake: wake.clone(),
            },
        );
        self.shared.goal_pub.publish_body(&body);
        Ok(RawGoalHandle {
            view: RawGoalView {
                goal: Arc::new(GoalRef {
                    shared: self.shared.clone(),
                    goal_id,
                }),
            },
            wake,
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
/// received buffer); `None` for a body that does not start as actionlib's do.
fn status_and_payload(received: &crate::transport::Received) -> Option<(core::GoalStatus, Bytes)> {
    let (_, status, payload) = core::split_status_message(&received.body).ok()?;
    Some((status, received.body.slice_ref(payload)))
}

/// A result's or feedback's goal status and payload, its publisher's header kept as the
/// last of its kind (`slot`).
fn take_apart(
    shared: &Shared,
    received: &crate::transport::Received,
    slot: fn(&mut PublisherHeaders) -> &mut Option<Arc<ConnectionHeader>>,
) -> Option<(core::GoalStatus, Bytes)> {
    let parts = status_and_payload(received)?;
    *slot(
        &mut shared
            .last_headers
            .lock()
            .unwrap_or_else(|e| e.into_inner()),
    ) = Some(received.publisher.clone());
    Some(parts)
}

/// A feedback message for a goal this client follows and that is not done: queued for
/// its handle.
fn take_feedback(shared: &Shared, received: &crate::transport::Received) {
    let Some((st, payload)) = take_apart(shared, received, |h| &mut h.feedback) else {
        return;
    };
    if let Some(tracked) = shared.goals().get_mut(&st.goal_id.id) {
        if tracked.machine.state() != CommState::Done {
            tracked.had_feedback = true;
            tracked.push_feedback(payload);
        }
    }
}

/// A result for a goal this client follows: its state passes to DONE, the result kept.
fn take_result(shared: &Shared, received: &crate::transport::Received) {
    let Some((st, payload)) = take_apart(shared, received, |h| &mut h.result) else {
        return;
    };
    if let Some(tracked) = shared.goals().get_mut(&st.goal_id.id) {
        let passed = tracked.machine.on_result(&st);
        if !passed.is_empty() {
            tracked.result = Some(payload);
        }
        tracked.push_transitions(passed);
    }
}

/// Sleeps until `due`, or for ever when nothing is held.
async fn sleep_until_due(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due.into()).await,
        None => std::future::pending().await,
    }
}

/// The client's task: status arrays, results and feedback in, goal states out.
async fn follow(
    shared: Arc<Shared>,
    mut status_sub: RawSubscriber,
    mut result_sub: RawSubscriber,
    mut feedback_sub: RawSubscriber,
) {
    let mut unlinked_since: Option<Instant> = None;
    let mut check = tokio::time::interval(Duration::from_millis(250));
    let mut held = HeldResults::default();
    loop {
        tokio::select! {
            received = status_sub.recv() => {
                let Some(received) = received else { break };
                let caller = received.publisher.get("callerid").unwrap_or("").to_string();
                let mut goals = shared.goals();
                // Only the entries of goals this client follows are made into statuses.
                let mut listed: HashMap<String, core::GoalStatus> = HashMap::new();
                let read = core::for_each_status(&received.body, |entry| {
                    if let Ok(id) = std::str::from_utf8(entry.id) {
                        if goals.contains_key(id) {
                            listed.insert(id.to_string(), entry.to_owned_status());
                        }
                    }
                });
                if read.is_err() {
                    continue;
                }
                *shared.status_caller.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(caller.clone());
                for (id, tracked) in goals.iter_mut() {
                    let found = listed.get(id);
                    match (&tracked.server, found) {
                        (None, Some(_)) => tracked.server = Some(caller.clone()),
                        (Some(server), None) if *server != caller => continue,
                        _ => {}
                    }
                    let passed = tracked.machine.on_status(found);
                    tracked.push_transitions(passed);
                }
            }
            received = result_sub.recv() => {
                let Some(received) = received else { break };
                let Some((st, _)) = status_and_payload(&received) else { continue };
                // A goal that has had feedback may have more on the way (see RESULT_GRACE).
                let wait = shared
                    .goals()
                    .get(&st.goal_id.id)
                    .is_some_and(|t| t.had_feedback && t.machine.state() != CommState::Done);
                if wait {
                    // A second result for a goal already held is dropped: the first stands.
                    held.hold(Instant::now(), &st.goal_id.id, received);
                } else {
                    take_result(&shared, &received);
                }
            }
            _ = sleep_until_due(held.next_due()) => {
                // What the feedback links have read is older than the result: taken first.
                while let Some(feedback) = feedback_sub.try_recv() {
                    take_feedback(&shared, &feedback);
                }
                while let Some((_, received)) = held.due(Instant::now()) {
                    take_result(&shared, &received);
                }
            }
            received = feedback_sub.recv() => {
                let Some(received) = received else { break };
                take_feedback(&shared, &received);
            }
            _ = check.tick() => {
                let mut goals = shared.goals();
                let in_flight = goals.values().any(|t| t.machine.state() != CommState::Done);
                if !in_flight || status_sub.num_publishers() > 0 {
                    unlinked_since = None;
                    continue;
                }
                let since = *unlinked_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= SERVER_GONE_AFTER {
                    for tracked in goals.values_mut() {
                        let passed = tracked.machine.lose();
                        tracked.push_transitions(passed);
                    }
                    unlinked_since = None;
                }
            }
        }
    }
    // The node shut down: what was held is applied, and every handle's wait ends.
    for (_, received) in held.drain() {
        take_result(&shared, &received);
    }
    for tracked in shared.goals().values() {
        tracked.wake.notify_one();
    }
}

/// One goal sent by a [`RawActionClient`]. Dropping it (and every [`RawGoalView`] of it)
/// stops following the goal; the goal itself goes on at the server.
pub struct RawGoalHandle {
    view: RawGoalView,
    wake: Arc<Notify>,
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
        self.shared.goals().remove(&self.goal_id.id);
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
    fn with<T>(&self, f: impl FnOnce(&mut Tracked) -> T) -> Option<T> {
        self.goal
            .shared
            .goals()
            .get_mut(&self.goal.goal_id.id)
            .map(f)
    }

    /// The goal's id, as sent.
    pub fn goal_id(&self) -> GoalID {
        goal_id_msg(&self.goal.goal_id)
    }

    /// The communication state now.
    pub fn comm_state(&self) -> CommState {
        self.with(|t| t.machine.state()).unwrap_or(CommState::Done)
    }

    /// The simple client's state now (PENDING, ACTIVE, or how the goal ended).
    pub fn simple_state(&self) -> SimpleState {
        self.with(|t| t.machine.simple_state())
            .unwrap_or(SimpleState::Lost)
    }

    /// The server's latest status for the goal (LOST once the client lost it).
    pub fn goal_status(&self) -> Option<GoalStatus> {
        self.with(|t| t.machine.latest_status().map(status_msg))
            .flatten()
    }

    /// The encoded result, once it came.
    pub fn result_bytes(&self) -> Option<Bytes> {
        self.with(|t| t.result.clone()).flatten()
    }

    /// True when the goal is DONE: its result came, or it was lost.
    pub fn is_done(&self) -> bool {
        self.comm_state() == CommState::Done
    }

    /// Asks the server to cancel this goal; false when the goal is finished or already
    /// being cancelled, and nothing was sent.
    pub fn cancel(&self) -> bool {
        let send = self.with(|t| t.machine.cancel()).unwrap_or(false);
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
            let notified = self.wake.notified();
            let (event, done) = self.with(|t| {
                let event = t.events.pop_front();
                if let Some(event) = &event {
                    t.took(event);
                }
                (event, t.machine.state() == CommState::Done)
            })?;
            match event {
                Some(event) => return Some(event),
                None if done || !self.goal.shared.node.ok() => return None,
                None => notified.await,
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

/// An action client of action `A`: a [`RawActionClient`] that encodes goals and decodes
/// results and feedback. See [`RawActionClient`] for what it keeps and when goals are
/// lost.
pub struct ActionClient<A: Action> {
    raw: RawActionClient,
    _action: PhantomData<fn() -> A>,
}

impl<A: Action> ActionClient<A> {
    /// A client of action `namespace` (resolved as a topic name) on `node`.
    pub async fn new(node: &Node, namespace: &str) -> Result<ActionClient<A>, ActionError> {
        Ok(ActionClient {
            raw: RawActionClient::new(node, namespace, &ActionTypes::of::<A>()).await?,
            _action: PhantomData,
        })
    }

    /// Sends a goal; follow it with the handle.
    pub fn send_goal(&self, goal: &A::Goal) -> Result<ClientGoalHandle<A>, ActionError> {
        let raw = self.raw.send_goal(&crate::wire::to_vec(goal)?)?;
        Ok(ClientGoalHandle {
            view: GoalView {
                raw: raw.view(),
                _action: PhantomData,
            },
            raw,
        })
    }
}

impl<A: Action> std::ops::Deref for ActionClient<A> {
    type Target = RawActionClient;

    fn deref(&self) -> &RawActionClient {
        &self.raw
    }
}

/// One goal sent by an [`ActionClient`]; its state through [`GoalView`]'s methods.
/// Dropping it (and every view of it) stops following the goal; the goal itself goes on
/// at the server.
pub struct ClientGoalHandle<A: Action> {
    raw: RawGoalHandle,
    view: GoalView<A>,
}

/// A goal's state without its events, shared: what a [`ClientGoalHandle`] reads, and the
/// raw view's calls (`comm_state`, `simple_state`, `cancel`...).
pub struct GoalView<A: Action> {
    raw: RawGoalView,
    _action: PhantomData<fn() -> A>,
}

impl<A: Action> Clone for GoalView<A> {
    fn clone(&self) -> Self {
        GoalView {
            raw: self.raw.clone(),
            _action: PhantomData,
        }
    }
}

impl<A: Action> std::ops::Deref for GoalView<A> {
    type Target = RawGoalView;

    fn deref(&self) -> &RawGoalView {
        &self.raw
    }
}

impl<A: Action> GoalView<A> {
    /// The result, once it came and decoded.
    pub fn result(&self) -> Option<A::Result> {
        crate::wire::from_bytes(&self.raw.result_bytes()?).ok()
    }
}

impl<A: Action> std::fmt::Debug for ClientGoalHandle<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.raw.view.fmt(f)
    }
}

impl<A: Action> std::ops::Deref for ClientGoalHandle<A> {
    type Target = GoalView<A>;

    fn deref(&self) -> &GoalView<A> {
        &self.view
    }
}

impl<A: Action> ClientGoalHandle<A> {
    /// A view of the goal's state that can be kept apart from the handle.
    pub fn view(&self) -> GoalView<A> {
        self.view.clone()
    }

    /// The next transition or feedback, in the order they came; `None` after DONE once
    /// every event was taken, or when the node shut down. Feedback that does not decode
    /// as the action's is skipped.
    pub async fn next_event(&mut self) -> Option<GoalEvent<A::Feedback>> {
        loop {
            match self.raw.next_event().await? {
                GoalEvent::Transition(state) => return Some(GoalEvent::Transition(state)),
                GoalEvent::Feedback(bytes) => {
                    if let Ok(feedback) = crate::wire::from_bytes(&bytes) {
                        return Some(GoalEvent::Feedback(feedback));
                    }
                }
            }
        }
    }

    /// Waits until the goal is DONE (taking its events), at most `timeout` (`None`: for
    /// ever). True when it is done.
    pub async fn wait_for_done(&mut self, timeout: Option<Duration>) -> bool {
        self.raw.wait_for_done(timeout).await
    }
}
