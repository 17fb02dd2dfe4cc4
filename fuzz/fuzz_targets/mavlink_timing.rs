//! MAVLink datagrams, byte streams cut anywhere, `fcu_url`s and TIMESYNC/PING replies with
//! arbitrary values: parsing never panics, the stream parser holds at most a frame,
//! and neither do the exchanges or the estimators on hostile clocks (a remote clock at
//! i64::MIN, replies from the past, huge round trips).
#![no_main]

use libfuzzer_sys::fuzz_target;
use udpros_bridges::mavlink::estimator::{FitParams, Px4Params};
use udpros_bridges::mavlink::messages::{parse_datagram, Incoming, Outgoing, StreamParser};
use udpros_bridges::mavlink::protocol::{Ids, Ping, Timesync};
use udpros_bridges::mavlink::session::{Session, SessionConfig};

const US: Ids = Ids {
    system: 1,
    component: 191,
};
const FCU: Ids = Ids {
    system: 1,
    component: 1,
};

fuzz_target!(|data: &[u8]| {
    let mut session = Session::new(SessionConfig {
        ours: US,
        autopilot: Some(FCU),
        timeout_ns: 2_000_000_000,
        respond_timesync: true,
        px4: Px4Params::default(),
        fit: FitParams {
            window: 64,
            ..FitParams::default()
        },
    });
    for (from, msg) in parse_datagram(data) {
        let _ = session.on_message(from, msg, 0);
    }
    // The same bytes as a stream, cut where the first byte says: every frame the stream
    // parser finds is one a datagram parse of it finds too.
    let mut parser = StreamParser::default();
    let cut = usize::from(data.first().copied().unwrap_or(1)).max(1);
    for piece in data.chunks(cut) {
        parser.push(piece, |frame, from, msg| {
            assert_eq!(parse_datagram(frame), vec![(from, msg)]);
        });
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = text.parse::<udpros_bridges::mavlink::url::FcuUrl>();
    }
    let word = |c: &[u8], i: usize| i64::from_le_bytes(c[i * 8..i * 8 + 8].try_into().unwrap());
    for c in data.chunks_exact(24) {
        let (t1, tc1, t3) = (word(c, 0), word(c, 1), word(c, 2));
        if let Outgoing::Timesync(req) = session.timesync_request(t1) {
            let reply = Timesync {
                tc1,
                ts1: req.ts1,
                target: US,
            };
            let _ = session.on_message(FCU, Incoming::Timesync(reply), t3);
        }
        if let Outgoing::Ping(req) = session.ping_request(t1) {
            let reply = Ping { target: US, ..req };
            let _ = session.on_message(FCU, Incoming::Ping(reply), t3);
        }
        session.expire(t3);
        let _ = session.report(t3);
    }
});
