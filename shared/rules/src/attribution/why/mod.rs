//! `kubectl reverser why` (issue 9): the pure parts of explaining an
//! object's attribution. The plugin GETs the object, asks the evidence
//! (a sidecar's `Explain`, or its own engine following the streams) and reads
//! the Git mirror; these modules turn that into one [`report::Report`].
//!
//! - [`discovery`]: resolve `TYPE` as kubectl does (kind, plural, singular,
//!   short name, `resource.group`).
//! - [`explanation`]: the evidence's one JSON shape, shared by the sidecar's
//!   gRPC `Explain`, its `GET /v1/explain`, and the plugin.
//! - [`history`]: the commits that touched the object's file, with trailers.
//! - [`cause`]: which known cause fits an unresolved attribution.
//! - [`report`]: the answer.

pub mod cause;
pub mod discovery;
pub mod explanation;
pub mod history;
pub mod report;

pub use cause::Cause;
pub use discovery::{ApiResource, resolve_type, resources_of};
pub use explanation::{CandidateView, EvidenceFact, ExplainParams, Explanation, RouteHealthView};
pub use history::{FileChange, HistoryEntry, rfc3339, trailers};
pub use report::{Inputs, ObjectState, Report, Source, Verdict, build_report, sealed_file};

/// The longest value `why` prints in its table, in characters.
pub const MAX_PRINTED_CHARS: usize = 256;

/// A value from the evidence (an author, an auditID, a Git author name) as
/// the human table prints it: control characters shown escaped (`\u{1b}`,
/// `\n`), never sent to the terminal, and cut to [`MAX_PRINTED_CHARS`] with
/// `…`. An author is whatever the API server's user said it was.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_PRINTED_CHARS));
    for (n, c) in s.chars().enumerate() {
        if n == MAX_PRINTED_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests;
