//! The sending end of one subscriber link: its socket and the protocol state that goes
//! with it (UDPROS message ids and pacing, a TCP write cut short), behind the link's lock.
//!
//! The link's task drains its queue through it. `publish` also uses it directly when the
//! link is idle, as roscpp writes from the publishing thread: a small message then leaves
//! without waking another task, which on a multi-threaded runtime is a cross-thread wake
//! per message, the largest part of the latency on a quiet link.

use super::host_share::HostShare;
use super::LinkStats;
use super::{FecSendCounters, GovernorCell, SecureCell};
use crate::socket::{offload, SendSocket};
use crate::wire::freshness::{Cadence, Freshness};
use crate::wire::host_budget::Traffic;
use crate::wire::link_setup::SenderTerms;
use crate::wire::secure::stream::StreamSealer;
use crate::wire::udpros::{AfterError, FragmentError, SendError, UdpSender, FRESHNESS};
use bytes::Bytes;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;

/// TCP frames larger than this go through the link's task, for the same reason (S3 over
/// TCPROS, 100 kB frames sent from the caller instead of the task: p50 202 → 173 µs).
const DIRECT_MAX_TCP_BYTES: usize = 128 << 10;
/// Queued small TCP frames are joined into writes of up to this size.
const TCP_BATCH_BYTES: usize = 64 << 10;

/// A frame waiting in a link's queue, with the moment it was published.
#[derive(Debug, Clone)]
pub(super) struct QueuedFrame {
    pub frame: Bytes,
    /// When it was published; `None` for a publisher that waited for room so as to lose
    /// nothing, whose messages never go stale.
    pub at: Option<Instant>,
}

impl QueuedFrame {
    /// A frame published at `at`.
    pub(super) fn published(frame: Bytes, at: Instant) -> QueuedFrame {
        QueuedFrame {
            frame,
            at: Some(at),
        }
    }

    /// A frame that is sent however late.
    pub(super) fn never_stale(frame: Bytes) -> QueuedFrame {
        QueuedFrame { frame, at: None }
    }

    /// Its size, length prefix included: what the queue's byte bound weighs.
    pub(super) fn len(&self) -> usize {
        self.frame.len()
    }
}

/// What an attempt to send a frame at once came to.
#[derive(Debug)]
pub(super) enum DirectSend {
    /// Gone whole.
    Sent,
    /// Nothing was sent: the frame goes to the queue.
    NotNow,
    /// Partly sent; the rest waits in the link's sender for its task, which must be woken.
    Started,
    /// The link is broken.
    Failed(io::Error),
}

pub(super) enum LinkSender {
    /// Boxed: the link's send state (buffers, pacer, FEC work) is several times a TCP
    /// link's, and one pointer per publish costs nothing beside the send.
    Udp(Box<UdpLinkSender>),
    Tcp(TcpLinkSender),
}

impl std::fmt::Debug for LinkSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LinkSender::Udp(_) => "LinkSender::Udp",
            LinkSender::Tcp(_) => "LinkSender::Tcp",
        })
    }
}

impl LinkSender {
    /// A UDP link sending on `socket` by the `terms` its publication settled with the
    /// subscriber (see [`SenderTerms::sender`]); `cells` are where it publishes what the
    /// statistics calls show.
    pub(super) fn udp(
        socket: SendSocket,
        terms: &SenderTerms,
        cells: SenderCells,
    ) -> Result<LinkSender, FragmentError> {
        let loopback = socket
            .socket()
            .peer_addr()
            .is_ok_and(|peer| peer.ip().is_loopback());
        let segmenting = offload::can_segment(socket.socket());
        let link = terms.sender(Instant::now(), segmenting, loopback)?;
        let mut sender = UdpLinkSender::new(socket, link);
        sender.cells = cells;
        Ok(LinkSender::Udp(Box::new(sender)))
    }

    /// A TCP link; `freshness`, the rule that drops what would arrive stale (links off
    /// this host, whose kernel holds little unsent); `sealer`, on a secure link.
    pub(super) fn tcp(
        writer: OwnedWriteHalf,
        freshness: Option<Freshness>,
        sealer: Option<StreamSealer>,
    ) -> LinkSender {
        LinkSender::Tcp(TcpLinkSender {
            writer,
            unfinished: None,
            batch: Vec::new(),
            freshness,
            host: None,
            sealer: sealer.map(Box::new),
            sealed: Vec::new(),
        })
    }

    /// The link takes from `host`, the budget every link of the node to its subscriber's
    /// host shares (see [`crate::wire::host_budget`]), before each send.
    pub(super) fn share_host(&mut self, host: HostShare) {
        match self {
            LinkSender::Udp(w) => w.host = Some(host),
            LinkSender::Tcp(w) => w.host = Some(host),
        }
    }

    /// When an idle link's task must wake for the link's next heartbeat (udpros UDP peers
    /// only: roscpp drops a link on PING); `None` when it has none.
    pub(super) fn next_heartbeat(&self) -> Option<Instant> {
        match self {
            LinkSender::Udp(w) if !w.link.is_sending() => w.link.poll_timeout(),
            _ => None,
        }
    }

    /// Sends a frame without waiting, if it is small, the pacing budget allows it and the
    /// kernel takes it; never blocks.
    pub(super) fn try_send_now(&mut self, frame: &Bytes) -> DirectSend {
        match self {
            LinkSender::Udp(w) => w.try_send_now(frame),
            LinkSender::Tcp(w) => w.try_send_now(frame),
        }
    }

    /// Completes what [`try_send_now`](Self::try_send_now) started.
    pub(super) async fn finish(&mut self) -> io::Result<()> {
        match self {
            LinkSender::Udp(w) => w.finish().await,
            LinkSender::Tcp(w) => w.finish().await,
        }
    }

    /// Sends queued frames in order, counting each in `stats` (and those dropped as
    /// stale in its drops); leaves `frames` empty.
    pub(super) async fn send_all(
        &mut self,
        frames: &mut Vec<QueuedFrame>,
        stats: &LinkStats,
    ) -> io::Result<()> {
        match self {
            LinkSender::Udp(w) => {
                // The UDP link judges staleness by its governor's rate (see
                // `UdpSender::drop_stale`): it needs the frames only.
                let mut bytes = std::mem::take(&mut w.frames);
                let sent = if w.host.is_some() {
                    // Sharing its host's budget, the link waits between messages and gets
                    // less than the rate it judges staleness by, so it sends one message at
                    // a time and judges the rest before each: what would have waited
                    // longer than FRESHNESS when the budget's turn comes goes, and of the
                    // rest, the older ones that the link's rate cannot carry within it
                    // (`UdpSender::drop_stale`, the newest first; never the newest).
                    let mut sent = Ok(());
                    let mut next = 0;
                    while let (Some(host), true) = (&w.host, next < frames.len() && sent.is_ok()) {
                        let turn = Instant::now() + host.behind(Instant::now());
                        let late = late_from(&frames[next..], turn, FRESHNESS);
                        // The rate rule on the newest JUDGED_AT_ONCE only, so that a long
                        // queue costs no more than that per message: when it drops any of
                        // them, everything older goes too (it would arrive later still).
                        let from = (next + late).max(frames.len().saturating_sub(JUDGED_AT_ONCE));
                        bytes.extend(frames[from..].iter().map(|q| q.frame.clone()));
                        let stale = match w.link.drop_stale(&mut bytes) {
                            0 => 0,
                            dropped => from - (next + late) + dropped,
                        };
                        if late + stale > 0 {
                            stats.drops.fetch_add(
                                (late + stale) as u64,
                                std::sync::atomic::Ordering::Relaxed,
                            );
                        }
                        next += late + stale;
                        bytes.clear();
                        bytes.push(frames[next].frame.clone());
                        next += 1;
                        sent = w.send_all(&mut bytes, stats).await;
                    }
                    frames.clear();
                    sent
                } else {
                    bytes.extend(frames.drain(..).map(|q| q.frame));
                    w.send_all(&mut bytes, stats).await
                };
                bytes.clear();
                w.frames = bytes;
                sent
            }
            LinkSender::Tcp(w) => w.send_all(frames, stats).await,
        }
    }

    /// Until when to hold back the newest of `frames` (the link's queue, oldest first) for
    /// a fresher message `cadence` says is due soon (see [`Cadence::hold`]); `None` to send
    /// now. Only a UDP link held to a rate below what is published holds: elsewhere a
    /// message leaves as soon as it comes. A governed link that probes holds only when it
    /// can send filler meanwhile ([`fill_hold`](Self::fill_hold)): not when it shares its
    /// host's budget, whose other links the filler would take it from.
    pub(super) fn hold_until(
        &mut self,
        cadence: &Cadence,
        frames: &[QueuedFrame],
    ) -> Option<Instant> {
        let LinkSender::Udp(w) = self else {
            return None;
        };
        if w.link.probing() && !w.may_fill() {
            return None;
        }
        let newest = frames.last()?;
        let published = newest.at?;
        let send_time = w.link.send_time(newest.len())?;
        let now = Instant::now();
        let start = now
            + w.host
                .as_ref()
                .map_or(Duration::ZERO, |host| host.behind(now));
        cadence.hold(now, start, published, send_time)
    }

    /// Waits until `deadline` while the link holds a message back
    /// ([`hold_until`](Self::hold_until)). A governed UDP link whose governor probes sends
    /// filler meanwhile, at its pacing (see
    /// [`UdpSender::load_filler`](crate::wire::udpros::UdpSender::load_filler)). Safe to
    /// cancel when the fresher message comes: filler that has not left is dropped by the
    /// next [`send_all`](Self::send_all).
    pub(super) async fn fill_hold(&mut self, deadline: Instant) -> io::Result<()> {
        if let LinkSender::Udp(w) = self {
            if w.may_fill() {
                w.fill_until(deadline).await?;
            }
        }
        tokio::time::sleep_until(deadline.into()).await;
        Ok(())
    }

    /// The queue is drained: a UDP socket that had to wait for room leaves the runtime's
    /// poll set (see [`SendSocket`]).
    pub(super) fn unwatch(&mut self) {
        if let LinkSender::Udp(w) = self {
            w.socket.unwatch();
        }
    }

    /// A PING if nothing left for a heartbeat period. The link is idle then, so a socket
    /// that had to wait for room (for the PING or before it) leaves the poll set after it.
    pub(super) async fn heartbeat(&mut self) -> io::Result<()> {
        let LinkSender::Udp(w) = self else {
            return Ok(());
        };
        let Some(ping) = w.link.poll_heartbeat(Instant::now()) else {
            return Ok(());
        };
        let sent = match w.socket.send(&ping).await {
            Ok(_) => Ok(()),
            Err(e) => w.recover(e),
        };
        w.socket.unwatch();
        sent
    }

    /// Tells a udpros UDP peer the link is closing (TCP peers see the connection close).
    pub(super) async fn goodbye(&mut self) {
        if let LinkSender::Udp(w) = self {
            if let Some(bye) = w.link.goodbye() {
                let _ = w.socket.send(&bye).await;
            }
        }
    }
}

/// Queued messages a link sharing its host's budget judges by its rate before each send.
const JUDGED_AT_ONCE: usize = 64;

/// How many at the front of `frames` (oldest first) were published more than `bound`
/// before `now`, never counting the newest.
fn late_from(frames: &[QueuedFrame], now: Instant, bound: Duration) -> usize {
    frames
        .iter()
        .take(frames.len().saturating_sub(1))
        .take_while(|q| {
            q.at.is_some_and(|at| now.saturating_duration_since(at) > bound)
        })
        .count()
}

/// Where a UDP link's sender leaves what the statistics calls show, each when the link
/// has it.
#[derive(Debug, Default)]
pub(super) struct SenderCells {
    /// The link's FEC.
    pub fec: Option<Arc<FecSendCounters>>,
    /// Its governor.
    pub governor: Option<GovernorCell>,
    /// Its seals.
    pub secure: Option<SecureCell>,
}

/// A UDP link's socket and the core's [`UdpSender`], which decides what leaves when.
pub(super) struct UdpLinkSender {
    socket: SendSocket,
    link: UdpSender,
    /// Where the statistics calls see the link.
    cells: SenderCells,
    /// The frames [`LinkSender::send_all`] hands on, kept for their allocation.
    frames: Vec<Bytes>,
    /// The reports one look reads, a [`REPORT_SLOT`] each (its length, then its bytes),
    /// kept for their allocation: at most [`MAX_REPORTS_READ`] slots.
    reports: Vec<u8>,
    /// The host's budget, when the node has one per host.
    host: Option<HostShare>,
    /// The class of what is loaded, in the host's budget.
    traffic: Traffic,
    /// Bytes of what is loaded that the host's budget was already charged for: a load is
    /// paid whole as it starts (as a TCP frame is), so that links sending datagram by
    /// datagram and links writing whole frames share the budget by bytes.
    paid: usize,
}

/// The most reports one look at a link's socket reads.
const MAX_REPORTS_READ: usize = 256;
/// Room for one report (under 256 bytes) and its length.
const REPORT_SLOT: usize = 256;
/// Slots the buffer keeps between looks (2 KiB).
const KEPT_REPORT_SLOTS: usize = 8;

/// What an OS error on a send means to the link.
fn send_error(e: &io::Error) -> SendError {
    match e.raw_os_error() {
        Some(libc::EMSGSIZE) => SendError::TooLarge,
        Some(libc::EIO | libc::EINVAL | libc::EOPNOTSUPP | libc::ENOPROTOOPT) => {
            SendError::Unsupported
        }
        _ => SendError::Other,
    }
}

impl UdpLinkSender {
    fn new(socket: SendSocket, link: UdpSender) -> UdpLinkSender {
        UdpLinkSender {
            link,
            socket,
            cells: SenderCells::default(),
            frames: Vec::new(),
            reports: Vec::new(),
            host: None,
            traffic: Traffic::Bulk,
            paid: 0,
        }
    }

    /// Shows the statistics calls what the link's FEC did and what its governor knows.
    fn publish_counters(&self) {
        if let Some(counters) = &self.cells.fec {
            counters.update(&self.link);
        }
        if let Some(cell) = &self.cells.secure {
            *cell.lock().unwrap_or_else(|e| e.into_inner()) = self.link.secure_stats();
        }
        if let Some(cell) = &self.cells.governor {
            // Once anything came back: reports taken, or ignored (a link whose every
            // report is ignored shows so, rather than looking ungoverned).
            *cell.lock().unwrap_or_else(|e| e.into_inner()) = self
                .link
                .governor()
                .filter(|g| g.reports > 0 || g.ignored > 0);
        }
    }

    /// Hands a failed send to the link; `Err` when the link is broken.
    fn recover(&mut self, e: io::Error) -> io::Result<()> {
        match self.link.on_send_error(send_error(&e)) {
            AfterError::StoppedSegmenting => {
                tracing::info!("UDP segmentation refused ({e}); sending datagram by datagram");
                Ok(())
            }
            AfterError::DroppedMessage { first } => {
                if first {
                    tracing::warn!(
                        "UDP send refused ({e}); dropping the message, keeping the link"
                    );
                }
                Ok(())
            }
            AfterError::Fatal => Err(e),
        }
    }

    fn try_send_now(&mut self, frame: &Bytes) -> DirectSend {
        let now = Instant::now();
        if let Err(e) = self.read_reports(now) {
            return DirectSend::Failed(e);
        }
        if let Some(host) = &self.host {
            self.traffic = host.traffic(frame.len());
            if !host.ready(now, self.traffic) {
                return DirectSend::NotNow;
            }
        }
        if !self.link.push_now(now, frame) {
            return DirectSend::NotNow;
        }
        if let Some(host) = &self.host {
            // Found ready above: the message is paid for whole.
            self.paid = self.link.unsent_bytes();
            host.spend(self.paid, self.traffic);
        }
        while let Some(t) = self.link.poll_transmit(now) {
            self.paid = self.paid.saturating_sub(t.datagrams.len());
            // Stamped as the send begins, as `send` below stamps: reading the reports
            // above can take a while, and a send time taken before it would count that
            // while as path delay.
            let began = Instant::now();
            match offload::try_send_segments(self.socket.socket(), t.datagrams, t.segment_size) {
                Ok(()) => self.link.on_transmitted(began),
                // The message id is taken: the rest must follow under it.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.publish_counters();
                    return DirectSend::Started;
                }
                Err(e) => {
                    if let Err(e) = self.recover(e) {
                        return DirectSend::Failed(e);
                    }
                }
            }
        }
        // Shown once the message's datagrams are laid out, sealed and sent.
        self.publish_counters();
        DirectSend::Sent
    }

    /// Reads the subscriber's loss reports from the link's socket when the link wants them
    /// (adaptive FEC links, every few tens of milliseconds): non-blocking reads before a
    /// message is laid out, so that the link needs no reader of its own. A connected
    /// socket only takes datagrams from the subscriber's port, into a small buffer
    /// ([`REPORT_BUFFER_BYTES`](super::publication::REPORT_BUFFER_BYTES)); what is queued
    /// is read down to the newest, so that forged reports never stand in front of the
    /// real ones for long. An error the read finds (the subscriber's port unreachable) is
    /// the link's, as on a send.
    fn read_reports(&mut self, now: Instant) -> io::Result<()> {
        if !self.link.wants_reports(now) {
            return Ok(());
        }
        // Read down to the newest (more than the socket's buffer holds; a flood still
        // arriving waits for the next look), then handed over together: the governor
        // takes the newest feedback of them.
        let reports = &mut self.reports;
        reports.clear();
        while reports.len() < MAX_REPORTS_READ * REPORT_SLOT {
            let at = reports.len();
            reports.resize(at + REPORT_SLOT, 0);
            match self.socket.socket().recv(&mut reports[at + 1..]) {
                // A report is under 256 bytes; a longer datagram is cut, and refused.
                Ok(n) => reports[at] = n.min(REPORT_SLOT - 1) as u8,
                Err(e) => {
                    reports.truncate(at);
                    match e.kind() {
                        io::ErrorKind::WouldBlock => break,
                        io::ErrorKind::Interrupted => continue,
                        _ => return Err(e),
                    }
                }
            }
        }
        let read = reports
            .chunks(REPORT_SLOT)
            .map(|slot| &slot[1..=usize::from(slot[0])]);
        let taken = self.link.handle_reports(now, read);
        // A flood grew the buffer to its most: what a look usually reads is kept.
        self.reports.clear();
        self.reports.shrink_to(KEPT_REPORT_SLOTS * REPORT_SLOT);
        if taken {
            self.publish_counters();
            if let Some(g) = self.link.governor() {
                tracing::debug!(target: "udpros::governor", "{g:?}");
            }
        }
        Ok(())
    }

    /// Sends what the link has loaded, waiting for room and for pacing. A governed link
    /// reads the subscriber's feedback between sends: a large message at a narrow link's
    /// rate takes longer than a report interval.
    async fn send_loaded(&mut self) -> io::Result<()> {
        while self.link.is_sending() {
            if let Some(host) = self.host.as_ref().filter(|_| self.paid == 0) {
                // A new load, or one whose charge ran out: it waits for the host's
                // budget (bulk behind whatever else the node's links to the host sent).
                let unsent = self.link.unsent_bytes();
                host.take(unsent, self.traffic).await?;
                self.paid = unsent;
            }
            let now = Instant::now();
            self.read_reports(now)?;
            let Some(t) = self.link.poll_transmit(now) else {
                // Held by pacing, which says until when; a governed link looks at its
                // reports meanwhile (a pause after an overuse, a slow rate's gap between
                // datagrams), so that the next send follows the newest.
                match self.link.poll_timeout() {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => break,
                }
                continue;
            };
            let (datagrams, segment) = (t.datagrams, t.segment_size);
            self.paid = self.paid.saturating_sub(datagrams.len());
            // The datagrams left when the send that took them began: a governed link pairs
            // this time with their arrival, and a send preempted on a busy machine would
            // otherwise seem to have crossed the path faster than anything could.
            let mut began = now;
            let sent = self
                .socket
                .send_with(|socket| {
                    began = Instant::now();
                    offload::try_send_segments(socket, datagrams, segment)
                })
                .await;
            match sent {
                Ok(()) => self.link.on_transmitted(began),
                Err(e) => self.recover(e)?,
            }
        }
        Ok(())
    }

    async fn finish(&mut self) -> io::Result<()> {
        self.send_loaded().await
    }

    /// Whether the link may send filler while it holds a message back: not when it shares
    /// its host's budget, whose other links the filler would take it from.
    fn may_fill(&self) -> bool {
        self.host.is_none()
    }

    /// Sends filler, a datagram at a time at the link's pacing, until `deadline` or until
    /// the link is no longer probing.
    async fn fill_until(&mut self, deadline: Instant) -> io::Result<()> {
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            self.read_reports(now)?;
            if !self.link.load_filler(now) {
                return Ok(());
            }
            self.send_loaded().await?;
        }
    }

    /// Sends queued frames in order: runs of small frames of one size together, larger
    /// ones a message at a time, all paced.
    async fn send_all(&mut self, frames: &mut Vec<Bytes>, stats: &LinkStats) -> io::Result<()> {
        // A hold's filler that has not left gives way to what was held.
        self.link.discard_filler();
        self.send_loaded().await?;
        // A governed link that cannot carry them all sends the newest whole.
        let stale = self.link.drop_stale(frames);
        if stale > 0 {
            stats
                .drops
                .fetch_add(stale as u64, std::sync::atomic::Ordering::Relaxed);
            self.publish_counters();
        }
        let mut next = 0;
        while next < frames.len() {
            let now = Instant::now();
            self.read_reports(now)?;
            // An idle link takes at least one frame (send_loaded left it idle).
            let taken = match self.link.push_queued(now, &frames[next..]) {
                // A new load: the host's budget is charged for it as it starts.
                Ok(taken) => {
                    self.paid = 0;
                    taken.max(1)
                }
                Err(_) => {
                    stats
                        .drops
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    next += 1;
                    continue;
                }
            };
            self.publish_counters();
            if let Some(host) = &self.host {
                let largest = frames[next..next + taken].iter().map(Bytes::len).max();
                self.traffic = host.traffic(largest.unwrap_or(0));
            }
            self.send_loaded().await?;
            let batch = &frames[next..next + taken];
            batch.iter().for_each(|f| stats.add_message(f.len()));
            next += taken;
        }
        // What the sends sealed (the counts above were taken as each load began).
        self.publish_counters();
        frames.clear();
        Ok(())
    }
}

pub(super) struct TcpLinkSender {
    writer: OwnedWriteHalf,
    /// The tail of a frame the kernel took only part of.
    unfinished: Option<Bytes>,
    batch: Vec<u8>,
    /// Off this host: what would arrive stale is dropped, at the rate the writes show.
    freshness: Option<Freshness>,
    /// The host's budget, when the node has one per host.
    host: Option<HostShare>,
    /// On a secure link: seals each frame as a record just before it is written (a
    /// record's number is its place in the stream, so it is sealed only once it goes).
    /// Boxed: a plain link, the common one, stays small.
    sealer: Option<Box<StreamSealer>>,
    /// A sealed frame's bytes, kept for their allocation.
    sealed: Vec<u8>,
}

impl TcpLinkSender {
    fn try_send_now(&mut self, frame: &Bytes) -> DirectSend {
        if self.unfinished.is_some() || frame.len() > DIRECT_MAX_TCP_BYTES {
            return DirectSend::NotNow;
        }
        let charge = self.host.as_ref().map(|host| {
            let traffic = host.traffic(frame.len());
            (host, traffic)
        });
        if let Some((host, traffic)) = charge {
            if !host.ready(Instant::now(), traffic) {
                return DirectSend::NotNow;
            }
        }
        // A secure link's frame is sealed here, and so takes its record number: whatever
        // the kernel does not take now is finished by the link's task, never dropped.
        let frame = match &mut self.sealer {
            Some(sealer) => {
                // Sealed into the link's kept buffer (no allocation, no fresh pages for a
                // large frame); only what the kernel leaves is copied out to finish later.
                let mut sealed = std::mem::take(&mut self.sealed);
                sealed.clear();
                sealer.seal_frame_into(frame, &mut sealed);
                let sent = match self.writer.try_write(&sealed) {
                    Ok(n) if n == sealed.len() => DirectSend::Sent,
                    Ok(n) => {
                        self.unfinished = Some(Bytes::copy_from_slice(&sealed[n..]));
                        DirectSend::Started
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.unfinished = Some(Bytes::copy_from_slice(&sealed));
                        DirectSend::Started
                    }
                    Err(e) => DirectSend::Failed(e),
                };
                if !matches!(sent, DirectSend::Failed(_)) {
                    self.spend_whole(sealed.len());
                }
                self.sealed = sealed;
                return sent;
            }
            None => frame,
        };
        let written = self.writer.try_write(frame);
        if let (Ok(1..), Some((host, traffic))) = (&written, charge) {
            // Once any of it is written, all of it will be: the frame is paid for whole.
            host.spend(frame.len(), traffic);
        }
        match written {
            Ok(n) if n == frame.len() => DirectSend::Sent,
            Ok(0) => DirectSend::NotNow,
            Ok(n) => {
                self.unfinished = Some(frame.slice(n..));
                DirectSend::Started
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => DirectSend::NotNow,
            Err(e) => DirectSend::Failed(e),
        }
    }

    /// Takes a frame of `len` bytes from the host's budget, once it is sure to go whole.
    fn spend_whole(&self, len: usize) {
        if let Some(host) = &self.host {
            host.spend(len, host.traffic(len));
        }
    }

    async fn finish(&mut self) -> io::Result<()> {
        match self.unfinished.take() {
            // Paid for when its first part was written.
            Some(rest) => self.write_timed(&rest, None).await,
            None => Ok(()),
        }
    }

    /// Writes `bytes` whole, first taking them from the host's budget as messages of at
    /// most `largest` bytes (`None`: paid for already); on a link with a freshness rule,
    /// tells it how long the path took for them.
    async fn write_timed(&mut self, bytes: &[u8], largest: Option<usize>) -> io::Result<()> {
        // Timed from before the budget's wait: the rate a link sharing its host's budget
        // drains at is its share.
        let began = Instant::now();
        if let (Some(host), Some(largest)) = (&self.host, largest) {
            host.take(bytes.len(), host.traffic(largest)).await?;
        }
        self.writer.write_all(bytes).await?;
        if let Some(freshness) = &mut self.freshness {
            freshness.drained(bytes.len(), began.elapsed());
        }
        Ok(())
    }

    async fn send_all(
        &mut self,
        frames: &mut Vec<QueuedFrame>,
        stats: &LinkStats,
    ) -> io::Result<()> {
        if let Some(freshness) = &mut self.freshness {
            let ahead = crate::socket::tcp_bytes_in_flight(self.writer.as_ref()).unwrap_or(0);
            let stale = freshness.drop_stale(Instant::now(), ahead, frames, |q| (q.at, q.len()));
            if stale > 0 {
                stats
                    .drops
                    .fetch_add(stale as u64, std::sync::atomic::Ordering::Relaxed);
            }
        }
        // Several small frames go out in one write; large ones as they are.
        let total: usize = frames.iter().map(QueuedFrame::len).sum();
        if frames.len() > 1 && total <= TCP_BATCH_BYTES {
            let mut batch = std::mem::take(&mut self.batch);
            batch.clear();
            frames.iter().for_each(|q| match &mut self.sealer {
                Some(sealer) => sealer.seal_frame_into(&q.frame, &mut batch),
                None => batch.extend_from_slice(&q.frame),
            });
            let largest = frames.iter().map(QueuedFrame::len).max();
            let written = self.write_timed(&batch, largest).await;
            self.batch = batch;
            written?;
            frames.drain(..).for_each(|q| stats.add_message(q.len()));
            return Ok(());
        }
        // Sharing its host's budget, the link may wait between frames: one that grew
        // older than the bound while it waited goes (never the newest).
        let bound = self
            .freshness
            .as_ref()
            .filter(|_| self.host.is_some())
            .map(Freshness::bound);
        let last = frames.len().saturating_sub(1);
        for (i, queued) in frames.drain(..).enumerate() {
            let late = |bound: Duration| queued.at.is_some_and(|at| at.elapsed() > bound);
            if i < last && bound.is_some_and(late) {
                stats
                    .drops
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                continue;
            }
            match &mut self.sealer {
                Some(sealer) => {
                    let mut sealed = std::mem::take(&mut self.sealed);
                    sealed.clear();
                    sealer.seal_frame_into(&queued.frame, &mut sealed);
                    let written = self.write_timed(&sealed, Some(sealed.len())).await;
                    self.sealed = sealed;
                    written?;
                }
                None => self.write_timed(&queued.frame, Some(queued.len())).await?,
            }
            stats.add_message(queued.len());
        }
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::socket::send_tests::{on_a_slow_loopback, sender_to};
    use crate::wire::link::HEARTBEAT;
    use crate::wire::udpros::{max_send, DIRECT_MAX_SENDS, HEADER_LEN};
    use std::time::Duration;
    use udpros_core::udpros::{DatagramHeader, Opcode};

    /// The terms of a plain link to a udpros subscriber, in datagrams of `max_datagram`.
    fn terms(max_datagram: usize) -> SenderTerms {
        SenderTerms {
            connection_id: 7,
            max_datagram,
            udpros_peer: true,
            route_mtu: None,
            fec: None,
            governor: None,
            max_rate: None,
            secure: None,
        }
    }

    /// A message sent from the publishing thread that finds the send buffer full keeps
    /// the id it took and is finished by the link's task: every message arrives whole, in
    /// order, with its own id.
    #[test]
    fn messages_that_find_no_room_are_finished_whole() {
        on_a_slow_loopback(|| async {
            const MESSAGES: usize = 100;
            let rx = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            // Room for whole messages, as a udpros subscriber sizes its buffer: the reader
            // shares this thread with the sender, and with the kernel's default (three of
            // these datagrams) a loaded machine's pause of a few milliseconds lost one.
            socket2::SockRef::from(&rx)
                .set_recv_buffer_size(4 << 20)
                .unwrap();
            let socket = sender_to(rx.local_addr().unwrap(), 64 << 10);
            let mut wire = LinkSender::udp(socket, &terms(65_000), SenderCells::default()).unwrap();
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
                    DirectSend::Sent => sent += 1,
                    DirectSend::Started => {
                        started += 1;
                        tokio::time::timeout(Duration::from_secs(10), wire.finish())
                            .await
                            .expect("the queue drains")
                            .unwrap();
                    }
                    DirectSend::NotNow => panic!("the pacer toward a udpros peer allows 4 MB"),
                    DirectSend::Failed(e) => panic!("{e}"),
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
        let mut wire = LinkSender::udp(socket, &terms(datagram), SenderCells::default()).unwrap();
        let LinkSender::Udp(w) = &wire else {
            unreachable!("a UDP wire")
        };
        assert!(w.link.segmenting(), "Linux since 4.18 has UDP_SEGMENT");
        // S3's compressed image.
        let fits = Bytes::from(vec![3u8; 100_000]);
        assert!(matches!(wire.try_send_now(&fits), DirectSend::Sent));
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
        let larger = Bytes::from(vec![4u8; DIRECT_MAX_SENDS * max_send(datagram) + 1]);
        assert!(matches!(wire.try_send_now(&larger), DirectSend::NotNow));
    }

    /// A heartbeat goes out on an idle link, and a socket left in the poll set by sends
    /// that had to wait leaves it then, rather than at the next drain of a queue that may
    /// stay empty for long (meanwhile every freed datagram would wake the runtime).
    #[test]
    fn a_heartbeat_leaves_the_poll_set_behind_it() {
        on_a_slow_loopback(|| async {
            let rx = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let socket = sender_to(rx.local_addr().unwrap(), 64 << 10);
            let mut wire = LinkSender::udp(socket, &terms(65_000), SenderCells::default()).unwrap();
            let frame = Bytes::from(vec![1u8; 60_000]);
            let mut waited = false;
            for _ in 0..100 {
                if let DirectSend::Started = wire.try_send_now(&frame) {
                    wire.finish().await.unwrap();
                    waited = true;
                    break;
                }
            }
            let LinkSender::Udp(w) = &mut wire else {
                unreachable!("a UDP wire")
            };
            assert!(waited && w.socket.watched(), "a send had to wait for room");
            tokio::time::sleep(HEARTBEAT).await;
            wire.heartbeat().await.unwrap();
            let LinkSender::Udp(w) = &wire else {
                unreachable!("a UDP wire")
            };
            assert!(
                !w.socket.watched(),
                "still in the poll set after the heartbeat"
            );
        });
    }
}
