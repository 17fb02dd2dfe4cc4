use super::CliResult;
use clap::Args;
use std::net::{IpAddr, SocketAddr};

#[derive(Args)]
pub struct MasterArgs {
    /// Port to serve on (11311 is ROS's default).
    #[arg(short, long, default_value_t = 11311)]
    port: u16,
    /// Address to bind; the host name in the master's URI follows ROS_HOSTNAME / ROS_IP.
    #[arg(long, default_value = "0.0.0.0")]
    host: IpAddr,
    /// Run no /rosout node (when a stock `rosout` node aggregates /rosout instead).
    #[arg(long)]
    no_rosout: bool,
}

pub fn run(args: MasterArgs) -> CliResult {
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let host =
            udpros::node::host::advertised_host(&udpros::node::host::HostOverrides::from_env());
        // A roscore: its parameters, and the /rosout node unless told otherwise.
        let options = udpros::master::RoscoreOptions {
            rosout: !args.no_rosout,
            ..udpros::master::RoscoreOptions::default()
        };
        let addr = SocketAddr::new(args.host, args.port);
        let core = udpros::master::Roscore::start(addr, &host, options)
            .await
            .map_err(|e| format!("cannot serve the master on {addr}: {e}"))?;
        println!("udpros master listening at {}", core.master().uri());
        tokio::select! {
            reason = core.master().shutdown_requested() => println!("shutdown requested: {reason}"),
            _ = tokio::signal::ctrl_c() => {}
        }
        core.shutdown().await;
        Ok(())
    })
}
