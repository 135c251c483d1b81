"""testkit's fake Kubernetes API (`testkit fake-api`, the one the Rust tests
use) as a process for the chart's tests: the real wire format, custom
resources checked against the vendored CRD schemas, and every resource
request logged as the RBAC authorizer sees it (see `rbac.Rbac`)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from conftest import TARGET
from rbac import Request

TESTKIT_BINARY = pathlib.Path(os.environ.get("TESTKIT_BIN", TARGET / "debug" / "testkit"))
# The test's own calls (seeding, reading back) are made as this user, so
# `requests()` leaves them out: only what the binaries asked is held to RBAC.
HARNESS_USER = "chart-test-harness"


class FakeApi:
    """`with FakeApi(tmp, crds=[dir]) as api:` runs the server; `requests()`
    is read once it has stopped (the log is written at exit)."""

    def __init__(self, tmp: pathlib.Path, crds: list[pathlib.Path] = ()) -> None:
        if not TESTKIT_BINARY.is_file():
            raise RuntimeError(f"{TESTKIT_BINARY} does not exist: build it with cargo build -p testkit (or set TESTKIT_BIN)")
        self.kubeconfig = tmp / "fake-api.kubeconfig"
        self.log = tmp / "fake-api.requests.jsonl"
        self.args = [str(TESTKIT_BINARY), "fake-api", "--validate-vendored", "--kubeconfig-out", str(self.kubeconfig),
                     "--request-log", str(self.log), *[a for d in crds for a in ("--crds", str(d))]]
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.stopped = False

    def __enter__(self) -> FakeApi:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.proc.kill()
            raise RuntimeError(f"testkit fake-api did not start (exit {self.proc.wait()})")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc is None or self.stopped:
            return
        self.stopped = True
        self.proc.terminate()
        if self.proc.wait(timeout=30) != 0:
            raise RuntimeError(f"testkit fake-api exited {self.proc.returncode}")

    def requests(self) -> list[Request]:
        """Every resource request the binaries made (read after `stop`)."""
        self.stop()
        return [Request(r["verb"], r["group"], r["resource"], r["namespace"], r["name"])
                for r in map(json.loads, self.log.read_text().splitlines()) if r["user"] != HARNESS_USER]

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json",
                                              "Impersonate-User": HARNESS_USER})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)

    def collection(self, api_version: str, kind: str, namespace: str | None) -> str:
        """The path of `kind`'s collection, from the server's discovery."""
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        status, resources = self.call("GET", base)
        assert status == 200, resources
        (r,) = [r for r in resources["resources"] if r["kind"] == kind and "/" not in r["name"]]
        return f"{base}/namespaces/{namespace}/{r['name']}" if r["namespaced"] else f"{base}/{r['name']}"

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Creates `obj` (validated by the server, as the real API would)."""
        path = self.collection(obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace"))
        status, body = self.call("POST", path, obj)
        assert status == 201, body
        return body

    def get(self, group: str, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        _, resources = self.call("GET", "/api/v1" if not group else f"/apis/{group}")
        prefix = "/api/v1" if not group else f"/apis/{group}/{resources['preferredVersion']['version']}"
        path = f"{prefix}/namespaces/{urllib.parse.quote(namespace)}/{resource}/{name}" if namespace else f"{prefix}/{resource}/{name}"
        status, body = self.call("GET", path)
        return body if status == 200 else None
