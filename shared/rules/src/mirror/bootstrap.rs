//! Bootstrap (gitops-reverser `internal/git/bootstrapped_repo_template.go`):
//! the files a target's first write stages into its `spec.path` —
//! `README.md`, `.gittargetignore`, and `.sops.yaml` when encryption is on —
//! each only where no file of that name exists. And the `.gittargetignore`
//! they leave: paths it matches (git's ignore syntax) are never read as
//! documents and never written.

use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The `.gittargetignore` file's name, at the root of `spec.path`.
pub const IGNORE_FILE: &str = ".gittargetignore";
/// The SOPS configuration's name, at the root of `spec.path`.
pub const SOPS_CONFIG: &str = ".sops.yaml";

const README: &str = include_str!("bootstrap/README.md");
const GITTARGETIGNORE: &str = include_str!("bootstrap/gittargetignore");

/// Bootstrap or ignore rules that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootstrapError {
    #[error(
        "cannot write {SOPS_CONFIG}: encryption is on but has no age recipient; \
         configure spec.encryption.age.recipients"
    )]
    NoRecipient,
    #[error("cannot write {SOPS_CONFIG}: age recipient {0:?} is empty or spans lines")]
    BadRecipient(String),
    #[error(
        "{path} pattern {pattern:?} matches every file the mirror writes and would blind it to its own \
         documents; remove it and name only specific files"
    )]
    IgnoresEverything { path: String, pattern: String },
    #[error("{path} line {line:?} is not a gitignore pattern: {message}")]
    BadPattern { path: String, line: String, message: String },
}

/// The files to stage (name relative to `spec.path`, content), in name
/// order; `.sops.yaml` only with age recipients (encryption on).
pub fn files(age_recipients: Option<&[String]>) -> Result<Vec<(&'static str, String)>, BootstrapError> {
    let mut out = vec![(IGNORE_FILE, GITTARGETIGNORE.to_owned())];
    if let Some(recipients) = age_recipients {
        out.push((SOPS_CONFIG, sops_config(recipients)?));
    }
    out.push(("README.md", README.to_owned()));
    Ok(out)
}

/// `.sops.yaml` as gitops-reverser renders it
/// (`bootstrapped-repo-template/.sops.yaml`): SOPS files only, `data` and
/// `stringData` encrypted, for every recipient.
pub fn sops_config(recipients: &[String]) -> Result<String, BootstrapError> {
    if recipients.is_empty() {
        return Err(BootstrapError::NoRecipient);
    }
    let mut out = String::from(
        "# .sops.yaml\ncreation_rules:\n  # Encrypt only Kubernetes Secret payloads written as *.sops.yaml files.\n  \
         - path_regex: '.*\\.sops\\.ya?ml$'\n    encrypted_regex: '^(data|stringData)$'\n    key_groups:\n      - age:",
    );
    for r in recipients {
        if r.trim().is_empty() || r.contains(['\n', '\r', '"']) {
            return Err(BootstrapError::BadRecipient(r.clone()));
        }
        out.push_str(&format!("\n          - \"{r}\""));
    }
    out.push('\n');
    Ok(out)
}

/// A parsed `.gittargetignore`. Empty (ignoring nothing) when the file is
/// absent.
#[derive(Debug, Clone, Default)]
pub struct TargetIgnore {
    matcher: Option<Gitignore>,
}

impl TargetIgnore {
    /// Ignores nothing.
    pub fn none() -> Self {
        TargetIgnore { matcher: None }
    }

    /// Parses the file's text; `path` names it in errors. A pattern that
    /// would match every manifest (gitops-reverser `gittargetignore.go:247`)
    /// is refused.
    pub fn parse(path: &str, text: &str) -> Result<Self, BootstrapError> {
        let mut builder = GitignoreBuilder::new("");
        let mut any = false;
        for line in text.lines() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            if matches!(t, "*" | "**" | "/" | "*.yaml" | "*.yml" | "**/*" | "**/*.yaml" | "**/*.yml") {
                return Err(BootstrapError::IgnoresEverything { path: path.to_owned(), pattern: t.to_owned() });
            }
            builder.add_line(None, t).map_err(|e| BootstrapError::BadPattern {
                path: path.to_owned(),
                line: t.to_owned(),
                message: e.to_string(),
            })?;
            any = true;
        }
        if !any {
            return Ok(Self::none());
        }
        let matcher = builder.build().map_err(|e| BootstrapError::BadPattern {
            path: path.to_owned(),
            line: String::new(),
            message: e.to_string(),
        })?;
        Ok(TargetIgnore { matcher: Some(matcher) })
    }

    /// Whether a file (path relative to `spec.path`) is ignored, itself or
    /// through a directory above it.
    pub fn ignores(&self, path: &str) -> bool {
        self.matching_pattern(path).is_some()
    }

    /// The pattern that ignores `path` (last match wins, as in git), for
    /// messages that name it.
    pub fn matching_pattern(&self, path: &str) -> Option<&str> {
        match self.matcher.as_ref()?.matched_path_or_any_parents(path, false) {
            ignore::Match::Ignore(glob) => Some(glob.original()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_are_the_references_and_sops_yaml_comes_with_encryption() {
        let plain = files(None).unwrap();
        assert_eq!(plain.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [".gittargetignore", "README.md"]);
        assert!(plain[1].1.starts_with("# GitOps Reverser Bootstrap Files\n"));
        let with = files(Some(&["age1a".to_owned(), "age1b".to_owned()])).unwrap();
        assert_eq!(with[1].0, ".sops.yaml");
        assert!(with[1].1.ends_with("      - age:\n          - \"age1a\"\n          - \"age1b\"\n"), "{}", with[1].1);
        assert!(with[1].1.contains("encrypted_regex: '^(data|stringData)$'"));
        assert_eq!(sops_config(&[]).unwrap_err(), BootstrapError::NoRecipient);
    }

    #[test]
    fn ignore_patterns_follow_git_and_catch_all_patterns_are_refused() {
        // The shipped file is all comments: it ignores nothing.
        assert!(!TargetIgnore::parse(IGNORE_FILE, GITTARGETIGNORE).unwrap().ignores("docs/a.yaml"));
        let ig = TargetIgnore::parse(IGNORE_FILE, "docs/\nlegacy/old.yaml\n*.tmpl.yaml\n!keep.tmpl.yaml\n").unwrap();
        assert!(ig.ignores("docs/x/y.yaml"));
        assert!(ig.ignores("legacy/old.yaml"));
        assert!(ig.ignores("shop/a.tmpl.yaml"));
        assert!(!ig.ignores("shop/keep.tmpl.yaml"));
        assert!(!ig.ignores("shop/configmaps/web.yaml"));
        let err = TargetIgnore::parse(IGNORE_FILE, "# x\n*.yaml\n").unwrap_err();
        assert!(err.to_string().contains("\"*.yaml\""), "{err}");
    }
}
