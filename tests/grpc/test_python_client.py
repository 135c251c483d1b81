"""The socket API through a stock gRPC client that is not ours: grpcio (gRPC's
C core, as Python, Ruby and C++ watchers use it), with stubs generated at test
time from the published .proto. docs/watcher.md promises any gRPC client
works; the C core sends the socket path as `:authority`, which is no valid
authority. Needs the binary the cargo tests build (scripts/test names it in
REVERSER_SIDECAR_BIN)."""

from __future__ import annotations

import http.client
import importlib
import json
import os
import pathlib
import socket
import ssl
import subprocess
import sys
import time
from typing import Iterator

import grpc
import pytest
from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTO = ROOT / "shared" / "runtime" / "proto"
TARGET = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", pathlib.Path.home() / ".cache" / "reverser-target"))
BINARY = pathlib.Path(os.environ.get("REVERSER_SIDECAR_BIN", TARGET / "debug" / "reverser-sidecar"))

if not BINARY.is_file():
    if "REVERSER_SIDECAR_BIN" in os.environ:
        raise RuntimeError(f"REVERSER_SIDECAR_BIN={BINARY} does not exist: build it with cargo build -p reverser-sidecar")
    pytest.skip(f"SKIP: {BINARY} is not built (cargo build -p reverser-sidecar)", allow_module_level=True)


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("stubs")
    grpc_include = pathlib.Path(protoc.__file__).parent / "_proto"
    rc = protoc.main(
        ["protoc", f"-I{PROTO}", f"-I{grpc_include}", f"--python_out={out}", f"--grpc_python_out={out}", "reverser/v1/reverser.proto"]
    )
    assert rc == 0, "protoc failed on the published .proto"
    sys.path.insert(0, str(out))
    try:
        pb = importlib.import_module("reverser.v1.reverser_pb2")
        rpc = importlib.import_module("reverser.v1.reverser_pb2_grpc")
    finally:
        sys.path.remove(str(out))
    return pb, rpc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sidecar:
    def __init__(self, workdir: pathlib.Path):
        self.dir = workdir
        self.socket = workdir / "reverser.sock"
        self.audit_port, self.metrics_port = free_port(), free_port()
        self.certs = workdir / "certs"
        self.proc = subprocess.Popen(
            [
                str(BINARY),
                "serve",
                "--socket", str(self.socket),
                "--audit-listen", f"127.0.0.1:{self.audit_port}",
                "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
                "--dev-certs-dir", str(self.certs),
                "--follow", "lab:configmaps",
            ],
            cwd=workdir,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "REVERSER_LOG": "warn"},
        )
        deadline = time.monotonic() + 20
        while not self.socket.exists() or not self._listening():
            assert self.proc.poll() is None, "the sidecar exited"
            assert time.monotonic() < deadline, "the sidecar did not come up"
            time.sleep(0.05)

    def _listening(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.audit_port)) == 0

    def post(self, body: dict) -> tuple[int, str]:
        ctx = ssl.create_default_context(cafile=str(self.certs / "ca.pem"))
        ctx.load_cert_chain(self.certs / "client.pem", self.certs / "client-key.pem")
        conn = http.client.HTTPSConnection("localhost", self.audit_port, context=ctx, timeout=10)
        conn.request("POST", "/audit-webhook/lab", json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read().decode()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=15)


@pytest.fixture()
def sidecar(tmp_path: pathlib.Path) -> Iterator[Sidecar]:
    s = Sidecar(tmp_path)
    yield s
    s.stop()


def audit_event(user: str, name: str, uid: str, rv: str) -> dict:
    return {
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "auditID": f"py-{name}-{rv}", "stage": "ResponseComplete",
        "verb": "update", "user": {"username": user},
        "objectRef": {"resource": "configmaps", "namespace": "ns", "name": name, "apiVersion": "v1"},
        "responseStatus": {"code": 200},
        "responseObject": {"metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv}},
        "stageTimestamp": "2026-11-29T12:00:00.000000Z",
    }


def resolve(pb, stub, name: str, uid: str, rv: str):
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv}}
    return stub.Resolve(
        pb.ResolveRequest(
            type=pb.TypeRef(route="lab", version="v1", resource="configmaps"),
            event_type="MODIFIED",
            object_json=json.dumps(obj).encode(),
        ),
        timeout=10,
    )


@pytest.mark.parametrize("form", ["unix:///ABS", "unix:ABS", "unix:REL"])
def test_a_stock_grpc_client_resolves_over_the_socket(sidecar: Sidecar, stubs, form: str, monkeypatch) -> None:
    pb, rpc = stubs
    status, body = sidecar.post({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": [
        audit_event("alice", "one", "u-1", "5"), audit_event("bob", "two", "u-2", "6"),
    ]})
    assert status == 200, body
    if form == "unix:REL":
        monkeypatch.chdir(sidecar.dir)
    target = {"unix:///ABS": f"unix://{sidecar.socket}", "unix:ABS": f"unix:{sidecar.socket}", "unix:REL": "unix:reverser.sock"}[form]
    with grpc.insecure_channel(target) as channel:
        stub = rpc.AttributionStub(channel)
        # Twice on one channel: the second request names the authority by
        # its HPACK index, so the rewritten value must be the one indexed.
        for name, uid, rv, author in [("one", "u-1", "5", "alice"), ("two", "u-2", "6", "bob"), ("one", "u-1", "5", "alice")]:
            r = resolve(pb, stub, name, uid, rv)
            assert (r.action, r.tier, r.author) == ("write", "exact", author)
        refs = stub.Acquire(pb.FollowRequest(route="lab", resource="secrets"), timeout=10)
        assert refs.refs == 1
        e = stub.Explain(pb.ExplainRequest(type=pb.TypeRef(route="lab", version="v1", resource="configmaps"), namespace="ns", name="one", uid="u-1", resource_version="5"), timeout=10)
        assert e.winner_tier == "exact"


def test_bad_input_from_a_stock_client_is_invalid_argument(sidecar: Sidecar, stubs) -> None:
    pb, rpc = stubs
    with grpc.insecure_channel(f"unix://{sidecar.socket}") as channel:
        stub = rpc.AttributionStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.Resolve(pb.ResolveRequest(type=pb.TypeRef(route="lab", version="v1", resource="configmaps"), event_type="RENAMED"), timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_method_the_socket_does_not_serve_is_unimplemented(sidecar: Sidecar) -> None:
    # The socket's server routes by path itself (not tonic's router): a
    # method or service it does not have must still be a gRPC status.
    with grpc.insecure_channel(f"unix://{sidecar.socket}") as channel:
        for path in ["/reverser.v1.Attribution/Rename", "/reverser.v2.Attribution/Resolve", "/other.Service/Call"]:
            with pytest.raises(grpc.RpcError) as err:
                channel.unary_unary(path)(b"", timeout=10)
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED, path
