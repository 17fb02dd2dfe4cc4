//! Reassembling datagrams into messages, for one connection.
//!
//! Better than roscpp's, which needs every block in order: blocks of the current message
//! are taken in any order; a block that arrives before its DATA0 waits (bounded) for it;
//! duplicates are ignored; a message is abandoned when a newer one starts or none of its
//! blocks arrives for the timeout; bytes of two messages never mix. Garbage is counted and dropped without
//! disturbing the message in progress.
//!
//! Nothing a datagram declares is trusted with memory or time: a DATA0 may claim 65,535
//! blocks, but the reassembler commits memory only for blocks that arrived (blocks past a
//! gap wait in a map keyed by index, never in a zeroed full-size buffer), every block but
//! the last must be exactly the negotiated payload size, and the work per datagram is its
//! copy plus a map operation. A message waiting for its DATA0 is bounded by
//! [`MAX_STASH_BYTES`], and at most [`MAX_SHARED_BLOCKS`] of its blocks keep the buffers
//! they were read into.
//!
//! One file: one state machine whose bounds are argued together.

use super::{is_newer, message_id_distance, DatagramHeader, Opcode, HEADER_LEN};
use bytes::{Buf, Bytes, BytesMut};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How a [`Reassembler`] judges what arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReassemblerConfig {
    /// Largest frame accepted (length prefix included); larger messages are dropped.
    pub max_message_size: usize,
    /// How long an incomplete message may wait for its next block.
    pub timeout: Duration,
    /// When set, datagrams for other connection ids are dropped. roscpp never checks the
    /// id; udpros checks it once the publisher is known to be a udpros peer.
    pub connection_id: Option<u32>,
    /// The negotiated payload per datagram (`max_datagram_size` − 8): every block of a
    /// multi-block message but the last has exactly this size, and none is larger. `None`
    /// accepts any size consistent within a message.
    pub block_payload: Option<usize>,
}

impl Default for ReassemblerConfig {
    fn default() -> Self {
        ReassemblerConfig {
            max_message_size: 64 << 20,
            timeout: Duration::from_millis(500),
            connection_id: None,
            block_payload: None,
        }
    }
}

/// What a datagram produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A complete message body (without its length prefix).
    Message(Bytes),
    /// A heartbeat from the publisher.
    Ping,
    /// The publisher closed the connection.
    Closed,
}

/// Per-connection counters, as `getBusStats` reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpStats {
    /// Messages delivered.
    pub messages: u64,
    /// Body bytes of delivered messages (without length prefixes, as roscpp counts).
    pub bytes: u64,
    /// Messages begun but never completed (superseded or timed out).
    pub incomplete: u64,
    /// Messages whose ids were skipped entirely (not one datagram seen).
    pub missed: u64,
    /// Datagrams of blocks (or whole messages) already received.
    pub duplicates: u64,
    /// Blocks that arrived after a later block of the same message, or before its DATA0.
    /// On an FEC link of datagrams too large for two in a send (loopback), a lossless
    /// message's short last block is sent first, with its checksum: one each.
    pub out_of_order: u64,
    /// Blocks of messages already delivered or given up.
    pub late: u64,
    /// Short, empty, unknown-opcode or inconsistent datagrams.
    pub malformed: u64,
    /// Datagrams for another connection id.
    pub foreign: u64,
    /// Messages over the size limit.
    pub oversize: u64,
    /// Heartbeats received.
    pub pings: u64,
    /// Repair datagrams taken (FEC links): those that carry a repair shard.
    pub repairs: u64,
    /// Metadata-only datagrams taken (FEC links): a message's checksum and block count,
    /// sent for every message of several blocks, on a clean link too.
    pub checksums: u64,
    /// Messages rebuilt from repair datagrams (FEC links).
    pub rebuilt: u64,
    /// Messages dropped because they failed their checksum (FEC links).
    pub corrupt: u64,
    /// Messages of several blocks delivered unchecked: their metadata was lost (FEC links).
    pub unverified: u64,
    /// Datagram loss over the last few thousand datagrams, in parts per million (see
    /// [`LossMeter`](super::loss::LossMeter)).
    pub loss_ppm: u32,
    /// Blocks that arrived of the messages given up ...
    pub incomplete_blocks_seen: u64,
    /// ... and the blocks those messages had: their ratio tells random loss (most blocks
    /// arrive) from a path that drops every full-size datagram (almost none do).
    pub incomplete_blocks_expected: u64,
}

impl UdpStats {
    /// Messages known lost: begun and abandoned, never seen at all, or dropped for a
    /// failed checksum.
    pub fn lost(&self) -> u64 {
        self.incomplete + self.missed + self.corrupt
    }
}

/// How many finished message ids are remembered to recognise late and duplicate datagrams.
const FINISHED_MEMORY: usize = 32;

/// Most bytes held for blocks whose DATA0 has not arrived (with the message size limit,
/// whichever is smaller): reordering that deep is rare, and a flood of orphan blocks must
/// not hold more.
pub const MAX_STASH_BYTES: usize = 4 << 20;

/// Blocks waiting for their DATA0 are held where they were read, not copied, when they
/// are at least this large and fewer than [`MAX_SHARED_BLOCKS`] are held so. On loopback
/// the sender puts a message's short last block first (its checksum follows in the same
/// send), so every multi-block message's last block waits for its DATA0: copied into the
/// stash and then into the frame, a 100 kB message in two 64 kB datagrams cost 135 kB of
/// copying instead of 100 (S3; `callgrind`: 34 kB of `memcpy` per message, and its
/// allocation).
const SHARED_BLOCK_MIN: usize = 16 << 10;

/// Most stashed blocks held where they were read. Such a block keeps the whole read
/// buffer it came in alive (a few hundred kB at most, the socket reader's), so they are
/// few: blocks of a flood of orphans are copied, bounded by their bytes.
const MAX_SHARED_BLOCKS: usize = 4;

/// The first reservation for a message's frame; larger frames grow by doubling as their
/// blocks arrive, so a declared size that never comes costs nothing.
const INITIAL_FRAME_RESERVE: usize = 1 << 20;

/// The message being assembled.
#[derive(Debug)]
struct Partial {
    id: u8,
    blocks: u16,
    /// Payload bytes in every block but the last.
    block_payload: usize,
    frame_len: usize,
    /// Blocks `0..contiguous`, in order: in a buffer of its own, or in the DATA0's own read
    /// buffer when the caller handed it over with room for the rest
    /// ([`Reassembler::handle_owned`]).
    frame: BytesMut,
    contiguous: u16,
    /// Blocks past a gap, waiting for it to fill.
    ahead: BTreeMap<u16, Vec<u8>>,
    ahead_bytes: usize,
    highest: u16,
    deadline: Instant,
    /// Second copies of blocks that differ from the first (a stale block of the message
    /// that used this id before, or a forged one), kept so that a message whose checksum
    /// fails can be tried with them (FEC links only check; see [`Reassembler::conflicts`]).
    conflicts: Vec<(u16, Vec<u8>)>,
}

/// Most conflicting second copies kept per message.
const MAX_CONFLICTS: usize = 4;

impl Partial {
    fn has(&self, index: u16) -> bool {
        index < self.contiguous || self.ahead.contains_key(&index)
    }

    fn expected_len(&self, index: u16) -> usize {
        if index + 1 == self.blocks {
            self.frame_len - usize::from(index) * self.block_payload
        } else {
            self.block_payload
        }
    }

    /// Copies a block in; false when it does not fit this message's geometry.
    fn place(&mut self, index: u16, payload: &[u8]) -> bool {
        if index >= self.blocks || payload.len() != self.expected_len(index) || self.has(index) {
            return false;
        }
        self.highest = self.highest.max(index);
        if index != self.contiguous {
            self.ahead_bytes += payload.len();
            self.ahead.insert(index, payload.to_vec());
            return true;
        }
        self.append(payload);
        while let Some(block) = self.ahead.remove(&self.contiguous) {
            self.ahead_bytes -= block.len();
            self.append(&block);
        }
        true
    }

    /// Appends the next block in order, growing the frame by doubling up to its length,
    /// into a buffer of exactly the size chosen (`BytesMut::reserve` may round past it).
    fn append(&mut self, block: &[u8]) {
        let needed = self.frame.len() + block.len();
        if needed > self.frame.capacity() {
            let target = (self.frame.capacity() * 2).max(needed).min(self.frame_len);
            let mut grown = BytesMut::with_capacity(target);
            grown.extend_from_slice(&self.frame);
            self.frame = grown;
        }
        self.frame.extend_from_slice(block);
        self.contiguous += 1;
    }

    fn is_complete(&self) -> bool {
        self.contiguous == self.blocks
    }

    fn memory(&self) -> usize {
        self.frame.capacity()
            + self.ahead_bytes
            + self.conflicts.iter().map(|(_, b)| b.len()).sum::<usize>()
    }

    /// The bytes held for block `index`, if it arrived.
    fn block(&self, index: u16) -> Option<&[u8]> {
        if index < self.contiguous {
            let start = usize::from(index) * self.block_payload;
            let end = (start + self.block_payload).min(self.frame.len());
            Some(&self.frame[start..end])
        } else {
            self.ahead.get(&index).map(Vec::as_slice)
        }
    }

    fn present(&self) -> usize {
        usize::from(self.contiguous) + self.ahead.len()
    }

    /// Keeps a second copy of block `index` that differs from the first.
    fn note_duplicate(&mut self, index: u16, payload: &[u8]) {
        let differs = self.block(index).is_some_and(|held| held != payload);
        if differs && self.conflicts.len() < MAX_CONFLICTS {
            self.conflicts.push((index, payload.to_vec()));
        }
    }
}

/// DATAN blocks that arrived before their message's DATA0.
#[derive(Debug)]
struct Stash {
    id: u8,
    blocks: BTreeMap<u16, Bytes>,
    bytes: usize,
    /// Blocks held where they were read (see [`SHARED_BLOCK_MIN`]).
    shared: usize,
    deadline: Instant,
}

/// Reassembles one link's datagrams into messages (see the module documentation):
/// datagrams and `now` in, [`Event`]s and a deadline ([`Reassembler::poll_timeout`]) out.
#[derive(Debug)]
pub struct Reassembler {
    config: ReassemblerConfig,
    partial: Option<Partial>,
    stash: Option<Stash>,
    /// Ids of messages delivered (a DATA0 with one of these is a duplicate) ...
    delivered: IdRing,
    /// ... and of messages given up (their blocks are late; a DATA0 starts them anew,
    /// so a stranger's abandoned DATA0 cannot make a real message look like a duplicate).
    abandoned: IdRing,
    last_started: Option<u8>,
    /// The newest message delivered: an older one arriving after it is late, whole or
    /// not (a subscriber wants the freshest data, in order).
    last_delivered: Option<u8>,
    /// The conflicting second copies of the last delivered message's blocks.
    delivered_conflicts: Vec<(u16, Vec<u8>)>,
    stats: UdpStats,
}

impl Reassembler {
    /// A reassembler with `config`, holding nothing.
    pub fn new(config: ReassemblerConfig) -> Reassembler {
        Reassembler {
            config,
            partial: None,
            stash: None,
            delivered: IdRing::default(),
            abandoned: IdRing::default(),
            last_started: None,
            last_delivered: None,
            delivered_conflicts: Vec::new(),
            stats: UdpStats::default(),
        }
    }

    /// How it judges what arrives.
    pub fn config(&self) -> &ReassemblerConfig {
        &self.config
    }

    /// Starts checking connection ids (once the peer is known to send the negotiated one).
    pub fn set_connection_id(&mut self, id: Option<u32>) {
        self.config.connection_id = id;
    }

    /// What it has counted so far, as `getBusStats` reports it.
    pub fn stats(&self) -> &UdpStats {
        &self.stats
    }

    /// Counts what a caller judged of a datagram it kept from reassembly.
    pub fn count(&mut self, judged: impl FnOnce(&mut UdpStats)) {
        judged(&mut self.stats);
    }

    /// Bytes held for incomplete messages.
    pub fn memory(&self) -> usize {
        self.partial.as_ref().map_or(0, Partial::memory)
            + self.stash.as_ref().map_or(0, |s| s.bytes)
    }

    /// The id of the message delivered last.
    pub fn last_delivered(&self) -> Option<u8> {
        self.last_delivered
    }

    /// Second copies of the last delivered message's blocks that differed from the copies
    /// it was assembled from (`(index, payload)`, at most a few): a message that fails its
    /// checksum may be right with them.
    pub fn conflicts(&self) -> &[(u16, Vec<u8>)] {
        &self.delivered_conflicts
    }

    /// The blocks held of message `id`, in reassembly or waiting for its DATA0: `(index,
    /// payload)`, in no particular order. Empty when nothing of it is held.
    pub fn blocks_of(&self, id: u8) -> Vec<(u16, &[u8])> {
        if let Some(p) = self.partial.as_ref().filter(|p| p.id == id) {
            let ahead = p.ahead.iter().map(|(&i, b)| (i, b.as_slice()));
            (0..p.contiguous)
                .filter_map(|i| Some((i, p.block(i)?)))
                .chain(ahead)
                .collect()
        } else if let Some(stash) = self.stash.as_ref().filter(|s| s.id == id) {
            stash.blocks.iter().map(|(&i, b)| (i, &b[..])).collect()
        } else {
            Vec::new()
        }
    }

    /// How many blocks of message `id` are held.
    pub fn held_blocks(&self, id: u8) -> usize {
        if let Some(p) = self.partial.as_ref().filter(|p| p.id == id) {
            p.present()
        } else {
            self.stash
                .as_ref()
                .filter(|s| s.id == id)
                .map_or(0, |s| s.blocks.len())
        }
    }

    /// Places blocks of message `id` that were rebuilt rather than received (`blocks` of
    /// them in all; `restored` holds `(index, payload)` with each payload its block's exact
    /// size): block 0 starts the message as its DATA0 would, the others fill it. Returns the
    /// message if that completed it. Counted as received blocks are, except that they are
    /// never out of order.
    pub fn restore(
        &mut self,
        now: Instant,
        id: u8,
        blocks: u16,
        mut restored: Vec<(u16, Vec<u8>)>,
    ) -> Option<Event> {
        // Block 0 first: it starts the message, and the others need it started.
        restored.sort_unstable_by_key(|(index, _)| *index);
        let mut event = None;
        for (index, payload) in restored {
            if index == 0 {
                let header = DatagramHeader {
                    connection_id: self.config.connection_id.unwrap_or(0),
                    opcode: Opcode::Data0,
                    message_id: id,
                    block: blocks,
                };
                event = self
                    .on_data0(now, header, Arrival::Shared(Bytes::from(payload)))
                    .or(event);
            } else if let Some(p) = self.partial.as_mut().filter(|p| p.id == id) {
                if !p.has(index) && !p.place(index, &payload) {
                    self.stats.malformed += 1;
                }
            }
        }
        event.or_else(|| self.take_complete())
    }

    /// When [`Reassembler::handle_timeout`] should next run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let partial = self.partial.as_ref().map(|p| p.deadline);
        let stash = self.stash.as_ref().map(|s| s.deadline);
        partial.into_iter().chain(stash).min()
    }

    /// Drops incomplete messages whose deadline has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.partial.as_ref().is_some_and(|p| p.deadline <= now) {
            self.abandon_partial();
        }
        if self.stash.as_ref().is_some_and(|s| s.deadline <= now) {
            self.abandon_stash();
        }
    }

    /// Takes one received datagram.
    pub fn handle(&mut self, now: Instant, datagram: Bytes) -> Option<Event> {
        self.take(now, Arrival::Shared(datagram))
    }

    /// Takes one received datagram that the caller holds alone. A DATA0 with room after
    /// it for its whole frame (a socket reader hands over its buffer's spare capacity for
    /// one that asks, see [`room_after`]) becomes the message's frame where it lies: its
    /// block is never copied, only the blocks that join it.
    pub fn handle_owned(&mut self, now: Instant, datagram: BytesMut) -> Option<Event> {
        self.take(now, Arrival::Owned(datagram))
    }

    pub(crate) fn take(&mut self, now: Instant, datagram: Arrival) -> Option<Event> {
        self.handle_timeout(now);
        let Some(header) = DatagramHeader::parse(datagram.bytes()) else {
            self.stats.malformed += 1;
            return None;
        };
        if self
            .config
            .connection_id
            .is_some_and(|id| id != header.connection_id)
        {
            self.stats.foreign += 1;
            return None;
        }
        match header.opcode {
            Opcode::Ping => {
                self.stats.pings += 1;
                Some(Event::Ping)
            }
            Opcode::Err => Some(Event::Closed),
            // Only links that agreed on FEC carry repairs, and their receiver takes them
            // before they reach reassembly; reports and feedback only go to publishers.
            Opcode::Repair | Opcode::Report | Opcode::Feedback => {
                self.stats.malformed += 1;
                None
            }
            Opcode::Data0 => self.on_data0(now, header, datagram.after_header()),
            Opcode::DataN => {
                self.on_datan(now, header, datagram.freeze().slice(HEADER_LEN..));
                self.take_complete()
            }
        }
    }

    fn on_data0(
        &mut self,
        now: Instant,
        header: DatagramHeader,
        payload: Arrival,
    ) -> Option<Event> {
        let blocks = header.block;
        let Some(prefix) = payload.bytes().first_chunk::<4>() else {
            self.stats.malformed += 1;
            return None;
        };
        let frame_len = 4 + u32::from_le_bytes(*prefix) as usize;
        // The block count must be what the length prefix and this block's size imply, and
        // the block the negotiated size.
        let sized = match self.config.block_payload {
            Some(negotiated) if blocks > 1 => payload.len() == negotiated,
            Some(negotiated) => payload.len() <= negotiated,
            None => true,
        };
        let consistent = sized
            && match blocks {
                0 => false,
                1 => payload.len() == frame_len,
                n => frame_len.div_ceil(payload.len()) == usize::from(n),
            };
        if !consistent {
            self.stats.malformed += 1;
            return None;
        }
        let id = header.message_id;
        if frame_len > self.config.max_message_size {
            self.stats.oversize += 1;
            self.abandoned.push(id); // its other blocks are then late, not stashed
            return None;
        }
        if self.delivered.contains(id) {
            self.stats.duplicates += 1;
            return None;
        }
        if self.is_older_than_delivered(id) {
            self.stats.late += 1;
            return None;
        }
        if let Some(p) = &self.partial {
            if p.id == id && p.blocks == blocks && p.frame_len == frame_len {
                self.stats.duplicates += 1;
                return None;
            }
            self.abandon_partial();
        }
        if let Some(last) = self.last_started {
            let gap = message_id_distance(last, id);
            if (2..128).contains(&gap) {
                let unseen = u64::from(gap - 1).saturating_sub(self.seen_between(last, gap));
                self.stats.missed += unseen;
            }
        }
        // A late DATA0 of an older message does not move the reference back: the messages
        // after it were not missed. The message itself was counted missed when a newer one
        // started, unless it was seen then (and counted incomplete): take that back.
        match self.last_started {
            Some(last) if !is_newer(last, id) => {
                let seen =
                    self.abandoned.contains(id) || self.stash.as_ref().is_some_and(|s| s.id == id);
                if last != id && !seen {
                    self.stats.missed = self.stats.missed.saturating_sub(1);
                }
            }
            _ => self.last_started = Some(id),
        }
        if blocks == 1 {
            return self.deliver(id, payload.freeze().slice(4..));
        }
        let block_payload = payload.len();
        // Block 0 stays where it was read when the caller's buffer has room for the whole
        // frame after it; else it is copied into a frame of its own.
        let frame = match payload {
            Arrival::Owned(own) if own.capacity() >= frame_len => own,
            payload => {
                let mut frame = BytesMut::with_capacity(frame_len.min(INITIAL_FRAME_RESERVE));
                frame.extend_from_slice(payload.bytes());
                frame
            }
        };
        let mut partial = Partial {
            id,
            blocks,
            block_payload,
            frame_len,
            frame,
            contiguous: 1,
            ahead: BTreeMap::new(),
            ahead_bytes: 0,
            highest: 0,
            deadline: now + self.config.timeout,
            conflicts: Vec::new(),
        };
        if let Some(stash) = self.stash.take_if(|s| s.id == id) {
            for (index, block) in stash.blocks {
                if !partial.place(index, &block) {
                    self.stats.malformed += 1;
                }
            }
        } else if self.stash.as_ref().is_some_and(|s| !is_newer(id, s.id)) {
            // Blocks waiting for an older message's DATA0 will not see it now.
            self.abandon_stash();
        }
        self.partial = Some(partial);
        self.take_complete()
    }

    fn on_datan(&mut self, now: Instant, header: DatagramHeader, payload: Bytes) {
        let (id, index) = (header.message_id, header.block);
        let oversized = self
            .config
            .block_payload
            .is_some_and(|negotiated| payload.len() > negotiated);
        if index == 0 || payload.is_empty() || oversized {
            self.stats.malformed += 1;
            return;
        }
        if let Some(p) = self.partial.as_mut().filter(|p| p.id == id) {
            if p.has(index) {
                self.stats.duplicates += 1;
                p.note_duplicate(index, &payload);
            } else {
                let later_seen = index < p.highest;
                if !p.place(index, &payload) {
                    self.stats.malformed += 1;
                } else {
                    // A message that keeps arriving is waited for: on a narrow link a large
                    // one takes longer than the timeout to cross, block after block.
                    p.deadline = now + self.config.timeout;
                    if later_seen {
                        self.stats.out_of_order += 1;
                    }
                }
            }
            return;
        }
        if self.delivered.contains(id)
            || self.abandoned.contains(id)
            || self.is_older_than_delivered(id)
            || self.partial.as_ref().is_some_and(|p| !is_newer(p.id, id))
        {
            self.stats.late += 1;
            return;
        }
        // A block of a message whose DATA0 has not arrived (yet).
        self.stats.out_of_order += 1;
        if self.stash.as_ref().is_some_and(|s| s.id != id) {
            if !is_newer(self.stash.as_ref().map_or(id, |s| s.id), id) {
                self.stats.late += 1;
                return;
            }
            self.abandon_stash();
        }
        let deadline = now + self.config.timeout;
        let limit = self.config.max_message_size.min(MAX_STASH_BYTES);
        let stash = self.stash.get_or_insert_with(|| Stash {
            id,
            blocks: BTreeMap::new(),
            bytes: 0,
            shared: 0,
            deadline,
        });
        if stash.blocks.contains_key(&index) {
            self.stats.duplicates += 1;
        } else if stash.bytes + payload.len() > limit {
            self.stats.oversize += 1;
        } else {
            stash.bytes += payload.len();
            let block = if payload.len() >= SHARED_BLOCK_MIN && stash.shared < MAX_SHARED_BLOCKS {
                stash.shared += 1;
                payload
            } else {
                Bytes::copy_from_slice(&payload)
            };
            stash.blocks.insert(index, block);
        }
    }

    fn take_complete(&mut self) -> Option<Event> {
        let partial = self.partial.take_if(|p| p.is_complete())?;
        let event = self.deliver(partial.id, partial.frame.freeze().slice(4..));
        self.delivered_conflicts = partial.conflicts;
        event
    }

    fn deliver(&mut self, id: u8, body: Bytes) -> Option<Event> {
        if self.abandoned.contains(id) {
            // Given up, then restarted by a late DATA0 and completed: not lost after all.
            self.stats.incomplete = self.stats.incomplete.saturating_sub(1);
        }
        self.delivered.push(id);
        self.last_delivered = Some(id);
        self.delivered_conflicts.clear();
        self.stats.messages += 1;
        self.stats.bytes += body.len() as u64;
        Some(Event::Message(body))
    }

    /// Messages after `last` and before the one `gap` ids past it that were seen (given
    /// up, or waiting in the stash): counted incomplete, so not missed.
    fn seen_between(&self, last: u8, gap: u8) -> u64 {
        let between = |id: u8| (1..gap).contains(&message_id_distance(last, id));
        let abandoned = self
            .abandoned
            .ids
            .iter()
            .flatten()
            .filter(|&&id| between(id));
        let stashed = self
            .stash
            .as_ref()
            .filter(|s| between(s.id) && !self.abandoned.contains(s.id));
        (abandoned.count() + usize::from(stashed.is_some())) as u64
    }

    fn is_older_than_delivered(&self, id: u8) -> bool {
        self.last_delivered.is_some_and(|last| is_newer(id, last))
    }

    fn abandon_partial(&mut self) {
        if let Some(p) = self.partial.take() {
            self.abandon(p.id, p.present(), usize::from(p.blocks));
        }
    }

    fn abandon_stash(&mut self) {
        if let Some(s) = self.stash.take() {
            // The block count came with the DATA0 that never arrived: at least the highest
            // index seen, and block 0 itself.
            let highest = s.blocks.keys().next_back().map_or(0, |&i| usize::from(i));
            self.abandon(s.id, s.blocks.len(), highest + 1);
        }
    }

    /// Gives message `id` up, counted once however often a duplicated DATA0 restarted it,
    /// with the `seen` of its `expected` blocks that arrived.
    fn abandon(&mut self, id: u8, seen: usize, expected: usize) {
        if !self.abandoned.contains(id) {
            self.stats.incomplete += 1;
            self.stats.incomplete_blocks_seen += seen as u64;
            self.stats.incomplete_blocks_expected += expected.max(seen) as u64;
            self.abandoned.push(id);
        }
    }
}

/// A datagram as its driver hands it over.
pub(crate) enum Arrival {
    /// Part of a buffer others may hold too: opening a sealed one takes a copy.
    Shared(Bytes),
    /// The driver's alone: a sealed one is opened where it lies, and a DATA0 with room
    /// after it is assembled there.
    Owned(BytesMut),
}

impl Arrival {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Arrival::Shared(b) => b,
            Arrival::Owned(b) => b,
        }
    }

    fn len(&self) -> usize {
        self.bytes().len()
    }

    pub(crate) fn freeze(self) -> Bytes {
        match self {
            Arrival::Shared(b) => b,
            Arrival::Owned(b) => b.freeze(),
        }
    }

    /// The payload after the UDPROS header (the caller parsed one, so it is there); an
    /// owned buffer keeps its spare capacity.
    fn after_header(self) -> Arrival {
        match self {
            Arrival::Shared(b) => Arrival::Shared(b.slice(HEADER_LEN..)),
            Arrival::Owned(mut b) => {
                b.advance(HEADER_LEN);
                Arrival::Owned(b)
            }
        }
    }
}

/// How many bytes a datagram wants after it, where it lies, for its message to be
/// assembled there by [`Reassembler::handle_owned`]: the rest of the frame for a DATA0 of a
/// message of several blocks, else none. A socket reader that has that much spare
/// capacity after the datagram hands it over, and the DATA0's block is never copied.
pub fn room_after(datagram: &[u8]) -> usize {
    let Some(header) = DatagramHeader::parse(datagram) else {
        return 0;
    };
    let payload = &datagram[HEADER_LEN..];
    match (header.opcode, payload.first_chunk::<4>()) {
        (Opcode::Data0, Some(prefix)) if header.block > 1 => {
            let frame_len = 4 + u32::from_le_bytes(*prefix) as usize;
            frame_len.saturating_sub(payload.len())
        }
        _ => 0,
    }
}

/// The last [`FINISHED_MEMORY`] message ids of one kind.
#[derive(Debug, Default)]
struct IdRing {
    ids: [Option<u8>; FINISHED_MEMORY],
    next: usize,
}

impl IdRing {
    fn push(&mut self, id: u8) {
        self.ids[self.next] = Some(id);
        self.next = (self.next + 1) % FINISHED_MEMORY;
    }

    fn contains(&self, id: u8) -> bool {
        self.ids.contains(&Some(id))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Fragmenter;
    use super::*;
    use crate::tcpros::frame;

    fn datagrams(f: &mut Fragmenter, body: &[u8]) -> Vec<Bytes> {
        f.fragment(&frame(body))
            .unwrap()
            .map(|d| Bytes::from(d.to_vec()))
            .collect()
    }

    fn feed(r: &mut Reassembler, now: Instant, dgs: impl IntoIterator<Item = Bytes>) -> Vec<Event> {
        dgs.into_iter().filter_map(|d| r.handle(now, d)).collect()
    }

    fn body(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn delivers_in_order_and_reordered_blocks() {
        let now = Instant::now();
        let mut f = Fragmenter::new(1, 1500).unwrap();
        let mut r = Reassembler::new(ReassemblerConfig::default());
        let a = body(3012, 1);
        assert_eq!(
            feed(&mut r, now, datagrams(&mut f, &a)),
            [Event::Message(Bytes::from(a))]
        );
        let b = body(5000, 2);
        let mut dgs = datagrams(&mut f, &b);
        dgs.reverse(); // DATAN blocks before their DATA0, and backwards
        assert_eq!(feed(&mut r, now, dgs), [Event::Message(Bytes::from(b))]);
        assert_eq!(r.stats().messages, 2);
        assert_eq!(r.stats().out_of_order, 3);
        assert_eq!(r.memory(), 0);
    }

    #[test]
    fn ignores_duplicates_of_blocks_and_of_whole_messages() {
        let now = Instant::now();
        let mut f = Fragmenter::new(1, 100).unwrap();
        let mut r = Reassembler::new(ReassemblerConfig::default());
        let msg = body(250, 3);
        let dgs = datagrams(&mut f, &msg);
        let doubled = dgs.iter().flat_map(|d| [d.clone(), d.clone()]);
        assert_eq!(feed(&mut r, now, doubled).len(), 1);
        // A late copy of the whole message is not delivered again.
        assert!(feed(&mut r, now, dgs).is_empty());
        let small = datagrams(&mut f, b"x");
        assert_eq!(
            feed(&mut r, now, [small[0].clone(), small[0].clone()]).len(),
            1
        );
        assert!(r.stats().duplicates >= 4);
    }

    #[test]
    fn a_newer_message_abandons_an_incomplete_one() {
        let now = Instant::now();
        let mut f = Fragmenter::new(1, 100).unwrap();
        let mut r = Reassembler::new(ReassemblerConfig::default());
        let first = datagrams(&mut f, &body(300, 4));
        let second_body = body(300, 5);
        let second = datagrams(&mut f, &second_body);
        assert!(feed(&mut r, now, first[..2].iter().cloned()).is_empty());
        assert_eq!(
            feed(&mut r, now, second),
            [Event::Message(Bytes::from(second_body))]
        );
        // The rest of the first arrives late: dropped, never mixed in.
        assert!(feed(&mut r, now, first[2..].iter().cloned()).is_empty());
        assert_eq!(r.stats().incomplete, 1);
        assert!(r.stats().late >= 1);
    }

    #[test]
    fn incomplete_messages_expire_and_free_memory() {
        let now = Instant::now();
        let mut f = Fragmenter::new(1, 1500).unwrap();
        let mut r = Reassembler::new(ReassemblerConfig {
            timeout: Duration::from_millis(100),
            ..Default::default()
        });
        let dgs = datagrams(&mut f, &body(10_000, 6));
        feed(&mut r, now, dgs[..3].iter().cloned());
        assert!(r.memory() >= 10_000);
        assert_eq!(r.poll_timeout(), Some(now + Duration::from_millis(100)));
        r.handle_timeout(now + Duration::from_millis(100));
        assert_eq!(r.memory(), 0);
        assert_eq!(r.stats().incomplete, 1);
        assert!(feed(
            &mut r,
            now + Duration::from_millis(101),
            dgs[3..].iter().cloned()
        )
        .is_empty());
    }

    /// On a narrow link a large message takes longer to cross than the timeout: it is
    /// waited for while its blocks keep coming, and given up a timeout after the last.
    #[test]
    fn a_message_that_keeps_arriving_is_waited_for() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        let mut f = Fragmenter::new(1, 1500).unwrap();
        let mut r = Reassembler::new(ReassemblerConfig {
            timeout: ms(100),
            ..Default::default()
        });
        let dgs = datagrams(&mut f, &body(10_000, 6));
        let mut delivered = Vec::new();
        for (i, d) in dgs.iter().enumerate() {
            let at = now + ms(60 * i as u64);
            r.handle_timeout(at);
            delivered.extend(feed(&mut r, at, [d.clone()]));
        }
        assert_eq!(
            delivered.len(),
            1,
            "{} blocks over {:?}",
            dgs.len(),
            ms(60) * dgs.len() as u32
        );
        assert_eq!(r.stats().incomplete, 0);
        // A pause longer than the timeout still gives a message up.
        let next = datagrams(&mut f, &body(10_000, 7));
        let later = now + ms(1000);
        feed(&mut r, later, next[..2].iter().cloned());
        assert_eq!(r.poll_timeout(), Some(later + ms(100)));
        r.handle_timeout(later + ms(100));
        assert_eq!(r.stats().incomplete, 1);
    }

    #[test]
    fn garbage_does_not_disturb_the_message_in_progress() {
        let now = Instant::now();
        let mut f = Fragmenter::new(9, 100).unwrap();
        let mut r = Reassembler::new(ReassemblerConfig::default());
        let msg = body(400, 7);
        let dgs = datagrams(&mut f, &msg);
        let id = dgs[0][5];
        let garbage = [
            Bytes::new(),                                                   // empty
            Bytes::from_static(&[1, 2, 3]),                                 // short
            Bytes::from_static(&[9, 0, 0, 0, 7, 1, 1, 0]),                  // unknown opcode
            Bytes::from(vec![9, 0, 0, 0, 1, id, 1, 0]),                     // DATAN without payload
            Bytes::from(vec![9, 0, 0, 0, 1, id, 200, 0, 1, 2]),             // block past the count
            Bytes::from(vec![9, 0, 0, 0, 1, id, 2, 0, 1, 2]),               // wrong block size
            Bytes::from(vec![9, 0, 0, 0, 0, 77, 5, 0, 200, 0, 0, 0, 1, 2]), // count disagrees with prefix
            Bytes::from(vec![9, 0, 0, 0, 0, 78, 0, 0, 0, 0, 0, 0]),         // count of 0
            Bytes::from(vec![9, 0, 0, 0, 0, 79, 1, 0]),                     // DATA0 without prefix
        ];
        let mut stream = vec![dgs[0].clone(), dgs[1].clone()];
        stream.extend(garbage.iter().cloned());
        stream.extend(dgs[2..].iter().cloned());
        assert_eq!(
            feed(&mut r, now, stream),
            [Event::Message(Bytes::from(msg))]
        );
        assert_eq!(r.stats().malformed, garbage.len() as u64);
    }

    #[test]
    fn ping_and_err_are_events_and_foreign_ids_are_dropped_when_checked() {
        let now = Instant::now();
        let mut f = Fragmenter::new(5, 1500).unwrap();
        let mut r = Reassembler::new(ReassemblerConfig {
            connection_id: Some(5),
            ..Default::default()
        });
        assert_eq!(
            r.handle(now, Bytes::copy_from_slice(&f.ping())),
            Some(Event::Ping)
        );
        let mut other = Fragmenter::new(6, 1500).unwrap();
        assert!(feed(&mut r, now, datagrams(&mut other, b"spoof")).is_empty());
        assert_eq!(r.stats().foreign, 1);
        assert_eq!(feed(&mut r, now, datagrams(&mut f, b"real")).len(), 1);
        assert_eq!(
            r.handle(now, Bytes::copy_from_slice(&f.err())),
            Some(Event::Closed)
        );
    }

    /// Reordering across messages: an older message whose blocks complete after a newer
    /// one was delivered is late, not delivered out of order, and each message is counted
    /// once: delivered, incomplete or missed.
    #[test]
    fn an_older_message_never_follows_a_newer_one_and_is_counted_once() {
        let now = Instant::now();
        let mut f = Fragmenter::new(1, 1500).unwrap();
        let mut r = Reassembler::new(ReassemblerConfig::default());
        let old = datagrams(&mut f, &body(3000, 1));
        let new = datagrams(&mut f, &body(10, 2));
        assert!(feed(&mut r, now, old[..1].to_vec()).is_empty());
        assert_eq!(feed(&mut r, now, new).len(), 1);
        // The rest of the old message, and its DATA0 again (the path duplicated it).
        assert!(feed(&mut r, now, old.iter().rev().cloned()).is_empty());
        let stats = r.stats();
        assert_eq!((stats.messages, stats.incomplete, stats.missed), (1, 1, 0));
        assert!(stats.late >= 2, "{stats:?}");
        // A message whose DATA0 was lost and whose other block waited in the stash was
        // seen: incomplete, not also missed, when the next one starts.
        let lost_head = datagrams(&mut f, &body(3000, 3));
        feed(&mut r, now, lost_head[1..].to_vec());
        feed(&mut r, now, datagrams(&mut f, &body(10, 4)));
        r.handle_timeout(now + Duration::from_secs(1));
        let stats = r.stats();
        assert_eq!((stats.messages, stats.incomplete, stats.missed), (2, 2, 0));
    }

    #[test]
    fn skipped_message_ids_count_as_missed() {
        let now = Instant::now();
        let mut f = Fragmenter::new(1, 1500).unwrap();
        let mut r = Reassembler::new(ReassemblerConfig::default());
        let all: Vec<Vec<Bytes>> = (0..10).map(|i| datagrams(&mut f, &[i])).collect();
        for (i, dgs) in all.into_iter().enumerate() {
            if i % 3 != 1 {
                feed(&mut r, now, dgs);
            }
        }
        assert_eq!(r.stats().messages, 7);
        assert_eq!(r.stats().missed, 3);
    }

    #[test]
    fn oversize_messages_are_refused_before_allocating() {
        let now = Instant::now();
        let mut r = Reassembler::new(ReassemblerConfig {
            max_message_size: 1000,
            ..Default::default()
        });
        let mut f = Fragmenter::new(1, 1500).unwrap();
        assert!(feed(&mut r, now, datagrams(&mut f, &body(5000, 1))).is_empty());
        assert_eq!(r.stats().oversize, 1);
        assert!(r.memory() <= 1000);
    }

    /// The amplification attack: a DATA0 declaring 65,535 blocks, then its last block and
    /// blocks far apart. Memory follows the bytes that arrived, not the declaration.
    #[test]
    fn declared_sizes_commit_no_memory_before_their_bytes_arrive() {
        let now = Instant::now();
        let payload = 1492;
        let mut r = Reassembler::new(ReassemblerConfig {
            max_message_size: 200 << 20,
            block_payload: Some(payload),
            ..Default::default()
        });
        let blocks: u16 = 65535;
        let frame_len = usize::from(blocks) * payload; // the last block full too
        let datagram = |opcode: u8, id: u8, block: u16, len: usize| {
            let mut d = vec![0, 0, 0, 0, opcode, id, 0, 0];
            d[6..8].copy_from_slice(&block.to_le_bytes());
            d.resize(8 + len, 0xAB);
            if opcode == 0 {
                d[8..12].copy_from_slice(&((frame_len - 4) as u32).to_le_bytes());
            }
            Bytes::from(d)
        };
        for id in 1..=50u8 {
            assert!(r.handle(now, datagram(0, id, blocks, payload)).is_none());
            for index in [blocks - 1, blocks / 2, 7, 3] {
                assert!(r.handle(now, datagram(1, id, index, payload)).is_none());
            }
            assert!(
                r.memory() < 64 * payload + INITIAL_FRAME_RESERVE,
                "{} bytes held after 5 datagrams",
                r.memory()
            );
        }
        assert_eq!(r.stats().incomplete, 49);
        // Blocks of another size than the negotiated one are refused.
        let malformed = r.stats().malformed;
        assert!(r.handle(now, datagram(0, 60, 3, payload - 1)).is_none());
        assert!(r.handle(now, datagram(1, 60, 1, payload + 1)).is_none());
        assert_eq!(r.stats().malformed, malformed + 2);
    }

    /// On loopback a message's last block comes before its DATA0: it waits where it was
    /// read, and only a few blocks wait so.
    #[test]
    fn a_large_block_before_its_data0_waits_uncopied_and_few_do() {
        let now = Instant::now();
        // As on loopback: two 64 kB datagrams, the short last block sent first.
        let mut f = Fragmenter::new(1, 65_507).unwrap();
        let mut r = Reassembler::new(ReassemblerConfig::default());
        let a = body(100_000, 3);
        let mut dgs = datagrams(&mut f, &a);
        assert_eq!(dgs.len(), 2);
        dgs.reverse();
        let last = dgs[0].clone();
        assert_eq!(r.handle(now, dgs[0].clone()), None);
        let held = &r.stash.as_ref().unwrap().blocks[&1];
        assert_eq!(
            held.as_ptr(),
            last[HEADER_LEN..].as_ptr(),
            "held where it was read"
        );
        assert_eq!(
            r.handle(now, dgs[1].clone()),
            Some(Event::Message(Bytes::from(a)))
        );
        assert_eq!(r.memory(), 0);

        // Orphans of one message: the first few large blocks are held in place, the rest
        // copied, so that they keep no more read buffers alive.
        let mut f = Fragmenter::new(1, 20_000).unwrap();
        datagrams(&mut f, b"the id delivered above");
        let orphans: Vec<_> = datagrams(&mut f, &body(200_000, 4))
            .into_iter()
            .skip(1)
            .collect();
        assert!(orphans.len() > MAX_SHARED_BLOCKS + 2);
        for d in &orphans {
            assert_eq!(r.handle(now, d.clone()), None);
        }
        let stash = r.stash.as_ref().unwrap();
        let in_place = orphans
            .iter()
            .filter(|d| {
                let index = DatagramHeader::parse(d).unwrap().block;
                stash.blocks[&index].as_ptr() == d[HEADER_LEN..].as_ptr()
            })
            .count();
        assert_eq!(
            (in_place, stash.shared),
            (MAX_SHARED_BLOCKS, MAX_SHARED_BLOCKS)
        );
        assert_eq!(stash.blocks.len(), orphans.len());
    }

    /// A DATA0 handed over with room for its frame becomes the frame.
    #[test]
    fn a_data0_handed_over_with_room_is_assembled_where_it_lies() {
        let now = Instant::now();
        let mut f = Fragmenter::new(1, 65_507).unwrap();
        let mut r = Reassembler::new(ReassemblerConfig::default());
        let a = body(100_000, 5);
        let dgs = datagrams(&mut f, &a);
        let room = room_after(&dgs[0]);
        assert_eq!(room, 100_004 - (65_507 - HEADER_LEN));
        assert_eq!(room_after(&dgs[1]), 0, "a DATAN wants none");
        // As a socket reader hands it over: the datagram with spare capacity after it.
        let mut own = BytesMut::with_capacity(dgs[0].len() + room);
        own.extend_from_slice(&dgs[0]);
        let at = own.as_ptr();
        assert_eq!(r.handle_owned(now, own), None);
        let Some(Event::Message(got)) = r.handle(now, dgs[1].clone()) else {
            panic!("the message completes");
        };
        assert_eq!(got, a);
        assert_eq!(got.as_ptr(), at.wrapping_add(HEADER_LEN + 4), "not copied");

        // Without the room, or shared, it is copied and delivered all the same.
        for owned in [true, false] {
            let b = body(100_000, 6);
            let dgs = datagrams(&mut f, &b);
            let first = if owned {
                r.handle_owned(now, BytesMut::from(&dgs[0][..]))
            } else {
                r.handle(now, dgs[0].clone())
            };
            assert_eq!(first, None);
            assert_eq!(
                r.handle(now, dgs[1].clone()),
                Some(Event::Message(Bytes::from(b)))
            );
        }
        // A single-block message, a ping and garbage want no room.
        let small = datagrams(&mut f, &body(100, 7));
        assert_eq!(room_after(&small[0]), 0);
        assert_eq!(room_after(&[0; 3]), 0);
        assert_eq!(room_after(&[0; 8]), 0);
        assert_eq!(r.memory(), 0);
    }

    /// Orphan blocks (no DATA0) are held up to a bound, and each costs a map insert.
    #[test]
    fn orphan_blocks_are_bounded() {
        let now = Instant::now();
        let mut r = Reassembler::new(ReassemblerConfig::default());
        for index in 1..=60_000u16 {
            let mut d = vec![0, 0, 0, 0, 1, 9, 0, 0];
            d[6..8].copy_from_slice(&index.to_le_bytes());
            d.resize(8 + 1000, 1);
            r.handle(now, Bytes::from(d));
        }
        assert!(r.memory() <= MAX_STASH_BYTES, "{}", r.memory());
        assert!(r.stats().oversize > 0);
    }

    /// A stranger's abandoned DATA0 does not make the real message with that id a
    /// duplicate.
    #[test]
    fn an_abandoned_id_can_start_again() {
        let now = Instant::now();
        let mut f = Fragmenter::new(1, 100).unwrap();
        let mut r = Reassembler::new(ReassemblerConfig::default());
        let real = datagrams(&mut f, b"real message");
        let id = real[0][5];
        let mut fake = vec![0, 0, 0, 0, 0, id, 3, 0];
        fake.extend_from_slice(&200u32.to_le_bytes());
        fake.resize(8 + 92, 0);
        assert!(r.handle(now, Bytes::from(fake)).is_none());
        let mut other = vec![0, 0, 0, 0, 0, id.wrapping_add(100), 3, 0];
        other.extend_from_slice(&200u32.to_le_bytes());
        other.resize(8 + 92, 0);
        assert!(r.handle(now, Bytes::from(other)).is_none());
        assert_eq!(feed(&mut r, now, real).len(), 1);
    }
}
