//! A client-side throttle for a remote cluster's API server: client-go's
//! token bucket (`flowcontrol.NewTokenBucketRateLimiter`), `qps` tokens a
//! second up to `burst`, starting full. Every request takes one token,
//! the watches' requests included; a watch's stream then runs unthrottled.
//!
//! Hand-written rather than `governor`: the bucket runs on tokio's clock,
//! so its test runs on paused time instead of timing a real one.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// The bucket every clone of a throttled client shares.
#[derive(Debug)]
struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// Takes a token, or says how long until one is there.
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
    }
}

/// `qps` requests a second, `burst` at once.
#[derive(Debug, Clone)]
pub struct ThrottleLayer {
    bucket: Arc<Mutex<Bucket>>,
}

impl ThrottleLayer {
    pub fn new(qps: f64, burst: u32) -> Self {
        let qps = qps.max(f64::MIN_POSITIVE);
        let burst = f64::from(burst.max(1));
        ThrottleLayer { bucket: Arc::new(Mutex::new(Bucket { qps, burst, tokens: burst, at: Instant::now() })) }
    }
}

impl<S> Layer<S> for ThrottleLayer {
    type Service = Throttle<S>;

    fn layer(&self, inner: S) -> Throttle<S> {
        Throttle { inner, bucket: self.bucket.clone(), wait: None, granted: false }
    }
}

/// The throttled service: readiness waits for a token, then for the inner
/// service. kube's client drives it through one buffer, so requests queue
/// in order.
pub struct Throttle<S> {
    inner: S,
    bucket: Arc<Mutex<Bucket>>,
    wait: Option<Pin<Box<Sleep>>>,
    granted: bool,
}

impl<S, R> Service<R> for Throttle<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.granted {
            if let Some(wait) = self.wait.as_mut() {
                ready!(wait.as_mut().poll(cx));
                self.wait = None;
            }
            let taken = self.bucket.lock().unwrap_or_else(|e| e.into_inner()).take(Instant::now());
            match taken {
                Ok(()) => self.granted = true,
                Err(after) => self.wait = Some(Box::pin(tokio::time::sleep(after))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.granted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    /// Calls `n` requests one after another, returning when each started.
    async fn starts(layer: &ThrottleLayer, n: usize) -> Vec<Duration> {
        let begin = Instant::now();
        let mut svc = layer.layer(tower::service_fn(|_: ()| async { Ok::<_, std::convert::Infallible>(()) }));
        let mut out = Vec::new();
        for _ in 0..n {
            svc.ready().await.unwrap();
            out.push(begin.elapsed());
            svc.call(()).await.unwrap();
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_goes_at_once_then_qps_paces_the_rest() {
        let layer = ThrottleLayer::new(2.0, 3);
        let at: Vec<u128> = starts(&layer, 6).await.iter().map(|d| d.as_millis()).collect();
        // Three from the full bucket, then one every 500 ms.
        assert_eq!(at, vec![0, 0, 0, 500, 1000, 1500]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_bucket_refills_only_up_to_its_burst() {
        let layer = ThrottleLayer::new(10.0, 2);
        starts(&layer, 2).await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        let at: Vec<u128> = starts(&layer, 4).await.iter().map(|d| d.as_millis()).collect();
        assert_eq!(at, vec![0, 0, 100, 200]);
    }

    #[tokio::test(start_paused = true)]
    async fn clones_of_a_client_share_one_bucket() {
        let layer = ThrottleLayer::new(1.0, 1);
        let first = starts(&layer, 1).await;
        let second = starts(&layer, 1).await;
        assert_eq!((first[0].as_millis(), second[0].as_millis()), (0, 1000));
    }
}
