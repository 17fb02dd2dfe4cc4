//! Device links: serial ports, UDP (BlueOS bridges, Ping360 Ethernet, simulators) and an
//! in-process simulator, each turned into a stream of checked frames and reconnected
//! forever with backoff.

use super::frame::{encode_frame, Decoder, DecoderStats, Frame};
use super::log::LogReader;
use super::recorder::Recorder;
use super::sim::Simulator;
use super::Dialect;
use super::{Decoded, DeviceKind};
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// Where the device is: `serial:PATH:BAUD`, `udp:HOST:PORT` (an IPv6 literal in brackets,
/// `udp:[fd00::2]:9090`), `sim:ping1d` / `sim:ping360`, `replay:FILE`, a Ping Viewer log
/// played back, or `discover`, a Ping360 on Ethernet found by broadcast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkSpec {
    /// A serial port.
    Serial {
        /// The device file (`/dev/ttyUSB0`).
        path: String,
        /// Bits per second.
        baud: u32,
    },
    /// A device (or BlueOS's bridge to one) that answers UDP datagrams.
    Udp {
        /// Its host name or address (IPv6 without brackets).
        host: String,
        /// Its UDP port (9090 for BlueOS's Ping bridges).
        port: u16,
    },
    /// A simulated device of that kind, in this process.
    Sim(DeviceKind),
    /// A Ping Viewer log played back as if its device were live.
    Replay(Replay),
    /// The Ping360 that answers discovery on the local networks (`discover`), found again
    /// whenever it falls silent (its address may have changed).
    Discover,
}

/// How a log is played back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// The log file.
    pub path: std::path::PathBuf,
    /// Playback speed in thousandths (1000: the original timing, 2000: twice as fast).
    pub speed_permille: u32,
    /// Start again at the end.
    pub looped: bool,
}

impl Replay {
    /// `path` at its original timing, once.
    pub fn new(path: impl Into<std::path::PathBuf>) -> Replay {
        Replay {
            path: path.into(),
            speed_permille: 1000,
            looped: false,
        }
    }
}

/// The Ping protocol's serial rate, for a device given as a bare path.
pub const DEFAULT_BAUD: u32 = 115_200;

impl FromStr for LinkSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<LinkSpec, String> {
        let bad = || {
            format!(
                "device '{s}' is not /dev/PATH[:BAUD], serial:PATH:BAUD, udp:HOST:PORT, sim:ping1d, sim:ping360, replay:FILE or discover"
            )
        };
        if s == "discover" {
            return Ok(LinkSpec::Discover);
        }
        // A bare device path, as Ping Viewer and the other drivers take it: the Ping
        // protocol's 115200 baud unless trailing digits after a colon say otherwise (a
        // by-id path keeps its own colons).
        if s.starts_with('/') {
            let (path, baud) = match s.rsplit_once(':') {
                Some((path, baud))
                    if !baud.is_empty() && baud.bytes().all(|b| b.is_ascii_digit()) =>
                {
                    (path, baud.parse().map_err(|_| bad())?)
                }
                _ => (s, DEFAULT_BAUD),
            };
            return Ok(LinkSpec::Serial {
                path: path.to_string(),
                baud,
            });
        }
        let (kind, rest) = s.split_once(':').ok_or_else(bad)?;
        match kind {
            "serial" => {
                let (path, baud) = rest.rsplit_once(':').ok_or_else(bad)?;
                Ok(LinkSpec::Serial {
                    path: path.to_string(),
                    baud: baud.parse().map_err(|_| bad())?,
                })
            }
            "udp" => {
                let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
                Ok(LinkSpec::Udp {
                    host: udpros::host::unbracketed(host).to_string(),
                    port: port.parse().map_err(|_| bad())?,
                })
            }
            "replay" if !rest.is_empty() => Ok(LinkSpec::Replay(Replay::new(rest))),
            "sim" => match rest {
                "ping1d" => Ok(LinkSpec::Sim(DeviceKind::Ping1d)),
                "ping360" => Ok(LinkSpec::Sim(DeviceKind::Ping360)),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for LinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkSpec::Serial { path, baud } => write!(f, "serial:{path}:{baud}"),
            LinkSpec::Udp { host, port } => {
                write!(f, "udp:{}", udpros::host::authority(host, *port))
            }
            LinkSpec::Sim(DeviceKind::Ping1d) => f.write_str("sim:ping1d"),
            LinkSpec::Sim(DeviceKind::Ping360) => f.write_str("sim:ping360"),
            LinkSpec::Replay(r) => write!(f, "replay:{}", r.path.display()),
            LinkSpec::Discover => f.write_str("discover"),
        }
    }
}

/// What a link reports.
#[derive(Debug, Clone)]
pub enum LinkEvent {
    /// The transport is up.
    Connected,
    /// A frame, decoded, and when its last byte arrived.
    Message(Decoded, Instant),
    /// The transport went down, and why; the link connects again.
    Disconnected(String),
}

/// What the session asks of the link.
#[derive(Debug)]
pub enum Outgoing {
    /// These bytes (one or more frames).
    Bytes(Vec<u8>),
    /// A serial break then `U` bytes (Ping360 auto-baud; stops auto-transmit). Over UDP an
    /// empty datagram, which BlueOS's bridges turn into a break.
    Break,
    /// Answered once everything sent before it has been written; dropped unanswered while
    /// the link is not connected, which tells the same: nothing more will be written.
    Flushed(tokio::sync::oneshot::Sender<()>),
}

/// Called in the link's own task for every frame, as soon as it is decoded: the frame, what
/// it decoded to, and when its last byte arrived.
pub type FrameHook = Arc<dyn Fn(&Frame, &Decoded, Instant) + Send + Sync>;

struct Shared {
    stats: Arc<Mutex<DecoderStats>>,
    /// The dialect frames are decoded in.
    dialect: Dialect,
    hook: Option<FrameHook>,
    /// Where every good frame is also written, as a Ping Viewer log.
    recorder: Option<Arc<Recorder>>,
}

/// A running link; dropping it stops it.
pub struct Link {
    /// What the link reports, in order.
    pub events: mpsc::Receiver<LinkEvent>,
    /// What to send.
    pub out: mpsc::UnboundedSender<Outgoing>,
    /// The decoder's counts, updated as bytes arrive.
    pub stats: Arc<Mutex<DecoderStats>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const FIRST_RETRY: Duration = Duration::from_millis(100);
/// The longest wait between attempts: short for UDP, where an attempt costs one datagram
/// (and a device's restart must be noticed fast), longer for serial ports.
fn max_retry(spec: &LinkSpec) -> Duration {
    match spec {
        LinkSpec::Udp { .. } | LinkSpec::Sim(_) => Duration::from_millis(250),
        LinkSpec::Serial { .. } | LinkSpec::Replay(_) | LinkSpec::Discover => {
            Duration::from_secs(1)
        }
    }
}

impl Link {
    /// Starts a link; the simulator (for `sim:` devices) speaks `dialect`.
    pub fn spawn(spec: LinkSpec, dialect: Dialect, max_payload: usize) -> Link {
        Link::spawn_with_hook(spec, dialect, max_payload, None, None)
    }

    /// As `spawn`, with `hook` run on every frame in the link's task (before the event),
    /// and every frame also written to `recorder`.
    pub fn spawn_with_hook(
        spec: LinkSpec,
        dialect: Dialect,
        max_payload: usize,
        hook: Option<FrameHook>,
        recorder: Option<Arc<Recorder>>,
    ) -> Link {
        let (event_tx, events) = mpsc::channel(1024);
        let (out, out_rx) = mpsc::unbounded_channel();
        let stats = Arc::new(Mutex::new(DecoderStats::default()));
        let task = tokio::spawn(run(
            spec,
            dialect,
            max_payload,
            event_tx,
            out_rx,
            Shared {
                stats: stats.clone(),
                dialect,
                hook,
                recorder,
            },
        ));
        Link {
            events,
            out,
            stats,
            task,
        }
    }

    /// Sends `bytes` (dropped if the link has stopped).
    pub fn send(&self, bytes: Vec<u8>) {
        let _ = self.out.send(Outgoing::Bytes(bytes));
    }

    /// Waits until everything sent before has been written to the device; at once when
    /// the link has stopped, and, while it is not connected, until it connects (callers
    /// bound the wait).
    pub async fn flush(&self) {
        let (done, written) = tokio::sync::oneshot::channel();
        if self.out.send(Outgoing::Flushed(done)).is_ok() {
            let _ = written.await;
        }
    }
}

async fn run(
    spec: LinkSpec,
    dialect: Dialect,
    max_payload: usize,
    events: mpsc::Sender<LinkEvent>,
    mut out: mpsc::UnboundedReceiver<Outgoing>,
    shared: Shared,
) {
    let mut delay = FIRST_RETRY;
    let mut decoder = Decoder::new(max_payload);
    loop {
        let started = Instant::now();
        let ended = match &spec {
            LinkSpec::Udp { host, port } => {
                udp(host, *port, None, &mut decoder, &events, &mut out, &shared).await
            }
            LinkSpec::Discover => discovered(&mut decoder, &events, &mut out, &shared).await,
            LinkSpec::Serial { path, baud } => {
                serial(path, *baud, &mut decoder, &events, &mut out, &shared).await
            }
            LinkSpec::Sim(kind) => {
                simulated(*kind, dialect, &mut decoder, &events, &mut out, &shared).await
            }
            LinkSpec::Replay(replay) => {
                play(replay, &mut decoder, &events, &mut out, &shared).await
            }
        };
        if events.is_closed() {
            return;
        }
        let _ = events.send(LinkEvent::Disconnected(ended)).await;
        // Commands queued while down are stale: the session repeats what it needs.
        while out.try_recv().is_ok() {}
        if started.elapsed() > max_retry(&spec) {
            delay = FIRST_RETRY;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(max_retry(&spec));
    }
}

/// Feeds received bytes to the decoder and forwards every frame.
async fn deliver(
    bytes: &[u8],
    decoder: &mut Decoder,
    events: &mpsc::Sender<LinkEvent>,
    shared: &Shared,
) -> bool {
    let arrived = Instant::now();
    decoder.extend(bytes);
    while let Some(frame) = decoder.next_frame() {
        if let Some(recorder) = &shared.recorder {
            recorder.frame(
                encode_frame(frame.id, frame.src, frame.dst, &frame.payload),
                arrived,
            );
        }
        let message = Decoded::of(&frame, shared.dialect);
        // The fast path publishes data right here, without a hop to another task.
        if let Some(hook) = &shared.hook {
            hook(&frame, &message, arrived);
        }
        if events
            .send(LinkEvent::Message(message, arrived))
            .await
            .is_err()
        {
            return false;
        }
    }
    *shared.stats.lock().unwrap_or_else(|e| e.into_inner()) = *decoder.stats();
    true
}

/// How long a discovered Ping360 may be silent before it is looked for again.
const DISCOVERED_SILENCE: Duration = Duration::from_secs(5);

/// Finds a Ping360 by broadcast and talks to it over UDP until it falls silent.
async fn discovered(
    decoder: &mut Decoder,
    events: &mpsc::Sender<LinkEvent>,
    out: &mut mpsc::UnboundedReceiver<Outgoing>,
    shared: &Shared,
) -> String {
    let found = match super::discovery::discover(Duration::from_secs(2)).await {
        Ok(found) => found,
        Err(e) => return format!("discovery: {e}"),
    };
    let Some(device) = found.first() else {
        return "no Ping360 answered discovery (UDP broadcast to port 30303)".into();
    };
    tracing::info!(
        "Ping360 {} found at {}{}",
        device.mac,
        device.address,
        match found.len() {
            1 => String::new(),
            n => format!(" (the first of {n} that answered)"),
        }
    );
    let host = device.address.to_string();
    let port = super::discovery::DATA_PORT;
    udp(
        &host,
        port,
        Some(DISCOVERED_SILENCE),
        decoder,
        events,
        out,
        shared,
    )
    .await
}

/// A UDP device; with `silence`, the link ends when nothing arrived for that long.
async fn udp(
    host: &str,
    port: u16,
    silence: Option<Duration>,
    decoder: &mut Decoder,
    events: &mpsc::Sender<LinkEvent>,
    out: &mut mpsc::UnboundedReceiver<Outgoing>,
    shared: &Shared,
) -> String {
    // A device of either family: the first address its name has, as a TCP client would.
    let peer = match tokio::net::lookup_host((host, port))
        .await
        .map(|mut a| a.next())
    {
        Ok(Some(peer)) => peer,
        Ok(None) => return format!("cannot resolve {host}: no address"),
        Err(e) => return format!("cannot resolve {host}: {e}"),
    };
    let local = match (peer.is_ipv4(), peer.ip().is_loopback()) {
        (true, true) => "127.0.0.1:0",
        (true, false) => "0.0.0.0:0",
        (false, true) => "[::1]:0",
        (false, false) => "[::]:0",
    };
    let socket = match tokio::net::UdpSocket::bind(local).await {
        Ok(s) => s,
        Err(e) => return format!("UDP socket: {e}"),
    };
    if let Err(e) = socket.connect(peer).await {
        return format!("UDP connect to {peer}: {e}");
    }
    let _ = events.send(LinkEvent::Connected).await;
    let mut buf = vec![0u8; 65536];
    let mut heard = tokio::time::Instant::now();
    let quiet = async |heard: tokio::time::Instant| match silence {
        Some(silence) => tokio::time::sleep_until(heard + silence).await,
        None => std::future::pending().await,
    };
    loop {
        tokio::select! {
            _ = quiet(heard) => {
                return format!("nothing from {peer} for {} s: looking for it again", silence.unwrap_or_default().as_secs());
            }
            received = socket.recv(&mut buf) => match received {
                Ok(n) => {
                    heard = tokio::time::Instant::now();
                    if !deliver(&buf[..n], decoder, events, shared).await { return "closed".into() }
                }
                // Port unreachable: the device (or its bridge) is gone.
                Err(e) => return format!("UDP receive from {peer}: {e}"),
            },
            command = out.recv() => match command {
                Some(Outgoing::Bytes(b)) => if let Err(e) = socket.send(&b).await { return format!("UDP send to {peer}: {e}") },
                Some(Outgoing::Break) => { let _ = socket.send(&[]).await; }
                Some(Outgoing::Flushed(done)) => { let _ = done.send(()); }
                None => return "closed".into(),
            },
        }
    }
}

async fn serial(
    path: &str,
    baud: u32,
    decoder: &mut Decoder,
    events: &mpsc::Sender<LinkEvent>,
    out: &mut mpsc::UnboundedReceiver<Outgoing>,
    shared: &Shared,
) -> String {
    use tokio_serial::SerialPort;
    let mut port = match tokio_serial::SerialStream::open(&tokio_serial::new(path, baud)) {
        Ok(p) => p,
        Err(e) => return format!("cannot open {path}: {e}"),
    };
    // No second program may talk to the device at the same time.
    let _ = port.set_exclusive(true);
    let _ = events.send(LinkEvent::Connected).await;
    let mut buf = vec![0u8; 4096];
    loop {
        tokio::select! {
            read = port.read(&mut buf) => match read {
                Ok(0) => return format!("{path} closed"),
                Ok(n) => if !deliver(&buf[..n], decoder, events, shared).await { return "closed".into() },
                Err(e) => return format!("reading {path}: {e}"),
            },
            command = out.recv() => match command {
                Some(Outgoing::Bytes(b)) => if let Err(e) = port.write_all(&b).await { return format!("writing {path}: {e}") },
                Some(Outgoing::Break) => {
                    // Ping360 auto-baud: a break, then 'U's at the wanted rate.
                    let _ = port.set_break();
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    let _ = port.clear_break();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let _ = port.write_all(&[b'U'; 10]).await;
                }
                Some(Outgoing::Flushed(done)) => { let _ = done.send(()); }
                None => return "closed".into(),
            },
        }
    }
}

async fn simulated(
    kind: DeviceKind,
    dialect: Dialect,
    decoder: &mut Decoder,
    events: &mpsc::Sender<LinkEvent>,
    out: &mut mpsc::UnboundedReceiver<Outgoing>,
    shared: &Shared,
) -> String {
    let mut sim = Simulator::new(kind, dialect, Instant::now());
    let _ = events.send(LinkEvent::Connected).await;
    loop {
        while let Some(bytes) = sim.poll_transmit(Instant::now()) {
            if !deliver(&bytes, decoder, events, shared).await {
                return "closed".into();
            }
        }
        let wake = sim
            .poll_timeout()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
        tokio::select! {
            _ = tokio::time::sleep_until(wake.into()) => {}
            command = out.recv() => match command {
                Some(Outgoing::Bytes(b)) => sim.receive(&b, Instant::now()),
                Some(Outgoing::Break) => sim.break_signal(),
                Some(Outgoing::Flushed(done)) => { let _ = done.send(()); }
                None => return "closed".into(),
            },
        }
    }
}

/// Records of a log at most read ahead of their time.
const READ_AHEAD: usize = 64;

/// The shortest time between two frames of a replay, whatever the log's times say (a
/// device sends a few hundred frames a second at the most; a log whose records share a
/// time would otherwise play as fast as the machine goes).
const MIN_FRAME_GAP: Duration = Duration::from_millis(1);

/// The shortest pass of a looped replay (a log of one record would start again at once).
const MIN_PASS: Duration = Duration::from_millis(100);

/// Plays a log: each frame goes to the decoder when its time comes (its time in the log
/// over the speed), as if the device had just sent it; what the session sends is dropped.
/// A damaged log plays as far as it reads, and why it stopped is said once. At the end it
/// starts again if looped, else waits (the link stays up: the data simply ends).
async fn play(
    replay: &Replay,
    decoder: &mut Decoder,
    events: &mpsc::Sender<LinkEvent>,
    out: &mut mpsc::UnboundedReceiver<Outgoing>,
    shared: &Shared,
) -> String {
    let name = replay.path.display().to_string();
    let _ = events.send(LinkEvent::Connected).await;
    let speed = f64::from(replay.speed_permille.max(1)) / 1000.0;
    let mut warned = false;
    loop {
        let (tx, mut records) = mpsc::channel(READ_AHEAD);
        let path = replay.path.clone();
        let reader = tokio::task::spawn_blocking(move || read_log(&path, tx));
        let started = tokio::time::Instant::now();
        let mut last_due: Option<tokio::time::Instant> = None;
        while let Some(record) = records.recv().await {
            let mut due = started + record.at.div_f64(speed);
            if let Some(last) = last_due {
                due = due.max(last + MIN_FRAME_GAP);
            }
            last_due = Some(due);
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(due) => break,
                    command = out.recv() => if command.is_none() { return "closed".into() },
                }
            }
            if !deliver(&record.frame, decoder, events, shared).await {
                return "closed".into();
            }
        }
        let outcome = reader.await.unwrap_or_else(|e| Err(e.to_string()));
        match outcome {
            Err(why) => return format!("cannot replay {name}: {why}"),
            Ok((records, problem)) => {
                if let Some(problem) = problem.filter(|_| !warned) {
                    tracing::warn!("replay of {name}: {problem}");
                    warned = true;
                }
                if records == 0 {
                    return format!("{name} holds no records");
                }
                tracing::info!("replay of {name}: {records} records played");
            }
        }
        if !replay.looped {
            // The data ends; the link does not. What the session asks for goes nowhere.
            while out.recv().await.is_some() {}
            return "closed".into();
        }
        let next_pass = started + MIN_PASS;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next_pass) => break,
                command = out.recv() => if command.is_none() { return "closed".into() },
            }
        }
    }
}

/// Reads `path` record by record into `tx` (a blocking task); how many records and the
/// reader's problem, if any.
fn read_log(
    path: &std::path::Path,
    tx: mpsc::Sender<super::log::Record>,
) -> Result<(u64, Option<String>), String> {
    let file = super::log::open(path)?;
    let mut log = LogReader::new(std::io::BufReader::new(file)).map_err(|e| e.to_string())?;
    while let Some(record) = log.next_record().map_err(|e| e.to_string())? {
        if tx.blocking_send(record).is_err() {
            break; // the link stopped
        }
    }
    Ok((log.records(), log.problem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flush answers once what was sent before it has left: a UDP device has every
    /// datagram by then, in order. A stopped link's flush returns at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flush_returns_once_what_came_before_has_left() {
        let device = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let spec = LinkSpec::Udp {
            host: "127.0.0.1".into(),
            port: device.local_addr().unwrap().port(),
        };
        let mut link = Link::spawn(spec, Dialect::Current, 1024);
        for i in 0..100u8 {
            link.send(vec![i; 32]);
        }
        tokio::time::timeout(Duration::from_secs(10), link.flush())
            .await
            .expect("the flush is answered");
        device.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        for i in 0..100u8 {
            let n = device.recv(&mut buf).expect("already there");
            assert_eq!(&buf[..n], &[i; 32][..]);
        }
        link.task.abort();
        let _ = (&mut link.task).await;
        tokio::time::timeout(Duration::from_secs(1), link.flush())
            .await
            .expect("a stopped link flushes at once");
    }

    /// A looped log whose records all share one time plays at a device's pace at most,
    /// not as fast as the machine goes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_replay_of_records_at_one_time_is_paced() {
        use super::super::log::{LogHeader, LogWriter};
        let frame = super::super::frame::encode_frame(1211, 1, 0, &[0; 8]);
        let mut w = LogWriter::new(Vec::new(), &LogHeader::for_device(None)).unwrap();
        for _ in 0..300 {
            w.record(Duration::from_millis(7), &frame).unwrap();
        }
        let path = std::env::temp_dir().join(format!("udpros-one-time-{}.bin", std::process::id()));
        std::fs::write(&path, w.into_inner().unwrap()).unwrap();
        let mut replay = Replay::new(&path);
        replay.looped = true;
        let mut link = Link::spawn(LinkSpec::Replay(replay), Dialect::Current, 1024);
        let mut frames = 0;
        let window = tokio::time::sleep(Duration::from_secs(1));
        tokio::pin!(window);
        loop {
            tokio::select! {
                _ = &mut window => break,
                event = link.events.recv() => match event {
                    Some(LinkEvent::Message(..)) => frames += 1,
                    Some(_) => {}
                    None => break,
                },
            }
        }
        let _ = std::fs::remove_file(&path);
        assert!(
            (100..=1100).contains(&frames),
            "{frames} frames in a second"
        );
    }

    #[test]
    fn parses_device_specs() {
        assert_eq!(
            "serial:/dev/ttyUSB0:115200".parse(),
            Ok(LinkSpec::Serial {
                path: "/dev/ttyUSB0".into(),
                baud: 115200
            })
        );
        assert_eq!(
            "udp:192.168.2.2:9090".parse(),
            Ok(LinkSpec::Udp {
                host: "192.168.2.2".into(),
                port: 9090
            })
        );
        assert_eq!(
            "sim:ping360".parse(),
            Ok(LinkSpec::Sim(DeviceKind::Ping360))
        );
        let v6 = LinkSpec::Udp {
            host: "fd00::2".into(),
            port: 9090,
        };
        assert_eq!("udp:[fd00::2]:9090".parse(), Ok(v6.clone()));
        assert_eq!(v6.to_string(), "udp:[fd00::2]:9090");
        assert!("tcp:x:1".parse::<LinkSpec>().is_err());
        assert!("udp:host:notaport".parse::<LinkSpec>().is_err());
        let serial = |path: &str, baud| LinkSpec::Serial {
            path: path.into(),
            baud,
        };
        assert_eq!("/dev/ttyUSB0".parse(), Ok(serial("/dev/ttyUSB0", 115200)));
        assert_eq!(
            "/dev/ttyUSB0:9600".parse(),
            Ok(serial("/dev/ttyUSB0", 9600))
        );
        assert_eq!(
            "/dev/serial/by-id/usb-FTDI:port0".parse(),
            Ok(serial("/dev/serial/by-id/usb-FTDI:port0", 115200))
        );
        assert_eq!(
            LinkSpec::Udp {
                host: "h".into(),
                port: 1
            }
            .to_string(),
            "udp:h:1"
        );
    }
}
