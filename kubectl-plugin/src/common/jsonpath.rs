//! `-o jsonpath=TEMPLATE`, kubectl's template language: text outside braces
//! is printed as is; `{.a.b}`, `{.items[*].name}`, `{..name}`,
//! `{.items[?(@.x=="y")].name}` print what the expression selects (several
//! results separated by a space, strings bare, the rest as JSON);
//! `{range .items[*]}...{end}` repeats its body for each result, `@` being
//! that result; `{"\n"}` prints a literal. Expressions are evaluated by
//! jsonpath-rust (RFC 9535), which kubectl's expressions are written in.

use jsonpath_rust::JsonPath;
use serde_json::Value;

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Expr(String),
    Range(String, Vec<Part>),
}

impl Template {
    /// Parses `text`; an unbalanced brace or `range` is refused.
    pub fn parse(text: &str) -> Result<Self, String> {
        let fail = |why: String| format!("jsonpath template {text:?}: {why}");
        let mut stack: Vec<(String, Vec<Part>)> = vec![(String::new(), Vec::new())];
        let mut chars = text.char_indices().peekable();
        let mut literal = String::new();
        while let Some((i, c)) = chars.next() {
            if c != '{' {
                literal.push(c);
                continue;
            }
            let mut quote: Option<char> = None;
            let mut end = None;
            for (j, d) in chars.by_ref() {
                match (quote, d) {
                    (Some(q), d) if d == q => quote = None,
                    (Some(_), _) => {}
                    (None, '"' | '\'') => quote = Some(d),
                    (None, '}') => {
                        end = Some(j);
                        break;
                    }
                    _ => {}
                }
            }
            let end = end.ok_or_else(|| fail(format!("the brace at {i} is never closed")))?;
            let action = text[i + 1..end].trim();
            let parts = &mut stack.last_mut().expect("the root is never popped").1;
            if !literal.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut literal)));
            }
            if let Some(expr) = action.strip_prefix("range ") {
                stack.push((expr.trim().to_string(), Vec::new()));
            } else if action == "end" {
                if stack.len() < 2 {
                    return Err(fail("{end} without a {range}".into()));
                }
                let (expr, body) = stack.pop().expect("checked above");
                stack.last_mut().expect("the root is never popped").1.push(Part::Range(expr, body));
            } else if let Some(lit) = quoted(action) {
                parts.push(Part::Text(lit));
            } else if action.is_empty() {
                return Err(fail("an empty {}".into()));
            } else {
                let expr = action.to_string();
                check(&expr).map_err(fail)?;
                parts.push(Part::Expr(expr));
            }
        }
        if stack.len() > 1 {
            return Err(fail("a {range} without its {end}".into()));
        }
        let mut parts = stack.pop().expect("the root").1;
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Self { source: text.to_string(), parts })
    }

    /// The template applied to `root`. With `allow_missing` false (kubectl's
    /// `--allow-missing-template-keys=false`) a field the result lacks is an
    /// error naming it; otherwise it prints nothing, as kubectl's default.
    pub fn render(&self, root: &Value, allow_missing: bool) -> Result<String, String> {
        let mut out = String::new();
        render(&self.parts, root, root, allow_missing, &mut out)
            .map_err(|e| format!("jsonpath template {:?}: {e}", self.source))?;
        Ok(out)
    }
}

/// `"..."` or `'...'` with `\n`, `\t`, `\\` and `\"` escapes.
fn quoted(action: &str) -> Option<String> {
    let q = action.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let inner = action.strip_prefix(q)?.strip_suffix(q)?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    Some(out)
}

/// kubectl's `.a.b` (relative) is RFC 9535's `$.a.b`; `@` is the current
/// node of a `range`.
fn absolute(expr: &str) -> String {
    let rest = expr.strip_prefix('@').or_else(|| expr.strip_prefix('$')).unwrap_or(expr);
    if rest.is_empty() || rest.starts_with('.') || rest.starts_with('[') {
        format!("${rest}")
    } else {
        format!("$.{rest}")
    }
}

fn check(expr: &str) -> Result<(), String> {
    Value::Null.query(&absolute(expr)).map(|_| ()).map_err(|e| format!("{expr:?} is not a JSONPath expression: {e}"))
}

fn select<'a>(expr: &str, root: &'a Value, current: &'a Value) -> Result<Vec<&'a Value>, String> {
    let base = if expr.starts_with('$') { root } else { current };
    base.query(&absolute(expr)).map_err(|e| format!("{expr:?}: {e}"))
}

fn render(parts: &[Part], root: &Value, current: &Value, allow_missing: bool, out: &mut String) -> Result<(), String> {
    for part in parts {
        match part {
            Part::Text(t) => out.push_str(t),
            Part::Expr(e) => {
                let values = select(e, root, current)?;
                // A wildcard, filter or descent may rightly select nothing;
                // a plain path that selects nothing names a missing field.
                let plain = !(e.contains('*') || e.contains('?') || e.contains(".."));
                if values.is_empty() && plain && !allow_missing {
                    return Err(format!(
                        "{e} is not found in the result; check the field against -o json, or pass \
                         --allow-missing-template-keys=true to print nothing for it"
                    ));
                }
                let texts: Vec<String> = values.iter().map(|v| text(v)).collect();
                out.push_str(&texts.join(" "));
            }
            Part::Range(e, body) => {
                for item in select(e, root, current)? {
                    render(body, root, item, allow_missing, out)?;
                }
            }
        }
    }
    Ok(())
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(t: &str, v: &Value) -> String {
        Template::parse(t).unwrap().render(v, true).unwrap()
    }

    #[test]
    fn a_missing_field_fails_only_when_missing_keys_are_not_allowed() {
        let v = json!({"verdict": {"author": "alice"}, "items": []});
        let t = Template::parse("{.verdict.nope}").unwrap();
        assert_eq!(t.render(&v, true).unwrap(), "");
        let e = t.render(&v, false).unwrap_err();
        assert!(e.contains(".verdict.nope is not found") && e.contains("--allow-missing-template-keys"), "{e}");
        assert_eq!(Template::parse("{.items[*].name}").unwrap().render(&v, false).unwrap(), "");
        assert_eq!(Template::parse("{.verdict.author}").unwrap().render(&v, false).unwrap(), "alice");
    }

    #[test]
    fn kubectl_templates_select_print_and_range() {
        let v = json!({"verdict": {"author": "alice", "resolved": true},
            "items": [{"name": "a", "n": 1, "kind": "Issue"}, {"name": "b", "n": 2, "kind": "Task"}]});
        assert_eq!(run("{.verdict.author}", &v), "alice");
        assert_eq!(run("author={.verdict.author} ok={.verdict.resolved}\n", &v), "author=alice ok=true\n");
        assert_eq!(run("{.items[*].name}", &v), "a b");
        assert_eq!(run("{range .items[*]}{.name}{\"\\t\"}{@.n}{\"\\n\"}{end}", &v), "a\t1\nb\t2\n");
        assert_eq!(run("{.items[?(@.kind==\"Task\")].name}", &v), "b");
        assert_eq!(run("{..name}", &v), "a b");
        assert_eq!(run("{.items[0]}", &v), r#"{"kind":"Issue","n":1,"name":"a"}"#);
        assert_eq!(run("{$.verdict.author}", &v), "alice");
        assert_eq!(run("{.nothing.here}", &v), "", "a missing key prints nothing, as kubectl's default");
    }

    #[test]
    fn broken_templates_are_refused_with_the_reason() {
        for (t, says) in [
            ("{.a", "never closed"),
            ("{range .items[*]}{.name}", "without its {end}"),
            ("{end}", "without a {range}"),
            ("{}", "empty"),
            ("{.a[?(@.x=]}", "not a JSONPath expression"),
        ] {
            let e = Template::parse(t).unwrap_err();
            assert!(e.contains(says), "{t}: {e}");
        }
    }
}
