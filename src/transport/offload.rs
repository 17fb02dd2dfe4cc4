//! Many datagrams per system call, on Linux. One `sendmsg` with a UDP_SEGMENT control
//! message sends consecutive datagrams of one size (the last may be shorter) as that many
//! datagrams (GSO). With UDP_GRO set, one read may return several datagrams that arrived
//! together, their size told in a control message. A 1 MB message of 1500-byte datagrams
//! then takes 16 sends and, on loopback, 16 reads instead of 700 of each.
//!
//! Elsewhere, and where the kernel refuses, everything goes one datagram per call.

use bytes::BytesMut;
use std::io;
use std::net::SocketAddr;
use tokio::net::UdpSocket;

/// Most datagrams the kernel cuts one send into (its UDP_MAX_SEGMENTS).
pub(crate) const MAX_SEGMENTS: usize = 64;
/// Most bytes one UDP send over IPv4 may carry, segmented or not.
pub(crate) const MAX_SEND: usize = 65_507;
/// Room a read needs for whatever the kernel may coalesce.
pub(crate) const MAX_READ: usize = 65_536;

/// How many bytes of `segment`-byte datagrams one send may carry.
pub(crate) fn max_send(segment: usize) -> usize {
    let segment = segment.max(1);
    (MAX_SEND / segment).clamp(1, MAX_SEGMENTS) * segment
}

/// Whether the kernel can cut a send into datagrams (Linux 4.18 and later). Asked by
/// setting the option to its default: older kernels reject the option, and would send a
/// segmented send as one large datagram, ignoring what they do not know.
pub(crate) fn can_segment(socket: &std::net::UdpSocket) -> bool {
    #[cfg(target_os = "linux")]
    {
        set_udp_option(socket, libc::UDP_SEGMENT, 0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = socket;
        false
    }
}

/// Sends `contents` as datagrams of `segment` bytes each (the last may be shorter) in one
/// system call on a connected non-blocking socket, without waiting. Only where
/// [`can_segment`] said so.
pub(crate) fn try_send_segments(
    socket: &std::net::UdpSocket,
    contents: &[u8],
    segment: usize,
) -> io::Result<()> {
    if contents.len() <= segment {
        return socket.send(contents).map(drop);
    }
    #[cfg(target_os = "linux")]
    {
        sendmsg_segmented(socket, contents, segment)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

#[cfg(target_os = "linux")]
fn sendmsg_segmented(
    socket: &std::net::UdpSocket,
    contents: &[u8],
    segment: usize,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let segment = u16::try_from(segment)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "segment over 65535 bytes"))?;
    let mut iov = libc::iovec {
        iov_base: contents.as_ptr().cast_mut().cast(),
        iov_len: contents.len(),
    };
    let mut control = [0u64; 4]; // room for one u16 option; u64s for the header's alignment
                                 // SAFETY: all-zero is a valid msghdr.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE only computes a size.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) } as _;
    // SAFETY: the control buffer holds one header and a u16 (checked by the size above);
    // the kernel only reads `contents` through `iov`.
    let sent = unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_UDP;
        (*cmsg).cmsg_type = libc::UDP_SEGMENT;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), segment);
        libc::sendmsg(socket.as_raw_fd(), &msg, 0)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks the kernel to hand over datagrams that arrived together in one read.
pub(crate) fn enable_coalescing(socket: &UdpSocket) -> bool {
    #[cfg(target_os = "linux")]
    {
        set_udp_option(socket, libc::UDP_GRO, 1)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = socket;
        false
    }
}

#[cfg(target_os = "linux")]
fn set_udp_option(
    socket: &impl std::os::fd::AsRawFd,
    option: libc::c_int,
    value: libc::c_int,
) -> bool {
    // SAFETY: a live socket's descriptor, and an int option passed by pointer and size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_UDP,
            option,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// What one read brought: `len` bytes appended to the buffer, from `from`, made of
/// datagrams of `segment` bytes each (the last may be shorter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Read {
    pub len: usize,
    pub from: SocketAddr,
    pub segment: usize,
}

/// Reads into `buf`'s spare room (callers keep [`MAX_READ`] of it). Cancel-safe.
pub(crate) async fn recv(socket: &UdpSocket, buf: &mut BytesMut) -> io::Result<Read> {
    #[cfg(target_os = "linux")]
    {
        socket
            .async_io(tokio::io::Interest::READABLE, || recvmsg(socket, buf))
            .await
    }
    #[cfg(not(target_os = "linux"))]
    {
        let (len, from) = socket.recv_buf_from(buf).await?;
        Ok(Read {
            len,
            from,
            segment: len,
        })
    }
}

#[cfg(target_os = "linux")]
fn recvmsg(socket: &UdpSocket, buf: &mut BytesMut) -> io::Result<Read> {
    use std::os::fd::AsRawFd;
    let spare = buf.spare_capacity_mut();
    let mut iov = libc::iovec {
        iov_base: spare.as_mut_ptr().cast(),
        iov_len: spare.len(),
    };
    // SAFETY: all-zero is a valid sockaddr_storage and msghdr.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut control = [0u64; 8]; // u64s: cmsg headers need their alignment
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut addr as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: every pointer in `msg` points at live memory of the size it states; the
    // kernel writes at most that much.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let len = n as usize;
    let mut segment = len;
    // SAFETY: the control buffer as the kernel filled it, walked with its own macros.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == libc::UDP_GRO {
                let size = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                segment = usize::try_from(size).unwrap_or(len).clamp(1, len.max(1));
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        // The kernel wrote `len` bytes into the spare room.
        buf.set_len(buf.len() + len);
    }
    let from = socket_addr(&addr).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "datagram from an unknown address family",
        )
    })?;
    if msg.msg_flags & libc::MSG_TRUNC != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "datagram truncated",
        ));
    }
    Ok(Read { len, from, segment })
}

/// The address a `sockaddr_storage` holds (one the kernel filled: a datagram's source, or
/// a control message's address copied into one); `None` for a family other than IPv4/IPv6.
#[cfg(target_os = "linux")]
pub fn socket_addr(addr: &libc::sockaddr_storage) -> Option<SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr};
    match libc::c_int::from(addr.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says it is a sockaddr_in, which fits in the storage.
            let a =
                unsafe { &*(addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::from((ip, u16::from_be(a.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a =
                unsafe { &*(addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::from((ip, u16::from_be(a.sin6_port))))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_carries_whole_datagrams_within_the_kernels_limits() {
        assert_eq!(max_send(1500), 43 * 1500);
        assert_eq!(max_send(500), 64 * 500, "at most 64 segments");
        assert_eq!(max_send(65_507), 65_507);
        assert!(max_send(0) > 0, "no division by zero");
    }

    /// A connected sender and a receiver on the runtime.
    #[cfg(target_os = "linux")]
    async fn pair() -> (std::net::UdpSocket, UdpSocket) {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        (a, b)
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn segmented_sends_arrive_as_the_datagrams_they_stand_for() {
        let (tx, rx) = pair().await;
        let contents: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        assert!(can_segment(&tx), "Linux since 4.18 has UDP_SEGMENT");
        try_send_segments(&tx, &contents, 1000).unwrap();
        // Without UDP_GRO on the receiver the kernel delivers the three datagrams apart.
        let mut buf = BytesMut::with_capacity(MAX_READ);
        let mut sizes = Vec::new();
        while sizes.iter().sum::<usize>() < contents.len() {
            let read = recv(&rx, &mut buf).await.unwrap();
            assert_eq!(read.from, tx.local_addr().unwrap());
            assert_eq!(read.segment, read.len);
            sizes.push(read.len);
        }
        assert_eq!(sizes, [1000, 1000, 500]);
        assert_eq!(&buf[..], &contents[..]);
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_coalescing_receiver_learns_the_datagram_size() {
        let (tx, rx) = pair().await;
        assert!(enable_coalescing(&rx), "Linux since 5.0 has UDP_GRO");
        let contents = vec![7u8; 2500];
        try_send_segments(&tx, &contents, 1000).unwrap();
        let mut buf = BytesMut::with_capacity(MAX_READ);
        let read = recv(&rx, &mut buf).await.unwrap();
        // Loopback hands the segmented send over whole.
        assert_eq!((read.len, read.segment), (2500, 1000));
    }
}
