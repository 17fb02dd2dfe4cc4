//! `udpros view`: the operator's view of the graph, as a node that serves the Foxglove
//! WebSocket protocol and the console page (see the `udpros-view` crate).

use super::CliResult;
use clap::Args;
use std::net::{IpAddr, SocketAddr};
use udpros::node::Node;
use udpros_view::{View, ViewOptions};

#[derive(Args)]
pub struct ViewArgs {
    /// Port to serve on (Foxglove's default).
    #[arg(short, long, default_value_t = udpros_view::DEFAULT_PORT)]
    port: u16,
    /// Address to bind (default: by the node's rule, from ROS_IP / ROS_HOSTNAME / ROS_IPV6:
    /// loopback for a loopback override, else every interface).
    #[arg(long)]
    address: Option<IpAddr>,
    /// WebSocket clients at once; more are refused.
    #[arg(long, default_value_t = ViewOptions::default().max_clients)]
    max_clients: usize,
    /// Bytes each client's send buffer holds; past it a slow client gets only the newest
    /// message of each topic.
    #[arg(long, default_value_t = ViewOptions::default().send_limit)]
    send_limit: usize,
    /// A topic clients may publish to (a joystick on the page); repeat for more. None by
    /// default.
    #[arg(long = "allow-publish", value_name = "TOPIC")]
    allow_publish: Vec<String>,
    /// Serve without a token: whoever reaches the port uses the view (and publishes to
    /// the --allow-publish topics). By default clients need the token in the printed URL
    /// (UDPROS_VIEW_TOKEN, else a fresh random one).
    #[arg(long)]
    open: bool,
    /// Serve over TLS (https://, wss://) with this PEM certificate chain; needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The certificate's PEM private key (readable by its owner only); needs --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
}

/// The variable that sets the view's token (a command line would show it to `ps`).
pub const TOKEN_VAR: &str = "UDPROS_VIEW_TOKEN";

/// The token a view asks for: none when `open`, else [`TOKEN_VAR`], else 128 fresh random
/// bits.
pub fn token(open: bool) -> Result<Option<String>, String> {
    if open {
        return Ok(None);
    }
    if let Some(token) = std::env::var(TOKEN_VAR).ok().filter(|t| !t.is_empty()) {
        if !token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.~".contains(&b))
        {
            return Err(format!(
                "{TOKEN_VAR}: letters, digits and - _ . ~ only (it goes into a URL as it is)"
            ));
        }
        return Ok(Some(token));
    }
    let random = udpros::secure::new_nonce().map_err(|e| format!("no token for the view: {e}"))?;
    Ok(Some(udpros::wire::secure::nonce_text(&random)))
}

impl ViewArgs {
    fn options(&self, token: Option<String>) -> Result<ViewOptions, String> {
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                Some(udpros_view::tls::server_config(cert, key).map_err(|e| e.to_string())?)
            }
            _ => None,
        };
        Ok(ViewOptions {
            address: self.address,
            port: self.port,
            max_clients: self.max_clients.max(1),
            send_limit: self.send_limit,
            client_topics: self.allow_publish.clone(),
            token,
            tls,
            ..ViewOptions::default()
        })
    }
}

pub fn run(args: ViewArgs) -> CliResult {
    keep_freed_memory();
    // One thread: a message goes from the UDPROS socket to the client's socket without a
    // wake of another thread (S9 of the bench measures the difference).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let token = token(args.open)?;
    let options = args.options(token.clone())?;
    let secure = options.tls.is_some();
    runtime.block_on(async {
        let node = Node::new("udpros_view", crate::ros_args())
            .await
            .map_err(|e| format!("cannot start the view's node: {e}"))?;
        node.master()
            .get_pid()
            .await
            .map_err(|e| format!("cannot reach the master at {}: {e}", node.master().uri()))?;
        let view = View::start(node.clone(), options)
            .await
            .map_err(|e| format!("cannot serve the view on port {}: {e}", args.port))?;
        for line in addresses(view.local_addr(), token.as_deref(), secure) {
            println!("{line}");
        }
        let reason = node.spin().await;
        drop(view);
        println!("udpros view: {reason}");
        Ok(())
    })
}

/// Keeps the view's freed buffers for the next message instead of returning them to the
/// kernel. A forwarded 250 kB image needs a reassembly buffer and a WebSocket frame; with
/// glibc's defaults each is a fresh mapping (or heap top that was trimmed), and touching
/// its pages cost a fifth of the view's CPU in page faults (perf, S9). Memory held stays
/// bounded: what the largest messages in flight needed, plus the trim threshold.
fn keep_freed_memory() {
    // SAFETY: mallopt only sets glibc's allocator parameters; called before any thread
    // of the view starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20); // glibc's largest
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

/// How to reach a view that listens on `local`, asks for `token` and serves TLS when
/// `tls`: the console's URL and Foxglove's, with the node's advertised host name in place
/// of an unspecified address.
pub fn addresses(local: SocketAddr, token: Option<&str>, tls: bool) -> [String; 2] {
    let host = if local.ip().is_unspecified() {
        let overrides = udpros::host::HostOverrides::from_env();
        udpros::host::advertised_host(&overrides)
    } else {
        local.ip().to_string()
    };
    let at = udpros::host::authority(&host, local.port());
    let query = token.map_or(String::new(), |t| format!("?token={t}"));
    let (http, ws) = match tls {
        true => ("https", "wss"),
        false => ("http", "ws"),
    };
    [
        format!("console: {http}://{at}/{query}"),
        format!(
            "Foxglove or Lichtblick: open connection → Foxglove WebSocket → {ws}://{at}/{query}"
        ),
    ]
}
