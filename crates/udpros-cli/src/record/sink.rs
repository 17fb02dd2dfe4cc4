//! The writer thread: takes messages from a queue bounded in bytes, writes them, closes
//! chunks each second, starts the next file at each split and closes the last one
//! whatever ends the recording (a signal, a limit, a full disk).

use super::files::{self, Naming};
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use udpros::wire::header::ConnectionHeader;
use udpros_record::{Compression, Connection, ConnectionId, Writer};

/// How often the chunk being filled is written out: what a crash can lose.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// What the arguments asked of the files.
pub(super) struct SinkConfig {
    pub(super) naming: Naming,
    pub(super) bag: bool,
    pub(super) compression: Compression,
    pub(super) chunk_threshold: usize,
    /// The most message bytes queued for the disk.
    pub(super) buffer_bytes: usize,
    /// Messages per topic, then that topic is done.
    pub(super) limit: Option<u64>,
    pub(super) split_size: Option<u64>,
    pub(super) split_duration: Option<Duration>,
    /// The size at which the recording stops (--size without --split).
    pub(super) stop_size: Option<u64>,
    pub(super) max_splits: Option<u64>,
    pub(super) quiet: bool,
}

/// A message as it arrived.
pub(super) struct Arrival {
    pub(super) topic: Arc<str>,
    pub(super) publisher: Arc<ConnectionHeader>,
    pub(super) body: Bytes,
    pub(super) received_ns: u64,
    /// How it arrived, for /udpros/link (`None` with `--no-link-channel`).
    pub(super) link: Option<LinkNote>,
}

/// What /udpros/link says of one arrival (a `udpros/LinkArrival` but the topic, the
/// publisher, the time and the recorder's drops, which the writer knows).
#[derive(Debug, Default)]
pub(super) struct LinkNote {
    pub(super) transport: &'static str,
    pub(super) age: f64,
    pub(super) lost: u64,
    pub(super) incomplete: u64,
    pub(super) repairs: u64,
    pub(super) rebuilt: u64,
}

/// The channel of arrivals.
const LINK_TOPIC: &str = "/udpros/link";

enum Event {
    Message(Arrival),
    Stop,
}

/// Messages dropped before the disk, per topic.
type Drops = Arc<Mutex<BTreeMap<Arc<str>, u64>>>;

/// A subscriber's way to the writer: never blocks, drops (and counts) what does not fit.
#[derive(Clone)]
pub(super) struct Sender {
    events: mpsc::Sender<Event>,
    queued: Arc<AtomicUsize>,
    limit: usize,
    drops: Drops,
}

impl Sender {
    /// Queues `arrival` if its bytes fit under the bound; otherwise counts it dropped.
    pub(super) fn offer(&self, arrival: Arrival) {
        let len = arrival.body.len();
        let fits = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                queued.checked_add(len).filter(|total| *total <= self.limit)
            })
            .is_ok();
        if !fits {
            self.count_drop(&arrival.topic);
            return;
        }
        if let Err(mpsc::SendError(Event::Message(arrival))) =
            self.events.send(Event::Message(arrival))
        {
            // The writer has stopped: nothing more is recorded.
            self.queued.fetch_sub(len, Ordering::AcqRel);
            self.count_drop(&arrival.topic);
        }
    }

    fn count_drop(&self, topic: &Arc<str>) {
        let mut drops = self.drops.lock().unwrap_or_else(|e| e.into_inner());
        *drops.entry(topic.clone()).or_default() += 1;
    }
}

/// The writer thread, from the recording's side.
pub(super) struct Sink {
    sender: Sender,
    thread: std::thread::JoinHandle<Result<(), String>>,
    finished: Arc<Notify>,
    drops: Drops,
    quiet: bool,
}

impl Sink {
    /// Creates the first file and starts the thread; a name that exists is refused here,
    /// before anything is subscribed.
    pub(super) fn start(config: SinkConfig) -> Result<Sink, String> {
        let (events, receive) = mpsc::channel();
        let drops = Drops::default();
        let sender = Sender {
            events,
            queued: Arc::new(AtomicUsize::new(0)),
            limit: config.buffer_bytes,
            drops: drops.clone(),
        };
        let finished = Arc::new(Notify::new());
        let quiet = config.quiet;
        let mut thread = Thread::new(config, sender.queued.clone(), drops.clone())?;
        let done = finished.clone();
        let thread = std::thread::Builder::new()
            .name("udpros-record".into())
            .spawn(move || {
                let result = thread.run(receive);
                done.notify_one();
                result
            })
            .map_err(|e| format!("cannot start the writer: {e}"))?;
        Ok(Sink {
            sender,
            thread,
            finished,
            drops,
            quiet,
        })
    }

    pub(super) fn sender(&self) -> Sender {
        self.sender.clone()
    }

    /// Notified when the thread has ended by itself (a limit, a size, an error).
    pub(super) fn finished(&self) -> Arc<Notify> {
        self.finished.clone()
    }

    /// Writes what is queued, closes the file and says what was dropped.
    pub(super) fn stop(self) -> Result<(), String> {
        let _ = self.sender.events.send(Event::Stop);
        let result = self
            .thread
            .join()
            .unwrap_or_else(|_| Err("the writer thread failed".into()));
        let drops = self.drops.lock().unwrap_or_else(|e| e.into_inner());
        for (topic, count) in drops.iter() {
            eprintln!("udpros: record: dropped {count} messages of {topic} (the queue to the disk was full)");
        }
        if !self.quiet && drops.is_empty() && result.is_ok() {
            eprintln!("udpros: record: nothing dropped");
        }
        result
    }
}

/// One file being written.
struct Open {
    path: PathBuf,
    writer: Writer<BufWriter<File>>,
    /// Connection ids by (topic, the publisher's header): each link's header is one
    /// `Arc`, kept here so that its address stays its own.
    connections: HashMap<(Arc<str>, usize), (ConnectionId, Arc<ConnectionHeader>)>,
    /// The /udpros/link channel, once its first arrival is written.
    link: Option<ConnectionId>,
    opened: Instant,
    messages: u64,
}

struct Thread {
    config: SinkConfig,
    queued: Arc<AtomicUsize>,
    drops: Drops,
    file: Option<Open>,
    index: u64,
    /// The closed files of this recording, oldest first (for --max-splits).
    closed: VecDeque<PathBuf>,
    /// Messages written per topic (for -l).
    counts: HashMap<Arc<str>, u64>,
    last_flush: Instant,
}

impl Thread {
    fn new(config: SinkConfig, queued: Arc<AtomicUsize>, drops: Drops) -> Result<Thread, String> {
        let mut thread = Thread {
            config,
            queued,
            drops,
            file: None,
            index: 0,
            closed: VecDeque::new(),
            counts: HashMap::new(),
            last_flush: Instant::now(),
        };
        thread.file = Some(thread.open()?);
        Ok(thread)
    }

    fn open(&mut self) -> Result<Open, String> {
        let path = self.config.naming.path(self.index);
        let file = BufWriter::with_capacity(1 << 20, files::create(&path)?);
        let writer = if self.config.bag {
            udpros_record::bag::Writer::new(file, self.config.compression)
                .map(|w| Writer::Bag(w.with_chunk_threshold(self.config.chunk_threshold)))
        } else {
            udpros_record::McapWriter::new(file, self.config.compression)
                .map(|w| Writer::Mcap(Box::new(w)))
        }
        .map_err(|e| format!("{}: {e}", files::active(&path).display()))?;
        if !self.config.quiet {
            eprintln!("udpros: record: recording to {}", path.display());
        }
        Ok(Open {
            path,
            writer,
            connections: HashMap::new(),
            link: None,
            opened: Instant::now(),
            messages: 0,
        })
    }

    fn run(&mut self, events: mpsc::Receiver<Event>) -> Result<(), String> {
        let result = self.take(events);
        // Whatever ended it, the file is closed: a full disk still leaves every whole chunk.
        match (result, self.close()) {
            // The write that failed says why; the close that failed after it says only
            // that the file has no index, which the line says for it.
            (Err(write), Err(_)) => Err(format!(
                "{write}; the file keeps every chunk written before it, without an index \
                 (udpros play reads it as far as it goes; rosbag reindex repairs a bag)"
            )),
            (result, closed) => result.and(closed),
        }
    }

    fn take(&mut self, events: mpsc::Receiver<Event>) -> Result<(), String> {
        loop {
            match events.recv_timeout(Duration::from_millis(200)) {
                Ok(Event::Message(arrival)) => {
                    self.queued.fetch_sub(arrival.body.len(), Ordering::AcqRel);
                    if self.write(arrival)? {
                        return Ok(());
                    }
                }
                Ok(Event::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if self.last_flush.elapsed() >= FLUSH_EVERY {
                self.last_flush = Instant::now();
                self.file_mut()?
                    .writer
                    .flush()
                    .map_err(|e| self.failed(e))?;
            }
            if self.split_due() {
                self.close()?;
                // With --max-splits, the oldest files go before the next one starts, so
                // that no more than that many exist at any time.
                if let Some(keep) = self.config.max_splits {
                    while self.closed.len() as u64 >= keep {
                        if let Some(oldest) = self.closed.pop_front() {
                            if let Err(e) = std::fs::remove_file(&oldest) {
                                eprintln!(
                                    "udpros: record: cannot remove {}: {e}",
                                    oldest.display()
                                );
                            }
                        }
                    }
                }
                self.index += 1;
                self.file = Some(self.open()?);
            }
            if let (Some(stop), Some(open)) = (self.config.stop_size, &self.file) {
                if open.writer.bytes_written() >= stop {
                    return Ok(());
                }
            }
        }
    }

    /// Writes one message; `true` when -l says the recording is complete.
    fn write(&mut self, arrival: Arrival) -> Result<bool, String> {
        let limit = self.config.limit;
        let count = self.counts.entry(arrival.topic.clone()).or_default();
        if limit.is_some_and(|l| *count >= l) {
            return Ok(false);
        }
        *count += 1;
        let open = self.file_mut()?;
        let key = (
            arrival.topic.clone(),
            Arc::as_ptr(&arrival.publisher) as usize,
        );
        let id = match open.connections.get(&key) {
            Some((id, _)) => *id,
            None => {
                let connection = connection_of(&arrival.topic, &arrival.publisher);
                let id = open
                    .writer
                    .add_connection(&connection)
                    .map_err(|e| self.failed(e))?;
                self.file_mut()?
                    .connections
                    .insert(key, (id, arrival.publisher.clone()));
                id
            }
        };
        let open = self.file_mut()?;
        open.messages += 1;
        open.writer
            .write(id, arrival.received_ns, &arrival.body)
            .map_err(|e| self.failed(e))?;
        if let Some(note) = &arrival.link {
            self.write_link(&arrival, note)?;
        }
        Ok(limit.is_some_and(|l| self.counts.values().all(|c| *c >= l)))
    }

    /// Writes how `arrival` arrived on /udpros/link, at the same time as the message.
    fn write_link(&mut self, arrival: &Arrival, note: &LinkNote) -> Result<(), String> {
        use udpros::msg::Message;
        use udpros::msgs::udpros::LinkArrival;
        let dropped = {
            let drops = self.drops.lock().unwrap_or_else(|e| e.into_inner());
            drops.get(&arrival.topic).copied().unwrap_or(0)
        };
        let record = LinkArrival {
            header: udpros::msgs::std_msgs::Header {
                seq: 0,
                stamp: udpros::msg::Time {
                    sec: (arrival.received_ns / 1_000_000_000) as u32,
                    nsec: (arrival.received_ns % 1_000_000_000) as u32,
                },
                frame_id: String::new(),
            },
            topic: arrival.topic.to_string(),
            publisher: arrival.publisher.get("callerid").unwrap_or("").to_string(),
            transport: note.transport.to_string(),
            age: note.age,
            lost: note.lost,
            incomplete: note.incomplete,
            repairs: note.repairs,
            rebuilt: note.rebuilt,
            dropped,
        };
        let body = udpros::wire::to_vec(&record).map_err(|e| format!("{LINK_TOPIC}: {e}"))?;
        let open = self.file_mut()?;
        let id = match open.link {
            Some(id) => id,
            None => {
                let connection = Connection {
                    topic: LINK_TOPIC.into(),
                    msg_type: LinkArrival::TYPE.into(),
                    md5sum: LinkArrival::MD5SUM.into(),
                    definition: LinkArrival::DEFINITION.into(),
                    callerid: "/udpros_record".into(),
                    latching: false,
                };
                let id = open
                    .writer
                    .add_connection(&connection)
                    .map_err(|e| self.failed(e))?;
                self.file_mut()?.link = Some(id);
                id
            }
        };
        self.file_mut()?
            .writer
            .write(id, arrival.received_ns, &body)
            .map_err(|e| self.failed(e))
    }

    fn file_mut(&mut self) -> Result<&mut Open, String> {
        self.file
            .as_mut()
            .ok_or_else(|| "no file is open".to_string())
    }

    fn split_due(&self) -> bool {
        let Some(open) = &self.file else { return false };
        self.config
            .split_size
            .is_some_and(|size| open.writer.bytes_written() >= size)
            || self
                .config
                .split_duration
                .is_some_and(|d| open.opened.elapsed() >= d)
    }

    /// A write that failed, in one line that says where the recording stands.
    fn failed(&self, e: udpros_record::RecordError) -> String {
        match &self.file {
            Some(open) => format!("writing {}: {e}", files::active(&open.path).display()),
            None => e.to_string(),
        }
    }

    /// Writes the indexes and gives the file its name.
    fn close(&mut self) -> Result<(), String> {
        let Some(open) = self.file.take() else {
            return Ok(());
        };
        let finished = open.writer.finish();
        let renamed = files::close(&open.path);
        if !self.config.quiet {
            eprintln!(
                "udpros: record: {} messages in {}",
                open.messages,
                open.path.display()
            );
        }
        finished.map_err(|e| {
            format!(
                "closing {}: {e}; it keeps every chunk written before it, without an index \
                 (udpros play reads it as far as it goes; rosbag reindex repairs a bag)",
                open.path.display()
            )
        })?;
        renamed?;
        self.closed.push_back(open.path);
        Ok(())
    }
}

/// What a publisher's connection header says of its stream.
fn connection_of(topic: &str, header: &ConnectionHeader) -> Connection {
    let field = |name: &str| header.get(name).unwrap_or("").to_string();
    Connection {
        topic: topic.to_string(),
        msg_type: field("type"),
        md5sum: field("md5sum"),
        definition: field("message_definition"),
        callerid: field("callerid"),
        latching: header.get("latching") == Some("1"),
    }
}
