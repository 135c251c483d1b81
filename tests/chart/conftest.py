"""Shared fixtures of the chart tests: the chart, rendering, and the value sets
every documented option is exercised with."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART_DIR = ROOT / "charts" / "reverser"
DOCS = ROOT / "docs"
RELEASE = "rev"
NAMESPACE = "reverser"

# The binaries the cargo tests built (scripts/test names them).
TARGET = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", pathlib.Path.home() / ".cache" / "reverser-target"))
SIDECAR_BINARY = pathlib.Path(os.environ.get("REVERSER_SIDECAR_BIN", TARGET / "debug" / "reverser-sidecar"))
PLUGIN_BINARY = pathlib.Path(os.environ.get("KUBECTL_REVERSER_BIN", TARGET / "debug" / "kubectl-reverser"))


def require_sidecar_binary() -> None:
    """Skips the calling module when the sidecar is not built, unless
    REVERSER_SIDECAR_BIN names it (then its absence is an error)."""
    if SIDECAR_BINARY.is_file():
        return
    if "REVERSER_SIDECAR_BIN" in os.environ:
        raise RuntimeError(f"REVERSER_SIDECAR_BIN={SIDECAR_BINARY} does not exist: build it with cargo build -p reverser-sidecar")
    pytest.skip(f"SKIP: {SIDECAR_BINARY} is not built (cargo build -p reverser-sidecar); these tests run it", allow_module_level=True)

# Kubernetes 1.29 is the chart's floor (Chart.yaml kubeVersion); the newest is
# whatever kubernetes-validate ships, asked of the package rather than guessed.
KUBE_VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]

# A CA bundle for the "bring your own Secret" option: any base64 PEM will do
# for rendering; the test of generated certificates checks real ones.
_FAKE_BUNDLE = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="

# A mirror with every option that changes its RBAC or its args: a namespaced
# and a cluster-wide type, a namespace selector, credentials, a generated
# signing key and known_hosts from a ConfigMap.
MIRROR: dict[str, Any] = {
    "gitTarget": {"namespace": "mirror", "name": "prod"},
    "watch": [
        {"apiGroups": [""], "resources": ["configmaps"], "namespaces": ["shop"]},
        {"apiGroups": ["example.com"], "resources": ["widgets"]},
    ],
    "namespaceSelectors": True,
    "route": "prod-eu-1",
    "excludeUsers": ["system:serviceaccount:flux-system:kustomize-controller"],
    "excludeFieldManagers": ["kustomize-controller"],
    "secrets": {
        "credentials": "git-creds",
        "signing": {"name": "git-signing", "generate": True},
        "knownHosts": {"kind": "ConfigMap", "name": "ssh-known-hosts"},
    },
}

# The least a mirror can say: a GitTarget and one type.
MINIMAL_MIRROR: dict[str, Any] = {
    "gitTarget": {"namespace": "team-a", "name": "audit.main"},
    "watch": [{"apiGroups": ["apps"], "resources": ["deployments", "statefulsets"], "namespaces": ["team-a", "team-b"]}],
}

# One value set per documented option (docs/chart.md), plus the defaults.
SCENARIOS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "memory-transport-one-replica": {"attribution": {"transport": "memory"}, "receiver": {"replicaCount": 1}},
    "redis-three-replicas": {
        "receiver": {"replicaCount": 3},
        "redis": {"existingSecret": "my-redis", "urlKey": "REDIS_URL"},
    },
    "attribution-tuned": {
        "attribution": {
            "grace": "5s",
            "ttl": "15m",
            "collectionWindow": "45s",
            "maxFacts": 200000,
            "maxFactsPerType": 50000,
            "auditRouteAnnotationKey": "example.com/audit-route",
        }
    },
    "cert-manager-self-signed": {"certManager": {"enabled": True}},
    "cert-manager-cluster-issuer": {
        "certManager": {
            "enabled": True,
            "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"},
            "duration": "2160h",
            "renewBefore": "360h",
        }
    },
    "existing-secrets": {
        "injector": {"tls": {"existingSecret": "injector-tls", "caBundle": _FAKE_BUNDLE}},
        "receiver": {"tls": {"existingSecret": "receiver-tls"}, "auditClientCA": {"existingSecret": "apiserver-audit-ca", "key": "ca.pem"}},
    },
    "receiver-fixed-cluster-ip": {"receiver": {"service": {"clusterIP": "10.96.0.250", "port": 8443}, "auditRoute": "prod-eu-1"}},
    "receiver-nodeport": {"receiver": {"service": {"type": "NodePort"}}},
    "injector-ignore-plain-container": {
        "injector": {
            "failurePolicy": "Ignore",
            "timeoutSeconds": 10,
            "reinvocationPolicy": "IfNeeded",
            "plainContainer": True,
            "watcherContainer": "watcher",
            "sidecarArgs": ["--socket=/var/run/reverser/reverser.sock"],
            "redisUrlSecret": {"name": "reverser-redis", "key": "url"},
            "excludedNamespaces": ["monitoring", "cert-manager"],
        }
    },
    "injector-pod-label-only": {"injector": {"namespaceSelectorEnabled": False}},
    "injector-namespace-label-only": {"injector": {"podSelectorEnabled": False}},
    "injector-disabled": {"injector": {"enabled": False}},
    "controller": {"controller": {"enabled": True, "podLabels": {"team": "platform"}, "podAnnotations": {"a": "b"}}},
    "receiver-disabled": {"receiver": {"enabled": False}},
    "no-disruption-budgets": {"injector": {"podDisruptionBudget": {"enabled": False}}, "receiver": {"podDisruptionBudget": {"enabled": False}}},
    "service-monitor": {"serviceMonitor": {"enabled": True, "interval": "15s", "scrapeTimeout": "5s", "labels": {"release": "prometheus"}}},
    "scheduling-and-image": {
        "image": {"repository": "registry.example/reverser-sidecar", "tag": "1.2.3", "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "regcred"}],
        "nameOverride": "rv",
        "injector": {
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                    "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "injector"}}}}]}},
            "podAnnotations": {"example.com/team": "platform"},
            "podLabels": {"team": "platform"},
            "resources": {"requests": {"cpu": "20m", "memory": "48Mi"}, "limits": {"memory": "96Mi", "cpu": "1"}},
        },
        "receiver": {
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "podAnnotations": {"example.com/team": "platform"},
            "podLabels": {"team": "platform"},
            "port": 9443,
            "metricsPort": 9191,
        },
    },
    "full-name-override": {"fullnameOverride": "attribution"},
    "mirrors": {
        "mirrors": [
            MIRROR,
            {
                **MINIMAL_MIRROR,
                "secrets": {"credentials": "git-token", "knownHosts": {"kind": "Secret", "name": "ssh-known-hosts"}},
                "resources": {"watcher": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}}},
                "gitRepoVolume": {"persistentVolumeClaim": {"claimName": "mirror-clone"}},
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                "podAnnotations": {"example.com/team": "platform"},
                "podLabels": {"team": "platform"},
            },
        ],
        "mirrorDefaults": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "example.com/pool", "operator": "In", "values": ["git"]}]}}]}}},
    },
    "mirrors-memory-transport": {"attribution": {"transport": "memory"}, "mirrors": [MINIMAL_MIRROR]},
    "attribution-off": {"attribution": {"enabled": False}, "redis": {"existingSecret": ""}, "mirrors": [MINIMAL_MIRROR]},
}


def load_chart() -> helm.Chart:
    return helm.Chart.load(CHART_DIR)


@pytest.fixture(scope="session")
def chart() -> helm.Chart:
    with load_chart() as c:
        yield c


def render(chart: helm.Chart, values: dict[str, Any]) -> dict[str, str]:
    """Render as an install would: schema first (the engine itself does not
    validate), then the templates."""
    chart.validate_schema(chart.merge_values(values))
    return chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)


def objects(rendered: dict[str, str]) -> list[dict[str, Any]]:
    """Every Kubernetes object of a render, NOTES.txt excluded."""
    out = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                doc.setdefault("__template__", path)
                out.append(doc)
    return out


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "__template__"}


def notes(rendered: dict[str, str]) -> str:
    return next(text for path, text in rendered.items() if path.endswith("NOTES.txt"))
