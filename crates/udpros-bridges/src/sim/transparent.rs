//! The fault proxy as a router's netem: on a host that forwards between others, a TPROXY
//! rule hands the proxy the UDP datagrams crossing the host, and it sends each on to where
//! it was going, from where it came (`IP_TRANSPARENT`), after the fault model's fate. Neither
//! end sees the proxy: addresses, ports and so UDPROS's source checks are as on a plain
//! path, which a proxy at an address of its own (the [`Proxy`](super::Proxy)) cannot offer
//! to a protocol whose peers tell each other where to send.
//!
//! The host needs, besides forwarding (the rules name the proxy's port and a mark):
//!
//! ```text
//! nft add rule inet fault pre meta l4proto udp tproxy to :PORT meta mark set 1 accept
//! ip rule add fwmark 1 lookup 100; ip route add local 0.0.0.0/0 dev lo table 100
//! ```
//!
//! Linux only; needs `CAP_NET_ADMIN` (root).

use super::delay_line::DelayLine;
use super::faults::{FaultModel, Faults};
use socket2::SockAddr;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Datagrams held back at once; beyond this the proxy drops, like a full router queue.
const MAX_IN_FLIGHT: usize = 4096;
/// Sources the proxy keeps a sending socket for; the oldest is closed for a new one.
const MAX_SOURCES: usize = 256;

/// A running transparent proxy.
pub struct TransparentProxy {
    local_addr: SocketAddr,
    counts: Arc<Counts>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Counts {
    relayed: AtomicU64,
    dropped: AtomicU64,
}

/// What a [`TransparentProxy`] did: datagrams handed to it, and how many of them the
/// fault model dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransparentStats {
    /// Datagrams handed to it.
    pub received: u64,
    /// Of those, dropped by the fault model.
    pub dropped: u64,
}

impl Drop for TransparentProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TransparentProxy {
    /// Takes the datagrams a TPROXY rule sends to `listen` and relays each with `faults`.
    pub async fn start(
        listen: SocketAddr,
        faults: Faults,
        seed: u64,
    ) -> io::Result<TransparentProxy> {
        let socket = transparent_socket(listen, true)?;
        let local_addr = socket.local_addr()?;
        let mut senders = Senders::default();
        let line = DelayLine::spawn(
            "proxy-transparent",
            MAX_IN_FLIGHT,
            move |(datagram, from, to): (Vec<u8>, SocketAddr, SocketAddr)| {
                senders.send(&datagram, from, to)
            },
        )?;
        socket.set_nonblocking(true)?;
        let counts = Arc::new(Counts::default());
        let task = tokio::spawn(relay(
            counts.clone(),
            tokio::net::UdpSocket::from_std(socket)?,
            line,
            faults,
            seed,
        ));
        Ok(TransparentProxy {
            local_addr,
            counts,
            task,
        })
    }

    /// The address its TPROXY rule sends to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Its counts so far.
    pub fn stats(&self) -> TransparentStats {
        TransparentStats {
            received: self.counts.relayed.load(Ordering::Relaxed),
            dropped: self.counts.dropped.load(Ordering::Relaxed),
        }
    }
}

async fn relay(
    counts: Arc<Counts>,
    socket: tokio::net::UdpSocket,
    line: DelayLine<(Vec<u8>, SocketAddr, SocketAddr)>,
    faults: Faults,
    seed: u64,
) {
    let mut model = FaultModel::new(seed);
    let mut buf = vec![0u8; 65536];
    loop {
        let received = socket
            .async_io(tokio::io::Interest::READABLE, || {
                recv_with_destination(&socket, &mut buf)
            })
            .await;
        // An error here is an earlier datagram's ICMP news; the next read goes on.
        let Ok((n, from, to)) = received else {
            continue;
        };
        let fate = model.fate(&faults);
        counts.relayed.fetch_add(1, Ordering::Relaxed);
        if fate.is_empty() {
            counts.dropped.fetch_add(1, Ordering::Relaxed);
        }
        for delay in fate {
            line.push(delay, (buf[..n].to_vec(), from, to));
        }
    }
}

/// Sockets bound to the sources seen, so each datagram leaves from where it came.
#[derive(Default)]
struct Senders {
    by_source: HashMap<SocketAddr, UdpSocket>,
    order: VecDeque<SocketAddr>,
}

impl Senders {
    fn send(&mut self, datagram: &[u8], from: SocketAddr, to: SocketAddr) {
        if !self.by_source.contains_key(&from) {
            let Ok(socket) = transparent_socket(from, false) else {
                return;
            };
            if self.order.len() >= MAX_SOURCES {
                if let Some(oldest) = self.order.pop_front() {
                    self.by_source.remove(&oldest);
                }
            }
            self.order.push_back(from);
            self.by_source.insert(from, socket);
        }
        if let Some(socket) = self.by_source.get(&from) {
            let _ = socket.send_to(datagram, to);
        }
    }
}

/// A UDP socket allowed to bind an address that is not this host's (`IP_TRANSPARENT`),
/// bound to `addr`; with `destinations`, each datagram it reads tells where it was going.
fn transparent_socket(addr: SocketAddr, destinations: bool) -> io::Result<UdpSocket> {
    let domain = socket2::Domain::for_address(addr);
    let socket = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
    socket.set_reuse_address(true)?;
    let (level, transparent, recv_destination) = match addr {
        SocketAddr::V4(_) => (libc::SOL_IP, libc::IP_TRANSPARENT, libc::IP_RECVORIGDSTADDR),
        SocketAddr::V6(_) => (
            libc::SOL_IPV6,
            libc::IPV6_TRANSPARENT,
            libc::IPV6_RECVORIGDSTADDR,
        ),
    };
    set_flag(&socket, level, transparent)?;
    if destinations {
        set_flag(&socket, level, recv_destination)?;
    }
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

fn set_flag(socket: &impl AsRawFd, level: libc::c_int, name: libc::c_int) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: a valid descriptor, and an int option whose pointer and size agree.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One datagram, where it came from, and where it was going (its original destination,
/// from the `*_ORIGDSTADDR` control message).
fn recv_with_destination(
    socket: &impl AsRawFd,
    buf: &mut [u8],
) -> io::Result<(usize, SocketAddr, SocketAddr)> {
    // SAFETY: try_init hands a zeroed address storage of its full size; recvmsg writes at
    // most msg_namelen bytes into it and says how many.
    let ((n, to), from) = unsafe {
        SockAddr::try_init(|source, source_len| {
            let mut control = [0u64; 16];
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            // SAFETY: all-zero is a valid msghdr.
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = source.cast();
            msg.msg_namelen = *source_len;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control);
            // SAFETY: every pointer in `msg` points into live locals of the sizes it states.
            let n = libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT);
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            *source_len = msg.msg_namelen;
            Ok((n as usize, original_destination(&msg)))
        })
    }?;
    let from = from
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unknown source family"))?;
    let to = to.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "a datagram without its original destination (not from a TPROXY rule)",
        )
    })?;
    Ok((n, from, to))
}

/// The `IP_ORIGDSTADDR` or `IPV6_ORIGDSTADDR` address among the control messages that
/// `recvmsg` just filled into `msg`.
///
/// # Safety
/// `msg`'s control buffer is live and holds `msg_controllen` bytes that recvmsg wrote.
unsafe fn original_destination(msg: &libc::msghdr) -> Option<SocketAddr> {
    let mut to = None;
    // SAFETY: the CMSG macros walk the control buffer within msg_controllen; an address
    // payload is copied into try_init's zeroed storage, at most its size, and read by its
    // family.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            let (level, kind) = ((*cmsg).cmsg_level, (*cmsg).cmsg_type);
            let original = (level == libc::SOL_IP && kind == libc::IP_ORIGDSTADDR)
                || (level == libc::SOL_IPV6 && kind == libc::IPV6_ORIGDSTADDR);
            if original {
                let payload =
                    ((*cmsg).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
                let copied = SockAddr::try_init(|storage, len| {
                    let payload = payload.min(*len as usize);
                    std::ptr::copy_nonoverlapping(
                        libc::CMSG_DATA(cmsg),
                        storage.cast::<u8>(),
                        payload,
                    );
                    *len = payload as libc::socklen_t;
                    Ok(())
                });
                to = copied.ok().and_then(|(_, address)| address.as_socket());
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    to
}
