"""The install docs' YAML blocks parse, and say what the chart does."""

from __future__ import annotations

import re

import pytest
import yaml

from conftest import DOCS, objects, render


def yaml_blocks(name: str) -> list[dict]:
    text = (DOCS / name).read_text()
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def test_audit_policy_logs_mutations_with_both_bodies() -> None:
    (policy,) = [b for b in yaml_blocks("audit-setup.md") if b.get("kind") == "Policy"]
    assert policy["apiVersion"] == "audit.k8s.io/v1"
    assert "RequestReceived" in policy["omitStages"]
    rules = policy["rules"]
    mutating = {"create", "update", "patch", "delete", "deletecollection"}
    (body_rule,) = [r for r in rules if r["level"] == "RequestResponse"]
    assert set(body_rule["verbs"]) == mutating
    # Secrets are capped at Metadata before the catch-all reaches them.
    secrets = next(i for i, r in enumerate(rules) if any("secrets" in g["resources"] for g in r.get("resources", [])))
    assert rules[secrets]["level"] == "Metadata"
    assert secrets < rules.index(body_rule)


def test_audit_kubeconfig_is_a_complete_client_config() -> None:
    (config,) = [b for b in yaml_blocks("audit-setup.md") if b.get("kind") == "Config"]
    assert config["current-context"] == config["contexts"][0]["name"]
    assert config["clusters"][0]["cluster"]["server"].startswith("https://")
    assert "/audit-webhook/" in config["clusters"][0]["cluster"]["server"]
    user = config["users"][0]["user"]
    assert user["client-certificate"] and user["client-key"]


@pytest.mark.parametrize("flag", ["--audit-webhook-batch-max-wait=1s", "--audit-webhook-config-file=", "--audit-policy-file="])
def test_audit_setup_gives_the_flags(flag: str) -> None:
    text = (DOCS / "audit-setup.md").read_text()
    assert flag in text
    assert "up to 30 s by default" in text


def test_the_mirrors_example_renders_as_documented(chart) -> None:
    (example,) = [b for b in yaml_blocks("chart.md") if isinstance(b, dict) and "mirrors" in b]
    objs = objects(render(chart, example))
    roles = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs if o["kind"] == "Role"}
    # The GitTarget's own namespace, one Role per watched namespace, and the
    # ClusterWatchRules' Events in "default".
    assert {ns for ns, _ in roles} == {"mirror", "shop", "billing", "default"}
    (deploy,) = [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["labels"]["app.kubernetes.io/component"] == "mirror"]
    assert "--exclude-field-manager=kustomize-controller" in deploy["spec"]["template"]["spec"]["containers"][0]["args"]
