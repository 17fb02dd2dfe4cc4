//! The sending socket of a UDP link to a subscriber, kept out of the runtime's poll set
//! while sends go through.
//!
//! tokio registers every socket for both directions, and Linux's UDP write-space callback
//! fires for each freed datagram while anybody waits on the socket. On loopback a datagram
//! is freed as it is sent (the runtime's next `epoll_wait` then returns at once for a
//! readiness nobody waits for); on a NIC at its TX completion (a wake-up of the
//! publisher's runtime per message); and when `publish` runs on a thread of its own, every
//! message woke the runtime's thread, a third party on the vCPUs the publisher and the
//! subscriber share. Here sends are plain non-blocking system calls, and the socket joins
//! the poll set only when one would block, until the link's queue is drained
//! ([`SendSocket::unwatch`]).

use std::io;
use std::net::UdpSocket;

#[cfg(unix)]
use std::os::fd::{AsRawFd, RawFd};
#[cfg(unix)]
use tokio::io::{unix::AsyncFd, Interest};

/// A connected, non-blocking UDP socket that only sends (see the module's text).
pub(crate) struct SendSocket {
    /// Registered with the runtime while a send waits for room. Declared before `socket`
    /// so that it is dropped (deregistered) while the descriptor is still open.
    #[cfg(unix)]
    watch: Option<AsyncFd<Descriptor>>,
    #[cfg(not(unix))]
    watch: tokio::net::UdpSocket,
    socket: UdpSocket,
}

/// The socket's descriptor as the runtime's registration sees it: borrowed, never closed
/// by it.
#[cfg(unix)]
struct Descriptor(RawFd);

#[cfg(unix)]
impl AsRawFd for Descriptor {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl SendSocket {
    /// Takes a connected socket; makes it non-blocking.
    pub(crate) fn new(socket: UdpSocket) -> io::Result<SendSocket> {
        socket.set_nonblocking(true)?;
        #[cfg(unix)]
        {
            Ok(SendSocket {
                watch: None,
                socket,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(SendSocket {
                watch: tokio::net::UdpSocket::from_std(socket.try_clone()?)?,
                socket,
            })
        }
    }

    /// The socket, for options and for sends that must not wait.
    pub(crate) fn socket(&self) -> &UdpSocket {
        &self.socket
    }

    /// Runs `send` (one non-blocking system call on the socket) until the kernel takes it,
    /// waiting for room between attempts. Cancel-safe: an attempt is never left half done.
    pub(crate) async fn send_with<T>(
        &mut self,
        mut send: impl FnMut(&UdpSocket) -> io::Result<T>,
    ) -> io::Result<T> {
        match send(&self.socket) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            done => return done,
        }
        self.wait_and_send(send).await
    }

    #[cfg(unix)]
    async fn wait_and_send<T>(
        &mut self,
        mut send: impl FnMut(&UdpSocket) -> io::Result<T>,
    ) -> io::Result<T> {
        let watch = match &mut self.watch {
            Some(watch) => watch,
            // Registering reports the socket writable at once if room appeared since the
            // attempt above, so no wake-up is missed between the two.
            None => {
                let fd = Descriptor(self.socket.as_raw_fd());
                // SAFETY: the descriptor is `self.socket`'s, which stays open and is never
                // replaced while `watch` lives: `watch` is dropped first (field order, and
                // `unwatch`).
                let watch = unsafe { AsyncFd::register_with_interest(fd, Interest::WRITABLE) }?;
                self.watch.insert(watch)
            }
        };
        loop {
            let mut ready = watch.writable().await?;
            // A would-block here clears the readiness, and the wait starts over.
            if let Ok(done) = ready.try_io(|_| send(&self.socket)) {
                return done;
            }
        }
    }

    #[cfg(not(unix))]
    async fn wait_and_send<T>(
        &mut self,
        mut send: impl FnMut(&UdpSocket) -> io::Result<T>,
    ) -> io::Result<T> {
        loop {
            self.watch.writable().await?;
            match send(&self.socket) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
        }
    }

    /// Sends one datagram, waiting for room if need be.
    pub(crate) async fn send(&mut self, datagram: &[u8]) -> io::Result<usize> {
        self.send_with(|socket| socket.send(datagram)).await
    }

    /// Leaves the runtime's poll set, if a send had to wait: the link's queue is drained,
    /// and what is sent next goes straight from `publish`.
    pub(crate) fn unwatch(&mut self) {
        #[cfg(unix)]
        {
            self.watch = None;
        }
    }

    /// Whether the socket is in the runtime's poll set now.
    #[cfg(all(test, unix))]
    pub(crate) fn watched(&self) -> bool {
        self.watch.is_some()
    }
}

#[cfg(all(test, target_os = "linux"))]
pub(crate) mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::time::Duration;

    #[tokio::test]
    async fn sends_that_go_through_never_join_the_poll_set() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut tx = sender_to(rx.local_addr().unwrap(), 1 << 20);
        for _ in 0..100 {
            tx.send(&[1; 100]).await.unwrap();
        }
        assert!(!tx.watched());
        let mut buf = [0u8; 200];
        assert_eq!(rx.recv(&mut buf).unwrap(), 100);
    }

    /// A sender with a `send_buffer`-byte send buffer, connected to `rx`.
    pub(crate) fn sender_to(rx: SocketAddr, send_buffer: usize) -> SendSocket {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket2::SockRef::from(&tx)
            .set_send_buffer_size(send_buffer)
            .unwrap();
        tx.connect(rx).unwrap();
        SendSocket::new(tx).unwrap()
    }

    /// Runs `test` on a current-thread runtime whose loopback sends at 25 MB/s. Loopback
    /// frees a datagram as it sends it, so a send buffer fills only behind a queue: here a
    /// token bucket (`tc ... tbf`) on the loopback of a namespace of the test's own,
    /// entered by a thread of the test's own.
    pub(crate) fn on_a_slow_loopback<F>(test: impl FnOnce() -> F + Send + 'static)
    where
        F: std::future::Future<Output = ()>,
    {
        let Some(net) = udpros_testkit::netns::Network::new(&["slow"], 1500) else {
            return;
        };
        let host = net.host("slow");
        let shaped = host
            .command("tc")
            .args([
                "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "200mbit",
            ])
            .args(["burst", "64kb", "limit", "32mb"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(shaped, "tc qdisc add ... tbf (iproute2 and sch_tbf)");
        let ns = std::fs::File::open(format!("/run/netns/{}", host.ns)).unwrap();
        std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            // SAFETY: a namespace file opened above; this thread alone moves into it.
            assert_eq!(
                unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) },
                0
            );
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(test());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_full_send_buffer_waits_for_room_then_leaves_the_poll_set() {
        on_a_slow_loopback(fill_and_drain);
    }

    async fn fill_and_drain() {
        const DATAGRAMS: usize = 100;
        const SIZE: usize = 60_000;
        let rx = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        // Room for the whole burst at the receiver (6 MB): what is asserted is that the
        // sender waits for room, not how promptly this thread reads. The reader shares the
        // thread with the sender, and with the kernel's default buffer (three of these
        // datagrams, 7 ms at 25 MB/s) a loaded machine's pause lost one (99 of 100).
        // Forced past `rmem_max` where the test runs as root, as CI does.
        let bytes: libc::c_int = 8 << 20;
        // SAFETY: setsockopt reads `bytes` alone, for the length given.
        let forced = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&rx),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&bytes as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        } == 0;
        if !forced {
            socket2::SockRef::from(&rx)
                .set_recv_buffer_size(8 << 20)
                .unwrap();
        }
        let mut tx = sender_to(rx.local_addr().unwrap(), 64 << 10);
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; 65_536];
            let mut got = 0;
            while got < DATAGRAMS {
                match tokio::time::timeout(Duration::from_secs(10), rx.recv(&mut buf)).await {
                    Ok(Ok(SIZE)) => got += 1,
                    _ => break,
                }
            }
            got
        });
        for i in 0..DATAGRAMS {
            tokio::time::timeout(Duration::from_secs(10), tx.send(&[i as u8; SIZE]))
                .await
                .expect("the queue drains, and the send gets room")
                .unwrap();
        }
        // 6 MB through a 64 kB send buffer at 25 MB/s: sends had to wait for room.
        assert!(tx.watched(), "no send waited");
        tx.unwatch();
        assert!(!tx.watched());
        assert_eq!(reader.await.unwrap(), DATAGRAMS, "every datagram arrived");
    }
}
