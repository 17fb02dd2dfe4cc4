//! `udpros record` across a lossy link (bench S8's and S11's two namespaces, 5 % of the
//! datagrams host B receives dropped at random): 100 kB images at 10 Hz are recorded whole
//! (FEC repairs what the link loses), and `/udpros/link` says what was rebuilt. Needs root
//! (CI runs as root), iproute2, nftables and ethtool.

use udpros_testkit as common;

use common::netns::{Family, Identity, Network};
use std::process::Stdio;
use std::time::{Duration, Instant};
use udpros::msgs::udpros::LinkArrival;
use udpros_record::{Item, Limits};

#[test]
fn a_recording_across_five_percent_loss_keeps_the_images_whole_and_says_what_fec_rebuilt() {
    let Some(net) = Network::new(&["a", "b"], 1500) else {
        return;
    };
    let (a, b) = (net.host("a"), net.host("b"));
    a.unsegmented_udp();
    b.lose(&["udp"], 50);
    let udpros = env!("CARGO_BIN_EXE_udpros");
    let uri = format!("http://{}:11311/", a.ipv4);
    let mut master = a.ros_command(udpros, &uri, Identity::Ip, Family::Ipv4);
    master.args(["master", "--host", &a.ipv4, "--port", "11311"]);
    master.stdout(Stdio::null()).stderr(Stdio::null());
    let _master = common::Child(master.spawn().unwrap());

    let dir = std::env::temp_dir().join(format!("udpros-record-lossy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let bag = dir.join("images.bag");
    let mut recorder = b.ros_command(udpros, &uri, Identity::Ip, Family::Ipv4);
    recorder
        .args(["record", "--bag", "-q", "-O"])
        .arg(&bag)
        .arg("/images");
    recorder.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut recorder = common::Child(recorder.spawn().unwrap());

    // Recording (its node started, its file open) before anything is published.
    let mut active = bag.clone().into_os_string();
    active.push(".active");
    if !common::wait_for(Duration::from_secs(30), || {
        std::path::Path::new(&active).exists()
    }) {
        let _ = recorder.0.kill();
        let mut said = String::new();
        if let Some(mut stderr) = recorder.0.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut stderr, &mut said);
        }
        panic!("the recorder did not start: {said}");
    }
    let count = 60;
    let mut publisher = a.ros_command(udpros, &uri, Identity::Ip, Family::Ipv4);
    publisher.args([
        "bench", "peer", "pub", "/images", "--size", "100000", "--rate", "10",
    ]);
    publisher.args(["--count", &count.to_string(), "--subscribers", "1"]);
    let (mut publisher, mut lines) = common::spawn_lines(publisher);
    lines
        .wait_for(Duration::from_secs(60), |l| l.starts_with("PUB"))
        .expect("the publisher finished");
    let _ = publisher.0.wait();
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: a signal to the child this test started; the recorder closes on SIGINT.
    unsafe { libc::kill(recorder.0.id() as i32, libc::SIGINT) };
    let start = Instant::now();
    while recorder.0.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the recorder did not stop"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let mut said = String::new();
    if let Some(mut stderr) = recorder.0.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut stderr, &mut said);
    }
    let status = recorder.0.wait().unwrap();
    assert!(status.success(), "the recorder: {status:?} {said}");
    let file = std::fs::File::open(&bag)
        .unwrap_or_else(|e| panic!("the bag: {e}; the recorder said {said}"));
    let items =
        udpros_record::read_recording(std::io::BufReader::new(file), Limits::default()).unwrap();
    let mut topics = std::collections::HashMap::new();
    let (mut images, mut repairs, mut rebuilt, mut arrivals) = (0, 0, 0, 0);
    for item in items {
        match item.expect("a whole bag") {
            Item::Connection { id, connection } => {
                topics.insert(id, connection.topic);
            }
            Item::Message {
                connection, data, ..
            } => match topics[&connection].as_str() {
                "/images" => {
                    // A CompressedImage of 100 kB of payload: header, format, data.
                    assert!(data.len() > 100_000, "{} bytes", data.len());
                    images += 1;
                }
                "/udpros/link" => {
                    let arrival: LinkArrival = udpros::wire::from_slice(&data).unwrap();
                    assert_eq!(arrival.transport, "UDPROS");
                    assert_eq!(arrival.topic, "/images");
                    assert!(arrival.age.is_finite() && arrival.age < 5.0, "{arrival:?}");
                    repairs += arrival.repairs;
                    rebuilt += arrival.rebuilt;
                    arrivals += 1;
                }
                other => panic!("{other} recorded"),
            },
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{images}/{count} images recorded, {repairs} repair datagrams taken, {rebuilt} images rebuilt");
    assert!(
        images * 100 >= count * 95,
        "{images}/{count} images recorded"
    );
    assert_eq!(arrivals, images, "an arrival for each image");
    // 5 % of about 70 datagrams per image: most images lose some and are rebuilt from
    // repair, and the link channel says so.
    assert!(repairs > 0, "no repair datagrams recorded at 5 % loss");
    assert!(
        rebuilt * 2 > images,
        "{rebuilt} of {images} images rebuilt at 5 % loss"
    );
}
