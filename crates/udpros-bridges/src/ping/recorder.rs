//! Recording what a device sends as a Ping Viewer log, on a thread of its own so that a
//! slow disk never holds up the link: frames go through a bounded queue (a full one drops
//! and counts), and each is on disk once the queue is empty.

use super::log::{LogHeader, LogWriter};
use super::DeviceKind;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Frames waiting for the disk at most.
const QUEUE: usize = 1024;
/// Frames kept while the device's kind is not known yet (the header names it).
const UNTIL_KNOWN: usize = 256;

/// A frame and when it arrived, on its way to the disk.
type Timed = (Instant, Vec<u8>);

/// A log being written; [`finish`](Recorder::finish) (or dropping it) completes the file.
pub struct Recorder {
    /// Where the log is written: the path asked for, or the free name beside it.
    pub path: PathBuf,
    tx: Mutex<Option<SyncSender<Timed>>>,
    /// Frames dropped because the disk fell behind.
    pub dropped: Arc<AtomicU64>,
    /// Frames written.
    pub written: Arc<AtomicU64>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Names tried after `path` when it exists, at most.
const OTHER_NAMES: u32 = 999;

/// Creates a new file at `path`, or when something is there already (a log of an earlier
/// dive, the log being replayed, a FIFO that would block until read), at the first free
/// `NAME-2.EXT`, `NAME-3.EXT`, ...: a recording never truncates or overwrites a file, and
/// never opens anything but a regular file it made itself. The path taken and the file.
pub fn create_new(path: &Path) -> io::Result<(PathBuf, std::fs::File)> {
    let fresh = |p: &Path| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(p)
    };
    match fresh(path) {
        Ok(file) => return Ok((path.to_path_buf(), file)),
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        Err(_) => {}
    }
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let extension = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()));
    for n in 2..=OTHER_NAMES + 1 {
        let other =
            path.with_file_name(format!("{stem}-{n}{}", extension.as_deref().unwrap_or("")));
        match fresh(&other) {
            Ok(file) => return Ok((other, file)),
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            Err(_) => {}
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("it and {OTHER_NAMES} other names after it exist"),
    ))
}

impl Recorder {
    /// Creates a new log at `path` (or beside it, see [`create_new`]; an error now if it
    /// cannot be), for a device of `kind` if known; else the kind is read from the first
    /// frames that tell it.
    pub fn create(path: &Path, kind: Option<DeviceKind>) -> io::Result<Recorder> {
        let (taken, file) = create_new(path)?;
        if taken != path {
            tracing::warn!(
                "{} exists: recording to {} instead (a recording never overwrites a file)",
                path.display(),
                taken.display()
            );
        }
        let (tx, rx) = sync_channel(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let written = Arc::new(AtomicU64::new(0));
        let count = written.clone();
        let name = taken.display().to_string();
        let started = Instant::now();
        let thread = std::thread::Builder::new()
            .name("ping-record".into())
            .spawn(move || {
                if let Err(e) = write_log(BufWriter::new(file), kind, started, rx, &count) {
                    tracing::error!("recording to {name} stopped: {e}");
                }
            })?;
        Ok(Recorder {
            path: taken,
            tx: Mutex::new(Some(tx)),
            dropped,
            written,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues a frame that arrived `at` (dropped once the recording is finished).
    pub fn frame(&self, frame: Vec<u8>, at: Instant) {
        if let Some(tx) = &*lock(&self.tx) {
            if tx.try_send((at, frame)).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Writes what is queued and closes the file; frames after it are not recorded. Whoever
    /// else holds the recorder (a link being torn down) cannot keep the file open.
    pub fn finish(&self) {
        lock(&self.tx).take(); // the thread writes what is queued, then ends
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.finish();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The device a frame shows, if it shows one: a family's own message ids, or
/// device_information's device_type.
fn kind_of(frame: &[u8]) -> Option<DeviceKind> {
    let id = u16::from_le_bytes([*frame.get(4)?, *frame.get(5)?]);
    match id {
        1200..=1299 => Some(DeviceKind::Ping1d),
        2300..=2399 => Some(DeviceKind::Ping360),
        4 => match frame.get(8)? {
            1 => Some(DeviceKind::Ping1d),
            2 => Some(DeviceKind::Ping360),
            _ => None,
        },
        _ => None,
    }
}

fn write_log<W: Write>(
    out: W,
    mut kind: Option<DeviceKind>,
    started: Instant,
    rx: Receiver<Timed>,
    written: &AtomicU64,
) -> io::Result<()> {
    let write = |log: &mut LogWriter<W>, (at, frame): Timed| {
        written.fetch_add(1, Ordering::Relaxed);
        log.record(at.saturating_duration_since(started), &frame)
    };
    // The header names the device: frames wait (a few) for one that shows which it is.
    let mut waiting = Vec::new();
    while kind.is_none() && waiting.len() < UNTIL_KNOWN {
        let Ok(next) = rx.recv() else { break };
        kind = kind_of(&next.1);
        waiting.push(next);
    }
    let mut log = LogWriter::new(out, &LogHeader::for_device(kind))?;
    for w in waiting {
        write(&mut log, w)?;
    }
    loop {
        let next = match rx.try_recv() {
            Ok(next) => next,
            // On disk whenever the queue is empty.
            Err(TryRecvError::Empty) => {
                log.flush()?;
                match rx.recv() {
                    Ok(next) => next,
                    Err(_) => break,
                }
            }
            Err(TryRecvError::Disconnected) => break,
        };
        write(&mut log, next)?;
    }
    log.into_inner().map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ping::frame::encode_frame;
    use crate::ping::log::LogReader;

    #[test]
    fn frames_recorded_read_back_with_the_kind_they_show() {
        let dir = std::env::temp_dir().join(format!("udpros-rec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (i, (kind_frame, want)) in [
            (
                encode_frame(2300, 2, 0, &[0; 30]),
                Some(DeviceKind::Ping360),
            ),
            (encode_frame(1211, 1, 0, &[0; 8]), Some(DeviceKind::Ping1d)),
            (encode_frame(5, 1, 0, &[0; 6]), None),
        ]
        .into_iter()
        .enumerate()
        {
            let path = dir.join(format!("log{i}.bin"));
            let rec = Recorder::create(&path, None).unwrap();
            let t0 = Instant::now();
            // Frames that do not tell the kind come first: they wait for the header.
            let mut sent = vec![encode_frame(5, 1, 0, &[1, 2, 3, 4, 5, 6]); 3];
            sent.push(kind_frame);
            for f in &sent {
                rec.frame(f.clone(), t0);
            }
            drop(rec);
            let file = std::fs::read(&path).unwrap();
            let mut r = LogReader::new(&file[..]).unwrap();
            assert_eq!(r.header().unwrap().device(), want);
            let mut got = Vec::new();
            while let Some(record) = r.next_record().unwrap() {
                got.push(record.frame);
            }
            assert_eq!(got, sent);
            assert_eq!(r.problem(), None);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_existing_file_is_never_overwritten_and_a_fifo_never_opened() {
        let dir = std::env::temp_dir().join(format!("udpros-rec-new-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dive = dir.join("dive.bin");
        std::fs::write(&dive, b"the dive").unwrap();
        let (taken, _) = create_new(&dive).unwrap();
        assert_eq!(taken, dir.join("dive-2.bin"));
        let (taken, _) = create_new(&dive).unwrap();
        assert_eq!(taken, dir.join("dive-3.bin"));
        assert_eq!(std::fs::read(&dive).unwrap(), b"the dive");
        // A FIFO nobody reads: opening it for writing would block for ever.
        let fifo = dir.join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let rec = Recorder::create(&fifo, None).unwrap();
        assert_eq!(rec.path, dir.join("pipe-2"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_path_that_cannot_be_created_is_an_error_at_once() {
        assert!(Recorder::create(Path::new("/nonexistent-dir/x/log.bin"), None).is_err());
    }
}
