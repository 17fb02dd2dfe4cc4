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
//!
//! The own thread sleeps on an [`Alarm`] that a leaving consumer sets, and that a
//! consumer leaving again soon pushes out: while consumers come and go it never rings,
//! and the own thread is not woken at all. (It used to look every [`HANDOVER_AFTER`]
//! while a consumer waited: ten wakes a second for each subscriber of a Python node,
//! messages flowing or not.)
//!
//! The links themselves are not tokio tasks but futures polled inside the driver's own
//! `block_on` future ([`DrivenRuntime::spawn_inline`]): a link that delivers a message
//! is followed at once by the consumer's future, which takes it. As tasks, the consumer's
//! future came only after tokio's scheduler ran out of tasks and polled its I/O driver
//! (a system call) once more: 2.6 to 3.6 µs per message in a Python subscriber of S3.

use futures_util::future::AbortHandle;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError};
use std::task::{Context, Poll, Wake, Waker};
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
    /// What the own thread sleeps on while it does not drive: set (under `turn`'s lock)
    /// by the consumer that leaves, by the own thread for the rest of a handover time, and
    /// to ring at once when the runtime ends.
    alarm: Alarm,
    /// Asks the own thread to give the runtime back, for a consumer that came.
    wanted: tokio::sync::Notify,
    /// The futures run inside whoever drives ([`DrivenRuntime::spawn_inline`]).
    inline: Inline,
    /// How many times the own thread woke to look at the turn.
    #[cfg(test)]
    looks: std::sync::atomic::AtomicU64,
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
    /// When the alarm is set to ring; `None` when the own thread sleeps until a consumer
    /// leaves (it may still ring once, early, which only costs a look).
    alarm_at: Option<Instant>,
}

/// What the own thread does next ([`Turn::own_step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The runtime ends: the thread returns.
    End,
    /// Nobody has waited for the handover time: drive the runtime until a consumer comes.
    Drive,
    /// Sleep until the alarm rings, after setting it to ring in this much time (`None`:
    /// as it is; a consumer waits, and sets it when it leaves).
    Sleep(Option<Duration>),
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

    /// A consumer left at `now`: how long to set the alarm for, if it must be set. The
    /// last one out sets it to the handover time unless it is already set to ring no
    /// sooner than half that: an alarm that rings earlier than the handover is due only
    /// makes the own thread look and set it for the rest, and a consumer that comes and
    /// goes many times a second sets it at most twice per handover time, a system call
    /// that wakes nobody.
    fn alarm_on_leave(&mut self, now: Instant) -> Option<Duration> {
        if self.waiting > 0 || self.driving || self.ending {
            return None;
        }
        if self
            .alarm_at
            .is_some_and(|at| at >= now + HANDOVER_AFTER / 2)
        {
            return None;
        }
        self.alarm_at = Some(now + HANDOVER_AFTER);
        Some(HANDOVER_AFTER)
    }

    /// The own thread's next step at `now`, from the turn as it stands.
    fn own_step(&mut self, now: Instant) -> Step {
        if self.ending {
            return Step::End;
        }
        match self.look_again_after(now) {
            None => {
                self.driving = true;
                self.alarm_at = None;
                Step::Drive
            }
            Some(_) if self.waiting > 0 => {
                self.alarm_at = None;
                Step::Sleep(None)
            }
            Some(rest) => {
                self.alarm_at = Some(now + rest);
                Step::Sleep(Some(rest))
            }
        }
    }
}

/// A one-shot alarm that any thread sets, and one thread sleeps on. On Linux a timerfd:
/// setting it again moves the time it rings without waking the sleeper. Elsewhere (or
/// where no timerfd can be had) a condition variable, which wakes the sleeper to read
/// the new time.
enum Alarm {
    #[cfg(target_os = "linux")]
    Timer(std::os::fd::OwnedFd),
    Portable {
        rings_at: Mutex<Option<Instant>>,
        changed: Condvar,
    },
}

impl Alarm {
    fn new() -> Alarm {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::FromRawFd;
            // SAFETY: a plain system call; a descriptor it returns is ours alone.
            let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
            if fd >= 0 {
                // SAFETY: `fd` was just opened and is owned by nothing else.
                return Alarm::Timer(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) });
            }
        }
        Alarm::portable()
    }

    fn portable() -> Alarm {
        Alarm::Portable {
            rings_at: Mutex::new(None),
            changed: Condvar::new(),
        }
    }

    /// Rings in `after` (at once for zero), instead of when it was set to.
    fn set(&self, after: Duration) {
        match self {
            #[cfg(target_os = "linux")]
            Alarm::Timer(fd) => {
                use std::os::fd::AsRawFd;
                // A zero time would disarm the timer: the least one rings at once.
                let after = after.max(Duration::from_nanos(1));
                let spec = libc::itimerspec {
                    it_interval: libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    },
                    it_value: libc::timespec {
                        tv_sec: after.as_secs().try_into().unwrap_or(libc::time_t::MAX),
                        tv_nsec: after.subsec_nanos().into(),
                    },
                };
                // SAFETY: a valid timerfd and itimerspec; it fails only for bad arguments,
                // and a nanosecond count below a second is not one.
                unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
            }
            Alarm::Portable { rings_at, changed } => {
                *rings_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + after);
                changed.notify_all();
            }
        }
    }

    /// Sleeps until the alarm rings (at once if it rang since the last wait).
    fn wait(&self) {
        match self {
            #[cfg(target_os = "linux")]
            Alarm::Timer(fd) => {
                use std::os::fd::AsRawFd;
                let mut expirations = [0u8; 8];
                loop {
                    // SAFETY: reads at most 8 bytes into an 8-byte buffer.
                    let n =
                        unsafe { libc::read(fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
                    if n >= 0
                        || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                    {
                        return;
                    }
                }
            }
            Alarm::Portable { rings_at, changed } => {
                let mut at = rings_at.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    let now = Instant::now();
                    at = match *at {
                        Some(due) if due <= now => {
                            *at = None;
                            return;
                        }
                        Some(due) => {
                            changed
                                .wait_timeout(at, due - now)
                                .unwrap_or_else(|e| e.into_inner())
                                .0
                        }
                        None => changed.wait(at).unwrap_or_else(|e| e.into_inner()),
                    };
                }
            }
        }
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
                alarm_at: None,
            }),
            alarm: Alarm::new(),
            wanted: tokio::sync::Notify::new(),
            inline: Inline::new(),
            #[cfg(test)]
            looks: Default::default(),
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
                let now = Instant::now();
                turn.waiting -= 1;
                turn.left_at = now;
                if let Some(after) = turn.alarm_on_leave(now) {
                    self.0.alarm.set(after);
                }
            }
        }
        let _leave = Leave(&self.shared);
        self.shared
            .runtime()
            .block_on(Driving::new(&self.shared.inline, std::pin::pin!(future)))
    }

    /// Runs `future` inside the `block_on` future of whoever drives this runtime (a
    /// waiting consumer, or the own thread while nobody waits), instead of as a task of
    /// the runtime: each time it is woken, it is polled right before the consumer's own
    /// future, which thus sees at once what it produced. For futures that feed the
    /// consumers (a subscription's links); like a task's, `future` must not block, and a
    /// panic in it ends it alone.
    pub(crate) fn spawn_inline(
        &self,
        future: impl Future<Output = ()> + Send + 'static,
    ) -> InlineTask {
        let (future, abort) = futures_util::future::abortable(future);
        let finished = Arc::new(AtomicBool::new(false));
        /// Marks the future finished however it ends: done, aborted, panicked, or dropped
        /// with the runtime.
        struct Finish(Arc<AtomicBool>);
        impl Drop for Finish {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Release);
            }
        }
        let finish = Finish(finished.clone());
        let run = async move {
            let _finish = finish;
            if std::panic::AssertUnwindSafe(future)
                .catch_unwind()
                .await
                .is_err()
            {
                tracing::error!("a future run inside a driven runtime panicked; it ended");
            }
        };
        self.shared.inline.arrive(Box::pin(run));
        InlineTask { abort, finished }
    }
}

/// A future started by [`DrivenRuntime::spawn_inline`]: aborts it, and tells whether it
/// ended.
#[derive(Debug)]
pub(crate) struct InlineTask {
    abort: AbortHandle,
    finished: Arc<AtomicBool>,
}

impl InlineTask {
    /// Ends the future: it is dropped the next time the runtime is driven.
    pub(crate) fn abort(&self) {
        self.abort.abort();
    }

    /// The future returned, panicked, or was dropped after an abort.
    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }
}

/// A future polled inside the driver's own.
type InlineFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The futures of [`DrivenRuntime::spawn_inline`], and who polls them.
struct Inline {
    /// Polled by one driver at a time, which holds the lock while it polls them.
    running: Mutex<FuturesUnordered<InlineFuture>>,
    /// Spawned since they were last polled (a spawn may come while a driver polls).
    arriving: Mutex<Vec<InlineFuture>>,
    drivers: Arc<Drivers>,
    /// Wakes [`drivers`](Self::drivers): what the running futures are polled with.
    waker: Waker,
}

/// Everyone inside a `block_on` of the runtime now (the own thread among them while it
/// drives): a running future that is woken wakes them all, so that it is polled whoever
/// of them leaves first. Usually there is one.
#[derive(Default)]
struct Drivers {
    wakers: Mutex<Vec<(u64, Waker)>>,
    next_id: AtomicU64,
    /// [`IDLE`], or [`POLLING`] while a driver polls the futures, [`POLLING_AGAIN`] once
    /// one of them was woken meanwhile: that driver polls them again itself, instead of
    /// waking the runtime, which would first poll its I/O driver (a system call) for
    /// nothing. (A set of futures wakes itself each time it polled all of them, and a
    /// link each time it delivered.)
    polling: AtomicU8,
}

const IDLE: u8 = 0;
const POLLING: u8 = 1;
const POLLING_AGAIN: u8 = 2;

impl Wake for Drivers {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        match self.polling.compare_exchange(
            POLLING,
            POLLING_AGAIN,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) | Err(POLLING_AGAIN) => return,
            Err(_) => {}
        }
        for (_, waker) in self.lock().iter() {
            waker.wake_by_ref();
        }
    }
}

impl Drivers {
    fn lock(&self) -> MutexGuard<'_, Vec<(u64, Waker)>> {
        self.wakers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Driver `id` is polled with `waker`.
    fn enlist(&self, id: u64, waker: &Waker) {
        let mut wakers = self.lock();
        match wakers.iter_mut().find(|(each, _)| *each == id) {
            Some((_, known)) => {
                if !known.will_wake(waker) {
                    known.clone_from(waker);
                }
            }
            None => wakers.push((id, waker.clone())),
        }
    }

    fn leave(&self, id: u64) {
        self.lock().retain(|(each, _)| *each != id);
    }
}

impl Inline {
    fn new() -> Inline {
        let drivers = Arc::new(Drivers::default());
        Inline {
            running: Mutex::default(),
            arriving: Mutex::default(),
            waker: Waker::from(drivers.clone()),
            drivers,
        }
    }

    fn arrive(&self, future: InlineFuture) {
        self.arriving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(future);
        self.waker.wake_by_ref();
    }

    /// Polls the futures that were woken (and those that arrived), unless another
    /// driver is polling them now: it was woken too, and sees to them. True when one of
    /// them was woken meanwhile: the caller polls them again.
    fn run_ready(&self) -> bool {
        let mut running = match self.running.try_lock() {
            Ok(running) => running,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return false,
        };
        running.extend(
            self.arriving
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drain(..),
        );
        self.drivers.polling.store(POLLING, Ordering::Release);
        let mut cx = Context::from_waker(&self.waker);
        // `Ready(Some)` is a future that ended; `Pending`, none left to poll now (or a
        // round polled every one: the set woke its waker to come back).
        while let Poll::Ready(Some(())) = running.poll_next_unpin(&mut cx) {}
        self.drivers.polling.swap(IDLE, Ordering::AcqRel) == POLLING_AGAIN
    }

    /// Drops every future, before the runtime that their sockets and timers belong to.
    fn clear(&mut self) {
        self.running
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.arriving
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// How many times a `block_on` future polls the inline futures and the caller's before
/// it lets the runtime poll its I/O driver, when they keep waking each other.
const ROUNDS_PER_POLL: usize = 16;

/// A `block_on` future: the inline futures that were woken, then the caller's.
struct Driving<'a, F> {
    inline: &'a Inline,
    id: u64,
    future: Pin<&'a mut F>,
}

impl<'a, F: Future> Driving<'a, F> {
    fn new(inline: &'a Inline, future: Pin<&'a mut F>) -> Self {
        let id = inline.drivers.next_id.fetch_add(1, Ordering::Relaxed);
        Driving { inline, id, future }
    }
}

impl<F: Future> Future for Driving<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.inline.drivers.enlist(self.id, cx.waker());
        for _ in 0..ROUNDS_PER_POLL {
            let again = self.inline.run_ready();
            // The caller's future right after the futures that feed it, and before they
            // run again: a link that delivered a message is polled again only after the
            // consumer took it (the read it makes then would find nothing new).
            if let Poll::Ready(out) = self.future.as_mut().poll(cx) {
                if again {
                    // Their turn comes with the next `block_on` (or the own thread).
                    self.inline.waker.wake_by_ref();
                }
                return Poll::Ready(out);
            }
            if !again {
                return Poll::Pending;
            }
        }
        // Woken round after round: the runtime's timers and I/O have their turn first.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<F> Drop for Driving<'_, F> {
    fn drop(&mut self) {
        self.inline.drivers.leave(self.id);
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
        self.shared.alarm.set(Duration::ZERO);
        self.shared.wanted.notify_one();
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.inline.clear();
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

    /// The own thread: sleeps while a consumer drives or left less than
    /// [`HANDOVER_AFTER`] ago, then drives until one comes back.
    fn drive_while_nobody_waits(&self) {
        loop {
            #[cfg(test)]
            self.looks
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let step = {
                let mut turn = self.lock_turn();
                let step = turn.own_step(Instant::now());
                if let Step::Sleep(Some(after)) = step {
                    self.alarm.set(after);
                }
                step
            };
            match step {
                Step::End => return,
                Step::Sleep(_) => self.alarm.wait(),
                Step::Drive => {
                    // Only the runtime's own `block_on` drives a current-thread runtime's
                    // I/O and timers (a handle's does not).
                    let wanted = std::pin::pin!(self.wanted.notified());
                    self.runtime().block_on(Driving::new(&self.inline, wanted));
                    self.lock_turn().driving = false;
                }
            }
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
            alarm_at: None,
        }
    }

    #[test]
    fn the_last_consumer_out_sets_the_alarm_and_pushes_it_out_only_when_it_nears() {
        let t0 = Instant::now();
        let mut turn = turn(0, t0);
        assert_eq!(turn.alarm_on_leave(t0), Some(HANDOVER_AFTER));
        // Leaving again and again (a message every 10 ms): no system call until the
        // alarm would ring within half a handover time, then one that pushes it out.
        let step = Duration::from_millis(10);
        let mut sets = 1;
        for n in 1..=100u32 {
            let now = t0 + step * n;
            turn.left_at = now;
            if turn.alarm_on_leave(now).is_some() {
                sets += 1;
            }
            let rings = turn.alarm_at.expect("set");
            assert!(rings > now, "never rings while consumers come and go");
            assert!(
                rings <= now + HANDOVER_AFTER,
                "never later than the handover"
            );
        }
        // A second is ten handover times: at most two sets in each.
        assert!(sets <= 21, "{sets} sets for 101 leaves");
        // Another consumer still inside, or the own thread driving: nothing to set.
        let mut busy = Turn {
            alarm_at: None,
            ..self::turn(1, t0)
        };
        assert_eq!(busy.alarm_on_leave(t0), None);
        busy.waiting = 0;
        busy.driving = true;
        assert_eq!(busy.alarm_on_leave(t0), None);
    }

    #[test]
    fn the_own_thread_sleeps_until_a_leave_while_a_consumer_waits_and_drives_after_the_handover() {
        let t0 = Instant::now();
        let mut waited = turn(1, t0);
        waited.alarm_at = Some(t0 + HANDOVER_AFTER);
        // A consumer inside: no alarm of its own, the consumer's leave sets one.
        assert_eq!(waited.own_step(t0 + HANDOVER_AFTER * 5), Step::Sleep(None));
        assert_eq!(waited.alarm_at, None);
        waited.waiting = 0;
        waited.left_at = t0;
        // Rang early: set for the rest of the handover time.
        let early = t0 + HANDOVER_AFTER / 4;
        assert_eq!(
            waited.own_step(early),
            Step::Sleep(Some(HANDOVER_AFTER * 3 / 4))
        );
        assert_eq!(waited.alarm_at, Some(t0 + HANDOVER_AFTER));
        assert_eq!(waited.own_step(t0 + HANDOVER_AFTER), Step::Drive);
        assert!(waited.driving);
        waited.ending = true;
        assert_eq!(waited.own_step(t0), Step::End);
    }

    #[test]
    fn the_own_thread_sleeps_while_a_consumer_comes_and_goes() {
        let runtime = DrivenRuntime::new("driven-test").unwrap();
        let looks = || {
            runtime
                .shared
                .looks
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        runtime.block_on(async {});
        let (before, start) = (looks(), Instant::now());
        let mut rounds = 0;
        while start.elapsed() < Duration::from_secs(2) {
            runtime.block_on(async { tokio::time::sleep(Duration::from_millis(2)).await });
            rounds += 1;
        }
        let looked = looks() - before;
        // Looking every handover time, as it did, is 20 looks in 2 s.
        assert!(looked < 10, "{looked} looks in {rounds} rounds");
    }

    #[test]
    fn an_alarm_rings_when_last_set_not_sooner_and_at_once_for_zero() {
        #[cfg(target_os = "linux")]
        let alarms = [Alarm::new(), Alarm::portable()];
        #[cfg(not(target_os = "linux"))]
        let alarms = [Alarm::portable()];
        for alarm in alarms {
            let start = Instant::now();
            alarm.set(Duration::from_millis(20));
            alarm.set(Duration::from_millis(200));
            alarm.wait();
            assert!(
                start.elapsed() >= Duration::from_millis(200),
                "moved, not rung"
            );
            let start = Instant::now();
            alarm.set(Duration::ZERO);
            alarm.wait();
            assert!(start.elapsed() < Duration::from_secs(10), "rang at once");
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

    /// Tells its channel when it is dropped.
    struct Dropped(std::sync::mpsc::Sender<()>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }

    #[test]
    fn its_tasks_and_inline_futures_end_with_the_last_handle_even_inside_another_runtime() {
        let (tx, rx) = std::sync::mpsc::channel();
        let runtime = DrivenRuntime::new("driven-test").unwrap();
        let guard = Dropped(tx.clone());
        runtime.handle().spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        let guard = Dropped(tx);
        runtime.spawn_inline(async move {
            let _guard = guard;
            tokio::time::sleep(Duration::from_secs(3600)).await;
        });
        runtime.block_on(tokio::task::yield_now());
        // Dropped in an async context, where a blocking shutdown would panic.
        let other = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        other.block_on(async move { drop(runtime) });
        for what in ["one", "the other"] {
            rx.recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("{what} was not dropped with the runtime"));
        }
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

    #[test]
    fn a_consumer_takes_what_an_inline_future_delivered_before_the_runtime_runs_anything_else() {
        let runtime = DrivenRuntime::new("driven-test").unwrap();
        let task_ran = Arc::new(AtomicBool::new(false));
        let (to_task, task_woken) = tokio::sync::oneshot::channel::<()>();
        runtime.handle().spawn({
            let task_ran = task_ran.clone();
            async move {
                let _ = task_woken.await;
                task_ran.store(true, Ordering::SeqCst);
            }
        });
        let (deliver, delivered) = tokio::sync::oneshot::channel();
        let link = runtime.spawn_inline(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            // Wakes a task first, then the consumer: as a task itself, this future
            // would let the runtime run that task before the consumer came.
            let _ = to_task.send(());
            let _ = deliver.send(std::thread::current().id());
        });
        let (ran_on, task_ran_first) = runtime.block_on(async {
            let ran_on = delivered.await.unwrap();
            (ran_on, task_ran.load(Ordering::SeqCst))
        });
        assert_eq!(
            ran_on,
            std::thread::current().id(),
            "the waiting thread ran it"
        );
        assert!(!task_ran_first, "the consumer came first");
        assert!(link.is_finished());
        let ran = runtime.block_on(async {
            let wait = async {
                while !task_ran.load(Ordering::SeqCst) {
                    tokio::task::yield_now().await;
                }
            };
            tokio::time::timeout(Duration::from_secs(20), wait).await
        });
        assert!(ran.is_ok(), "the task ran after the consumer");
    }

    #[test]
    fn inline_futures_run_on_the_own_thread_while_nobody_waits() {
        let runtime = DrivenRuntime::new("driven-test").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let task = runtime.spawn_inline(async move {
            let _ = tx.send(std::thread::current().name().map(str::to_string));
        });
        let ran_on = rx.recv_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(ran_on.as_deref(), Some("driven-test"));
        let start = Instant::now();
        while !task.is_finished() && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(task.is_finished());
    }

    #[test]
    fn an_aborted_or_panicking_inline_future_ends_alone() {
        let runtime = DrivenRuntime::new("driven-test").unwrap();
        let (dropped, was_dropped) = std::sync::mpsc::channel();
        let guard = Dropped(dropped);
        let forever = runtime.spawn_inline(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        let panics = runtime.spawn_inline(async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            panic!("a link's bug");
        });
        runtime.block_on(async { tokio::time::sleep(Duration::from_millis(20)).await });
        assert!(panics.is_finished(), "the panic ended its future");
        assert!(!forever.is_finished() && was_dropped.try_recv().is_err());
        forever.abort();
        let (tx, rx) = tokio::sync::oneshot::channel();
        runtime.spawn_inline(async move {
            let _ = tx.send(7);
        });
        assert_eq!(runtime.block_on(rx), Ok(7), "the runtime goes on");
        assert!(forever.is_finished() && was_dropped.try_recv().is_ok());
    }

    #[test]
    fn inline_futures_keep_running_while_consumers_on_several_threads_come_and_go() {
        let runtime = Arc::new(DrivenRuntime::new("driven-test").unwrap());
        let (tx, rx) = tokio::sync::watch::channel(0u32);
        // Each waits for its own value; they leave one by one, and whoever is left
        // must go on polling the future that sends the rest.
        let waiters: Vec<_> = (1..=4)
            .map(|wanted| {
                let (runtime, mut rx) = (runtime.clone(), rx.clone());
                std::thread::spawn(move || {
                    runtime.block_on(async move { *rx.wait_for(|v| *v >= wanted).await.unwrap() })
                })
            })
            .collect();
        runtime.spawn_inline(async move {
            for value in 1..=4 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let _ = tx.send(value);
            }
        });
        for (wanted, waiter) in (1..=4).zip(waiters) {
            assert!(waiter.join().unwrap() >= wanted);
        }
        drop(rx);
    }

    #[test]
    fn an_inline_future_that_always_wakes_itself_does_not_stop_timers() {
        let runtime = Arc::new(DrivenRuntime::new("driven-test").unwrap());
        let spins = Arc::new(AtomicU64::new(0));
        runtime.spawn_inline({
            let spins = spins.clone();
            std::future::poll_fn(move |cx| {
                spins.fetch_add(1, Ordering::Relaxed);
                cx.waker().wake_by_ref();
                Poll::<()>::Pending
            })
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let consumer = runtime.clone();
        std::thread::spawn(move || {
            consumer.block_on(async { tokio::time::sleep(Duration::from_millis(5)).await });
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the timer fired beside the spinning future");
        assert!(spins.load(Ordering::Relaxed) > 0);
    }
}
