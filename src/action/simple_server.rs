//! The simple action server: one goal at a time, as actionlib's `SimpleActionServer`.

use super::{server::ActionServer, server::ServerGoalHandle, Action, ActionError};
use super::{status, ActionServerOptions};
use crate::node::Node;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

const REPLACED: &str =
    "This goal was canceled because another goal was received by the simple action server";

/// Works one goal at a time. A new goal becomes the *next* goal (a next goal not yet taken
/// is cancelled), and asks the current one to stop ([`is_preempt_requested`]); the code
/// takes the next goal with [`accept_new_goal`], which ends the current one cancelled if it
/// still runs. A client's cancel of the current goal is a preempt request too.
///
/// [`is_preempt_requested`]: SimpleActionServer::is_preempt_requested
/// [`accept_new_goal`]: SimpleActionServer::accept_new_goal
pub struct SimpleActionServer<A: Action> {
    state: Arc<State<A>>,
    task: tokio::task::JoinHandle<()>,
}

impl<A: Action> Drop for SimpleActionServer<A> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct State<A: Action> {
    goals: Mutex<Goals<A>>,
    changed: Notify,
}

struct Goals<A: Action> {
    current: Option<ServerGoalHandle<A>>,
    next: Option<ServerGoalHandle<A>>,
    preempt_requested: bool,
    next_preempt_requested: bool,
    closed: bool,
}

impl<A: Action> State<A> {
    fn goals(&self) -> MutexGuard<'_, Goals<A>> {
        self.goals.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<A: Action> Goals<A> {
    fn is_active(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(|g| matches!(g.status().status, status::ACTIVE | status::PREEMPTING))
    }

    fn arrived(&mut self, goal: ServerGoalHandle<A>) {
        let stamp = goal.goal_id().stamp;
        let newest = [&self.current, &self.next]
            .into_iter()
            .flatten()
            .all(|g| stamp >= g.goal_id().stamp);
        if !newest {
            let _ = goal.cancel(&A::Result::default(), REPLACED);
            return;
        }
        if let Some(old) = self.next.take() {
            let _ = old.cancel(&A::Result::default(), REPLACED);
        }
        self.next = Some(goal);
        self.next_preempt_requested = false;
        if self.is_active() {
            self.preempt_requested = true;
        }
    }

    fn cancels_seen(&mut self) {
        if self
            .current
            .as_ref()
            .is_some_and(|g| g.is_cancel_requested())
        {
            self.preempt_requested = true;
        }
        if self.next.as_ref().is_some_and(|g| g.is_cancel_requested()) {
            self.next_preempt_requested = true;
        }
    }
}

impl<A: Action> SimpleActionServer<A> {
    /// Starts serving action `namespace` on `node`.
    pub async fn new(
        node: &Node,
        namespace: &str,
        options: ActionServerOptions,
    ) -> Result<SimpleActionServer<A>, ActionError> {
        let mut server = ActionServer::<A>::new(node, namespace, options).await?;
        let state = Arc::new(State {
            goals: Mutex::new(Goals {
                current: None,
                next: None,
                preempt_requested: false,
                next_preempt_requested: false,
                closed: false,
            }),
            changed: Notify::new(),
        });
        let task_state = state.clone();
        let mut cancels = server.cancel_watch();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    goal = server.next_goal() => {
                        let Some(goal) = goal else { break };
                        task_state.goals().arrived(goal);
                    }
                    changed = cancels.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        task_state.goals().cancels_seen();
                    }
                }
                task_state.changed.notify_waiters();
            }
            task_state.goals().closed = true;
            task_state.changed.notify_waiters();
            // Keeps the server (and its goal handles' publishers) until the state goes.
            drop(server);
        });
        Ok(SimpleActionServer { state, task })
    }

    /// Waits for a new goal, makes it the current goal and accepts it; the current goal,
    /// if it still runs, ends cancelled. Returns the goal; `Err(Shutdown)` once the server
    /// stopped.
    pub async fn accept_new_goal(&self) -> Result<A::Goal, ActionError> {
        loop {
            let changed = self.state.changed.notified();
            {
                let mut goals = self.state.goals();
                if let Some(next) = goals.next.take() {
                    if goals.is_active() {
                        if let Some(current) = &goals.current {
                            let _ = current.cancel(&A::Result::default(), REPLACED);
                        }
                    }
                    goals.preempt_requested = goals.next_preempt_requested;
                    goals.next_preempt_requested = false;
                    next.accept("This goal has been accepted by the simple action server")?;
                    let goal = next.goal().clone();
                    goals.current = Some(next);
                    return Ok(goal);
                }
                if goals.closed {
                    return Err(ActionError::Shutdown);
                }
            }
            changed.await;
        }
    }

    /// True when a goal waits to be taken.
    pub fn is_new_goal_available(&self) -> bool {
        self.state.goals().next.is_some()
    }

    /// True when the current goal should stop: a newer goal came, its client cancelled
    /// it, or the server shut down with its node (the goal was ended for its client then:
    /// what the code does with it next is refused with [`ActionError::Shutdown`]).
    pub fn is_preempt_requested(&self) -> bool {
        let goals = self.state.goals();
        goals.preempt_requested || goals.closed
    }

    /// Waits until [`is_preempt_requested`](Self::is_preempt_requested).
    pub async fn preempt_requested(&self) {
        loop {
            let changed = self.state.changed.notified();
            if self.is_preempt_requested() {
                return;
            }
            changed.await;
        }
    }

    /// True while the current goal is ACTIVE or PREEMPTING.
    pub fn is_active(&self) -> bool {
        self.state.goals().is_active()
    }

    /// Publishes feedback for the current goal.
    pub fn publish_feedback(&self, feedback: &A::Feedback) -> Result<(), ActionError> {
        self.with_current(|g| g.publish_feedback(feedback))
    }

    /// The current goal succeeded.
    pub fn set_succeeded(&self, result: &A::Result, text: &str) -> Result<(), ActionError> {
        self.with_current(|g| g.succeed(result, text))
    }

    /// The current goal failed.
    pub fn set_aborted(&self, result: &A::Result, text: &str) -> Result<(), ActionError> {
        self.with_current(|g| g.abort(result, text))
    }

    /// The current goal stopped on a preempt request.
    pub fn set_preempted(&self, result: &A::Result, text: &str) -> Result<(), ActionError> {
        self.with_current(|g| g.cancel(result, text))
    }

    fn with_current(
        &self,
        f: impl FnOnce(&ServerGoalHandle<A>) -> Result<(), ActionError>,
    ) -> Result<(), ActionError> {
        let goals = self.state.goals();
        match &goals.current {
            _ if goals.closed => Err(ActionError::Shutdown),
            Some(goal) => f(goal),
            None => Err(ActionError::NoGoal),
        }
    }
}
