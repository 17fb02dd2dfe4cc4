//! Sockets and the system calls udpros makes on them itself: every `unsafe` block of the
//! networking code is in this module. UDP sockets sized for the messages in flight, the
//! route's MTU, TCP keepalive and quick acknowledgement, segmentation and coalescing
//! offload (`offload`), and the non-blocking send socket a publisher's UDPROS link writes
//! from any thread (`send`).
//!
//! Not `quinn-udp`, which would serve most of `offload`: it sets don't-fragment on every
//! socket, and a roscpp subscriber asks for datagrams up to 1500 bytes whatever the
//! route, which then could not cross a hop with a smaller MTU.

pub(crate) mod offload;
mod send;

#[cfg(all(test, target_os = "linux"))]
pub(crate) use send::tests as send_tests;
pub(crate) use send::SendSocket;

use std::net::SocketAddr;

/// A non-blocking UDP socket with buffers sized for `bytes` of messages in flight, not yet
/// on the runtime. Returns the socket and, when the kernel granted less than asked, what
/// it granted (to be reported).
pub(crate) fn udp_socket(
    bind: SocketAddr,
    buffer_bytes: usize,
) -> std::io::Result<(std::net::UdpSocket, Option<usize>)> {
    use socket2::{Domain, Protocol as P, Socket, Type};
    // An IPv6 socket (ROS_IPV6=on) stays dual-stack, as the kernel makes it by default.
    let socket = Socket::new(Domain::for_address(bind), Type::DGRAM, Some(P::UDP))?;
    if bind.is_ipv6() {
        let _ = socket.set_only_v6(false);
    }
    let _ = socket.set_recv_buffer_size(buffer_bytes);
    let _ = socket.set_send_buffer_size(buffer_bytes);
    // Linux reports twice what it granted (bookkeeping overhead included).
    let granted = socket.recv_buffer_size().map(|g| g / 2).unwrap_or(0);
    socket.set_nonblocking(true)?;
    socket.bind(&bind.into())?;
    let capped = (granted < buffer_bytes).then_some(granted);
    Ok((socket.into(), capped))
}

/// IPv4 and UDP headers in front of a datagram's payload.
pub(crate) const IPV4_UDP_HEADERS: usize = 28;
/// IPv6 and UDP headers in front of a datagram's payload.
pub(crate) const IPV6_UDP_HEADERS: usize = 48;

/// The IP and UDP headers in front of a datagram sent to `peer`.
pub(crate) fn udp_headers(peer: SocketAddr) -> usize {
    match peer.ip().to_canonical() {
        std::net::IpAddr::V4(_) => IPV4_UDP_HEADERS,
        std::net::IpAddr::V6(_) => IPV6_UDP_HEADERS,
    }
}

/// The MTU of the route a connected socket sends on (the device's, or a smaller path MTU
/// the kernel has learned), or `None` when the kernel does not say.
pub(crate) fn route_mtu(socket: &std::net::UdpSocket) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let (level, option) = match socket.local_addr().ok()? {
        SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_MTU),
        SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_MTU),
    };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `mtu`, a live local.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            level,
            option,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0)
        .then(|| usize::try_from(mtu).ok())
        .flatten()
        .filter(|&m| m > 0)
}

/// The route from a socket bound to `bind` toward `peer` (an address chosen as
/// [`resolve_udp_peer`](crate::transport::resolve_udp_peer) chooses), as the kernel's
/// routing tells it when a UDP socket is connected, which sends nothing: whether `peer` is
/// this host (a loopback address, or the source address the kernel picks for it, which for
/// an address of this host's own is that address), and the payload one packet carries.
pub(crate) fn probe_route(
    bind: std::net::IpAddr,
    peer: SocketAddr,
) -> std::io::Result<crate::wire::negotiation::PublisherRoute> {
    let (socket, _) = udp_socket(SocketAddr::new(bind, 0), 0)?;
    socket.connect(peer)?;
    let source = socket.local_addr()?.ip().to_canonical();
    let target = peer.ip().to_canonical();
    Ok(crate::wire::negotiation::PublisherRoute {
        same_host: target.is_loopback() || source == target,
        payload: route_mtu(&socket).map(|mtu| mtu.saturating_sub(udp_headers(peer))),
    })
}

/// TCP keepalive as roscpp sets it: idle 60 s, interval 10 s, 9 probes.
pub(crate) fn set_keepalive(stream: &tokio::net::TcpStream) {
    let sock = socket2::SockRef::from(stream);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(std::time::Duration::from_secs(60))
        .with_interval(std::time::Duration::from_secs(10))
        .with_retries(9);
    let _ = sock.set_tcp_keepalive(&keepalive);
}

/// What a publisher's TCP socket to another host lets the kernel hold unsent: enough to
/// keep a wide path busy between two writes (at 1 Gbit/s a write per 260 µs), little
/// enough that on a 4 Mbit/s radio it is 65 ms of data, so that what is sent next is the
/// link's choice (the newest message) rather than whatever the kernel already took.
pub(crate) const TCP_UNSENT_BYTES: u32 = 32 << 10;

/// Bounds what the kernel holds unsent on `stream` to [`TCP_UNSENT_BYTES`]
/// (`TCP_NOTSENT_LOWAT`): a write then waits until the path has taken nearly all of the
/// last one. Whether the kernel took it (Linux does; elsewhere the bound is not there).
pub(crate) fn hold_little_unsent(stream: &tokio::net::TcpStream) -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        socket2::SockRef::from(stream)
            .set_tcp_notsent_lowat(TCP_UNSENT_BYTES)
            .is_ok()
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = stream;
        false
    }
}

/// The bytes written to `stream` that the peer has not acknowledged yet, unsent ones
/// included (`SIOCOUTQ`): what is ahead of the next write on the path.
pub(crate) fn tcp_bytes_in_flight(stream: &tokio::net::TcpStream) -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let mut queued: libc::c_int = 0;
        // SAFETY: a valid socket descriptor; SIOCOUTQ writes one int to the pointer.
        let rc = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
        (rc == 0).then(|| usize::try_from(queued).unwrap_or(0))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = stream;
        None
    }
}

/// Caps what the kernel sends on `stream` to `bytes_per_second` (`SO_MAX_PACING_RATE`:
/// TCP paces itself, no queueing discipline needed). Whether the kernel took it.
pub(crate) fn cap_tcp_rate(stream: &tokio::net::TcpStream, bytes_per_second: f64) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // Not among the libc crate's Linux constants; the kernel's own number.
        #[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
        const SO_MAX_PACING_RATE: libc::c_int = 0x31;
        #[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
        const SO_MAX_PACING_RATE: libc::c_int = 47;
        // The kernel takes 32 bits here (more since Linux 4.20); a cap of 4 GB/s is none.
        let rate = bytes_per_second.clamp(1.0, f64::from(u32::MAX)) as u32;
        // SAFETY: a valid socket descriptor and a pointer to a u32 of the size passed.
        let rc = unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_MAX_PACING_RATE,
                (&rate as *const u32).cast(),
                std::mem::size_of::<u32>() as libc::socklen_t,
            )
        };
        rc == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (stream, bytes_per_second);
        false
    }
}

/// Asks the kernel to acknowledge the next segments at once, on a subscriber's TCPROS
/// stream before each read.
///
/// A publisher that ignores `tcp_nodelay` (rosrust and roslibrust never set it) holds
/// each message behind Nagle's algorithm until the previous one is acknowledged, and
/// Linux, left to itself, delays the acknowledgement of a small segment by 4-12 ms once
/// it guesses the stream is interactive: in S5, one subscriber of such a publisher in
/// five fell into runs of 10 ms stalls. The kernel leaves quick-ack mode as it pleases,
/// so it is asked again before every read; one `setsockopt` against a read that
/// usually carries a whole message or more.
pub(crate) fn acknowledge_promptly(stream: &tokio::net::TcpStream) {
    #[cfg(target_os = "linux")]
    let _ = socket2::SockRef::from(stream).set_tcp_quickack(true);
    #[cfg(not(target_os = "linux"))]
    let _ = stream;
}
