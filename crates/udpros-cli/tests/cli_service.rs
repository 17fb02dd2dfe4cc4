//! `udpros service` beside `rosservice` on the same rosmaster, against a rospy server and
//! udpros servers: the same text for list, info, type, args, uri, find and call.

use udpros_testkit as common;

use common::Ran;

use std::process::Command;
use std::time::Duration;
use udpros::msgs::std_srvs::{SetBool, SetBoolResponse, Trigger, TriggerResponse};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_commands_print_what_rosservice_prints() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let mut peer = Command::new(&python);
    peer.arg(common::peer_script("rospy_service_peer.py"))
        .args(["serve", "/py/set_bool", "setbool"]);
    common::ros_env(&mut peer, &uri);
    let (_peer, mut lines) = common::spawn_lines(peer);
    assert!(lines
        .wait_for(Duration::from_secs(30), |l| l == "READY")
        .is_some());
    let server = common::node(&uri, "udpros_srv").await;
    let _set_bool = server
        .advertise_service::<SetBool, _, _>("~set_bool", |req| async move {
            Ok(SetBoolResponse {
                success: req.data,
                message: format!("data was {}", req.data),
            })
        })
        .await
        .unwrap();
    let _trigger = server
        .advertise_service::<Trigger, _, _>("~trigger", |_| async {
            Ok(TriggerResponse {
                success: true,
                message: "multi\nline".into(),
            })
        })
        .await
        .unwrap();

    let ours = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
        cmd.arg("service").args(args);
        common::ros_env(&mut cmd, &uri);
        common::run_tool(&mut cmd)
    };
    let theirs = |args: &[&str]| {
        let mut cmd = common::ros_tool(&python, "rosservice", &uri);
        cmd.args(args);
        common::run_tool(&mut cmd)
    };
    let same = |args: &[&str]| {
        let Ran {
            ok,
            stdout: out,
            stderr: err,
            ..
        } = ours(args);
        assert!(ok, "udpros service {args:?}: {err}");
        let Ran {
            ok: their_ok,
            stdout: their_out,
            stderr: their_err,
            ..
        } = theirs(args);
        assert!(their_ok, "rosservice {args:?}: {their_err}");
        assert_eq!(out, their_out, "{args:?}");
        out
    };
    let listed = same(&["list"]);
    assert!(listed.contains("/py/set_bool\n") && listed.contains("/udpros_srv/trigger\n"));
    same(&["list", "-n"]);
    for service in [
        "/py/set_bool",
        "/udpros_srv/set_bool",
        "/udpros_srv/trigger",
    ] {
        for command in ["info", "type", "args", "uri"] {
            same(&[command, service]);
        }
    }
    assert_eq!(
        same(&["find", "std_srvs/SetBool"]),
        "/py/set_bool\n/udpros_srv/set_bool\n"
    );
    for (service, args) in [
        ("/py/set_bool", vec!["data: true"]),
        ("/py/set_bool", vec!["{data: true}"]),
        ("/py/set_bool", vec!["true"]),
        ("/udpros_srv/set_bool", vec!["data: false"]),
        ("/udpros_srv/trigger", vec![]),
        ("/udpros_srv/get_loggers", vec![]),
    ] {
        let mut all = vec!["call", service];
        all.extend(args);
        // get_loggers lists what each node has logged so far; compare the shape only.
        if service.ends_with("get_loggers") {
            let Ran {
                ok,
                stdout: out,
                stderr: err,
                ..
            } = ours(&all);
            assert!(
                ok && out.starts_with("loggers: \n  - \n    name: "),
                "{out}{err}"
            );
        } else {
            same(&all);
        }
    }
    // Failures: a handler error and a missing service, each one line, exit 1.
    let Ran {
        ok, stderr: err, ..
    } = ours(&["call", "/py/set_bool", "data: false"]);
    assert!(
        !ok && err.contains("refusing") && err.lines().count() == 1,
        "{err}"
    );
    let Ran {
        ok, stderr: err, ..
    } = ours(&["call", "/nobody/here"]);
    assert!(
        !ok && err.contains("/nobody/here") && err.lines().count() == 1,
        "{err}"
    );
    let Ran {
        ok, stderr: err, ..
    } = ours(&["call", "/py/set_bool", "1", "2"]);
    assert!(!ok && err.contains("2 arguments"), "{err}");
}

/// How a hostile server behaves once a client's header has arrived.
#[derive(Clone, Copy, Debug)]
enum Hostile {
    /// Never answers the header.
    Silent,
    /// Answers the header a byte a second.
    TrickledHeader,
    /// Answers the header, then the response a byte a second.
    TrickledResponse,
    /// A `std_srvs/Trigger` response whose message is 100 MB.
    Huge,
    /// A failed call whose error text is 20 MB.
    HugeError,
    /// A handshake refused with an `error=` header of 900 kB.
    HugeHeaderError,
}

/// A TCP server that speaks the start of rosrpc and then misbehaves; its `rosrpc://` URI.
async fn hostile_server(mode: Hostile) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("rosrpc://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut len = [0u8; 4];
                stream.read_exact(&mut len).await?;
                let mut header = vec![0u8; u32::from_le_bytes(len) as usize];
                stream.read_exact(&mut header).await?;
                let probe = String::from_utf8_lossy(&header).contains("probe=1");
                let reply = udpros::wire::header::ConnectionHeader::new()
                    .with("callerid", "/hostile")
                    .with("type", "std_srvs/Trigger")
                    .with("md5sum", "937c9679a518e3a18d831e57125ea522")
                    .with("request_type", "std_srvs/TriggerRequest")
                    .with("response_type", "std_srvs/TriggerResponse")
                    .encode_tcp();
                let slowly = async |stream: &mut tokio::net::TcpStream, bytes: &[u8]| {
                    for b in bytes.iter().take(60) {
                        stream.write_all(&[*b]).await?;
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    std::io::Result::Ok(())
                };
                match mode {
                    Hostile::Silent => tokio::time::sleep(Duration::from_secs(60)).await,
                    Hostile::HugeHeaderError => {
                        let refusal = udpros::wire::header::ConnectionHeader::new()
                            .with("error", "e".repeat(900 << 10))
                            .encode_tcp();
                        stream.write_all(&refusal).await?
                    }
                    Hostile::TrickledHeader => slowly(&mut stream, &reply).await?,
                    _ if probe => stream.write_all(&reply).await?,
                    _ => {
                        stream.write_all(&reply).await?;
                        stream.read_exact(&mut len).await?;
                        let mut request = vec![0u8; u32::from_le_bytes(len) as usize];
                        stream.read_exact(&mut request).await?;
                        let (ok, body) = match mode {
                            Hostile::HugeError => (0u8, vec![b'e'; 20 << 20]),
                            _ => {
                                let message = vec![b'm'; 100 << 20];
                                let mut body = vec![1u8];
                                body.extend_from_slice(&(message.len() as u32).to_le_bytes());
                                body.extend_from_slice(&message);
                                (1, body)
                            }
                        };
                        let mut frame = vec![ok];
                        frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
                        frame.extend_from_slice(&body);
                        match mode {
                            Hostile::TrickledResponse => slowly(&mut stream, &frame).await?,
                            _ => stream.write_all(&frame).await?,
                        }
                    }
                }
                std::io::Result::Ok(())
            });
        }
    });
    uri
}

/// Issue 33, item 3: `udpros service call` gives up on servers that are silent or trickle,
/// reads a 100 MB response without copies, and prints only the start of a 20 MB error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_call_never_waits_forever_and_bounds_what_it_holds() {
    let master = udpros::master::Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let node = common::node(master.uri(), "registrar").await;
    for mode in [
        Hostile::Silent,
        Hostile::TrickledHeader,
        Hostile::TrickledResponse,
        Hostile::Huge,
        Hostile::HugeError,
        Hostile::HugeHeaderError,
    ] {
        let service = format!("/hostile_{mode:?}").to_lowercase();
        let uri = hostile_server(mode).await;
        node.master()
            .register_service(&service, &uri, node.uri())
            .await
            .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
        cmd.args(["service", "call", &service])
            .env("ROS_MASTER_URI", master.uri())
            .env("ROS_IP", "127.0.0.1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let started = std::time::Instant::now();
        let (out, peak) = tokio::task::block_in_place(|| {
            let child = cmd.spawn().unwrap();
            let pid = child.id();
            let watcher = std::thread::spawn(move || {
                let mut peak = 0.0f64;
                while let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                    if status.split_whitespace().nth(2) == Some("Z") {
                        break;
                    }
                    peak = peak.max(common::peak_rss_mb(pid));
                    std::thread::sleep(Duration::from_millis(10));
                }
                peak
            });
            let out = child.wait_with_output().unwrap();
            (out, watcher.join().unwrap())
        });
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        println!(
            "{mode:?}: exit {:?} after {took:.1?}, peak RSS {peak:.0} MB, {} bytes out, {} bytes err: {}",
            out.status.code(),
            out.stdout.len(),
            stderr.len(),
            stderr.chars().take(160).collect::<String>()
        );
        // The silent and trickling servers are given up on after 5 s: well within 20 s on
        // any machine. The huge ones are work (100 MB read and printed by a debug build),
        // which two busy loads on two cores stretched past 20 s: bounded, not timed.
        let bound = match mode {
            Hostile::Silent | Hostile::TrickledHeader | Hostile::TrickledResponse => 20,
            Hostile::Huge | Hostile::HugeError | Hostile::HugeHeaderError => 180,
        };
        assert!(took < Duration::from_secs(bound), "{mode:?}: took {took:?}");
        match mode {
            Hostile::Huge => {
                assert!(out.status.success(), "{mode:?}: {stderr}");
                assert!(out.stdout.len() > 100 << 20, "the whole message is printed");
                assert!(peak < 300.0, "{mode:?}: peak RSS {peak:.0} MB (708 before)");
            }
            Hostile::HugeError | Hostile::HugeHeaderError => {
                assert!(!out.status.success());
                assert_eq!(stderr.lines().count(), 1, "{mode:?}: {stderr}");
                assert!(stderr.len() < 8192, "{} bytes of error text", stderr.len());
                assert!(stderr.contains("more bytes"), "{stderr}");
            }
            _ => {
                assert!(!out.status.success(), "{mode:?}");
                assert_eq!(stderr.lines().count(), 1, "{mode:?}: {stderr}");
            }
        }
    }
}
