use serde_json::json;

use super::*;
use crate::attribution::render::{ObjectKey, to_stable_yaml};

fn render(v: &Value) -> String {
    to_stable_yaml(&ObjectKey::default(), v).unwrap()
}

const MULTI: &str = "\
# shop's config, kept by hand
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: shop
data:
  k: |
    line
    ---
    still the scalar
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: shop
spec:
  replicas: 1
--- # trailing
";

#[test]
fn files_split_into_documents_block_scalars_kept_whole() {
    let spans = split(MULTI);
    assert_eq!(spans.len(), 3);
    let bodies: Vec<Content> = spans.iter().map(|s| parse(&MULTI[s.body.clone()])).collect();
    assert!(
        matches!(&bodies[0], Content::Object { identity, .. } if *identity == Identity::new("", "ConfigMap", "shop", "a"))
    );
    assert!(
        matches!(&bodies[1], Content::Object { identity, .. } if *identity == Identity::new("apps", "Deployment", "shop", "api"))
    );
    assert_eq!(bodies[2], Content::Empty);
    let Content::Object { value, .. } = &bodies[0] else { panic!() };
    assert_eq!(value["data"]["k"], "line\n---\nstill the scalar\n");
    // A leading separator opens the first document; it makes no empty one.
    assert_eq!(split("---\napiVersion: v1\n").len(), 1);
    assert!(matches!(parse("a: [b\n"), Content::Unparsable { .. }));
    assert_eq!(parse("just: data\n"), Content::Foreign);
}

#[test]
fn an_edit_keeps_siblings_comments_and_order() {
    let spans = split(MULTI);
    let body = &MULTI[spans[1].body.clone()];
    let Content::Object { value: old, .. } = parse(body) else { panic!() };
    let mut new = old.clone();
    new["spec"]["replicas"] = json!(3);
    let edited = edit(body, &old, &new, &render);
    assert_eq!(edited, body.replace("replicas: 1", "replicas: 3"));
    let file = replace(MULTI, &spans, 1, &edited);
    assert!(file.starts_with(&MULTI[..spans[1].body.start]), "the sibling keeps every byte");
    assert!(file.contains("# shop's config, kept by hand"));
}

#[test]
fn an_edit_keeps_comments_and_order_of_untouched_keys() {
    let body = "\
# head
kind: ConfigMap
apiVersion: v1
metadata:
  # who
  name: web
  namespace: shop
  labels:
    z: 1 # last
    a: 2
data:
  old: x
";
    let old: Value = serde_norway::from_str(body).unwrap();
    let new = json!({
        "kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"z": 1, "a": 3, "b": 4}},
        "data": {"new": "y"},
    });
    let edited = edit(body, &old, &new, &render);
    assert_eq!(serde_norway::from_str::<Value>(&edited).unwrap(), new);
    assert!(
        edited.starts_with("# head\nkind: ConfigMap\napiVersion: v1\nmetadata:\n  # who\n  name: web\n"),
        "{edited}"
    );
    assert!(edited.contains("    z: 1 # last\n    a: 3\n    b: 4\n"), "{edited}");
    assert!(!edited.contains("old"), "{edited}");
}

#[test]
fn what_cannot_be_edited_in_place_is_rendered_whole() {
    let body = "# lead\n{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n";
    let old: Value = serde_norway::from_str(body).unwrap();
    let new = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}});
    let edited = edit(body, &old, &new, &render);
    assert!(edited.starts_with("# lead\napiVersion: v1\n"), "{edited}");
    assert_eq!(serde_norway::from_str::<Value>(&edited).unwrap(), new);
}

#[test]
fn removing_a_document_keeps_the_rest_and_an_empty_file_goes() {
    let spans = split(MULTI);
    let without_first = remove(MULTI, &spans, 0).unwrap();
    assert!(without_first.starts_with("apiVersion: apps/v1\n"), "{without_first}");
    let spans2 = split(&without_first);
    assert!(remove(&without_first, &spans2, 0).is_none(), "nothing but a trailing separator is left");
    let without_second = remove(MULTI, &spans, 1).unwrap();
    assert!(without_second.contains("kind: ConfigMap") && !without_second.contains("Deployment"));
    let single = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n";
    assert!(remove(single, &split(single), 0).is_none());
    let appended = append(single, "apiVersion: v1\nkind: Service\nmetadata:\n  name: b\n");
    assert_eq!(split(&appended).len(), 2);
}
