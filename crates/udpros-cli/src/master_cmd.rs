use super::CliResult;
use clap::Args;
use std::net::{IpAddr, SocketAddr};

#[derive(Args)]
pub struct MasterArgs {
    /// Port to serve on (11311 is ROS's default).
    #[arg(short, long, default_value_t = 11311)]
    port: u16,
    /// Address to bind (default: as roscore binds, from ROS_IP / ROS_HOSTNAME / ROS_IPV6:
    /// loopback for a loopback override, else every interface, IPv6 with ROS_IPV6=on); the
    /// host name in the master's URI follows ROS_HOSTNAME / ROS_IP.
    #[arg(long)]
    host: Option<IpAddr>,
    /// Run no /rosout node (when a stock `rosout` node aggregates /rosout instead).
    #[arg(long)]
    no_rosout: bool,
}

pub fn run(args: MasterArgs) -> CliResult {
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let overrides = udpros::host::HostOverrides::from_env();
        let host = udpros::host::advertised_host(&overrides);
        let bind = args
            .host
            .unwrap_or_else(|| udpros::host::bind_address(&overrides));
        // The key as a node reads it: `__key_file:=`, `__security:=`, `__secure_mode:=`
        // over the environment.
        let ros_args =
            udpros::node::args::NodeArgs::parse(crate::ros_args()).map_err(|e| e.to_string())?;
        let security = udpros::secure::Security::from_args_and_env(&ros_args.security)
            .map_err(|e| format!("cannot use the master's key: {e}"))?;
        // A roscore: its parameters, and the /rosout node unless told otherwise.
        let options = udpros::master::RoscoreOptions {
            rosout: !args.no_rosout,
            security: Some(security),
            ..udpros::master::RoscoreOptions::default()
        };
        let addr = SocketAddr::new(bind, args.port);
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
