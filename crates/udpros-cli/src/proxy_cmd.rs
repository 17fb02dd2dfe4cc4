use super::CliResult;
use clap::Args;
use std::net::SocketAddr;
use std::time::Duration;
use udpros_bridges::sim::{Faults, Proxy, TransparentProxy};

/// A UDP fault proxy between a client and an upstream (both on this host, usually): the
/// client sends to `--listen`, the proxy relays to `--upstream` and back, with seeded loss,
/// duplication, delay and jitter per direction (what `tc netem` would do). With
/// `--transparent`, on a router: a TPROXY rule hands it the UDP crossing the host, and each
/// datagram goes on from its own source to its own destination, with the `up` faults.
#[derive(Args)]
pub struct ProxyArgs {
    /// Address the client sends to (port 0 picks one; the line printed says which); with
    /// --transparent, the port the TPROXY rule names.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Address datagrams are relayed to.
    #[arg(long, required_unless_present = "transparent")]
    upstream: Option<SocketAddr>,
    /// Relay what a TPROXY rule hands over, each datagram from its source to its original
    /// destination (Linux, root; see the book's "Joining a ROS graph", "Across machines").
    #[arg(long, conflicts_with = "upstream")]
    transparent: bool,
    /// Loss probability in both directions (0-1); --loss-up/--loss-down override it.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    #[arg(long)]
    loss_up: Option<f64>,
    #[arg(long)]
    loss_down: Option<f64>,
    /// Probability of sending a datagram twice, both directions.
    #[arg(long, default_value_t = 0.0)]
    duplicate: f64,
    /// Fixed delay client → upstream, ms.
    #[arg(long, default_value_t = 0.0)]
    delay_up: f64,
    /// Fixed delay upstream → client, ms.
    #[arg(long, default_value_t = 0.0)]
    delay_down: f64,
    /// Mean of an exponential extra delay client → upstream, ms (reorders datagrams).
    #[arg(long, default_value_t = 0.0)]
    jitter_up: f64,
    /// Mean of an exponential extra delay upstream → client, ms.
    #[arg(long, default_value_t = 0.0)]
    jitter_down: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
}

fn probability(name: &str, p: f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("--{name} {p} is not a probability between 0 and 1"))
    }
}

fn millis(name: &str, ms: f64) -> Result<Duration, String> {
    if ms.is_finite() && (0.0..=3_600_000.0).contains(&ms) {
        Ok(Duration::from_secs_f64(ms / 1000.0))
    } else {
        Err(format!("--{name} {ms} is not a delay in ms"))
    }
}

pub fn run(args: ProxyArgs) -> CliResult {
    let up = Faults {
        loss: match args.loss_up {
            Some(p) => probability("loss-up", p)?,
            None => probability("loss", args.loss)?,
        },
        duplicate: probability("duplicate", args.duplicate)?,
        delay: millis("delay-up", args.delay_up)?,
        jitter: millis("jitter-up", args.jitter_up)?,
    };
    let down = Faults {
        loss: match args.loss_down {
            Some(p) => probability("loss-down", p)?,
            None => probability("loss", args.loss)?,
        },
        duplicate: up.duplicate,
        delay: millis("delay-down", args.delay_down)?,
        jitter: millis("jitter-down", args.jitter_down)?,
    };
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let until = async {
            let limit = args
                .duration
                .and_then(|s| Duration::try_from_secs_f64(s).ok());
            tokio::select! {
                _ = async {
                    match limit {
                        Some(d) => tokio::time::sleep(d).await,
                        None => std::future::pending().await,
                    }
                } => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        };
        let Some(upstream) = args.upstream else {
            let proxy = TransparentProxy::start(args.listen, up, args.seed)
                .await
                .map_err(|e| format!("cannot take datagrams on {}: {e}", args.listen))?;
            println!(
                "udpros proxy listening on {}, transparent",
                proxy.local_addr()
            );
            until.await;
            let s = proxy.stats();
            println!("relayed: {} datagrams, {} dropped", s.received, s.dropped);
            return Ok(());
        };
        let proxy = Proxy::start(args.listen, upstream, up, down, args.seed)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
        println!(
            "udpros proxy listening on {}, relaying to {upstream}",
            proxy.local_addr(),
        );
        until.await;
        let s = proxy.stats();
        println!(
            "up: {} datagrams, {} dropped; down: {} datagrams, {} dropped",
            s.up, s.up_dropped, s.down, s.down_dropped
        );
        Ok(())
    })
}
