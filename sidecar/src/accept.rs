//! The step every accept loop takes: the next connection, or the stop.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::Duration;

/// The next connection `accept` gives, or `None` once `shutdown` resolves.
/// A failed accept is logged and retried after a pause: out of descriptors,
/// most likely, so some must close first.
pub async fn next<T, F>(
    listener: &'static str,
    mut accept: impl FnMut() -> F,
    mut shutdown: Pin<&mut impl Future<Output = ()>>,
) -> Option<T>
where
    F: Future<Output = io::Result<T>>,
{
    loop {
        tokio::select! {
            biased;
            _ = &mut shutdown => return None,
            accepted = accept() => match accepted {
                Ok(a) => return Some(a),
                Err(e) => {
                    tracing::warn!(listener, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}
