//! Logging for udpros programs: stderr (filtered by `RUST_LOG`, warnings by default) and
//! `/rosout`.

/// Installs the global subscriber (once; later calls do nothing).
pub fn init() {
    use tracing_subscriber::prelude::*;
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter);
    let _ = tracing_subscriber::registry()
        .with(stderr)
        .with(crate::rosout::layer())
        .try_init();
}
