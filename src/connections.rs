//! Accepting TCP connections without letting the peers decide what the server spends.
//!
//! Two things went wrong without this: when descriptors ran out, `accept` failed with
//! EMFILE at once, every time, and the accept loop spun at 100 % CPU; and nothing bounded
//! how many connections a server held or for how long an idle one stayed open. Each server
//! now accepts through [`accept_with_backoff`] and keeps its connections in a
//! [`ConnectionSet`]: a cap on their number, the longest-idle one closed to make room
//! (never one serving a request, and one that has served none before one that has), and
//! idle ones expired.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// The pause after the first failed `accept` in a row; doubled per failure up to
/// [`MAX_ACCEPT_BACKOFF`].
const FIRST_ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// The soft limit on this process's open descriptors, if the system says.
pub(crate) fn descriptor_limit() -> Option<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    ok.then(|| usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX))
}

/// Descriptors this process has open (Linux: counted in `/proc/self/fd`), if known.
pub(crate) fn descriptors_in_use() -> Option<usize> {
    std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count())
}

/// Whether opening something more still leaves `margin` descriptors for the process's
/// own work (its servers' accepts, the master, its logs). True when it cannot tell.
pub(crate) fn descriptors_to_spare(margin: usize) -> bool {
    match (descriptor_limit(), descriptors_in_use()) {
        (Some(limit), Some(used)) => used.saturating_add(margin) < limit,
        _ => true,
    }
}

/// Errors that say the process or system is out of a resource: retrying at once cannot
/// succeed and only burns CPU.
fn is_resource_exhaustion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Whether `accept` failed because the socket no longer listens: a server being dropped
/// shuts its listener down (so that its port frees at once), and Linux then answers a
/// pending `accept` with EINVAL. Nothing will ever be accepted again.
fn is_listener_closed(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// The next connection, or `None` once the listener has been shut down. On resource
/// exhaustion it first asks `on_exhausted` to free something (close an idle connection),
/// then waits with exponential back-off; it logs once per streak of failures, not once
/// per failure.
pub(crate) async fn accept_with_backoff(
    listener: &TcpListener,
    server: &str,
    mut on_exhausted: impl FnMut(),
) -> Option<(TcpStream, SocketAddr)> {
    let mut backoff = FIRST_ACCEPT_BACKOFF;
    let mut failures = 0u64;
    loop {
        match listener.accept().await {
            Ok(accepted) => {
                if failures > 0 {
                    tracing::info!("{server}: accepting again after {failures} failed accepts");
                }
                return Some(accepted);
            }
            // The peer gave up before we took it: nothing to wait for.
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            // Not a failure to report: the server is going away.
            Err(e) if is_listener_closed(&e) => return None,
            Err(e) => {
                failures += 1;
                if failures == 1 {
                    tracing::warn!("{server}: accept failed ({e}); backing off");
                }
                if is_resource_exhaustion(&e) {
                    on_exhausted();
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_ACCEPT_BACKOFF);
            }
        }
    }
}

struct Entry {
    /// When it last started or finished a request (or was accepted).
    last_active: Instant,
    busy: bool,
    /// Whether it has served a request: a flood of connections that never ask anything
    /// must not push out a persistent client that is in use but idle between its calls.
    served: bool,
    task: AbortHandle,
}

/// The connections one server holds, bounded in number. Each is a task; closing one
/// aborts its task, which drops (and so closes) its socket.
pub(crate) struct ConnectionSet {
    cap: usize,
    next_id: AtomicU64,
    entries: Mutex<HashMap<u64, Entry>>,
    evicted: AtomicU64,
}

impl ConnectionSet {
    pub(crate) fn new(cap: usize) -> Arc<ConnectionSet> {
        Arc::new(ConnectionSet {
            cap: cap.max(1),
            next_id: AtomicU64::new(0),
            entries: Mutex::new(HashMap::new()),
            evicted: AtomicU64::new(0),
        })
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn len(&self) -> usize {
        self.entries().len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Connections closed to make room or because they idled too long.
    #[cfg(test)]
    pub(crate) fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Whether one more connection may be taken: there is room, or the longest-idle
    /// connection was closed to make some. False when every held connection is busy.
    pub(crate) fn make_room(&self) -> bool {
        let mut entries = self.entries();
        if entries.len() < self.cap {
            return true;
        }
        Self::close_longest_idle(&mut entries, &self.evicted)
    }

    /// Closes the longest-idle connection, if any is idle.
    pub(crate) fn close_one_idle(&self) -> bool {
        Self::close_longest_idle(&mut self.entries(), &self.evicted)
    }

    /// Closes the longest-idle connection that never served a request, else the
    /// longest-idle one; never a busy one.
    fn close_longest_idle(entries: &mut HashMap<u64, Entry>, evicted: &AtomicU64) -> bool {
        let oldest = entries
            .iter()
            .filter(|(_, e)| !e.busy)
            .min_by_key(|(_, e)| (e.served, e.last_active))
            .map(|(&id, _)| id);
        match oldest.and_then(|id| entries.remove(&id)) {
            Some(entry) => {
                entry.task.abort();
                evicted.fetch_add(1, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Runs `serve` as a task held in the set until it ends or is closed. The future gets
    /// a [`Activity`] to mark when it serves a request (busy connections are never closed).
    pub(crate) fn spawn<F, Fut>(self: &Arc<Self>, serve: F)
    where
        F: FnOnce(Activity) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Activity {
            set: Arc::downgrade(self),
            id,
        };
        let guard = Activity {
            set: Arc::downgrade(self),
            id,
        };
        let future = serve(activity);
        // The entry goes in before the task can finish, under the same lock its removal
        // takes, so a task that ends at once does not leave an entry behind.
        let mut entries = self.entries();
        let task = tokio::spawn(async move {
            let _remove_on_end = RemoveOnDrop(guard);
            future.await;
        });
        entries.insert(
            id,
            Entry {
                last_active: Instant::now(),
                busy: false,
                served: false,
                task: task.abort_handle(),
            },
        );
    }

    /// Closes every connection idle for longer than `max_idle`.
    pub(crate) fn expire_idle(&self, now: Instant, max_idle: Duration) {
        let mut entries = self.entries();
        entries.retain(|_, e| {
            let keep = e.busy || now.saturating_duration_since(e.last_active) < max_idle;
            if !keep {
                e.task.abort();
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
            keep
        });
    }

    /// Closes every connection (the server is going away).
    pub(crate) fn close_all(&self) {
        for (_, entry) in self.entries().drain() {
            entry.task.abort();
        }
    }
}

impl Drop for ConnectionSet {
    fn drop(&mut self) {
        self.close_all();
    }
}

/// A connection's handle on its entry: marks requests begun and ended.
pub(crate) struct Activity {
    set: std::sync::Weak<ConnectionSet>,
    id: u64,
}

impl Activity {
    /// Marks the connection busy until the returned guard drops.
    pub(crate) fn busy(&self) -> BusyGuard {
        self.mark(true);
        BusyGuard(Activity {
            set: self.set.clone(),
            id: self.id,
        })
    }

    fn mark(&self, busy: bool) {
        if let Some(set) = self.set.upgrade() {
            if let Some(entry) = set.entries().get_mut(&self.id) {
                entry.served |= entry.busy && !busy;
                entry.busy = busy;
                entry.last_active = Instant::now();
            }
        }
    }
}

/// Marks its connection idle again when dropped.
pub(crate) struct BusyGuard(Activity);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.mark(false);
    }
}

struct RemoveOnDrop(Activity);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(set) = self.0.set.upgrade() {
            set.entries().remove(&self.0.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepting_ends_quietly_when_the_listener_is_shut_down() {
        let listener = Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let accepting = tokio::spawn({
            let listener = listener.clone();
            async move { accept_with_backoff(&listener, "test server", || {}).await }
        });
        // Let the accept start waiting before its socket stops listening.
        tokio::task::yield_now().await;
        socket2::SockRef::from(&*listener)
            .shutdown(std::net::Shutdown::Both)
            .unwrap();
        // Before, the shut-down socket's EINVAL was taken for a failure to back off
        // from: the loop never ended and logged a warning every drop of a server.
        let accepted = tokio::time::timeout(Duration::from_secs(10), accepting)
            .await
            .expect("accepting ends")
            .unwrap();
        assert!(accepted.is_none());
    }

    #[tokio::test]
    async fn the_longest_idle_connection_makes_room_and_busy_ones_stay() {
        let set = ConnectionSet::new(2);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let busy_started = Arc::new(tokio::sync::Notify::new());
        let started = busy_started.clone();
        set.spawn(move |activity| async move {
            let _busy = activity.busy();
            started.notify_one();
            let _ = rx.await;
        });
        busy_started.notified().await;
        set.spawn(|_| std::future::pending());
        assert_eq!(set.len(), 2);
        assert!(set.make_room(), "the idle one is closed");
        assert_eq!(set.len(), 1);
        assert!(!set.close_one_idle(), "the busy one is not");
        set.expire_idle(
            Instant::now() + Duration::from_secs(3600),
            Duration::from_secs(1),
        );
        assert_eq!(set.len(), 1, "busy connections never expire");
        drop(tx);
        for _ in 0..100 {
            if set.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(set.is_empty(), "a finished connection leaves the set");
        assert_eq!(set.evicted(), 1);
    }

    #[tokio::test]
    async fn a_flood_that_asks_nothing_evicts_itself_not_a_client_in_use() {
        let set = ConnectionSet::new(100);
        let (served_tx, served_rx) = tokio::sync::oneshot::channel::<()>();
        set.spawn(move |activity| async move {
            drop(activity.busy()); // one request served, then idle between calls
            let _ = served_tx.send(());
            std::future::pending::<()>().await;
        });
        served_rx.await.unwrap();
        // A thousand connections that never ask anything, each newer than the client.
        for _ in 0..1000 {
            tokio::time::sleep(Duration::from_micros(1)).await;
            assert!(set.make_room());
            set.spawn(|_| std::future::pending());
        }
        assert_eq!(set.len(), 100);
        assert_eq!(set.evicted(), 901);
        let entries = set.entries();
        assert!(
            entries.values().any(|e| e.served),
            "the client in use is still held"
        );
    }
}
