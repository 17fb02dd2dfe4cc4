//! The view over TLS with a certificate the user supplies: the page and the WebSocket
//! (token and all) over `https://` and `wss://`, a plain client refused at the handshake
//! while TLS clients are served, and a private key others may read refused at start.

mod common;

use common::*;
use futures_util::StreamExt;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use udpros_view::{View, ViewOptions};

/// A self-signed certificate for 127.0.0.1 in `dir`: its PEM files (the key mode 600),
/// and the certificate to trust.
fn certificate(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, Vec<u8>) {
    use std::os::unix::fs::PermissionsExt;
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let cert = dir.join("view.crt");
    let key = dir.join("view.key");
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.key_pair.serialize_pem()).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    (cert, key, made.cert.der().to_vec())
}

/// A TLS connection to `view` that trusts only `trusted`.
async fn tls_connect(view: &View, trusted: &[u8]) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(trusted.to_vec()))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(view.local_addr()).await.unwrap();
    let name = rustls::pki_types::ServerName::IpAddress(view.local_addr().ip().into());
    connector.connect(name, tcp).await.expect("a TLS handshake")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_view_serves_its_page_and_websocket_over_tls_and_refuses_plain_clients() {
    let dir = std::env::temp_dir().join(format!("udpros-view-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key, trusted) = certificate(&dir);
    let master = local_master().await;
    let options = ViewOptions {
        token: Some("tls-token".into()),
        tls: Some(udpros_view::tls::server_config(&cert, &key).unwrap()),
        ..local_view()
    };
    let view = View::start(node(&master, "view").await, options)
        .await
        .unwrap();

    // The page, over TLS.
    let mut page = tls_connect(&view, &trusted).await;
    page.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = page.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // The WebSocket, over TLS, with the token.
    let stream = tls_connect(&view, &trusted).await;
    let url = format!("wss://{}/?token=tls-token", view.local_addr());
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url)
            .unwrap();
    request.headers_mut().insert(
        "sec-websocket-protocol",
        "foxglove.websocket.v1".parse().unwrap(),
    );
    let (mut client, _) = tokio_tungstenite::client_async(request, stream)
        .await
        .expect("a WebSocket over TLS");
    // The server speaks first: serverInfo.
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), client.next())
        .await
        .expect("serverInfo in time")
        .expect("a frame")
        .unwrap();
    let info: serde_json::Value = serde_json::from_str(first.to_text().unwrap()).unwrap();
    assert_eq!(info["op"], "serverInfo");

    // A plain client gets no answer it can read, and TLS clients are still served.
    let plain = connect(&view, Some("foxglove.websocket.v1")).await;
    assert!(plain.is_err(), "a plain WebSocket got in");
    let mut again = tls_connect(&view, &trusted).await;
    again
        .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = again.read_to_end(&mut answer).await;
    assert!(answer.starts_with(b"HTTP/1.1 200"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_private_key_others_may_read_or_a_missing_certificate_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("udpros-view-tls-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key, _) = certificate(&dir);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let open = udpros_view::tls::server_config(&cert, &key)
        .unwrap_err()
        .to_string();
    assert!(open.contains("chmod 600"), "{open}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let swapped = udpros_view::tls::server_config(&key, &key)
        .unwrap_err()
        .to_string();
    assert!(swapped.contains("no PEM certificate"), "{swapped}");
    let missing = udpros_view::tls::server_config(&cert, &dir.join("none.key"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("none.key"), "{missing}");
    let _ = std::fs::remove_dir_all(&dir);
}
