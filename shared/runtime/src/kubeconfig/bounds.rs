//! How long a call to the API server may go unanswered, and what a call
//! that got no answer says. Every command bounds its client the same way,
//! as kubectl's `--request-timeout` does: with it, the whole wait; without
//! it, a connect timeout and an idle-read timeout (no byte from the server
//! for that long), so a server that accepts connections and never answers
//! ends a call with an error instead of a hang.

use std::time::Duration;

/// How long to wait for a TCP (and TLS) connection to the API server.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait for the next byte from a server, when no
/// `--request-timeout` is given.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The timeouts of every call a client makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// To connect (TCP and TLS).
    pub connect: Duration,
    /// Between two bytes of an answer (and to write a request).
    pub read: Duration,
    /// `--request-timeout` when given (not zero).
    request_timeout: Option<Duration>,
}

impl Default for Bounds {
    fn default() -> Self {
        Self::new(Duration::ZERO)
    }
}

impl Bounds {
    /// The bounds of kubectl's `--request-timeout` (`0`: the defaults).
    pub fn new(request_timeout: Duration) -> Self {
        match (!request_timeout.is_zero()).then_some(request_timeout) {
            Some(t) => Self { connect: t.min(CONNECT_TIMEOUT), read: t, request_timeout: Some(t) },
            None => Self { connect: CONNECT_TIMEOUT, read: IDLE_TIMEOUT, request_timeout: None },
        }
    }

    /// `read` replaced (a watch, whose quiet stretches are not failures,
    /// gets a longer one than a call).
    pub fn with_read(self, read: Duration) -> Self {
        Self { read, ..self }
    }

    /// Sets them on `config`.
    pub fn apply(&self, config: &mut kube::Config) {
        config.connect_timeout = Some(self.connect);
        config.read_timeout = Some(self.read);
        config.write_timeout = Some(self.read);
        // Counted from the request, not from when a pooled connection went
        // idle.
        config.reset_reader_on_write = true;
    }

    /// `within --request-timeout 2s`, or `within 10s to connect or 1m
    /// between bytes (bound it with --request-timeout)`.
    pub fn describe(&self) -> String {
        match self.request_timeout {
            Some(t) => format!("within --request-timeout {}", humanize(t)),
            None => format!(
                "within {} to connect or {} between bytes (bound it with --request-timeout)",
                humanize(self.connect),
                humanize(self.read)
            ),
        }
    }
}

/// Why a call to the API server got no answer, when it got none; `None`
/// for an answer (a Status, or a body that failed to decode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unanswered {
    /// The server accepted (or not) and said nothing within the bounds.
    TimedOut,
    /// Nothing listens at the address.
    Refused,
    /// The TLS handshake failed (the text says why).
    Tls(String),
    /// Any other transport failure (the error chain, as text).
    Other(String),
}

impl Unanswered {
    /// What `e` says about the transport; `None` when the server answered.
    pub fn of(e: &kube::Error) -> Option<Self> {
        match e {
            kube::Error::Api(_) | kube::Error::SerdeError(_) => None,
            other => Some(Self::classify(other)),
        }
    }

    /// The same for any error whose chain may hold an I/O error.
    pub fn classify(e: &(dyn std::error::Error + 'static)) -> Self {
        let io = io_kinds(e);
        let text = crate::error_chain(e);
        if io.contains(&std::io::ErrorKind::TimedOut)
            || text.contains("timed out")
            || text.contains("deadline has elapsed")
        {
            Self::TimedOut
        } else if io.contains(&std::io::ErrorKind::ConnectionRefused) || text.contains("onnection refused") {
            Self::Refused
        } else if text.to_lowercase().contains("certificate") {
            Self::Tls(text)
        } else {
            Self::Other(text)
        }
    }

    /// One sentence: `the API server at URL did not answer within …`.
    pub fn sentence(&self, server: &str, bounds: &Bounds) -> String {
        match self {
            Self::TimedOut => format!("the API server at {server} did not answer {}", bounds.describe()),
            Self::Refused => format!("cannot connect to the API server at {server}: connection refused"),
            Self::Tls(text) => format!("the TLS connection to the API server at {server} failed: {text}"),
            Self::Other(text) => format!("cannot reach the API server at {server}: {text}"),
        }
    }
}

fn io_kinds(e: &(dyn std::error::Error + 'static)) -> Vec<std::io::ErrorKind> {
    let mut kinds = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            kinds.push(io.kind());
        }
        cur = err.source();
    }
    kinds
}

pub use crate::cli::humanize;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_request_timeout_the_defaults_bound_connect_and_idle_reads() {
        let b = Bounds::new(Duration::ZERO);
        assert_eq!((b.connect, b.read), (CONNECT_TIMEOUT, IDLE_TIMEOUT));
        assert_eq!(b.describe(), "within 10s to connect or 1m between bytes (bound it with --request-timeout)");
        let t = Bounds::new(Duration::from_secs(2));
        assert_eq!((t.connect, t.read), (Duration::from_secs(2), Duration::from_secs(2)));
        assert_eq!(t.describe(), "within --request-timeout 2s");
        assert_eq!(Bounds::new(Duration::from_secs(30)).connect, CONNECT_TIMEOUT);
    }

    #[test]
    fn apply_sets_every_timeout_on_the_config() {
        let mut config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        Bounds::new(Duration::from_secs(3)).apply(&mut config);
        assert_eq!(config.connect_timeout, Some(Duration::from_secs(3)));
        assert_eq!(config.read_timeout, Some(Duration::from_secs(3)));
        assert_eq!(config.write_timeout, Some(Duration::from_secs(3)));
        assert!(config.reset_reader_on_write);
    }

    #[test]
    fn a_timeout_and_a_refusal_are_told_apart_from_other_failures() {
        let timed_out = std::io::Error::new(std::io::ErrorKind::TimedOut, "read");
        assert_eq!(Unanswered::classify(&timed_out), Unanswered::TimedOut);
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connect");
        assert_eq!(Unanswered::classify(&refused), Unanswered::Refused);
        let other = std::io::Error::other("broken pipe");
        assert_eq!(Unanswered::classify(&other), Unanswered::Other("broken pipe".into()));
        assert_eq!(
            Unanswered::TimedOut.sentence("http://127.0.0.1:1", &Bounds::new(Duration::from_secs(2))),
            "the API server at http://127.0.0.1:1 did not answer within --request-timeout 2s"
        );
    }

    #[test]
    fn durations_read_as_kubectl_writes_them() {
        assert_eq!(humanize(Duration::from_millis(500)), "500ms");
        assert_eq!(humanize(Duration::from_secs(90)), "1m30s");
        assert_eq!(humanize(Duration::from_secs(120)), "2m");
    }
}
