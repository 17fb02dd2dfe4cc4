//! actionlib: long tasks with feedback, results and cancellation, wire-compatible with
//! roscpp's and rospy's `actionlib`.
//!
//! An action lives under a namespace `<ns>` as five topics: clients publish goals on
//! `<ns>/goal` and cancel requests on `<ns>/cancel`; the server publishes the latched
//! status of every goal it lists on `<ns>/status` (5 Hz, `actionlib_status_frequency`),
//! feedback on `<ns>/feedback` and each goal's result on `<ns>/result`. Its types come
//! from a `.action` file, which the [code generator](crate::codegen) makes into seven
//! messages (`<Name>Goal`, `<Name>ActionGoal`, ... and `<Name>Action`) and an
//! [`Action`] implementation on `<Name>Action`.
//!
//! - [`ActionServer`] hands out a [`ServerGoalHandle`] per goal: accept, reject, send
//!   feedback, succeed, abort, or end it cancelled when its client asks.
//! - [`SimpleActionServer`] works one goal at a time, as actionlib's simple server: a new
//!   goal preempts the current one.
//! - [`ActionClient`] sends goals and follows each through roscpp's communication state
//!   machine ([`CommState`]); [`SimpleActionClient`] follows one goal with the simple
//!   client's calls (`wait_for_server`, `send_goal`, `wait_for_result`, `get_state`...).
//!
//! Action topics run over TCPROS: results and status must not be lost.
//!
//! # Bounds
//!
//! A server lists at most [`ActionServerOptions::max_goals`] goals (finished ones leave
//! after `status_list_timeout`, or first when the table is full; a goal that finds it full
//! of unfinished goals is rejected), sends at most one status array per 10 ms however
//! many goals and cancels arrive, and queues at most
//! [`ActionServerOptions::goal_queue`] goals that its code has not taken yet (more are
//! rejected). A client keeps state only for the goals whose handles it holds, and at most
//! [`FEEDBACK_QUEUE`] unread feedback messages ([`FEEDBACK_QUEUE_BYTES`]) per goal (the
//! oldest go), and reads status arrays entry by entry, keeping only its own goals'.

mod client;
mod server;
mod simple_client;
mod simple_server;
mod typed_client;

pub use client::{
    ActionTypes, GoalEvent, RawActionClient, RawGoalHandle, RawGoalView, SERVER_GONE_AFTER,
};
pub use server::{ActionServer, ActionServerOptions, ServerGoalHandle};
pub use simple_client::SimpleActionClient;
pub use simple_server::SimpleActionServer;
pub use typed_client::{ActionClient, ClientGoalHandle, GoalView};
pub use udpros_core::action::client::{CommState, SimpleState};
pub use udpros_core::action::status;

use crate::msg::{Message, Time};
use crate::msgs::actionlib_msgs::{GoalID, GoalStatus};
use udpros_core::action as core;

/// An action type: implemented by the code generator on each `<Name>Action` message,
/// naming the six messages a server and a client of it exchange.
pub trait Action: Message {
    /// What a client asks for.
    type Goal: Message;
    /// What the server answers when the goal ends.
    type Result: Message;
    /// What the server tells while it works.
    type Feedback: Message;
    /// `<Name>ActionGoal`: header, goal id, goal (on `<ns>/goal`).
    type ActionGoal: Message;
    /// `<Name>ActionResult`: header, status, result (on `<ns>/result`).
    type ActionResult: Message;
    /// `<Name>ActionFeedback`: header, status, feedback (on `<ns>/feedback`).
    type ActionFeedback: Message;
}

/// How many feedback messages a client goal keeps unread before the oldest go.
pub const FEEDBACK_QUEUE: usize = 64;

/// How many bytes of unread feedback a client goal keeps before the oldest go (the newest
/// is kept, however large).
pub const FEEDBACK_QUEUE_BYTES: usize = 16 << 20;

/// What can go wrong with an action server or client.
#[derive(Debug)]
pub enum ActionError {
    /// Advertising or subscribing the action's topics failed.
    Node(crate::node::NodeError),
    /// A message could not be encoded.
    Encode(crate::wire::Error),
    /// The goal's state does not allow what was asked.
    Transition(core::server::BadTransition),
    /// The server or client was shut down.
    Shutdown,
    /// A simple server or client was asked about a goal it does not have.
    NoGoal,
}

impl std::fmt::Display for ActionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActionError::Node(e) => write!(f, "{e}"),
            ActionError::Encode(e) => write!(f, "encoding an action message: {e}"),
            ActionError::Transition(e) => write!(f, "{e}"),
            ActionError::Shutdown => f.write_str("the action server or client is shut down"),
            ActionError::NoGoal => f.write_str("there is no current goal"),
        }
    }
}

impl std::error::Error for ActionError {}

impl From<crate::node::NodeError> for ActionError {
    fn from(e: crate::node::NodeError) -> Self {
        ActionError::Node(e)
    }
}

impl From<crate::wire::Error> for ActionError {
    fn from(e: crate::wire::Error) -> Self {
        ActionError::Encode(e)
    }
}

impl From<core::server::BadTransition> for ActionError {
    fn from(e: core::server::BadTransition) -> Self {
        ActionError::Transition(e)
    }
}

pub(crate) fn stamp(time: Time) -> core::Stamp {
    core::Stamp {
        sec: time.sec,
        nsec: time.nsec,
    }
}

pub(crate) fn time(stamp: core::Stamp) -> Time {
    Time::new(stamp.sec, stamp.nsec)
}

pub(crate) fn goal_id_msg(id: &core::GoalId) -> GoalID {
    GoalID {
        stamp: time(id.stamp),
        id: id.id.clone(),
    }
}

pub(crate) fn status_msg(status: &core::GoalStatus) -> GoalStatus {
    GoalStatus {
        goal_id: goal_id_msg(&status.goal_id),
        status: status.status,
        text: status.text.clone(),
    }
}
