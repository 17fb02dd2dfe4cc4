//! The typed action client: [`ActionClient`] encodes goals and decodes results and
//! feedback of action `A` over a [`RawActionClient`].

use super::client::{ActionTypes, GoalEvent, RawActionClient, RawGoalHandle, RawGoalView};
use super::{Action, ActionError};
use crate::node::Node;
use std::marker::PhantomData;
use std::time::Duration;

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
        self.view.raw.fmt(f)
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
