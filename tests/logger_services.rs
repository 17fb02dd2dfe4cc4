//! The logger services every udpros node serves, driven by ROS's own tools: rosservice
//! and rosconsole change a logger's level, and what the node publishes on /rosout follows.
//! (Its own test binary: it installs the process-wide log subscriber.)

use udpros_testkit as common;

use std::time::Duration;
use udpros::msgs::rosgraph_msgs::Log;
use udpros::node::SubscribeOptions;

fn tool(python: &std::path::Path, name: &str, master: &str, args: &[&str]) -> (bool, String) {
    let mut cmd = common::ros_tool(python, name, master);
    cmd.args(args);
    let out = tokio::task::block_in_place(|| cmd.output()).expect("run tool");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Debug lines of the probe target numbered above `after` that reached /rosout within
/// `wait` (lines logged before a level changed may still be queued).
async fn debug_lines_seen(
    rosout: &mut udpros::node::Subscriber<Log>,
    wait: Duration,
    after: u64,
) -> usize {
    let deadline = tokio::time::Instant::now() + wait;
    let mut seen = 0;
    while let Ok(Some(log)) = tokio::time::timeout_at(deadline, rosout.recv()).await {
        let number = log
            .msg
            .strip_prefix("probe debug ")
            .and_then(|n| n.parse::<u64>().ok());
        if log.name == "/logged" && log.level == Log::DEBUG && number.is_some_and(|n| n > after) {
            seen += 1;
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_logger_level_changes_what_reaches_rosout() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    udpros::logging::init();
    // The process's log goes to the /rosout of the node made last.
    let watcher = common::node(&uri, "watcher").await;
    let _logged = common::node(&uri, "logged").await;
    let mut rosout = watcher
        .subscribe::<Log>("/rosout", SubscribeOptions::default())
        .await
        .unwrap();
    let counter = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let logged_so_far = {
        let counter = counter.clone();
        move || counter.load(std::sync::atomic::Ordering::Relaxed)
    };
    let chatter = tokio::spawn(async move {
        for n in 0u64.. {
            counter.store(n, std::sync::atomic::Ordering::Relaxed);
            udpros::tracing::debug!(target: "probe", "probe debug {n}");
            udpros::tracing::info!(target: "probe", "probe info {n}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    // Info lines arrive (the subscription is up); debug ones do not.
    let mut info_seen = false;
    for _ in 0..100 {
        if let Ok(Some(log)) = tokio::time::timeout(Duration::from_secs(1), rosout.recv()).await {
            info_seen |= log.name == "/logged" && log.msg.starts_with("probe info");
        }
        if info_seen {
            break;
        }
    }
    assert!(info_seen, "info lines reach /rosout");
    assert_eq!(
        debug_lines_seen(&mut rosout, Duration::from_millis(600), 0).await,
        0
    );

    let (ok, text) = tool(
        &python,
        "rosservice",
        &uri,
        &[
            "call",
            "/logged/set_logger_level",
            "{logger: probe, level: DEBUG}",
        ],
    );
    assert!(ok, "{text}");
    let seen = debug_lines_seen(&mut rosout, Duration::from_secs(2), 0).await;
    assert!(
        seen >= 5,
        "debug lines reach /rosout after set_logger_level: {seen}"
    );

    // rosconsole reads the level back, and sets it again the way it does.
    let (ok, text) = tool(&python, "rosconsole", &uri, &["get", "/logged", "probe"]);
    assert!(ok && text.trim() == "debug", "{text}");
    let (ok, text) = tool(
        &python,
        "rosconsole",
        &uri,
        &["set", "/logged", "probe", "warn"],
    );
    assert!(ok, "{text}");
    let (ok, text) = tool(&python, "rosconsole", &uri, &["list", "/logged"]);
    assert!(
        ok && text.lines().any(|l| l == "probe") && text.lines().any(|l| l == "udpros"),
        "{text}"
    );
    let since = logged_so_far();
    assert_eq!(
        debug_lines_seen(&mut rosout, Duration::from_millis(800), since).await,
        0
    );

    // An unknown level is a failed call and changes nothing.
    let (ok, text) = tool(
        &python,
        "rosservice",
        &uri,
        &[
            "call",
            "/logged/set_logger_level",
            "{logger: probe, level: verbose}",
        ],
    );
    assert!(!ok && text.contains("unknown level"), "{text}");
    let (_, text) = tool(&python, "rosconsole", &uri, &["get", "/logged", "probe"]);
    assert_eq!(text.trim(), "warn");
    chatter.abort();
}
