//! Orderly shutdown for the long-running commands: SIGTERM or SIGINT stops
//! accepting, every task the process started (listeners, the fact follower,
//! the sweeper, the watcher) sees the stop signal, and the process waits for
//! them up to a deadline, then aborts what is left and says which.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

/// Resolves on SIGTERM or SIGINT.
pub async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        // No signal handler: only an external kill ends the process.
        _ => std::future::pending().await,
    }
}

/// The stop signal and every task that must end before the process does.
#[derive(Debug)]
pub struct Tasks {
    stop: watch::Sender<bool>,
    set: JoinSet<()>,
    names: Vec<(tokio::task::Id, &'static str)>,
}

impl Default for Tasks {
    fn default() -> Self {
        Self::new()
    }
}

impl Tasks {
    pub fn new() -> Self {
        Self { stop: watch::channel(false).0, set: JoinSet::new(), names: Vec::new() }
    }

    /// A future that resolves once shutdown has begun.
    pub fn stopping(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.stop.subscribe();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    }

    /// Runs `task` until it ends by itself or shutdown begins, whichever is
    /// first: a task that loops forever (a follower, a sweeper) needs no stop
    /// handling of its own.
    pub fn spawn_until_stopped<F>(&mut self, name: &'static str, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stopping = self.stopping();
        self.spawn(name, async move {
            tokio::select! {
                _ = task => {}
                _ = stopping => {}
            }
        });
    }

    /// Runs `task`, which watches [`Tasks::stopping`] itself and ends on it
    /// (a listener draining its connections).
    pub fn spawn<F>(&mut self, name: &'static str, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let handle = self.set.spawn(task);
        self.names.push((handle.id(), name));
    }

    /// Runs the future `make` builds on a runtime of its own: one thread with
    /// its own I/O driver and timers (`make` runs there, so the sockets it
    /// opens register with that runtime). For a request path whose every
    /// call is a short burst of work: on the shared multi-threaded runtime,
    /// a call is read on one worker and handed to another, each hand-off a
    /// thread wake-up that costs more than the call's own work. Shutdown
    /// waits for it like any other task.
    pub fn spawn_on_own_thread<M, F>(&mut self, name: &'static str, make: M) -> std::io::Result<()>
    where
        M: FnOnce() -> F + Send + 'static,
        F: Future<Output = ()> + 'static,
    {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (done, ended) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new().name(name.replace(' ', "-")).spawn(move || {
            rt.block_on(make());
            let _ = done.send(());
        })?;
        self.spawn(name, async move {
            let _ = ended.await;
        });
        Ok(())
    }

    /// Begins shutdown and waits for every task, at most `deadline`; the
    /// tasks still running then are aborted and named in a warning.
    pub async fn shutdown(mut self, deadline: Duration) {
        self.stop.send_replace(true);
        let drained = tokio::time::timeout(deadline, async {
            while let Some(done) = self.set.join_next_with_id().await {
                if let Ok((id, ())) = done {
                    self.names.retain(|(i, _)| *i != id);
                } else if let Err(e) = done {
                    let id = e.id();
                    self.names.retain(|(i, _)| *i != id);
                    if e.is_panic() {
                        tracing::error!("a task panicked while shutting down: {e}");
                    }
                }
            }
        })
        .await;
        if drained.is_err() {
            let left: Vec<&str> = self.names.iter().map(|(_, n)| *n).collect();
            tracing::warn!(left = %left.join(", "), deadline = %crate::cli::humanize(deadline), "shutdown deadline passed; aborting the tasks still running");
            self.set.abort_all();
            while self.set.join_next().await.is_some() {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_task_on_its_own_thread_runs_there_and_shutdown_waits_for_it() {
        let mut tasks = Tasks::new();
        let stopping = tasks.stopping();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(4);
        let here = std::thread::current().id();
        tasks
            .spawn_on_own_thread("own thread", move || async move {
                // Its own runtime: timers and I/O work, on another thread.
                tokio::time::sleep(Duration::from_millis(10)).await;
                let name = std::thread::current().name().unwrap_or_default().to_owned();
                assert_ne!(std::thread::current().id(), here);
                stopping.await;
                tx.send(name).await.unwrap();
            })
            .unwrap();
        tasks.shutdown(Duration::from_secs(5)).await;
        assert_eq!(rx.recv().await.as_deref(), Some("own-thread"), "ended before shutdown returned");
    }

    #[tokio::test]
    async fn stop_ends_looping_tasks_and_the_deadline_aborts_stuck_ones() {
        let mut tasks = Tasks::new();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<&str>(4);
        let t = tx.clone();
        tasks.spawn_until_stopped("follower", async move {
            let _keep = t;
            std::future::pending::<()>().await;
        });
        let stopping = tasks.stopping();
        let t = tx.clone();
        tasks.spawn("listener", async move {
            stopping.await;
            t.send("listener drained").await.unwrap();
        });
        tasks.spawn("stuck", async { std::future::pending::<()>().await });
        drop(tx);
        let start = std::time::Instant::now();
        tasks.shutdown(Duration::from_millis(200)).await;
        assert!(start.elapsed() >= Duration::from_millis(200), "waited for the stuck task up to the deadline");
        assert_eq!(rx.recv().await, Some("listener drained"));
        // Every task, the aborted one included, has dropped what it held.
        assert_eq!(rx.recv().await, None);
    }
}
