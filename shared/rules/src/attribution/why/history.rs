//! The Git mirror's history of one object's file, as `why` reports it: the
//! commits that touched it with their authors and the `Reverser-*` trailers
//! the writer puts on them (`commit::plan::commit_message`). Reading it from
//! a repository is the runtime's (`runtime::attribution::why`).

use serde::Serialize;

/// What a commit did to the object's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileChange {
    Create,
    Update,
    Delete,
}

impl FileChange {
    pub fn label(self) -> &'static str {
        match self {
            FileChange::Create => "create",
            FileChange::Update => "update",
            FileChange::Delete => "delete",
        }
    }
}

/// One commit that touched the object's file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    pub commit: String,
    pub change: FileChange,
    pub path: String,
    pub author_name: String,
    pub author_email: String,
    /// The author date, RFC 3339 UTC.
    pub date: String,
    pub subject: String,
    /// `true` when the writer committed it as `unknown (attribution unresolved)`.
    pub unresolved: bool,
    /// The trailers in the message's last paragraph, in order (`Reverser-Tier`,
    /// `Reverser-Audit-ID`, `Reverser-Actor`, ...).
    pub trailers: Vec<(String, String)>,
}

impl HistoryEntry {
    /// The first value of trailer `key`.
    pub fn trailer(&self, key: &str) -> Option<&str> {
        self.trailers.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.as_str())
    }
}

/// The trailers of a commit message: `Key: value` lines of its last
/// paragraph, when every line of it is one.
pub fn trailers(message: &str) -> Vec<(String, String)> {
    let last = message.trim_end().rsplit("\n\n").next().unwrap_or_default();
    let parsed: Vec<(String, String)> = last
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(": ")?;
            let key_ok = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            key_ok.then(|| (k.to_owned(), v.trim().to_owned()))
        })
        .collect();
    if parsed.len() == last.lines().count() { parsed } else { Vec::new() }
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, no time crate).
pub fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}
