//! Child processes that die with the test, their output read line by line with deadlines,
//! and the checks that a bad command fails in one line.

use std::process::Command;

/// A child process killed (and reaped) when dropped, so no test leaves one behind.
pub struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Lines a child prints, read on a thread so a test can wait for them with a deadline.
pub struct Lines {
    rx: std::sync::mpsc::Receiver<(String, std::time::Instant)>,
    /// Every line read so far, in order.
    pub seen: Vec<String>,
    /// When each line of `seen` was read, as the reading thread saw it.
    pub arrived: Vec<std::time::Instant>,
}

impl Lines {
    /// Starts reading `out` (a child's stdout or stderr) on a thread.
    pub fn new(out: impl std::io::Read + Send + 'static) -> Lines {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send((line, std::time::Instant::now())).is_err() {
                    break;
                }
            }
        });
        Lines {
            rx,
            seen: Vec::new(),
            arrived: Vec::new(),
        }
    }

    /// Waits until a line matches, up to `limit`; returns it.
    pub fn wait_for(
        &mut self,
        limit: std::time::Duration,
        matches: impl Fn(&str) -> bool,
    ) -> Option<String> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((line, at)) => {
                    self.seen.push(line.clone());
                    self.arrived.push(at);
                    if matches(&line) {
                        return Some(line);
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// Waits for `n` matching lines in all; returns how many were seen.
    pub fn count(
        &mut self,
        n: usize,
        limit: std::time::Duration,
        matches: impl Fn(&str) -> bool,
    ) -> usize {
        let deadline = std::time::Instant::now() + limit;
        let mut found = self.seen.iter().filter(|l| matches(l)).count();
        while found < n {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if self.wait_for(left, &matches).is_none() {
                break;
            }
            found += 1;
        }
        found
    }

    /// Everything the child printed until it exits (or `limit` passes).
    pub fn rest(&mut self, limit: std::time::Duration) -> String {
        let deadline = std::time::Instant::now() + limit;
        while let Ok((line, at)) = self
            .rx
            .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
        {
            self.seen.push(line);
            self.arrived.push(at);
        }
        self.seen.join("\n")
    }
}

/// Spawns `cmd` with stdout piped into [`Lines`], stderr inherited (shown on failure).
pub fn spawn_lines(mut cmd: Command) -> (Child, Lines) {
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit());
    let mut child = cmd.spawn().expect("spawn");
    let out = child.stdout.take().expect("stdout");
    (Child(child), Lines::new(out))
}

/// How a tool run to its end ([`run_tool`]) ended and what it printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// It exited with status 0.
    pub ok: bool,
    /// Its exit status (-1 when a signal ended it).
    pub code: i32,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

/// Runs `cmd` to its end. Inside a multi-threaded tokio runtime (a test whose own node
/// answers the tool) the wait hands the worker's other tasks to the runtime
/// (`block_in_place`), so the node goes on serving while the tool runs.
pub fn run_tool(cmd: &mut Command) -> Ran {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    let out = match multi_thread {
        true => tokio::task::block_in_place(|| cmd.output()),
        false => cmd.output(),
    }
    .expect("run tool");
    Ran {
        ok: out.status.success(),
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `program args` against `master` with a 5 s limit; its output and how long it took.
pub fn run_briefly(
    program: &str,
    master: &str,
    args: &[String],
) -> (std::process::Output, std::time::Duration) {
    let started = std::time::Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .env("ROS_MASTER_URI", master)
        .env("ROS_IP", "127.0.0.1")
        .env_remove("ROS_HOSTNAME")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    while started.elapsed() < std::time::Duration::from_secs(5) {
        if child.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    (child.wait_with_output().expect("output"), started.elapsed())
}

/// Asserts that `program args` fails with status 1 and one line on stderr that mentions
/// `mentions`, within 5 s and without a panic.
pub fn assert_one_line_failure(program: &str, master: &str, args: &[String], mentions: &str) {
    let (out, took) = run_briefly(program, master, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    println!("{args:?} -> {:?} in {took:?}: {stderr}", out.status.code());
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert_eq!(lines.len(), 1, "{args:?}: one line, got {stderr}");
    assert!(lines[0].contains(mentions), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

/// One bad invocation: the program, its arguments, and what its one line must mention.
pub type BadCase = (&'static str, Vec<&'static str>, &'static str);

/// [`assert_one_line_failure`] for each case against `master`, each run as a node of its
/// own name (private parameters stay on the master between runs). Blocking: call it from
/// `spawn_blocking` in async tests.
pub fn assert_each_fails_in_one_line(master: &str, cases: Vec<BadCase>) {
    for (i, (program, args, mentions)) in cases.into_iter().enumerate() {
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push(format!("__name:=bad_input_{i}"));
        assert_one_line_failure(program, master, &args, mentions);
    }
}

/// Peak resident memory of a process (`std::process::id()` for the test itself), in MB,
/// from `/proc` (VmHWM); 0 once it has gone.
pub fn peak_rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}
