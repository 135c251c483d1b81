//! Label selectors as a `deletecollection` request URI states them: the
//! intent the actor stated, which bounds the collection scope tier. An empty
//! selector matches everything of the type in the namespace (`--all`).

use std::collections::BTreeMap;

use crate::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Exists,
    NotExists,
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Gt(i64),
    Lt(i64),
}

/// A parsed selector: every requirement must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    reqs: Vec<(String, Op)>,
}

impl Selector {
    /// Parses the Kubernetes label selector grammar (`a=b`, `a==b`, `a!=b`,
    /// `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>1`, `a<1`, comma-joined).
    pub fn parse(s: &str) -> Result<Self> {
        let err = |message: &str| Error::Selector { selector: s.to_owned(), message: message.to_owned() };
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let part = part.trim();
            if part.is_empty() {
                if s.trim().is_empty() {
                    continue;
                }
                return Err(err("empty requirement"));
            }
            let req = if let Some(key) = part.strip_prefix('!') {
                (key.trim().to_owned(), Op::NotExists)
            } else if let Some((k, v)) = part.split_once("!=") {
                (k.trim().to_owned(), Op::NotEq(v.trim().to_owned()))
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (k.trim().to_owned(), Op::Eq(v.trim().to_owned()))
            } else if let Some((k, v)) = part.split_once('>') {
                (k.trim().to_owned(), Op::Gt(v.trim().parse().map_err(|_| err("'>' needs an integer"))?))
            } else if let Some((k, v)) = part.split_once('<') {
                (k.trim().to_owned(), Op::Lt(v.trim().parse().map_err(|_| err("'<' needs an integer"))?))
            } else if let Some((k, rest)) = split_word(part, "notin") {
                (k, Op::NotIn(set(&rest).ok_or_else(|| err("notin needs a (set)"))?))
            } else if let Some((k, rest)) = split_word(part, "in") {
                (k, Op::In(set(&rest).ok_or_else(|| err("in needs a (set)"))?))
            } else {
                (part.to_owned(), Op::Exists)
            };
            if req.0.is_empty() || req.0.contains(char::is_whitespace) {
                return Err(err("a requirement needs one key"));
            }
            reqs.push(req);
        }
        Ok(Selector { reqs })
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.reqs.iter().all(|(k, op)| {
            let v = labels.get(k);
            match op {
                Op::Exists => v.is_some(),
                Op::NotExists => v.is_none(),
                Op::Eq(x) => v == Some(x),
                Op::NotEq(x) => v != Some(x),
                Op::In(xs) => v.is_some_and(|v| xs.contains(v)),
                Op::NotIn(xs) => v.is_none_or(|v| !xs.contains(v)),
                Op::Gt(n) => v.and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v > *n),
                Op::Lt(n) => v.and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v < *n),
            }
        })
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn split_word(part: &str, word: &str) -> Option<(String, String)> {
    let mut it = part.splitn(2, char::is_whitespace);
    let key = it.next()?.trim();
    let rest = it.next()?.trim_start();
    let rest = rest.strip_prefix(word)?;
    rest.trim_start().starts_with('(').then(|| (key.to_owned(), rest.trim().to_owned()))
}

fn set(s: &str) -> Option<Vec<String>> {
    let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.split(',').map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert!(Selector::parse("").unwrap().matches(&labels(&[])));
    }

    #[test]
    fn equality_set_and_existence_requirements() {
        let l = labels(&[("app", "web"), ("tier", "a"), ("n", "5")]);
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=db", false),
            ("tier in (a, b)", true),
            ("tier notin (a)", false),
            ("missing notin (a)", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("n>4", true),
            ("n<5", false),
            ("app=web,tier in (b,c)", false),
            ("mutationlab.configbutler.ai/scenario=deletecollection", false),
        ] {
            assert_eq!(Selector::parse(sel).unwrap().matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn malformed_selectors_are_errors() {
        for bad in ["a,,b", "x in a", "n>z", "a b"] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }
}
