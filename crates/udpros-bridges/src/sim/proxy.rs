//! A user-space UDP fault proxy: loss, duplication, reordering, and per-direction delay
//! with jitter, between a client and an upstream on loopback (this machine kind's kernel
//! has no `tc netem`). The decisions are [`FaultModel`]'s; the relay is a thin tokio task.

use super::delay_line::DelayLine;
use super::faults::{FaultModel, Faults};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A running proxy: clients send to `local_addr`, which relays to the upstream and back.
pub struct Proxy {
    local_addr: SocketAddr,
    counts: Arc<Counts>,
    task: tokio::task::JoinHandle<()>,
}

/// What the proxy did, per direction: datagrams received and dropped.
#[derive(Debug, Default)]
struct Counts {
    up: AtomicU64,
    up_dropped: AtomicU64,
    down: AtomicU64,
    down_dropped: AtomicU64,
}

/// Datagrams the proxy relayed and dropped, each way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyStats {
    /// Datagrams from the client toward the upstream.
    pub up: u64,
    /// Of those, dropped by the fault model.
    pub up_dropped: u64,
    /// Datagrams from the upstream toward the client.
    pub down: u64,
    /// Of those, dropped by the fault model.
    pub down_dropped: u64,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Listens on `listen` (port 0 picks one); `up` applies to client → upstream datagrams,
    /// `down` to the replies.
    pub async fn start(
        listen: SocketAddr,
        upstream: SocketAddr,
        up: Faults,
        down: Faults,
        seed: u64,
    ) -> std::io::Result<Proxy> {
        let client_side = std::net::UdpSocket::bind(listen)?;
        let local_addr = client_side.local_addr()?;
        let bind = if upstream.ip().is_loopback() {
            "127.0.0.1:0"
        } else {
            "0.0.0.0:0"
        };
        let upstream_side = std::net::UdpSocket::bind(bind)?;
        upstream_side.connect(upstream)?;
        // Delayed datagrams leave from delay lines (precise to tens of microseconds).
        let to_upstream = upstream_side.try_clone()?;
        let toward_upstream = DelayLine::spawn("proxy-up", MAX_IN_FLIGHT, move |d: Vec<u8>| {
            let _ = to_upstream.send(&d);
        })?;
        let to_client = client_side.try_clone()?;
        let toward_client = DelayLine::spawn(
            "proxy-down",
            MAX_IN_FLIGHT,
            move |(d, to): (Vec<u8>, SocketAddr)| {
                let _ = to_client.send_to(&d, to);
            },
        )?;
        client_side.set_nonblocking(true)?;
        upstream_side.set_nonblocking(true)?;
        let counts = Arc::new(Counts::default());
        let task = tokio::spawn(relay(
            counts.clone(),
            tokio::net::UdpSocket::from_std(client_side)?,
            tokio::net::UdpSocket::from_std(upstream_side)?,
            (toward_upstream, toward_client),
            (up, down),
            seed,
        ));
        Ok(Proxy {
            local_addr,
            counts,
            task,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Its counts so far.
    pub fn stats(&self) -> ProxyStats {
        let c = &self.counts;
        ProxyStats {
            up: c.up.load(Ordering::Relaxed),
            up_dropped: c.up_dropped.load(Ordering::Relaxed),
            down: c.down.load(Ordering::Relaxed),
            down_dropped: c.down_dropped.load(Ordering::Relaxed),
        }
    }
}

/// A datagram and where it goes.
type Addressed = (Vec<u8>, SocketAddr);

/// Datagrams held back at once per direction; beyond this the proxy drops, like a full
/// router queue.
const MAX_IN_FLIGHT: usize = 4096;

async fn relay(
    counts: Arc<Counts>,
    client_side: tokio::net::UdpSocket,
    upstream_side: tokio::net::UdpSocket,
    (toward_upstream, toward_client): (DelayLine<Vec<u8>>, DelayLine<Addressed>),
    (up, down): (Faults, Faults),
    seed: u64,
) {
    let mut model = FaultModel::new(seed);
    let mut client: Option<SocketAddr> = None;
    let (mut a, mut b) = (vec![0u8; 65536], vec![0u8; 65536]);
    loop {
        tokio::select! {
            r = client_side.recv_from(&mut a) => {
                let Ok((n, from)) = r else { continue };
                client = Some(from);
                let fate = model.fate(&up);
                counts.up.fetch_add(1, Ordering::Relaxed);
                if fate.is_empty() {
                    counts.up_dropped.fetch_add(1, Ordering::Relaxed);
                }
                for delay in fate {
                    toward_upstream.push(delay, a[..n].to_vec());
                }
            }
            r = upstream_side.recv(&mut b) => {
                let Ok(n) = r else { continue };
                let Some(to) = client else { continue };
                let fate = model.fate(&down);
                counts.down.fetch_add(1, Ordering::Relaxed);
                if fate.is_empty() {
                    counts.down_dropped.fetch_add(1, Ordering::Relaxed);
                }
                for delay in fate {
                    toward_client.push(delay, (b[..n].to_vec(), to));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn relays_both_ways_with_the_configured_delay() {
        let echo = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let upstream = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let mut buf = [0u8; 64];
            while let Ok((n, from)) = echo.recv_from(&mut buf).await {
                let _ = echo.send_to(&buf[..n], from).await;
            }
        });
        let each_way = Faults {
            delay: Duration::from_millis(20),
            ..Faults::NONE
        };
        let proxy = Proxy::start(
            "127.0.0.1:0".parse().unwrap(),
            upstream,
            each_way,
            each_way,
            1,
        )
        .await
        .unwrap();
        let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let sent = std::time::Instant::now();
        client.send_to(b"ping", proxy.local_addr()).await.unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&buf[..n], b"ping");
        assert_eq!(from, proxy.local_addr());
        assert!(
            sent.elapsed() >= Duration::from_millis(40),
            "round trip {:?}",
            sent.elapsed()
        );
    }
}
