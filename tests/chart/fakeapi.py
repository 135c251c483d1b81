"""A fake Kubernetes API server for running the chart's mirror containers:
the real wire format over HTTP (legacy discovery, get, list, watch as a
chunked stream of events, create, merge patch), custom resources checked
against the vendored CRD schemas, and a log of every resource request as the
authorizer sees it (verb, group, resource, namespace, name), so a test can
hold the requests against the chart's RBAC (see `Rbac`)."""

from __future__ import annotations

import copy
import dataclasses
import http.server
import json
import pathlib
import queue
import threading
import urllib.parse
from typing import Any, Iterator

import jsonschema
import yaml

CRDS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "testkit" / "fixtures" / "crds" / "gitops-reverser"


@dataclasses.dataclass(frozen=True)
class ApiType:
    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...] = ("get", "list", "watch", "create", "update", "patch", "delete")

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclasses.dataclass(frozen=True)
class Request:
    """A resource request as the RBAC authorizer sees it."""

    verb: str
    group: str
    resource: str
    namespace: str | None
    name: str | None


def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(group, plural) -> the v1alpha3 openAPIV3Schema of each vendored CRD."""
    out = {}
    for f in sorted(CRDS.glob("*.yaml")):
        for crd in yaml.safe_load_all(f.read_text()):
            if not crd:
                continue
            for v in crd["spec"]["versions"]:
                if v["name"] == "v1alpha3":
                    out[(crd["spec"]["group"], crd["spec"]["names"]["plural"])] = v["schema"]["openAPIV3Schema"]
    return out


class FakeApi:
    def __init__(self, types: list[ApiType]) -> None:
        self.types = types
        self.schemas = crd_schemas()
        self.objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}
        self.requests: list[Request] = []
        self.revision = 100
        self.lock = threading.Lock()
        self.watches: list[tuple[ApiType, str | None, queue.Queue]] = []
        self.stopping = threading.Event()
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                api.handle(self, "GET")

            def do_POST(self) -> None:
                api.handle(self, "POST")

            def do_PATCH(self) -> None:
                api.handle(self, "PATCH")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # -- the test's side ----------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, path: pathlib.Path) -> pathlib.Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "mirror", "user": {}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "mirror"}}],
        }))
        return path

    def __enter__(self) -> FakeApi:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def type_of(self, group: str, resource: str) -> ApiType:
        return next(t for t in self.types if t.group == group and t.resource == resource)

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Stores an object as a write would, and tells the watches."""
        group, _, version = obj["apiVersion"].rpartition("/")
        t = next(t for t in self.types if t.group == group and t.version == version and t.kind == obj["kind"])
        schema = self.schemas.get((group, t.resource))
        if schema:
            # Fixtures are only worth something if the real API would take them.
            jsonschema.validate(obj, schema)
        with self.lock:
            self.revision += 1
            obj = copy.deepcopy(obj)
            meta = obj["metadata"]
            key = (meta.get("namespace", "") if t.namespaced else "", meta["name"])
            store = self.objects.setdefault((group, t.resource), {})
            event = "MODIFIED" if key in store else "ADDED"
            meta["resourceVersion"] = str(self.revision)
            meta.setdefault("uid", f"00000000-0000-4000-8000-{self.revision:012d}")
            meta.setdefault("creationTimestamp", "2026-12-01T00:00:00Z")
            store[key] = obj
            for wt, ns, q in self.watches:
                if wt == t and ns in (None, key[0]):
                    q.put({"type": event, "object": obj})
        return obj

    def get(self, group: str, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            return copy.deepcopy(self.objects.get((group, resource), {}).get((namespace, name)))

    # -- the server's side --------------------------------------------------

    def discovery(self, path: str) -> dict[str, Any] | None:
        groups: dict[str, list[str]] = {}
        for t in self.types:
            groups.setdefault(t.group, [])
            if t.version not in groups[t.group]:
                groups[t.group].append(t.version)
        if path == "/api":
            return {"kind": "APIVersions", "versions": groups.get("", []),
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                 "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}}
                for g, vs in groups.items() if g
            ]}
        parts = path.strip("/").split("/")
        if (parts[0] == "api" and len(parts) == 2) or (parts[0] == "apis" and len(parts) == 3):
            group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
            return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}" if group else version,
                    "resources": [{"name": t.resource, "singularName": "", "namespaced": t.namespaced, "kind": t.kind,
                                   "verbs": list(t.verbs)} for t in self.types if (t.group, t.version) == (group, version)]}
        return None

    def route(self, path: str) -> tuple[ApiType, str | None, str | None] | None:
        """(type, namespace, name) of a resource path."""
        parts = path.strip("/").split("/")
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) > 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        resource, name = rest[0], (rest[1] if len(rest) > 1 else None)
        for t in self.types:
            if (t.group, t.version, t.resource) == (group, version, resource):
                return t, namespace, name
        return None

    def handle(self, h: http.server.BaseHTTPRequestHandler, method: str) -> None:
        url = urllib.parse.urlsplit(h.path)
        query = urllib.parse.parse_qs(url.query)
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        found = self.discovery(url.path)
        if found is not None:
            return self.reply(h, 200, found)
        routed = self.route(url.path)
        if routed is None:
            return self.reply(h, 404, self.status(404, "NotFound", f"the server could not find {url.path}"))
        t, namespace, name = routed
        watching = query.get("watch", [""])[0] in ("true", "1")
        verb = {"GET": "watch" if watching else ("get" if name else "list"), "POST": "create", "PATCH": "patch"}[method]
        with self.lock:
            self.requests.append(Request(verb, t.group, t.resource, namespace, name))
        store_ns = namespace or ""
        if verb == "get":
            obj = self.get(t.group, t.resource, store_ns, name)
            if obj is None:
                return self.reply(h, 404, self.status(404, "NotFound", f'{t.resource} "{name}" not found'))
            return self.reply(h, 200, obj)
        if verb == "list":
            with self.lock:
                items = [copy.deepcopy(o) for (ns, _), o in sorted(self.objects.get((t.group, t.resource), {}).items())
                         if namespace is None or ns == namespace]
                revision = str(self.revision)
            return self.reply(h, 200, {"apiVersion": t.api_version, "kind": f"{t.kind}List",
                                       "metadata": {"resourceVersion": revision}, "items": items})
        if verb == "watch":
            return self.stream(h, t, namespace)
        if verb == "create":
            obj = json.loads(body)
            obj.setdefault("apiVersion", t.api_version)
            obj.setdefault("kind", t.kind)
            obj["metadata"]["namespace"] = namespace
            if self.get(t.group, t.resource, store_ns, obj["metadata"]["name"]) is not None:
                return self.reply(h, 409, self.status(409, "AlreadyExists", f'{t.resource} "{obj["metadata"]["name"]}" already exists'))
            return self.reply(h, 201, self.put(obj))
        if verb == "patch":
            obj = self.get(t.group, t.resource, store_ns, name)
            if obj is None:
                return self.reply(h, 404, self.status(404, "NotFound", f'{t.resource} "{name}" not found'))
            assert h.headers["Content-Type"] == "application/merge-patch+json", h.headers["Content-Type"]
            return self.reply(h, 200, self.put(merge_patch(obj, json.loads(body))))

    def stream(self, h: http.server.BaseHTTPRequestHandler, t: ApiType, namespace: str | None) -> None:
        q: queue.Queue = queue.Queue()
        with self.lock:
            self.watches.append((t, namespace, q))
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        try:
            while not self.stopping.is_set():
                try:
                    event = q.get(timeout=0.1)
                except queue.Empty:
                    continue
                line = json.dumps(event).encode() + b"\n"
                h.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                h.wfile.flush()
            h.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
        finally:
            with self.lock:
                self.watches.remove((t, namespace, q))

    @staticmethod
    def status(code: int, reason: str, message: str) -> dict[str, Any]:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": reason, "code": code}

    @staticmethod
    def reply(h: http.server.BaseHTTPRequestHandler, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class Rbac:
    """The RBAC authorizer over rendered objects, for one ServiceAccount:
    RoleBindings grant their Role (or ClusterRole) in their namespace only,
    ClusterRoleBindings everywhere; a rule with resourceNames matches only
    requests naming one of them, so never a create or a list."""

    def __init__(self, objects: list[dict[str, Any]], namespace: str, name: str) -> None:
        subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
        roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
                 for o in objects if o["kind"] in ("Role", "ClusterRole")}
        # (where the grant applies: a namespace, or None for everywhere; the role)
        self.grants: list[tuple[str | None, dict[str, Any]]] = []
        for b in objects:
            if b["kind"] not in ("RoleBinding", "ClusterRoleBinding") or subject not in b.get("subjects", []):
                continue
            where = b["metadata"].get("namespace") if b["kind"] == "RoleBinding" else None
            ref = b["roleRef"]
            role_ns = where if ref["kind"] == "Role" else None
            self.grants.append((where, roles[(ref["kind"], role_ns, ref["name"])]))

    def rules(self) -> Iterator[tuple[str | None, str, dict[str, Any]]]:
        """(where it applies, "Kind namespace/name" of its role, rule)."""
        for where, role in self.grants:
            for rule in role["rules"]:
                yield where, f"{role['kind']} {role['metadata'].get('namespace') or ''}/{role['metadata']['name']}", rule

    def cells(self) -> set[tuple[str, str, str, str, str | None]]:
        """Everything granted, one permission at a time: (role, verb, group,
        resource, resource name or None for any)."""
        return {
            (role, verb, group, resource, name)
            for _, role, rule in self.rules()
            for verb in rule["verbs"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for name in rule.get("resourceNames") or [None]
        }

    def allowing(self, r: Request) -> set[tuple[str, str, str, str, str | None]]:
        """The granted cells that allow `r` (empty: RBAC forbids it)."""
        out = set()
        for where, role, rule in self.rules():
            if where is not None and r.namespace != where:
                continue
            if r.verb in rule["verbs"] and r.group in rule["apiGroups"] and r.resource in rule["resources"]:
                names = rule.get("resourceNames")
                if not names:
                    out.add((role, r.verb, r.group, r.resource, None))
                elif r.name is not None and r.name in names:
                    out.add((role, r.verb, r.group, r.resource, r.name))
        return out
