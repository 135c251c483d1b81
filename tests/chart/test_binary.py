"""The chart's containers, run for real: the args a render gives the receiver,
the injector and (through the injector's own patch) an injected sidecar start
the real `reverser-sidecar` binary, with files laid out as the pod's volume
mounts say. Catches a chart and a binary that disagree on a flag, a path or a
subcommand. Needs the binary the cargo tests build (scripts/test runs cargo
first and names it in REVERSER_SIDECAR_BIN)."""

from __future__ import annotations

import base64
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

from conftest import NAMESPACE, PLUGIN_BINARY, RELEASE, SIDECAR_BINARY, objects, render, require_sidecar_binary

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
    values = {"injector": {"sidecarArgs": [f"--redis-url={redis_url}"]}}
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
    log = tmp_path / "sidecar.log"
    with running(sidecar_args, log) as proc:
        wait_healthy(proc, log, sidecar_ports["--metrics-listen"])
        assert (run_dir / "reverser.sock").is_socket()
        assert 'transport="redis"' in log.read_text()


@pytest.mark.skipif(not PLUGIN.is_file() or not shutil.which("kubectl"), reason="needs kubectl-reverser and kubectl")
def test_kubectl_reads_the_plugins_output_as_written(chart: helm.Chart, tmp_path: pathlib.Path) -> None:
    # kubectl reads manifests with YAML 1.1 rules (`off` is false there): the
    # injected args must reach the API server exactly as written.
    pod, container = container_of(objects(render(chart, {})), "injector")
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
