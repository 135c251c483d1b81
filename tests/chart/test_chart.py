"""The Helm chart, rendered and linted by the real Helm v4 engine
(helm-python-sdk) and every object validated by kubernetes-validate."""

from __future__ import annotations

import base64
import re
import subprocess
import tempfile
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from conftest import (
    CHART_DIR,
    DOCS,
    KUBE_VERSIONS,
    NAMESPACE,
    RELEASE,
    SCENARIOS,
    notes,
    objects,
    render,
    strip,
)

# Objects of custom resource types: kubernetes-validate ships only the
# built-in API's schemas, so these are the ONLY kinds allowed to lack one.
CRD_KINDS = {
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
}


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_strict_lint_passes(scenario: str, kube_version: str) -> None:
    report = helm.lint(CHART_DIR, SCENARIOS[scenario], strict=True, namespace=NAMESPACE, kube_version=f"v{kube_version}")
    assert report["total_charts_linted"] == 1
    assert report["errors"] == [], report
    # Strict lint: a warning is as bad as an error; info (e.g. no icon) is not.
    assert [m for m in report["messages"] if m["severity"] >= 2] == [], report["messages"]


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_object_validates(chart: helm.Chart, scenario: str, kube_version: str) -> None:
    objs = objects(render(chart, SCENARIOS[scenario]))
    assert objs, "the chart rendered no object"
    for obj in objs:
        key = (obj["apiVersion"], obj["kind"])
        where = f"{obj['kind']}/{obj['metadata']['name']} from {obj['__template__']}"
        try:
            kubernetes_validate.validate(strip(obj), kube_version, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            assert key in CRD_KINDS, f"{where}: no schema for {key} in Kubernetes {kube_version}"
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{where} is invalid for Kubernetes {kube_version}: {e.message} at {list(e.path)}")


def test_memory_transport_with_two_replicas_fails_to_render(chart: helm.Chart) -> None:
    with pytest.raises(helm.HelmRenderError, match=r"memory.*refused with receiver.replicaCount=2"):
        render(chart, {"attribution": {"transport": "memory"}, "receiver": {"replicaCount": 2}})
    # (Helm's lint mode turns `fail` into a log line by design, so the render,
    # which is what an install runs, is the place this is proved.)


def test_memory_transport_with_one_replica_has_no_redis(chart: helm.Chart) -> None:
    objs = objects(render(chart, {"attribution": {"transport": "memory"}}))
    receiver = deployment(objs, "receiver")
    container = receiver["spec"]["template"]["spec"]["containers"][0]
    # `receive` refuses the memory transport; `serve` is the one process.
    assert container["args"][:2] == ["serve", "--socket=/var/run/reverser/reverser.sock"]
    assert "--author-attribution-transport=memory" in container["args"]
    assert {"name": "socket", "mountPath": "/var/run/reverser"} in container["volumeMounts"]
    assert "--replica-count=1" in container["args"]
    assert "env" not in container


@pytest.mark.parametrize(
    "values, message",
    [
        ({"redis": {"existingSecret": ""}}, r"needs redis.existingSecret"),
        ({"injector": {"tls": {"existingSecret": "mine", "caBundle": ""}}}, r"injector.tls.caBundle is empty"),
        ({"injector": {"podSelectorEnabled": False, "namespaceSelectorEnabled": False}}, r"would select no pod"),
    ],
)
def test_contradictory_values_fail_with_a_clear_message(chart: helm.Chart, values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmRenderError, match=message):
        render(chart, values)


@pytest.mark.parametrize(
    "values",
    [
        {"attribution": {"transport": "kafka"}},
        {"attribution": {"grace": "three seconds"}},
        {"attribution": {"adaptiveGraceMisses": 0}},
        {"attribution": {"ttl": "1h30m"}},
        {"receiver": {"replicaCount": 0}},
        {"injector": {"timeoutSeconds": 31}},
        {"injector": {"failurePolicy": "Retry"}},
        {"injector": {"tls": {"caBundle": "not base64!"}}},
        {"receiver": {"replicas": 2}},
        {"serviceMonitr": {"enabled": True}},
    ],
)
def test_schema_refuses_bad_values(chart: helm.Chart, values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema(chart.merge_values(values))


def leaf_paths(values: Any, prefix: str = "") -> list[str]:
    if isinstance(values, dict) and values:
        return [p for k, v in values.items() for p in leaf_paths(v, f"{prefix}.{k}" if prefix else k)]
    return [prefix]


def test_schema_and_docs_cover_every_value(chart: helm.Chart) -> None:
    schema = chart.schema
    assert schema is not None
    doc = (DOCS / "chart.md").read_text()
    paths = leaf_paths(chart.values)
    assert len(paths) > 40
    for path in paths:
        node = named = schema
        for part in path.split("."):
            if part in node.get("properties", {}):
                node = named = node["properties"][part]
            else:
                # A free-form map (resources.requests, say) types its keys
                # through additionalProperties; anything else is undescribed.
                assert isinstance(node.get("additionalProperties"), dict), f"values.schema.json does not describe {path}"
                node = node["additionalProperties"]
        assert "description" in named, f"values.schema.json gives {path} no description"
        assert f"`{path}`" in doc, f"docs/chart.md does not document `{path}`"


def deployment(objs: list[dict[str, Any]], component: str) -> dict[str, Any]:
    return next(
        o for o in objs if o["kind"] == "Deployment" and o["metadata"]["labels"]["app.kubernetes.io/component"] == component
    )


def test_pods_are_restricted_and_least_privileged(chart: helm.Chart) -> None:
    objs = objects(render(chart, {"serviceMonitor": {"enabled": True}}))
    # Neither component calls the Kubernetes API: no Role, no binding, no token.
    assert not [o for o in objs if o["kind"] in {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}]
    for sa in (o for o in objs if o["kind"] == "ServiceAccount"):
        assert sa["automountServiceAccountToken"] is False
    for component in ("injector", "receiver"):
        pod = deployment(objs, component)["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert "hostNetwork" not in pod
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"] == {"drop": ["ALL"]}
            assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
            assert c["readinessProbe"] and c["livenessProbe"]
    budgets = {o["metadata"]["name"] for o in objs if o["kind"] == "PodDisruptionBudget"}
    assert budgets == {f"{RELEASE}-reverser-injector", f"{RELEASE}-reverser-receiver"}


def webhooks(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (config,) = [o for o in objs if o["kind"] == "MutatingWebhookConfiguration"]
    return config["webhooks"]


def test_webhook_selects_opted_in_pods_and_never_kube_system_or_host_network(chart: helm.Chart) -> None:
    hooks = {h["name"]: h for h in webhooks(objects(render(chart, {"injector": {"excludedNamespaces": ["monitoring"]}})))}
    assert set(hooks) == {"pod.inject.reverser.dev", "namespace.inject.reverser.dev"}
    for hook in hooks.values():
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "None"
        assert hook["timeoutSeconds"] == 5
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["rules"] == [
            {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "Namespaced"}
        ]
        excluded = hook["namespaceSelector"]["matchExpressions"][0]
        assert excluded == {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NAMESPACE, "monitoring"]}
        assert hook["matchConditions"][0]["expression"] == "!has(object.spec.hostNetwork) || !object.spec.hostNetwork"
        assert hook["clientConfig"]["service"]["path"] == "/inject"
    # The two webhooks partition the pods: one by pod label, one by namespace
    # label for pods that did not decide for themselves, so none is patched twice.
    assert hooks["pod.inject.reverser.dev"]["objectSelector"]["matchExpressions"] == [
        {"key": "reverser.dev/inject", "operator": "In", "values": ["enabled"]}
    ]
    assert hooks["namespace.inject.reverser.dev"]["objectSelector"]["matchExpressions"] == [
        {"key": "reverser.dev/inject", "operator": "DoesNotExist"}
    ]
    assert {"key": "reverser.dev/inject", "operator": "In", "values": ["enabled"]} in hooks["namespace.inject.reverser.dev"][
        "namespaceSelector"
    ]["matchExpressions"]


def openssl(*args: str, stdin: bytes) -> str:
    return subprocess.run(["openssl", *args], input=stdin, capture_output=True, check=True).stdout.decode()


@pytest.mark.parametrize("component", ["injector", "receiver"])
def test_generated_certificates_chain_to_the_advertised_ca(chart: helm.Chart, component: str) -> None:
    objs = objects(render(chart, {"receiver": {"service": {"clusterIP": "10.96.0.250"}}}))
    name = f"{RELEASE}-reverser-{component}"
    (secret,) = [o for o in objs if o["kind"] == "Secret" and o["metadata"]["name"] == f"{name}-tls"]
    ca = base64.b64decode(secret["data"]["ca.crt"])
    cert = base64.b64decode(secret["data"]["tls.crt"])
    text = openssl("x509", "-noout", "-text", stdin=cert)
    assert f"DNS:{name}.{NAMESPACE}.svc" in text
    if component == "receiver":
        assert "IP Address:10.96.0.250" in text
    else:
        for hook in webhooks(objs):
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca
    with tempfile.NamedTemporaryFile(suffix=".pem") as ca_file:
        ca_file.write(ca)
        ca_file.flush()
        assert openssl("verify", "-CAfile", ca_file.name, stdin=cert).strip() == "stdin: OK"
    # The deployment mounts exactly that Secret.
    volumes = deployment(objs, component)["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": f"{name}-tls"}} in volumes


def test_cert_manager_replaces_generated_secrets(chart: helm.Chart) -> None:
    objs = objects(render(chart, {"certManager": {"enabled": True}}))
    assert not [o for o in objs if o["kind"] == "Secret"]
    certs = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Certificate"}
    assert set(certs) == {f"{RELEASE}-reverser-ca", f"{RELEASE}-reverser-injector", f"{RELEASE}-reverser-receiver"}
    (config,) = [o for o in objs if o["kind"] == "MutatingWebhookConfiguration"]
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{RELEASE}-reverser-injector"
    for hook in config["webhooks"]:
        assert "caBundle" not in hook["clientConfig"]


def test_receiver_wiring(chart: helm.Chart) -> None:
    objs = objects(render(chart, {"receiver": {"replicaCount": 3}, "redis": {"existingSecret": "my-redis", "urlKey": "u"}}))
    spec = deployment(objs, "receiver")["spec"]
    assert spec["replicas"] == 3
    container = spec["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[0] == "receive"
    for flag in (
        "--replica-count=3",
        "--author-attribution-transport=redis",
        "--author-attribution-grace=3s",
        "--author-attribution-ttl=10m",
        "--author-attribution-collection-window=30s",
        "--tls-cert=/etc/reverser/tls/tls.crt",
        "--audit-client-ca=/etc/reverser/audit-client-ca/ca.crt",
    ):
        assert flag in args
    assert container["env"] == [
        {"name": "REVERSER_REDIS_URL", "valueFrom": {"secretKeyRef": {"name": "my-redis", "key": "u"}}}
    ]
    volumes = spec["template"]["spec"]["volumes"]
    assert {"name": "audit-client-ca", "secret": {"secretName": "reverser-audit-client-ca"}} in volumes


def test_adaptive_grace_is_off_unless_a_run_of_misses_is_set(chart: helm.Chart) -> None:
    args = deployment(objects(render(chart, {})), "receiver")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [a for a in args if "adaptive-grace" in a]
    objs = objects(render(chart, {**SCENARIOS["injector-ignore-plain-container"], "attribution": {"adaptiveGraceMisses": 20}}))
    args = deployment(objs, "injector")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--sidecar-arg=--author-attribution-adaptive-grace" in args
    assert "--sidecar-arg=--author-attribution-adaptive-grace-misses=20" in args


def test_injector_hands_the_sidecar_the_same_attribution_flags(chart: helm.Chart) -> None:
    objs = objects(render(chart, SCENARIOS["injector-ignore-plain-container"]))
    args = deployment(objs, "injector")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "inject-webhook"
    assert "--plain-container" in args
    assert "--watcher-container=watcher" in args
    assert "--sidecar-arg=--author-attribution-grace=3s" in args
    assert not [a for a in args if "audit-listen" in a], "the injection rule sets --audit-listen itself"
    assert "--sidecar-arg=--metrics-listen=0.0.0.0:9091" in args
    assert args[-1] == "--sidecar-arg=--socket=/var/run/reverser/reverser.sock"
    assert "--sidecar-redis-url-secret=reverser-redis/url" in args
    for ns in ("kube-system", NAMESPACE, "monitoring", "cert-manager"):
        assert f"--exclude-namespace={ns}" in args
    assert "--require-opt-in-label" not in args
    # With only the pod-label webhook, the server insists on the label too.
    pod_only = objects(render(chart, SCENARIOS["injector-pod-label-only"]))
    assert "--require-opt-in-label" in deployment(pod_only, "injector")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {h["failurePolicy"] for h in webhooks(objs)} == {"Ignore"}


def test_notes_print_the_route_why_asks_by_default(chart: helm.Chart) -> None:
    # `default` everywhere: serve's printed curl, `kubectl reverser why
    # --route`, and the URL the chart tells the API server to post to.
    text = notes(render(chart, {"receiver": {"service": {"clusterIP": "10.96.0.250"}}}))
    assert "https://10.96.0.250:443/audit-webhook/default" in text, text
    assert "<route>" in notes(render(chart, {"receiver": {"auditRoute": ""}}))


def test_notes_print_the_audit_kubeconfig_and_the_batch_advice(chart: helm.Chart) -> None:
    text = notes(render(chart, {"receiver": {"service": {"clusterIP": "10.96.0.250"}, "auditRoute": "prod-eu-1"}}))
    match = re.search(r"^apiVersion: v1\nkind: Config\n.*?^current-context: [^\n]*$", text, re.S | re.M)
    assert match, text
    kubeconfig = yaml.safe_load(match.group(0))
    cluster = kubeconfig["clusters"][0]["cluster"]
    assert cluster["server"] == "https://10.96.0.250:443/audit-webhook/prod-eu-1"
    assert kubeconfig["users"][0]["user"]["client-certificate"]
    assert kubeconfig["current-context"] == kubeconfig["contexts"][0]["name"]
    assert "--audit-webhook-batch-max-wait=1s" in text
    assert "up to 30s by default" in text
    assert "3s attribution" in text
    assert f"secret {RELEASE}-reverser-receiver-tls" in text
    # Memory transport: the notes say so, and print no Redis instructions.
    text = notes(render(chart, {"attribution": {"transport": "memory"}}))
    assert "exactly one receiver replica" in text and "REDIS" not in text


def test_notes_warn_while_injected_sidecars_have_no_redis_url(chart: helm.Chart) -> None:
    assert "injected sidecars have no Redis URL" in notes(render(chart, {}))
    with_url = {"injector": {"sidecarArgs": ["--author-attribution-grace=4s", "--redis-url=redis://redis.data:6379"]}}
    assert "injected sidecars have no Redis URL" not in notes(render(chart, with_url))
    assert "injected sidecars have no Redis URL" not in notes(render(chart, {"injector": {"enabled": False}}))
    two_args = {"injector": {"sidecarArgs": ["--redis-url", "redis://redis.data:6379"]}}
    assert "injected sidecars have no Redis URL" not in notes(render(chart, two_args))
    assert "injected sidecars have no Redis URL" in notes(render(chart, {"injector": {"sidecarArgs": ["--redis-url-file=x"]}}))
    from_secret = {"injector": {"redisUrlSecret": {"name": "reverser-redis"}}}
    assert "injected sidecars have no Redis URL" not in notes(render(chart, from_secret))


def test_injected_sidecars_take_the_redis_url_from_a_secret(chart: helm.Chart) -> None:
    # The URL carries the password: it reaches sidecars through secretKeyRef,
    # never as an argument in a pod spec.
    values = {"injector": {"redisUrlSecret": {"name": "reverser-redis", "key": "uri"}}}
    (deploy,) = [o for o in objects(render(chart, values)) if o["kind"] == "Deployment" and "injector" in o["metadata"]["name"]]
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--sidecar-redis-url-secret=reverser-redis/uri" in args
    (deploy,) = [o for o in objects(render(chart, {})) if o["kind"] == "Deployment" and "injector" in o["metadata"]["name"]]
    assert not any(a.startswith("--sidecar-redis-url-secret") for a in deploy["spec"]["template"]["spec"]["containers"][0]["args"])
