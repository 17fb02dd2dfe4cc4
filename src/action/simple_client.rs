//! The simple action client: one goal at a time, as actionlib's `SimpleActionClient`.

use super::client::GoalEvent;
use super::typed_client::{ActionClient, ClientGoalHandle, GoalView};
use super::{Action, ActionError, CommState, SimpleState};
use crate::msg::Time;
use crate::node::Node;
use std::time::Duration;

/// Follows one goal at a time: sending a new goal stops following the previous one (which
/// goes on at the server unless cancelled).
pub struct SimpleActionClient<A: Action> {
    client: ActionClient<A>,
    goal: Option<Followed<A>>,
}

enum Followed<A: Action> {
    /// The caller reads the goal's events ([`SimpleActionClient::next_feedback`]).
    Here(ClientGoalHandle<A>),
    /// A task runs the caller's callbacks with them.
    Callbacks(GoalView<A>, tokio::task::JoinHandle<()>),
}

impl<A: Action> Drop for Followed<A> {
    fn drop(&mut self) {
        if let Followed::Callbacks(_, task) = self {
            task.abort();
        }
    }
}

impl<A: Action> SimpleActionClient<A> {
    /// A client of action `namespace` on `node`.
    pub async fn new(node: &Node, namespace: &str) -> Result<SimpleActionClient<A>, ActionError> {
        Ok(SimpleActionClient {
            client: ActionClient::new(node, namespace).await?,
            goal: None,
        })
    }

    /// The underlying client, for goals followed side by side.
    pub fn client(&self) -> &ActionClient<A> {
        &self.client
    }

    /// Waits for the server, at most `timeout` (`None`: for ever); true when connected.
    pub async fn wait_for_server(&self, timeout: Option<Duration>) -> bool {
        self.client.wait_for_server(timeout).await
    }

    /// True when a server is linked both ways.
    pub fn is_server_connected(&self) -> bool {
        self.client.is_server_connected()
    }

    /// Sends a goal and follows it; read its feedback with
    /// [`next_feedback`](Self::next_feedback).
    pub fn send_goal(&mut self, goal: &A::Goal) -> Result<(), ActionError> {
        self.goal = None;
        self.goal = Some(Followed::Here(self.client.send_goal(goal)?));
        Ok(())
    }

    /// Sends a goal and calls `active` when it becomes active, `feedback` with each
    /// feedback and `done` with how it ended and its result, from a task of their own (as
    /// roscpp's callbacks run on its spinner).
    pub fn send_goal_with(
        &mut self,
        goal: &A::Goal,
        done: impl FnOnce(SimpleState, Option<A::Result>) + Send + 'static,
        active: impl FnOnce() + Send + 'static,
        mut feedback: impl FnMut(A::Feedback) + Send + 'static,
    ) -> Result<(), ActionError> {
        self.goal = None;
        let mut handle = self.client.send_goal(goal)?;
        let view = handle.view();
        let task = tokio::spawn(async move {
            let mut active = Some(active);
            while let Some(event) = handle.next_event().await {
                match event {
                    GoalEvent::Feedback(f) => feedback(f),
                    GoalEvent::Transition(CommState::Done) => break,
                    GoalEvent::Transition(_) => {
                        if handle.simple_state() != SimpleState::Pending {
                            if let Some(active) = active.take() {
                                active();
                            }
                        }
                    }
                }
            }
            if handle.is_done() {
                done(handle.simple_state(), handle.result());
            }
        });
        self.goal = Some(Followed::Callbacks(view, task));
        Ok(())
    }

    /// The next feedback of the goal sent with [`send_goal`](Self::send_goal); `None` once
    /// it is done (or there is none).
    pub async fn next_feedback(&mut self) -> Option<A::Feedback> {
        let Some(Followed::Here(handle)) = &mut self.goal else {
            return None;
        };
        loop {
            match handle.next_event().await? {
                GoalEvent::Feedback(f) => return Some(f),
                GoalEvent::Transition(_) => continue,
            }
        }
    }

    /// Waits until the goal is done, at most `timeout` (`None`: for ever); true when done.
    /// Feedback not yet read is passed over.
    pub async fn wait_for_result(&mut self, timeout: Option<Duration>) -> bool {
        match &mut self.goal {
            None => false,
            Some(Followed::Here(handle)) => handle.wait_for_done(timeout).await,
            Some(Followed::Callbacks(view, _)) => view.wait_until_done(timeout).await,
        }
    }

    /// Sends a goal and waits for it at most `execute_timeout`; past that, cancels it and
    /// waits at most `preempt_timeout` more. Returns its state then.
    pub async fn send_goal_and_wait(
        &mut self,
        goal: &A::Goal,
        execute_timeout: Option<Duration>,
        preempt_timeout: Option<Duration>,
    ) -> Result<SimpleState, ActionError> {
        self.send_goal(goal)?;
        if !self.wait_for_result(execute_timeout).await {
            self.cancel_goal();
            self.wait_for_result(preempt_timeout).await;
        }
        Ok(self.get_state())
    }

    fn view(&self) -> Option<&GoalView<A>> {
        match self.goal.as_ref()? {
            Followed::Here(handle) => Some(handle),
            Followed::Callbacks(view, _) => Some(view),
        }
    }

    /// The goal's state (LOST when no goal is followed).
    pub fn get_state(&self) -> SimpleState {
        self.view().map_or(SimpleState::Lost, |v| v.simple_state())
    }

    /// The goal's status text from the server.
    pub fn get_state_text(&self) -> String {
        self.view()
            .and_then(|v| v.goal_status())
            .map(|s| s.text)
            .unwrap_or_default()
    }

    /// The goal's result, once it came.
    pub fn get_result(&self) -> Option<A::Result> {
        self.view()?.result()
    }

    /// Asks the server to cancel the goal.
    pub fn cancel_goal(&self) {
        if let Some(view) = self.view() {
            view.cancel();
        }
    }

    /// Asks the server to cancel every goal.
    pub fn cancel_all_goals(&self) {
        self.client.cancel_all_goals();
    }

    /// Asks the server to cancel every goal stamped at or before `time`.
    pub fn cancel_goals_at_and_before_time(&self, time: Time) {
        self.client.cancel_goals_at_and_before_time(time);
    }

    /// Stops following the goal (it goes on at the server).
    pub fn stop_tracking_goal(&mut self) {
        self.goal = None;
    }
}
