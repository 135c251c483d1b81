//! HTTPS serving on rustls for the sidecar's listeners (the audit receiver,
//! the injection webhook): PEM files in, an axum [`Router`] served over TLS,
//! optionally requiring a client certificate signed by a given CA.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::error::{Error, Result};

/// A handshake that has not finished by then is dropped, so a slow or
/// silent client cannot hold an accept slot.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client may take after the handshake. A connection with no
/// request in flight for `header` is closed: that bounds a request head
/// sent slowly or never finished (HTTP/1 and HTTP/2 alike) and an idle
/// keep-alive connection. The body's limit is the handler's (the receiver
/// answers 408 past it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientTimeouts {
    pub header: Duration,
}

impl Default for ClientTimeouts {
    fn default() -> Self {
        Self { header: Duration::from_secs(10) }
    }
}

/// Requests in flight on one connection, and when the last one ended.
#[derive(Debug)]
struct Activity {
    state: std::sync::Mutex<(usize, tokio::time::Instant)>,
}

impl Activity {
    fn new() -> Self {
        Self { state: std::sync::Mutex::new((0, tokio::time::Instant::now())) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, tokio::time::Instant)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        self.lock().0 += 1;
        InFlight(self.clone())
    }

    /// How long the connection has had no request in flight.
    fn idle_for(&self) -> Duration {
        let (n, since) = *self.lock();
        if n > 0 { Duration::ZERO } else { since.elapsed() }
    }
}

struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.0 -= 1;
        s.1 = tokio::time::Instant::now();
    }
}

/// Where a TLS listener's material lives.
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// When set, clients must present a certificate signed by this CA
    /// (`RequireAndVerifyClientCert`).
    pub client_ca: Option<PathBuf>,
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::Tls(format!("cannot read the {what} {}: {e}", path.display())))
}

fn certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>> {
    let pem = read(path, what)?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| Error::Tls(format!("the {what} {} is not PEM: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(Error::Tls(format!("the {what} {} holds no CERTIFICATE block", path.display())));
    }
    Ok(certs)
}

/// Builds the rustls server configuration; errors name the file at fault.
pub fn server_config(tls: &ServerTls) -> Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certs(&tls.cert, "server certificate")?;
    let key_pem = read(&tls.key, "server key")?;
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(|e| Error::Tls(format!("the server key {} is not PEM: {e}", tls.key.display())))?
        .ok_or_else(|| Error::Tls(format!("the server key {} holds no private key", tls.key.display())))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(format!("TLS protocol setup: {e}")))?;
    let builder = match &tls.client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs(ca, "client CA")? {
                roots.add(c).map_err(|e| Error::Tls(format!("the client CA {} is not usable: {e}", ca.display())))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| Error::Tls(format!("client verification setup: {e}")))?;
            builder.with_client_cert_verifier(crate::client_usage::ClientUsage::new(verifier))
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        Error::Tls(format!("the server certificate {} and key do not form a usable pair: {e}", tls.cert.display()))
    })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `router` over TLS on `listener` until `shutdown` resolves, then
/// stops accepting and lets in-flight requests finish.
/// The names a client certificate carries: its subject CommonNames, then
/// its subjectAltName DNS names, URIs and email addresses.
#[derive(Debug, Clone, Default)]
pub struct PeerNames(pub Arc<Vec<String>>);

fn names_of(der: &rustls::pki_types::CertificateDer<'_>) -> Vec<String> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let Ok((_, cert)) = X509Certificate::from_der(der.as_ref()) else {
        return Vec::new();
    };
    let mut names: Vec<String> =
        cert.subject().iter_common_name().filter_map(|cn| cn.as_str().ok()).map(str::to_owned).collect();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(s) | GeneralName::URI(s) | GeneralName::RFC822Name(s) => names.push(s.to_string()),
                _ => {}
            }
        }
    }
    names
}

pub async fn serve(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: Router,
    timeouts: ClientTimeouts,
    shutdown: impl Future<Output = ()> + Send,
) {
    let acceptor = TlsAcceptor::from(config);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    while let Some((tcp, peer)) = crate::accept::next("HTTPS", || listener.accept(), shutdown.as_mut()).await {
        let acceptor = acceptor.clone();
        let activity = Arc::new(Activity::new());
        let router = router.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::info!(%peer, error = %e, "TLS handshake refused");
                    return;
                }
                Err(_) => {
                    tracing::info!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            // Who the client certificate names, for every request on it.
            let names = PeerNames(Arc::new(
                tls.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| names_of(c)).unwrap_or_default(),
            ));
            let service = {
                let (inner, activity) = (TowerToHyperService::new(router), activity.clone());
                hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(names.clone());
                    let in_flight = activity.begin();
                    let response = hyper::service::Service::call(&inner, req);
                    async move {
                        let r = response.await;
                        drop(in_flight);
                        r
                    }
                })
            };
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder.http1().timer(TokioTimer::new()).header_read_timeout(timeouts.header);
            let conn = watcher.watch(builder.serve_connection_with_upgrades(TokioIo::new(tls), service).into_owned());
            tokio::pin!(conn);
            let check = (timeouts.header / 4).max(Duration::from_millis(20));
            loop {
                tokio::select! {
                    r = &mut conn => {
                        if let Err(e) = r {
                            tracing::debug!(%peer, error = %e, "connection ended with an error");
                        }
                        return;
                    }
                    _ = tokio::time::sleep(check) => {
                        if activity.idle_for() >= timeouts.header {
                            // Dropping the connection closes it.
                            tracing::debug!(%peer, "connection closed: no request in flight for {:?}", timeouts.header);
                            return;
                        }
                    }
                }
            }
        });
    }
    graceful.shutdown().await;
}
