//! Ending a node: shutdown on request, on SIGINT or SIGTERM, or when its last handle is
//! dropped; and the watchdog that registers everything again after a master restart.

use super::{lock, Node, NodeInner, UNREGISTER_BUDGET};
use crate::api::ApiError;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

impl Node {
    /// Completes when something asks this node to shut down, with the reason.
    pub async fn shutdown_requested(&self) -> String {
        let mut rx = self.inner.shutdown.subscribe();
        loop {
            if let Some(reason) = rx.borrow_and_update().clone() {
                return reason;
            }
            if rx.changed().await.is_err() {
                return String::new();
            }
        }
    }

    /// Runs `hook` as the node's shutdown begins, before its publications close, so that
    /// what it publishes still goes out (queued messages are sent as links close).
    pub(crate) fn before_shutdown(&self, hook: impl FnOnce() + Send + 'static) {
        lock(&self.inner.before_shutdown).push(Box::new(hook));
    }

    /// Whether the node shut down (by `shutdown`, the master, or `rosnode kill`).
    pub fn is_shutdown(&self) -> bool {
        self.inner.shutdown.borrow().is_some()
    }

    /// Whether the node is still running: false from the moment anything asked it to shut
    /// down (a signal, `rosnode kill`, [`Node::shutdown`]). roscpp's `ros::ok()` and
    /// rospy's `not is_shutdown()`, for `while node.ok() { ... }` loops.
    pub fn ok(&self) -> bool {
        !self.is_shutdown()
    }

    /// Runs until the node is asked to shut down (a signal, `rosnode kill`, the master, or
    /// [`Node::shutdown`] from another task), then finishes the shutdown (everything
    /// unregistered) and returns the reason: roscpp's `ros::spin()` for a node whose work
    /// happens in its subscribers' and services' tasks.
    pub async fn spin(&self) -> String {
        let reason = self.shutdown_requested().await;
        self.shutdown().await;
        reason
    }

    /// Leaves the graph: unregisters every publication and subscription (so nothing stays
    /// registered, as roscpp's shutdown does), unsubscribes cached parameters, closes
    /// every link (udpros subscribers get ERR; every `recv()` returns `None`) and stops
    /// serving. SIGINT, SIGTERM (see
    /// [`NodeOptions::handle_signals`](super::NodeOptions::handle_signals)) and `rosnode
    /// kill` do the same.
    pub async fn shutdown(&self) {
        self.inner.shutdown.send_if_modified(|reason| {
            let first = reason.is_none();
            reason.get_or_insert_with(|| "shutdown".into());
            first
        });
        // One shutdown at a time, and once: a program's own `shutdown()` after a signal
        // waits for the one the signal started (and does it, if that one was cancelled).
        let mut done = self.inner.shut_down.lock().await;
        if *done {
            return;
        }
        // Synchronously, before the links close: what they queue is sent as they close.
        let hooks = std::mem::take(&mut *lock(&self.inner.before_shutdown));
        for hook in hooks {
            hook();
        }
        // The watchdog re-registers what the master lost; it must not undo what follows.
        // It stops by itself on the shutdown signal unless it is registering: that is
        // let finish (within the budget), because a request already written reaches the
        // master even when its task is aborted, and would land after the unregistrations.
        let watchdog = lock(&self.inner.watchdog).take();
        if let Some(mut watchdog) = watchdog {
            if tokio::time::timeout(UNREGISTER_BUDGET, &mut watchdog)
                .await
                .is_err()
            {
                watchdog.abort();
            }
        }
        self.inner.unregister_everything().await;
        lock(&self.inner.slave).take();
        *done = true;
    }
}

/// How long a second SIGINT or SIGTERM waits for the unregistrations the first one started
/// before it ends the process (`timeout` and many kill scripts signal twice at once).
const SECOND_SIGNAL_GRACE: Duration = Duration::from_millis(500);

/// Waits for SIGINT or SIGTERM, then shuts the node down as `rosnode kill` would. A
/// second signal ends the process (exit status 128 + the first signal's number) once the
/// unregistrations are done, or [`SECOND_SIGNAL_GRACE`] after it, for a program that does
/// not end by itself; a third ends it at once.
pub(super) async fn shut_down_on_signal(node: Weak<NodeInner>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return tracing::warn!(
            "cannot watch SIGINT and SIGTERM; the node will not shut down on them"
        );
    };
    let (name, status) = tokio::select! {
        _ = interrupt.recv() => ("SIGINT", 130),
        _ = terminate.recv() => ("SIGTERM", 143),
    };
    let unregistered = Arc::new(tokio::sync::Notify::new());
    // The later signals are waited for by a task of its own: this one is aborted when the
    // node goes away, and the process must still answer them then.
    let done = unregistered.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        tokio::select! {
            _ = done.notified() => {}
            _ = tokio::time::sleep(SECOND_SIGNAL_GRACE) => {}
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        std::process::exit(status);
    });
    let Some(inner) = node.upgrade() else { return };
    tracing::info!("{name}: shutting down");
    // A signal while the node starts: the program has no node yet to end by, so the
    // process ends here once the node has unregistered, as the default action would.
    let starting = !inner.started.load(Ordering::Acquire);
    inner.signalled.store(true, Ordering::Release);
    inner.shutdown.send_replace(Some(name.to_string()));
    Node { inner }.shutdown().await;
    if starting {
        std::process::exit(status);
    }
    // notify_one keeps the permit for a second signal that comes later.
    unregistered.notify_one();
}

/// How often the watchdog asks the master whether it still knows the node.
const MASTER_LOOK_INTERVAL: Duration = Duration::from_secs(1);

/// Notices that the master forgot the node (it restarted, or it was replaced) and registers
/// everything again: publications, subscriptions, cached parameters, private parameters
/// from the command line. No ROS1 client library does this.
///
/// Each [`MASTER_LOOK_INTERVAL`] it asks the master to look the node up (`lookupNode`):
/// a restarted master knows nothing of it, however quickly it came back and whatever its
/// pid (an embedded master, a container's pid 1), so no restart goes unnoticed between two
/// looks. A node with nothing registered is not asked about: the master never knew it.
pub(super) async fn watch_master(node: Weak<NodeInner>) {
    let mut tick = tokio::time::interval(MASTER_LOOK_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let Some(mut shutdown) = node.upgrade().map(|n| n.shutdown.subscribe()) else {
        return;
    };
    loop {
        // Waiting, and asking, end at once when the node shuts down; a registration
        // under way does not (see `Node::shutdown`).
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(Option::is_some) => return,
        }
        let Some(n) = node.upgrade() else { return };
        // While a registration is on its way the master may not know the node yet: that
        // is no restart, and the next look will tell. Asked again after the answer, for a
        // registration that began while the look was on its way.
        if n.shutdown.borrow().is_some()
            || n.registrations().is_empty()
            || n.registering.any_under_way()
        {
            continue;
        }
        let answer = tokio::select! {
            answer = n.master.lookup_node(&n.id.name) => answer,
            _ = shutdown.wait_for(Option::is_some) => return,
        };
        if !master_forgot(&answer) || n.shutdown.borrow().is_some() || n.registering.any_under_way()
        {
            continue;
        }
        // Counted as a registration under way, so that a shutdown from here on waits for
        // it before it unregisters (else a late `registerPublisher` can list a node that
        // is gone); refused once the node is shutting down.
        let Some(_registering) = n.registering.begin() else {
            continue;
        };
        tracing::info!("the master no longer knows this node: registering everything again");
        n.register_again().await;
    }
}

/// Whether the master's answer to `lookupNode` for a node with registrations means it
/// forgot them. Only a failure status does. No answer says nothing (the master may be
/// down, restarting, or slow); the next look asks again. Another URI under the node's name
/// means a newer node took the name, which shuts this one down (the master calls its
/// `shutdown`): registering again would fight it.
fn master_forgot(answer: &Result<String, ApiError>) -> bool {
    matches!(answer, Err(ApiError::Status { .. }))
}

impl Drop for NodeInner {
    /// The last handle went away without `shutdown`: close links (udpros peers get ERR) and
    /// unregister in the background, if a runtime is still there to do it.
    fn drop(&mut self) {
        if let Some(w) = lock(&self.watchdog).take() {
            w.abort();
        }
        if let Some(s) = lock(&self.signals).take() {
            s.abort();
        }
        self.unregister_everything_in_background();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_failure_status_means_the_master_forgot_the_node() {
        let unknown = ApiError::Status {
            code: -1,
            message: "unknown node [/talker]".into(),
        };
        assert!(master_forgot(&Err(unknown)));
        assert!(!master_forgot(&Ok("http://127.0.0.1:4000/".into())));
        // Another node's URI under this name: a newer node took it.
        assert!(!master_forgot(&Ok("http://10.0.0.2:4000/".into())));
        assert!(!master_forgot(&Err(ApiError::Shape("no URI".into()))));
    }
}
