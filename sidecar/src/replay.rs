//! `reverser-sidecar replay --timeline FILE`.

use std::io::Write;
use std::path::PathBuf;

use rules::attribution::index::IndexConfig;
use rules::attribution::replay::{self, ReplayOptions};

use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The timeline: JSON Lines of audit and watch records, in non-decreasing at_ms.
    #[arg(long)]
    timeline: PathBuf,
    /// How long a resolution waits for its fact (virtual ms).
    #[arg(long, default_value_t = 3000)]
    grace_ms: u64,
    /// How far apart a collection fact and a removal may be for the scope tier.
    #[arg(long, default_value_t = 30_000)]
    collection_window_ms: u64,
    /// Facts older than this are never joined (virtual ms).
    #[arg(long, default_value_t = 600_000)]
    ttl_ms: u64,
    /// Facts held across every scope.
    #[arg(long, default_value_t = IndexConfig::default().max_facts)]
    max_facts: usize,
    /// Facts held per (route, group/resource).
    #[arg(long, default_value_t = IndexConfig::default().max_facts_per_type)]
    max_facts_per_type: usize,
}

pub fn run(args: Args) -> Result<()> {
    let text = std::fs::read_to_string(&args.timeline)
        .map_err(Error::io(format!("cannot read timeline {}", args.timeline.display())))?;
    let records = replay::parse_timeline(&text)
        .map_err(|e| Error::Config(format!("{}: {e}; fix that line and replay again", args.timeline.display())))?;
    let opts = ReplayOptions {
        grace_ms: args.grace_ms,
        index: IndexConfig {
            ttl_ms: args.ttl_ms,
            collection_window_ms: args.collection_window_ms,
            max_facts: args.max_facts,
            max_facts_per_type: args.max_facts_per_type,
        },
    };
    let (lines, summary) = runtime::attribution::replay::run(records, opts);
    let mut out = std::io::stdout().lock();
    for l in &lines {
        // A line is plain strings and numbers: it always serializes.
        let json = serde_json::to_string(l).expect("a replay line serializes");
        writeln!(out, "{json}").map_err(Error::io("writing stdout"))?;
    }
    eprintln!("{summary}");
    Ok(())
}
