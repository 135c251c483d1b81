"""The chart's containers, run for real: the args a render gives the receiver,
the injector and (through the injector's own patch) an injected sidecar start
the real `reverser-sidecar` binary, with files laid out as the pod's volume
mounts say. Catches a chart and a binary that disagree on a flag, a path or a
subcommand. Needs the binary the cargo tests build (scripts/test runs cargo
first and names it in REVERSER_SIDECAR_BIN)."""

from __future__ import annotations

import base64
import hashlib
import contextlib
import http.client
import json
import os
import pathlib
import re
import shutil
import socket
import ssl
import subprocess
import time
from typing import Any, Iterator

import helm_python as helm
import pytest
import yaml

from conftest import MIRROR, NAMESPACE, PLUGIN_BINARY, RELEASE, SIDECAR_BINARY, objects, render, require_sidecar_binary
from rbac import Rbac, Request
from testkit_api import FakeApi

require_sidecar_binary()
BINARY = SIDECAR_BINARY
# `kubectl reverser inject`, to compare the webhook's patch with; optional
# here (the Rust end-to-end test compares with the plugin's own function).
PLUGIN = PLUGIN_BINARY

ROUTE = "prod-eu-1"
AUDIT_EVENT = {
    "kind": "EventList",
    "apiVersion": "audit.k8s.io/v1",
    "items": [
        {
            "stage": "ResponseComplete",
            "verb": "create",
            "auditID": "chart-e2e-1",
            "user": {"username": "alice"},
            "objectRef": {"resource": "configmaps", "namespace": "shop", "name": "demo", "apiVersion": "v1"},
            "responseStatus": {"code": 201},
            "responseObject": {"metadata": {"name": "demo", "namespace": "shop", "uid": "0b5e0f4e-0000-4000-8000-000000000001", "resourceVersion": "7"}},
            "stageTimestamp": "2026-11-29T23:00:00.000000Z",
        }
    ],
}


def apply_json_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 add / remove / replace, the operations a diff produces."""
    doc = json.loads(json.dumps(doc))
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        if not parts:
            doc = op["value"]
            continue
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1]
        if op["op"] == "add":
            if isinstance(parent, list):
                parent.insert(len(parent) if last == "-" else int(last), op["value"])
            else:
                parent[last] = op["value"]
        elif op["op"] == "replace":
            parent[int(last) if isinstance(parent, list) else last] = op["value"]
        elif op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        else:
            raise AssertionError(f"unexpected JSONPatch operation {op}")
    return doc


class Yaml12Loader(yaml.SafeLoader):
    """YAML 1.2's core schema, as the plugin's serde_norway writes it: only
    true/false are booleans (YAML 1.1 also reads on/off/yes/no as booleans)."""


Yaml12Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"] for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for first in "tTfF":
    Yaml12Loader.yaml_implicit_resolvers.setdefault(first, []).insert(
        0, ("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"))
    )


def plugin_inject(pod: dict[str, Any], injector_args: list[str]) -> str:
    """`kubectl reverser inject -f -` with the injector's own image and sidecar args."""
    plugin_args = ["inject", "-f", "-"]
    for a in injector_args:
        if a.startswith("--sidecar-image="):
            plugin_args.append("--image=" + a.split("=", 1)[1])
        elif a.startswith("--sidecar-arg="):
            plugin_args.append(a)
        elif a.startswith("--sidecar-redis-url-secret="):
            plugin_args.append("--redis-url-secret=" + a.split("=", 1)[1])
    return subprocess.run([str(PLUGIN), *plugin_args], input=json.dumps(pod), capture_output=True, text=True, check=True).stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


class Pki:
    """A CA, a localhost server certificate and a client certificate (openssl)."""

    def __init__(self, d: pathlib.Path) -> None:
        d.mkdir(parents=True, exist_ok=True)
        self.dir = d
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        openssl("req", "-x509", *ec, "-days", "1", "-subj", "/CN=chart e2e CA", "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"),
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        for name, ext in (
            ("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"),
            ("client", "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n"),
        ):
            openssl("req", *ec, "-subj", f"/CN={name}", "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr"))
            (d / f"{name}.ext").write_text(ext)
            openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.crt"), "-CAkey", str(d / "ca.key"),
                    "-CAcreateserial", "-days", "1", "-extfile", str(d / f"{name}.ext"), "-out", str(d / f"{name}.crt"))

    def context(self, client: bool = False) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.dir / "ca.crt"))
        if client:
            ctx.load_cert_chain(str(self.dir / "client.crt"), str(self.dir / "client.key"))
        return ctx


def lay_out_volumes(pod: dict[str, Any], container: dict[str, Any], root: pathlib.Path, pki: Pki, client_ca_key: str) -> dict[str, str]:
    """Creates each mounted volume under `root` with what its Secret holds in
    a cluster; returns mountPath -> local directory."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {}
    for m in container["volumeMounts"]:
        local = root / m["name"]
        local.mkdir(parents=True)
        volume = volumes[m["name"]]
        if m["name"] == "tls":
            shutil.copy(pki.dir / "server.crt", local / "tls.crt")
            shutil.copy(pki.dir / "server.key", local / "tls.key")
            shutil.copy(pki.dir / "ca.crt", local / "ca.crt")
        elif m["name"] == "audit-client-ca":
            shutil.copy(pki.dir / "ca.crt", local / client_ca_key)
        else:
            assert "emptyDir" in volume, f"unexpected volume {volume}"
        mounts[m["mountPath"].rstrip("/") + "/"] = str(local) + "/"
    return mounts


def localize(args: list[str], mounts: dict[str, str], ports: dict[str, int]) -> list[str]:
    """The pod's args on this machine: mount paths to local directories,
    listeners to free loopback ports."""
    out = []
    for a in args:
        for path, local in mounts.items():
            a = a.replace(path, local)
        m = re.fullmatch(r"(--[a-z-]*listen)=(?:0\.0\.0\.0|127\.0\.0\.1):\d+", a)
        if m:
            ports[m.group(1)] = free_port()
            a = f"{m.group(1)}=127.0.0.1:{ports[m.group(1)]}"
        out.append(a)
    return out


@contextlib.contextmanager
def running(args: list[str], log: pathlib.Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(BINARY), *args], stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def get(port: int, path: str, ctx: ssl.SSLContext | None = None, method: str = "GET", body: bytes | None = None) -> tuple[int, bytes]:
    conn = (http.client.HTTPSConnection("localhost", port, context=ctx, timeout=10) if ctx
            else http.client.HTTPConnection("127.0.0.1", port, timeout=10))
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def wait_healthy(proc: subprocess.Popen, log: pathlib.Path, port: int, ctx: ssl.SSLContext | None = None) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{BINARY.name} exited {proc.returncode}:\n{log.read_text()}")
        with contextlib.suppress(OSError):
            if get(port, "/healthz", ctx)[0] == 200:
                return
        time.sleep(0.1)
    pytest.fail(f"{BINARY.name} never answered /healthz:\n{log.read_text()}")


@pytest.fixture
def redis_url(tmp_path: pathlib.Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True).stdout.strip() != "PONG":
            assert time.monotonic() < deadline and proc.poll() is None, "redis-server did not start"
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait()


def container_of(objs: list[dict[str, Any]], component: str) -> tuple[dict[str, Any], dict[str, Any]]:
    d = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["labels"]["app.kubernetes.io/component"] == component)
    pod = d["spec"]["template"]["spec"]
    return pod, pod["containers"][0]


@pytest.fixture(scope="module")
def chart() -> Iterator[helm.Chart]:
    with helm.Chart.load(pathlib.Path(__file__).resolve().parents[2] / "charts" / "reverser") as c:
        yield c


@pytest.mark.parametrize("transport", ["redis", "memory"])
def test_the_receiver_starts_from_the_charts_args_and_takes_audit_events(
    chart: helm.Chart, tmp_path: pathlib.Path, transport: str, request: pytest.FixtureRequest
) -> None:
    values = {"attribution": {"transport": transport}}
    pod, container = container_of(objects(render(chart, values)), "receiver")
    pki = Pki(tmp_path / "pki")
    mounts = lay_out_volumes(pod, container, tmp_path / "volumes", pki, "ca.crt")
    ports: dict[str, int] = {}
    args = localize(container["args"], mounts, ports)
    env = {}
    url = None
    if transport == "redis":
        url = request.getfixturevalue("redis_url")
        (entry,) = container["env"]
        assert entry["name"] == "REVERSER_REDIS_URL"
        env["REVERSER_REDIS_URL"] = url
    log = tmp_path / "receiver.log"
    with running(args, log, env) as proc:
        wait_healthy(proc, log, ports["--metrics-listen"])
        body = json.dumps(AUDIT_EVENT).encode()
        # Without the audit client certificate, the handshake itself fails.
        with pytest.raises((ssl.SSLError, ConnectionError)):
            get(ports["--audit-listen"], f"/audit-webhook/{ROUTE}", pki.context(), "POST", body)
        status, reply = get(ports["--audit-listen"], f"/audit-webhook/{ROUTE}", pki.context(client=True), "POST", body)
        assert status == 200, reply
        _, metrics = get(ports["--metrics-listen"], "/metrics")
        assert re.search(rb'gitopsreverser_attribution_facts_total\{op="written"\} [1-9]', metrics), metrics.decode()[:2000]
        if url:
            port = url.rsplit(":", 1)[1]
            keys = subprocess.run(["redis-cli", "-p", port, "--scan", "--pattern", "gitops-reverser:author:v2:audit:route:*"],
                                  capture_output=True, text=True, check=True).stdout.split()
            assert keys == [f"gitops-reverser:author:v2:audit:route:{ROUTE}:configmaps"]


def test_the_injector_and_the_sidecar_it_injects_start_from_the_charts_args(
    chart: helm.Chart, tmp_path: pathlib.Path, redis_url: str
) -> None:
    # The adaptive grace on, so the sidecar started below parses its flags too.
    values = {"injector": {"sidecarArgs": [f"--redis-url={redis_url}"]}, "attribution": {"adaptiveGraceMisses": 5}}
    pod, container = container_of(objects(render(chart, values)), "injector")
    pki = Pki(tmp_path / "pki")
    mounts = lay_out_volumes(pod, container, tmp_path / "volumes", pki, "ca.crt")
    ports: dict[str, int] = {}
    args = localize(container["args"], mounts, ports)
    log = tmp_path / "injector.log"
    with running(args, log) as proc:
        wait_healthy(proc, log, ports["--listen"], pki.context())
        # What the chart's probes ask.
        for probe in (container["readinessProbe"], container["livenessProbe"]):
            assert probe["httpGet"]["scheme"] == "HTTPS"
            assert get(ports["--listen"], probe["httpGet"]["path"], pki.context())[0] == 200
        pod_object = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "mirror-0", "namespace": "shop", "labels": {"reverser.dev/inject": "enabled"}},
            "spec": {"containers": [{"name": "watcher", "image": "registry.example/watcher:1"}]},
        }
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "shop", "operation": "CREATE", "object": pod_object}}
        status, reply = get(ports["--listen"], "/inject", pki.context(), "POST", json.dumps(review).encode())
        assert status == 200, reply
        response = json.loads(reply)["response"]
        patch = json.loads(base64.b64decode(response["patch"]))
        # The release namespace is refused by the server too, not only by the selector.
        review["request"]["namespace"] = NAMESPACE
        _, refused = get(ports["--listen"], "/inject", pki.context(), "POST", json.dumps(review).encode())
        assert "patch" not in json.loads(refused)["response"]

    # The patch, applied, is what `kubectl reverser inject` writes for the
    # same pod with the same flags.
    patched = apply_json_patch(pod_object, patch)
    if PLUGIN.is_file():
        assert yaml.load(plugin_inject(pod_object, container["args"]), Loader=Yaml12Loader) == patched
    else:
        print(f"SKIP part: {PLUGIN} is not built; compared with the plugin's function in sidecar/tests/inject_webhook.rs only")

    added = [op["value"] for op in patch if op["op"] == "add" and op["path"] == "/spec/initContainers"]
    (sidecar,) = [c for c in added[0] if c["name"] == "reverser-sidecar"]
    assert sidecar["image"] == f"ghcr.io/reverser/reverser-sidecar:{chart.metadata['appVersion']}"
    # Now run that sidecar as the kubelet would, against the real Redis.
    run_dir = tmp_path / "socket"
    run_dir.mkdir()
    sidecar_ports: dict[str, int] = {}
    sidecar_args = localize(sidecar["args"], {"/var/run/reverser/": str(run_dir) + "/"}, sidecar_ports)
    assert "--audit-listen=off" in sidecar_args
    assert "--author-attribution-adaptive-grace-misses=5" in sidecar_args
    log = tmp_path / "sidecar.log"
    with running(sidecar_args, log) as proc:
        wait_healthy(proc, log, sidecar_ports["--metrics-listen"])
        assert (run_dir / "reverser.sock").is_socket()
        assert 'transport="redis"' in log.read_text()


@pytest.mark.skipif(not PLUGIN.is_file() or not shutil.which("kubectl"), reason="needs kubectl-reverser and kubectl")
def test_kubectl_reads_the_plugins_output_as_written(chart: helm.Chart, tmp_path: pathlib.Path) -> None:
    # kubectl reads manifests with YAML 1.1 rules (`off` is false there): the
    # injected args must reach the API server exactly as written.
    # The redis transport with its URL from a Secret: without one the plugin
    # (and the injector) refuse the sidecar's arguments.
    pod, container = container_of(objects(render(chart, {"injector": {"redisUrlSecret": {"name": "reverser-redis"}}})), "injector")
    pod_object = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"},
                  "spec": {"containers": [{"name": "w", "image": "registry.example/w:1"}]}}
    manifest = tmp_path / "injected.yaml"
    manifest.write_text(plugin_inject(pod_object, container["args"]))
    # The real kubectl, offline (--local): the JSON it would send the API server.
    out = subprocess.run(["kubectl", "label", "--local", "-f", str(manifest), "reverser.dev/checked=yes", "-o", "json"],
                         capture_output=True, text=True, check=True, env={**os.environ, "KUBECONFIG": str(tmp_path / "none")})
    sent = json.loads(out.stdout)
    expected = yaml.load(manifest.read_text(), Loader=Yaml12Loader)
    (sidecar,) = sent["spec"]["initContainers"]
    assert sidecar["args"] == expected["spec"]["initContainers"][0]["args"]


# -- Mirrors: the watcher and the sidecar a mirror Deployment runs ----------

def mirror_pod(chart: helm.Chart, values: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    objs = objects(render(chart, values))
    (deploy,) = [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["labels"]["app.kubernetes.io/component"] == "mirror"]
    return objs, deploy["spec"]["template"]["spec"]


def help_flags(subcommand: str) -> set[str]:
    text = subprocess.run([str(BINARY), subcommand, "--help"], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def test_every_flag_a_mirror_passes_is_one_the_binary_has(chart: helm.Chart) -> None:
    _, pod = mirror_pod(chart, {"mirrors": [MIRROR], "attribution": {"maxFacts": 10, "maxFactsPerType": 5,
                                                                      "auditRouteAnnotationKey": "example.com/route"}})
    (sidecar,) = pod["initContainers"]
    (watcher,) = pod["containers"]
    for container, subcommand in ((sidecar, "serve"), (watcher, "watch")):
        assert container["args"][0] == subcommand
        flags = {a.split("=", 1)[0] for a in container["args"][1:] if a.startswith("--")}
        # Every option the chart can set is in this render.
        assert len(flags) >= (12 if subcommand == "serve" else 6), flags
        missing = flags - help_flags(subcommand)
        assert not missing, f"`reverser-sidecar {subcommand}` has no {sorted(missing)}"
    # Configured-author mode's one flag, too.
    _, pod = mirror_pod(chart, {"mirrors": [MIRROR], "attribution": {"enabled": False}})
    (sidecar,) = pod["initContainers"]
    assert "--author-attribution=false" in sidecar["args"] and "--author-attribution" in help_flags("serve")


@pytest.mark.skipif(not PLUGIN.is_file(), reason="needs kubectl-reverser")
def test_a_mirrors_sidecar_is_the_one_kubectl_reverser_inject_writes(chart: helm.Chart) -> None:
    _, pod = mirror_pod(chart, {"mirrors": [MIRROR]})
    (sidecar,) = pod["initContainers"]
    base = ["serve", "--socket", "/var/run/reverser/reverser.sock", "--socket-mode=666", "--audit-listen=off"]
    assert sidecar["args"][: len(base)] == base
    # The pod as it would be without the sidecar, injected by the plugin with
    # the chart's image, extra args and Redis Secret.
    bare = json.loads(json.dumps(pod))
    del bare["initContainers"]
    bare["volumes"] = [v for v in bare["volumes"] if v["name"] != "reverser-socket"]
    watcher = bare["containers"][0]
    del watcher["env"]
    del watcher["volumeMounts"]
    secret = sidecar["env"][0]["valueFrom"]["secretKeyRef"]
    out = subprocess.run(
        [str(PLUGIN), "inject", "-f", "-", f"--image={sidecar['image']}", f"--redis-url-secret={secret['name']}/{secret['key']}",
         *[f"--sidecar-arg={a}" for a in sidecar["args"][len(base):]]],
        input=json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "m", "namespace": NAMESPACE}, "spec": bare}),
        capture_output=True, text=True, check=True,
    ).stdout
    injected = yaml.load(out, Loader=Yaml12Loader)["spec"]
    by_name = lambda vs: sorted(vs, key=lambda v: v["name"])  # noqa: E731 (volume order has no meaning)
    assert by_name(injected.pop("volumes")) == by_name(pod["volumes"])
    (plugin_sidecar,) = injected.pop("initContainers")
    # What the chart adds to the rule's container: the clone's volume, its
    # own resources, and probes on its metrics port.
    ours = {k: v for k, v in sidecar.items() if k not in ("resources", "ports", "readinessProbe", "livenessProbe")}
    ours["volumeMounts"] = [m for m in sidecar["volumeMounts"] if m["name"] != "git-repo"]
    del plugin_sidecar["resources"]
    assert ours == plugin_sidecar
    assert injected == {k: v for k, v in pod.items() if k not in ("initContainers", "volumes")}


def widget_crds(tmp: pathlib.Path) -> pathlib.Path:
    """A cluster-scoped example.com/v1 Widget CRD (any spec), for the
    ClusterWatchRule; the configbutler.ai CRDs are testkit's vendored ones."""
    crds = tmp / "crds"
    crds.mkdir()
    (crds / "widgets.yaml").write_text(yaml.safe_dump({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    }))
    return crds


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def seed_cluster(api: FakeApi, remote: pathlib.Path, key_dir: pathlib.Path, signing_secret: str) -> None:
    """The cluster MIRROR is written for: GitTarget mirror/prod, its GitProvider
    (SSH credentials, known_hosts from a ConfigMap, a generated signing key),
    a WatchRule for ConfigMaps of shop (admitted by namespace selector, the
    ClusterProvider delegating the choice) and a ClusterWatchRule for widgets."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "git", "-f", str(key_dir / "id")], check=True)
    cb = "configbutler.ai/v1alpha3"
    for ns, labels in (("mirror", {}), ("shop", {"mirror": "yes"}), ("other", {})):
        api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})
    # The WatchRule below reads shop from mirror: the ClusterProvider must admit
    # mirror and delegate the choice of source namespace (gitops-reverser's gate).
    api.put({"apiVersion": cb, "kind": "ClusterProvider", "metadata": {"name": "default"},
             "spec": {"attribution": {"auditRoute": "prod-eu-1"}, "allowedNamespaces": {"names": ["mirror"]},
                      "allowSourceNamespaceOverride": True}})
    api.put({"apiVersion": cb, "kind": "GitTarget", "metadata": {"name": "prod", "namespace": "mirror"},
             "spec": {"providerRef": {"name": "git"}, "branch": "main", "path": "clusters/prod",
                      "allowedSourceNamespaces": {"selector": {"matchLabels": {"mirror": "yes"}}}}})
    api.put({"apiVersion": cb, "kind": "GitProvider", "metadata": {"name": "git", "namespace": "mirror"},
             "spec": {"url": remote.as_uri(), "allowedBranches": ["main"], "secretRef": {"name": "git-creds"},
                      "knownHostsRef": {"kind": "ConfigMap", "name": "ssh-known-hosts"},
                      "commit": {"signing": {"secretRef": {"name": "git-signing"}, "generateWhenMissing": True}},
                      "push": {"commitWindow": "0s"}}})
    api.put({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "git-creds", "namespace": "mirror"},
             "data": {"ssh-privatekey": b64((key_dir / "id").read_text())}})
    api.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssh-known-hosts", "namespace": "mirror"},
             "data": {"known_hosts": "git.example " + (key_dir / "id.pub").read_text()}})
    if signing_secret == "empty":
        api.put({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "git-signing", "namespace": "mirror"}})
    api.put({"apiVersion": cb, "kind": "WatchRule", "metadata": {"name": "configs", "namespace": "mirror"},
             "spec": {"targetRef": {"name": "prod"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "sourceNamespace": "shop"}]}})
    api.put({"apiVersion": cb, "kind": "ClusterWatchRule", "metadata": {"name": "widgets"},
             "spec": {"targetRef": {"name": "prod", "namespace": "mirror"}, "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"]}]}})
    api.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo", "namespace": "shop"}, "data": {"a": "1"}})
    api.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "elsewhere", "namespace": "other"}, "data": {"a": "1"}})
    api.put({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}})


def ready(obj: dict[str, Any] | None) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def wait_ready(api: FakeApi, resource: str, namespace: str, name: str, logs: list[pathlib.Path], timeout: float = 60) -> None:
    """Waits for a configbutler.ai object's Ready condition, failing with the logs."""
    deadline = time.monotonic() + timeout
    while not ready(api.get("configbutler.ai", resource, namespace, name)):
        if time.monotonic() > deadline:
            pytest.fail(f"{resource} {namespace}/{name} never became Ready:\n" + "\n".join(p.read_text() for p in logs))
        time.sleep(0.2)


def tree(remote: pathlib.Path) -> list[str]:
    out = subprocess.run(["git", "--git-dir", str(remote), "ls-tree", "-r", "--name-only", "main"], capture_output=True, text=True)
    return out.stdout.split() if out.returncode == 0 else []


def wait_for_file(remote: pathlib.Path, path: str, logs: list[pathlib.Path]) -> None:
    deadline = time.monotonic() + 60
    while path not in tree(remote):
        if time.monotonic() > deadline:
            pytest.fail(f"{path} never reached the remote ({tree(remote)}):\n" + "\n".join(f"{p}:\n{p.read_text()}" for p in logs))
        time.sleep(0.2)


@pytest.mark.parametrize("signing_secret", ["absent", "empty"])
def test_a_mirror_runs_from_the_charts_args_within_the_charts_rbac(
    chart: helm.Chart, tmp_path: pathlib.Path, redis_url: str, signing_secret: str
) -> None:
    objs, pod = mirror_pod(chart, {"mirrors": [MIRROR]})
    (sidecar,) = pod["initContainers"]
    (watcher,) = pod["containers"]
    # The pod's volumes (all emptyDirs) as local directories.
    mounts = {}
    for v in pod["volumes"]:
        assert v.get("emptyDir") == {}, v
        (tmp_path / "volumes" / v["name"]).mkdir(parents=True)
    for c in (sidecar, watcher):
        for m in c["volumeMounts"]:
            mounts[m["mountPath"].rstrip("/") + "/"] = str(tmp_path / "volumes" / m["name"]) + "/"
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    (tmp_path / "keys").mkdir()

    with FakeApi(tmp_path, crds=[widget_crds(tmp_path)]) as api:
        seed_cluster(api, remote, tmp_path / "keys", signing_secret)
        # In a pod the in-cluster account is used; here $KUBECONFIG, which the
        # binaries consult first, points at the fake API.
        env = {"KUBECONFIG": str(api.kubeconfig), "HOME": str(tmp_path)}
        (redis_env,) = sidecar["env"]
        assert redis_env["valueFrom"]["secretKeyRef"] == {"name": "reverser-redis", "key": "url"}
        sidecar_env = {**env, "REVERSER_REDIS_URL": redis_url}
        watcher_env = {**env, **{e["name"]: localize([e["value"]], mounts, {})[0] for e in watcher["env"]}}
        sidecar_ports: dict[str, int] = {}
        watcher_ports: dict[str, int] = {}
        sidecar_log, watcher_log = tmp_path / "sidecar.log", tmp_path / "watcher.log"
        # A native sidecar starts first and stops last.
        with running(localize(sidecar["args"], mounts, sidecar_ports), sidecar_log, sidecar_env) as sp:
            wait_healthy(sp, sidecar_log, sidecar_ports["--metrics-listen"])
            socket_file = tmp_path / "volumes" / "reverser-socket" / "reverser.sock"
            assert socket_file.is_socket() and socket_file.stat().st_mode & 0o777 == 0o666
            with running(localize(watcher["args"], mounts, watcher_ports), watcher_log, watcher_env) as wp:
                wait_healthy(wp, watcher_log, watcher_ports["--metrics-listen"])
                logs = [sidecar_log, watcher_log]
                # The first list reconciles both watched types into Git.
                wait_for_file(remote, "clusters/prod/shop/configmaps/demo.yaml", logs)
                wait_for_file(remote, "clusters/prod/_cluster/example.com/widgets/w1.yaml", logs)
                # Then watch events: the forward leg's write (--exclude-field-manager) is not mirrored.
                fields = lambda m, t: [{"manager": m, "operation": "Update", "apiVersion": "v1", "time": t}]  # noqa: E731
                api.put({"apiVersion": "v1", "kind": "ConfigMap", "data": {"b": "2"}, "metadata": {
                    "name": "flux-owned", "namespace": "shop", "managedFields": fields("kustomize-controller", "2026-12-01T00:00:01Z")}})
                api.put({"apiVersion": "v1", "kind": "ConfigMap", "data": {"c": "3"}, "metadata": {
                    "name": "added", "namespace": "shop", "managedFields": fields("kubectl-create", "2026-12-01T00:00:02Z")}})
                wait_for_file(remote, "clusters/prod/shop/configmaps/added.yaml", logs)
                # A CommitRequest for the GitTarget: served, and its status written.
                api.put({"apiVersion": "configbutler.ai/v1alpha3", "kind": "CommitRequest",
                         "metadata": {"name": "save", "namespace": "mirror"}, "spec": {"targetRef": {"name": "prod"}}})
                wait_ready(api, "commitrequests", "mirror", "save", logs, timeout=60)
        files = tree(remote)
        assert "clusters/prod/shop/configmaps/flux-owned.yaml" not in files
        assert not [f for f in files if "/other/" in f or "/mirror/" in f], files
        # Signed with the key the sidecar generated into the signing Secret.
        signing = api.get("", "secrets", "mirror", "git-signing")
        assert signing and {"signing.key", "signing.pub"} <= set(signing["data"]), "generated under the reference's key names"
        head = subprocess.run(["git", "--git-dir", str(remote), "cat-file", "commit", "main"], capture_output=True, text=True, check=True).stdout
        assert "-----BEGIN SSH SIGNATURE-----" in head
        requests = api.requests()

    # Every request either binary made is one the chart's RBAC allows...
    sa = next(o for o in objs if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == pod["serviceAccountName"])
    rbac = Rbac(objs, sa["metadata"]["namespace"], sa["metadata"]["name"])
    denied = sorted({r for r in requests if not rbac.allowing(r)}, key=str)
    assert not denied, f"the chart's RBAC forbids requests the mirror makes: {denied}"
    # ... and every permission it grants was needed: every verb on every
    # type and name of every rule. The only one unused is the other half of
    # generateWhenMissing (create when the Secret is absent, patch when it
    # exists without a key).
    used = {cell for r in requests for cell in rbac.allowing(r)}
    unused = rbac.cells() - used
    other_half = "patch" if signing_secret == "absent" else "create"
    assert [(verb, resource) for _, verb, _, resource, _ in unused] == [(other_half, "secrets")], unused


def chart_mirror_name(prefix: str, namespace: str, name: str) -> str:
    """reverser.mirrorName (and rules::mirror::controller::mirror_name)."""
    readable = f"{prefix}-mirror-{namespace}-{name}".replace(".", "-")[:48].rstrip("-")
    return f"{readable}-{hashlib.sha256(f'{namespace}/{name}'.encode()).hexdigest()[:8]}"


def test_the_controller_serves_a_gittarget_and_its_mirror_runs_within_the_rbac_it_derived(
    chart: helm.Chart, tmp_path: pathlib.Path, redis_url: str
) -> None:
    """controller.enabled, run from the chart's args: a GitTarget gets its
    mirror's Deployment and RBAC; that Deployment's containers, run as its
    ServiceAccount (impersonated), mirror the cluster with every request
    allowed by the RBAC the controller derived, and nearly all of it used;
    deleting the GitTarget removes it all. The controller's own requests are
    all allowed by the chart's ClusterRole."""
    objs = objects(render(chart, {"controller": {"enabled": True}}))
    _, controller = container_of(objs, "controller")
    prefix = next(a.split("=", 1)[1] for a in controller["args"] if a.startswith("--name-prefix="))
    name = chart_mirror_name(prefix, "mirror", "prod")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    (tmp_path / "keys").mkdir()
    derived: list[dict[str, Any]] = []
    with FakeApi(tmp_path, crds=[widget_crds(tmp_path)]) as api:
        api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        seed_cluster(api, remote, tmp_path / "keys", "absent")
        env = {"KUBECONFIG": str(api.kubeconfig), "HOME": str(tmp_path)}
        controller_log = tmp_path / "controller.log"
        with running(controller["args"], controller_log, env) as cp:
            deadline = time.monotonic() + 30
            while (dep := api.get("apps", "deployments", NAMESPACE, name)) is None:
                if time.monotonic() > deadline or cp.poll() is not None:
                    pytest.fail(f"no Deployment {NAMESPACE}/{name}:\n{controller_log.read_text()}")
                time.sleep(0.2)
            for group, resource, ns, n in (("", "serviceaccounts", NAMESPACE, name),
                                           ("rbac.authorization.k8s.io", "roles", "mirror", name),
                                           ("rbac.authorization.k8s.io", "rolebindings", "mirror", name),
                                           ("rbac.authorization.k8s.io", "roles", "shop", f"{name}-watch"),
                                           ("rbac.authorization.k8s.io", "rolebindings", "shop", f"{name}-watch"),
                                           ("rbac.authorization.k8s.io", "roles", "default", f"{name}-event"),
                                           ("rbac.authorization.k8s.io", "rolebindings", "default", f"{name}-event"),
                                           ("rbac.authorization.k8s.io", "clusterroles", "", name),
                                           ("rbac.authorization.k8s.io", "clusterrolebindings", "", name)):
                obj = api.get(group, resource, ns, n)
                assert obj is not None, f"no {resource} {ns}/{n}:\n{controller_log.read_text()}"
                derived.append(obj)
            pod = dep["spec"]["template"]["spec"]
            (sidecar,) = pod["initContainers"]
            (watcher,) = pod["containers"]
            # The pod's account, impersonated: its requests are held to what was derived.
            account = f"system:serviceaccount:{NAMESPACE}:{pod['serviceAccountName']}"
            kubeconfig = yaml.safe_load(api.kubeconfig.read_text())
            kubeconfig["users"][0]["user"]["as"] = account
            (tmp_path / "mirror.kubeconfig").write_text(yaml.safe_dump(kubeconfig))
            mirror_env = {"KUBECONFIG": str(tmp_path / "mirror.kubeconfig"), "HOME": str(tmp_path)}
            mounts = {}
            for v in pod["volumes"]:
                (tmp_path / "volumes" / v["name"]).mkdir(parents=True)
            for c in (sidecar, watcher):
                for m in c["volumeMounts"]:
                    mounts[m["mountPath"].rstrip("/") + "/"] = str(tmp_path / "volumes" / m["name"]) + "/"
            (redis_env,) = sidecar["env"]
            assert redis_env["valueFrom"]["secretKeyRef"] == {"name": "reverser-redis", "key": "url"}
            watcher_env = {**mirror_env, **{e["name"]: localize([e["value"]], mounts, {})[0] for e in watcher["env"]}}
            sidecar_ports: dict[str, int] = {}
            watcher_ports: dict[str, int] = {}
            sidecar_log, watcher_log = tmp_path / "sidecar.log", tmp_path / "watcher.log"
            with running(localize(sidecar["args"], mounts, sidecar_ports), sidecar_log, {**mirror_env, "REVERSER_REDIS_URL": redis_url}) as sp:
                wait_healthy(sp, sidecar_log, sidecar_ports["--metrics-listen"])
                with running(localize(watcher["args"], mounts, watcher_ports), watcher_log, watcher_env) as wp:
                    wait_healthy(wp, watcher_log, watcher_ports["--metrics-listen"])
                    logs = [controller_log, sidecar_log, watcher_log]
                    wait_for_file(remote, "clusters/prod/shop/configmaps/demo.yaml", logs)
                    wait_for_file(remote, "clusters/prod/_cluster/example.com/widgets/w1.yaml", logs)
                    wait_ready(api, "gittargets", "mirror", "prod", logs, timeout=30)
                    api.put({"apiVersion": "configbutler.ai/v1alpha3", "kind": "CommitRequest",
                             "metadata": {"name": "save", "namespace": "mirror"}, "spec": {"targetRef": {"name": "prod"}}})
                    wait_ready(api, "commitrequests", "mirror", "save", logs, timeout=60)
            # Deleted: the finalizer holds it until everything serving it is gone.
            status, body = api.call("DELETE", "/apis/configbutler.ai/v1alpha3/namespaces/mirror/gittargets/prod")
            assert status == 200, body
            deadline = time.monotonic() + 30
            while api.get("configbutler.ai", "gittargets", "mirror", "prod") is not None:
                if time.monotonic() > deadline:
                    pytest.fail(f"the GitTarget was never released:\n{controller_log.read_text()}")
                time.sleep(0.2)
            for obj in derived + [dep]:
                group = obj["apiVersion"].rpartition("/")[0]
                resource = {"ServiceAccount": "serviceaccounts", "Role": "roles", "RoleBinding": "rolebindings",
                            "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "Deployment": "deployments"}[obj["kind"]]
                left = api.get(group, resource, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
                assert left is None, f"{obj['kind']} {obj['metadata']['name']} left after the GitTarget"
        api.stop()
        log = [json.loads(line) for line in api.log.read_text().splitlines()]

    as_request = lambda r: Request(r["verb"], r["group"], r["resource"], r["namespace"], r["name"])  # noqa: E731
    mirror_requests = [as_request(r) for r in log if r["user"] == account]
    controller_requests = [as_request(r) for r in log if r["user"] not in (account, "chart-test-harness")]
    assert mirror_requests and controller_requests
    # The mirror: every request allowed by what the controller derived for it...
    sa = next(o for o in derived if o["kind"] == "ServiceAccount")
    rbac = Rbac(derived, NAMESPACE, sa["metadata"]["name"])
    denied = sorted({r for r in mirror_requests if not rbac.allowing(r)}, key=str)
    assert not denied, f"the derived RBAC forbids requests the mirror makes: {denied}"
    # ... and all of it used but the other half of generateWhenMissing (the
    # signing Secret was absent: created, never patched).
    used = {cell for r in mirror_requests for cell in rbac.allowing(r)}
    assert [(verb, resource) for _, verb, _, resource, _ in rbac.cells() - used] == [("patch", "secrets")]
    # The controller: every request allowed by the chart's ClusterRole.
    csa = next(o for o in objs if o["kind"] == "ServiceAccount" and o["metadata"]["name"].endswith("-controller"))
    chart_rbac = Rbac(objs, csa["metadata"]["namespace"], csa["metadata"]["name"])
    denied = sorted({r for r in controller_requests if not chart_rbac.allowing(r)}, key=str)
    assert not denied, f"the chart's RBAC forbids requests the controller makes: {denied}"
