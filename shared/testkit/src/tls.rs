//! A TLS front for a plain local server (the fake API speaks HTTP): a CA
//! and a server certificate for `127.0.0.1` and `localhost` are generated,
//! each TLS connection is terminated and its bytes relayed to the backend.
//! For tests of clients' TLS flags (`--certificate-authority`,
//! `--insecure-skip-tls-verify`) with a real handshake.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use tokio_rustls::rustls;

/// A running TLS front; it stops when dropped.
#[derive(Debug)]
pub struct TlsFront {
    /// Where it accepts TLS.
    pub addr: SocketAddr,
    /// The PEM file of the CA that signed its certificate.
    pub ca: PathBuf,
    _dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl TlsFront {
    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Terminates TLS on a free loopback port and relays to `backend`, from
    /// a runtime of its own.
    pub fn start(backend: SocketAddr) -> std::io::Result<TlsFront> {
        let dir = tempfile::tempdir()?;
        let config = server_config(dir.path()).map_err(std::io::Error::other)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new().name("tls-front".into()).spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build() else {
                return;
            };
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                let serve = async {
                    loop {
                        let Ok((conn, _)) = listener.accept().await else { continue };
                        let acceptor = acceptor.clone();
                        tokio::spawn(async move {
                            // A client that refuses the certificate ends here.
                            let Ok(mut tls) = acceptor.accept(conn).await else { return };
                            let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else { return };
                            let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                        });
                    }
                };
                tokio::select! {
                    _ = serve => {}
                    _ = stop_rx => {}
                }
            });
        })?;
        Ok(TlsFront { addr, ca: dir.path().join("ca.pem"), _dir: dir, _stop: stop_tx })
    }
}

/// Writes `ca.pem` into `dir` and returns the server's TLS configuration.
fn server_config(dir: &Path) -> Result<rustls::ServerConfig, String> {
    let fail = |e: &dyn std::fmt::Display| format!("generating the TLS front's certificates: {e}");
    let ca_key = KeyPair::generate().map_err(|e| fail(&e))?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(|e| fail(&e))?;
    ca.distinguished_name.push(DnType::CommonName, "testkit TLS front CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca.self_signed(&ca_key).map_err(|e| fail(&e))?;
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).map_err(|e| fail(&e))?;

    let key = KeyPair::generate().map_err(|e| fail(&e))?;
    // rcgen makes "127.0.0.1" an IP address SAN.
    let mut params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).map_err(|e| fail(&e))?;
    params.distinguished_name.push(DnType::CommonName, "localhost");
    let issuer = Issuer::new(ca, ca_key);
    let cert = params.signed_by(&key, &issuer).map_err(|e| fail(&e))?;

    let key_der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| fail(&e))?;
    rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(&e))?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key_der)
        .map_err(|e| fail(&e))
}
