//! One subscriber's UDPROS link, receive side, as one object: which sources belong to the
//! link, reassembly, liveness and the link's counters behind "datagrams and `now` in;
//! events and a deadline out". The driver owns the socket and the clock and does nothing
//! else:
//!
//! - after reading datagrams, call [`UdpReceiver::handle`] for each, then drain
//!   [`UdpReceiver::poll_event`];
//! - keep one timer at [`UdpReceiver::poll_timeout`] (it may move after `handle` or
//!   `handle_timeout`); when it fires call [`UdpReceiver::handle_timeout`], then drain
//!   [`UdpReceiver::poll_event`] again. An early `handle_timeout` does nothing, so a driver
//!   may keep a timer that only moves earlier and is re-armed when it fires (cheaper than
//!   following every move: a message in reassembly moves the deadline twice);
//! - after a [`ReceiverEvent::Closed`] or [`ReceiverEvent::Dead`] the link is over: drop
//!   the receiver.

use super::fec::{self, Repair, RepairMeta};
use super::feedback::ArrivalLog;
use super::liveness::{AllowedSources, Dead, UdpLiveness};
use super::loss::LossMeter;
use super::reassemble::Arrival;
use super::{
    is_newer, message_id_distance, DatagramHeader, Event, Opcode, Reassembler, ReassemblerConfig,
    UdpStats,
};
use crate::secure::datagram::{OpenStats, Opener, Sealer};
use crate::secure::LinkSecurity;
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

/// What a [`UdpReceiver`] needs to know about its link.
#[derive(Debug, Clone)]
pub struct UdpReceiverConfig {
    /// How messages are reassembled: size limit, connection id, block size.
    pub reassembler: ReassemblerConfig,
    /// Where the publisher's datagrams may come from.
    pub sources: AllowedSources,
    /// The publisher is udpros and heartbeats an idle link, so silence means it is gone
    /// (roscpp sends no heartbeats: its links are judged by their messages only).
    pub expects_heartbeats: bool,
    /// Both ends agreed on FEC: repair datagrams are taken, messages of several blocks are
    /// checked against their checksum, and the reassembler's `block_payload` is the shard
    /// size ([`fec::shard_size`]).
    pub fec: bool,
    /// Both ends agreed on [`feedback`](super::feedback): arrivals are sampled and
    /// reported to the publisher's governor.
    pub feedback: bool,
    /// Both ends hold the graph key and agreed on a secure link: only datagrams sealed
    /// for it are taken (the rest are counted and dropped before anything reads them),
    /// and reports leave sealed.
    pub secure: Option<LinkSecurity>,
}

/// What happened on the link, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiverEvent {
    /// A whole message body (without its length prefix).
    Message(Bytes),
    /// The first datagram from a source that is not the publisher: worth one warning.
    /// Later ones are only counted (in [`UdpStats::foreign`]).
    Stranger(SocketAddr),
    /// The publisher closed the link (an ERR datagram).
    Closed,
    /// The link is dead; see [`Dead`] for why.
    Dead(Dead),
}

/// Events a receiver holds before the driver drains them: a read batch yields at most a
/// few dozen, and a driver that drains after every batch never comes near this.
const MAX_PENDING_EVENTS: usize = 4096;

/// One subscriber's UDPROS link, receive side (see the module documentation for the order
/// of calls).
#[derive(Debug)]
pub struct UdpReceiver {
    sources: AllowedSources,
    reassembler: Reassembler,
    liveness: UdpLiveness,
    /// The source of the last accepted datagram: the same one needs no second look.
    peer: Option<SocketAddr>,
    /// Datagrams from sources that are not the publisher.
    strangers: u64,
    /// Reads the socket could not hand over whole.
    truncated: u64,
    events: VecDeque<ReceiverEvent>,
    /// Messages dropped because the driver did not drain events.
    events_dropped: u64,
    /// The repair side of a link that agreed on FEC.
    fec: Option<FecState>,
    /// The link's datagram loss, counted on every link, reported on FEC links.
    loss: LossMeter,
    /// Arrival samples for the publisher's governor, on links that agreed on feedback.
    arrivals: Option<ArrivalLog>,
    /// A secure link's opener of the publisher's datagrams and sealer of this end's.
    sealing: Option<Box<(Opener, Sealer)>>,
}

/// What a receiver holds for FEC: the repair shards of the message they may rebuild, and
/// the metadata of the last few messages, to check them when they complete.
#[derive(Debug)]
struct FecState {
    shard: usize,
    /// The publisher is on this machine's loopback, where nothing can put a block in a
    /// message that is not its own (see [`UdpReceiver::checked`]).
    loopback: bool,
    pending: Option<PendingRepair>,
    metas: [Option<(u8, RepairMeta)>; RECENT_METAS],
    next_meta: usize,
    /// Repair datagrams taken (with a shard), metadata-only datagrams (a message's
    /// checksum, sent on a clean link too), messages rebuilt, messages that failed their
    /// checksum, and messages of several blocks delivered without one (their metadata was
    /// lost).
    repairs: u64,
    checksums: u64,
    rebuilt: u64,
    corrupt: u64,
    unverified: u64,
}

/// The repair shards held for one message.
#[derive(Debug)]
struct PendingRepair {
    id: u8,
    meta: RepairMeta,
    shards: Vec<(u16, Bytes)>,
    /// Every data block of the message has been sent (its last block, its last repair
    /// datagram or a newer message arrived, or nothing of it came for [`FEC_QUIET`]):
    /// what is missing now is lost. Before that a block may still be on its way, and a
    /// message is never decoded for nothing.
    data_sent: bool,
    /// When a datagram of the message last arrived.
    last_seen: Instant,
    /// A rebuild was tried: a message is decoded at most once.
    tried: bool,
}

/// How a message came to be whole, which decides how it is checked
/// ([`UdpReceiver::checked`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Assembled {
    /// Every block arrived.
    FromItsBlocks,
    /// Missing blocks were rebuilt from repair shards.
    Rebuilt,
}

/// How long a message's datagrams may pause before what is missing counts as lost: a
/// message leaves in a burst (a megabyte takes under a millisecond toward a udpros peer),
/// and without this a message whose last block and only repair were both lost would wait
/// for the next message to be rebuilt.
pub const FEC_QUIET: std::time::Duration = std::time::Duration::from_millis(3);

/// Messages whose FEC metadata is remembered: the current one and a few before it, far
/// fewer than the 255 after which an id comes back.
const RECENT_METAS: usize = 4;

impl FecState {
    /// The metadata remembered for message `id`: one, or more when datagrams disagreed
    /// (a forged or stale one among them), any of which a message may match.
    fn metas_of(&self, id: u8) -> impl Iterator<Item = RepairMeta> + '_ {
        self.metas
            .iter()
            .flatten()
            .filter(move |(held, _)| *held == id)
            .map(|(_, meta)| *meta)
    }

    /// Forgets the metadata and repair shards of message `id` and of every message before
    /// it. Ids come back every 255 messages, and a link whose repair has fallen to none
    /// brings no newer shards to replace the held ones: kept, they would be taken for the
    /// message that next has their id, and rebuild it wrong.
    fn forget_up_to(&mut self, id: u8) {
        let spent = |held: u8| message_id_distance(held, id) < 128;
        for slot in &mut self.metas {
            if slot.is_some_and(|(held, _)| spent(held)) {
                *slot = None;
            }
        }
        if self.pending.as_ref().is_some_and(|p| spent(p.id)) {
            self.pending = None;
        }
    }

    fn remember(&mut self, id: u8, meta: RepairMeta) {
        if !self.metas_of(id).any(|held| held == meta) {
            self.metas[self.next_meta] = Some((id, meta));
            self.next_meta = (self.next_meta + 1) % RECENT_METAS;
        }
    }

    fn memory(&self) -> usize {
        self.pending
            .as_ref()
            .map_or(0, |p| p.shards.len() * self.shard)
    }
}

impl UdpReceiver {
    /// A link that starts at `now`.
    pub fn new(now: Instant, config: UdpReceiverConfig) -> UdpReceiver {
        let loopback = config.sources.all_loopback();
        UdpReceiver {
            sources: config.sources,
            reassembler: Reassembler::new(config.reassembler),
            liveness: UdpLiveness::new(now, config.expects_heartbeats),
            peer: None,
            strangers: 0,
            truncated: 0,
            events: VecDeque::new(),
            events_dropped: 0,
            loss: LossMeter::default(),
            arrivals: config.feedback.then(|| ArrivalLog::new(now)),
            sealing: config
                .secure
                .as_ref()
                .map(|link| Box::new(link.subscriber_end())),
            fec: config
                .fec
                .then_some(config.reassembler.block_payload)
                .flatten()
                .map(|shard| FecState {
                    shard,
                    loopback,
                    pending: None,
                    metas: [None; RECENT_METAS],
                    next_meta: 0,
                    repairs: 0,
                    checksums: 0,
                    rebuilt: 0,
                    corrupt: 0,
                    unverified: 0,
                }),
        }
    }

    /// Takes one datagram that arrived at `now` from `from`.
    pub fn handle(&mut self, now: Instant, from: SocketAddr, datagram: Bytes) {
        self.handle_arrived(now, now, from, datagram);
    }

    /// Takes one datagram read at `now` that the machine received at `arrived` (a kernel
    /// stamp): the publisher's governor is told the arrival, not the read, so that a
    /// subscriber that reads late is not taken for a queue on the path.
    pub fn handle_arrived(
        &mut self,
        now: Instant,
        arrived: Instant,
        from: SocketAddr,
        datagram: Bytes,
    ) {
        // Shared, it is copied to be opened (a sealed link's driver hands its own).
        self.take(now, arrived, from, Arrival::Shared(datagram));
    }

    /// [`handle_arrived`](Self::handle_arrived) for a datagram the driver owns alone (a
    /// piece of its read buffer): on a secure link it is opened where it lies, with no
    /// copy and no allocation.
    pub fn handle_arrived_mut(
        &mut self,
        now: Instant,
        arrived: Instant,
        from: SocketAddr,
        datagram: BytesMut,
    ) {
        self.take(now, arrived, from, Arrival::Owned(datagram));
    }

    fn take(&mut self, now: Instant, arrived: Instant, from: SocketAddr, datagram: Arrival) {
        if self.peer != Some(from) {
            if !self.sources.allows(from) {
                self.strangers += 1;
                if self.strangers == 1 {
                    self.push(ReceiverEvent::Stranger(from));
                }
                return;
            }
            self.peer = Some(from);
        }
        let datagram = match (self.sealing.as_deref_mut(), datagram) {
            (Some((opener, _)), datagram) => {
                let mut datagram = match datagram {
                    Arrival::Owned(owned) => owned,
                    Arrival::Shared(shared) => BytesMut::from(&shared[..]),
                };
                match opener.open_in_place(&mut datagram) {
                    Ok(plain) => Arrival::Shared(datagram.freeze().slice(plain)),
                    // Forged, replayed or of another link: nothing of it is read. To FEC
                    // it is a lost datagram.
                    Err(_) => return,
                }
            }
            (None, datagram) => datagram,
        };
        let header = DatagramHeader::parse(datagram.bytes());
        let ours = |h: &DatagramHeader| {
            let checked = self.reassembler.config().connection_id;
            checked.is_none_or(|id| id == h.connection_id)
        };
        if let Some(h) = header.as_ref().filter(|h| ours(h)) {
            // Any datagram of the link shows the publisher is there: under heavy loss few
            // messages complete, and a busy publisher sends no heartbeats.
            self.liveness.heard(now);
            self.loss.on_datagram(h);
            if let Some(arrivals) = self.arrivals.as_mut() {
                arrivals.on_datagram(arrived, h, datagram.bytes().len());
            }
        }
        if self.fec.is_some() {
            if let Some(h) = header.filter(|h| h.opcode == Opcode::Repair) {
                self.on_repair(now, h, datagram.freeze());
                return;
            }
            if let Some(h) = header.filter(|h| matches!(h.opcode, Opcode::Data0 | Opcode::DataN)) {
                self.before_data(now, &h);
            }
        }
        match self.reassembler.take(now, datagram) {
            Some(Event::Message(body)) => self.deliver(now, body, Assembled::FromItsBlocks),
            Some(Event::Ping) => self.liveness.heard(now),
            Some(Event::Closed) => self.push(ReceiverEvent::Closed),
            None => {
                if let Some(h) = header.filter(|h| h.opcode != Opcode::Ping) {
                    self.try_rebuild(now, h.message_id);
                }
            }
        }
    }

    /// Before a data block reaches reassembly on an FEC link: a block of a newer message
    /// means the held one's datagrams have all been sent (its DATA0 would make reassembly
    /// give it up), so rebuild it now if it can be; the last block of the held message
    /// means its data has all been sent, so what is missing now is lost.
    fn before_data(&mut self, now: Instant, header: &DatagramHeader) {
        let Some(pending) = self.fec.as_mut().and_then(|f| f.pending.as_mut()) else {
            return;
        };
        let id = pending.id;
        let last_block = pending.meta.blocks.saturating_sub(1);
        if header.message_id == id {
            pending.last_seen = now;
            let index = match header.opcode {
                Opcode::Data0 => 0,
                _ => header.block,
            };
            pending.data_sent |= index == last_block;
        } else if is_newer(id, header.message_id) {
            pending.data_sent = true;
            self.try_rebuild(now, id);
        }
    }

    /// A repair datagram on a link that agreed on FEC.
    fn on_repair(&mut self, now: Instant, header: DatagramHeader, datagram: Bytes) {
        let Some(fec) = self.fec.as_mut() else {
            return;
        };
        let foreign = self
            .reassembler
            .config()
            .connection_id
            .is_some_and(|id| id != header.connection_id);
        if foreign {
            self.reassembler.count(|stats| stats.foreign += 1);
            return;
        }
        let max_message_size = self.reassembler.config().max_message_size;
        let Ok(repair) = Repair::parse(datagram, fec.shard) else {
            self.reassembler.count(|stats| stats.malformed += 1);
            return;
        };
        if repair.shard.is_empty() {
            fec.checksums += 1;
        } else {
            fec.repairs += 1;
        }
        let id = repair.message_id;
        let sent_with = match (repair.meta.repairs, repair.meta.blocks) {
            (0, k) => u32::from(k) + u32::from(k >= 2),
            (r, k) => u32::from(k) + u32::from(r),
        };
        self.loss
            .on_meta(id, u32::from(repair.meta.blocks), sent_with);
        let delivered = self.reassembler.last_delivered();
        if delivered.is_some_and(|last| last != id && !is_newer(last, id)) {
            return; // a late repair of a message delivered or given up
        }
        fec.remember(id, repair.meta);
        if repair.shard.is_empty() || delivered == Some(id) {
            return; // metadata only, or the message is already whole
        }
        let held = fec.pending.as_ref().map(|p| (p.id, p.meta));
        match held {
            Some((held, meta)) if held == id && meta == repair.meta => {}
            // Never for an older message than the one held.
            Some((held, _)) if !is_newer(held, id) => return,
            Some((held, _)) => {
                // A newer message's repair: the held one's datagrams have all been sent.
                if let Some(p) = fec.pending.as_mut() {
                    p.data_sent = true;
                }
                self.try_rebuild(now, held);
            }
            None => {}
        }
        let Some(fec) = self.fec.as_mut() else {
            return;
        };
        let pending = match fec.pending.as_mut() {
            Some(p) if p.id == id && p.meta == repair.meta => p,
            _ => fec.pending.insert(PendingRepair {
                id,
                meta: repair.meta,
                shards: Vec::new(),
                data_sent: false,
                last_seen: now,
                tried: false,
            }),
        };
        pending.last_seen = now;
        // The last repair datagram leaves after the last data block, unless it is the only
        // one: that one goes ahead of the data. A one-block message's copies all follow
        // it, and any one of them is the whole message.
        let last = repair.index + 1 == repair.meta.repairs;
        pending.data_sent |= (last && repair.meta.repairs > 1) || repair.meta.blocks == 1;
        // More than k shards never help (with the blocks held, k rebuild), and a repeated
        // index is a duplicate: neither is kept, nor more bytes than the largest message,
        // so a flood holds no more than the message it claims to repair.
        let room = (pending.shards.len() + 1) * fec.shard <= max_message_size;
        let useful = room
            && pending.shards.len() < usize::from(repair.meta.blocks)
            && !pending.shards.iter().any(|(i, _)| *i == repair.index);
        if useful {
            // A copy: the datagram may be a slice of a large receive batch.
            let shard = Bytes::copy_from_slice(&repair.shard);
            pending.shards.push((repair.index, shard));
            self.try_rebuild(now, id);
        }
    }

    /// Rebuilds message `id` from its blocks and repair shards once there are enough.
    fn try_rebuild(&mut self, now: Instant, id: u8) {
        let Some(fec) = self.fec.as_mut() else {
            return;
        };
        let ready = |p: &&mut PendingRepair| p.id == id && !p.tried && p.data_sent;
        let Some(pending) = fec.pending.as_mut().filter(ready) else {
            return;
        };
        let k = usize::from(pending.meta.blocks);
        let held = self.reassembler.held_blocks(id);
        if held >= k || held + pending.shards.len() < k {
            return;
        }
        pending.tried = true;
        let blocks = self.reassembler.blocks_of(id);
        let Some(restored) = fec::rebuild(pending.meta, fec.shard, &blocks, &pending.shards) else {
            return;
        };
        let blocks = pending.meta.blocks;
        if let Some(Event::Message(body)) = self.reassembler.restore(now, id, blocks, restored) {
            if let Some(fec) = self.fec.as_mut() {
                fec.rebuilt += 1;
            }
            self.deliver(now, body, Assembled::Rebuilt);
        }
    }

    /// A message the reassembler completed: checked against its checksum on an FEC link,
    /// then handed over.
    fn deliver(&mut self, now: Instant, body: Bytes, assembled: Assembled) {
        let Some(body) = self.checked(body, assembled) else {
            return;
        };
        self.liveness.heard(now);
        self.push(ReceiverEvent::Message(body));
    }

    /// `body` if it matches its message's checksum, or can be made to with the second copies
    /// of its blocks that differed; `None` (counted) if not. Messages without metadata pass.
    ///
    /// On loopback, a message assembled from its own blocks, each taken once, passes
    /// without its checksum computed (on S3's 100 kB messages the checksum was most of
    /// what a UDPROS link cost a subscriber beyond TCPROS: 45,000 instructions a message).
    /// What the checksum catches cannot happen there:
    /// - corruption: loopback copies memory, and the kernel itself skips the UDP checksum
    ///   on it;
    /// - a block of the message that had this id before (255 messages earlier) taking the
    ///   place of a lost one: loopback holds no datagram back while hundreds of later ones
    ///   pass it, and only the publisher's own port is heard.
    ///
    /// A rebuilt message, or one of whose blocks a second, different copy arrived, is
    /// checked there too.
    fn checked(&mut self, body: Bytes, assembled: Assembled) -> Option<Bytes> {
        let Some(fec) = self.fec.as_mut() else {
            return Some(body);
        };
        let id = self.reassembler.last_delivered()?;
        let mut metas = [None; RECENT_METAS];
        for (slot, meta) in metas.iter_mut().zip(fec.metas_of(id)) {
            *slot = Some(meta);
        }
        // Ids come back every 255 messages: what is held for this message and the ones
        // before it is spent now, and must not be taken for a later message with that id.
        fec.forget_up_to(id);
        if metas[0].is_none() {
            if body.len() + 4 > fec.shard {
                fec.unverified += 1;
            }
            return Some(body);
        }
        let trusted = fec.loopback
            && assembled == Assembled::FromItsBlocks
            && self.reassembler.conflicts().is_empty();
        if trusted {
            return Some(body);
        }
        let matches = |body: &[u8]| {
            let crc = fec::body_crc(body);
            metas
                .iter()
                .flatten()
                .any(|m| body.len() + 4 == m.frame_len as usize && crc == m.body_crc)
        };
        if matches(&body) {
            return Some(body);
        }
        // A stale or forged block taken first, the real one arriving later: try the later
        // copies, one at a time and all together.
        let conflicts = self.reassembler.conflicts();
        let substituted = |chosen: &[&(u16, Vec<u8>)]| {
            let mut frame = (body.len() as u32).to_le_bytes().to_vec();
            frame.extend_from_slice(&body);
            for (index, block) in chosen {
                let start = usize::from(*index) * fec.shard;
                let end = start + block.len();
                frame.get_mut(start..end)?.copy_from_slice(block);
            }
            Some(Bytes::from(frame).slice(4..))
        };
        let all: Vec<&(u16, Vec<u8>)> = conflicts.iter().collect();
        let fixed = conflicts
            .iter()
            .map(|c| substituted(&[c]))
            .chain(std::iter::once(substituted(&all)))
            .flatten()
            .find(|candidate| matches(candidate));
        if fixed.is_none() {
            fec.corrupt += 1;
        }
        fixed
    }

    /// A datagram for the publisher, when one is due at `now`: feedback (links that
    /// agreed on it, every [`FEEDBACK_INTERVAL`](super::feedback::FEEDBACK_INTERVAL) while
    /// datagrams arrive), else a loss report (FEC links only, at most every
    /// [`REPORT_INTERVAL`](super::loss::REPORT_INTERVAL) while messages arrive). Send it
    /// from the socket the link reads on to [`UdpReceiver::peer`]. Call after handling
    /// datagrams, until it returns `None`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let plain = self.poll_plain_transmit(now)?;
        match self.sealing.as_deref_mut() {
            Some((_, sealer)) => Some(sealer.seal(&plain)),
            None => Some(plain),
        }
    }

    fn poll_plain_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let connection_id = self.reassembler.config().connection_id?;
        if let Some(feedback) = self.arrivals.as_mut().and_then(|a| a.poll_feedback(now)) {
            let mut out = Vec::with_capacity(super::feedback::MAX_FEEDBACK_LEN);
            feedback.encode(connection_id, &mut out);
            return Some(out);
        }
        self.fec.as_ref()?;
        self.loss
            .poll_report(now, connection_id)
            .map(|report| report.to_vec())
    }

    /// What a secure link opened and refused of the publisher's datagrams, by reason
    /// (`None`: the link is plain).
    pub fn secure_stats(&self) -> Option<OpenStats> {
        self.sealing.as_ref().map(|s| s.0.stats())
    }

    /// Counts `reads` the socket could not hand over whole (a datagram larger than the
    /// buffer): they are malformed datagrams as far as the link is concerned.
    pub fn on_truncated(&mut self, reads: u64) {
        self.truncated += reads;
    }

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<ReceiverEvent> {
        self.events.pop_front()
    }

    /// When [`UdpReceiver::handle_timeout`] is due: the earlier of the liveness check and
    /// the deadline of a message in reassembly.
    pub fn poll_timeout(&self) -> Instant {
        let check = self.liveness.poll_timeout();
        let quiet = self.quiet_deadline();
        [self.reassembler.poll_timeout(), quiet]
            .into_iter()
            .flatten()
            .fold(check, Instant::min)
    }

    /// When the held message's datagrams will have paused for [`FEC_QUIET`], while a
    /// rebuild of it may still be wanted.
    fn quiet_deadline(&self) -> Option<Instant> {
        let pending = self.fec.as_ref()?.pending.as_ref()?;
        let waiting = !pending.tried && !pending.data_sent;
        waiting.then_some(pending.last_seen + FEC_QUIET)
    }

    /// Runs what is due at `now`: gives up incomplete messages past their deadline, and
    /// checks liveness (an [`ReceiverEvent::Dead`] when the link is dead).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.quiet_deadline().is_some_and(|due| due <= now) {
            if let Some(pending) = self.fec.as_mut().and_then(|f| f.pending.as_mut()) {
                pending.data_sent = true;
                let id = pending.id;
                self.try_rebuild(now, id);
            }
        }
        self.reassembler.handle_timeout(now);
        if let Some(dead) = self.liveness.handle_timeout(now, &self.stats()) {
            self.push(ReceiverEvent::Dead(dead));
        }
    }

    /// The link's counters, as `getBusStats` reports them: the reassembler's, with
    /// datagrams from strangers counted as foreign and truncated reads as malformed.
    pub fn stats(&self) -> UdpStats {
        let mut stats = *self.reassembler.stats();
        stats.loss_ppm = self.loss.loss().map_or(0, |p| (p * 1e6).round() as u32);
        stats.foreign += self.strangers;
        stats.malformed += self.truncated;
        if let Some(fec) = &self.fec {
            // A message that failed its checksum was completed, not delivered.
            stats.messages = stats.messages.saturating_sub(fec.corrupt);
            stats.repairs = fec.repairs;
            stats.checksums = fec.checksums;
            stats.rebuilt = fec.rebuilt;
            stats.corrupt = fec.corrupt;
            stats.unverified = fec.unverified;
        }
        stats
    }

    /// Messages dropped because events were not drained (a driver that drains after each
    /// read never loses one).
    pub fn events_dropped(&self) -> u64 {
        self.events_dropped
    }

    /// Where the publisher's datagrams come from, once one arrived (`getBusInfo` shows it).
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// Bytes held for messages in reassembly and events not yet drained.
    pub fn memory(&self) -> usize {
        let pending: usize = self
            .events
            .iter()
            .map(|e| match e {
                ReceiverEvent::Message(body) => body.len(),
                _ => 0,
            })
            .sum();
        self.reassembler.memory() + pending + self.fec.as_ref().map_or(0, FecState::memory)
    }

    fn push(&mut self, event: ReceiverEvent) {
        if self.events.len() >= MAX_PENDING_EVENTS {
            // A driver that never drains must not make the link grow: the oldest message
            // goes, as a subscriber's queue drops its oldest.
            if let Some(at) = self
                .events
                .iter()
                .position(|e| matches!(e, ReceiverEvent::Message(_)))
            {
                self.events.remove(at);
                self.events_dropped += 1;
            } else {
                return;
            }
        }
        self.events.push_back(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udpros::liveness::{INCOMPLETE_BEFORE_FAILURE, LIVENESS_TIMEOUT};
    use crate::udpros::Fragmenter;
    use std::time::Duration;

    const PUBLISHER: &str = "10.0.0.2:4000";

    /// A plain link's settings: connection 7 from [`PUBLISHER`].
    fn config(heartbeats: bool) -> UdpReceiverConfig {
        UdpReceiverConfig {
            reassembler: ReassemblerConfig {
                connection_id: Some(7),
                block_payload: Some(1492),
                ..ReassemblerConfig::default()
            },
            sources: AllowedSources::new(vec!["10.0.0.2".parse().unwrap()], Some(4000)),
            expects_heartbeats: heartbeats,
            fec: false,
            feedback: false,
            secure: None,
        }
    }

    fn receiver(now: Instant, heartbeats: bool) -> UdpReceiver {
        UdpReceiver::new(now, config(heartbeats))
    }

    fn datagrams(fragmenter: &mut Fragmenter, body: &[u8]) -> Vec<Bytes> {
        let mut frame = (body.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(body);
        let fragments = fragmenter.fragment(&Bytes::from(frame)).unwrap();
        fragments.map(|d| Bytes::from(d.to_vec())).collect()
    }

    fn events(rx: &mut UdpReceiver) -> Vec<ReceiverEvent> {
        std::iter::from_fn(|| rx.poll_event()).collect()
    }

    /// A secure link takes datagrams shared (copied to be opened) and owned (opened where
    /// they lie) alike; a forged one among them is refused and counted, and the message
    /// still arrives whole.
    #[test]
    fn a_secure_link_opens_shared_and_owned_datagrams_alike() {
        use crate::secure::{Cipher, LinkKeys, Mode};
        for cipher in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305] {
            for mode in [Mode::Encrypt, Mode::Authenticate] {
                let link = LinkSecurity {
                    mode,
                    cipher,
                    keys: LinkKeys {
                        downstream: [5; 32],
                        upstream: [6; 32],
                    },
                };
                let now = Instant::now();
                let datagram = 1500 - crate::secure::datagram::OVERHEAD;
                let plain = config(true);
                let mut rx = UdpReceiver::new(
                    now,
                    UdpReceiverConfig {
                        reassembler: ReassemblerConfig {
                            block_payload: Some(datagram - crate::udpros::HEADER_LEN),
                            ..plain.reassembler
                        },
                        secure: Some(link.clone()),
                        ..plain
                    },
                );
                let (mut sealer, _) = link.publisher_end();
                let mut tx = Fragmenter::new(7, datagram).unwrap();
                let publisher: SocketAddr = PUBLISHER.parse().unwrap();
                let body: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
                for (i, d) in datagrams(&mut tx, &body).iter().enumerate() {
                    let sealed = sealer.seal(d);
                    let mut forged = sealed.clone();
                    *forged.last_mut().unwrap() ^= 1;
                    rx.handle_arrived_mut(now, now, publisher, BytesMut::from(&forged[..]));
                    if i % 2 == 0 {
                        rx.handle(now, publisher, Bytes::from(sealed));
                    } else {
                        rx.handle_arrived_mut(now, now, publisher, BytesMut::from(&sealed[..]));
                    }
                }
                let got = events(&mut rx);
                assert_eq!(got.len(), 1, "{cipher} {mode}");
                assert!(
                    got[0] == ReceiverEvent::Message(Bytes::from(body)),
                    "{cipher} {mode}: not the message sent"
                );
                let stats = rx.secure_stats().unwrap();
                assert_eq!((stats.opened, stats.bad_tag), (7, 7), "{cipher} {mode}");
            }
        }
    }

    #[test]
    fn messages_from_the_publisher_pass_and_a_stranger_is_said_once_and_counted() {
        let now = Instant::now();
        let mut rx = receiver(now, true);
        let mut tx = Fragmenter::new(7, 1500).unwrap();
        let publisher: SocketAddr = PUBLISHER.parse().unwrap();
        let stranger: SocketAddr = "10.0.0.9:4000".parse().unwrap();
        for d in datagrams(&mut tx, &[1; 4000]) {
            rx.handle(now, stranger, d.clone());
            rx.handle(now, publisher, d);
        }
        let got = events(&mut rx);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], ReceiverEvent::Stranger(stranger));
        assert_eq!(got[1], ReceiverEvent::Message(Bytes::from(vec![1; 4000])));
        let stats = rx.stats();
        assert_eq!((stats.messages, stats.foreign), (1, 3));
        assert_eq!(rx.peer(), Some(publisher));
        rx.on_truncated(2);
        assert_eq!(rx.stats().malformed, 2);
    }

    #[test]
    fn the_publisher_closing_and_falling_silent_end_the_link() {
        let t0 = Instant::now();
        let publisher: SocketAddr = PUBLISHER.parse().unwrap();
        let tx = Fragmenter::new(7, 1500).unwrap();
        let mut rx = receiver(t0, true);
        rx.handle(t0, publisher, Bytes::copy_from_slice(&tx.err()));
        assert_eq!(events(&mut rx), [ReceiverEvent::Closed]);

        let mut rx = receiver(t0, true);
        let mut now = t0;
        let mut dead_at = None;
        while now < t0 + Duration::from_secs(10) && dead_at.is_none() {
            now = rx.poll_timeout();
            if now < t0 + Duration::from_secs(2) {
                rx.handle(now, publisher, Bytes::copy_from_slice(&tx.ping()));
            }
            rx.handle_timeout(now);
            if let Some(ReceiverEvent::Dead(dead)) = rx.poll_event() {
                dead_at = Some((dead, now));
            }
        }
        let (dead, at) = dead_at.expect("declared dead");
        assert_eq!(dead, Dead::Silent);
        let silent_since = t0 + Duration::from_millis(1750);
        assert!(at - silent_since > LIVENESS_TIMEOUT, "{:?}", at - t0);
        assert!(at - silent_since <= LIVENESS_TIMEOUT + Duration::from_millis(500));
    }

    /// Feeds `INCOMPLETE_BEFORE_FAILURE + 1` messages of 5000 bytes (four blocks), of which
    /// `keep` picks the blocks that arrive, with a heartbeat after each; the events at the
    /// next liveness check.
    fn after_messages_cut_by(keep: impl Fn(usize, &Bytes) -> bool) -> Vec<ReceiverEvent> {
        let t0 = Instant::now();
        let publisher: SocketAddr = PUBLISHER.parse().unwrap();
        let mut tx = Fragmenter::new(7, 1500).unwrap();
        let mut rx = receiver(t0, true);
        let mut now = t0;
        for _ in 0..INCOMPLETE_BEFORE_FAILURE + 1 {
            let blocks = datagrams(&mut tx, &[2; 5000]);
            for (i, d) in blocks.into_iter().enumerate() {
                if keep(i, &d) {
                    rx.handle(now, publisher, d);
                }
            }
            rx.handle(now, publisher, Bytes::copy_from_slice(&tx.ping()));
            now += Duration::from_millis(100);
        }
        now = now.max(rx.poll_timeout());
        rx.handle_timeout(now);
        events(&mut rx)
    }

    #[test]
    fn a_path_that_drops_every_full_size_datagram_is_dead_even_with_heartbeats() {
        // An MTU black hole: only each message's short last block gets through.
        let dead = after_messages_cut_by(|_, d| d.len() < 1500);
        assert!(
            matches!(dead[..], [ReceiverEvent::Dead(Dead::NothingCompletes(n))] if n >= INCOMPLETE_BEFORE_FAILURE),
            "{dead:?}"
        );
    }

    #[test]
    fn a_path_that_loses_a_block_of_every_message_is_lossy_not_dead() {
        let events = after_messages_cut_by(|i, _| i != 2);
        assert_eq!(
            events,
            [],
            "three of four blocks arrive: loss, which FEC repairs"
        );
    }

    #[test]
    fn a_driver_that_never_drains_holds_a_bounded_number_of_events() {
        let now = Instant::now();
        let publisher: SocketAddr = PUBLISHER.parse().unwrap();
        let mut tx = Fragmenter::new(7, 1500).unwrap();
        let mut rx = receiver(now, true);
        for _ in 0..3 * MAX_PENDING_EVENTS {
            for d in datagrams(&mut tx, &[3; 100]) {
                rx.handle(now, publisher, d);
            }
        }
        assert_eq!(rx.events.len(), MAX_PENDING_EVENTS);
        assert!(rx.memory() <= MAX_PENDING_EVENTS * 100);
        assert_eq!(rx.stats().messages, 3 * MAX_PENDING_EVENTS as u64);
        assert_eq!(rx.events_dropped(), 2 * MAX_PENDING_EVENTS as u64);
    }
}
