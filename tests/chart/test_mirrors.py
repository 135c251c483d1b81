"""The chart's mirrors: one Deployment per GitTarget (watcher and sidecar
sharing the socket), a ServiceAccount and exactly the RBAC the pair needs.
Rendered by the real Helm v4 engine; linting and kubernetes-validate run on
the `mirrors` scenarios in test_chart.py. test_binary.py runs the rendered
containers against the real binary and checks every request they make
against this RBAC."""

from __future__ import annotations

import copy
import re
from typing import Any

import helm_python as helm
import pytest

from conftest import DOCS, MINIMAL_MIRROR, MIRROR, NAMESPACE, RELEASE, SCENARIOS, notes, objects, render

RBAC_KINDS = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def mirror_objects(objs: list[dict[str, Any]], target: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["metadata"].get("annotations", {}).get("reverser.dev/git-target") == target]


def rules_of(obj: dict[str, Any]) -> set[tuple]:
    """A Role's rules as comparable tuples (order within a rule is not meaning)."""
    return {
        (tuple(sorted(r["apiGroups"])), tuple(sorted(r["resources"])), tuple(sorted(r.get("resourceNames", []))), tuple(sorted(r["verbs"])))
        for r in obj["rules"]
    }


def only(objs: list[dict[str, Any]], kind: str, namespace: str | None = None, suffix: str = "") -> dict[str, Any]:
    (found,) = [
        o for o in objs if o["kind"] == kind and o["metadata"].get("namespace") == namespace and o["metadata"]["name"].endswith(suffix)
    ]
    return found


def rbac(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] in RBAC_KINDS]


def status_rules(target: str) -> set[tuple[tuple[str, ...], ...]]:
    """What the watcher's status reports need: its own GitTarget's status, its
    GitProvider's, WatchRules' and CommitRequests' (the chart does not know
    their names), the CommitRequests it serves, and Events (Kubernetes cannot
    authorize create by name)."""
    return {
        (("configbutler.ai",), ("gittargets/status",), (target,), ("patch",)),
        (("configbutler.ai",), ("gitproviders/status",), (), ("patch",)),
        (("configbutler.ai",), ("watchrules/status",), (), ("patch",)),
        (("configbutler.ai",), ("commitrequests",), (), ("list", "watch")),
        (("configbutler.ai",), ("commitrequests/status",), (), ("patch",)),
        (("",), ("events",), (), ("create",)),
    }


def test_the_full_mirror_gets_exactly_the_rbac_it_needs(chart: helm.Chart) -> None:
    objs = mirror_objects(objects(render(chart, {"mirrors": [MIRROR]})), "mirror/prod")
    name = only(objs, "Deployment", NAMESPACE)["metadata"]["name"]
    # Exactly these RBAC objects, no more.
    assert sorted((o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in rbac(objs)) == sorted([
        ("Role", "mirror", name), ("RoleBinding", "mirror", name),
        ("ClusterRole", None, name), ("ClusterRoleBinding", None, name),
        ("Role", "shop", f"{name}-watch"), ("RoleBinding", "shop", f"{name}-watch"),
        # The Events of ClusterWatchRules live in "default".
        ("Role", "default", f"{name}-event"), ("RoleBinding", "default", f"{name}-event"),
    ])
    assert rules_of(only(objs, "Role", "default")) == {(("",), ("events",), (), ("create",))}
    assert rules_of(only(objs, "Role", "mirror")) == {
        (("configbutler.ai",), ("gittargets",), ("prod",), ("get", "list", "watch")),
        (("configbutler.ai",), ("gitproviders",), (), ("get", "list", "watch")),
        (("configbutler.ai",), ("watchrules",), (), ("list", "watch")),
        (("",), ("secrets",), ("git-creds", "git-signing"), ("get", "list", "watch")),
        (("",), ("configmaps",), ("ssh-known-hosts",), ("get",)),
        # generate: the sidecar writes the key it generated.
        (("",), ("secrets",), ("git-signing",), ("patch",)),
        # Kubernetes cannot authorize create by name.
        (("",), ("secrets",), (), ("create",)),
        *status_rules("prod"),
    }
    assert rules_of(only(objs, "ClusterRole")) == {
        (("configbutler.ai",), ("clusterproviders",), (), ("get",)),
        (("configbutler.ai",), ("clusterproviders/status",), (), ("patch",)),
        (("configbutler.ai",), ("clusterwatchrules",), (), ("list", "watch")),
        (("configbutler.ai",), ("clusterwatchrules/status",), (), ("patch",)),
        (("",), ("namespaces",), (), ("list",)),
        (("example.com",), ("widgets",), (), ("list", "watch")),
    }
    assert rules_of(only(objs, "Role", "shop")) == {(("",), ("configmaps",), (), ("list", "watch"))}
    # Each binding gives its own role to the mirror's account, nothing else.
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]
    for binding, role in (
        (only(objs, "RoleBinding", "mirror"), only(objs, "Role", "mirror")),
        (only(objs, "ClusterRoleBinding"), only(objs, "ClusterRole")),
        (only(objs, "RoleBinding", "shop"), only(objs, "Role", "shop")),
        (only(objs, "RoleBinding", "default"), only(objs, "Role", "default")),
    ):
        assert binding["subjects"] == subject
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"], "name": role["metadata"]["name"]}
    assert only(objs, "ServiceAccount", NAMESPACE)["metadata"]["name"] == name


def test_the_minimal_mirror_reads_no_secret_and_lists_no_namespace(chart: helm.Chart) -> None:
    objs = mirror_objects(objects(render(chart, {"mirrors": [MINIMAL_MIRROR]})), "team-a/audit.main")
    assert rules_of(only(objs, "Role", "team-a", "-watch")) == {(("apps",), ("deployments", "statefulsets"), (), ("list", "watch"))}
    assert rules_of(only(objs, "Role", "team-b", "-watch")) == {(("apps",), ("deployments", "statefulsets"), (), ("list", "watch"))}
    (config_role,) = [o for o in objs if o["kind"] == "Role" and not o["metadata"]["name"].endswith(("-watch", "-event"))]
    assert rules_of(config_role) == {
        (("configbutler.ai",), ("gittargets",), ("audit.main",), ("get", "list", "watch")),
        (("configbutler.ai",), ("gitproviders",), (), ("get", "list", "watch")),
        (("configbutler.ai",), ("watchrules",), (), ("list", "watch")),
        *status_rules("audit.main"),
    }
    assert rules_of(only(objs, "ClusterRole")) == {
        (("configbutler.ai",), ("clusterproviders",), (), ("get",)),
        (("configbutler.ai",), ("clusterproviders/status",), (), ("patch",)),
        (("configbutler.ai",), ("clusterwatchrules",), (), ("list", "watch")),
        (("configbutler.ai",), ("clusterwatchrules/status",), (), ("patch",)),
    }


def test_a_remote_source_reads_its_kubeconfig_secret_and_watches_nothing_here(chart: helm.Chart) -> None:
    """sourceCluster: the watcher reads the ClusterProvider's kubeconfig Secret in
    the release namespace (gitops-reverser's operator namespace) and lists its
    types in the remote cluster, so this cluster grants no watch."""
    mirror = {**MINIMAL_MIRROR, "sourceCluster": {"kubeConfigSecret": "prod-eu-kubeconfig", "insecureKubeconfigTLS": True}}
    objs = mirror_objects(objects(render(chart, {"mirrors": [mirror]})), "team-a/audit.main")
    assert not [o for o in objs if o["metadata"]["name"].endswith("-watch")], "no watch RBAC in the control cluster"
    assert rules_of(only(objs, "Role", NAMESPACE, "-kubeconfig")) == {(("",), ("secrets",), ("prod-eu-kubeconfig",), ("get",))}
    binding = only(objs, "RoleBinding", NAMESPACE, "-kubeconfig")
    assert binding["roleRef"]["name"].endswith("-kubeconfig")
    (deployment,) = [o for o in objs if o["kind"] == "Deployment"]
    (watcher,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "watcher"]
    assert f"--operator-namespace={NAMESPACE}" in watcher["args"]
    assert "--insecure-kubeconfig-tls" in watcher["args"]
    assert "--insecure-kubeconfig-exec" not in watcher["args"]


def test_known_hosts_from_a_secret_and_signing_without_generate_are_reads_only(chart: helm.Chart) -> None:
    mirror = {**MINIMAL_MIRROR, "secrets": {"credentials": "git-ssh", "signing": {"name": "git-signing"},
                                             "knownHosts": {"kind": "Secret", "name": "git-ssh"}}}
    objs = mirror_objects(objects(render(chart, {"mirrors": [mirror]})), "team-a/audit.main")
    (config_role,) = [o for o in objs if o["kind"] == "Role" and not o["metadata"]["name"].endswith(("-watch", "-event"))]
    secret_rules = {r for r in rules_of(config_role) if r[1] in (("secrets",), ("configmaps",))}
    # One Secret named twice is granted once; no write, no ConfigMap.
    assert secret_rules == {(("",), ("secrets",), ("git-signing", "git-ssh"), ("get", "list", "watch"))}


def test_encryption_reads_its_key_secret_and_generate_may_write_it(chart: helm.Chart) -> None:
    mirror = {**MINIMAL_MIRROR, "additionalSensitiveResources": ["credentials", "example.com/tokens"],
              "secrets": {"encryption": {"name": "sops-age", "generate": True}}}
    objs = mirror_objects(objects(render(chart, {"mirrors": [mirror]})), "team-a/audit.main")
    (config_role,) = [o for o in objs if o["kind"] == "Role" and not o["metadata"]["name"].endswith(("-watch", "-event"))]
    secret_rules = {r for r in rules_of(config_role) if r[1] == ("secrets",)}
    assert secret_rules == {
        (("",), ("secrets",), ("sops-age",), ("get", "list", "watch")),
        (("",), ("secrets",), ("sops-age",), ("patch",)),
        (("",), ("secrets",), (), ("create",)),
    }
    (deployment,) = [o for o in objs if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (sidecar,) = [c for c in pod["initContainers"] + pod["containers"] if c["args"][0] == "serve"]
    assert "--additional-sensitive-resources=credentials,example.com/tokens" in sidecar["args"]
    # Without generate: a read only.
    mirror["secrets"] = {"encryption": {"name": "sops-age"}}
    objs = mirror_objects(objects(render(chart, {"mirrors": [mirror]})), "team-a/audit.main")
    (config_role,) = [o for o in objs if o["kind"] == "Role" and not o["metadata"]["name"].endswith(("-watch", "-event"))]
    assert {r for r in rules_of(config_role) if r[1] == ("secrets",)} == {(("",), ("secrets",), ("sops-age",), ("get", "list", "watch"))}


def test_no_rbac_rule_of_any_scenario_has_a_wildcard(chart: helm.Chart) -> None:
    for scenario, values in SCENARIOS.items():
        for o in rbac(objects(render(chart, values))):
            for rule in o.get("rules", []):
                for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                    assert "*" not in rule.get(field, []), f"{scenario}: {o['kind']}/{o['metadata']['name']} {rule}"


def test_the_deployment_runs_watcher_and_sidecar_on_one_socket(chart: helm.Chart) -> None:
    objs = mirror_objects(objects(render(chart, {"mirrors": [MIRROR]})), "mirror/prod")
    deploy = only(objs, "Deployment", NAMESPACE)
    name = deploy["metadata"]["name"]
    spec = deploy["spec"]
    # One writer per branch, during rollouts too.
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    assert spec["selector"]["matchLabels"]["reverser.dev/mirror"] == name
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == name
    assert pod["automountServiceAccountToken"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    (sidecar,) = pod["initContainers"]
    (watcher,) = pod["containers"]
    assert sidecar["name"] == "reverser-sidecar" and sidecar["restartPolicy"] == "Always"
    assert sidecar["args"][:5] == ["serve", "--socket", "/var/run/reverser/reverser.sock", "--socket-mode=666", "--audit-listen=off"]
    for flag in ("--git-target=mirror/prod", "--git-repo=/var/lib/reverser/clone", "--metrics-listen=0.0.0.0:9090",
                 "--author-attribution-transport=redis", "--author-attribution-grace=3s"):
        assert flag in sidecar["args"]
    assert sidecar["env"] == [{"name": "REVERSER_REDIS_URL", "valueFrom": {"secretKeyRef": {"name": "reverser-redis", "key": "url"}}}]
    assert watcher["args"] == [
        "watch",
        "--git-target=mirror/prod",
        "--socket=/var/run/reverser/reverser.sock",
        "--metrics-listen=0.0.0.0:9091",
        "--route=prod-eu-1",
        "--exclude-user=system:serviceaccount:flux-system:kustomize-controller",
        "--exclude-field-manager=kustomize-controller",
    ]
    assert watcher["env"] == [{"name": "REVERSER_SOCKET", "value": "/var/run/reverser/reverser.sock"}]
    # The socket directory is one emptyDir in both; the clone is the sidecar's alone.
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["reverser-socket"] == {"name": "reverser-socket", "emptyDir": {}}
    assert volumes["git-repo"] == {"name": "git-repo", "emptyDir": {}}
    assert {"name": "reverser-socket", "mountPath": "/var/run/reverser", "readOnly": True} in watcher["volumeMounts"]
    assert {"name": "reverser-socket", "mountPath": "/var/run/reverser"} in sidecar["volumeMounts"]
    assert {"name": "git-repo", "mountPath": "/var/lib/reverser"} in sidecar["volumeMounts"]
    assert not [m for m in watcher["volumeMounts"] if m["name"] == "git-repo"]
    for c in (sidecar, watcher):
        sc = c["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
        port = c["ports"][0]
        assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
        assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
        listen = next(a for a in c["args"] if a.startswith("--metrics-listen="))
        assert listen == f"--metrics-listen=0.0.0.0:{port['containerPort']}"


def test_attribution_off_runs_configured_author_mirrors_with_no_receiver_and_no_redis(chart: helm.Chart) -> None:
    # gitops-reverser's attribution.enabled=false (its chart README, "configured-author"):
    # the committer authors every commit; no audit ingress, no Redis needed.
    for cert_manager in (False, True):
        values = {"mirrors": [MIRROR], "attribution": {"enabled": False}, "redis": {"existingSecret": ""},
                  "certManager": {"enabled": cert_manager}}
        objs = objects(render(chart, values))
        assert not [o for o in objs if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "receiver"]
        deploy = only(mirror_objects(objs, "mirror/prod"), "Deployment", NAMESPACE)
        (sidecar,) = deploy["spec"]["template"]["spec"]["initContainers"]
        assert "--author-attribution=false" in sidecar["args"]
        assert not [a for a in sidecar["args"] if a.startswith("--author-attribution-")], sidecar["args"]
        assert "env" not in sidecar
    assert "ATTRIBUTION OFF" in notes(render(chart, {"mirrors": [MIRROR], "attribution": {"enabled": False}}))


def test_a_mirrors_own_values_replace_the_defaults(chart: helm.Chart) -> None:
    objs = objects(render(chart, SCENARIOS["mirrors"]))
    full = only(mirror_objects(objs, "mirror/prod"), "Deployment", NAMESPACE)["spec"]["template"]
    own = only(mirror_objects(objs, "team-a/audit.main"), "Deployment", NAMESPACE)["spec"]["template"]
    assert {"name": "git-repo", "emptyDir": {}} in full["spec"]["volumes"]
    assert {"name": "git-repo", "persistentVolumeClaim": {"claimName": "mirror-clone"}} in own["spec"]["volumes"]
    assert own["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}}
    assert own["spec"]["initContainers"][0]["resources"] == {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
    assert own["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"} and "nodeSelector" not in full["spec"]
    assert own["spec"]["tolerations"][0]["key"] == "dedicated"
    assert full["spec"]["affinity"] == own["spec"]["affinity"] == SCENARIOS["mirrors"]["mirrorDefaults"]["affinity"]
    assert own["metadata"]["labels"]["team"] == "platform"
    assert own["metadata"]["annotations"]["example.com/team"] == "platform"
    # Without routes or exclusions, the watcher gets no such flag.
    assert not [a for a in own["spec"]["containers"][0]["args"] if a.startswith(("--route", "--exclude"))]


def names_of(chart: helm.Chart, values: dict[str, Any]) -> set[str]:
    return {o["metadata"]["name"] for o in objects(render(chart, values)) if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "mirror"}


def test_names_are_dns_labels_unique_per_target_and_stable(chart: helm.Chart) -> None:
    def mirror(ns: str, name: str) -> dict[str, Any]:
        return {"gitTarget": {"namespace": ns, "name": name}, "watch": [{"apiGroups": [""], "resources": ["configmaps"], "namespaces": [ns]}]}

    long_ns = "n" * 63
    targets = [("a-b", "c"), ("a", "b-c"), ("a", "b.c"), (long_ns, "x" * 200), (long_ns, "x" * 199 + "y"), ("mirror", "prod")]
    values = {"mirrors": [mirror(ns, n) for ns, n in targets]}
    objs = objects(render(chart, values))
    deployments = {
        o["metadata"]["annotations"]["reverser.dev/git-target"]: o["metadata"]["name"]
        for o in objs
        if o["kind"] == "Deployment" and "reverser.dev/git-target" in o["metadata"].get("annotations", {})
    }
    assert len(deployments) == len(targets)
    assert len(set(deployments.values())) == len(targets), deployments
    for o in objs:
        if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "mirror":
            n = o["metadata"]["name"]
            assert len(n) <= 63 and DNS_LABEL.match(n), n
    assert deployments["mirror/prod"].startswith(f"{RELEASE}-reverser-mirror-mirror-prod-")
    # A name depends on its target only: adding a mirror renames no other.
    alone = names_of(chart, {"mirrors": [mirror("mirror", "prod")]})
    assert deployments["mirror/prod"] in alone


def test_two_mirrors_of_one_git_target_fail_to_render(chart: helm.Chart) -> None:
    again = {**MINIMAL_MIRROR, "watch": [{"apiGroups": [""], "resources": ["configmaps"]}]}
    with pytest.raises(helm.HelmRenderError, match=r"mirrors\[1\] mirrors GitTarget team-a/audit.main again"):
        render(chart, {"mirrors": [MINIMAL_MIRROR, again]})


def without(d: dict[str, Any], *path: str) -> dict[str, Any]:
    d = copy.deepcopy(d)
    node = d
    for p in path[:-1]:
        node = node[p]
    del node[path[-1]]
    return d


@pytest.mark.parametrize(
    "mirror",
    [
        without(MIRROR, "gitTarget", "name"),
        without(MIRROR, "gitTarget", "namespace"),
        without(MIRROR, "gitTarget"),
        without(MIRROR, "watch"),
        {**MIRROR, "watch": []},
        {**MIRROR, "watch": [{"apiGroups": ["*"], "resources": ["configmaps"]}]},
        {**MIRROR, "watch": [{"apiGroups": [""], "resources": ["*"]}]},
        {**MIRROR, "watch": [{"apiGroups": [""], "resources": ["pods/log"]}]},
        {**MIRROR, "watch": [{"apiGroups": [""], "resources": ["configmaps"], "namespaces": ["Shop"]}]},
        {**MIRROR, "watch": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]},
        {**MIRROR, "gitTarget": {"namespace": "mirror", "name": "Prod"}},
        {**MIRROR, "secrets": {"knownHosts": {"kind": "Pod", "name": "x"}}},
        {**MIRROR, "secrets": {"signing": {"generate": True}}},
        {**MIRROR, "secret": {"credentials": "x"}},
        {**MIRROR, "route": "a/b"},
        {**MIRROR, "gitRepoVolume": {}},
    ],
)
def test_schema_refuses_bad_mirrors(chart: helm.Chart, mirror: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema(chart.merge_values({"mirrors": [mirror]}))


def test_schema_accepts_the_scenarios_mirrors(chart: helm.Chart) -> None:
    # The refusals above are not the schema refusing every mirror.
    chart.validate_schema(chart.merge_values(SCENARIOS["mirrors"]))


def test_notes_list_the_mirrors_and_warn_without_redis(chart: helm.Chart) -> None:
    rendered = render(chart, {"mirrors": [MIRROR]})
    name = only(mirror_objects(objects(rendered), "mirror/prod"), "Deployment", NAMESPACE)["metadata"]["name"]
    text = notes(rendered)
    assert f"mirror/prod: deployment/{name} in {NAMESPACE}" in text
    assert "mirrors have no attribution" not in text
    assert "mirrors have no attribution" in notes(render(chart, SCENARIOS["mirrors-memory-transport"]))
    assert "MIRRORS" not in notes(render(chart, {}))


def item_paths(node: dict[str, Any], prefix: str) -> list[str]:
    """Documented paths of a mirror entry: leaves, and container resources
    as a whole (their requests and limits are Kubernetes', not ours)."""
    if node.get("type") == "array" and "properties" in node.get("items", {}):
        return item_paths(node["items"], prefix + "[]")
    props = node.get("properties", {})
    if not props or "requests" in props:
        return [prefix]
    return [p for k, v in props.items() for p in item_paths(v, f"{prefix}.{k}")]


def test_docs_describe_every_field_of_a_mirror(chart: helm.Chart) -> None:
    doc = (DOCS / "chart.md").read_text()
    paths = item_paths(chart.schema["properties"]["mirrors"], "mirrors")
    assert len(paths) > 15, paths
    for path in paths:
        assert f"`{path}`" in doc, f"docs/chart.md does not document `{path}`"


def test_the_controller_serves_every_gittarget_but_the_static_ones(chart: helm.Chart) -> None:
    """controller.enabled: `reverser-sidecar controller` with the chart's image,
    the release namespace, the mirrors' attribution flags and Redis Secret, and
    the static mirrors skipped; its ClusterRole can apply and remove a mirror's
    objects and grant what the mirror's rules name (bind, escalate)."""
    objs = objects(render(chart, {"controller": {"enabled": True}, "mirrors": [MINIMAL_MIRROR]}))
    (deployment,) = [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["labels"].get("app.kubernetes.io/component") == "controller"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[0] == "controller"
    assert f"--operator-namespace={NAMESPACE}" in args
    assert "--skip-git-target=team-a/audit.main" in args
    assert "--redis-url-secret=reverser-redis:url" in args
    assert "--sidecar-arg=--author-attribution-grace=3s" in args
    assert any(a.startswith("--image=") and a == f"--image={container['image']}" for a in args)
    assert deployment["spec"]["replicas"] == 1
    role = only(objs, "ClusterRole", None, "-controller")
    rules = rules_of(role)
    assert (("rbac.authorization.k8s.io",), ("clusterroles", "roles"), (), ("bind", "escalate")) in rules
    assert (("configbutler.ai",), ("gittargets",), (), ("get", "list", "patch", "watch")) in rules
    assert (("apps",), ("deployments",), (), ("create", "delete", "list", "patch", "watch")) in rules
    assert not any("*" in x for r in rules for field in r for x in field)
    # Off by default: nothing of it renders.
    assert not [o for o in objects(render(chart, {})) if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "controller"]
