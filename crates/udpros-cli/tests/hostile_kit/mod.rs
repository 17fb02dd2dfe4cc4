//! What the hostile tests share: a master or publisher under attack as a process of its
//! own, raw XML-RPC calls, and readings of a process's CPU, descriptors and memory.

#![allow(dead_code, unused_imports)]

use udpros_testkit as common;

use common::{free_port, peak_rss_mb, wait_for, Child};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use udpros::xmlrpc::{parse_response, ParseLimits, Value};

/// CPU time a process has used (user + system).
pub(crate) fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at field 3.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

/// The share of one core a process used over `window`.
pub(crate) fn cpu_share(pid: u32, window: Duration) -> f64 {
    let before = cpu_time(pid);
    std::thread::sleep(window);
    (cpu_time(pid) - before).as_secs_f64() / window.as_secs_f64()
}

/// Raises this process's descriptor limit to its hard limit (attacks open thousands).
pub(crate) fn raise_own_fd_limit() {
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max.min(65536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// `cmd` with its descriptor limit set to `n` (as `ulimit -n n`).
pub(crate) fn with_fd_limit(cmd: &mut Command, n: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

pub(crate) fn udpros() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
    cmd.env("ROS_IP", "127.0.0.1")
        .env_remove("ROS_HOSTNAME")
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// `udpros master` on a free port, optionally under a descriptor limit.
pub(crate) fn start_master(fd_limit: Option<u64>) -> (Child, u16) {
    let port = free_port();
    let mut cmd = udpros();
    cmd.args(["master", "--host", "127.0.0.1", "--port", &port.to_string()]);
    if let Some(n) = fd_limit {
        with_fd_limit(&mut cmd, n);
    }
    let child = Child(cmd.spawn().expect("start udpros master"));
    assert!(
        wait_for(Duration::from_secs(20), || TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_ok()),
        "master listening"
    );
    (child, port)
}

pub(crate) fn call_body(method: &str, params: &[Value]) -> Vec<u8> {
    udpros::xmlrpc::write_call(method, params).into_bytes()
}

/// One HTTP POST on a fresh connection; the response body, or why there was none.
pub(crate) fn post(port: u16, body: &[u8], timeout: Duration) -> Result<Vec<u8>, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let head = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
    // A server may answer (and close) before it has read all of a refused body.
    let _ = s.write_all(body);
    read_response(&mut s)
}

pub(crate) fn read_response(s: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => {}
        Err(_) if !out.is_empty() => {}
        Err(e) => return Err(e.to_string()),
    }
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no HTTP response in {} bytes", out.len()))?;
    Ok(out[split + 4..].to_vec())
}

/// A call's value (`[code, message, value]` for ROS APIs), or its fault as an error.
pub(crate) fn call(
    port: u16,
    method: &str,
    params: &[Value],
    timeout: Duration,
) -> Result<Value, String> {
    let body = post(port, &call_body(method, params), timeout)?;
    parse_response(&body, &ParseLimits::CLIENT)
        .map_err(|e| e.to_string())?
        .map_err(|f| f.to_string())
}

pub(crate) fn get_pid(port: u16) -> Result<Duration, String> {
    let started = Instant::now();
    call(
        port,
        "getPid",
        &[Value::from("/hostile")],
        Duration::from_secs(10),
    )?;
    Ok(started.elapsed())
}

/// Calls getPid every 20 ms until `stop`; the slowest answer, and whether all came.
pub(crate) fn probe_liveness(
    port: u16,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(Duration, u32)> {
    std::thread::spawn(move || {
        let (mut slowest, mut failures) = (Duration::ZERO, 0);
        while !stop.load(Ordering::Relaxed) {
            match get_pid(port) {
                Ok(t) => slowest = slowest.max(t),
                Err(_) => failures += 1,
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        (slowest, failures)
    })
}

/// The XML-RPC port of a node registered on the master, once it is.
pub(crate) fn node_port(master_port: u16, node: &str) -> u16 {
    let mut port = 0;
    let registered = wait_for(Duration::from_secs(20), || {
        port = call(
            master_port,
            "lookupNode",
            &[Value::from("/h"), Value::from(node)],
            Duration::from_secs(5),
        )
        .ok()
        .and_then(|v| {
            let api = v.as_array()?.get(2)?.as_str()?.to_string();
            api.trim_end_matches('/').rsplit(':').next()?.parse().ok()
        })
        .unwrap_or(0);
        port != 0
    });
    assert!(registered, "{node} registered");
    port
}

/// `udpros topic pub` of "alive" at 5 Hz on `topic` as node `name`, optionally under a
/// descriptor limit; the process, its XML-RPC port and its TCPROS port.
pub(crate) fn start_publisher(
    master_port: u16,
    topic: &str,
    name: &str,
    fd_limit: Option<u64>,
) -> (Child, u16, u16) {
    let mut cmd = udpros();
    cmd.env("ROS_MASTER_URI", format!("http://127.0.0.1:{master_port}/"))
        .args([
            "topic",
            "pub",
            "-r",
            "5",
            topic,
            "std_msgs/String",
            "data: alive",
        ])
        .arg(format!("__name:={name}"));
    if let Some(n) = fd_limit {
        with_fd_limit(&mut cmd, n);
    }
    let publisher = Child(cmd.spawn().unwrap());
    let api_port = node_port(master_port, &format!("/{name}"));
    // The node registers (for /rosout) before it advertises `topic`: ask until it answers.
    let mut tcpros_port = 0;
    let answered = wait_for(Duration::from_secs(20), || {
        tcpros_port = call(
            api_port,
            "requestTopic",
            &[
                Value::from("/h"),
                Value::from(topic),
                Value::from(vec![Value::from(vec!["TCPROS"])]),
            ],
            Duration::from_secs(5),
        )
        .ok()
        .and_then(|v| v.as_array()?.get(2)?.as_array()?.get(2)?.as_i32())
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(0);
        tcpros_port != 0
    });
    assert!(
        answered,
        "{name} answers requestTopic for {topic} over TCPROS"
    );
    (publisher, api_port, tcpros_port)
}

/// Whether a fresh udpros subscriber gets "alive" over TCPROS on `topic`.
pub(crate) fn receives_alive_over_tcp(master_uri: &str, topic: &str, name: &str) -> bool {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let node = common::node(master_uri, name).await;
        let mut sub = node
            .subscribe::<udpros::msgs::std_msgs::String>(
                topic,
                udpros::node::SubscribeOptions {
                    transports: vec![udpros::transport::Protocol::Tcp],
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let got = tokio::time::timeout(Duration::from_secs(20), sub.recv()).await;
        node.shutdown().await;
        got.ok().flatten().is_some_and(|m| m.data == "alive")
    })
}

/// The local port of the first UDPROS link in a node's `getBusInfo` answer (what anyone
/// can ask a node for).
pub(crate) fn udp_port_in_bus_info(info: &Value) -> Option<u16> {
    info.as_array()?.get(2)?.as_array()?.iter().find_map(|row| {
        let text = row.as_array()?.get(6)?.as_str()?;
        let rest = text.strip_prefix("UDPROS connection on port ")?;
        rest.split_whitespace()
            .next()?
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
    })
}

/// The number of descriptors a process has open.
pub(crate) fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}
