//! Replay (`spec/replay.md`): the real engine (publish side, index, waiters,
//! resolver, deletion intent through [`Attributor`]) over a recorded
//! timeline, on a [`VirtualClock`].
//!
//! Deterministic by construction: one thread, a local executor, and time
//! that moves only when every resolution is waiting (`run_until_stalled`).
//! Between records the clock jumps from deadline to deadline, so a grace
//! runs out at exactly its virtual millisecond. A record applied at the
//! same millisecond a grace ends is seen by that resolution: time reaches
//! the deadline, the record lands, and only then does the resolution take
//! its last look.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use rules::attribution::Tier;
use rules::attribution::audit::{Published, Rejection};
use rules::attribution::intent::Action;
use rules::attribution::replay::{Line, Record, ReplayOptions, Summary};

use super::clock::{Clock, VirtualClock};
use super::transport::FactBatch;
use super::{Attributor, Engine, EngineConfig};
use crate::metrics::Metrics;

/// Runs the engine over `records`; returns one line per watch record, in
/// input order, and the summary for stderr.
pub fn run(records: Vec<(usize, Record)>, opts: ReplayOptions) -> (Vec<Line>, Summary) {
    let clock = VirtualClock::new();
    let config = EngineConfig { grace: Duration::from_millis(opts.grace_ms), index: opts.index, adaptive: None };
    let engine = Arc::new(Engine::new(config, Arc::new(clock.clone()), Arc::new(Metrics::new())));
    let attributor = Arc::new(Attributor::new(engine.clone()));
    let mut pool = LocalPool::new();
    let spawner = pool.spawner();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let mut summary = Summary::default();

    // Lets every resolution whose deadline comes before `at_ms` finish, in
    // deadline order, then moves time to `at_ms`.
    let advance = |pool: &mut LocalPool, at_ms: u64| {
        while let Some(deadline) = clock.next_deadline().filter(|d| *d < at_ms) {
            clock.advance_to(deadline);
            pool.run_until_stalled();
        }
        clock.advance_to(at_ms);
    };

    for (line, rec) in records {
        advance(&mut pool, rec.at_ms());
        let now = clock.now_ms();
        match rec {
            Record::Audit { route, event, .. } => {
                summary.audit_records += 1;
                match engine.publish_event(&route, &event) {
                    Published::Fact { scope, fact, .. } => {
                        summary.facts_published += 1;
                        engine.apply_batch(FactBatch { scope, facts: vec![fact], at_ms: now });
                    }
                    Published::Rejected(r) => *summary.rejected.entry(Rejection::label(r)).or_default() += 1,
                }
            }
            Record::Watch { scope, version, event, .. } => {
                summary.watch_records += 1;
                let intent = attributor.observe_event(&scope, &event);
                if !matches!(intent.action, Action::Write | Action::Delete) {
                    lines.lock().unwrap_or_else(|e| e.into_inner()).push(Line::bare(line, intent.action));
                    continue;
                }
                let (attributor, lines) = (attributor.clone(), lines.clone());
                let task = async move {
                    let r = attributor.resolve(&scope, &version, &intent).await.expect("a write or removal resolves");
                    let l = Line {
                        line,
                        action: intent.action.label(),
                        tier: Some(r.tier),
                        author: Some(r.author().map(str::to_owned)),
                        actor_kind: Some(r.actor_kind()),
                        waited_ms: Some(r.waited.as_millis() as u64),
                    };
                    lines.lock().unwrap_or_else(|e| e.into_inner()).push(l);
                };
                // Spawning fails only once the pool is gone, which it is not.
                spawner.spawn_local(task).expect("the replay executor is running");
            }
        }
        pool.run_until_stalled();
    }
    // Every record is in: let the remaining graces run out.
    advance(&mut pool, u64::MAX);
    pool.run_until_stalled();

    let mut lines = std::mem::take(&mut *lines.lock().unwrap_or_else(|e| e.into_inner()));
    for l in lines.iter().filter(|l| l.tier.is_some()) {
        *summary.resolutions.entry(l.tier.map_or("absent", Tier::label)).or_default() += 1;
    }
    lines.sort_by_key(|l| l.line);
    (lines, summary)
}

#[cfg(test)]
mod tests;
