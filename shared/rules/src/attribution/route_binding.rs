//! Route binding (issue 30 item 12): for clusters that share one audit CA,
//! a client certificate may be bound to the routes it may post to, so one
//! cluster's API server can never post facts under another's route.
//! `--audit-route-binding NAME=ROUTE[,ROUTE...]` binds a certificate name
//! (its subject CommonName or a subjectAltName) to routes; `*` is every
//! route. With no binding configured every client of the CA may post to
//! every route, as before; with any, a certificate no binding names may post
//! nowhere.

use std::collections::{BTreeMap, BTreeSet};

/// Which certificate names may post to which routes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteBindings {
    by_name: BTreeMap<String, BTreeSet<String>>,
}

impl RouteBindings {
    /// From the flag's values; repeated names add up.
    pub fn parse(values: &[String]) -> Result<Self, String> {
        let mut by_name: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for v in values {
            let (name, routes) = v
                .split_once('=')
                .map(|(n, r)| (n.trim(), r))
                .filter(|(n, _)| !n.is_empty())
                .ok_or_else(|| format!("--audit-route-binding {v:?} is not NAME=ROUTE[,ROUTE...]"))?;
            let routes: BTreeSet<String> =
                routes.split(',').map(str::trim).filter(|r| !r.is_empty()).map(str::to_owned).collect();
            if routes.is_empty() {
                return Err(format!("--audit-route-binding {v:?} names no route; give NAME=ROUTE[,ROUTE...]"));
            }
            by_name.entry(name.to_owned()).or_default().extend(routes);
        }
        Ok(RouteBindings { by_name })
    }

    /// Whether any binding is configured.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Whether a certificate carrying `names` may post to `route`.
    pub fn allows(&self, names: &[String], route: &str) -> bool {
        self.is_empty()
            || names.iter().filter_map(|n| self.by_name.get(n)).any(|r| r.contains("*") || r.contains(route))
    }

    /// The routes `names` may post to, for the refusal's message.
    pub fn routes_of(&self, names: &[String]) -> Vec<String> {
        let all: BTreeSet<&String> = names.iter().filter_map(|n| self.by_name.get(n)).flatten().collect();
        all.into_iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_bound_certificate_posts_only_to_its_routes() {
        let b =
            RouteBindings::parse(&["cluster-a=prod-a,prod-a-audit".into(), "ops=*".into(), "cluster-a=extra".into()])
                .unwrap();
        assert!(b.allows(&names(&["cluster-a"]), "prod-a"));
        assert!(b.allows(&names(&["cluster-a"]), "extra"), "repeated names add up");
        assert!(!b.allows(&names(&["cluster-a"]), "prod-b"));
        assert!(b.allows(&names(&["ops"]), "anything"));
        // Any of the certificate's names (CN, SANs) may grant it.
        assert!(b.allows(&names(&["unbound", "cluster-a"]), "prod-a"));
        assert!(!b.allows(&names(&["unbound"]), "prod-a"), "a certificate no binding names posts nowhere");
        assert!(!b.allows(&[], "prod-a"));
        assert_eq!(b.routes_of(&names(&["cluster-a"])), ["extra", "prod-a", "prod-a-audit"]);
        // None configured: every client of the CA posts everywhere.
        assert!(RouteBindings::parse(&[]).unwrap().allows(&[], "prod-a"));
    }

    #[test]
    fn a_malformed_binding_is_refused_naming_the_shape() {
        for bad in ["cluster-a", "=prod", "cluster-a=", "cluster-a= , "] {
            let e = RouteBindings::parse(&[bad.to_string()]).unwrap_err();
            assert!(e.contains("NAME=ROUTE"), "{bad}: {e}");
        }
    }
}
