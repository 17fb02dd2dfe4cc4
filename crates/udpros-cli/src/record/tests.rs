use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: RecordArgs,
}

fn plan_of(args: &[&str]) -> Result<Plan, String> {
    let cli = Cli::try_parse_from(std::iter::once("record").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    plan(cli.args)
}

/// Why `args` are refused.
fn refusal(args: &[&str]) -> String {
    match plan_of(args) {
        Ok(_) => panic!("{args:?} taken"),
        Err(why) => why,
    }
}

#[test]
fn durations_take_rosbags_units() {
    assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
    assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
    assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
    assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
    for bad in ["", "m", "-1", "0", "nan", "inf", "1e300h", "3d"] {
        assert!(parse_duration(bad).is_err(), "{bad}");
    }
}

#[test]
fn compression_follows_the_format() {
    let c = |args: &[&str]| plan_of(args).map(|p| p.sink.compression);
    assert_eq!(c(&["/a"]).unwrap(), Compression::Zstd);
    assert_eq!(c(&["--bag", "/a"]).unwrap(), Compression::None);
    assert_eq!(c(&["--bag", "-j", "/a"]).unwrap(), Compression::Bz2);
    assert_eq!(c(&["--bag", "--lz4", "/a"]).unwrap(), Compression::Lz4);
    assert_eq!(c(&["--lz4", "/a"]).unwrap(), Compression::Lz4);
    assert_eq!(
        c(&["--compression", "none", "/a"]).unwrap(),
        Compression::None
    );
    assert!(c(&["-j", "/a"]).err().unwrap().contains("bz2"));
    assert!(c(&["--bag", "--compression", "zstd", "/a"])
        .unwrap_err()
        .contains("zstd"));
    assert!(c(&["-j", "--lz4", "--bag", "/a"]).is_err());
}

#[test]
fn selections_and_their_mistakes() {
    assert!(refusal(&[]).contains("no topics"));
    assert!(refusal(&["-x", "/b", "/a"]).contains("-x"));
    assert!(refusal(&["-e", "(unclosed"]).contains("regular expression"));
    assert!(refusal(&["--max-splits", "2", "/a"]).contains("--split"));
    assert!(refusal(&["--split", "/a"]).contains("--size or --duration"));
    assert!(plan_of(&["-b", "0", "/a"]).is_err());
    let Selection::Matching {
        include, exclude, ..
    } = plan_of(&["-e", "/sonar/.*", "/camera", "-x", ".*/raw"])
        .unwrap()
        .selection
    else {
        panic!("-e matches");
    };
    let include = include.unwrap();
    let taken =
        |t: &str| include.iter().any(|p| p.is_match(t)) && !exclude.as_ref().unwrap().is_match(t);
    assert!(taken("/sonar/range"));
    assert!(taken("/camera"));
    assert!(!taken("/camera/info"), "a pattern matches whole names");
    assert!(!taken("/sonar/raw"));
    assert!(!taken("/x/sonar/range"));
    // Named topics are subscribed as they are, without asking the master.
    assert!(
        matches!(plan_of(&["/a", "/b"]).unwrap().selection, Selection::Named(t) if t == ["/a", "/b"])
    );
}

#[test]
fn names_are_rosbags() {
    let path = |name: Option<&str>, prefix: Option<&str>, bag: bool, split: bool, index: u64| {
        Naming::new(name, prefix, bag, split).unwrap().path(index)
    };
    assert_eq!(
        path(Some("dive"), None, true, false, 0).to_str(),
        Some("dive.bag")
    );
    assert_eq!(
        path(Some("dive.bag"), None, true, false, 0).to_str(),
        Some("dive.bag")
    );
    assert_eq!(
        path(Some("dive.bag"), None, false, false, 0).to_str(),
        Some("dive.bag.mcap")
    );
    assert_eq!(
        path(Some("dive"), None, false, true, 3).to_str(),
        Some("dive_3.mcap")
    );
    let stamped = path(None, Some("logs/dive"), true, false, 0);
    let stamped = stamped.to_str().unwrap();
    // logs/dive_YYYY-MM-DD-HH-MM-SS.bag
    assert!(
        stamped.starts_with("logs/dive_20") && stamped.ends_with(".bag"),
        "{stamped}"
    );
    assert_eq!(stamped.len(), "logs/dive_".len() + 19 + 4, "{stamped}");
    assert!(Naming::new(Some(""), None, true, false).is_err());
}

#[test]
fn age_is_read_from_a_header_stamp_and_nan_without_one() {
    use udpros::wire::header::ConnectionHeader;
    let received = |definition: &str, body: Vec<u8>| Received {
        body: body.into(),
        publisher: Arc::new(ConnectionHeader::new().with("message_definition", definition)),
        protocol: udpros::transport::Protocol::Udp,
    };
    // seq 7, stamp 100 s + 250 ms, frame "".
    let mut stamped = 7u32.to_le_bytes().to_vec();
    stamped.extend_from_slice(&100u32.to_le_bytes());
    stamped.extend_from_slice(&250_000_000u32.to_le_bytes());
    stamped.extend_from_slice(&0u32.to_le_bytes());
    let at = 101_000_000_000;
    for definition in [
        "Header header\nfloat32 range\n",
        "# a comment first\n\nstd_msgs/Header header # with one after\nfloat32 range\n",
    ] {
        let age = LinkCounters::default().age(&received(definition, stamped.clone()), at);
        assert!((age - 0.75).abs() < 1e-9, "{definition:?}: {age}");
    }
    for definition in [
        "float32 range\nHeader header\n",
        "Header stamp_holder\n",
        "",
    ] {
        assert!(
            LinkCounters::default()
                .age(&received(definition, stamped.clone()), at)
                .is_nan(),
            "{definition:?}"
        );
    }
    // A body too short to hold a stamp.
    assert!(LinkCounters::default()
        .age(&received("Header header\n", vec![1, 2, 3]), at)
        .is_nan());
}

#[test]
fn topics_are_bounded_in_count() {
    let mut topics = Topics::default();
    assert!(topics.admit("/a"));
    assert!(!topics.admit("/a"), "once");
    for i in 0..1_000_000 {
        topics.admit(&format!("/t{i}"));
    }
    assert_eq!(topics.subscribed.len(), MAX_TOPICS);
    assert_eq!(topics.left_out, 1_000_001 - MAX_TOPICS as u64);
}

#[test]
fn the_stamped_cache_holds_a_few_publishers_whatever_reconnects() {
    use udpros::wire::header::ConnectionHeader;
    let mut links = LinkCounters::default();
    for _ in 0..1000 {
        // Each reconnection brings a header of its own.
        let received = Received {
            body: vec![0u8; 16].into(),
            publisher: Arc::new(
                ConnectionHeader::new().with("message_definition", "Header header\n"),
            ),
            protocol: udpros::transport::Protocol::Tcp,
        };
        assert!(links.age(&received, 1).is_finite());
    }
    assert_eq!(links.stamped.len(), STAMPED_CACHE);
}
