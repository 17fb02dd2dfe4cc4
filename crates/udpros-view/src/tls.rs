//! TLS for the view: the certificate chain and private key the user supplies (PEM files,
//! as a web server takes them), served with rustls. With TLS the console is at
//! `https://`, Foxglove connects to `wss://`, and the token in the URL crosses the
//! network encrypted.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why the certificate or key cannot be served.
#[derive(Debug)]
pub enum TlsError {
    /// The certificate file holds no certificate, or cannot be read.
    Certificate(PathBuf, String),
    /// The key file holds no private key, or cannot be read.
    Key(PathBuf, String),
    /// The key file may be read by others (as ssh refuses such a key).
    KeyOpenToOthers(PathBuf, u32),
    /// The key does not go with the certificate, or rustls refuses them.
    Config(String),
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Certificate(path, e) => {
                write!(f, "{}: no PEM certificate ({e})", path.display())
            }
            TlsError::Key(path, e) => write!(f, "{}: no PEM private key ({e})", path.display()),
            TlsError::KeyOpenToOthers(path, mode) => write!(
                f,
                "{}: a private key others may read (mode {mode:o}): chmod 600 it",
                path.display()
            ),
            TlsError::Config(e) => write!(f, "the certificate and key cannot be served: {e}"),
        }
    }
}

impl std::error::Error for TlsError {}

/// A TLS server configuration from a PEM certificate chain (the server's first) and its
/// PEM private key, which only its owner may read.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Certificate(cert.to_path_buf(), e.to_string()))?;
    if chain.is_empty() {
        return Err(TlsError::Certificate(
            cert.to_path_buf(),
            "the file holds none".into(),
        ));
    }
    owner_only(key)?;
    let private = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| TlsError::Key(key.to_path_buf(), e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    Ok(Arc::new(config))
}

#[cfg(unix)]
fn owner_only(key: &Path) -> Result<(), TlsError> {
    use std::os::unix::fs::PermissionsExt;
    let meta =
        std::fs::metadata(key).map_err(|e| TlsError::Key(key.to_path_buf(), e.to_string()))?;
    let mode = meta.permissions().mode() & 0o777;
    match mode & 0o077 {
        0 => Ok(()),
        _ => Err(TlsError::KeyOpenToOthers(key.to_path_buf(), mode)),
    }
}

#[cfg(not(unix))]
fn owner_only(_: &Path) -> Result<(), TlsError> {
    Ok(())
}
