//! Many datagrams per system call, on Linux. One `sendmsg` with a UDP_SEGMENT control
//! message sends consecutive datagrams of one size (the last may be shorter) as that many
//! datagrams (GSO). With UDP_GRO set, one read may return several datagrams that arrived
//! together, their size told in a control message. A 1 MB message of 1500-byte datagrams
//! then takes 16 sends and, on loopback, 16 reads instead of 700 of each. Reads go through
//! `recvmmsg`, several to a system call ([`READ_BATCH`]), which also tells when the socket
//! is drained.
//!
//! Elsewhere, and where the kernel refuses, everything goes one datagram per call.

use bytes::BytesMut;
use std::io;
use std::net::SocketAddr;
use tokio::net::UdpSocket;

/// Room a read needs for whatever the kernel may coalesce.
pub(crate) const MAX_READ: usize = 65_536;

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

/// Asks the kernel to stamp each datagram `socket` receives with the time it arrived
/// (`SO_TIMESTAMPNS`), which [`Reader`] hands on as [`Received::arrived`]: a governed
/// link's feedback reports when datagrams reached the machine, not when a busy process
/// got round to reading them (tens of milliseconds on a loaded one, read as a queue).
pub(crate) fn enable_arrival_stamps(socket: &UdpSocket) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let one: libc::c_int = 1;
        // SAFETY: a live socket's descriptor, and an int option passed by pointer and size.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = socket;
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

/// Most reads (each a datagram, or a run of datagrams the kernel coalesced) one system
/// call takes.
///
/// Asking for more than one is what spares the read that finds the socket empty: when
/// the kernel hands over fewer than asked, the socket is known to be drained, and the
/// runtime is told so without asking again (on S5's subscribers, one system call of
/// three per message). Four also takes a burst of separate datagrams (roscpp sends each
/// of a message's datagrams on its own) in a quarter of the calls. Each slot has a buffer
/// of its own, touched only when a burst reaches it.
pub(crate) const READ_BATCH: usize = 4;

/// A datagram, or a run of datagrams that arrived together, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Received {
    /// Datagrams of `segment` bytes each (the last may be shorter). This read's alone
    /// (split off the reader's buffer), so a sealed datagram is opened where it lies.
    pub datagrams: BytesMut,
    pub segment: usize,
    pub from: SocketAddr,
    /// When the kernel received them, on a socket with
    /// [`enable_arrival_stamps`]; `None` without.
    pub arrived: Option<std::time::Instant>,
}

impl Received {
    /// The datagrams one at a time, each still writable and its own; the last keeps the
    /// spare capacity the read came with ([`Reader::keeping_room`]).
    pub(crate) fn into_datagrams(self) -> impl Iterator<Item = BytesMut> {
        let segment = self.segment.max(1);
        let mut rest = self.datagrams;
        std::iter::from_fn(move || match segment.min(rest.len()) {
            0 => None,
            last if last == rest.len() => Some(std::mem::take(&mut rest)),
            take => Some(rest.split_to(take)),
        })
    }
}

/// What one system call brought, in arrival order.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    received: [Option<Received>; READ_BATCH],
    /// How many reads the kernel handed over, dropped ones included.
    reads: usize,
    /// Reads dropped: truncated (none should be, each buffer has room for the largest
    /// datagram), or from an address family other than IPv4 and IPv6.
    pub dropped: u64,
}

impl IntoIterator for Batch {
    type Item = Received;
    type IntoIter = std::iter::Flatten<std::array::IntoIter<Option<Received>, READ_BATCH>>;

    fn into_iter(self) -> Self::IntoIter {
        self.received.into_iter().flatten()
    }
}

/// Reads a socket's datagrams, as many per system call as it holds (up to
/// [`READ_BATCH`]), into buffers of its own.
#[derive(Debug)]
pub(crate) struct Reader {
    /// A buffer per slot of a batch, split per read: the steady state allocates only when
    /// a block of reads has been handed on.
    slots: [BytesMut; READ_BATCH],
    /// How many bytes a datagram wants after it, where it lies (see
    /// [`Reader::keeping_room`]).
    room: fn(&[u8]) -> usize,
}

impl Default for Reader {
    fn default() -> Reader {
        Reader::keeping_room(|_| 0)
    }
}

impl Reader {
    /// A reader that hands a datagram read alone the rest of its buffer too when `room`
    /// of it is not zero and fits there: its owner can then grow it in place (UDPROS
    /// reassembly builds a large message in its DATA0's buffer, so that block, on
    /// loopback a 64 kB datagram, is never copied). Its slot starts a new buffer. Such a
    /// datagram keeps that buffer, a few hundred kB at most, as long as it lives.
    pub(crate) fn keeping_room(room: fn(&[u8]) -> usize) -> Reader {
        Reader {
            slots: Default::default(),
            room,
        }
    }

    /// The next datagrams: waits until some arrive, then takes what the socket holds, up to
    /// [`READ_BATCH`] reads. Cancel-safe: nothing is lost if the wait is.
    pub(crate) async fn recv(&mut self, socket: &UdpSocket) -> io::Result<Batch> {
        #[cfg(target_os = "linux")]
        loop {
            socket.readable().await?;
            self.make_room();
            // A batch short of full drained the socket: it is handed back through here
            // while `try_io` is told "would block", which clears the runtime's readiness
            // (a datagram arriving after the read raises a new event) without the read
            // that would find the socket empty.
            let mut drained = None;
            let read = socket.try_io(tokio::io::Interest::READABLE, || {
                let batch = recvmmsg(socket, &mut self.slots, self.room)?;
                if batch.reads < READ_BATCH {
                    drained = Some(batch);
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok(batch)
            });
            match (read, drained) {
                (Ok(batch), _) | (Err(_), Some(batch)) => return Ok(batch),
                (Err(e), None) if e.kind() == io::ErrorKind::WouldBlock => continue,
                (Err(e), None) => return Err(e),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            self.make_room();
            let _ = self.room; // one datagram per call: nothing to hand over whole
            let slot = &mut self.slots[0];
            let (len, from) = socket.recv_buf_from(slot).await?;
            let mut batch = Batch::default();
            batch.reads = 1;
            batch.received[0] = Some(Received {
                datagrams: slot.split(),
                segment: len,
                from,
                arrived: None,
            });
            Ok(batch)
        }
    }

    /// Gives each slot room for a read of [`MAX_READ`]. Called once datagrams wait, not
    /// before the wait: by then the messages of the last read have usually been taken and
    /// dropped, so a slot whose buffer they shared is its only holder again and
    /// `reserve` reclaims that buffer in place. Made before the wait, while a reader still
    /// held the last message (a Python thread takes it only after the link's task has
    /// gone back to its socket), it was a new allocation for every message, which the
    /// kernel then wrote 100 kB into cold. (S3's Python subscriber: two profiles each way
    /// had a fifth fewer samples in the kernel's copy to user space; its thread's CPU per
    /// message over five runs each way moved less than the runs vary, about 48 µs.) When
    /// a slot must still allocate, it now does so after the wake, not before the wait.
    fn make_room(&mut self) {
        for slot in &mut self.slots {
            if slot.capacity() - slot.len() < MAX_READ {
                slot.reserve(4 * MAX_READ);
            }
        }
    }
}

/// One `recvmmsg` into the slots' spare room; "would block" when nothing waits.
#[cfg(target_os = "linux")]
fn recvmmsg(
    socket: &UdpSocket,
    slots: &mut [BytesMut; READ_BATCH],
    room: fn(&[u8]) -> usize,
) -> io::Result<Batch> {
    use std::os::fd::AsRawFd;
    // SAFETY (the zeroed values): all-zero is a valid sockaddr_storage and mmsghdr.
    let mut addrs: [libc::sockaddr_storage; READ_BATCH] = unsafe { std::mem::zeroed() };
    // u64s: cmsg headers need their alignment. Room for UDP_GRO's and SO_TIMESTAMPNS's.
    let mut controls = [[0u64; 12]; READ_BATCH];
    let mut iovs = slots.each_mut().map(|slot| {
        let spare = slot.spare_capacity_mut();
        libc::iovec {
            iov_base: spare.as_mut_ptr().cast(),
            iov_len: spare.len(),
        }
    });
    let mut msgs: [libc::mmsghdr; READ_BATCH] = unsafe { std::mem::zeroed() };
    for (i, m) in msgs.iter_mut().enumerate() {
        let h = &mut m.msg_hdr;
        h.msg_name = (&mut addrs[i] as *mut libc::sockaddr_storage).cast();
        h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        h.msg_iov = &mut iovs[i];
        h.msg_iovlen = 1;
        h.msg_control = controls[i].as_mut_ptr().cast();
        h.msg_controllen = std::mem::size_of_val(&controls[i]) as _;
    }
    // SAFETY: every pointer in `msgs` points at live memory of the size it states; the
    // kernel writes at most that much, and fills at most READ_BATCH entries.
    let n = unsafe {
        libc::recvmmsg(
            socket.as_raw_fd(),
            msgs.as_mut_ptr(),
            READ_BATCH as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut batch = Batch {
        reads: n as usize,
        ..Batch::default()
    };
    // The kernel stamps arrivals on the realtime clock; they are placed on the monotonic
    // one by how long before this read they were. Both clocks are read once, and only for
    // a socket that stamps.
    let mut clocks = None;
    for (i, (m, slot)) in msgs
        .iter()
        .zip(slots.iter_mut())
        .enumerate()
        .take(n as usize)
    {
        let len = m.msg_len as usize;
        if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            batch.dropped += 1;
            continue;
        }
        let mut segment = len;
        let mut arrived = None;
        // SAFETY: the control buffer as the kernel filled it, walked with its own macros.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&m.msg_hdr);
            while !cmsg.is_null() {
                let (level, kind) = ((*cmsg).cmsg_level, (*cmsg).cmsg_type);
                if level == libc::SOL_UDP && kind == libc::UDP_GRO {
                    let size =
                        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                    segment = usize::try_from(size).unwrap_or(len).clamp(1, len.max(1));
                }
                if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS {
                    let stamp =
                        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>());
                    let (read_at, read_wall) = *clocks.get_or_insert_with(|| {
                        (std::time::Instant::now(), std::time::SystemTime::now())
                    });
                    arrived = arrival_instant(stamp, read_at, read_wall);
                }
                cmsg = libc::CMSG_NXTHDR(&m.msg_hdr, cmsg);
            }
            // The kernel wrote `len` bytes into the slot's spare room.
            slot.set_len(slot.len() + len);
        }
        let start = slot.len() - len;
        let spare = slot.capacity() - slot.len();
        let wanted = if segment == len {
            room(&slot[start..])
        } else {
            0
        };
        let datagrams = if wanted > 0 && wanted <= spare {
            slot.split_off(start)
        } else {
            slot.split()
        };
        // A source of an unknown family cannot be checked against the publisher's.
        let Some(from) = socket_addr(&addrs[i]) else {
            batch.dropped += 1;
            continue;
        };
        batch.received[i] = Some(Received {
            datagrams,
            segment,
            from,
            arrived,
        });
    }
    Ok(batch)
}

/// A kernel arrival stamp (realtime) as an instant of the monotonic clock, given both
/// clocks at one moment after it; `None` for a stamp that does not read, or that claims to
/// be from the future or more than a second before (the realtime clock was stepped).
#[cfg(target_os = "linux")]
fn arrival_instant(
    stamp: libc::timespec,
    read_at: std::time::Instant,
    read_wall: std::time::SystemTime,
) -> Option<std::time::Instant> {
    let secs = u64::try_from(stamp.tv_sec).ok()?;
    let nanos = u32::try_from(stamp.tv_nsec)
        .ok()
        .filter(|&n| n < 1_000_000_000)?;
    let wall = std::time::UNIX_EPOCH + std::time::Duration::new(secs, nanos);
    let before = read_wall.duration_since(wall).ok()?;
    (before <= std::time::Duration::from_secs(1)).then(|| read_at - before)
}

/// The address a `sockaddr_storage` holds (one the kernel filled: a datagram's source, or
/// a control message's address copied into one); `None` for a family other than IPv4/IPv6.
#[cfg(target_os = "linux")]
fn socket_addr(addr: &libc::sockaddr_storage) -> Option<SocketAddr> {
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

    /// A connected sender and a receiver on the runtime.
    #[cfg(target_os = "linux")]
    async fn pair() -> (std::net::UdpSocket, UdpSocket) {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        (a, b)
    }

    /// Everything one `recv` brings, as (length, segment) pairs, checking the source.
    async fn read_once(
        reader: &mut Reader,
        rx: &UdpSocket,
        tx: &std::net::UdpSocket,
    ) -> Vec<(BytesMut, usize)> {
        let batch = reader.recv(rx).await.unwrap();
        assert_eq!(batch.dropped, 0);
        batch
            .into_iter()
            .map(|read| {
                assert_eq!(read.from, tx.local_addr().unwrap());
                (read.datagrams, read.segment)
            })
            .collect()
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn segmented_sends_arrive_as_the_datagrams_they_stand_for() {
        let (tx, rx) = pair().await;
        let contents: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        assert!(can_segment(&tx), "Linux since 4.18 has UDP_SEGMENT");
        try_send_segments(&tx, &contents, 1000).unwrap();
        // Without UDP_GRO on the receiver the kernel delivers the three datagrams apart,
        // and one read takes all three.
        let mut reader = Reader::default();
        let reads = read_once(&mut reader, &rx, &tx).await;
        let sizes: Vec<usize> = reads.iter().map(|(d, _)| d.len()).collect();
        assert_eq!(sizes, [1000, 1000, 500]);
        assert!(reads.iter().all(|(d, segment)| d.len() == *segment));
        let joined: Vec<u8> = reads.iter().flat_map(|(d, _)| d.to_vec()).collect();
        assert_eq!(joined, contents);
    }

    /// Each datagram of one `recv` as the link's task takes it: the reads split into
    /// their datagrams.
    async fn datagrams(reader: &mut Reader, rx: &UdpSocket) -> Vec<BytesMut> {
        let batch = reader.recv(rx).await.unwrap();
        batch
            .into_iter()
            .flat_map(Received::into_datagrams)
            .collect()
    }

    /// A message assembled in a read's buffer and dropped while the reader already waits
    /// for the next datagram (a Python thread takes a message only after the link's task
    /// has gone back to its socket) leaves its buffer to that next read: the kernel writes
    /// into memory the last message warmed, not into a new allocation.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_buffer_dropped_during_the_wait_takes_the_next_read() {
        let (tx, rx) = pair().await;
        let mut reader = Reader::keeping_room(|d| if d[0] == 1 { 10 * d.len() } else { 0 });
        tx.send(&[1; 2000]).unwrap();
        let first = datagrams(&mut reader, &rx).await;
        assert!(
            first[0].capacity() >= 11 * 2000,
            "it kept its buffer's room"
        );
        let at = first[0].as_ptr();
        let next = datagrams(&mut reader, &rx);
        let mut next = std::pin::pin!(next);
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(50), next.as_mut()).await;
        assert!(waited.is_err(), "nothing was sent yet");
        drop(first);
        tx.send(&[1; 2000]).unwrap();
        let second = next.await;
        assert_eq!(second[0][..], [1; 2000]);
        assert_eq!(
            second[0].as_ptr(),
            at,
            "read into the dropped message's buffer"
        );
    }

    /// A datagram that asks for room after it, and fits, comes with the rest of its
    /// buffer; the others come alone, and the next read starts a new buffer.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_datagram_that_wants_room_gets_its_buffers_spare_capacity() {
        let (tx, rx) = pair().await;
        // Room for ten times a datagram that starts with 1, none for the others.
        let mut reader = Reader::keeping_room(|d| if d[0] == 1 { 10 * d.len() } else { 0 });
        for first in [0u8, 1, 0] {
            tx.send(&[first; 2000]).unwrap();
            let got = datagrams(&mut reader, &rx).await;
            assert_eq!(got.len(), 1);
            assert_eq!(got[0][..], [first; 2000]);
            if first == 1 {
                assert!(got[0].capacity() >= 11 * 2000, "{}", got[0].capacity());
            } else {
                assert_eq!(got[0].capacity(), 2000);
            }
        }
        // Room the buffer does not have is not asked of it.
        let mut reader = Reader::keeping_room(|_| usize::MAX);
        tx.send(&[1; 100]).unwrap();
        assert_eq!(datagrams(&mut reader, &rx).await[0].capacity(), 100);
    }

    /// A datagram read long after it arrived carries the time it arrived, coalesced or
    /// not; without the option, none.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_late_read_tells_when_the_datagram_arrived() {
        let (tx, rx) = pair().await;
        let mut reader = Reader::default();
        tx.send(b"unstamped").unwrap();
        let batch = reader.recv(&rx).await.unwrap();
        assert!(batch.into_iter().all(|read| read.arrived.is_none()));
        enable_arrival_stamps(&rx);
        enable_coalescing(&rx);
        // The kernel turns stamping on for the machine a moment after the first socket
        // asks (deferred work); a datagram before that is stamped when it is read.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let sent = std::time::Instant::now();
        try_send_segments(&tx, &[1u8; 2500], 1000).unwrap();
        tx.send(b"second").unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let batch = reader.recv(&rx).await.unwrap();
        let read_at = std::time::Instant::now();
        let arrivals: Vec<_> = batch.into_iter().map(|read| read.arrived).collect();
        assert!(!arrivals.is_empty());
        for arrived in arrivals {
            let arrived = arrived.expect("stamped");
            // Loopback delivers at once: long before the read, not before the send.
            assert!(arrived + std::time::Duration::from_millis(150) <= read_at);
            assert!(arrived + std::time::Duration::from_millis(5) >= sent);
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_coalescing_receiver_learns_the_datagram_size() {
        let (tx, rx) = pair().await;
        assert!(enable_coalescing(&rx), "Linux since 5.0 has UDP_GRO");
        let contents = vec![7u8; 2500];
        try_send_segments(&tx, &contents, 1000).unwrap();
        let mut reader = Reader::default();
        let reads = read_once(&mut reader, &rx, &tx).await;
        // Loopback hands the segmented send over whole.
        assert_eq!(reads.len(), 1);
        let (datagrams, segment) = &reads[0];
        assert_eq!((datagrams.len(), *segment), (2500, 1000));
        let read = Received {
            datagrams: datagrams.clone(),
            segment: *segment,
            from: tx.local_addr().unwrap(),
            arrived: None,
        };
        let pieces: Vec<BytesMut> = read.into_datagrams().collect();
        let sizes: Vec<usize> = pieces.iter().map(|d| d.len()).collect();
        assert_eq!(sizes, [1000, 1000, 500]);
        assert!(pieces.iter().all(|d| d[..] == contents[..d.len()]));
    }

    /// A batch short of full tells the runtime the socket is drained without reading it
    /// again; what arrives later must still wake the reader, and a burst longer than a
    /// batch must come whole over several reads, in order.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn reads_take_what_waits_and_wake_for_what_comes_later() {
        let (tx, rx) = pair().await;
        let mut reader = Reader::default();
        let mut next = 0u32;
        let mut expected = 0u32;
        for burst in [1usize, 2, 3, 4, 5, 9, 1, 17] {
            // Each burst is sent only after the reader has drained the last one, from
            // another thread after a pause, so that the reader is waiting on readiness.
            let sender = tx.try_clone().unwrap();
            let first = next;
            let send = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(5));
                for seq in first..first + burst as u32 {
                    sender.send(&seq.to_le_bytes()).unwrap();
                }
            });
            next += burst as u32;
            while expected < next {
                let reads = tokio::time::timeout(
                    std::time::Duration::from_secs(10),
                    read_once(&mut reader, &rx, &tx),
                )
                .await
                .expect("a datagram sent after a drained batch wakes the reader");
                assert!(!reads.is_empty() && reads.len() <= READ_BATCH);
                for (datagram, _) in reads {
                    assert_eq!(datagram[..], expected.to_le_bytes());
                    expected += 1;
                }
            }
            send.join().unwrap();
        }
        assert_eq!(expected, 42);
    }

    /// The buffers a reader keeps stay bounded however much passes through it: each slot
    /// allocates a new block only once the last is used up.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_reader_passes_megabytes_through_bounded_buffers() {
        let (tx, rx) = pair().await;
        let mut reader = Reader::default();
        let datagram = vec![0xa5u8; 60_000];
        let mut received = 0usize;
        for _ in 0..200 {
            tx.send(&datagram).unwrap();
            for (d, _) in read_once(&mut reader, &rx, &tx).await {
                assert_eq!(d.len(), datagram.len());
                received += d.len();
            }
            let held: usize = reader.slots.iter().map(|s| s.capacity()).sum();
            assert!(held <= READ_BATCH * 5 * MAX_READ, "{held} bytes held");
        }
        assert_eq!(received, 200 * 60_000);
    }
}
