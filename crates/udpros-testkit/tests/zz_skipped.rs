//! The last test `cargo test` runs at the repository's root (packages and their tests run
//! in name order, and this kit's name sorts last): it prints every test that was skipped
//! in this run for want of a ROS or PyPI peer, and why, so that a run that tested less than
//! it says is visible at its end.

use std::io::Write;

#[test]
fn summary_of_skipped_tests() {
    let skipped = udpros_testkit::skipped_this_run();
    if !skipped.is_empty() {
        // Straight to the descriptor: the harness captures eprintln! of passing tests.
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "\n{} test(s) SKIPPED for want of a peer (they passed without testing it):",
            skipped.len()
        );
        for line in &skipped {
            let _ = writeln!(err, "  SKIPPED {line}");
        }
        let _ = writeln!(
            err,
            "Install the peers with `sudo bash .ci/run`, or run `UDPROS_REQUIRE_INTEROP=1 cargo test` to make a skip a failure.\n"
        );
    }
    // Read once, gone: the next run's summary shows that run alone.
    assert!(
        udpros_testkit::skipped_this_run().is_empty(),
        "the record of skipped tests could not be cleared"
    );
}
