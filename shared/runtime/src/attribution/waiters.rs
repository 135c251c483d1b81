//! The waiter registry (spec §4 "The wait"): candidate key to the set of
//! resolvers blocked on it. A resolver registers under one key per tier its
//! event could resolve through BEFORE it reads the index, so a fact landing
//! in the gap still wakes it; one applied fact wakes every resolver
//! registered under any key it filled, and no other.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use rules::attribution::Scope;
use rules::attribution::index::IndexKey;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WaitKey {
    scope: Scope,
    key: IndexKey,
}

type Senders = HashMap<u64, mpsc::Sender<()>>;

/// `map[factWaiterKey]map[*factWaiter]struct{}`.
#[derive(Debug, Default)]
pub struct WaiterRegistry {
    inner: Mutex<HashMap<WaitKey, Senders>>,
    next_id: AtomicU64,
}

/// One registered resolver. Dropping it unregisters every key, on every
/// exit path (the `defer unregister` of the spec).
#[derive(Debug)]
pub struct Waiter<'a> {
    registry: &'a WaiterRegistry,
    id: u64,
    keys: Vec<WaitKey>,
    rx: mpsc::Receiver<()>,
}

impl Waiter<'_> {
    /// Waits for a wake-up. A wake is only a hint: the caller re-reads the index.
    pub async fn woken(&mut self) {
        // The sender lives in the registry for as long as this waiter does,
        // so `None` cannot happen while we hold `self`.
        let _ = self.rx.recv().await;
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let mut map = self.registry.lock();
        for k in &self.keys {
            if let Some(set) = map.get_mut(k) {
                set.remove(&self.id);
                if set.is_empty() {
                    map.remove(k);
                }
            }
        }
    }
}

impl WaiterRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<WaitKey, Senders>> {
        // A panic elsewhere while holding the lock leaves the map consistent
        // (every operation on it is a single insert or remove).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a resolver under `keys` of `scope`.
    pub fn register(&self, scope: &Scope, keys: &[IndexKey]) -> Waiter<'_> {
        // Buffer one: a signal sent while the resolver is mid-recheck is
        // still there when it comes back around.
        let (tx, rx) = mpsc::channel(1);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let keys: Vec<WaitKey> = keys.iter().map(|k| WaitKey { scope: scope.clone(), key: k.clone() }).collect();
        let mut map = self.lock();
        for k in &keys {
            map.entry(k.clone()).or_default().insert(id, tx.clone());
        }
        Waiter { registry: self, id, keys, rx }
    }

    /// Wakes every resolver registered under any of `keys`. Never blocks: a
    /// second signal on an already-signaled waiter is dropped.
    pub fn wake(&self, scope: &Scope, keys: &[IndexKey]) {
        let map = self.lock();
        if map.is_empty() {
            return;
        }
        for key in keys {
            // Build the lookup key without cloning the scope per key in the
            // common no-waiter case: the map is usually small or empty.
            if let Some(set) = map.get(&WaitKey { scope: scope.clone(), key: key.clone() }) {
                for tx in set.values() {
                    let _ = tx.try_send(());
                }
            }
        }
    }

    /// Registrations held (one per key per waiter): zero once every resolver
    /// has returned. Exposed so tests can assert nothing was left behind.
    pub fn len(&self) -> usize {
        self.lock().values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolvers that ever registered: one that answered without waiting
    /// registered none.
    pub fn registrations(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rules::attribution::GroupResource;

    fn scope(r: &str) -> Scope {
        Scope::new(r, GroupResource::new("", "configmaps"))
    }

    #[tokio::test]
    async fn registered_waiter_is_woken_once_and_unregisters_on_drop() {
        let reg = WaiterRegistry::new();
        let keys = [IndexKey::Uid("u1".into()), IndexKey::Name("ns".into(), "cm".into())];
        let mut w = reg.register(&scope("a"), &keys);
        assert_eq!(reg.len(), 2);
        // A wake before the waiter looks is buffered, a second one dropped.
        reg.wake(&scope("a"), &[IndexKey::Uid("u1".into())]);
        reg.wake(&scope("a"), &[IndexKey::Name("ns".into(), "cm".into())]);
        w.woken().await;
        assert!(w.rx.try_recv().is_err(), "one pending wake-up is enough");
        drop(w);
        assert_eq!(reg.len(), 0);
    }

    #[tokio::test]
    async fn a_fact_wakes_only_waiters_of_its_keys_and_scope() {
        let reg = WaiterRegistry::new();
        let mut same = reg.register(&scope("a"), &[IndexKey::Uid("u1".into())]);
        let mut other_route = reg.register(&scope("b"), &[IndexKey::Uid("u1".into())]);
        let mut other_key = reg.register(&scope("a"), &[IndexKey::Uid("u2".into())]);
        reg.wake(&scope("a"), &[IndexKey::Uid("u1".into())]);
        assert!(same.rx.try_recv().is_ok());
        assert!(other_route.rx.try_recv().is_err());
        assert!(other_key.rx.try_recv().is_err());
    }
}
