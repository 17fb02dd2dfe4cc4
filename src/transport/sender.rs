//! The sending end of one subscriber link: its socket and the protocol state that goes
//! with it (UDPROS message ids and pacing, a TCP write cut short), behind the link's lock.
//!
//! The link's task drains its queue through it. `publish` also uses it directly when the
//! link is idle, as roscpp writes from the publishing thread: a small message then leaves
//! without waking another task, which on a multi-threaded runtime is a cross-thread wake
//! per message, the largest part of the latency on a quiet link.

use super::send_socket::SendSocket;
use super::{offload, LinkStats};
use crate::wire::link::HEARTBEAT;
use crate::wire::udpros::{FragmentError, Fragmenter, Pacer, HEADER_LEN};
use bytes::Bytes;
use std::io;
use std::time::Instant;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;

/// Without segmentation offload, messages of more datagrams than this always go through
/// the link's task: sending them would hold up the publishing thread.
const DIRECT_MAX_DATAGRAMS: usize = 8;
/// With segmentation offload, messages that take up to this many sends (about 128 kB of
/// 1500-byte datagrams: a compressed camera frame) go directly from the publishing thread;
/// larger ones through the link's task. Handing a 100 kB message to the task cost the
/// publisher a wake of the runtime's thread, and the subscriber often a second wake for
/// the task's later second send (S3, 6 alternated runs: p50 216 → 158 µs, p99 345 → 244,
/// publisher CPU -28 %, subscriber's -9 %). Two sends hold the caller for tens of µs; the
/// twenty of a 1 MB message would hold it too long.
const DIRECT_MAX_SENDS: usize = 2;
/// TCP frames larger than this go through the link's task, for the same reason (S3 over
/// TCPROS, 100 kB frames sent from the caller instead of the task: p50 202 → 173 µs).
const DIRECT_MAX_TCP_BYTES: usize = 128 << 10;
/// Queued small TCP frames are joined into writes of up to this size.
const TCP_BATCH_BYTES: usize = 64 << 10;

/// What an attempt to send a frame at once came to.
#[derive(Debug)]
pub(super) enum Attempt {
    /// Gone whole.
    Sent,
    /// Nothing was sent: the frame goes to the queue.
    NotNow,
    /// Partly sent; the rest waits in the wire for the link's task, which must be woken.
    Started,
    /// The link is broken.
    Failed(io::Error),
}

pub(super) enum Wire {
    Udp(UdpWire),
    Tcp(TcpWire),
}

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Wire::Udp(_) => "Wire::Udp",
            Wire::Tcp(_) => "Wire::Tcp",
        })
    }
}

impl Wire {
    /// A UDP link; `route_mtu` is the MTU of the route to the subscriber, if known.
    pub(super) fn udp(
        socket: SendSocket,
        fragmenter: Fragmenter,
        udpros_peer: bool,
        route_mtu: Option<usize>,
    ) -> Wire {
        Wire::Udp(UdpWire::new(socket, fragmenter, udpros_peer, route_mtu))
    }

    pub(super) fn tcp(writer: OwnedWriteHalf) -> Wire {
        Wire::Tcp(TcpWire {
            writer,
            unfinished: None,
            batch: Vec::new(),
        })
    }

    /// Whether the link's task must send heartbeats (udpros UDP peers only: roscpp drops
    /// a link on PING).
    pub(super) fn wants_heartbeats(&self) -> bool {
        matches!(self, Wire::Udp(w) if w.udpros_peer)
    }

    /// Sends a frame without waiting, if it is small, the pacing budget allows it and the
    /// kernel takes it; never blocks.
    pub(super) fn try_send_now(&mut self, frame: &Bytes) -> Attempt {
        match self {
            Wire::Udp(w) => w.try_send_now(frame),
            Wire::Tcp(w) => w.try_send_now(frame),
        }
    }

    /// Completes what [`try_send_now`](Self::try_send_now) started.
    pub(super) async fn finish(&mut self) -> io::Result<()> {
        match self {
            Wire::Udp(w) => w.finish().await,
            Wire::Tcp(w) => w.finish().await,
        }
    }

    /// Sends queued frames in order, counting each in `stats`; leaves `frames` empty.
    pub(super) async fn send_all(
        &mut self,
        frames: &mut Vec<Bytes>,
        stats: &LinkStats,
    ) -> io::Result<()> {
        match self {
            Wire::Udp(w) => w.send_all(frames, stats).await,
            Wire::Tcp(w) => w.send_all(frames, stats).await,
        }
    }

    /// The queue is drained: a UDP socket that had to wait for room leaves the runtime's
    /// poll set (see [`SendSocket`]).
    pub(super) fn unwatch(&mut self) {
        if let Wire::Udp(w) = self {
            w.socket.unwatch();
        }
    }

    /// A PING if nothing left for a heartbeat period. The link is idle then, so a socket
    /// that had to wait for room (for the PING or before it) leaves the poll set after it.
    pub(super) async fn heartbeat(&mut self) -> io::Result<()> {
        match self {
            Wire::Udp(w) if w.last_sent.elapsed() >= HEARTBEAT => {
                let sent = match w.socket.send(&w.fragmenter.ping()).await {
                    // An earlier datagram's "fragmentation needed", reported here.
                    Err(e) if w.dropped_oversize(&e) => Ok(()),
                    other => other.map(drop),
                };
                w.socket.unwatch();
                sent
            }
            _ => Ok(()),
        }
    }

    /// Tells a udpros UDP peer the link is closing (TCP peers see the connection close).
    pub(super) async fn goodbye(&mut self) {
        if let Wire::Udp(w) = self {
            if w.udpros_peer {
                let _ = w.socket.send(&w.fragmenter.err()[..HEADER_LEN]).await;
            }
        }
    }
}

/// Datagram pacing toward a subscriber: udpros subscribers size their receive buffers for
/// whole messages. roscpp's is the kernel default (about 200 kB) and it reads a datagram
/// per call, so bursts stay well under that buffer; messages that fit it leave at 250 MB/s,
/// larger ones are spread over half their publishing period, never slower than 40 MB/s (a
/// rate roscpp keeps up with: 1 MB at 20 Hz went from 64-78 % delivered at 250 MB/s to
/// 100 %).
/// `fragments`: the IP fragments each datagram becomes on the route. Each takes a
/// packet's share of a roscpp subscriber's receive buffer, so the budget toward roscpp
/// shrinks with them (measured at MTU 576, 100 kB messages: 12 of 20 arrived unscaled).
fn pacer_for(udpros_peer: bool, fragments: usize) -> Pacer {
    if udpros_peer {
        Pacer::new(1_500_000_000, 4 << 20)
    } else {
        let f = fragments.max(1);
        Pacer::spreading(
            250_000_000 / f as u64,
            40_000_000 / f as u64,
            (96 << 10) / f,
            (128 << 10) / f,
        )
    }
}

/// How many IP fragments a datagram of `size` bytes becomes on a route of `route_mtu`.
fn fragments_per_datagram(route_mtu: Option<usize>, size: usize) -> usize {
    let Some(mtu) = route_mtu else {
        return 1;
    };
    // Each fragment carries a multiple of 8 bytes of the UDP datagram (header included).
    let per_fragment = (mtu.saturating_sub(20) / 8 * 8).max(8);
    (size + 8).div_ceil(per_fragment)
}

pub(super) struct UdpWire {
    socket: SendSocket,
    fragmenter: Fragmenter,
    pacer: Pacer,
    /// Datagrams to send, back to back, each `segment` bytes but the last, as one
    /// segmented send wants them: one message's fragments, or several small messages.
    out: Vec<u8>,
    segment: usize,
    /// How much of `out` has left; the rest is what the kernel interrupted.
    sent: usize,
    /// Whether the kernel cuts our sends into datagrams (see [`offload`]).
    segmenting: bool,
    last_sent: Instant,
    udpros_peer: bool,
    /// Messages dropped because a send was refused with EMSGSIZE.
    oversize_drops: u64,
}

impl UdpWire {
    fn new(
        socket: SendSocket,
        fragmenter: Fragmenter,
        udpros_peer: bool,
        route_mtu: Option<usize>,
    ) -> UdpWire {
        let fragments = fragments_per_datagram(route_mtu, fragmenter.max_datagram_size());
        UdpWire {
            segmenting: offload::can_segment(socket.socket()),
            socket,
            segment: fragmenter.max_datagram_size(),
            pacer: pacer_for(udpros_peer, fragments),
            fragmenter,
            out: Vec::new(),
            sent: 0,
            last_sent: Instant::now(),
            udpros_peer,
            oversize_drops: 0,
        }
    }

    fn unfinished(&self) -> bool {
        self.sent < self.out.len()
    }

    /// Lays out a message's datagrams in `out`; takes its message id.
    fn load(&mut self, frame: &Bytes) -> Result<(), FragmentError> {
        self.out.clear();
        self.sent = 0;
        self.segment = self.fragmenter.max_datagram_size();
        self.fragmenter.write_datagrams(frame, &mut self.out)?;
        Ok(())
    }

    /// Lays out, from the front of `frames`, messages of one datagram each and all of
    /// `frames[0]`'s size, as many as one segmented send carries. Returns how many.
    fn load_small(&mut self, frames: &[Bytes]) -> usize {
        let size = frames[0].len();
        if self.fragmenter.blocks_for(size) != 1 {
            return 0;
        }
        let segment = HEADER_LEN + size;
        let most = offload::max_send(segment) / segment;
        self.out.clear();
        self.sent = 0;
        self.segment = segment;
        let mut taken = 0;
        for frame in frames.iter().take(most).take_while(|f| f.len() == size) {
            if self
                .fragmenter
                .write_datagrams(frame, &mut self.out)
                .is_err()
            {
                break;
            }
            taken += 1;
        }
        taken
    }

    /// How many bytes of `out` the next send carries: as many whole datagrams as one
    /// segmented send takes, or one datagram.
    fn next_send_len(&self) -> usize {
        let most = if self.segmenting {
            offload::max_send(self.segment)
        } else {
            self.segment
        };
        (self.out.len() - self.sent).min(most)
    }

    /// A kernel that refuses segmented sends on this route (an interface without checksum
    /// offload, or segments larger than the path MTU: a VPN, a tether) gets one datagram
    /// per send from now on, which IP fragments as it does roscpp's.
    fn refused_segmenting(&mut self, e: &io::Error, len: usize) -> bool {
        let refused = self.segmenting
            && len > self.segment
            && matches!(
                e.raw_os_error(),
                Some(
                    libc::EIO
                        | libc::EINVAL
                        | libc::EOPNOTSUPP
                        | libc::ENOPROTOOPT
                        | libc::EMSGSIZE
                )
            );
        if refused {
            tracing::info!("UDP segmentation refused ({e}); sending datagram by datagram");
            self.segmenting = false;
        }
        refused
    }

    /// EMSGSIZE for one datagram: the path MTU shrank under a datagram that may not be
    /// fragmented, or an earlier datagram's ICMP "fragmentation needed" surfaced on this
    /// send. Either way the message is lost, not the link: the rest of what is loaded is
    /// dropped and sending goes on.
    fn dropped_oversize(&mut self, e: &io::Error) -> bool {
        if e.raw_os_error() != Some(libc::EMSGSIZE) {
            return false;
        }
        self.oversize_drops += 1;
        if self.oversize_drops == 1 {
            tracing::warn!("UDP send refused ({e}); dropping the message, keeping the link");
        }
        self.sent = self.out.len();
        true
    }

    /// One send of the next datagrams of `out`, without waiting.
    fn try_send_some(&mut self) -> io::Result<()> {
        let len = self.next_send_len();
        let datagrams = &self.out[self.sent..self.sent + len];
        match offload::try_send_segments(self.socket.socket(), datagrams, self.segment) {
            Ok(()) => {
                self.sent += len;
                Ok(())
            }
            Err(e) if self.refused_segmenting(&e, len) || self.dropped_oversize(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// One send of the next datagrams of `out`.
    async fn send_some(&mut self) -> io::Result<()> {
        let len = self.next_send_len();
        let datagrams = &self.out[self.sent..self.sent + len];
        let segment = self.segment;
        let sent = self
            .socket
            .send_with(|socket| offload::try_send_segments(socket, datagrams, segment))
            .await;
        match sent {
            Ok(()) => {
                self.sent += len;
                Ok(())
            }
            Err(e) if self.refused_segmenting(&e, len) || self.dropped_oversize(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn try_send_now(&mut self, frame: &Bytes) -> Attempt {
        let blocks = self.fragmenter.blocks_for(frame.len());
        let bytes = frame.len() + blocks * HEADER_LEN;
        let small = if self.segmenting {
            bytes <= DIRECT_MAX_SENDS * offload::max_send(self.fragmenter.max_datagram_size())
        } else {
            blocks <= DIRECT_MAX_DATAGRAMS
        };
        let now = Instant::now();
        if self.unfinished() || !small || !self.pacer.try_reserve(now, bytes) {
            return Attempt::NotNow;
        }
        self.pacer.message(now, bytes);
        if self.load(frame).is_err() {
            return Attempt::NotNow; // the link's task counts it as dropped
        }
        while self.unfinished() {
            match self.try_send_some() {
                Ok(()) => {}
                // The message id is taken: the rest must follow under it.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Attempt::Started,
                Err(e) => return Attempt::Failed(e),
            }
        }
        self.last_sent = now;
        Attempt::Sent
    }

    async fn finish(&mut self) -> io::Result<()> {
        // Its bytes were reserved with the pacer when it started.
        if self.unfinished() {
            while self.unfinished() {
                self.send_some().await?;
            }
            self.last_sent = Instant::now();
        }
        Ok(())
    }

    /// Sends queued frames in order: runs of small frames of one size together, larger
    /// ones a message at a time, all paced.
    async fn send_all(&mut self, frames: &mut Vec<Bytes>, stats: &LinkStats) -> io::Result<()> {
        let mut next = 0;
        while next < frames.len() {
            let taken = match self.segmenting {
                true => self.load_small(&frames[next..]),
                false => 0,
            };
            let batch = if taken > 0 {
                &frames[next..next + taken]
            } else if self.load(&frames[next]).is_ok() {
                &frames[next..next + 1]
            } else {
                stats
                    .drops
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                next += 1;
                continue;
            };
            for frame in batch {
                let blocks = self.fragmenter.blocks_for(frame.len());
                self.pacer
                    .message(Instant::now(), frame.len() + blocks * HEADER_LEN);
            }
            while self.unfinished() {
                let at = self.pacer.reserve(Instant::now(), self.next_send_len());
                if at > Instant::now() {
                    tokio::time::sleep_until(at.into()).await;
                }
                self.send_some().await?;
            }
            batch.iter().for_each(|f| stats.add_message(f.len()));
            next += batch.len();
            self.last_sent = Instant::now();
        }
        frames.clear();
        Ok(())
    }
}

pub(super) struct TcpWire {
    writer: OwnedWriteHalf,
    /// The tail of a frame the kernel took only part of.
    unfinished: Option<Bytes>,
    batch: Vec<u8>,
}

impl TcpWire {
    fn try_send_now(&mut self, frame: &Bytes) -> Attempt {
        if self.unfinished.is_some() || frame.len() > DIRECT_MAX_TCP_BYTES {
            return Attempt::NotNow;
        }
        match self.writer.try_write(frame) {
            Ok(n) if n == frame.len() => Attempt::Sent,
            Ok(0) => Attempt::NotNow,
            Ok(n) => {
                self.unfinished = Some(frame.slice(n..));
                Attempt::Started
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Attempt::NotNow,
            Err(e) => Attempt::Failed(e),
        }
    }

    async fn finish(&mut self) -> io::Result<()> {
        match self.unfinished.take() {
            Some(rest) => self.writer.write_all(&rest).await,
            None => Ok(()),
        }
    }

    async fn send_all(&mut self, frames: &mut Vec<Bytes>, stats: &LinkStats) -> io::Result<()> {
        // Several small frames go out in one write; large ones as they are.
        let total: usize = frames.iter().map(Bytes::len).sum();
        if frames.len() > 1 && total <= TCP_BATCH_BYTES {
            self.batch.clear();
            frames.iter().for_each(|f| self.batch.extend_from_slice(f));
            self.writer.write_all(&self.batch).await?;
            frames.drain(..).for_each(|f| stats.add_message(f.len()));
            return Ok(());
        }
        for frame in frames.drain(..) {
            self.writer.write_all(&frame).await?;
            stats.add_message(frame.len());
        }
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::transport::send_socket::tests::{on_a_slow_loopback, sender_to};
    use std::time::Duration;
    use udpros_core::udpros::{DatagramHeader, Opcode};

    /// A message sent from the publishing thread that finds the send buffer full keeps
    /// the id it took and is finished by the link's task: every message arrives whole, in
    /// order, with its own id.
    #[test]
    fn messages_that_find_no_room_are_finished_whole() {
        on_a_slow_loopback(|| async {
            const MESSAGES: usize = 100;
            let rx = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let socket = sender_to(rx.local_addr().unwrap(), 64 << 10);
            let fragmenter = Fragmenter::new(7, 65_000).unwrap();
            let mut wire = Wire::udp(socket, fragmenter, true, None);
            let frames: Vec<Bytes> = (0..MESSAGES)
                .map(|i| Bytes::from(vec![i as u8; 60_000]))
                .collect();
            let reader = tokio::spawn(async move {
                let mut buf = vec![0u8; 65_536];
                let mut got = Vec::new();
                while got.len() < MESSAGES {
                    let read = tokio::time::timeout(Duration::from_secs(10), rx.recv(&mut buf));
                    let Ok(Ok(n)) = read.await else { break };
                    got.push(buf[..n].to_vec());
                }
                got
            });
            let (mut sent, mut started) = (0, 0);
            for frame in &frames {
                match wire.try_send_now(frame) {
                    Attempt::Sent => sent += 1,
                    Attempt::Started => {
                        started += 1;
                        tokio::time::timeout(Duration::from_secs(10), wire.finish())
                            .await
                            .expect("the queue drains")
                            .unwrap();
                    }
                    Attempt::NotNow => panic!("the pacer toward a udpros peer allows 4 MB"),
                    Attempt::Failed(e) => panic!("{e}"),
                }
            }
            // 6 MB through a 64 kB send buffer at 25 MB/s: sends found no room.
            assert!(started > 0 && sent > 0, "sent {sent}, started {started}");
            let got = reader.await.unwrap();
            assert_eq!(got.len(), MESSAGES);
            let mut id = 0;
            for (datagram, frame) in got.iter().zip(&frames) {
                let header = DatagramHeader::parse(datagram).expect("a UDPROS header");
                assert_eq!((header.opcode, header.block), (Opcode::Data0, 1));
                assert_eq!(header.connection_id, 7);
                id = udpros_core::udpros::next_message_id(id);
                assert_eq!(header.message_id, id, "ids in order, none skipped");
                assert_eq!(&datagram[HEADER_LEN..], &frame[..]);
            }
        });
    }

    /// Over UDPROS with segmentation, a 100 kB message leaves from the caller at once,
    /// whole; one larger than [`DIRECT_MAX_SENDS`] sends is left to the link's task.
    #[tokio::test]
    async fn a_camera_frame_leaves_from_the_caller_and_larger_ones_through_the_task() {
        let rx = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        socket2::SockRef::from(&rx)
            .set_recv_buffer_size(4 << 20)
            .unwrap();
        let socket = sender_to(rx.local_addr().unwrap(), 4 << 20);
        let datagram = 1500;
        let mut wire = Wire::udp(socket, Fragmenter::new(7, datagram).unwrap(), true, None);
        let Wire::Udp(w) = &wire else {
            unreachable!("a UDP wire")
        };
        assert!(w.segmenting, "Linux since 4.18 has UDP_SEGMENT");
        // S3's compressed image.
        let fits = Bytes::from(vec![3u8; 100_000]);
        assert!(matches!(wire.try_send_now(&fits), Attempt::Sent));
        let mut buf = vec![0u8; 65_536];
        let mut received = 0;
        while received < fits.len() {
            let n = tokio::time::timeout(Duration::from_secs(5), rx.recv(&mut buf))
                .await
                .expect("every datagram arrives")
                .unwrap();
            assert!(
                n <= datagram,
                "datagrams of at most {datagram} bytes, got {n}"
            );
            received += n - HEADER_LEN;
        }
        assert_eq!(received, fits.len());
        let larger = Bytes::from(vec![
            4u8;
            DIRECT_MAX_SENDS * offload::max_send(datagram) + 1
        ]);
        assert!(matches!(wire.try_send_now(&larger), Attempt::NotNow));
    }

    /// A heartbeat goes out on an idle link, and a socket left in the poll set by sends
    /// that had to wait leaves it then, rather than at the next drain of a queue that may
    /// stay empty for long (meanwhile every freed datagram would wake the runtime).
    #[test]
    fn a_heartbeat_leaves_the_poll_set_behind_it() {
        on_a_slow_loopback(|| async {
            let rx = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let socket = sender_to(rx.local_addr().unwrap(), 64 << 10);
            let mut wire = Wire::udp(socket, Fragmenter::new(7, 65_000).unwrap(), true, None);
            let frame = Bytes::from(vec![1u8; 60_000]);
            let mut waited = false;
            for _ in 0..100 {
                if let Attempt::Started = wire.try_send_now(&frame) {
                    wire.finish().await.unwrap();
                    waited = true;
                    break;
                }
            }
            let Wire::Udp(w) = &mut wire else {
                unreachable!("a UDP wire")
            };
            assert!(waited && w.socket.watched(), "a send had to wait for room");
            w.last_sent -= HEARTBEAT;
            wire.heartbeat().await.unwrap();
            let Wire::Udp(w) = &wire else {
                unreachable!("a UDP wire")
            };
            assert!(
                !w.socket.watched(),
                "still in the poll set after the heartbeat"
            );
        });
    }
}
