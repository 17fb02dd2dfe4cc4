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
}

pub fn run(args: MasterArgs) -> CliResult {
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let host =
            udpros::node::host::advertised_host(&udpros::node::host::HostOverrides::from_env());
        let master = udpros::master::Master::start(SocketAddr::new(args.host, args.port), &host)
            .await
            .map_err(|e| {
                format!(
                    "cannot serve the master on {}:{}: {e}",
                    args.host, args.port
                )
            })?;
        println!("udpros master listening at {}", master.uri());
        tokio::select! {
            reason = master.shutdown_requested() => println!("shutdown requested: {reason}"),
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(())
    })
}
