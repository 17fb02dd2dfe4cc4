//! A runtime of its own for a subscription's links, run by the thread that waits for the
//! subscription's messages.
//!
//! On a runtime with threads of its own, a message that reaches a consumer outside that
//! runtime (a binding's thread, a plain thread calling `block_on`) wakes two threads: the
//! runtime's, to read the datagrams, and the consumer's, to take the message. Each wake
//! costs tens of microseconds of CPU on a loaded or virtual machine, and caches gone cold.
//! A [`DrivenRuntime`] runs the links on the consumer's thread instead, while it waits in
//! [`DrivenRuntime::block_on`]: the kernel wakes that thread for the datagrams, it
//! reassembles them and returns the message, with no other thread involved.
//!
//! While nobody waits (a long callback, a consumer that went away), the runtime's own
//! thread takes over after [`HANDOVER_AFTER`], so that links still read, reconnect and
//! answer; a consumer that comes back gets the runtime back from it.

use std::future::Future;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long the runtime waits for a consumer that left before its own thread drives it:
/// longer than a consumer's usual pause between two waits (a message's callback), short
/// enough that links do not fall far behind while nobody waits.
pub const HANDOVER_AFTER: Duration = Duration::from_millis(100);

/// A current-thread tokio runtime that whoever waits in [`block_on`](Self::block_on)
/// drives, and a thread of its own drives while nobody has for [`HANDOVER_AFTER`].
///
/// Give it to a subscription in
/// [`SubscribeOptions::links_on`](crate::node::SubscribeOptions::links_on) and wait for
/// the subscription's messages in its `block_on`: the links' reads, reassembly and repair
/// then happen on the waiting thread. The Python package does this for each subscriber.
/// Negotiation with publishers (their XML-RPC) still runs on the node's runtime, whose
/// connection pool must not live on a runtime that may stand still.
///
/// The runtime ends when the last handle drops: its tasks are dropped without being
/// polled again.
pub struct DrivenRuntime {
    shared: Arc<Shared>,
}

struct Shared {
    /// Always there until the end, when it is shut down without blocking (the last
    /// handle may drop inside another runtime's task, where a blocking drop panics).
    runtime: Option<tokio::runtime::Runtime>,
    turn: Mutex<Turn>,
    /// Wakes the own thread when the runtime ends (consumers that leave do not: it looks
    /// again on its own, see [`Turn::look_again_after`]).
    changed: Condvar,
    /// Asks the own thread to give the runtime back, for a consumer that came.
    wanted: tokio::sync::Notify,
}

/// Who drives the runtime.
struct Turn {
    /// Consumers in `block_on` now.
    waiting: usize,
    /// When the last consumer left `block_on`.
    left_at: Instant,
    /// The own thread drives now.
    driving: bool,
    /// The last handle dropped.
    ending: bool,
}

impl Turn {
    /// When the own thread should look again at `now`; `None`: it drives now (nobody
    /// waits, and the last consumer left [`HANDOVER_AFTER`] ago or more). A consumer that
    /// is waiting leaves unannounced (a wake of the own thread per message would cost what
    /// this runtime saves), so it is looked at again after a while.
    fn look_again_after(&self, now: Instant) -> Option<Duration> {
        if self.waiting > 0 {
            return Some(HANDOVER_AFTER);
        }
        let idle = now.saturating_duration_since(self.left_at);
        (idle < HANDOVER_AFTER).then(|| HANDOVER_AFTER - idle)
    }
}

impl DrivenRuntime {
    /// A runtime whose own thread is named `name` (timers and I/O enabled).
    pub fn new(name: &str) -> std::io::Result<DrivenRuntime> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let shared = Arc::new(Shared {
            runtime: Some(runtime),
            turn: Mutex::new(Turn {
                waiting: 0,
                left_at: Instant::now(),
                driving: false,
                ending: false,
            }),
            changed: Condvar::new(),
            wanted: tokio::sync::Notify::new(),
        });
        let own = shared.clone();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || own.drive_while_nobody_waits())?;
        Ok(DrivenRuntime { shared })
    }

    /// Where to spawn the tasks this runtime runs.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.shared.runtime().handle()
    }

    /// Runs `future` to its end on this thread, driving the runtime meanwhile. While
    /// another consumer drives it, this thread waits for its own future alone, and takes
    /// the runtime over when that one leaves. Like tokio's `block_on`, it panics when
    /// called within a runtime's task.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        {
            let mut turn = self.shared.lock_turn();
            turn.waiting += 1;
            if turn.driving {
                self.shared.wanted.notify_one();
            }
        }
        /// Leaves the turn, also when the future panics.
        struct Leave<'a>(&'a Shared);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                let mut turn = self.0.lock_turn();
                turn.waiting -= 1;
                turn.left_at = Instant::now();
            }
        }
        let _leave = Leave(&self.shared);
        self.shared.runtime().block_on(future)
    }
}

impl std::fmt::Debug for DrivenRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let turn = self.shared.lock_turn();
        f.debug_struct("DrivenRuntime")
            .field("waiting", &turn.waiting)
            .field("own_thread_drives", &turn.driving)
            .finish()
    }
}

impl Drop for DrivenRuntime {
    fn drop(&mut self) {
        self.shared.lock_turn().ending = true;
        self.shared.changed.notify_one();
        self.shared.wanted.notify_one();
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Shared {
    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime
            .as_ref()
            .expect("taken only when the runtime ends")
    }

    fn lock_turn(&self) -> MutexGuard<'_, Turn> {
        self.turn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The own thread: waits while a consumer drives or left less than
    /// [`HANDOVER_AFTER`] ago, then drives until one comes back.
    fn drive_while_nobody_waits(&self) {
        loop {
            {
                let mut turn = self.lock_turn();
                loop {
                    if turn.ending {
                        return;
                    }
                    let Some(wait) = turn.look_again_after(Instant::now()) else {
                        break;
                    };
                    turn = self
                        .changed
                        .wait_timeout(turn, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                turn.driving = true;
            }
            // Only the runtime's own `block_on` drives a current-thread runtime's I/O
            // and timers (a handle's does not).
            self.runtime().block_on(self.wanted.notified());
            self.lock_turn().driving = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(waiting: usize, left_at: Instant) -> Turn {
        Turn {
            waiting,
            left_at,
            driving: false,
            ending: false,
        }
    }

    #[test]
    fn the_own_thread_drives_only_once_nobody_has_waited_for_the_handover_time() {
        let left = Instant::now();
        let nobody = turn(0, left);
        assert_eq!(nobody.look_again_after(left), Some(HANDOVER_AFTER));
        let soon = left + HANDOVER_AFTER / 4;
        assert_eq!(nobody.look_again_after(soon), Some(HANDOVER_AFTER * 3 / 4));
        assert_eq!(nobody.look_again_after(left + HANDOVER_AFTER), None);
        assert_eq!(nobody.look_again_after(left + HANDOVER_AFTER * 10), None);
        // A consumer inside `block_on` keeps it however long ago another one left.
        let busy = turn(1, left);
        assert_eq!(
            busy.look_again_after(left + HANDOVER_AFTER * 10),
            Some(HANDOVER_AFTER)
        );
    }

    #[test]
    fn tasks_run_on_the_thread_that_waits_and_on_the_own_thread_when_none_does() {
        let runtime = DrivenRuntime::new("driven-test").unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        runtime.handle().spawn(async move {
            let _ = tx.send(std::thread::current().id());
        });
        let ran_on = runtime.block_on(rx).unwrap();
        assert_eq!(
            ran_on,
            std::thread::current().id(),
            "the waiting thread ran it"
        );

        // Nobody waits: the own thread picks the task up after the handover time.
        let (tx, rx) = std::sync::mpsc::channel();
        runtime.handle().spawn(async move {
            let _ = tx.send(std::thread::current().name().map(str::to_string));
        });
        let ran_on = rx.recv_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(ran_on.as_deref(), Some("driven-test"));

        // And gives the runtime back to a consumer that comes: its timers run.
        let slept = runtime.block_on(async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            std::thread::current().id()
        });
        assert_eq!(slept, std::thread::current().id());
    }

    #[test]
    fn its_tasks_end_with_the_last_handle_even_inside_another_runtime() {
        struct Dropped(std::sync::mpsc::Sender<()>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                let _ = self.0.send(());
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let runtime = DrivenRuntime::new("driven-test").unwrap();
        let guard = Dropped(tx);
        runtime.handle().spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        // Dropped in an async context, where a blocking shutdown would panic.
        let other = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        other.block_on(async move { drop(runtime) });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the pending task was dropped with the runtime");
    }

    #[test]
    fn consumers_on_several_threads_each_get_their_own_future() {
        let runtime = Arc::new(DrivenRuntime::new("driven-test").unwrap());
        let (tx, rx) = tokio::sync::watch::channel(0u32);
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let (runtime, mut rx) = (runtime.clone(), rx.clone());
                std::thread::spawn(move || {
                    runtime.block_on(async move { *rx.wait_for(|v| *v == 7).await.unwrap() })
                })
            })
            .collect();
        runtime.handle().spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = tx.send(7);
        });
        for waiter in waiters {
            assert_eq!(waiter.join().unwrap(), 7);
        }
        drop(rx);
    }
}
