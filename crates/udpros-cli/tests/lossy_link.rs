//! UDPROS over a lossy link: two hosts in network namespaces, every UDP datagram a packet of
//! its own on the publisher's cable, and nftables dropping 5 % of the datagrams host B
//! receives at random. 100 kB messages are about 70 datagrams: without FEC a few percent
//! arrive whole (roscpp's share is the same); with a quarter of repair between udpros
//! peers, all of them. The link survives either way. Needs root (CI runs as root),
//! iproute2, nftables and ethtool.

use udpros_testkit as common;

mod two_hosts;

use two_hosts::{delivered, Across, Side};

#[test]
fn fec_delivers_large_messages_across_five_percent_loss() {
    let Some(roscpp) = common::roscpp_bench_peer() else {
        return;
    };
    let count = 60;
    let across = |fec| Across {
        mtu: 1500,
        loss_per_mille: 50,
        fec: Some(fec),
    };
    let run = |fec| {
        let got = delivered(
            Side::Udpros,
            Side::Udpros,
            across(fec),
            100_000,
            count,
            &roscpp,
        );
        let required = std::env::var_os(common::REQUIRE_INTEROP).is_some_and(|v| v == "1");
        if got.is_none() && required {
            panic!("FEC {fec}: no subscriber summary");
        }
        println!(
            "udpros -> udpros, 100 kB at 10 Hz, 5 % datagram loss, FEC {fec}: {got:?}/{count}"
        );
        got
    };
    let Some(with_fec) = run("0.25") else {
        return;
    };
    let Some(without) = run("off") else {
        return;
    };
    // Expected: all 60 with FEC (a message is lost with probability 6e-8), about 2 without.
    assert!(with_fec * 100 >= count * 95, "{with_fec}/{count} with FEC");
    assert!(
        without * 2 < count,
        "{without}/{count} without FEC: is the path lossy?"
    );
}
